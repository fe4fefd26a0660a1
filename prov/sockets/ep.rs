// SPDX-License-Identifier: GPL-2.0

//! Connected (MSG) endpoints of kfi_sockets.
//!
//! Posting (`sendmsg`, `recvmsg`) may happen in any context but hard
//! interrupt: it only queues the operation in a ring allocated when the
//! endpoint was opened and wakes the endpoint's workers. Two workers per
//! connection, on the long-running system workqueue, do the blocking socket
//! work: the transmitter sends queued operations as frames, the receiver
//! reads frames and places each message directly into the oldest posted
//! receive. Closing the endpoint shuts the socket down, which ends both,
//! and waits for them.

use core::ffi::c_void;
use kernel::{
    new_condvar, new_spinlock_irq,
    prelude::*,
    sync::{Arc, CondVar, SpinLockIrq},
    workqueue,
};

use crate::{
    events,
    frame::{self, Answer},
    handles,
    kfi::{
        kfi_sys as sys,
        provider::{Bound, CqRef, EndpointAttr, EqRef, FidRef},
    },
    ksock::{SockAddr, Socket},
    util_ring::Ring,
    wire::{flags, Hdr, Op},
};

/// Operations that may be queued in each direction.
pub(crate) const QUEUE: usize = 64;
/// Most buffers of one operation.
pub(crate) const IOV_MAX: usize = 4;
/// Largest inject (copied at post time).
pub(crate) const INJECT_MAX: usize = 256;

/// A kernel virtual buffer of the ULP, valid until its operation completes
/// (the ULP's side of the contract).
#[derive(Clone, Copy, Default)]
struct Buf {
    base: usize,
    len: usize,
}

#[derive(Clone, Copy)]
struct TxOp {
    bufs: [Buf; IOV_MAX],
    n: usize,
    inject: Option<usize>,
    inject_data: [u8; INJECT_MAX],
    context: usize,
    flags: u64,
    data: u64,
}

impl Default for TxOp {
    fn default() -> Self {
        Self {
            bufs: [Buf::default(); IOV_MAX],
            n: 0,
            inject: None,
            inject_data: [0; INJECT_MAX],
            context: 0,
            flags: 0,
            data: 0,
        }
    }
}

#[derive(Clone, Copy, Default)]
struct RxOp {
    bufs: [Buf; IOV_MAX],
    n: usize,
    context: usize,
}

struct State {
    fid: Option<FidRef>,
    tx_cq: Option<CqRef>,
    rx_cq: Option<CqRef>,
    eq: Option<EqRef>,
    sock: Option<Arc<Socket>>,
    connected: bool,
    closing: bool,
    workers: u32,
    /// The private data of a `kfi_connect` for the connector.
    cm_param: KVec<u8>,
    tx: Ring<TxOp>,
    rx: Ring<RxOp>,
}

/// What the endpoint and its workers share.
#[pin_data]
pub(crate) struct Shared {
    #[pin]
    state: SpinLockIrq<State>,
    /// Woken when an operation is queued or the endpoint closes.
    #[pin]
    wake: CondVar,
    /// Woken when a worker ends.
    #[pin]
    idle: CondVar,
    dest: Option<SockAddr>,
}

/// An endpoint: the ULP's handle on [`Shared`].
pub(crate) struct SockEp(Arc<Shared>);

// Only pointers cross; `struct page` behind them ends in zero-size arrays,
// which the lint cannot tell from by-value use.
#[allow(improper_ctypes)]
extern "C" {
    /// `kfi_sockets_mem.c`: the kernel address of a bio_vec's bytes.
    fn kfi_sockets_bvec_addr(bv: *const kernel::bindings::bio_vec) -> *mut c_void;
    /// `kfi_sockets_mem.c`: address and length of a scatterlist entry's
    /// bytes; returns the next entry.
    fn kfi_sockets_sg_buf(
        sg: *mut kernel::bindings::scatterlist,
        addr: *mut *mut c_void,
        len: *mut c_uint,
    ) -> *mut kernel::bindings::scatterlist;
}

/// A message's buffer list (kvec, bio_vec or scatterlist) as kernel
/// virtual buffers.
fn bufs_of(m: &sys::kfi_msg) -> Result<([Buf; IOV_MAX], usize)> {
    if m.iov_count > IOV_MAX {
        return Err(EINVAL);
    }
    let mut b = [Buf::default(); IOV_MAX];
    // SAFETY: All union members are pointers to a list of `iov_count`
    // entries of the type `iov_type` names (checked by kfabric.ko).
    let list = unsafe { m.__bindgen_anon_1.msg_iov };
    let mut sg: *mut kernel::bindings::scatterlist = list.cast_mut().cast();
    for (i, slot) in b.iter_mut().enumerate().take(m.iov_count) {
        *slot = match m.iov_type {
            sys::KFI_KVEC => {
                // SAFETY: A kvec list of `iov_count` entries.
                let v = unsafe { *list.add(i) };
                Buf {
                    base: v.iov_base as usize,
                    len: v.iov_len,
                }
            }
            sys::KFI_BVEC => {
                // SAFETY: A bio_vec list of `iov_count` entries.
                let bv = unsafe { list.cast::<kernel::bindings::bio_vec>().add(i) };
                Buf {
                    // SAFETY: A valid bio_vec of lowmem pages.
                    base: unsafe { kfi_sockets_bvec_addr(bv) } as usize,
                    // SAFETY: As above.
                    len: unsafe { (*bv).bv_len } as usize,
                }
            }
            sys::KFI_SGL => {
                if sg.is_null() {
                    return Err(EINVAL);
                }
                let mut addr: *mut c_void = core::ptr::null_mut();
                let mut len: c_uint = 0;
                // SAFETY: A scatterlist with at least `iov_count` entries.
                sg = unsafe { kfi_sockets_sg_buf(sg, &mut addr, &mut len) };
                Buf {
                    base: addr as usize,
                    len: len as usize,
                }
            }
            _ => return Err(EINVAL),
        };
    }
    Ok((b, m.iov_count))
}

/// The ULP's buffer as a slice.
///
/// # Safety
///
/// `b` is a buffer of a queued operation (valid until it completes).
unsafe fn slice<'a>(b: &Buf) -> &'a mut [u8] {
    if b.len == 0 {
        return &mut [];
    }
    // SAFETY: As required.
    unsafe { core::slice::from_raw_parts_mut(b.base as *mut u8, b.len) }
}

impl SockEp {
    /// A new endpoint for `info`: connected later by `connect`, or, for the
    /// info of a connection request, by `accept`.
    pub(crate) fn new(info: &sys::kfi_info) -> Result<Self> {
        let sock = if info.handle.is_null() {
            None
        } else {
            Some(handles::take(info.handle)?)
        };
        let dest = if info.dest_addr.is_null() {
            None
        } else {
            // SAFETY: An entry's address holds `dest_addrlen` bytes.
            let b = unsafe {
                core::slice::from_raw_parts(info.dest_addr.cast::<u8>(), info.dest_addrlen)
            };
            Some(SockAddr::from_bytes(b)?)
        };
        let shared = Arc::pin_init(
            try_pin_init!(Shared {
                state <- new_spinlock_irq!(State {
                    fid: None,
                    tx_cq: None,
                    rx_cq: None,
                    eq: None,
                    sock,
                    connected: false,
                    closing: false,
                    workers: 0,
                    cm_param: KVec::new(),
                    tx: Ring::new(QUEUE)?,
                    rx: Ring::new(QUEUE)?,
                }),
                wake <- new_condvar!(),
                idle <- new_condvar!(),
                dest,
            }),
            GFP_KERNEL,
        )?;
        Ok(Self(shared))
    }
}

/// Runs `f` on a worker of the long-running system workqueue, counted in
/// `workers` so that the endpoint's close can wait for it.
fn spawn(sh: &Arc<Shared>, f: fn(&Arc<Shared>)) -> Result {
    sh.state.lock().workers += 1;
    let mine = sh.clone();
    let r = workqueue::system_long().try_spawn(GFP_KERNEL, move || {
        f(&mine);
        mine.state.lock().workers -= 1;
        mine.idle.notify_all();
    });
    if r.is_err() {
        sh.state.lock().workers -= 1;
        sh.idle.notify_all();
        return Err(ENOMEM);
    }
    Ok(())
}

/// The connection is up: start both workers.
fn start(sh: &Arc<Shared>) -> Result {
    sh.state.lock().connected = true;
    spawn(sh, rx_worker)?;
    spawn(sh, tx_worker)
}

/// Fails every operation still queued with `ECANCELED`.
fn flush(sh: &Shared) {
    let (mut txs, mut rxs) = (KVec::new(), KVec::new());
    let (tx_cq, rx_cq) = {
        let mut s = sh.state.lock();
        s.connected = false;
        while let Some(op) = s.tx.front().copied() {
            s.tx.pop();
            let _ = txs.push(op.context, GFP_ATOMIC);
        }
        while let Some(op) = s.rx.front().copied() {
            s.rx.pop();
            let _ = rxs.push(op.context, GFP_ATOMIC);
        }
        (s.tx_cq, s.rx_cq)
    };
    let fail = |cq: Option<CqRef>, ctx: usize, op: u64| {
        if let Some(cq) = cq {
            let _ = cq.complete_err(&sys::kfi_cq_err_entry {
                op_context: ctx as *mut c_void,
                flags: op | sys::KFI_MSG,
                err: -ECANCELED.to_errno(),
                ..Default::default()
            });
        }
    };
    for c in txs.iter() {
        fail(tx_cq, *c, sys::KFI_SEND);
    }
    for c in rxs.iter() {
        fail(rx_cq, *c, sys::KFI_RECV);
    }
}

/// Reads frames and delivers messages until the connection ends.
fn rx_worker(sh: &Arc<Shared>) {
    let Some(sock) = sh.state.lock().sock.clone() else {
        return;
    };
    let end = (|| -> Result {
        loop {
            let h = frame::recv_hdr(&sock)?;
            match h.op {
                Op::Msg => deliver(sh, &sock, &h)?,
                Op::Shutdown => return Err(ESHUTDOWN),
                _ => return Err(EPROTO),
            }
        }
    })();
    let (closing, eq, fid) = {
        let s = sh.state.lock();
        (s.closing, s.eq, s.fid)
    };
    // The transmitter stops too; queued operations fail.
    sock.shutdown();
    sh.wake.notify_all();
    flush(sh);
    if closing {
        return;
    }
    if let (Some(eq), Some(fid), Err(e)) = (eq, fid, end) {
        if e == EPROTO {
            let _ = events::post_err(eq, fid, e, &[]);
        }
        let _ = events::post_cm(eq, sys::KFI_SHUTDOWN, fid, core::ptr::null_mut(), &[]);
    }
}

/// Places one message into the oldest posted receive (waiting for one).
fn deliver(sh: &Shared, sock: &Socket, h: &Hdr) -> Result {
    let (op, cq) = {
        let mut s = sh.state.lock();
        loop {
            if s.closing {
                return Err(ECANCELED);
            }
            if let Some(op) = s.rx.front().copied() {
                s.rx.pop();
                break (op, s.rx_cq);
            }
            sh.wake.wait(&mut s);
        }
    };
    let mut left = h.len as usize;
    let mut placed = 0;
    for b in &op.bufs[..op.n] {
        let n = b.len.min(left);
        // SAFETY: A posted receive's buffer, valid until it completes.
        frame::recv_exact(sock, &mut unsafe { slice(b) }[..n])?;
        left -= n;
        placed += n;
    }
    let truncated = left;
    let mut scratch = [0u8; 256];
    while left > 0 {
        let n = left.min(scratch.len());
        frame::recv_exact(sock, &mut scratch[..n])?;
        left -= n;
    }
    let cq_data = if h.flags & flags::REMOTE_CQ_DATA != 0 {
        sys::KFI_REMOTE_CQ_DATA
    } else {
        0
    };
    let Some(cq) = cq else { return Ok(()) };
    let first = op.bufs[0].base as *mut c_void;
    if truncated > 0 {
        cq.complete_err(&sys::kfi_cq_err_entry {
            op_context: op.context as *mut c_void,
            flags: sys::KFI_RECV | sys::KFI_MSG | cq_data,
            len: placed,
            buf: first,
            data: h.data,
            olen: truncated,
            err: -EMSGSIZE.to_errno(),
            ..Default::default()
        })
    } else {
        cq.complete(&sys::kfi_cq_tagged_entry {
            op_context: op.context as *mut c_void,
            flags: sys::KFI_RECV | sys::KFI_MSG | cq_data,
            len: placed,
            buf: first,
            data: if cq_data != 0 { h.data } else { 0 },
            tag: 0,
        })
    }
}

/// Sends queued operations as frames until the connection ends.
fn tx_worker(sh: &Arc<Shared>) {
    let Some(sock) = sh.state.lock().sock.clone() else {
        return;
    };
    loop {
        let (op, cq) = {
            let mut s = sh.state.lock();
            loop {
                if s.closing || !s.connected {
                    return;
                }
                if let Some(op) = s.tx.front().copied() {
                    s.tx.pop();
                    break (op, s.tx_cq);
                }
                sh.wake.wait(&mut s);
            }
        };
        let mut h = Hdr::new(Op::Msg, 0, 0);
        if op.flags & sys::KFI_REMOTE_CQ_DATA != 0 {
            h.flags |= flags::REMOTE_CQ_DATA;
            h.data = op.data;
        }
        let mut parts: [&[u8]; IOV_MAX] = [&[]; IOV_MAX];
        let r = match op.inject {
            Some(n) => frame::send_frame(&sock, &h, &[], &[&op.inject_data[..n]]),
            None => {
                for (p, b) in parts.iter_mut().zip(&op.bufs[..op.n]) {
                    // SAFETY: A queued send's buffer, valid until it completes.
                    *p = unsafe { slice(b) };
                }
                frame::send_frame(&sock, &h, &[], &parts[..op.n])
            }
        };
        if r.is_err() {
            sock.shutdown();
            sh.wake.notify_all();
            return;
        }
        if op.inject.is_none() {
            if let Some(cq) = cq {
                let _ = cq.complete(&sys::kfi_cq_tagged_entry {
                    op_context: op.context as *mut c_void,
                    flags: sys::KFI_SEND | sys::KFI_MSG,
                    len: op.bufs[..op.n].iter().map(|b| b.len).sum(),
                    ..Default::default()
                });
            }
        }
    }
}

/// Connects: the client's half of the handshake, on a worker.
fn connector(sh: &Arc<Shared>) {
    let (param, eq, fid, addr) = {
        let mut s = sh.state.lock();
        (core::mem::take(&mut s.cm_param), s.eq, s.fid, sh.dest)
    };
    let (Some(eq), Some(fid), Some(addr)) = (eq, fid, addr) else {
        return;
    };
    let outcome = (|| -> Result<Answer> {
        let sock = Arc::new(Socket::tcp(&addr)?, GFP_KERNEL)?;
        {
            let mut s = sh.state.lock();
            if s.closing {
                return Err(ECANCELED);
            }
            s.sock = Some(sock.clone());
        }
        frame::connect_start(&sock, &addr, &param)?;
        frame::connect_finish(&sock)
    })();
    if sh.state.lock().closing {
        return;
    }
    match outcome {
        Ok(Answer::Accepted(data)) => {
            if start(sh).is_ok() {
                let _ = events::post_cm(eq, sys::KFI_CONNECTED, fid, core::ptr::null_mut(), &data);
            }
        }
        Ok(Answer::Rejected(data)) => {
            let _ = events::post_err(eq, fid, ECONNREFUSED, &data);
        }
        Err(e) => {
            let _ = events::post_err(eq, fid, e, &[]);
        }
    }
}

impl SockEp {
    /// `kfi_connect`: starts the handshake; the outcome is an EQ event.
    pub(crate) fn connect(&self, addr: *const c_void, param: &[u8]) -> Result {
        // Only the destination of the endpoint's info is supported.
        if !addr.is_null() || self.0.dest.is_none() {
            return Err(EINVAL);
        }
        let mut p = KVec::new();
        p.extend_from_slice(param, GFP_KERNEL)?;
        {
            let mut s = self.0.state.lock();
            if s.sock.is_some() || s.connected || s.eq.is_none() || s.fid.is_none() {
                return Err(EINVAL);
            }
            s.cm_param = p;
        }
        spawn(&self.0, connector)
    }

    /// `kfi_accept`: the server's half of the handshake.
    pub(crate) fn accept(&self, param: &[u8]) -> Result {
        let (sock, eq, fid) = {
            let s = self.0.state.lock();
            (s.sock.clone(), s.eq, s.fid)
        };
        let (Some(sock), Some(eq), Some(fid)) = (sock, eq, fid) else {
            return Err(EINVAL);
        };
        frame::accept(&sock, param)?;
        start(&self.0)?;
        events::post_cm(eq, sys::KFI_CONNECTED, fid, core::ptr::null_mut(), &[])
    }

    /// `kfi_shutdown`: an orderly end; the peer gets `KFI_SHUTDOWN`.
    pub(crate) fn shutdown(&self) -> Result {
        let sock = {
            let mut s = self.0.state.lock();
            if !s.connected {
                return Err(ENOTCONN);
            }
            s.closing = true;
            s.sock.clone()
        };
        if let Some(sock) = sock {
            let _ = frame::send_frame(&sock, &Hdr::new(Op::Shutdown, 0, 0), &[], &[]);
            sock.shutdown();
        }
        self.0.wake.notify_all();
        Ok(())
    }

    pub(crate) fn attr(&self) -> EndpointAttr {
        EndpointAttr {
            caps: sys::KFI_MSG | sys::KFI_SEND | sys::KFI_RECV,
            op_flags: sys::KFI_INJECT | sys::KFI_REMOTE_CQ_DATA | sys::KFI_INJECT_COMPLETE,
            tx_iov_limit: IOV_MAX,
            rx_iov_limit: IOV_MAX,
            rma_iov_limit: 0,
            inject_size: INJECT_MAX,
        }
    }

    pub(crate) fn opened(&self, fid: FidRef) {
        self.0.state.lock().fid = Some(fid);
    }

    pub(crate) fn bind(&self, what: Bound) -> Result {
        let mut s = self.0.state.lock();
        match what {
            Bound::Cq(cq, f) => {
                if f & sys::KFI_TRANSMIT != 0 {
                    s.tx_cq = Some(cq);
                }
                if f & sys::KFI_RECV != 0 {
                    s.rx_cq = Some(cq);
                }
            }
            Bound::Eq(eq) => s.eq = Some(eq),
            _ => return Err(EOPNOTSUPP),
        }
        Ok(())
    }

    pub(crate) fn enable(&self) -> Result {
        let s = self.0.state.lock();
        if s.tx_cq.is_none() || s.rx_cq.is_none() || s.eq.is_none() {
            return Err(EINVAL);
        }
        Ok(())
    }

    /// `kfi_sendmsg` (any context but hard interrupt).
    pub(crate) fn sendmsg(&self, m: &sys::kfi_msg, fl: u64) -> Result {
        let (bufs, n) = bufs_of(m)?;
        let mut op = TxOp {
            bufs,
            n,
            context: m.context as usize,
            flags: fl,
            data: m.data,
            ..Default::default()
        };
        if fl & sys::KFI_INJECT != 0 {
            let mut at = 0;
            for b in &bufs[..n] {
                // SAFETY: The ULP's buffer, valid for this call; its total
                // is at most `INJECT_MAX` (checked by kfabric.ko).
                op.inject_data[at..at + b.len].copy_from_slice(unsafe { slice(b) });
                at += b.len;
            }
            op.inject = Some(at);
        }
        let mut s = self.0.state.lock();
        if !s.connected || s.closing {
            return Err(ENOTCONN);
        }
        s.tx.push(op).map_err(|_| EAGAIN)?;
        drop(s);
        self.0.wake.notify_all();
        Ok(())
    }

    /// `kfi_recvmsg` (any context but hard interrupt).
    pub(crate) fn recvmsg(&self, m: &sys::kfi_msg, _fl: u64) -> Result {
        let (bufs, n) = bufs_of(m)?;
        let mut s = self.0.state.lock();
        if s.closing {
            return Err(ENOTCONN);
        }
        s.rx.push(RxOp {
            bufs,
            n,
            context: m.context as usize,
        })
        .map_err(|_| EAGAIN)?;
        drop(s);
        self.0.wake.notify_all();
        Ok(())
    }
}

impl Drop for SockEp {
    fn drop(&mut self) {
        let sock = {
            let mut s = self.0.state.lock();
            s.closing = true;
            s.sock.clone()
        };
        if let Some(sock) = sock {
            sock.shutdown();
        }
        self.0.wake.notify_all();
        let mut s = self.0.state.lock();
        while s.workers > 0 {
            self.0.idle.wait(&mut s);
        }
    }
}
