// SPDX-License-Identifier: GPL-2.0

//! The `kfi_info` entries a provider lists (getinfo, connection requests).

use core::{ffi::CStr, ptr::NonNull};
use kernel::{error::to_result, prelude::*, str::CStrExt};

use super::super::kfi_sys as sys;

/// One `kfi_info` entry a provider lists; freed if never handed out.
///
/// # Invariants
///
/// `ptr` was made by `kfi_allocinfo` and is owned by this value.
pub(crate) struct Info {
    ptr: NonNull<sys::kfi_info>,
}

impl Info {
    /// An empty entry.
    pub(crate) fn new() -> Result<Self> {
        // SAFETY: No arguments.
        let ptr = NonNull::new(unsafe { sys::kfi_allocinfo() }).ok_or(ENOMEM)?;
        // INVARIANT: fresh from kfi_allocinfo.
        Ok(Self { ptr })
    }

    /// The entry, to fill in; its attribute pointers must stay as they are.
    pub(crate) fn get(&mut self) -> &mut sys::kfi_info {
        // SAFETY: Owned and valid (type invariant).
        unsafe { self.ptr.as_mut() }
    }

    /// Attribute structures of the entry.
    pub(crate) fn attrs(
        &mut self,
    ) -> (
        &mut sys::kfi_tx_attr,
        &mut sys::kfi_rx_attr,
        &mut sys::kfi_ep_attr,
        &mut sys::kfi_domain_attr,
        &mut sys::kfi_fabric_attr,
    ) {
        let i = self.get();
        // SAFETY: The attributes of an entry from kfi_allocinfo are distinct
        // parts of its allocation.
        unsafe {
            (
                &mut *i.tx_attr,
                &mut *i.rx_attr,
                &mut *i.ep_attr,
                &mut *i.domain_attr,
                &mut *i.fabric_attr,
            )
        }
    }

    /// Sets the fabric and domain names (copied). Process context.
    pub(crate) fn set_names(&mut self, fabric: &CStr, domain: &CStr) -> Result {
        self.set(sys::KFI_INFO_FABRIC_NAME, fabric.as_char_ptr().cast(), 0)?;
        self.set(sys::KFI_INFO_DOMAIN_NAME, domain.as_char_ptr().cast(), 0)
    }

    /// Sets the source or destination address (copied). Process context.
    pub(crate) fn set_addr(&mut self, dest: bool, format: u32, addr: &[u8]) -> Result {
        let field = if dest {
            sys::KFI_INFO_DEST_ADDR
        } else {
            sys::KFI_INFO_SRC_ADDR
        };
        self.set(field, addr.as_ptr().cast(), addr.len())?;
        self.get().addr_format = format;
        Ok(())
    }

    /// `kfi_info_set` on this entry.
    fn set(&mut self, field: u32, val: *const c_void, len: usize) -> Result {
        // SAFETY: An entry of kfabric.ko's (type invariant); `val` is a
        // string or `len` bytes, copied before this returns.
        to_result(unsafe { sys::kfi_info_set(self.ptr.as_ptr(), field, val, len) })
    }

    /// Hands the entry over (to kfabric.ko or an EQ event).
    pub(crate) fn into_raw(self) -> *mut sys::kfi_info {
        let p = self.ptr.as_ptr();
        core::mem::forget(self);
        p
    }
}

impl Drop for Info {
    fn drop(&mut self) {
        // SAFETY: Owned (type invariant), freed once.
        unsafe { sys::kfi_freeinfo(self.ptr.as_ptr()) };
    }
}
