// SPDX-License-Identifier: GPL-2.0

//! An object tree of the loop provider, opened the way a ULP opens one:
//! getinfo, fabric, domain, two CQs, an endpoint bound to them. Dropping it
//! closes everything, children first.

use kernel::{prelude::*, str::CStrExt, ThisModule};

use crate::kfi::{kfabric::*, kfi_sys as sys};

/// A CQ attribute set.
pub(crate) fn cq_attr(size: usize, format: u32) -> sys::kfi_cq_attr {
    sys::kfi_cq_attr {
        size,
        format,
        ..Default::default()
    }
}

/// Fields drop in order: the endpoint before what it is bound to, the
/// domain before the fabric.
pub(crate) struct Tree {
    pub(crate) ep: Option<Owned<sys::kfid_ep>>,
    pub(crate) tx: Owned<sys::kfid_cq>,
    pub(crate) rx: Owned<sys::kfid_cq>,
    pub(crate) domain: Owned<sys::kfid_domain>,
    pub(crate) fabric: Owned<sys::kfid_fabric>,
    pub(crate) _info: InfoList,
}

impl Tree {
    /// Opens a tree of the loop provider (the endpoint bound to both CQs,
    /// not enabled).
    pub(crate) fn new(_module: &'static ThisModule) -> Result<Self> {
        // SAFETY: No arguments; NULL or a fresh entry.
        let hints = unsafe { sys::kfi_allocinfo() };
        if hints.is_null() {
            return Err(ENOMEM);
        }
        // SAFETY: A fresh entry. The name is a static string the caller
        // keeps: kfi_freeinfo must not free it.
        let info = unsafe {
            (*(*hints).fabric_attr).prov_name = c"kfi_test_loop".as_char_ptr().cast_mut();
            let r = getinfo(Some(Info::new(&*hints)), 0);
            sys::kfi_freeinfo(hints);
            r?
        };
        let fi = info.first();
        // SAFETY: `fi` is a valid entry of `info`.
        let fabric = Owned::open(|o| unsafe {
            sys::kfi_fabric((*fi).fabric_attr, o, core::ptr::null_mut())
        })?;
        // SAFETY: Open fabric, valid entry.
        let domain = Owned::open(|o| unsafe {
            sys::kfi_domain(fabric.as_ptr(), fi, o, core::ptr::null_mut())
        })?;
        let mut a = cq_attr(16, sys::KFI_CQ_FORMAT_DATA);
        // SAFETY: Open domain, valid attributes.
        let tx = Owned::open(|o| unsafe {
            sys::kfi_cq_open(domain.as_ptr(), &mut a, o, core::ptr::null_mut())
        })?;
        // SAFETY: Open domain, valid attributes; `a` outlives the call.
        let rx = Owned::open(|o| unsafe {
            sys::kfi_cq_open(domain.as_ptr(), &mut a, o, core::ptr::null_mut())
        })?;
        // SAFETY: Open domain, valid entry.
        let ep = Owned::open(|o| unsafe {
            sys::kfi_endpoint(domain.as_ptr(), fi, o, core::ptr::null_mut())
        })?;
        // SAFETY: Open objects.
        kernel::error::to_result(unsafe {
            sys::kfi_ep_bind(ep.as_ptr(), tx.fid(), sys::KFI_TRANSMIT)
        })?;
        // SAFETY: Open objects.
        kernel::error::to_result(unsafe {
            sys::kfi_ep_bind(ep.as_ptr(), rx.fid(), sys::KFI_RECV)
        })?;
        Ok(Self {
            ep: Some(ep),
            tx,
            rx,
            domain,
            fabric,
            _info: info,
        })
    }

    /// The endpoint (present until a test closes it).
    pub(crate) fn ep(&self) -> Result<*mut sys::kfid_ep> {
        self.ep.as_ref().map(|e| e.as_ptr()).ok_or(EINVAL)
    }
}
