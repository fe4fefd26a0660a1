// SPDX-License-Identifier: GPL-2.0

//! The message path of a connection: eager messages through slots of
//! DMA-mapped memory, with credits.
//!
//! Each side posts [`SLOTS`] receive slots before the connection is up.
//! A message is copied, one frame at a time (see [`crate::frame`]), into
//! free send slots and sent; the peer copies each frame out of its receive
//! slot into the ULP's receive (or holds the slot until one is posted) and
//! reposts the slot. A sender may only use as many slots as the peer has
//! posted: it starts with [`SLOTS`] credits, spends one per frame, and
//! gets them back in the header of the peer's frames, or in a header-only
//! frame once half of them are due. One credit is kept for those updates,
//! so two sides that both wait for credits always have a way to return
//! them. A message that does not fit the credits at hand waits, with the
//! sends behind it, and goes on as credits return (at most [`TX_MAX`]
//! sends wait).
//!
//! The ULP's buffers are read while frames are filled (at the call and as
//! credits return) and written as frames arrive, so a send completes when
//! the work request of its last frame does, and a receive with its last
//! frame. Completion callbacks run in softirq context; posting works in
//! any context but hard interrupt.
//!
//! This file is the connection's state: the ring, the watchdog, setting
//! up, ending and canceling; the sends (and RMA requests) are posted in
//! `data/tx.rs`, the frames that arrive taken in `data/rx.rs`.

use kernel::{
    impl_has_hr_timer, new_spinlock_irq,
    prelude::*,
    sync::{Arc, ArcBorrow, SpinLockIrq},
    time::{
        hrtimer::{
            ArcHrTimerHandle, HrTimer, HrTimerCallback, HrTimerCallbackContext, HrTimerPointer,
            HrTimerRestart, RelativeSoftMode,
        },
        Delta, Monotonic,
    },
};

use crate::{
    conn::Conn,
    flush::FlushAt,
    frame::{Acks, Buffers, Header, F_MORE, SLOT},
    ib::{
        device::Limits,
        dma::{self, DmaBuf},
        frmr::FastReg,
    },
    ib_sys as sys,
    kfi::toolkit::completion::{report_err, CqEntry, Reports},
    rma::{Rma, RESULTS_LEN, RMA_OPS, RMA_WRS},
    tagged::{Broken, Tagged},
};

mod invalidated;
mod locked;
mod rx;
mod tx;

use rx::post_recv_slot;

/// Slots each way.
pub(crate) const SLOTS: usize = 32;
/// The longest message the protocol carries, and so the longest a
/// receiver takes, whatever its own `max_msg_size`: a peer on a device
/// with other limits sends up to its own (a message longer than its
/// receive is truncated there). A longer one is a protocol error.
pub(crate) const MSG_MAX: usize = 16 << 20;
/// The longest message or RMA transfer sent on a device with limits `l`
/// (its `max_msg_size`): what the frames carry, and what one region holds
/// at any alignment.
pub(crate) fn max_msg(l: &Limits) -> usize {
    let region = (l.max_frmr_pages as usize)
        .saturating_sub(1)
        .saturating_mul(kernel::page::PAGE_SIZE);
    MSG_MAX.min(region)
}

/// Most sends waiting for credits.
pub(crate) const TX_MAX: usize = SLOTS;
/// How long sends may wait for credits the peer does not return (its ULP
/// posts no receive, or it stopped): then the connection ends with
/// `ETIMEDOUT`.
pub(crate) const CREDIT_WAIT_MS: i64 = 5000;
/// How long a work request on the send queue may go without completing
/// on an IB or RoCE link (a peer that answers every send with "receiver
/// not ready", which rdma_cm lets it make us retry for ever), at least:
/// then the connection ends with `ETIMEDOUT`. A QP whose transport
/// retries longer before it gives up (its ack timeout times its retries)
/// gets twice that, so the transport reports a lost peer first.
pub(crate) const WR_WAIT_MS: i64 = 10_000;
/// The most that twice the transport's retries may stretch
/// [`WR_WAIT_MS`] to: the peer chooses our QP's ack timeout (the target
/// ack delay of its CM reply or request), up to 2^31 times 4.096 us a try,
/// which with 7 retries would be about 39 hours.
pub(crate) const WR_WAIT_MAX_MS: i64 = 120_000;
/// The same on iWARP (a peer that stops reading holds a send in its TCP
/// window), where TCP's retransmissions, which back off, must not be
/// cut short.
pub(crate) const WR_WAIT_IWARP_MS: i64 = 30_000;
/// How often a connection's watchdog looks at its waiting sends and work
/// requests. Its deadlines count its runs, not the time: after the host
/// stalled (a paused VM), a run that comes before the completions are
/// polled must not end a healthy connection.
const WATCH_MS: i64 = 250;
/// [`CREDIT_WAIT_MS`] in watchdog runs.
const CREDIT_WAIT_RUNS: u64 = (CREDIT_WAIT_MS / WATCH_MS) as u64;
/// How long a connection whose receives flushed may stay up waiting for
/// the disconnection that normally follows (a peer's disconnect puts our
/// QP in the error state just before rdma_cm reports it): a QP the peer
/// put in the error state another way (an RDMA write with a bad key, on
/// RoCE) gets no event at all. Then the connection ends with
/// `ECONNRESET`.
const QP_FAILED_MS: i64 = 3000;
/// [`QP_FAILED_MS`] in watchdog runs.
const QP_FAILED_RUNS: u64 = (QP_FAILED_MS / WATCH_MS) as u64;

/// `ms` (`response_timeout_ms`) in watchdog runs, one more than it
/// takes (the first run may come at once), so never early; `u64::MAX`
/// (never) for 0.
fn ack_wait_runs(ms: u32) -> u64 {
    match u64::from(ms) {
        0 => u64::MAX,
        ms => ms.div_ceil(WATCH_MS as u64).saturating_add(1),
    }
}
/// Most receives the ULP may have posted.
pub(crate) const RECV_MAX: usize = 64;

/// One slot's completion context. `cqe` is first: ib_core hands its
/// address back, which is the slot's.
#[repr(C)]
struct Slot {
    cqe: sys::ib_cqe,
    path: *const DataPath,
    index: usize,
}

/// The device memory of a connection's message path: receive slots
/// `0..SLOTS`, send slots `SLOTS..2 * SLOTS` (each with its buffer), and
/// the completion contexts of RMA requests `2 * SLOTS..` (no buffer).
///
/// # Invariants
///
/// `slots` has `2 * SLOTS + RMA_WRS` entries and `bufs` `2 * SLOTS`; they
/// never grow (the device holds their addresses); every slot's `path` is
/// the data path that owns the ring, which outlives it; `dev` is the
/// device of the buffers, registered while the ring lives.
pub(crate) struct Ring {
    slots: KVec<Slot>,
    bufs: KVec<DmaBuf>,
    /// The result slots of atomics, one element per RMA request.
    results: DmaBuf,
    lkey: u32,
    dev: *mut sys::ib_device,
    /// Local pieces per RDMA write and read request.
    sges: (usize, usize),
}

// SAFETY: The slots' pointers are only followed by the completion
// callbacks, under the owner's rules; the buffers are `Send`.
unsafe impl Send for Ring {}
// SAFETY: See `Send`; shared access only reads the addresses.
unsafe impl Sync for Ring {}

/// A send whose last frame is in a slot, to complete when its work
/// request does.
#[derive(Clone, Copy)]
struct Op {
    entry: CqEntry,
    /// Report its completion (not for injects).
    report: bool,
    /// Report it only once the peer acknowledged its placement
    /// (delivery or commit completion).
    delivery: bool,
    /// Its place among the sends waiting for that (set when its last
    /// frame is posted).
    seq: u64,
}

/// A send for delivery completion whose last frame is posted: it
/// completes once that frame's request did (`sent`) and the peer
/// acknowledged the message (`acked`).
#[derive(Clone, Copy)]
struct Awaiting {
    seq: u64,
    entry: CqEntry,
    /// A tagged message: acknowledged in its own count ([`Acks`]).
    tagged: bool,
    sent: bool,
    acked: bool,
    /// The watchdog's run when its last frame's request completed
    /// (`sent`): the acknowledgement is due [`State::ack_wait_runs`]
    /// after. Until then the bound on work requests covers it.
    since: u64,
}

/// A send with frames still to go.
#[derive(Clone, Copy)]
struct Pending {
    op: Op,
    bufs: Buffers,
    /// Bytes already in frames.
    sent: usize,
    /// `F_CQ_DATA`, `F_TAGGED` (a tagged message, tagged `tag`) or 0.
    flags: u8,
    data: u64,
    tag: u64,
}

/// A receive the ULP posted: its buffers as kernel addresses.
#[derive(Clone, Copy)]
struct Posted {
    entry: CqEntry,
    bufs: Buffers,
}

/// The receive the message in arrival is placed in.
#[derive(Clone, Copy)]
struct Filling {
    p: Posted,
    /// Bytes placed so far.
    placed: usize,
    /// Bytes of the message so far (more than `placed` when truncated).
    total: usize,
}

struct State {
    /// The QP and ring while the connection can move messages.
    qp: *mut sys::ib_qp,
    ring: *const Ring,
    tx_cq: Reports,
    rx_cq: Reports,
    /// Frames the peer has room for.
    credits: usize,
    /// Slots reposted since the peer was last told.
    to_return: usize,
    /// Free send slots (indices into the send half).
    free: KVec<usize>,
    /// The send whose last frame is in each send slot.
    ops: KVec<Option<Op>>,
    /// Sends with frames still to go, oldest first.
    pending: KVec<Pending>,
    /// The ULP's receives, oldest first.
    posted: KVec<Posted>,
    /// The receive of the message whose frames are arriving.
    filling: Option<Filling>,
    /// Receive slots holding a frame no receive was posted for, oldest
    /// first.
    held: KVec<(usize, Header)>,
    /// Sends for delivery completion posted whole, oldest first (at most
    /// [`TX_MAX`]), and the number of the next.
    awaiting: KVec<Awaiting>,
    next_seq: u64,
    /// The peer's messages flagged
    /// [`F_ACK_REQ`](crate::frame::F_ACK_REQ) placed but not yet
    /// acknowledged.
    acks_due: Acks,
    /// Tagged receives and held tagged messages (`tagged.rs`).
    tagged: Tagged,
    /// RMA operations.
    rma: Rma,
    /// The connection is up: sends may go.
    up: bool,
    /// No more operations: the endpoint closes.
    closed: bool,
    /// The peer broke the protocol: nothing it sends is taken any more,
    /// and the connection is being ended.
    broken: bool,
    /// The connection ended ([`DataPath::cancel`]): the message being
    /// received was canceled and the framing state is gone, so frames
    /// polled from now on (they arrived before the end) are dropped
    /// rather than read as the starts of messages of their own.
    ended: bool,
    /// The watchdog's runs so far: the clock of the two deadlines.
    tick: u64,
    /// Since which run the oldest waiting send has not moved (no credit
    /// or free slot for its next frame).
    stalled_since: Option<u64>,
    /// Since which run a receive slot flushed while the connection was up
    /// ([`QP_FAILED_MS`]).
    flushed_since: Option<u64>,
    /// The run at which each send slot's work request was posted, while
    /// it is (RMA requests note theirs in `rma`).
    slot_tick: [Option<u64>; SLOTS],
    /// Runs a work request may take ([`WR_WAIT_MS`] or more).
    wr_wait_runs: u64,
    /// Runs the peer may take to acknowledge a send for delivery
    /// (`response_timeout_ms`; `u64::MAX`: no bound).
    ack_wait_runs: u64,
    /// Since which run the connection has been starting (until it comes
    /// up), and how many runs it may take (`connect_timeout_ms`).
    connecting_since: Option<u64>,
    connect_wait_runs: u64,
    /// The send whose acknowledgement was overdue (it fails with
    /// `ETIMEDOUT`, the others still waiting with `ECANCELED`).
    overdue: Option<u64>,
    /// Why the connection is being ended (`broken`): `EPROTO` or
    /// `ETIMEDOUT`.
    end_reason: Error,
    /// The endpoint, to end the connection on a protocol error (set while
    /// it is open; its close takes it back).
    owner: Option<Arc<Conn>>,
    /// The keys the peer's sends with invalidate named, for the
    /// protocol-error worker to register their regions again
    /// (`Conn::protocol_error`).
    invalidated: invalidated::Invalidated,
}

/// A connection's message path (shared by the endpoint and its
/// completion callbacks).
#[pin_data]
pub(crate) struct DataPath {
    #[pin]
    st: SpinLockIrq<State>,
    /// The watchdog of sends waiting for credits (see [`Watch`]).
    #[pin]
    timer: HrTimer<DataPath>,
}

impl_has_hr_timer! {
    impl HasHrTimer<Self> for DataPath {
        mode: RelativeSoftMode<Monotonic>,
        field: self.timer
    }
}

impl HrTimerCallback for DataPath {
    type Pointer<'a> = Arc<Self>;

    fn run(this: ArcBorrow<'_, Self>, mut ctx: HrTimerCallbackContext<'_, Self>) -> HrTimerRestart {
        this.watch();
        ctx.forward_now(Delta::from_millis(WATCH_MS));
        HrTimerRestart::Restart
    }
}

/// A connection's running watchdog (softirq context, every `WATCH_MS`):
/// dropping it stops it (waiting for a run in progress; process
/// context).
pub(crate) struct Watch(#[allow(dead_code)] ArcHrTimerHandle<DataPath>);

// SAFETY: The raw pointers in the state are only used under its lock,
// with the lifetimes the ring's owner guarantees (see `attach`).
unsafe impl Send for DataPath {}
// SAFETY: See `Send`.
unsafe impl Sync for DataPath {}

/// The completion callback of every slot.
///
/// # Safety
///
/// Called by ib_core only, for a work request posted with a slot's cqe.
unsafe extern "C" fn slot_done(_cq: *mut sys::ib_cq, wc: *mut sys::ib_wc) {
    // SAFETY: ib_core's valid completion.
    let d = unsafe { dma::done(wc) };
    let slot = d.cqe.cast::<Slot>().cast_const();
    // SAFETY: Requests are only posted with a slot's cqe (the first field
    // of the `repr(C)` slot), whose ring and data path outlive the QP's
    // drain, the last time this runs for them (type invariant of `Ring`).
    let (path, index) = unsafe { (&*(*slot).path, (*slot).index) };
    if index < SLOTS {
        path.received(index, &d);
    } else if index < 2 * SLOTS {
        path.sent(index - SLOTS, &d);
    } else {
        path.rma_done(index - 2 * SLOTS, &d);
    }
}

impl DataPath {
    pub(crate) fn new() -> Result<Arc<Self>> {
        let mut free = KVec::with_capacity(SLOTS, GFP_KERNEL)?;
        let mut ops = KVec::with_capacity(SLOTS, GFP_KERNEL)?;
        for i in 0..SLOTS {
            free.push(i, GFP_KERNEL)?;
            ops.push(None, GFP_KERNEL)?;
        }
        // The ULP's sends, and the remote CQ data of its RDMA writes.
        let pending = KVec::with_capacity(TX_MAX + RMA_OPS, GFP_KERNEL)?;
        let rma = Rma::new()?;
        let posted = KVec::with_capacity(RECV_MAX, GFP_KERNEL)?;
        let held = KVec::with_capacity(SLOTS, GFP_KERNEL)?;
        let awaiting = KVec::with_capacity(TX_MAX, GFP_KERNEL)?;
        let tagged = Tagged::new(crate::unexpected_bytes_max())?;
        Arc::pin_init(
            pin_init!(Self {
                st <- new_spinlock_irq!(State {
                    qp: core::ptr::null_mut(),
                    ring: core::ptr::null(),
                    tx_cq: Reports::default(),
                    rx_cq: Reports::default(),
                    credits: 0,
                    to_return: 0,
                    free,
                    ops,
                    pending,
                    posted,
                    filling: None,
                    held,
                    awaiting,
                    next_seq: 0,
                    acks_due: Acks::default(),
                    tagged,
                    rma,
                    up: false,
                    closed: false,
                    broken: false,
                    ended: false,
                    tick: 0,
                    stalled_since: None,
                    flushed_since: None,
                    slot_tick: [None; SLOTS],
                    wr_wait_runs: (WR_WAIT_MS / WATCH_MS) as u64,
                    ack_wait_runs: ack_wait_runs(crate::response_timeout_ms()),
                    connecting_since: None,
                    connect_wait_runs: u64::MAX,
                    overdue: None,
                    end_reason: EPROTO,
                    owner: None,
                    invalidated: invalidated::Invalidated::new(),
                }),
                timer <- HrTimer::new(),
            }),
            GFP_KERNEL,
        )
    }

    /// Sets (or, at the close, takes back) the endpoint a protocol error
    /// ends.
    pub(crate) fn set_owner(&self, owner: Option<Arc<Conn>>) -> Option<Arc<Conn>> {
        core::mem::replace(&mut self.st.lock().owner, owner)
    }

    /// The peer broke the protocol (`why`): from now on its frames are
    /// dropped (their slots not reposted), no operation is posted, and a
    /// worker ends the connection with an `EPROTO` error entry on the EQ
    /// (which cancels the receives). Any context but hard interrupt.
    fn protocol_error(st: &mut State, why: &str) {
        if st.broken {
            return;
        }
        pr_warn!("protocol error from the peer ({why}): connection ended\n");
        Self::end(st, EPROTO);
    }

    /// Ends the connection for `reason` as [`Self::protocol_error`] does.
    fn end(st: &mut State, reason: Error) {
        if st.broken {
            return;
        }
        st.broken = true;
        st.up = false;
        st.held.clear();
        st.end_reason = reason;
        let Some(c) = st.owner.clone() else {
            return;
        };
        c.queue_protocol_error();
    }

    /// Ends the connection for what a tagged frame did (`b`).
    fn broken(st: &mut State, b: Broken) {
        match b {
            Broken::Proto(why) => Self::protocol_error(st, why),
            Broken::End(e, why) => {
                if !st.broken {
                    pr_warn!("{why}: connection ended\n");
                }
                Self::end(st, e);
            }
        }
    }

    /// Why the connection is being ended (the error entry the worker
    /// posts): `EPROTO`, `ENOSPC` or `ENOMEM` (tagged messages, see
    /// `tagged.rs`), `ETIMEDOUT` for credits, a work request or an
    /// acknowledgement never come, or `ECONNRESET` for a QP that failed
    /// with no disconnection.
    pub(crate) fn end_reason(&self) -> Error {
        self.st.lock().end_reason
    }

    /// Whether the peer broke the protocol (or returned no credits in
    /// time): the protocol-error worker ends the connection. Any context
    /// but hard interrupt.
    pub(crate) fn is_broken(&self) -> bool {
        self.st.lock().broken
    }

    /// A key a peer's send with invalidate named (the oldest not taken
    /// yet). Any context but hard interrupt.
    pub(crate) fn take_invalidated(&self) -> Option<u32> {
        self.st.lock().invalidated.take()
    }

    /// Starts the watchdog of sends waiting for credits (when the
    /// connection comes up). Process context.
    pub(crate) fn start_watch(self: &Arc<Self>) -> Watch {
        Watch(self.clone().start(Delta::from_millis(WATCH_MS)))
    }

    /// How long a work request may take on this connection, in ms (at
    /// least [`WR_WAIT_MS`]; see there). When it comes up.
    pub(crate) fn set_wr_wait(&self, ms: i64) {
        let runs = ms.max(WR_WAIT_MS) / WATCH_MS;
        self.lock().wr_wait_runs = u64::try_from(runs).unwrap_or(u64::MAX);
    }

    /// The watchdog's look: sends that have waited for credits for
    /// [`CREDIT_WAIT_MS`], a work request on the send queue that has not
    /// completed for the connection's bound (see [`WR_WAIT_MS`]), or a
    /// send for delivery the peer has not acknowledged for
    /// `response_timeout_ms`, end the connection with `ETIMEDOUT`.
    /// Softirq context.
    fn watch(&self) {
        let mut st = self.lock();
        if st.broken {
            return;
        }
        st.tick = st.tick.wrapping_add(1);
        let now = st.tick;
        let age = |t: u64| now.wrapping_sub(t);
        if !st.up {
            // A handshake the peer never completes (an IB CM peer that
            // asked for hours of retries and sends no RTU, an iWARP peer
            // that never sends the first frame siw waits for) holds the
            // QP and its buffers: bounded here, as rdma_cm does not.
            if st
                .connecting_since
                .is_some_and(|t| age(t) >= st.connect_wait_runs)
            {
                st.connecting_since = None;
                pr_warn!("the connection was not established in time: it ends\n");
                Self::end(&mut st, ETIMEDOUT);
            }
            return;
        }
        if st.stalled_since.is_some_and(|t| age(t) >= CREDIT_WAIT_RUNS) {
            st.stalled_since = None;
            pr_warn!("the peer returned no credits for {CREDIT_WAIT_MS} ms: connection ended\n");
            Self::end(&mut st, ETIMEDOUT);
            return;
        }
        if st.flushed_since.is_some_and(|t| age(t) >= QP_FAILED_RUNS) {
            pr_warn!("the QP failed and no disconnection followed: connection ended\n");
            Self::end(&mut st, ECONNRESET);
            return;
        }
        let slots = st.slot_tick.iter().flatten().copied().min();
        let oldest = match (slots, st.rma.oldest_tick()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if oldest.is_some_and(|t| age(t) >= st.wr_wait_runs) {
            let ms = st.wr_wait_runs.saturating_mul(WATCH_MS as u64);
            pr_warn!("a work request did not complete in {ms} ms: connection ended\n");
            Self::end(&mut st, ETIMEDOUT);
            return;
        }
        // Sent whole and not acknowledged: the peer's to answer.
        let unacked = st
            .awaiting
            .iter()
            .filter(|a| a.sent && !a.acked)
            .min_by_key(|a| a.since)
            .map(|a| (a.seq, a.since));
        if let Some((seq, _)) = unacked.filter(|&(_, t)| age(t) >= st.ack_wait_runs) {
            st.overdue = Some(seq);
            pr_warn!("the peer did not acknowledge a message in time: connection ended\n");
            Self::end(&mut st, ETIMEDOUT);
        }
    }

    /// Sets where operations complete (at `kfi_enable`): the CQs and
    /// counters bound to the transmit and the receive side.
    pub(crate) fn set_cqs(&self, tx: Reports, rx: Reports) {
        let mut st = self.lock();
        st.tx_cq = tx;
        st.rx_cq = rx;
    }

    /// Makes the ring of a new QP on `dev` with local key `lkey`, whose
    /// RDMA writes and reads take `sges` local pieces. Process context.
    ///
    /// # Safety
    ///
    /// `dev` is registered until the ring is dropped.
    pub(crate) unsafe fn ring(
        self: &Arc<Self>,
        dev: *mut sys::ib_device,
        lkey: u32,
        sges: (usize, usize),
    ) -> Result<KBox<Ring>> {
        let mut slots = KVec::with_capacity(2 * SLOTS + RMA_WRS, GFP_KERNEL)?;
        let mut bufs = KVec::with_capacity(2 * SLOTS, GFP_KERNEL)?;
        for index in 0..2 * SLOTS + RMA_WRS {
            slots.push(
                Slot {
                    cqe: sys::ib_cqe {
                        done: Some(slot_done),
                    },
                    path: Arc::as_ptr(self),
                    index,
                },
                GFP_KERNEL,
            )?;
            if index < 2 * SLOTS {
                // SAFETY: The caller's contract, passed on.
                bufs.push(unsafe { DmaBuf::new(dev, SLOT) }?, GFP_KERNEL)?;
            }
        }
        // SAFETY: The caller's contract, passed on.
        let results = unsafe { DmaBuf::new(dev, RESULTS_LEN) }?;
        // INVARIANT: The sizes above, never changed; `path` is `self`,
        // which the ring's owner keeps alive; the caller's contract.
        Ok(KBox::new(
            Ring {
                slots,
                bufs,
                results,
                lkey,
                dev,
                sges,
            },
            GFP_KERNEL,
        )?)
    }

    /// Starts moving messages over `qp` with `ring`: posts every receive
    /// slot. Process context.
    ///
    /// # Safety
    ///
    /// `qp` is live and `ring` is this path's, both until `detach`
    /// returns and the QP is drained; the ring does not move meanwhile.
    pub(crate) unsafe fn attach(&self, qp: *mut sys::ib_qp, ring: &Ring) -> Result {
        for i in 0..SLOTS {
            // SAFETY: The caller's contract: the slot and its buffer stay
            // valid until the drain completes the request.
            unsafe { post_recv_slot(qp, ring, i) }?;
        }
        let mut st = self.lock();
        st.qp = qp;
        st.ring = ring;
        st.credits = SLOTS;
        st.to_return = 0;
        Ok(())
    }

    /// Sets the connection's negotiated initiator depth: the most RDMA
    /// reads and atomics it has outstanding (before it comes up).
    pub(crate) fn set_rd_depth(&self, depth: u8) {
        self.st.lock().rma.set_depth(depth);
    }

    /// Sets where the connection's flushing reads go: the peer's flush
    /// region, or nowhere (empty reads); before it comes up.
    pub(crate) fn set_flush(&self, at: Option<FlushAt>) {
        self.st.lock().rma.set_flush(at);
    }

    /// The connection starts (`kfi_accept`, or the route found after
    /// `kfi_connect`): unless it comes up (`set_up`) within
    /// `connect_timeout_ms`, the watchdog, which the caller starts, ends it
    /// with `ETIMEDOUT`. Process context.
    pub(crate) fn begin_connecting(&self) {
        let mut st = self.lock();
        if !st.up && !st.broken {
            st.connecting_since = Some(st.tick);
            st.connect_wait_runs = ack_wait_runs(crate::connect_timeout_ms());
        }
    }

    /// The connection came up (sends may go) or ended.
    pub(crate) fn set_up(&self, up: bool) {
        let mut st = self.lock();
        st.up = up;
        // Up or over: either way no longer starting.
        st.connecting_since = None;
        if up {
            Self::pump(&mut st);
            Self::pump_rma(&mut st);
        }
    }

    /// Stops using the QP (before it is drained and destroyed): no more
    /// posting. Any context but hard interrupt.
    pub(crate) fn detach(&self) {
        let mut st = self.lock();
        st.qp = core::ptr::null_mut();
        st.held.clear();
    }

    /// Completes every posted receive and every send with frames still to
    /// go as canceled (the endpoint closes or its connection ended), and
    /// refuses new operations once `closing`. Sends already on the wire
    /// complete as their work requests flush.
    pub(crate) fn cancel(&self, closing: bool) {
        let mut st = self.lock();
        st.closed |= closing;
        st.ended = true;
        let cq = st.rx_cq;
        if let Some(f) = st.filling.take() {
            report_err(cq, &f.p.entry, ECANCELED);
        }
        // The held frames of a message whose last frame will not be
        // taken go (their slots are not reposted): a receive posted later
        // would wait for the rest for ever. Each frame of a message but
        // its last is flagged F_MORE, so they are the held tail.
        while st.held.last().is_some_and(|(_, h)| h.flags & F_MORE != 0) {
            let _ = st.held.pop();
        }
        for p in st.posted.iter() {
            report_err(cq, &p.entry, ECANCELED);
        }
        st.posted.clear();
        st.tagged.cancel(cq, closing);
        let cq = st.tx_cq;
        // Sends that waited for credits in vain say so (not those behind
        // an overdue acknowledgement: they did not wait for the peer).
        let why = if st.broken && st.end_reason == ETIMEDOUT && st.overdue.is_none() {
            ETIMEDOUT
        } else {
            ECANCELED
        };
        for p in st.pending.iter().filter(|p| p.op.report) {
            report_err(cq, &p.op.entry, why);
        }
        st.pending.clear();
        st.stalled_since = None;
        // Sends never acknowledged now; a request of theirs still in
        // flight flushes and finds them gone.
        for a in st.awaiting.iter() {
            let e = if st.overdue == Some(a.seq) {
                ETIMEDOUT
            } else {
                ECANCELED
            };
            report_err(cq, &a.entry, e);
        }
        st.awaiting.clear();
        st.acks_due = Acks::default();
        st.rma.cancel(cq);
    }

    /// Takes back the posted receive with `context`: it completes with
    /// `ECANCELED`. `ENOENT` if no such receive waits (one that a message
    /// is arriving into is no longer waiting).
    pub(crate) fn cancel_recv(&self, context: usize) -> Result {
        let mut st = self.lock();
        let Some(i) = st.posted.iter().position(|p| p.entry.context == context) else {
            let cq = st.rx_cq;
            return st.tagged.cancel_recv(context, cq);
        };
        let p = st.posted.remove(i).map_err(|_| ENOENT)?;
        report_err(st.rx_cq, &p.entry, ECANCELED);
        Ok(())
    }

    /// Posts the registration of `fr` with `access` on this connection's
    /// QP; `ENOTCONN` when it is not up. Any context but hard interrupt.
    pub(crate) fn post_reg(&self, fr: &mut FastReg, access: u32) -> Result {
        self.post_reg_if(fr, access, true)
    }

    /// Posts the registration of a region a peer invalidated (its MR,
    /// `fr`, as it was) on this connection's QP, which need not be up any
    /// more: the QP that took the peer's send, before its protocol error
    /// ends it (`Conn::protocol_error`). `ENOTCONN` once the QP is gone.
    /// Any context but hard interrupt.
    pub(crate) fn post_revalidation(&self, fr: &mut FastReg, access: u32) -> Result {
        self.post_reg_if(fr, access, false)
    }

    /// [`Self::post_reg`], which needs the connection `up`, or
    /// [`Self::post_revalidation`].
    fn post_reg_if(&self, fr: &mut FastReg, access: u32, up: bool) -> Result {
        let st = self.lock();
        if st.closed || (up && !st.up) || st.qp.is_null() {
            return Err(ENOTCONN);
        }
        // SAFETY: A live QP of the domain's PD (attach's contract); its
        // teardown drains it, completing the request first.
        unsafe { fr.post(st.qp, access) }
    }
}
