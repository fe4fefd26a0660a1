// SPDX-License-Identifier: GPL-2.0

//! Connected (MSG) endpoints: one rdma_cm identifier and its RC QP.
//!
//! The active side resolves the peer's address and route, then creates
//! its QP and connects; the passive side takes the identifier of a
//! request and creates its QP when enabled, then accepts. rdma_cm's
//! events become `KFI_CONNECTED`, `KFI_SHUTDOWN` and error entries on the
//! bound EQ. Messages move through the connection's data path
//! (`data.rs`).

use core::sync::atomic::{AtomicUsize, Ordering};
use kernel::{
    new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
    workqueue::{self, impl_has_work, new_work, Work, WorkItem},
};

use crate::{
    data::{self, DataPath, Ring, Watch},
    domain::DomShared,
    frame::{self, Buffers},
    ib::{
        addr::Addr,
        cm::{self, CmId, RdDepth},
        device::Limits,
        frmr::FastReg,
        verbs::Cq,
    },
    ib_sys as sys,
    kfi::{
        kfabric::kfi_error,
        kfi_sys as ksys,
        provider::{AtomicKind, Bound, EndpointAttr, EqRef, FidRef},
        toolkit::completion::{bind_reports, CqEntry, Reports},
    },
    pep,
    rma::{self, Atomic, RmaOp, ATOMIC_MAX, ELEM},
};

/// Work requests of an endpoint's receive queue: every slot, plus the
/// drain's marker.
const RECV_DEPTH: u32 = data::SLOTS as u32 + 1;
/// Of its send queue: every slot, every RMA request, and the marker.
const SEND_DEPTH: u32 = (data::SLOTS + rma::RMA_WRS) as u32 + 1;

/// What endpoints can do: messages and tagged messages both ways, and RMA
/// both ways.
pub(crate) const CAPS: u64 = ksys::KFI_MSG
    | ksys::KFI_TAGGED
    | ksys::KFI_SEND
    | ksys::KFI_RECV
    | ksys::KFI_RMA
    | ksys::KFI_READ
    | ksys::KFI_WRITE
    | ksys::KFI_REMOTE_READ
    | ksys::KFI_REMOTE_WRITE;
/// What endpoints on a device with limits `l` can do: [`CAPS`], and
/// atomics where the device has them.
pub(crate) fn caps(l: &Limits) -> u64 {
    CAPS | if l.atomics { ksys::KFI_ATOMIC } else { 0 }
}

/// Whether an atomic of `kind` on (`datatype`, `op`) works on a device
/// with limits `l`: the most elements of one. The device adds and
/// compares-and-swaps 64-bit words (which is the same for signed and
/// unsigned ones): `kfi_atomic` and `kfi_fetch_atomic` of `KFI_SUM`,
/// `kfi_compare_atomic` of `KFI_CSWAP`, on `KFI_INT64` and `KFI_UINT64`.
/// Anything else is `EOPNOTSUPP`.
pub(crate) fn atomic_valid(l: &Limits, kind: AtomicKind, datatype: u32, op: u32) -> Result<usize> {
    let wide = matches!(datatype, ksys::KFI_INT64 | ksys::KFI_UINT64);
    let op_ok = match kind {
        AtomicKind::Write | AtomicKind::Fetch => op == ksys::KFI_SUM,
        AtomicKind::Compare => op == ksys::KFI_CSWAP,
    };
    if !l.atomics || !wide || !op_ok {
        return Err(EOPNOTSUPP);
    }
    Ok(ATOMIC_MAX)
}

/// Operation flags they support (messages are copied, so any send may be
/// an inject; its completion is the transmit's). Delivery and commit
/// completion: a send's once the peer acknowledged its placement, a
/// write's once a flushing read after it returned (see `rma.rs`).
pub(crate) const OP_FLAGS: u64 = ksys::KFI_INJECT
    | ksys::KFI_REMOTE_CQ_DATA
    | ksys::KFI_TRANSMIT_COMPLETE
    | ksys::KFI_DELIVERY_COMPLETE
    | ksys::KFI_COMMIT_COMPLETE;

/// Where a connection is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Opened; not yet connecting.
    Idle,
    /// Active side: resolving the address and route.
    Resolving,
    /// Connect sent, or accept sent: waiting for Established.
    Connecting,
    Connected,
    /// Ended (shut down, refused, failed or device gone).
    Closed,
}

/// The device resources of a connection, dropped after its QP: the
/// ring, then the CQs (fields drop in order).
struct Queues {
    /// The watchdog of sends waiting for credits, once connected: stopped
    /// first.
    watch: Option<Watch>,
    ring: KBox<Ring>,
    _send: Cq,
    _recv: Cq,
}

struct State {
    phase: Phase,
    fid: Option<FidRef>,
    eq: Option<EqRef>,
    tx_cq: Reports,
    rx_cq: Reports,
    /// The identifier, once enabled (a request's, or our own).
    id: Option<CmId<Conn>>,
    /// A request's identifier before the endpoint is enabled.
    request: Option<CmId<()>>,
    /// A request's offer of read and atomic depths, from our side (the
    /// passive side only).
    offer: Option<RdDepth>,
    /// The depths this side sent (its offer, or its answer to `offer`),
    /// then, once connected, the connection's: how many reads and atomics
    /// it answers and may have outstanding.
    rd: RdDepth,
    /// `kfi_enable` was called.
    enabled: bool,
    queues: Option<Queues>,
    /// The active side's destination and connect data.
    dest: Option<Addr>,
    param: KVec<u8>,
}

/// An endpoint's shared part: the handler of its rdma_cm identifier.
#[pin_data]
pub(crate) struct Conn {
    dom: Arc<DomShared>,
    dp: Arc<DataPath>,
    #[pin]
    state: Mutex<State>,
    /// Protocol-error workers queued or running (the close waits for
    /// them).
    err_work: AtomicUsize,
    /// The protocol-error worker: an item of this module's own (the
    /// kernel crate's `try_spawn` shares one lockdep key among modules,
    /// which lockdep refuses).
    #[pin]
    err_item: Work<Conn>,
}

impl_has_work! {
    impl HasWork<Self> for Conn { self.err_item }
}

impl WorkItem for Conn {
    type Pointer = Arc<Conn>;

    fn run(this: Arc<Conn>) {
        this.protocol_error();
        this.error_work(false);
    }
}

impl Conn {
    /// Posts the registration of `fr` on this connection's QP (`ENOTCONN`
    /// unless it is up). Any context but hard interrupt.
    pub(crate) fn post_reg(&self, fr: &mut FastReg, access: u32) -> Result {
        self.dp.post_reg(fr, access)
    }

    /// Ends the connection: its QP goes to the error state and flushes
    /// what it holds (for a registration stuck behind a peer that does
    /// not take its data). Process context.
    pub(crate) fn abort(&self) {
        let s = self.state.lock();
        if let Some(id) = s.id.as_ref() {
            id.disconnect();
        }
    }

    /// Queues the protocol-error worker (once: a queued one does the
    /// work). Any context but hard interrupt.
    pub(crate) fn queue_protocol_error(self: &Arc<Self>) {
        self.error_work(true);
        if workqueue::system().enqueue(self.clone()).is_err() {
            self.error_work(false);
        }
    }

    /// Counts a protocol-error worker in (`true`) or out.
    pub(crate) fn error_work(&self, start: bool) {
        if start {
            self.err_work.fetch_add(1, Ordering::SeqCst);
        } else {
            self.err_work.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// The peer broke the protocol (the data path stopped taking its
    /// frames), or returned no credits in time: the connection ends, its
    /// receives and waiting sends are canceled, and the EQ gets an
    /// `EPROTO` (or `ETIMEDOUT`) error entry. Process context (a worker
    /// queued by the data path).
    pub(crate) fn protocol_error(&self) {
        let mut s = self.state.lock();
        if s.phase == Phase::Closed {
            return;
        }
        self.dp.set_up(false);
        if let Some(id) = s.id.as_ref() {
            id.disconnect();
        }
        self.dp.cancel(false);
        let why = self.dp.end_reason();
        self.fail(&mut s, why, &[]);
    }

    /// Creates the QP (and its CQs) on the identifier's device, which
    /// must be the domain's.
    fn make_qp(&self, s: &mut State) -> Result {
        let id = s.id.as_ref().ok_or(ENOTCONN)?;
        if !self.dom.dev.is(id.device()) {
            return Err(ENODEV);
        }
        let pd = self.dom.pd()?;
        let dev = self.dom.dev.as_ptr();
        let l = self.dom.dev.limits;
        let sges = (
            (l.max_send_sge as usize).clamp(1, rma::SGE_MAX),
            (l.max_sge_rd as usize).clamp(1, rma::SGE_MAX),
        );
        // SAFETY: The domain's device is registered while its PD exists
        // (checked just above); the CQs and the ring are dropped by
        // `device_gone` before its removal ends, after the QP.
        let (send, recv, ring) = unsafe {
            (
                Cq::new(dev, SEND_DEPTH + 1)?,
                Cq::new(dev, RECV_DEPTH + 1)?,
                self.dp.ring(dev, pd.local_key(), sges)?,
            )
        };
        id.create_qp(
            &pd,
            &send,
            &recv,
            (SEND_DEPTH, RECV_DEPTH),
            sges.0.max(sges.1) as u32,
        )?;
        let qp = id.qp();
        let q = s.queues.insert(Queues {
            watch: None,
            ring,
            _send: send,
            _recv: recv,
        });
        // SAFETY: The QP and the ring live until `drop_qp` (or the close)
        // detaches the data path and drains the QP; the ring is boxed, so
        // it does not move.
        unsafe { self.dp.attach(qp, &q.ring) }
    }

    /// Tears down the QP, its ring and its CQs (outstanding work flushed
    /// and completed).
    fn drop_qp(&self, s: &mut State) {
        self.dp.detach();
        if let Some(id) = s.id.as_ref() {
            id.destroy_qp();
        }
        s.queues = None;
    }

    /// Reports `err` on the EQ and ends the connection.
    fn fail(&self, s: &mut State, err: Error, data: &[u8]) {
        s.phase = Phase::Closed;
        if let (Some(eq), Some(fid)) = (s.eq, s.fid) {
            let _ = eq.post_err(fid, err, data);
        }
    }

    /// The device is going away: release everything on it now. Process
    /// context; not under the state lock.
    pub(crate) fn device_gone(&self) {
        let _t = self.dom.teardown();
        // The identifier is taken out while the QP is flushed, as the
        // state lock is not held then (event handlers take it); the close
        // waits for the teardown lock, so it cannot run meanwhile.
        let (id, queues, was) = {
            let mut s = self.state.lock();
            let was = s.phase;
            s.phase = Phase::Closed;
            (s.id.take(), s.queues.take(), was)
        };
        self.dp.detach();
        if let Some(id) = id.as_ref() {
            id.destroy_qp();
        }
        drop(queues);
        self.dp.cancel(true);
        let mut s = self.state.lock();
        s.id = id;
        if was != Phase::Closed {
            if let (Some(eq), Some(fid)) = (s.eq, s.fid) {
                let _ = if was == Phase::Connected {
                    eq.post_shutdown(fid)
                } else {
                    eq.post_err(fid, ENODEV, &[])
                };
            }
        }
    }
}

impl cm::Handler for Conn {
    fn event(&self, _id: *mut sys::rdma_cm_id, ev: cm::Event<'_>) -> Result {
        let mut s = self.state.lock();
        if s.phase == Phase::Closed && !matches!(ev, cm::Event::DeviceRemoval) {
            return Ok(());
        }
        match ev {
            cm::Event::AddrResolved => {
                let r =
                    s.id.as_ref()
                        .ok_or(ENOTCONN)
                        .and_then(|id| id.resolve_route());
                if let Err(e) = r {
                    self.fail(&mut s, e, &[]);
                }
            }
            cm::Event::RouteResolved => {
                let r = self.make_qp(&mut s).and_then(|()| {
                    let id = s.id.as_ref().ok_or(ENOTCONN)?;
                    let offer = id.rd_limits()?;
                    id.connect_in_handler(&s.param, offer)?;
                    Ok(offer)
                });
                match r {
                    Ok(offer) => {
                        s.rd = offer;
                        s.phase = Phase::Connecting;
                    }
                    Err(e) => self.fail(&mut s, e, &[]),
                }
            }
            cm::Event::Established(data, reported) => {
                if s.phase == Phase::Connecting {
                    s.phase = Phase::Connected;
                    // The passive side's answer is the connection's; the
                    // active side takes no more than was answered.
                    if s.offer.is_none() {
                        s.rd = s.rd.settle(reported);
                    }
                    self.dp.set_rd_depth(s.rd.initiator);
                    self.dp.set_up(true);
                    if let Some(q) = s.queues.as_mut() {
                        q.watch = Some(self.dp.start_watch());
                    }
                    if let (Some(eq), Some(fid)) = (s.eq, s.fid) {
                        let _ = eq.post_connected(fid, data);
                    }
                }
            }
            cm::Event::Rejected(data) => self.fail(&mut s, ECONNREFUSED, data),
            cm::Event::Failed(e) => self.fail(&mut s, e, &[]),
            cm::Event::Disconnected => {
                // Our side of the QP goes to the error state too, so sends
                // the peer never acknowledged flush now (a RoCE QP without
                // a retry timeout would wait for ever); the ULP's receives
                // cannot be filled any more.
                if let Some(id) = s.id.as_ref() {
                    id.disconnect();
                }
                self.dp.set_up(false);
                self.dp.cancel(false);
                if s.phase == Phase::Connected {
                    s.phase = Phase::Closed;
                    if let (Some(eq), Some(fid)) = (s.eq, s.fid) {
                        let _ = eq.post_shutdown(fid);
                    }
                }
            }
            cm::Event::DeviceRemoval => {
                drop(s);
                self.device_gone();
                // rdma_cm destroys the identifier, unless the close is.
                return match self.state.lock().id.take() {
                    Some(id) => {
                        id.forget();
                        Ok(())
                    }
                    None => Err(EBUSY),
                };
            }
            cm::Event::Other => {}
        }
        Ok(())
    }
}

/// An endpoint.
pub(crate) struct IbEndpoint {
    conn: Arc<Conn>,
}

impl IbEndpoint {
    /// An endpoint for `info`: a request's (its handle) or one that
    /// connects to `info`'s destination. Process context.
    pub(crate) fn new(dom: Arc<DomShared>, info: &ksys::kfi_info) -> Result<Self> {
        // SAFETY: An entry's endpoint attributes are NULL or valid.
        let ep_type = unsafe { info.ep_attr.as_ref() }.map_or(ksys::KFI_EP_MSG, |e| e.type_);
        if ep_type != ksys::KFI_EP_MSG && ep_type != ksys::KFI_EP_UNSPEC {
            return Err(EOPNOTSUPP);
        }
        let (request, dest) = if !info.handle.is_null() {
            (Some(pep::take_request(info.handle)?), None)
        } else if !info.dest_addr.is_null() {
            // SAFETY: An entry's destination holds `dest_addrlen` bytes.
            let b = unsafe {
                core::slice::from_raw_parts(info.dest_addr.cast::<u8>(), info.dest_addrlen)
            };
            (None, Some(Addr::from_bytes(b)?))
        } else {
            (None, None)
        };
        let dp = DataPath::new(data::max_msg(&dom.dev.limits))?;
        let conn = Arc::pin_init(
            pin_init!(Conn {
                dom,
                dp,
                state <- new_mutex!(State {
                    phase: Phase::Idle,
                    fid: None,
                    eq: None,
                    tx_cq: Reports::default(),
                    rx_cq: Reports::default(),
                    id: None,
                    offer: request.as_ref().map(|r| r.1),
                    rd: RdDepth::default(),
                    request: request.map(|r| r.0),
                    enabled: false,
                    queues: None,
                    dest,
                    param: KVec::new(),
                }),
                err_work: AtomicUsize::new(0),
                err_item <- new_work!("kfi_ibverbs::protocol_error"),
            }),
            GFP_KERNEL,
        )?;
        Ok(Self { conn })
    }

    pub(crate) fn attr(&self) -> EndpointAttr {
        EndpointAttr {
            caps: caps(&self.conn.dom.dev.limits),
            op_flags: OP_FLAGS,
            tx_iov_limit: frame::IOV_MAX,
            rx_iov_limit: frame::IOV_MAX,
            rma_iov_limit: rma::RMA_IOV_MAX,
            inject_size: frame::INJECT_MAX,
            max_msg_size: data::max_msg(&self.conn.dom.dev.limits),
        }
    }

    /// The limits of the endpoint's device.
    pub(crate) fn limits(&self) -> &Limits {
        &self.conn.dom.dev.limits
    }

    pub(crate) fn opened(&self, fid: FidRef) {
        self.conn.state.lock().fid = Some(fid);
    }

    pub(crate) fn bind(&self, what: Bound) -> Result {
        let mut s = self.conn.state.lock();
        match what {
            Bound::Eq(eq) => s.eq = Some(eq),
            // A peer's RDMA into our regions never reaches the provider
            // (only a write's remote CQ data does): not countable here.
            other => {
                let State { tx_cq, rx_cq, .. } = &mut *s;
                let uncounted = ksys::KFI_REMOTE_READ | ksys::KFI_REMOTE_WRITE;
                bind_reports(&other, tx_cq, rx_cq, uncounted)?;
            }
        }
        Ok(())
    }

    /// `kfi_enable`: a request's endpoint gets its QP now; an active one
    /// its identifier. Process context.
    pub(crate) fn enable(&self) -> Result {
        let req = {
            let mut s = self.conn.state.lock();
            if s.tx_cq.cq.is_none() || s.rx_cq.cq.is_none() {
                return Err(kfi_error(ksys::KFI_ENOCQ));
            }
            if s.eq.is_none() {
                return Err(kfi_error(ksys::KFI_ENOEQ));
            }
            if s.enabled {
                return Err(EINVAL);
            }
            s.enabled = true;
            self.conn.dp.set_cqs(s.tx_cq, s.rx_cq);
            s.request.take()
        };
        // Giving a request its handler takes the identifier's handler
        // lock, under which handlers take the state lock: not under it.
        let accepting = req.is_some();
        let id = match req {
            Some(r) => r.set_handler(self.conn.clone()),
            None => CmId::new(self.conn.dom.net.0, self.conn.clone())?,
        };
        // Tracked before its QP exists, so a device removal cannot miss it.
        self.conn.dom.add_conn(self.conn.clone())?;
        // A protocol error of the peer ends the connection (until the close).
        drop(self.conn.dp.set_owner(Some(self.conn.clone())));
        let mut s = self.conn.state.lock();
        s.id = Some(id);
        if accepting {
            if let Err(e) = self.conn.make_qp(&mut s) {
                self.conn.drop_qp(&mut s);
                return Err(e);
            }
        }
        Ok(())
    }

    /// `kfi_connect` to `addr` (a `sockaddr_in`/`sockaddr_in6`), or to
    /// the entry's destination when NULL, with private `data`.
    pub(crate) fn connect(&self, addr: *const c_void, data: &[u8]) -> Result {
        let explicit = if addr.is_null() {
            None
        } else {
            // SAFETY: The C contract of kfi_connect: an address in the
            // domain's format; its family says how long it is, and the
            // longest is read only for IPv6.
            Some(unsafe { Addr::from_sockaddr(addr.cast()) }?)
        };
        let mut s = self.conn.state.lock();
        if s.phase != Phase::Idle {
            return Err(EISCONN);
        }
        let dest = explicit.or(s.dest).ok_or(EINVAL)?;
        let mut param = KVec::with_capacity(data.len(), GFP_KERNEL)?;
        param.extend_from_slice(data, GFP_KERNEL)?;
        s.param = param;
        s.id.as_ref()
            .ok_or(kfi_error(ksys::KFI_ENOEQ))?
            .resolve_addr(&dest)?;
        s.phase = Phase::Resolving;
        Ok(())
    }

    /// `kfi_accept`, with private `data`.
    pub(crate) fn accept(&self, data: &[u8]) -> Result {
        // rdma_accept takes the identifier's handler lock, which an event
        // callback waiting for our state lock may hold: the identifier is
        // taken out for the call and put back. Its events only need the
        // state meanwhile.
        let (id, answer) = {
            let mut s = self.conn.state.lock();
            if s.phase != Phase::Idle || s.queues.is_none() {
                return Err(EINVAL);
            }
            let offer = s.offer.ok_or(EINVAL)?;
            let answer = s.id.as_ref().ok_or(EINVAL)?.rd_limits()?.answer(offer);
            // Set before the answer goes: Established may come before the
            // lock is taken again.
            s.rd = answer;
            s.phase = Phase::Connecting;
            (s.id.take().ok_or(EINVAL)?, answer)
        };
        let res = id.accept(data, answer);
        let mut s = self.conn.state.lock();
        s.id = Some(id);
        if res.is_err() {
            s.phase = Phase::Closed;
        }
        res
    }

    /// `kfi_shutdown`: SHUTDOWN here at once, and at the peer when its
    /// side learns of the disconnect (the IB CM tells the side that
    /// disconnects nothing, iWARP does: the event is ours to post).
    pub(crate) fn shutdown(&self) -> Result {
        let mut s = self.conn.state.lock();
        if s.phase != Phase::Connected {
            return Err(ENOTCONN);
        }
        s.phase = Phase::Closed;
        self.conn.dp.set_up(false);
        if let Some(id) = s.id.as_ref() {
            id.disconnect();
        }
        self.conn.dp.cancel(false);
        if let (Some(eq), Some(fid)) = (s.eq, s.fid) {
            let _ = eq.post_shutdown(fid);
        }
        Ok(())
    }

    /// `kfi_cancel`: takes back the receive or tagged receive posted with
    /// `context` (it completes with `ECANCELED`); `ENOENT` if none waits. Sends are on
    /// the wire once posted and cannot be taken back. Any context but
    /// hard interrupt.
    pub(crate) fn cancel(&self, context: *mut c_void) -> Result {
        self.conn.dp.cancel_recv(context as usize)
    }

    /// `kfi_sendmsg`.
    ///
    /// # Safety
    ///
    /// `msg` was passed by kfabric.ko to the provider's `sendmsg`.
    pub(crate) unsafe fn sendmsg(&self, msg: &ksys::kfi_msg, flags: u64) -> Result {
        // SAFETY: The caller's contract.
        unsafe { self.conn.dp.send(msg, flags, None) }
    }

    /// `kfi_tsendmsg`.
    ///
    /// # Safety
    ///
    /// `t` was passed by kfabric.ko to the provider's `tsendmsg`.
    pub(crate) unsafe fn tsendmsg(&self, t: &ksys::kfi_msg_tagged, flags: u64) -> Result {
        // SAFETY: The caller's contract.
        unsafe { self.conn.dp.send(&t.msg, flags, Some(t.tag)) }
    }

    /// `kfi_trecvmsg`.
    ///
    /// # Safety
    ///
    /// `t` was passed by kfabric.ko to the provider's `trecvmsg`.
    pub(crate) unsafe fn trecvmsg(&self, t: &ksys::kfi_msg_tagged, flags: u64) -> Result {
        // SAFETY: The caller's contract.
        unsafe { self.conn.dp.trecv(t, flags) }
    }

    /// `kfi_recvmsg`.
    ///
    /// # Safety
    ///
    /// `msg` was passed by kfabric.ko to the provider's `recvmsg`.
    pub(crate) unsafe fn recvmsg(&self, msg: &ksys::kfi_msg, flags: u64) -> Result {
        // SAFETY: The caller's contract.
        unsafe { self.conn.dp.recv(msg, flags) }
    }

    /// `kfi_readmsg` (`read`) or `kfi_writemsg`: RDMA requests into the
    /// peer's region; with `KFI_REMOTE_CQ_DATA`, a write's data follows it
    /// and completes at the peer. Any context but hard interrupt.
    ///
    /// # Safety
    ///
    /// `m` was passed by kfabric.ko to the provider's `readmsg` or
    /// `writemsg`.
    pub(crate) unsafe fn rma(&self, m: &ksys::kfi_msg_rma, flags: u64, read: bool) -> Result {
        // SAFETY: The caller's contract.
        let local = unsafe { Buffers::of(&m.msg) }?;
        // SAFETY: The caller's contract.
        let (remote, nremote, total) = unsafe { rma::remotes(m) }?;
        if total != local.total {
            return Err(EINVAL);
        }
        let data = (!read && flags & ksys::KFI_REMOTE_CQ_DATA != 0).then_some(m.msg.data);
        let entry = CqEntry {
            context: m.msg.context as usize,
            flags: rma::flags(read),
            len: total,
            asked: flags & ksys::KFI_COMPLETION != 0,
            ..Default::default()
        };
        let op = RmaOp::new(entry, read, local, remote, nremote, data);
        let placed = ksys::KFI_DELIVERY_COMPLETE | ksys::KFI_COMMIT_COMPLETE;
        self.conn.dp.rma(if flags & placed != 0 {
            op.flushed()
        } else {
            op
        })
    }

    /// `kfi_atomicmsg` and its fetch (`result`) and compare (`compare`
    /// and `result`) forms: one request per element, see
    /// [`atomic_valid`]. Any context but hard interrupt.
    ///
    /// # Safety
    ///
    /// `m` and the lists were passed by kfabric.ko to an atomic call
    /// (checked lists).
    pub(crate) unsafe fn atomic(
        &self,
        m: &ksys::kfi_msg_atomic,
        compare: &[ksys::kfi_ioc],
        result: &[ksys::kfi_ioc],
        flags: u64,
    ) -> Result {
        let kind = if !compare.is_empty() {
            AtomicKind::Compare
        } else if !result.is_empty() {
            AtomicKind::Fetch
        } else {
            AtomicKind::Write
        };
        atomic_valid(&self.conn.dom.dev.limits, kind, m.datatype, m.op)?;
        if m.rma_iov_count != 1 || m.rma_iov.is_null() || flags & ksys::KFI_INJECT != 0 {
            return Err(EINVAL);
        }
        // SAFETY: The caller's contract: one remote entry.
        let target = unsafe { *m.rma_iov };
        let count = target.count;
        // The device works on aligned 64-bit words only.
        if count == 0 || count > ATOMIC_MAX || target.addr % ELEM as u64 != 0 {
            return Err(EINVAL);
        }
        let len = count * ELEM;
        let key = u32::try_from(target.key).map_err(|_| ENOKEY)?;
        let operands = |iocs: &[ksys::kfi_ioc]| -> Result<[u64; ATOMIC_MAX]> {
            let b = Buffers::of_iocs(iocs, ELEM)?;
            if b.total != len {
                return Err(EINVAL);
            }
            let mut bytes = [0u8; ATOMIC_MAX * ELEM];
            // SAFETY: The caller's contract: the operands are valid for
            // `len` bytes during the call; `bytes` holds them.
            unsafe { b.gather(0, len, bytes.as_mut_ptr()) };
            let mut v = [0u64; ATOMIC_MAX];
            for (i, x) in v.iter_mut().enumerate() {
                let mut w = [0u8; ELEM];
                w.copy_from_slice(bytes.get(i * ELEM..(i + 1) * ELEM).ok_or(EINVAL)?);
                *x = u64::from_ne_bytes(w);
            }
            Ok(v)
        };
        let src = if m.iov_count == 0 || m.msg_iov.is_null() {
            return Err(EINVAL);
        } else {
            // SAFETY: The caller's contract: `iov_count` entries.
            operands(unsafe { core::slice::from_raw_parts(m.msg_iov, m.iov_count) })?
        };
        let cmp = if kind == AtomicKind::Compare {
            operands(compare)?
        } else {
            [0; ATOMIC_MAX]
        };
        let res = if result.is_empty() {
            None
        } else {
            let b = Buffers::of_iocs(result, ELEM)?;
            if b.total != len {
                return Err(EINVAL);
            }
            Some(b)
        };
        let entry = CqEntry {
            context: m.context as usize,
            flags: ksys::KFI_ATOMIC
                | if res.is_some() {
                    ksys::KFI_READ
                } else {
                    ksys::KFI_WRITE
                },
            len,
            asked: flags & ksys::KFI_COMPLETION != 0,
            ..Default::default()
        };
        let a = Atomic {
            cswap: kind == AtomicKind::Compare,
            src,
            cmp,
            result: res,
        };
        let remote = rma::Remote {
            addr: target.addr,
            len,
            key,
        };
        self.conn.dp.rma(RmaOp::atomic(entry, remote, a, count))
    }

    fn name(&self, peer: bool, out: &mut [u8]) -> Result<usize> {
        let s = self.conn.state.lock();
        let id = s.id.as_ref().ok_or(ENOTCONN)?;
        let mut buf = [0u8; 28];
        let n = id.addr(peer, &mut buf);
        let m = n.min(out.len());
        out[..m].copy_from_slice(&buf[..m]);
        Ok(n)
    }

    pub(crate) fn getname(&self, out: &mut [u8]) -> Result<usize> {
        self.name(false, out)
    }

    pub(crate) fn getpeer(&self, out: &mut [u8]) -> Result<usize> {
        self.name(true, out)
    }
}

impl Drop for IbEndpoint {
    fn drop(&mut self) {
        // No new protocol-error worker; those queued end soon (they only
        // take the state lock), and must not outlive the close.
        drop(self.conn.dp.set_owner(None));
        while self.conn.err_work.load(Ordering::SeqCst) > 0 {
            kernel::time::delay::fsleep(kernel::time::Delta::from_millis(1));
        }
        let id = {
            // Under the domain's teardown lock, so a device removal keeps
            // the PD until the QP is gone. rdma_cm calls that may wait for
            // the identifier's event handler (which takes the state lock)
            // run with the state lock released; the handler ignores a
            // closed connection meanwhile.
            let _t = self.conn.dom.teardown();
            self.conn.dom.remove_conn(&self.conn);
            let (id, queues) = {
                let mut s = self.conn.state.lock();
                s.phase = Phase::Closed;
                (s.id.take(), s.queues.take())
            };
            self.conn.dp.detach();
            if let Some(id) = id.as_ref() {
                id.disconnect();
                id.destroy_qp();
            }
            // The ring and CQs after the QP.
            drop(queues);
            id
        };
        // Destroying the identifier waits for its event handler, which
        // may wait for the teardown lock: released above.
        drop(id);
        self.conn.dp.cancel(true);
    }
}
