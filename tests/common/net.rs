// SPDX-License-Identifier: GPL-2.0

//! Helpers for modules that drive a provider over loopback the way a ULP
//! does (the kfi_sockets suites and the demo): getinfo for an address, a
//! fabric/domain/EQ, bound endpoints, a listener, events and messages.
//! Included with `#[path]` next to `kfi` (kfi/api/mod.rs).

use core::ffi::CStr;
use kernel::{bindings, prelude::*};

use super::kfi::{kfabric::*, kfi_sys as sys};

pub(crate) const WAIT_MS: i32 = 20000;
pub(crate) const CM: usize = size_of::<sys::kfi_eq_cm_entry>();

/// Hints that select one provider by name.
pub(crate) struct Hints(*mut sys::kfi_info);

impl Hints {
    pub(crate) fn sockets() -> Result<Self> {
        Self::named(c"sockets")
    }

    pub(crate) fn named(prov: &CStr) -> Result<Self> {
        // SAFETY: No arguments.
        let p = unsafe { sys::kfi_allocinfo() };
        if p.is_null() {
            return Err(ENOMEM);
        }
        let h = Self(p);
        // SAFETY: An entry of kfabric.ko's; the name is copied.
        kernel::error::to_result(unsafe {
            sys::kfi_info_set(p, sys::KFI_INFO_PROV_NAME, prov.as_char_ptr().cast(), 0)
        })?;
        Ok(h)
    }

    pub(crate) fn get(&self) -> &sys::kfi_info {
        // SAFETY: A valid entry owned by `self`.
        unsafe { &*self.0 }
    }
}

impl Drop for Hints {
    fn drop(&mut self) {
        // SAFETY: Made by kfi_allocinfo, freed once.
        unsafe { sys::kfi_freeinfo(self.0) };
    }
}

/// One fabric, domain and EQ for a test or demo.
/// Fields drop in order: children before the fabric.
pub(crate) struct Net {
    pub(crate) eq: Owned<sys::kfid_eq>,
    pub(crate) domain: Owned<sys::kfid_domain>,
    pub(crate) fabric: Owned<sys::kfid_fabric>,
    pub(crate) src: InfoList,
    pub(crate) dst: InfoList,
}

/// A fabric, domain and EQ of the sockets provider, with the infos of
/// 127.0.0.1:`port` as source and destination.
pub(crate) fn net(port: &CStr) -> Result<Net> {
    net_at(c"127.0.0.1", port)
}

/// As [`net`], for `host`:`port`.
pub(crate) fn net_at(host: &CStr, port: &CStr) -> Result<Net> {
    net_on(c"sockets", host, port)
}

/// A fabric, domain and EQ of provider `prov`, with the infos of
/// `host`:`port` as source and destination.
pub(crate) fn net_on(prov: &CStr, host: &CStr, port: &CStr) -> Result<Net> {
    net_in(prov, host, port, core::ptr::null_mut())
}

/// As [`net_on`], in network namespace `ns` (NULL: the initial one; the
/// caller keeps it alive while the returned side is open).
pub(crate) fn net_in(prov: &CStr, host: &CStr, port: &CStr, ns: *mut bindings::net) -> Result<Net> {
    net_typed(prov, host, port, ns, sys::KFI_EP_UNSPEC)
}

/// As [`net_in`], for endpoints of `ep_type` (`KFI_EP_UNSPEC`: any).
pub(crate) fn net_typed(
    prov: &CStr,
    host: &CStr,
    port: &CStr,
    ns: *mut bindings::net,
    ep_type: u32,
) -> Result<Net> {
    let h = Hints::named(prov)?;
    // SAFETY: The hints' own attributes.
    unsafe {
        (*h.get().domain_attr).net = ns;
        (*h.get().ep_attr).type_ = ep_type;
    }
    let src = getinfo_at(host, port, sys::KFI_SOURCE, Some(h.get()))?;
    let dst = getinfo_at(host, port, 0, Some(h.get()))?;
    let fi = src.first();
    // SAFETY: A valid entry.
    let fabric =
        Owned::open(|o| unsafe { sys::kfi_fabric((*fi).fabric_attr, o, core::ptr::null_mut()) })?;
    // SAFETY: Open fabric, valid entry.
    let domain =
        Owned::open(|o| unsafe { sys::kfi_domain(fabric.as_ptr(), fi, o, core::ptr::null_mut()) })?;
    let mut a = sys::kfi_eq_attr {
        size: 16,
        ..Default::default()
    };
    // SAFETY: Open fabric, valid attributes.
    let eq = Owned::open(|o| unsafe {
        sys::kfi_eq_open(fabric.as_ptr(), &mut a, o, core::ptr::null_mut())
    })?;
    Ok(Net {
        eq,
        domain,
        fabric,
        src,
        dst,
    })
}

pub(crate) fn cq(n: &Net) -> Result<Owned<sys::kfid_cq>> {
    cq_sized(n, 16)
}

/// A DATA-format CQ of `size` entries.
pub(crate) fn cq_sized(n: &Net, size: usize) -> Result<Owned<sys::kfid_cq>> {
    cq_format(n, size, sys::KFI_CQ_FORMAT_DATA)
}

/// A CQ of `size` entries in `format`.
pub(crate) fn cq_format(n: &Net, size: usize, format: u32) -> Result<Owned<sys::kfid_cq>> {
    let mut a = sys::kfi_cq_attr {
        size,
        format,
        ..Default::default()
    };
    // SAFETY: Open domain, valid attributes.
    Owned::open(|o| unsafe {
        sys::kfi_cq_open(n.domain.as_ptr(), &mut a, o, core::ptr::null_mut())
    })
}

/// An endpoint for `info`, bound to `cq` both ways and to the EQ.
pub(crate) fn endpoint(
    n: &Net,
    info: *mut sys::kfi_info,
    cq: &Owned<sys::kfid_cq>,
) -> Result<Owned<sys::kfid_ep>> {
    endpoint_with(n, info, cq, n.eq.fid())
}

/// An RDM endpoint of `n` on its source address, bound to `cq` both ways
/// and to `av`.
pub(crate) fn rdm_endpoint(
    n: &Net,
    cq: &Owned<sys::kfid_cq>,
    av: &Owned<sys::kfid_av>,
) -> Result<Owned<sys::kfid_ep>> {
    endpoint_with(n, n.src.first(), cq, av.fid())
}

/// An enabled endpoint for `info`, bound to `cq` both ways and to `with`
/// (an EQ or an AV, open).
fn endpoint_with(
    n: &Net,
    info: *mut sys::kfi_info,
    cq: &Owned<sys::kfid_cq>,
    with: *mut sys::kfid,
) -> Result<Owned<sys::kfid_ep>> {
    // SAFETY: Open domain, valid entry.
    let ep = Owned::open(|o| unsafe {
        sys::kfi_endpoint(n.domain.as_ptr(), info, o, core::ptr::null_mut())
    })?;
    // SAFETY: Open objects.
    unsafe {
        kernel::error::to_result(sys::kfi_ep_bind(
            ep.as_ptr(),
            cq.fid(),
            sys::KFI_TRANSMIT | sys::KFI_RECV,
        ))?;
        kernel::error::to_result(sys::kfi_ep_bind(ep.as_ptr(), with, 0))?;
        kernel::error::to_result(sys::kfi_enable(ep.as_ptr()))?;
    }
    Ok(ep)
}

pub(crate) fn listen(n: &Net) -> Result<Owned<sys::kfid_pep>> {
    // SAFETY: Open fabric, valid entry.
    let pep = Owned::open(|o| unsafe {
        sys::kfi_passive_ep(n.fabric.as_ptr(), n.src.first(), o, core::ptr::null_mut())
    })?;
    // SAFETY: Open objects.
    unsafe {
        kernel::error::to_result(sys::kfi_pep_bind(pep.as_ptr(), n.eq.fid(), 0))?;
        kernel::error::to_result(sys::kfi_listen(pep.as_ptr()))?;
    }
    Ok(pep)
}

/// Waits for the next event: (event, entry bytes).
pub(crate) fn event(n: &Net) -> Result<(u32, [u8; CM + 256], usize)> {
    let mut buf = [0u8; CM + 256];
    let mut ev = 0u32;
    // SAFETY: Open EQ; `buf` is large enough for any event.
    let r = unsafe {
        sys::kfi_eq_sread(
            n.eq.as_ptr(),
            &mut ev,
            buf.as_mut_ptr().cast(),
            buf.len(),
            WAIT_MS,
            0,
        )
    };
    if r < 0 {
        return Err(Error::from_errno(r as i32));
    }
    Ok((ev, buf, r as usize))
}

pub(crate) fn cm_entry(buf: &[u8]) -> sys::kfi_eq_cm_entry {
    // SAFETY: A CM event starts with a kfi_eq_cm_entry (read unaligned).
    unsafe { buf.as_ptr().cast::<sys::kfi_eq_cm_entry>().read_unaligned() }
}

/// A one-buffer kvec message (the safe API's builder).
#[allow(unused_imports)]
pub(crate) use crate::kfi::ulp::msg;

pub(crate) fn kvec_mut(b: &mut [u8]) -> bindings::kvec {
    bindings::kvec {
        iov_base: b.as_mut_ptr().cast(),
        iov_len: b.len(),
    }
}

pub(crate) fn kvec(b: &[u8]) -> bindings::kvec {
    bindings::kvec {
        iov_base: b.as_ptr().cast_mut().cast(),
        iov_len: b.len(),
    }
}

pub(crate) fn sread(cq: &Owned<sys::kfid_cq>, e: &mut sys::kfi_cq_data_entry) -> isize {
    // SAFETY: Open CQ of DATA format, one entry of room.
    unsafe {
        sys::kfi_cq_sread(
            cq.as_ptr(),
            core::ptr::from_mut(e).cast(),
            1,
            core::ptr::null(),
            WAIT_MS,
        )
    }
}

/// A client endpoint connected to a server endpoint through the listener
/// of `n` (no private data), both connected events consumed: (client,
/// server).
pub(crate) fn connected_pair(
    n: &Net,
    ccq: &Owned<sys::kfid_cq>,
    scq: &Owned<sys::kfid_cq>,
) -> Result<(Owned<sys::kfid_ep>, Owned<sys::kfid_ep>)> {
    connect_to(n, n, ccq, scq)
}

/// A new client endpoint on `c` connected to the listener of `s`; both
/// connected events consumed: (client, server).
pub(crate) fn connect_to(
    c: &Net,
    s: &Net,
    ccq: &Owned<sys::kfid_cq>,
    scq: &Owned<sys::kfid_cq>,
) -> Result<(Owned<sys::kfid_ep>, Owned<sys::kfid_ep>)> {
    let cep = endpoint(c, c.dst.first(), ccq)?;
    // SAFETY: An open, bound endpoint.
    let ret = unsafe { sys::kfi_connect(cep.as_ptr(), core::ptr::null(), core::ptr::null(), 0) };
    kernel::error::to_result(ret)?;
    let (ev, buf, _) = event(s)?;
    if ev != sys::KFI_CONNREQ {
        return Err(EPROTO);
    }
    let req = cm_entry(&buf);
    let sep = endpoint(s, req.info, scq);
    // SAFETY: The request's info is ours to free.
    unsafe { sys::kfi_freeinfo(req.info) };
    let sep = sep?;
    // SAFETY: An open endpoint made for the request.
    let ret = unsafe { sys::kfi_accept(sep.as_ptr(), core::ptr::null(), 0) };
    kernel::error::to_result(ret)?;
    // One event on each side (both on the one EQ when `c` is `s`).
    if event(s)?.0 != sys::KFI_CONNECTED || event(c)?.0 != sys::KFI_CONNECTED {
        return Err(EPROTO);
    }
    Ok((cep, sep))
}

/// Waits for an event of `n` that must be an error: its entry.
pub(crate) fn eq_error(n: &Net) -> Result<sys::kfi_eq_err_entry> {
    match event(n) {
        Err(e) if e.to_errno() == -(sys::KFI_EAVAIL as i32) => {}
        _ => return Err(EPROTO),
    }
    let mut err = sys::kfi_eq_err_entry::default();
    // SAFETY: Open EQ, writable entry.
    if unsafe { sys::kfi_eq_readerr(n.eq.as_ptr(), &mut err, 0) } != 1 {
        return Err(EPROTO);
    }
    Ok(err)
}
