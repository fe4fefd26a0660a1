// SPDX-License-Identifier: GPL-2.0

//! Helpers of the suite: the device's entries, endpoints, connected pairs,
//! buffers, the rdma tool.

use crate::kfi::{
    kfi_sys as sys,
    ulp::{CmEvent, Cq, Domain, Endpoint, Eq, Fabric, Hints, Info},
};
use crate::{device, tamper};
use core::ffi::CStr;
use kernel::prelude::*;

/// The address of the RDMA device (`RDMA_LINK_ADDR` of rdma_link.sh).
pub(crate) const NODE: &CStr = c"10.99.0.1";

/// Longest wait for an event: connection setup on siw under TCG takes
/// well under a second; the margin absorbs a loaded host.
pub(crate) const WAIT_MS: i32 = 20_000;

/// The ibverbs entries for [`NODE`] at `port` (as source, to listen
/// and to open the domain, and as destination) and their fabric.
pub(crate) struct Side {
    pub(crate) src: crate::kfi::kfabric::InfoList,
    pub(crate) dst: crate::kfi::kfabric::InfoList,
    pub(crate) fabric: Fabric,
}

pub(crate) fn side(port: &CStr) -> Result<Side> {
    let hints = Hints::provider(c"ibverbs")?;
    let src = hints.getinfo(NODE, port, sys::KFI_SOURCE)?;
    let dst = hints.getinfo(NODE, port, 0)?;
    let fabric = Fabric::open(src.entry())?;
    Ok(Side { src, dst, fabric })
}

/// `r`, with the failing step named in the log.
pub(crate) fn step<T>(what: &str, r: Result<T>) -> Result<T> {
    r.inspect_err(|e| pr_err!("kfi_ibverbs test: {what}: {e:?}\n"))
}

pub(crate) fn endpoint<'a>(
    d: &'a Domain<'_>,
    info: Info<'_>,
    cq: &'a Cq<'_>,
    eq: &'a Eq<'_>,
) -> Result<Endpoint<'a>> {
    let ep = d.endpoint(info)?;
    ep.bind_cq(cq, sys::KFI_TRANSMIT | sys::KFI_RECV)?;
    ep.bind_eq(eq)?;
    ep.enable()?;
    Ok(ep)
}

/// The server side of a connect: waits for the request (its data must
/// be `want`), opens and accepts its endpoint, and waits until both
/// ends are connected.
pub(crate) fn serve<'a>(
    d: &'a Domain<'_>,
    eq: &'a Eq<'_>,
    cq: &'a Cq<'_>,
    want: &[u8],
) -> Result<Endpoint<'a>> {
    let CmEvent::ConnReq { req, data } = eq.sread(WAIT_MS)? else {
        return Err(EPROTO);
    };
    assert_eq!(data.as_bytes(), want);
    let sep = endpoint(d, req.info(), cq, eq)?;
    drop(req);
    sep.accept(&[])?;
    for _ in 0..2 {
        let CmEvent::Connected { .. } = eq.sread(WAIT_MS)? else {
            return Err(EPROTO);
        };
    }
    Ok(sep)
}

/// Connects a client and a server endpoint on one domain and runs `f`
/// with (client, server, client CQ, server CQ).
pub(crate) fn with_pair(
    port: &CStr,
    f: impl FnOnce(&Endpoint<'_>, &Endpoint<'_>, &Cq<'_>, &Cq<'_>) -> Result,
) -> Result {
    with_pair_domain(port, |_, cep, sep, ccq, scq| f(cep, sep, ccq, scq))
}

/// As [`with_pair`], with the domain both endpoints are on.
pub(crate) fn with_pair_domain(
    port: &CStr,
    f: impl FnOnce(&Domain<'_>, &Endpoint<'_>, &Endpoint<'_>, &Cq<'_>, &Cq<'_>) -> Result,
) -> Result {
    with_pair_eq(port, |d, cep, sep, ccq, scq, _| f(d, cep, sep, ccq, scq))
}

/// As [`with_pair_domain`], with the EQ both endpoints report to.
pub(crate) fn with_pair_eq(
    port: &CStr,
    f: impl FnOnce(&Domain<'_>, &Endpoint<'_>, &Endpoint<'_>, &Cq<'_>, &Cq<'_>, &Eq<'_>) -> Result,
) -> Result {
    let s = step("side", side(port))?;
    let d = s.fabric.domain(s.src.entry())?;
    let eq = s.fabric.eq(16)?;
    let _pep = s.fabric.listen(s.src.entry(), &eq)?;
    let (ccq, scq) = (d.cq(128)?, d.cq(128)?);
    let cep = endpoint(&d, s.dst.entry(), &ccq, &eq)?;
    cep.connect(&[])?;
    let sep = serve(&d, &eq, &scq, &[])?;
    f(&d, &cep, &sep, &ccq, &scq, &eq)
}

/// `len` bytes of a pattern that differs per `seed`.
pub(crate) fn pattern(len: usize, seed: u32) -> Result<KVVec<u8>> {
    let mut v = KVVec::with_capacity(len, GFP_KERNEL)?;
    let mut x = seed.wrapping_mul(2_654_435_761) | 1;
    for _ in 0..len {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        v.push((x >> 16) as u8, GFP_KERNEL)?;
    }
    Ok(v)
}

pub(crate) fn zeroed(len: usize) -> Result<KVVec<u8>> {
    let mut v = KVVec::with_capacity(len, GFP_KERNEL)?;
    v.resize(len, 0xee, GFP_KERNEL)?;
    Ok(v)
}

/// The longest message the provider advertises.
pub(crate) fn max_msg() -> Result<usize> {
    let s = side(c"7619")?;
    // SAFETY: An entry from getinfo has valid endpoint attributes.
    Ok(unsafe { (*s.src.entry().ep_attr).max_msg_size })
}

/// Runs `rdma link delete DEVICE` (the guest's rdma tool) and waits
/// for it: the device goes away under the provider.
pub(crate) fn delete_device() -> Result {
    let path = c"/usr/bin/rdma";
    let argv = [
        path.as_char_ptr().cast_mut(),
        c"link".as_char_ptr().cast_mut(),
        c"delete".as_char_ptr().cast_mut(),
        device().0.as_char_ptr().cast_mut(),
        core::ptr::null_mut(),
    ];
    let envp = [
        c"PATH=/usr/sbin:/usr/bin:/sbin:/bin"
            .as_char_ptr()
            .cast_mut(),
        core::ptr::null_mut(),
    ];
    // SAFETY: NUL-terminated strings and NULL-terminated arrays that
    // live until the helper has run (UMH_WAIT_PROC).
    let r = unsafe {
        kernel::bindings::call_usermodehelper(
            path.as_char_ptr(),
            argv.as_ptr().cast_mut(),
            envp.as_ptr().cast_mut(),
            kernel::bindings::UMH_WAIT_PROC as i32,
        )
    };
    if r != 0 {
        pr_err!("kfi_ibverbs test: rdma link delete: {r}\n");
        return Err(EIO);
    }
    Ok(())
}

/// `len` bytes of `buf` at its virtual address: the RMA address of a
/// region on this provider (`KFI_MR_VIRT_ADDR`).
pub(crate) fn addr_of(buf: &[u8], offset: usize) -> u64 {
    (buf.as_ptr() as u64).wrapping_add(offset as u64)
}

/// Waits for the server's error entry `want` (the client's shutdown,
/// or another endpoint's event, may come first).
pub(crate) fn expect_end(eq: &Eq<'_>, sep: &Endpoint<'_>, want: Error) -> Result {
    for _ in 0..4 {
        match eq.sread(WAIT_MS)? {
            CmEvent::Failed { fid, err, .. } if sep.is(fid) => {
                assert_eq!(err, want);
                return Ok(());
            }
            CmEvent::Shutdown { .. } | CmEvent::Failed { .. } => {}
            _ => return Err(EPROTO),
        }
    }
    Err(ETIMEDOUT)
}

// Frame flags of prov/ibverbs/frame.rs.
pub(crate) const F_CQ_DATA: u32 = 2;

pub(crate) const F_MORE: u32 = 4;

pub(crate) const F_RMA_DATA: u32 = 8;

pub(crate) const F_ACK_REQ: u32 = 16;

pub(crate) const F_ACKED: u32 = 32;

/// kfi_ibverbs' `response_timeout_ms`, as tests/guest/run-suites.sh loads
/// it for the suite.
pub(crate) const RESPONSE_TIMEOUT_MS: i64 = 5000;

/// The payload of a full frame.
pub(crate) const FRAME_MAX: usize = 4080;

/// Connects a pair on `port` whose server CQ has `scq_size` entries
/// and runs `f(client, server, client CQ, server CQ, EQ)`; the client
/// plays the hostile peer through the test-only tampering, which is
/// stopped afterwards whatever `f` returns.
pub(crate) fn hostile_pair(
    port: &CStr,
    scq_size: usize,
    f: impl FnOnce(&Endpoint<'_>, &Endpoint<'_>, &Cq<'_>, &Cq<'_>, &Eq<'_>) -> Result,
) -> Result {
    let s = step("side", side(port))?;
    let d = s.fabric.domain(s.src.entry())?;
    let eq = s.fabric.eq(16)?;
    let _pep = s.fabric.listen(s.src.entry(), &eq)?;
    let (ccq, scq) = (d.cq(128)?, d.cq(scq_size)?);
    let cep = endpoint(&d, s.dst.entry(), &ccq, &eq)?;
    cep.connect(&[])?;
    let sep = serve(&d, &eq, &scq, &[])?;
    let r = f(&cep, &sep, &ccq, &scq, &eq);
    // Fails only as the case's own tampering failed.
    let _ = tamper(0, 0, 0);
    r
}

/// Waits for the server's `EPROTO` error entry (the client's
/// shutdown may come first).
pub(crate) fn expect_eproto(eq: &Eq<'_>, sep: &Endpoint<'_>) -> Result {
    expect_end(eq, sep, EPROTO)
}

/// Sends `n` messages of `len` bytes from `msg`, waiting for send
/// completions when the credits run out; stops at the first error
/// (the connection ended).
pub(crate) fn send_many(cep: &Endpoint<'_>, ccq: &Cq<'_>, msg: &[u8], n: usize) {
    let mut i = 0;
    while i < n {
        // SAFETY: `msg` outlives the test case, so every completion.
        match unsafe { cep.send(msg, 1000 + i, 0) } {
            Ok(()) => i += 1,
            Err(e) if e == EAGAIN => {
                if ccq.sread(WAIT_MS).is_err() {
                    return;
                }
            }
            Err(_) => return,
        }
    }
}
