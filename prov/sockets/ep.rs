// SPDX-License-Identifier: GPL-2.0

//! Connected (MSG) endpoints of kfi_sockets and the connection machinery
//! that RDM endpoints reuse: state, posting and connection management.
//! The work that moves data is in `rx.rs` and `tx.rs`, driven by socket
//! callbacks (`progress.rs`).
//!
//! Posting (messages, tagged messages, RMA, atomics) may happen in any
//! context but hard interrupt: it only queues the operation in rings and
//! lists allocated when the endpoint was opened and queues the connection's
//! transmit work. The transmit work sends queued operations and the
//! responses the receive work asks for; the receive work reads frames,
//! places messages into posted receives, serves peers' RMA and atomics on
//! this domain's registered memory and completes our operations when their
//! responses arrive. Only the transmit work writes to the socket, so the
//! receive work never waits for a full socket and two endpoints serving
//! each other cannot deadlock. Closing the endpoint removes the callbacks,
//! shuts the socket down and waits until no work item runs.

use core::ffi::c_void;
use kernel::{
    new_condvar, new_mutex, new_spinlock_irq,
    prelude::*,
    sync::{Arc, CondVar, Mutex, SpinLockIrq},
    workqueue::{new_work, Work},
};

use crate::{
    atomics::{self, ATOMIC_MAX},
    bufs::{self, Buf},
    frame::{self, Answer},
    info_ns,
    kfi::{
        kfabric::kfi_error,
        kfi_sys as sys,
        provider::{AtomicKind, Bound, EndpointAttr, EqRef, FidRef},
        ring::Ring,
        toolkit::{
            completion::{report_err, CqEntry, Reports},
            workers::Workers,
        },
    },
    ksock::{Deadline, NetNs, SockAddr, Socket},
    mr::{Access, MrTable},
    pep::{take_request, with_timeout},
    progress, rx,
    rxq::RxQueues,
    wire::{Hdr, Op, RmaDesc, RMA_IOV_MAX},
};

/// Operations that may be queued in each direction, and operations that
/// may wait for their response.
pub(crate) const QUEUE: usize = 64;
/// Most buffers of one operation.
pub(crate) const IOV_MAX: usize = 4;
/// Largest inject (copied at post time).
pub(crate) const INJECT_MAX: usize = 256;
/// Responses the receiver queues for the transmitter before it stops
/// reading (backpressure on a peer that asks faster than it reads).
pub(crate) const RESP_MAX: usize = QUEUE;
/// Bytes of the receive work's buffer for payload nobody takes.
const SCRATCH: usize = 16 << 10;
/// Most tagged messages held for receives not posted yet (their bytes:
/// the `unexpected_bytes_max` parameter).
pub(crate) const UNEXP_MAX: usize = QUEUE;

/// Capabilities of every endpoint (and of the provider's infos).
pub(crate) const CAPS: u64 = sys::KFI_MSG
    | sys::KFI_TAGGED
    | sys::KFI_RMA
    | sys::KFI_ATOMIC
    | sys::KFI_SEND
    | sys::KFI_RECV
    | sys::KFI_READ
    | sys::KFI_WRITE
    | sys::KFI_REMOTE_READ
    | sys::KFI_REMOTE_WRITE;
/// Operation flags the endpoints honour.
pub(crate) const OP_FLAGS: u64 = sys::KFI_INJECT
    | sys::KFI_REMOTE_CQ_DATA
    | sys::KFI_INJECT_COMPLETE
    | sys::KFI_TRANSMIT_COMPLETE
    | sys::KFI_DELIVERY_COMPLETE
    | sys::KFI_COMMIT_COMPLETE
    | sys::KFI_FENCE;
/// Flags that ask for the target's acknowledgement.
const ACKED: u64 =
    sys::KFI_TRANSMIT_COMPLETE | sys::KFI_DELIVERY_COMPLETE | sys::KFI_COMMIT_COMPLETE;

/// What a queued operation is.
#[derive(Clone, Copy, PartialEq, Eq, Default, Debug)]
pub(crate) enum Kind {
    #[default]
    Msg,
    Tagged,
    Write,
    Read,
    Atomic,
}

/// An operation queued for the transmitter.
#[derive(Clone, Copy)]
pub(crate) struct TxOp {
    pub(crate) kind: Kind,
    /// Payload (sends, writes, atomic operands) or destination (reads).
    pub(crate) bufs: [Buf; IOV_MAX],
    pub(crate) n: usize,
    /// Bytes copied at post time (`KFI_INJECT`).
    pub(crate) inject: Option<usize>,
    pub(crate) inject_data: [u8; INJECT_MAX],
    pub(crate) rma: [RmaDesc; RMA_IOV_MAX],
    pub(crate) nrma: usize,
    /// Atomics: compare operands and the buffers for the old values.
    pub(crate) cmp: [Buf; IOV_MAX],
    pub(crate) ncmp: usize,
    pub(crate) res: [Buf; IOV_MAX],
    pub(crate) nres: usize,
    pub(crate) datatype: u32,
    pub(crate) atomic_op: u32,
    pub(crate) context: usize,
    pub(crate) flags: u64,
    pub(crate) data: u64,
    pub(crate) tag: u64,
}

impl Default for TxOp {
    fn default() -> Self {
        Self {
            kind: Kind::Msg,
            bufs: [Buf::default(); IOV_MAX],
            n: 0,
            inject: None,
            inject_data: [0; INJECT_MAX],
            rma: [RmaDesc::default(); RMA_IOV_MAX],
            nrma: 0,
            cmp: [Buf::default(); IOV_MAX],
            ncmp: 0,
            res: [Buf::default(); IOV_MAX],
            nres: 0,
            datatype: 0,
            atomic_op: 0,
            context: 0,
            flags: 0,
            data: 0,
            tag: 0,
        }
    }
}

impl TxOp {
    /// Whether the operation completes only on the target's response:
    /// always for RMA and atomics (the target may refuse the access), for
    /// messages when a completion level beyond inject was asked for.
    pub(crate) fn wants_reply(&self) -> bool {
        !matches!(self.kind, Kind::Msg | Kind::Tagged) || self.flags & ACKED != 0
    }

    /// The flags of the operation's completion.
    /// The completion of the operation (its context, flags and whether
    /// the ULP asked for it), nothing transferred yet.
    pub(crate) fn entry(&self) -> CqEntry {
        CqEntry {
            asked: self.flags & sys::KFI_COMPLETION != 0,
            ..CqEntry::of(self.context, self.completion_flags())
        }
    }

    /// Fenced (`KFI_FENCE`): it waits until every operation posted before
    /// it on its connection has completed.
    pub(crate) fn fenced(&self) -> bool {
        self.flags & sys::KFI_FENCE != 0
    }

    pub(crate) fn completion_flags(&self) -> u64 {
        match self.kind {
            Kind::Msg => sys::KFI_SEND | sys::KFI_MSG,
            Kind::Tagged => sys::KFI_SEND | sys::KFI_TAGGED,
            Kind::Write => sys::KFI_RMA | sys::KFI_WRITE,
            Kind::Read => sys::KFI_RMA | sys::KFI_READ,
            Kind::Atomic if self.nres > 0 => sys::KFI_ATOMIC | sys::KFI_READ,
            Kind::Atomic => sys::KFI_ATOMIC | sys::KFI_WRITE,
        }
    }
}

/// A posted receive (the tag matcher keeps a tagged one's tag).
#[derive(Clone, Copy, Default)]
pub(crate) struct RxOp {
    pub(crate) bufs: [Buf; IOV_MAX],
    pub(crate) n: usize,
    pub(crate) context: usize,
    /// Posted with `KFI_COMPLETION` (see [`CqEntry::asked`]).
    pub(crate) asked: bool,
}

impl RxOp {
    /// The completion of the receive, with `flags` (`KFI_RECV | kind`).
    pub(crate) fn entry(&self, flags: u64) -> CqEntry {
        CqEntry {
            asked: self.asked,
            ..CqEntry::of(self.context, flags)
        }
    }
}

/// An operation that waits for its response, entered before its frame is
/// sent.
#[derive(Clone, Copy)]
pub(crate) struct Pending {
    pub(crate) id: u64,
    pub(crate) kind: Kind,
    pub(crate) context: usize,
    /// The completion's flags and length, and whether the ULP asked for
    /// it.
    pub(crate) flags: u64,
    pub(crate) len: usize,
    pub(crate) asked: bool,
    /// Where a read's data or an atomic's old values go.
    pub(crate) bufs: [Buf; IOV_MAX],
    pub(crate) n: usize,
    /// Bytes the response must carry.
    pub(crate) expect: usize,
    /// Atomics: the element size.
    pub(crate) elem: usize,
    /// Inject: no completion unless it fails.
    pub(crate) silent: bool,
    /// The transmitter has sent the whole frame: its buffers are free.
    pub(crate) sent: bool,
    /// When the response is due (`response_timeout_ms` after `sent`;
    /// `None` before, or without a bound).
    pub(crate) due: Option<Deadline>,
    /// The response's outcome, when it came before `sent`: the
    /// transmitter completes the operation once the frame is out.
    pub(crate) early: Option<Result>,
}

impl Pending {
    /// The operation's completion, nothing transferred reported.
    pub(crate) fn entry(&self) -> CqEntry {
        CqEntry {
            asked: self.asked,
            ..CqEntry::of(self.context, self.flags)
        }
    }
}

/// A tagged message that arrived before its receive was posted (the tag
/// matcher keeps its tag). Up to `unexpected_bytes_max` of payload: from
/// pages (`KVVec`) rather than one high-order kmalloc, so never dropped
/// under a spinlock (a vmalloc'd buffer is freed in process context).
pub(crate) struct Unexpected {
    pub(crate) data: Option<u64>,
    pub(crate) payload: KVVec<u8>,
}

/// A response for the transmitter to send.
pub(crate) struct Resp {
    /// `Ack`, `ReadResp` or `AtomicResp`.
    pub(crate) op: Op,
    pub(crate) id: u64,
    /// 0 or a positive errno.
    pub(crate) status: u64,
    /// A read's data: checked ranges of registered regions.
    pub(crate) reads: KVec<Access>,
    /// An atomic's old values (wire order).
    pub(crate) old: [u8; ATOMIC_MAX],
    pub(crate) old_len: usize,
}

impl Resp {
    /// A response without data.
    pub(crate) fn status(op: Op, id: u64, r: Result) -> Self {
        Self {
            op,
            id,
            status: match r {
                Ok(()) => 0,
                Err(e) => (-e.to_errno()) as u64,
            },
            reads: KVec::new(),
            old: [0; ATOMIC_MAX],
            old_len: 0,
        }
    }
}

/// The state of one connection.
pub(crate) struct State {
    /// The endpoint, for events (MSG endpoints; RDM connections have none).
    pub(crate) fid: Option<FidRef>,
    /// Where our operations complete (CQ and counters).
    pub(crate) tx_cq: Reports,
    pub(crate) eq: Option<EqRef>,
    pub(crate) sock: Option<Arc<Socket>>,
    pub(crate) connected: bool,
    pub(crate) closing: bool,
    /// The private data of a `kfi_connect` for the connector.
    cm_param: KVec<u8>,
    /// Where `kfi_connect` connects to (explicit, or the info's).
    cm_dest: Option<SockAddr>,
    pub(crate) tx: Ring<TxOp>,
    pub(crate) pending: KVec<Pending>,
    pub(crate) resp: KVec<Resp>,
    pub(crate) next_id: u64,
    /// Work items queued or running (`progress.rs`).
    pub(crate) active: u32,
    /// A message header whose receive is not posted yet.
    pub(crate) parked: Option<Hdr>,
    /// The connection ended and was torn down.
    pub(crate) dead: bool,
    /// `KFI_CONNECTED` was reported: the end may be reported too.
    pub(crate) cm_open: bool,
    /// An end that came before `KFI_CONNECTED` was reported.
    pub(crate) cm_deferred: Option<Error>,
}

/// One connection: what its endpoint and its two workers share.
///
/// Lock order: the endpoint's receive queues (`rxq`) may be held while the
/// connection's `state` is taken, never the other way round.
#[pin_data]
pub(crate) struct Shared {
    #[pin]
    pub(crate) state: SpinLockIrq<State>,
    /// Woken when anything is queued or taken, or the connection closes.
    #[pin]
    pub(crate) wake: CondVar,
    /// Woken when a work item finishes.
    #[pin]
    pub(crate) idle: CondVar,
    #[pin]
    pub(crate) rx_work: Work<Shared, 0>,
    #[pin]
    pub(crate) tx_work: Work<Shared, 1>,
    /// The receive work's buffer for payload nobody takes.
    #[pin]
    pub(crate) scratch: Mutex<KVec<u8>>,
    /// The connector.
    #[pin]
    workers: Workers,
    pub(crate) dest: Option<SockAddr>,
    ns: NetNs,
    /// The domain's registered memory, which peers reach through us.
    pub(crate) mrs: Arc<MrTable>,
    /// The endpoint's receive queues.
    pub(crate) rxq: Arc<RxQueues>,
    /// Whether the receive queues end with this connection (MSG).
    owns_rx: bool,
}

/// An endpoint: the ULP's handle on [`Shared`].
pub(crate) struct SockEp(Arc<Shared>);

/// The counter kinds the transmit side of an endpoint completes.
const TX_COUNTED: u64 = sys::KFI_SEND | sys::KFI_READ | sys::KFI_WRITE;
/// The counter kinds its receive side completes (a peer's accesses to our
/// regions are received).
const RX_COUNTED: u64 = sys::KFI_RECV | sys::KFI_REMOTE_READ | sys::KFI_REMOTE_WRITE;

/// `kfi_ep_bind` of a CQ or a counter to the transmit side `tx` and the
/// receive side `rx` of an endpoint: a CQ for `KFI_TRANSMIT` and/or
/// `KFI_RECV` (with `KFI_SELECTIVE_COMPLETION`), a counter for the kinds
/// it names (`EINVAL` for none or an unknown one). `EOPNOTSUPP` for
/// anything else.
pub(crate) fn bind_reports(what: &Bound, tx: &mut Reports, rx: &mut Reports) -> Result {
    match *what {
        Bound::Cq(cq, flags) => {
            if flags & sys::KFI_TRANSMIT != 0 {
                tx.bind_cq(cq, flags);
            }
            if flags & sys::KFI_RECV != 0 {
                rx.bind_cq(cq, flags);
            }
        }
        Bound::Cntr(cntr, flags) => {
            if flags == 0 || flags & !(TX_COUNTED | RX_COUNTED) != 0 {
                return Err(EINVAL);
            }
            tx.bind_cntr(cntr, flags & TX_COUNTED);
            rx.bind_cntr(cntr, flags & RX_COUNTED);
        }
        _ => return Err(EOPNOTSUPP),
    }
    Ok(())
}

/// The attributes of every endpoint, MSG or RDM.
pub(crate) fn attr() -> EndpointAttr {
    EndpointAttr {
        caps: CAPS,
        op_flags: OP_FLAGS,
        tx_iov_limit: IOV_MAX,
        rx_iov_limit: IOV_MAX,
        rma_iov_limit: RMA_IOV_MAX,
        inject_size: INJECT_MAX,
        max_msg_size: crate::wire::PAYLOAD_MAX as usize,
    }
}

/// Writes `a` into `out` (as much as fits); returns its full length.
pub(crate) fn put_addr(a: &SockAddr, out: &mut [u8]) -> usize {
    let b = a.as_bytes();
    let n = b.len().min(out.len());
    out[..n].copy_from_slice(&b[..n]);
    b.len()
}

impl Shared {
    /// A connection of an endpoint: `sock` if already connected (accepted),
    /// else to `dest`. Process context.
    pub(crate) fn new(
        sock: Option<Arc<Socket>>,
        dest: Option<SockAddr>,
        ns: NetNs,
        mrs: Arc<MrTable>,
        rxq: Arc<RxQueues>,
        owns_rx: bool,
    ) -> Result<Arc<Self>> {
        let mut scratch = KVec::with_capacity(SCRATCH, GFP_KERNEL)?;
        scratch.resize(SCRATCH, 0, GFP_KERNEL)?;
        Arc::pin_init(
            try_pin_init!(Shared {
                state <- new_spinlock_irq!(State {
                    fid: None,
                    tx_cq: Reports::default(),
                    eq: None,
                    sock,
                    connected: false,
                    closing: false,
                    cm_param: KVec::new(),
                    cm_dest: None,
                    tx: Ring::new(QUEUE)?,
                    pending: KVec::with_capacity(QUEUE, GFP_KERNEL)?,
                    resp: KVec::with_capacity(RESP_MAX, GFP_KERNEL)?,
                    next_id: 1,
                    active: 0,
                    parked: None,
                    dead: false,
                    cm_open: false,
                    cm_deferred: None,
                }),
                wake <- new_condvar!(),
                idle <- new_condvar!(),
                rx_work <- new_work!("kfi_sockets::rx"),
                tx_work <- new_work!("kfi_sockets::tx"),
                scratch <- new_mutex!(scratch),
                workers <- Workers::new(),
                dest,
                ns,
                mrs,
                rxq,
                owns_rx,
            }),
            GFP_KERNEL,
        )
    }

    /// Whether operations may still be queued.
    pub(crate) fn usable(&self) -> bool {
        let s = self.state.lock();
        !s.closing && (s.connected || s.sock.is_none())
    }

    /// Queues `op` for the transmitter; `EAGAIN` when the queue is full.
    pub(crate) fn queue(self: &Arc<Self>, op: TxOp) -> Result {
        let mut s = self.state.lock();
        if !s.connected || s.closing {
            return Err(ENOTCONN);
        }
        s.tx.push(op).map_err(|_| EAGAIN)?;
        drop(s);
        progress::kick_tx(self);
        Ok(())
    }

    /// `kfi_cancel` of our operation posted with `context` that is still
    /// in the transmit queue: taken out (the rest keep their order), it
    /// completes once with `ECANCELED`. `ENOENT` once the transmitter took
    /// it: it is on the wire or waits for its response. Any context but
    /// hard interrupt.
    pub(crate) fn cancel_queued(&self, context: usize) -> Result {
        let (op, cq) = {
            let mut s = self.state.lock();
            let op = s.tx.take_where(|op| op.context == context).ok_or(ENOENT)?;
            (op, s.tx_cq)
        };
        report_err(cq, &op.entry(), ECANCELED);
        Ok(())
    }

    /// Closes the connection: no callback or work item uses it when this
    /// returns; what was still queued fails with `ECANCELED`. Process
    /// context.
    pub(crate) fn close(&self) {
        let sock = {
            let mut s = self.state.lock();
            s.closing = true;
            s.sock.clone()
        };
        if let Some(sock) = &sock {
            progress::unhook(sock);
            sock.shutdown();
        }
        self.wake.notify_all();
        self.rxq.unstall(self);
        if self.owns_rx {
            self.rxq.close();
        }
        progress::wait_idle(self);
        self.workers.wait_idle();
        flush(self);
    }
}

impl SockEp {
    /// A new endpoint for `info`: connected later by `connect`, or, for the
    /// info of a connection request, by `accept`.
    pub(crate) fn new(info: &sys::kfi_info, mrs: Arc<MrTable>) -> Result<Self> {
        let sock = if info.handle.is_null() {
            None
        } else {
            Some(take_request(info.handle)?)
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
        let rxq = RxQueues::new()?;
        Ok(Self(Shared::new(
            sock,
            dest,
            info_ns(info),
            mrs,
            rxq,
            true,
        )?))
    }
}

/// Runs `f` on a worker that close waits for (the connector).
fn spawn(sh: &Arc<Shared>, f: fn(&Arc<Shared>)) -> Result {
    Workers::spawn(sh, |sh| &sh.workers, f)
}

/// The connection is up: its socket's callbacks drive it from now on.
pub(crate) fn start(sh: &Arc<Shared>) -> Result {
    let sock = sh.state.lock().sock.clone().ok_or(ENOTCONN)?;
    progress::hook(sh, &sock)?;
    {
        let mut s = sh.state.lock();
        if s.closing {
            // `close` may have unhooked before we hooked: undo it here.
            drop(s);
            progress::unhook(&sock);
            return Err(ECANCELED);
        }
        s.connected = true;
    }
    // Bytes may have arrived before the callbacks were in place.
    progress::kick_rx(sh);
    progress::kick_tx(sh);
    Ok(())
}

/// Reports `KFI_CONNECTED` (with the peer's private `data`) for a
/// connection that `start` started, then the end of the connection if it
/// came first: the ULP always hears of a connection before its end.
pub(crate) fn report_connected(sh: &Shared, eq: EqRef, fid: FidRef, data: &[u8]) {
    let _ = eq.post_connected(fid, data);
    let ended = {
        let mut s = sh.state.lock();
        s.cm_open = true;
        s.cm_deferred.take().filter(|_| !s.closing)
    };
    if let Some(e) = ended {
        rx::report_end(eq, fid, e);
    }
}

/// The connection is gone: every operation still queued or waiting for a
/// response fails with `ECANCELED`; held responses are dropped. The
/// receive queues close too if they are the connection's own (MSG).
pub(crate) fn flush(sh: &Shared) {
    let mut ops: KVec<CqEntry> = KVec::new();
    let (tx_cq, resp, pending) = {
        let mut s = sh.state.lock();
        s.connected = false;
        while let Some(op) = s.tx.front().copied() {
            s.tx.pop();
            // Injects too: they complete silently only when sent.
            let _ = ops.push(op.entry(), GFP_ATOMIC);
        }
        (
            s.tx_cq,
            core::mem::take(&mut s.resp),
            core::mem::take(&mut s.pending),
        )
    };
    drop(resp);
    for c in ops.iter() {
        report_err(tx_cq, c, ECANCELED);
    }
    for p in pending.iter() {
        report_err(tx_cq, &p.entry(), ECANCELED);
    }
    if sh.owns_rx {
        sh.rxq.close();
    }
    sh.wake.notify_all();
}

/// Connects: the client's half of the handshake, on a worker.
fn connector(sh: &Arc<Shared>) {
    let (param, eq, fid, addr) = {
        let mut s = sh.state.lock();
        (core::mem::take(&mut s.cm_param), s.eq, s.fid, s.cm_dest)
    };
    let (Some(eq), Some(fid), Some(addr)) = (eq, fid, addr) else {
        return;
    };
    let outcome = (|| -> Result<Answer> {
        let sock = Arc::new(Socket::tcp_in(&addr, sh.ns)?, GFP_KERNEL)?;
        {
            let mut s = sh.state.lock();
            if s.closing {
                return Err(ECANCELED);
            }
            s.sock = Some(sock.clone());
        }
        with_timeout(&sock, || {
            frame::connect_start(&sock, &addr, &param)?;
            frame::connect_finish(&sock)
        })
    })();
    if sh.state.lock().closing {
        return;
    }
    match outcome {
        Ok(Answer::Accepted(data)) => {
            if start(sh).is_ok() {
                report_connected(sh, eq, fid, &data);
            }
        }
        Ok(Answer::Rejected(data)) => {
            let _ = eq.post_err(fid, ECONNREFUSED, &data);
        }
        Err(e) => {
            let _ = eq.post_err(fid, e, &[]);
        }
    }
}

/// Remote descriptors of an RMA operation, with their total length.
fn rma_descs(r: &sys::kfi_msg_rma, out: &mut [RmaDesc; RMA_IOV_MAX]) -> Result<(usize, u64)> {
    if r.rma_iov_count > RMA_IOV_MAX {
        return Err(EINVAL);
    }
    // SAFETY: kfabric.ko checked `rma_iov` non-NULL with `rma_iov_count`
    // entries.
    let list = unsafe { core::slice::from_raw_parts(r.rma_iov, r.rma_iov_count) };
    let mut total = 0u64;
    for (o, d) in out.iter_mut().zip(list) {
        *o = RmaDesc {
            addr: d.addr,
            len: d.len as u64,
            key: d.key,
        };
        total = total.checked_add(d.len as u64).ok_or(EINVAL)?;
    }
    Ok((list.len(), total))
}

impl SockEp {
    /// `kfi_connect`: starts the handshake; the outcome is an EQ event.
    pub(crate) fn connect(&self, addr: *const c_void, param: &[u8]) -> Result {
        // An explicit address, else the destination of the endpoint's info.
        let dest = if addr.is_null() {
            self.0.dest.ok_or(EINVAL)?
        } else {
            // SAFETY: kfi_connect's contract: an address in the domain's
            // format (a socket address), as long as its family says.
            unsafe { SockAddr::from_raw(addr.cast()) }?
        };
        let mut p = KVec::new();
        p.extend_from_slice(param, GFP_KERNEL)?;
        {
            let mut s = self.0.state.lock();
            if s.sock.is_some() || s.connected || s.eq.is_none() || s.fid.is_none() {
                return Err(EINVAL);
            }
            s.cm_param = p;
            s.cm_dest = Some(dest);
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
        report_connected(&self.0, eq, fid, &[]);
        Ok(())
    }

    /// `kfi_shutdown`: ends the connection; the peer gets `KFI_SHUTDOWN`
    /// (the end of the stream tells it: a Shutdown frame written here
    /// could cut into a frame the transmit work is sending). Everything
    /// posted and not completed fails with `ECANCELED`. Process context.
    pub(crate) fn shutdown(&self) -> Result {
        if !self.0.state.lock().connected {
            return Err(ENOTCONN);
        }
        self.0.close();
        Ok(())
    }

    /// `kfi_getname`: the local address of the connection.
    pub(crate) fn getname(&self, out: &mut [u8]) -> Result<usize> {
        let sock = self.0.state.lock().sock.clone().ok_or(ENOTCONN)?;
        Ok(put_addr(&sock.local_addr()?, out))
    }

    /// `kfi_getpeer`: the peer's address.
    pub(crate) fn getpeer(&self, out: &mut [u8]) -> Result<usize> {
        let sock = self.0.state.lock().sock.clone().ok_or(ENOTCONN)?;
        Ok(put_addr(&sock.peer_addr()?, out))
    }

    pub(crate) fn attr(&self) -> EndpointAttr {
        attr()
    }

    pub(crate) fn opened(&self, fid: FidRef) {
        self.0.state.lock().fid = Some(fid);
    }

    pub(crate) fn bind(&self, what: Bound) -> Result {
        match what {
            Bound::Eq(eq) => self.0.state.lock().eq = Some(eq),
            _ => {
                // One lock at a time: a guard in a tuple would live to the
                // end of the statement (see the lock order at `Shared`).
                let mut rx = self.0.rxq.cq();
                let mut tx = self.0.state.lock().tx_cq;
                bind_reports(&what, &mut tx, &mut rx)?;
                self.0.state.lock().tx_cq = tx;
                self.0.rxq.set_reports(rx);
            }
        }
        Ok(())
    }

    pub(crate) fn enable(&self) -> Result {
        // Not under the connection's lock: see the lock order at `Shared`.
        let rx_cq = self.0.rxq.cq().cq;
        let s = self.0.state.lock();
        if s.tx_cq.cq.is_none() || rx_cq.is_none() {
            return Err(kfi_error(sys::KFI_ENOCQ));
        }
        if s.eq.is_none() {
            return Err(kfi_error(sys::KFI_ENOEQ));
        }
        Ok(())
    }

    /// Posts a send, write, read or atomic (any context but hard
    /// interrupt).
    pub(crate) fn post(&self, op: TxOp) -> Result {
        self.0.queue(op)
    }

    /// `kfi_recvmsg` (any context but hard interrupt).
    pub(crate) fn recvmsg(&self, m: &sys::kfi_msg, flags: u64) -> Result {
        self.0.rxq.post(m, flags)
    }

    /// `kfi_cancel` of a posted receive (any context but hard interrupt).
    pub(crate) fn cancel(&self, context: usize) -> Result {
        match self.0.rxq.cancel(context) {
            Err(e) if e == ENOENT => self.0.cancel_queued(context),
            r => r,
        }
    }

    /// `kfi_trecvmsg` (any context but hard interrupt).
    pub(crate) fn trecvmsg(&self, t: &sys::kfi_msg_tagged, flags: u64) -> Result {
        self.0.rxq.post_tagged(t, flags)
    }
}

/// Copies the payload of an inject into the operation.
fn take_inject(op: &mut TxOp) -> Result {
    let n = bufs::total(&op.bufs[..op.n]);
    if n > INJECT_MAX {
        return Err(EINVAL);
    }
    // SAFETY: The ULP's buffers, valid for this call.
    op.inject = Some(unsafe { bufs::gather(&op.bufs[..op.n], &mut op.inject_data[..n]) });
    Ok(())
}

/// Completes building `op`: copies an inject's payload.
fn built(mut op: TxOp) -> Result<TxOp> {
    if op.flags & sys::KFI_INJECT != 0 {
        take_inject(&mut op)?;
    }
    Ok(op)
}

/// The operation of `kfi_sendmsg`.
pub(crate) fn send_op(m: &sys::kfi_msg, fl: u64) -> Result<TxOp> {
    let mut op = TxOp {
        context: m.context as usize,
        flags: fl,
        data: m.data,
        ..Default::default()
    };
    op.n = bufs::of_msg(m, &mut op.bufs)?;
    built(op)
}

/// The operation of `kfi_tsendmsg`.
pub(crate) fn tsend_op(t: &sys::kfi_msg_tagged, fl: u64) -> Result<TxOp> {
    let mut op = TxOp {
        kind: Kind::Tagged,
        context: t.msg.context as usize,
        flags: fl,
        data: t.msg.data,
        tag: t.tag,
        ..Default::default()
    };
    op.n = bufs::of_msg(&t.msg, &mut op.bufs)?;
    built(op)
}

/// The operation of `kfi_writemsg` or `kfi_readmsg`. Local and remote
/// buffers must have the same total length.
pub(crate) fn rma_op(kind: Kind, r: &sys::kfi_msg_rma, fl: u64) -> Result<TxOp> {
    if kind == Kind::Read && fl & sys::KFI_INJECT != 0 {
        return Err(EINVAL);
    }
    let mut op = TxOp {
        kind,
        context: r.msg.context as usize,
        flags: fl,
        data: r.msg.data,
        ..Default::default()
    };
    op.n = bufs::of_msg(&r.msg, &mut op.bufs)?;
    let (nrma, remote) = rma_descs(r, &mut op.rma)?;
    op.nrma = nrma;
    if bufs::total(&op.bufs[..op.n]) as u64 != remote {
        return Err(EINVAL);
    }
    built(op)
}

/// The operation of `kfi_atomicmsg` and its fetch and compare forms: one
/// remote array of at most `ATOMIC_MAX` bytes.
pub(crate) fn atomic_op(
    m: &sys::kfi_msg_atomic,
    compare: &[sys::kfi_ioc],
    result: &[sys::kfi_ioc],
    fl: u64,
) -> Result<TxOp> {
    let size = atomics::elem_size(m.datatype).ok_or(EOPNOTSUPP)?;
    if !atomics::supported(m.op)
        || atomics::has_compare(m.op) == compare.is_empty()
        || m.rma_iov_count != 1
        || fl & sys::KFI_INJECT != 0
    {
        return Err(EINVAL);
    }
    // SAFETY: kfabric.ko checked `rma_iov` non-NULL with one entry.
    let target = unsafe { *m.rma_iov };
    let len = target.count.checked_mul(size).ok_or(EINVAL)?;
    if len == 0 || len > ATOMIC_MAX {
        return Err(EINVAL);
    }
    // SAFETY: kfabric.ko checked `msg_iov` non-NULL with `iov_count`
    // entries.
    let src = unsafe { core::slice::from_raw_parts(m.msg_iov, m.iov_count) };
    let mut op = TxOp {
        kind: Kind::Atomic,
        context: m.context as usize,
        flags: fl,
        data: m.data,
        datatype: m.datatype,
        atomic_op: m.op,
        nrma: 1,
        ..Default::default()
    };
    op.rma[0] = RmaDesc {
        addr: target.addr,
        len: len as u64,
        key: target.key,
    };
    op.n = bufs::of_iocs(src, size, &mut op.bufs)?;
    op.ncmp = bufs::of_iocs(compare, size, &mut op.cmp)?;
    op.nres = bufs::of_iocs(result, size, &mut op.res)?;
    let sizes_ok = bufs::total(&op.bufs[..op.n]) == len
        && (op.ncmp == 0 || bufs::total(&op.cmp[..op.ncmp]) == len)
        && (op.nres == 0 || bufs::total(&op.res[..op.nres]) == len);
    if !sizes_ok {
        return Err(EINVAL);
    }
    Ok(op)
}

/// `kfi_atomicvalid` and friends: how many elements one operation may
/// have.
pub(crate) fn atomic_valid(kind: AtomicKind, datatype: u32, op: u32) -> Result<usize> {
    let size = atomics::elem_size(datatype).ok_or(EOPNOTSUPP)?;
    let compare = matches!(kind, AtomicKind::Compare);
    if !atomics::supported(op) || atomics::has_compare(op) != compare {
        return Err(EOPNOTSUPP);
    }
    Ok(ATOMIC_MAX / size)
}

impl Drop for SockEp {
    fn drop(&mut self) {
        self.0.close();
    }
}
