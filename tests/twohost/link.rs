// SPDX-License-Identifier: GPL-2.0

//! One side of a connection of the two-host topology (kfi_twohost.ko and
//! kfi_twohost_bench.ko, by source inclusion): the module parameters of
//! kfi_twohost_param.c, the server's accept and the client's connect (which
//! retries while the other guest still boots), posting and completions
//! with deadlines.

use core::ffi::CStr;
use kernel::{
    bindings,
    prelude::*,
    str::CString,
    time::{delay::fsleep, Delta, Instant, Monotonic},
};

use crate::{
    kfi::{kfabric::Owned, kfi_sys as sys},
    net::*,
};

extern "C" {
    fn kfi_twohost_role() -> *const u8;
    fn kfi_twohost_provider() -> *const u8;
    fn kfi_twohost_server_node() -> *const u8;
    fn kfi_twohost_port_base() -> c_int;
    fn kfi_twohost_wait_s() -> c_int;
}

/// The side of the cases this kernel runs.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    Server,
    Client,
}

pub(crate) fn role() -> Result<Role> {
    // SAFETY: A NUL-terminated module parameter that lives as long as the
    // module and is read-only after load.
    let r = unsafe { CStr::from_char_ptr(kfi_twohost_role()) };
    match r.to_bytes() {
        b"server" => Ok(Role::Server),
        b"client" => Ok(Role::Client),
        _ => {
            pr_err!("kfi_twohost: role must be server or client\n");
            Err(EINVAL)
        }
    }
}

pub(crate) fn provider() -> &'static CStr {
    // SAFETY: As in `role`.
    unsafe { CStr::from_char_ptr(kfi_twohost_provider()) }
}

pub(crate) fn server_node() -> &'static CStr {
    // SAFETY: As in `role`.
    unsafe { CStr::from_char_ptr(kfi_twohost_server_node()) }
}

/// The port of case `n`, as a string.
pub(crate) fn port(n: i32) -> Result<CString> {
    // SAFETY: Reads an int parameter.
    let p = unsafe { kfi_twohost_port_base() }
        .checked_add(n)
        .filter(|p| (1..65536).contains(p))
        .ok_or(EINVAL)?;
    CString::try_from_fmt(fmt!("{}", p))
}

/// How long a side waits for its peer, in milliseconds.
pub(crate) fn wait_ms() -> i64 {
    // SAFETY: Reads an int parameter.
    i64::from(unsafe { kfi_twohost_wait_s() }.clamp(1, 600)) * 1000
}

/// One side's connection of a case. Fields drop in order: the
/// endpoint, the listener, the CQ, then the fabric.
pub(crate) struct Link {
    pub(crate) ep: Owned<sys::kfid_ep>,
    _pep: Option<Owned<sys::kfid_pep>>,
    pub(crate) cq: Owned<sys::kfid_cq>,
    pub(crate) n: Net,
}

/// True while `t0` is less than the peer wait old.
pub(crate) fn in_time(t0: Instant<Monotonic>) -> bool {
    t0.elapsed().as_millis() < wait_ms()
}

/// Reads and logs the error entry waiting on `n`'s EQ.
fn eq_readerr(n: &Net) -> i32 {
    let mut err = sys::kfi_eq_err_entry::default();
    if n.eq.readerr(&mut err) != 1 {
        return -1;
    }
    err.err
}

/// The next event of `n` before the peer wait from `t0` ends; errors
/// the EQ reports are read and returned as `Err(errno)`.
pub(crate) fn next_event(n: &Net, t0: Instant<Monotonic>) -> Result<(u32, [u8; CM + 256])> {
    loop {
        match event(n) {
            Ok((ev, buf, _)) => return Ok((ev, buf)),
            Err(e) if e.to_errno() == -(sys::KFI_EAVAIL as i32) => {
                let err = eq_readerr(n);
                return Err(Error::from_errno(-err.max(1)));
            }
            Err(e) if (e == ETIMEDOUT || e == EAGAIN) && in_time(t0) => continue,
            Err(e) => return Err(e),
        }
    }
}

/// The server side of case `case`: listens and accepts one client.
fn accept(case: i32, cq_size: usize) -> Result<Link> {
    let p = port(case)?;
    let n = net_in(provider(), server_node(), &p, core::ptr::null_mut())?;
    let pep = listen(&n)?;
    let cq = cq_sized(&n, cq_size)?;
    let t0 = Instant::<Monotonic>::now();
    let (ev, buf) = next_event(&n, t0)?;
    if ev != sys::KFI_CONNREQ {
        return Err(EPROTO);
    }
    let ep = accept_req(&n, &buf, &cq)?;
    if next_event(&n, t0)?.0 != sys::KFI_CONNECTED {
        return Err(EPROTO);
    }
    Ok(Link {
        ep,
        _pep: Some(pep),
        cq,
        n,
    })
}

/// The client side of case `case`: connects to the server, again and
/// again while nobody listens yet (the other guest may still boot).
fn connect(case: i32, cq_size: usize) -> Result<Link> {
    let p = port(case)?;
    let n = net_in(provider(), server_node(), &p, core::ptr::null_mut())?;
    let cq = cq_sized(&n, cq_size)?;
    let t0 = Instant::<Monotonic>::now();
    loop {
        let ep = endpoint(&n, n.dst.first(), &cq)?;
        ep.connect(&[])?;
        match next_event(&n, t0) {
            Ok((ev, _)) if ev == sys::KFI_CONNECTED => {
                return Ok(Link {
                    ep,
                    _pep: None,
                    cq,
                    n,
                })
            }
            Ok(_) => return Err(EPROTO),
            Err(e) if in_time(t0) => {
                pr_info!("kfi_twohost: case {}: connect: {:?}, again\n", case, e);
                drop(ep);
                fsleep(Delta::from_millis(500));
            }
            Err(e) => return Err(e),
        }
    }
}

/// This kernel's side of case `case`.
pub(crate) fn link(case: i32, cq_size: usize) -> Result<Link> {
    let l = match role()? {
        Role::Server => accept(case, cq_size),
        Role::Client => connect(case, cq_size),
    };
    if let Err(e) = &l {
        pr_err!("kfi_twohost: case {}: no connection: {:?}\n", case, e);
    }
    l
}

/// The next completion on `cq`, waiting at most the peer wait from `t0`.
/// An error completion is logged and is `EIO`.
pub(crate) fn next_completion(
    cq: &Owned<sys::kfid_cq>,
    t0: Instant<Monotonic>,
) -> Result<sys::kfi_cq_data_entry> {
    loop {
        let mut e = sys::kfi_cq_data_entry::default();
        match sread(cq, &mut e) {
            1 => return Ok(e),
            n if n == -(sys::KFI_EAVAIL as isize) => {
                let mut err = sys::kfi_cq_err_entry::default();
                cq.readerr(&mut err);
                pr_err!(
                    "kfi_twohost: completion of {} failed: {}\n",
                    err.op_context as usize,
                    err.err
                );
                return Err(EIO);
            }
            n if (n == ETIMEDOUT.to_errno() as isize || n == EAGAIN.to_errno() as isize)
                && in_time(t0) => {}
            n => return Err(Error::from_errno(n as i32)),
        }
    }
}

/// Waits for a completion on `cq` that must be an error: its entry
/// (`EPROTO` when the next completion succeeded).
pub(crate) fn complete_err(cq: &Owned<sys::kfid_cq>) -> Result<sys::kfi_cq_err_entry> {
    let t0 = Instant::<Monotonic>::now();
    loop {
        let mut e = sys::kfi_cq_data_entry::default();
        match sread(cq, &mut e) {
            1 => return Err(EPROTO),
            n if n == -(sys::KFI_EAVAIL as isize) => {
                let mut err = sys::kfi_cq_err_entry::default();
                if cq.readerr(&mut err) != 1 {
                    return Err(EPROTO);
                }
                return Ok(err);
            }
            n if (n == ETIMEDOUT.to_errno() as isize || n == EAGAIN.to_errno() as isize)
                && in_time(t0) => {}
            n => return Err(Error::from_errno(n as i32)),
        }
    }
}

/// Waits for the completions of the contexts in `want`, in any order:
/// their entries, in the order of `want`. An error completion is
/// logged and is `EIO`; an unknown or repeated context is `EPROTO`.
pub(crate) fn complete<const N: usize>(
    cq: &Owned<sys::kfid_cq>,
    want: [usize; N],
) -> Result<[sys::kfi_cq_data_entry; N]> {
    let mut got = [sys::kfi_cq_data_entry::default(); N];
    let mut seen = [false; N];
    let t0 = Instant::<Monotonic>::now();
    for _ in 0..N {
        let e = next_completion(cq, t0)?;
        let ctx = e.op_context as usize;
        let Some(i) = want.iter().position(|&w| w == ctx).filter(|&i| !seen[i]) else {
            pr_err!(
                "kfi_twohost: completion of {} while waiting for {:?}\n",
                ctx,
                want
            );
            return Err(EPROTO);
        };
        seen[i] = true;
        got[i] = e;
    }
    Ok(got)
}

pub(crate) fn post_recv(l: &Link, buf: &mut [u8], ctx: usize) -> Result {
    let v = kvec_mut(buf);
    // SAFETY: An open endpoint; callers keep `buf` until completion.
    unsafe { l.ep.recvmsg(&msg(&v, ctx, 0), 0) }
}

pub(crate) fn post_send(l: &Link, buf: &[u8], ctx: usize, data: u64, flags: u64) -> Result {
    let v = kvec(buf);
    // SAFETY: An open endpoint; callers keep `buf` until completion.
    unsafe { l.ep.sendmsg(&msg(&v, ctx, data), flags) }
}

/// Posts an RMA write (`read` false) or read of `local` at `addr` of
/// region `key`.
pub(crate) fn post_rma(
    l: &Link,
    read: bool,
    local: &bindings::kvec,
    addr: u64,
    key: u64,
    ctx: usize,
    flags: u64,
) -> Result {
    let remote = sys::kfi_rma_iov {
        addr,
        len: local.iov_len,
        key,
    };
    let mut m = sys::kfi_msg_rma {
        rma_iov: &remote,
        rma_iov_count: 1,
        ..Default::default()
    };
    m.msg = msg(local, ctx, 0);
    // SAFETY: An open endpoint; callers keep the buffer until the
    // completion; `remote` is read during the call.
    unsafe {
        if read {
            l.ep.readmsg(&m, flags)
        } else {
            l.ep.writemsg(&m, flags)
        }
    }
}

/// Registers `buf` on `l`'s domain at remote address `base`.
pub(crate) fn mr(l: &Link, buf: &mut [u8], access: u64, base: u64) -> Result<Owned<sys::kfid_mr>> {
    // SAFETY: An open domain; `buf` outlives the region (callers drop
    // the region first).
    unsafe {
        l.n.domain
            .register_raw(buf.as_mut_ptr(), buf.len(), access, base, 0, 0)
    }
}

pub(crate) fn key(mr: &Owned<sys::kfid_mr>) -> u64 {
    // SAFETY: An open region.
    unsafe { (*mr.as_ptr()).key }
}
