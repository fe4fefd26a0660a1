// SPDX-License-Identifier: GPL-2.0

//! One kfi_sockets connection, as MSG endpoints (`ep.rs`) and RDM
//! endpoints (`rdm.rs`) use it: its state and queues ([`State`],
//! [`Shared`]), queueing and cancelling operations, start, teardown,
//! flush and close. The work that moves data is in `rx.rs` and `tx.rs`,
//! driven by socket callbacks (`progress.rs`).
//!
//! Posting (messages, tagged messages, RMA, atomics) may happen in any
//! context but hard interrupt: it only queues the operation in rings and
//! lists allocated when the connection was made and queues the
//! connection's transmit work. The transmit work sends queued operations
//! and the responses the receive work asks for; the receive work reads
//! frames, places messages into posted receives, serves peers' RMA and
//! atomics on this domain's registered memory and completes our
//! operations when their responses arrive. Only the transmit work writes
//! to the socket, so the receive work never waits for a full socket and
//! two endpoints serving each other cannot deadlock. Closing lets the
//! receive work finish the frame in hand and the transmitter send the
//! responses queued (for a bounded time), then removes the callbacks,
//! shuts the socket down and waits until no work item runs.

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use kernel::{
    new_condvar, new_spinlock_irq,
    prelude::*,
    sync::{Arc, CondVar, CondVarTimeoutResult, SpinLockIrq},
    time::msecs_to_jiffies,
    workqueue::{new_work, Work},
};

use crate::{
    kfi::{
        provider::{EqRef, FidRef},
        ring::Ring,
        toolkit::{
            completion::{report_err, Reports},
            workers::Workers,
        },
    },
    ksock::{Deadline, NetNs, SockAddr, Socket},
    mr::MrTable,
    op::{Begun, Job, Pending, Resp, TxOp},
    progress,
    rxq::RxQueues,
    splice,
    wire::{Hdr, RmaDescs},
};

/// Operations that may be queued in each direction, and operations that
/// may wait for their response.
pub(crate) const QUEUE: usize = 64;
/// Room the queues of a connection start with: they grow on demand (a
/// post that finds no memory without sleeping gets `EAGAIN`), up to
/// `QUEUE` or `RESP_MAX`, and shrink back when the connection is idle, so
/// that an idle connection holds little (an RDM endpoint may have many).
pub(crate) const QUEUE_FIRST: usize = 4;
/// Responses the receiver queues for the transmitter before it stops
/// reading (backpressure on a peer that asks faster than it reads).
pub(crate) const RESP_MAX: usize = QUEUE;
/// Most tagged messages held for receives not posted yet (their bytes:
/// the `unexpected_bytes_max` parameter).
pub(crate) const UNEXP_MAX: usize = QUEUE;

/// How long a connection stays idle before the room its queues grew is
/// given back.
const SHRINK_AFTER_MS: u32 = 1000;

/// The state of one connection.
pub(crate) struct State {
    /// The endpoint, for events (MSG endpoints; RDM connections have none).
    pub(crate) fid: Option<FidRef>,
    /// Where our operations complete (CQ and counters).
    pub(crate) tx_cq: Reports,
    pub(crate) eq: Option<EqRef>,
    pub(crate) sock: Option<Arc<Socket>>,
    pub(crate) connected: bool,
    /// Closing has begun: the receive work takes no new frame, the
    /// transmitter sends responses but none of our operations
    /// (`Shared::close_by`).
    pub(crate) draining: bool,
    pub(crate) closing: bool,
    /// The private data of a `kfi_connect` for the connector.
    pub(crate) cm_param: KVec<u8>,
    /// Where `kfi_connect` connects to (explicit, or the info's).
    pub(crate) cm_dest: Option<SockAddr>,
    /// Made for a connection request that no `kfi_accept` has answered
    /// yet: the only state an accept may write its answer in.
    pub(crate) cm_request: bool,
    pub(crate) tx: Ring<TxOp>,
    pub(crate) pending: KVec<Pending>,
    pub(crate) resp: KVec<Resp>,
    /// The transmitter has taken a response off `resp` and is sending it.
    pub(crate) resp_out: bool,
    /// A transmitter has the socket (`tx.rs`): the transmit work or an
    /// inline sender.
    pub(crate) tx_busy: bool,
    /// Work for the transmitter came while one had the socket: it looks
    /// again before it lets go (`tx.rs`). Queueing the transmit work while
    /// it runs would only wake an idle worker to hand it back.
    pub(crate) tx_again: bool,
    /// A frame an inline sender began that the socket did not take whole;
    /// the transmit work sends the rest before anything else.
    pub(crate) tx_begun: Option<Begun>,
    /// The receive work is handling frames (`rx::run`).
    pub(crate) rx_running: bool,
    /// The socket's data callback is handling frames (`rx/soft.rs`).
    pub(crate) rx_soft: bool,
    /// Bytes came for the one receiver while the other had the socket:
    /// the receive work ran while the callback received (the callback
    /// queues it again), or the callback ran while the work received (the
    /// work looks again before it ends, `rx::run`: queueing a running work
    /// item would only wake an idle worker to hand it back).
    pub(crate) rx_again: bool,
    /// The receive work, or a poster receiving inline, found the other
    /// receiving (`rx::run`): the one that has the socket looks again
    /// before it ends even with a message parked, for what the other was
    /// called for (a receive posted, a response due).
    pub(crate) rx_kicked: bool,
    /// The callback found the peer's frames broken: the receive work ends
    /// the connection with this.
    pub(crate) rx_failed: Option<Error>,
    pub(crate) next_id: u64,
    /// Work items queued or running (`progress.rs`).
    pub(crate) active: u32,
    /// A message header whose receive is not posted yet, or a frame's
    /// header the data callback read and left to the receive work.
    pub(crate) parked: Option<Hdr>,
    /// The descriptors of the parked frame, if the callback read them too.
    pub(crate) parked_rma: Option<RmaDescs>,
    /// The parked message waits in the socket for its receive until then
    /// (`rx/recv.rs`, `recv_wait_ms`); after that it is held.
    pub(crate) recv_wait: Option<Deadline>,
    /// The connection ended and was torn down.
    pub(crate) dead: bool,
    /// `KFI_CONNECTED` was reported: the end may be reported too.
    pub(crate) cm_open: bool,
    /// An end that came before `KFI_CONNECTED` was reported.
    pub(crate) cm_deferred: Option<Error>,
    /// When grown queues shrink if the connection stays idle until then.
    pub(crate) shrink_due: Option<Deadline>,
    /// A frame was sent since the last shrink: the socket holds a page
    /// fragment (`kfi_sockets_release_frag`).
    pub(crate) sent: bool,
}

impl State {
    /// Nothing is queued, being sent or waiting for a response.
    fn idle(&self) -> bool {
        self.tx.front().is_none()
            && self.pending.is_empty()
            && self.resp.is_empty()
            && self.tx_begun.is_none()
    }

    /// Makes sure a response can be queued without allocating: false if
    /// `RESP_MAX` are queued, or the room for one more cannot be had
    /// without sleeping. For the data callback, which reports a frame
    /// before it answers it: the answer must not fail after the report.
    /// Only the receiver queues responses (and only it shrinks their
    /// queue), so the room stays until it queues one.
    pub(crate) fn reserve_resp(&mut self) -> bool {
        self.resp.len() < RESP_MAX && self.resp.reserve(1, GFP_ATOMIC).is_ok()
    }

    /// A queue has more room than it started with.
    fn grown(&self) -> bool {
        self.tx.room_now() > QUEUE_FIRST
            || self.pending.capacity() > QUEUE_FIRST
            || self.resp.capacity() > QUEUE_FIRST
    }
}

/// Gives an empty list the room it started with (never sleeps: on failure
/// to allocate it keeps the larger).
pub(crate) fn shrink_vec<T>(v: &mut KVec<T>) {
    if v.is_empty() && v.capacity() > QUEUE_FIRST {
        if let Ok(first) = KVec::with_capacity(QUEUE_FIRST, GFP_ATOMIC) {
            *v = first;
        }
    }
}

/// A transmitter found nothing more to send (`sent`: after sending a
/// frame): queues that grew shrink, and the socket's page fragment is
/// given back, once the connection has stayed idle for `SHRINK_AFTER_MS`
/// (the connection's timer queues the receive work, which calls
/// [`shrink_if_idle`]). Process context.
pub(crate) fn note_idle(sh: &Shared, sock: &Socket, sent: bool) {
    let arm = {
        let mut s = sh.state.lock();
        s.sent |= sent;
        let arm = s.idle() && (s.grown() || s.sent) && s.shrink_due.is_none();
        if arm {
            s.shrink_due = Some(Deadline::after_ms(u64::from(SHRINK_AFTER_MS)));
        }
        arm
    };
    if arm {
        progress::arm_timer(sock, SHRINK_AFTER_MS);
    }
}

/// Gives back the room the queues grew, and the socket's page fragment,
/// if the connection stayed idle until it was due (the receive work, on
/// the connection's timer).
pub(crate) fn shrink_if_idle(sh: &Shared, sock: &Socket) {
    let mut release = false;
    let again = {
        let mut s = sh.state.lock();
        let Some(due) = s.shrink_due else {
            return;
        };
        if !s.idle() {
            // Busy again: its next idle moment sets a new time.
            s.shrink_due = None;
            return;
        }
        let left = due.left_ms();
        if left.is_none() {
            s.shrink_due = None;
            s.tx.shrink();
            shrink_vec(&mut s.pending);
            shrink_vec(&mut s.resp);
            release = core::mem::take(&mut s.sent);
        }
        left
    };
    if release {
        // A send that starts meanwhile takes the socket's lock first.
        // SAFETY: A live socket; process context (the receive work).
        unsafe { crate::sock_sys::kfi_sockets_release_frag(sock.as_raw()) };
    }
    if let Some(ms) = again {
        progress::arm_timer(sock, ms);
    }
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
    /// The connector.
    #[pin]
    pub(crate) workers: Workers,
    pub(crate) dest: Option<SockAddr>,
    pub(crate) ns: NetNs,
    /// The domain's registered memory, which peers reach through us.
    pub(crate) mrs: Arc<MrTable>,
    /// The endpoint's receive queues.
    pub(crate) rxq: Arc<RxQueues>,
    /// Whether the receive queues end with this connection (MSG).
    pub(crate) owns_rx: bool,
    /// The source its held messages are counted under (`rxq.rs`): on an
    /// RDM endpoint the peer's host (`host_key.rs`), whose held messages
    /// outlive its connections, so that reconnecting buys no new share;
    /// else a number of this connection's, never reused.
    pub(crate) share: u64,
    /// On its endpoint's list of stalled connections
    /// (`RxState::stalled`), so that a park finds out without a search of
    /// the list (an RDM endpoint's may hold every peer). Read and written
    /// only with the receive queues locked; atomic only to be written
    /// through a shared reference.
    pub(crate) on_stalled: AtomicBool,
}

/// The next connection's number.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl Shared {
    /// A connection of an endpoint: `sock` if already connected (accepted),
    /// else to `dest`; its held messages counted under `share`, or under
    /// a number of its own. Process context.
    pub(crate) fn new(
        sock: Option<Arc<Socket>>,
        dest: Option<SockAddr>,
        ns: NetNs,
        mrs: Arc<MrTable>,
        rxq: Arc<RxQueues>,
        owns_rx: bool,
        share: Option<u64>,
    ) -> Result<Arc<Self>> {
        let request = sock.is_some();
        let share = share.unwrap_or_else(|| NEXT_ID.fetch_add(1, Ordering::Relaxed));
        Arc::pin_init(
            try_pin_init!(Shared {
                state <- new_spinlock_irq!(State {
                    fid: None,
                    tx_cq: Reports::default(),
                    eq: None,
                    sock,
                    connected: false,
                    draining: false,
                    closing: false,
                    cm_param: KVec::new(),
                    cm_dest: None,
                    cm_request: request,
                    tx: Ring::growing(QUEUE_FIRST, QUEUE)?,
                    pending: KVec::with_capacity(QUEUE_FIRST, GFP_KERNEL)?,
                    resp: KVec::with_capacity(QUEUE_FIRST, GFP_KERNEL)?,
                    resp_out: false,
                    tx_busy: false,
                    tx_again: false,
                    tx_begun: None,
                    rx_running: false,
                    rx_soft: false,
                    rx_again: false,
                    rx_kicked: false,
                    rx_failed: None,
                    next_id: 1,
                    active: 0,
                    parked: None,
                    parked_rma: None,
                    recv_wait: None,
                    dead: false,
                    cm_open: false,
                    cm_deferred: None,
                    shrink_due: None,
                    sent: false,
                }),
                wake <- new_condvar!(),
                idle <- new_condvar!(),
                rx_work <- new_work!("kfi_sockets::rx"),
                tx_work <- new_work!("kfi_sockets::tx"),
                workers <- Workers::new(),
                dest,
                ns,
                mrs,
                rxq,
                owns_rx,
                share,
                on_stalled: AtomicBool::new(false),
            }),
            GFP_KERNEL,
        )
    }

    /// Whether operations may still be queued: the complement of what
    /// makes [`Self::queue`] `ENOTCONN`, so an ended connection counts as
    /// gone from its teardown on, not only once its flush ran.
    pub(crate) fn usable(&self) -> bool {
        let s = self.state.lock();
        s.connected && !s.closing && !s.dead
    }

    /// Hands our operation `op` to the transmitter (`progress::post`):
    /// sent from where it lies, or moved into the transmit queue (a
    /// default left in its place); `EAGAIN` when the queue is full,
    /// `ENOTCONN` when the connection is not up, and then `op` stays where
    /// it is (an RDM dispatcher keeps it queued). Any context but hard
    /// interrupt.
    pub(crate) fn queue(self: &Arc<Self>, op: &mut TxOp) -> Result {
        progress::post(self, op)
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
    /// returns; what was still queued fails with `ECANCELED`. The frame
    /// the receive work has in hand and the responses queued go out
    /// first, for at most [`drain_deadline`]. Process context.
    pub(crate) fn close(&self) {
        self.close_by(drain_deadline());
    }

    /// [`Self::close`], sending the queued responses until `by` at most
    /// (one deadline for all the connections of an RDM endpoint).
    pub(crate) fn close_by(&self, by: Deadline) {
        self.drain(by);
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
            self.rxq.quiesce();
        }
        progress::wait_idle(self);
        self.workers.wait_idle();
        flush(self);
    }

    /// Starts the drain of [`Self::close_by`] without waiting for it: the
    /// receive work takes no new frame from here. Process context.
    pub(crate) fn begin_drain(&self) {
        self.state.lock().draining = true;
    }

    /// Lets the receive work finish the frame in hand (it takes no new
    /// one) and the transmitter send the responses queued, but none of
    /// our operations, until both are done, the connection ends or `by`
    /// passes. The receive work reports a message, then queues its `Ack`
    /// (`rx/recv.rs`; a peer's write or atomic: the CQ entry or counter,
    /// then the answer): a ULP that closes as soon as it has the message
    /// must not make the peer's delivery complete send fail with
    /// `ECANCELED` although it was delivered. Process context.
    fn drain(&self, by: Deadline) {
        let mut s = self.state.lock();
        s.draining = true;
        loop {
            let drained = !s.rx_running && !s.rx_soft && s.resp.is_empty() && !s.resp_out;
            if s.closing || s.dead || !s.connected || drained {
                return;
            }
            // Woken by either work item when it is done with a frame or
            // a response, and when the connection ends.
            let Some(ms) = by.left_ms() else {
                return;
            };
            match self
                .wake
                .wait_interruptible_timeout(&mut s, msecs_to_jiffies(ms))
            {
                CondVarTimeoutResult::Woken { .. } => {}
                // A closing task that is being killed does not wait.
                CondVarTimeoutResult::Timeout | CondVarTimeoutResult::Signal { .. } => return,
            }
        }
    }
}

/// How long closing waits for queued responses to go out: the time one
/// frame may take to leave (`frame_timeout_ms`, its default if that is 0),
/// so a peer that reads nothing holds a close up for no longer.
pub(crate) fn drain_deadline() -> Deadline {
    let ms = match crate::frame_timeout_ms() {
        0 => DRAIN_MS_UNBOUNDED,
        ms => ms,
    };
    Deadline::after_ms(u64::from(ms))
}

/// [`drain_deadline`] when frames have no bound of their own.
const DRAIN_MS_UNBOUNDED: u32 = 5000;

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
        report_end(eq, fid, e);
    }
}

/// The connection is gone: every operation still queued or waiting for a
/// response fails with `ECANCELED` (first the connection is reset if the
/// socket may still read pages one of them sent by reference); held
/// responses are dropped. The receive queues close too if they are the
/// connection's own (MSG). Process context.
pub(crate) fn flush(sh: &Shared) {
    let (tx_cq, resp, pending, begun, sock) = {
        let mut s = sh.state.lock();
        // Nobody queues or sends any more.
        s.connected = false;
        (
            s.tx_cq,
            core::mem::take(&mut s.resp),
            core::mem::take(&mut s.pending),
            s.tx_begun.take(),
            s.sock.clone(),
        )
    };
    drop(resp);
    if let Some(sock) = sock {
        // No failed operation's pages may go out after it is reported.
        if pending.iter().any(|p| splice::in_flight(&sock, p.by_ref)) {
            splice::abort(&sock);
        }
    }
    // A begun frame's operation fails too (one that waits for a response
    // is in `pending`).
    if let Some(Begun {
        job: Job::Op(op, 0, _),
        ..
    }) = &begun
    {
        report_err(tx_cq, &op.entry(), ECANCELED);
    }
    drop(begun);
    // The queued ones, injects too (they complete silently only when
    // sent), one at a time: no list to allocate, so none is lost when
    // memory is short.
    loop {
        let Some(op) = sh.state.lock().tx.pop_front() else {
            break;
        };
        report_err(tx_cq, &op.entry(), ECANCELED);
    }
    // Those whose buffers a response handler is filling are its to report.
    for p in pending.iter().filter(|p| !p.answering) {
        report_err(tx_cq, &p.entry(), ECANCELED);
    }
    if sh.owns_rx {
        sh.rxq.close();
    }
    sh.wake.notify_all();
}

/// We refused a peer's unanswered write with `e` (a write that wants no
/// answer, see `rx/target.rs`): the endpoint gets `e` as an error entry on
/// its EQ, ahead of the `KFI_SHUTDOWN` of the teardown that follows.
/// Nothing if the connection is down or closing, or `KFI_CONNECTED` was
/// not reported yet. Process context.
pub(crate) fn report_refused(sh: &Shared, e: Error) {
    let (eq, fid) = {
        let s = sh.state.lock();
        if s.dead || s.closing || !s.cm_open {
            return;
        }
        (s.eq, s.fid)
    };
    if let (Some(eq), Some(fid)) = (eq, fid) {
        let _ = eq.post_err(fid, e, &[]);
    }
}

/// The connection ended (`e`): the endpoint hears of it, and the transmit
/// work (the only one that may still use the buffers of operations being
/// sent) fails what was queued or waits for a response. Once.
pub(crate) fn teardown(sh: &Arc<Shared>, sock: &Socket, e: Error) {
    let (closing, eq, fid) = {
        let mut s = sh.state.lock();
        if s.dead {
            return;
        }
        s.dead = true;
        if !s.cm_open {
            // `KFI_CONNECTED` is not reported yet: it reports this after.
            s.cm_deferred = Some(e);
        }
        (s.closing || !s.cm_open, s.eq, s.fid)
    };
    // A send in progress fails; the next run of the transmit work flushes.
    sock.shutdown();
    progress::kick_tx(sh);
    // It takes no receive now: one it was chosen to take goes to another.
    sh.rxq.unstall(sh);
    if closing {
        return;
    }
    if let (Some(eq), Some(fid)) = (eq, fid) {
        report_end(eq, fid, e);
    }
}

/// Reports the end `e` of the connection of endpoint `fid`: an error
/// entry if the peer broke the protocol, stalled inside a frame or left
/// one of our operations unanswered (`ETIMEDOUT`), then `KFI_SHUTDOWN`.
pub(crate) fn report_end(eq: EqRef, fid: FidRef, e: Error) {
    if e == EPROTO || e == ETIMEDOUT {
        let _ = eq.post_err(fid, e, &[]);
    }
    let _ = eq.post_shutdown(fid);
}
