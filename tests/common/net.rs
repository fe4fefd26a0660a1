// SPDX-License-Identifier: GPL-2.0

//! Helpers for modules that drive a provider over loopback the way a ULP
//! does (the kfi_sockets suites and the demo): getinfo for an address, a
//! fabric/domain/EQ, bound endpoints, a listener, events and messages.
//! Included with `#[path]` next to `kfi` (kfi/api/mod.rs).

use core::ffi::CStr;
use kernel::{bindings, prelude::*};

use super::kfi::{
    kfabric::*,
    kfi_sys as sys,
    ulp::{open_fabric, ConnReq, Hints},
};

pub(crate) const WAIT_MS: i32 = 20000;
pub(crate) const CM: usize = size_of::<sys::kfi_eq_cm_entry>();

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
    let mut h = Hints::provider(prov)?;
    // SAFETY: The hints' own attributes, allocated with the entry, are
    // written; no pointer of the entry changes.
    unsafe {
        let hi = h.get();
        (*hi.domain_attr).net = ns;
        (*hi.ep_attr).type_ = ep_type;
    }
    let src = h.getinfo(host, port, sys::KFI_SOURCE)?;
    let dst = h.getinfo(host, port, 0)?;
    let fabric = open_fabric(src.entry())?;
    let domain = fabric.open_domain(src.entry())?;
    let eq = fabric.open_eq_sized(16)?;
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
    n.domain.open_cq_sized(size, format)
}

/// An endpoint for `info`, bound to `cq` both ways and to the EQ.
pub(crate) fn endpoint(
    n: &Net,
    info: *mut sys::kfi_info,
    cq: &Owned<sys::kfid_cq>,
) -> Result<Owned<sys::kfid_ep>> {
    endpoint_with(n, info, cq, &n.eq)
}

/// An RDM endpoint of `n` on its source address, bound to `cq` both ways
/// and to `av`.
pub(crate) fn rdm_endpoint(
    n: &Net,
    cq: &Owned<sys::kfid_cq>,
    av: &Owned<sys::kfid_av>,
) -> Result<Owned<sys::kfid_ep>> {
    endpoint_with(n, n.src.first(), cq, av)
}

/// The source entries of provider `prov` at `host`:`port` for endpoints
/// of `ep_type`, in the initial network namespace: another address for
/// endpoints of an open [`Net`] of the same provider.
pub(crate) fn source_info(prov: &CStr, host: &CStr, port: &CStr, ep_type: u32) -> Result<InfoList> {
    let mut h = Hints::provider(prov)?;
    // SAFETY: The hints' own attributes, allocated with the entry, are
    // written; no pointer of the entry changes.
    unsafe { (*h.get().ep_attr).type_ = ep_type };
    h.getinfo(host, port, sys::KFI_SOURCE)
}

/// An RDM endpoint of `n` on the source address of `info` (from
/// [`source_info`]), bound to `cq` both ways and to `av`.
pub(crate) fn rdm_endpoint_on(
    n: &Net,
    info: &InfoList,
    cq: &Owned<sys::kfid_cq>,
    av: &Owned<sys::kfid_av>,
) -> Result<Owned<sys::kfid_ep>> {
    endpoint_with(n, info.first(), cq, av)
}

/// An enabled endpoint for `info`, bound to `cq` both ways and to `with`
/// (an EQ or an AV, open).
fn endpoint_with<T: KfiObject>(
    n: &Net,
    info: *mut sys::kfi_info,
    cq: &Owned<sys::kfid_cq>,
    with: &Owned<T>,
) -> Result<Owned<sys::kfid_ep>> {
    // SAFETY: `info` is a valid entry kfabric.ko made (a getinfo list's
    // or a request's), unchanged.
    let info = unsafe { Info::new(info.as_ref().ok_or(EINVAL)?) };
    let ep = n.domain.open_ep(info)?;
    ep.bind(cq, sys::KFI_TRANSMIT | sys::KFI_RECV)?;
    ep.bind(with, 0)?;
    ep.enable()?;
    Ok(ep)
}

pub(crate) fn listen(n: &Net) -> Result<Owned<sys::kfid_pep>> {
    let pep = n.fabric.open_pep(n.src.entry())?;
    pep.listen_on(&n.eq)?;
    Ok(pep)
}

/// Waits for the next event: (event, entry bytes).
pub(crate) fn event(n: &Net) -> Result<(u32, [u8; CM + 256], usize)> {
    let mut buf = [0u8; CM + 256];
    let mut ev = 0u32;
    let r = n.eq.read_event(&mut ev, &mut buf, Some(WAIT_MS));
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

/// The C return value of `r`: 0 or a negative errno.
pub(crate) fn rc(r: Result) -> core::ffi::c_int {
    r.err().map_or(0, |e| e.to_errno())
}

pub(crate) fn sread(cq: &Owned<sys::kfid_cq>, e: &mut sys::kfi_cq_data_entry) -> isize {
    cq.sread_data(e, WAIT_MS)
}

/// The connection request of a `KFI_CONNREQ` event's bytes `buf` (read
/// from the EQ by [`event`]), owned: its entry is freed when dropped.
pub(crate) fn take_req(buf: &[u8]) -> Result<ConnReq> {
    // SAFETY: The event was read by `event` without KFI_PEEK and its
    // bytes are handed over once (the caller's buffer is not reused).
    unsafe { ConnReq::adopt(cm_entry(buf).info) }.ok_or(EPROTO)
}

/// An endpoint of `n` for the request `req`, bound to `cq` and the EQ.
pub(crate) fn endpoint_for(
    n: &Net,
    req: &ConnReq,
    cq: &Owned<sys::kfid_cq>,
) -> Result<Owned<sys::kfid_ep>> {
    endpoint_with(n, req.info().as_ptr(), cq, &n.eq)
}

/// Accepts the request of the `KFI_CONNREQ` event bytes `buf` (read by
/// [`event`]) on a new endpoint of `n` bound to `cq`, with no private data.
pub(crate) fn accept_req(
    n: &Net,
    buf: &[u8],
    cq: &Owned<sys::kfid_cq>,
) -> Result<Owned<sys::kfid_ep>> {
    let req = take_req(buf)?;
    let ep = endpoint_for(n, &req, cq)?;
    drop(req);
    ep.accept(&[])?;
    Ok(ep)
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
    cep.connect(&[])?;
    let (ev, buf, _) = event(s)?;
    if ev != sys::KFI_CONNREQ {
        return Err(EPROTO);
    }
    let sep = accept_req(s, &buf, scq)?;
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
    if n.eq.readerr(&mut err) != 1 {
        return Err(EPROTO);
    }
    Ok(err)
}
