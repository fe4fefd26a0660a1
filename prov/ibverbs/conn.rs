// SPDX-License-Identifier: GPL-2.0

//! A connection: an endpoint's rdma_cm identifier, its RC QP and the
//! queues the QP uses, its state, and the handler of its rdma_cm events
//! (the endpoint's face to the ULP is `ep.rs`).

use core::sync::atomic::{AtomicUsize, Ordering};
use kernel::{
    new_condvar, new_mutex,
    prelude::*,
    sync::{Arc, CondVar, Mutex},
    workqueue::{self, impl_has_work, new_work, Work, WorkItem},
};

use crate::{
    data::{self, DataPath, Ring, Watch},
    domdev::DomDev,
    flush::{FlushAt, Trailer},
    ib::{
        addr::Addr,
        cm::{self, CmId, RdDepth},
        device::Link,
        frmr::FastReg,
        verbs::Cq,
    },
    ib_sys as sys,
    kfi::{
        provider::{EqRef, FidRef},
        toolkit::{completion::Reports, own_queue::QueueSlot},
    },
    rma,
};

/// The module's queue for the protocol-error work (made at load,
/// destroyed at unload, `kfi_ibverbs_main.rs`): the work still drops its
/// reference to the connection after the close stopped waiting for it,
/// and may free it there; unloading drains the queue, so that never runs
/// after the module's text is gone.
pub(crate) static ERROR_QUEUE: QueueSlot = QueueSlot::new();

/// Work requests of an endpoint's receive queue: every slot, plus the
/// drain's marker.
pub(crate) const RECV_DEPTH: u32 = data::SLOTS as u32 + 1;
/// Of its send queue: every slot, every RMA request, a registration of
/// the domain (one at a time, when it has no registration link:
/// `mr.rs`), and the drain's marker.
pub(crate) const SEND_DEPTH: u32 = (data::SLOTS + rma::RMA_WRS) as u32 + 2;

/// Where a connection is.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
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
pub(crate) struct Queues {
    /// The watchdog: of the handshake from the connection's start, then
    /// of sends waiting for credits (`data.rs`). Stopped first.
    pub(crate) watch: Option<Watch>,
    pub(crate) ring: KBox<Ring>,
    pub(crate) _send: Cq,
    pub(crate) _recv: Cq,
}

pub(crate) struct State {
    pub(crate) phase: Phase,
    pub(crate) fid: Option<FidRef>,
    pub(crate) eq: Option<EqRef>,
    pub(crate) tx_cq: Reports,
    pub(crate) rx_cq: Reports,
    /// The identifier, once enabled (a request's, or our own).
    pub(crate) id: Option<CmId<Conn>>,
    /// A request's identifier before the endpoint is enabled.
    pub(crate) request: Option<CmId<()>>,
    /// A request's offer of read and atomic depths, from our side (the
    /// passive side only).
    pub(crate) offer: Option<RdDepth>,
    /// The depths this side sent (its offer, or its answer to `offer`),
    /// then, once connected, the connection's: how many reads and atomics
    /// it answers and may have outstanding.
    pub(crate) rd: RdDepth,
    /// `kfi_enable` was called.
    pub(crate) enabled: bool,
    /// `kfi_accept` has the identifier out of `id` for its call to
    /// rdma_cm (see `IbEndpoint::accept`): its QP cannot be torn down
    /// until it is back.
    pub(crate) accepting: bool,
    pub(crate) queues: Option<Queues>,
    /// The active side's destination and connect data.
    pub(crate) dest: Option<Addr>,
    pub(crate) param: KVec<u8>,
    /// Our flush region, named to the peer in our private data, and the
    /// peer's (a request's, or the accept's once connected): `flush.rs`.
    pub(crate) own_flush: Option<FlushAt>,
    pub(crate) peer_flush: Option<FlushAt>,
}

impl State {
    /// The provider's bytes after the ULP's in our private data.
    pub(crate) fn trailer(&self) -> Option<Trailer> {
        self.own_flush.map(Trailer::of)
    }
}

/// An endpoint's shared part: the handler of its rdma_cm identifier.
#[pin_data]
pub(crate) struct Conn {
    /// The domain's device side (the domain is the endpoint's).
    pub(crate) dom: Arc<DomDev>,
    pub(crate) dp: Arc<DataPath>,
    #[pin]
    pub(crate) state: Mutex<State>,
    /// Signalled when `State::accepting` ends.
    #[pin]
    pub(crate) accepted: CondVar,
    /// Protocol-error workers queued or running (the close waits for
    /// them).
    pub(crate) err_work: AtomicUsize,
    /// The protocol-error worker, run on [`ERROR_QUEUE`]: an item of this
    /// module's own (the kernel crate's `try_spawn` shares one lockdep key
    /// among modules, which lockdep refuses).
    #[pin]
    pub(crate) err_item: Work<Conn>,
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
    /// A connection not yet enabled: a request's (`request`: its
    /// identifier, offer and the peer's flush region) or one that
    /// connects to `dest` (or to the address given at connect); `own`:
    /// our flush region, if we have one. Process context.
    pub(crate) fn new(
        dom: Arc<DomDev>,
        dp: Arc<DataPath>,
        request: Option<(CmId<()>, RdDepth, Option<FlushAt>)>,
        dest: Option<Addr>,
        own: Option<FlushAt>,
    ) -> Result<Arc<Self>> {
        Arc::pin_init(
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
                    peer_flush: request.as_ref().and_then(|r| r.2),
                    request: request.map(|r| r.0),
                    enabled: false,
                    accepting: false,
                    queues: None,
                    dest,
                    param: KVec::new(),
                    own_flush: own,
                }),
                accepted <- new_condvar!("kfi_ibverbs::accepted"),
                err_work: AtomicUsize::new(0),
                err_item <- new_work!("kfi_ibverbs::protocol_error"),
            }),
            GFP_KERNEL,
        )
    }

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
        if ERROR_QUEUE
            .get(workqueue::system)
            .enqueue(self.clone())
            .is_err()
        {
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
        self.revalidate();
        // Queued only for keys a peer's invalidation named after its
        // connection ended (`data/rx.rs`): nothing else to do.
        if !self.dp.is_broken() {
            return;
        }
        let mut s = self.state.lock();
        if s.phase == Phase::Closed {
            return;
        }
        self.dp.set_up(false);
        // Not while it is being established (the handshake's deadline):
        // iw_cm_disconnect waits for the connect's answer, whose event
        // waits for the state lock held here. Established after this, it
        // is ignored (closed), and the ULP's close ends it.
        if s.phase == Phase::Connected {
            if let Some(id) = s.id.as_ref() {
                id.disconnect();
            }
        }
        self.dp.cancel(false);
        let why = self.dp.end_reason();
        self.fail(&mut s, why, &[]);
    }

    /// The peer's sends with invalidate named regions of the domain (the
    /// data path noted their keys): the device made those keys invalid
    /// for every peer, so each region is registered again, as it was, on
    /// the domain's registration link (else on this connection's QP)
    /// before the protocol error ends the connection. Not under the state
    /// lock: each registration waits for a bounded time
    /// (`IbRegion::revalidate`). Process context.
    fn revalidate(&self) {
        // A registration that timed out on this QP stays on it (until the
        // QP is flushed): none goes behind it.
        let mut stuck = false;
        while let Some(key) = self.dp.take_invalidated() {
            let Some(region) = self.dom.region_of(key) else {
                continue;
            };
            let link = self.dom.reg_link().ok().flatten();
            // Without a link it goes on this QP, as a registration of the
            // domain may: one at a time, as the send queue has room for;
            // before the link's serial.
            let _conn_serial = link.is_none().then(|| self.dom.conn_regs());
            let post = |fr: &mut FastReg, rights| {
                if stuck {
                    return Err(EBUSY);
                }
                self.dp.post_revalidation(fr, rights)
            };
            let r = region.revalidate(link.as_deref(), post);
            if let Err(e) = r {
                stuck |= link.is_none() && e == ETIMEDOUT;
                pr_warn!("a region a peer invalidated stays so: {e:?}\n");
            }
        }
    }

    /// Creates the QP (and its CQs) on the identifier's device, which
    /// must be the domain's.
    pub(crate) fn make_qp(&self, s: &mut State) -> Result {
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
    pub(crate) fn drop_qp(&self, s: &mut State) {
        self.dp.detach();
        if let Some(id) = s.id.as_ref() {
            id.destroy_qp();
        }
        s.queues = None;
    }

    /// How long a work request may take on the connection (see
    /// `data::WR_WAIT_MS`): twice what its transport retries, within the
    /// link's floor and `data::WR_WAIT_MAX_MS`. Process context.
    pub(crate) fn wr_wait_ms(&self, s: &State) -> i64 {
        if self.dom.dev.link == Link::Iwarp {
            return data::WR_WAIT_IWARP_MS;
        }
        let retry = s.id.as_ref().map_or(0, CmId::qp_retry_ms);
        i64::from(retry)
            .saturating_mul(2)
            .clamp(data::WR_WAIT_MS, data::WR_WAIT_MAX_MS)
    }

    /// Reports `err` on the EQ and ends the connection.
    /// Starts the connection's clock and its watchdog, which ends it if
    /// it is not established within `connect_timeout_ms` (and watches it
    /// once it is). With the state locked; process context.
    pub(crate) fn start_watch(&self, s: &mut State) {
        self.dp.begin_connecting();
        if let Some(q) = s.queues.as_mut() {
            q.watch.get_or_insert_with(|| self.dp.start_watch());
        }
    }

    pub(crate) fn fail(&self, s: &mut State, err: Error, data: &[u8]) {
        s.phase = Phase::Closed;
        // Its clock stops: the ULP hears of this end, not of a timeout.
        self.dp.set_up(false);
        if let (Some(eq), Some(fid)) = (s.eq, s.fid) {
            let _ = eq.post_err(fid, err, data);
        }
    }

    /// The device is going away: release everything on it now, and
    /// destroy a connection request the endpoint holds (until the close,
    /// rdma_cm's removal would wait for it). Process context; not under
    /// the state lock.
    ///
    /// From the device's removal (`in_handler` false) it waits for a
    /// `kfi_accept` under way, which holds the identifier: the QP goes
    /// only with it. From the identifier's own event handler it cannot
    /// (rdma_accept waits for that handler) and leaves a connection being
    /// accepted alone; the removal reaches every such connection first.
    pub(crate) fn device_gone(&self, in_handler: bool) {
        let request = {
            let _t = self.dom.teardown();
            // The identifier is taken out while the QP is flushed, as the
            // state lock is not held then (event handlers take it); the
            // close waits for the teardown lock, so it cannot run
            // meanwhile.
            let (id, queues, was, request) = {
                let mut s = self.state.lock();
                while s.accepting {
                    if in_handler {
                        // Not reached: the provider's client is removed
                        // before rdma_cm's, and its removal waited for
                        // every accept. If it ever is, the QP stays until
                        // the close, and rdma_cm's removal waits for it.
                        kernel::pr_warn_once!("device removal reached an accept in progress\n");
                        return;
                    }
                    // The accept takes only the state lock to finish.
                    self.accepted.wait(&mut s);
                }
                let was = s.phase;
                s.phase = Phase::Closed;
                (s.id.take(), s.queues.take(), was, s.request.take())
            };
            self.dp.detach();
            if let Some(id) = id.as_ref() {
                id.destroy_qp();
            }
            drop(queues);
            self.dp.cancel(true);
            let mut s = self.state.lock();
            if id.is_some() {
                // Else one given meanwhile (an enable's) stays: its owner
                // sees the connection closed.
                s.id = id;
            }
            if was != Phase::Closed {
                if let (Some(eq), Some(fid)) = (s.eq, s.fid) {
                    let _ = if was == Phase::Connected {
                        eq.post_shutdown(fid)
                    } else {
                        eq.post_err(fid, ENODEV, &[])
                    };
                }
            }
            request
        };
        // Destroyed outside the teardown lock, as every identifier is.
        drop(request);
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
                    let offer = id.rd_limits()?.reads_if(crate::may_read(&self.dom.dev));
                    let t = s.trailer();
                    let extra = t.as_ref().map_or(&[][..], |t| t.bytes());
                    id.connect_in_handler(&s.param, extra, offer)?;
                    Ok(offer)
                });
                match r {
                    Ok(offer) => {
                        s.rd = offer;
                        s.phase = Phase::Connecting;
                        self.start_watch(&mut s);
                    }
                    Err(e) => self.fail(&mut s, e, &[]),
                }
            }
            cm::Event::Established(data, reported) => {
                if s.phase == Phase::Connecting {
                    s.phase = Phase::Connected;
                    // The passive side's answer is the connection's; the
                    // active side takes no more than was answered, and
                    // learns the peer's flush region from it.
                    if s.offer.is_none() {
                        s.rd = s.rd.settle(reported);
                        s.peer_flush = Trailer::parse(data.extra);
                    }
                    self.dp.set_rd_depth(s.rd.initiator);
                    self.dp.set_wr_wait(self.wr_wait_ms(&s));
                    self.dp.set_flush(s.peer_flush);
                    self.dp.set_up(true);
                    if let Some(q) = s.queues.as_mut() {
                        // Started with the connection already, as a rule.
                        q.watch.get_or_insert_with(|| self.dp.start_watch());
                    }
                    if let (Some(eq), Some(fid)) = (s.eq, s.fid) {
                        let _ = eq.post_connected(fid, data.data);
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
                match s.phase {
                    Phase::Connected => {
                        s.phase = Phase::Closed;
                        if let (Some(eq), Some(fid)) = (s.eq, s.fid) {
                            let _ = eq.post_shutdown(fid);
                        }
                    }
                    // Before it was established (an IB CM peer may send
                    // its DREQ instead of the RTU): no `KFI_CONNECTED`
                    // comes, so the ULP hears of it as a failure.
                    Phase::Connecting => self.fail(&mut s, ECONNRESET, &[]),
                    Phase::Idle | Phase::Resolving | Phase::Closed => {}
                }
            }
            cm::Event::DeviceRemoval => {
                drop(s);
                self.device_gone(true);
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
