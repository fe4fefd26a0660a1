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

use kernel::{
    impl_has_hr_timer, new_spinlock_irq,
    prelude::*,
    sync::{Arc, ArcBorrow, SpinLockIrq},
    time::{
        hrtimer::{
            ArcHrTimerHandle, HrTimer, HrTimerCallback, HrTimerCallbackContext, HrTimerPointer,
            HrTimerRestart, RelativeSoftMode,
        },
        Delta, Instant, Monotonic,
    },
};

use crate::{
    ep::Conn,
    frame::{
        read_header, tag_ext, tampered, write_header, write_header_magic, Buffers, Header,
        FRAME_MAX, F_ACKED, F_ACK_REQ, F_CQ_DATA, F_DATA, F_KNOWN, F_MORE, F_RMA_DATA, F_TAGGED,
        HDR, INJECT_MAX, SLOT, TAG_EXT,
    },
    ib::{
        device::Limits,
        dma::{self, DmaBuf},
        frmr::FastReg,
    },
    ib_sys as sys,
    kfi::{
        kfi_sys as ksys,
        toolkit::completion::{report, report_err, report_recv, CqEntry, Reports},
    },
    rma::{Link, Rma, RmaOp, RESULTS_LEN, RMA_OPS, RMA_WRS},
    tagged::{Broken, TRecv, Tagged},
};

/// Slots each way.
pub(crate) const SLOTS: usize = 32;
/// The longest message.
pub(crate) const MSG_MAX: usize = 16 << 20;
/// The longest message or RMA transfer on a device with limits `l`: what
/// the frames carry, and what one region holds at any alignment.
pub(crate) fn max_msg(l: &Limits) -> usize {
    let region = (l.max_frmr_pages as usize)
        .saturating_sub(1)
        .saturating_mul(4096);
    MSG_MAX.min(region)
}

/// Most sends waiting for credits.
pub(crate) const TX_MAX: usize = SLOTS;
/// How long sends may wait for credits the peer does not return (its ULP
/// posts no receive, or it stopped): then the connection ends with
/// `ETIMEDOUT`.
pub(crate) const CREDIT_WAIT_MS: i64 = 5000;
/// How often a connection's watchdog looks at its waiting sends.
const WATCH_MS: i64 = 250;
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
    sent: bool,
    acked: bool,
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
    /// The peer's messages flagged [`F_ACK_REQ`] placed but not yet
    /// acknowledged.
    acks_due: u64,
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
    /// The longest message a receive takes (the advertised
    /// `max_msg_size`); a longer one is a protocol error.
    max_msg: usize,
    /// Since when the oldest waiting send has not moved (no credit or
    /// free slot for its next frame).
    stalled_since: Option<Instant<Monotonic>>,
    /// Why the connection is being ended (`broken`): `EPROTO` or
    /// `ETIMEDOUT`.
    end_reason: Error,
    /// The endpoint, to end the connection on a protocol error (set while
    /// it is open; its close takes it back).
    owner: Option<Arc<Conn>>,
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
    pub(crate) fn new(max_msg: usize) -> Result<Arc<Self>> {
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
                    acks_due: 0,
                    tagged,
                    rma,
                    up: false,
                    closed: false,
                    broken: false,
                    max_msg,
                    stalled_since: None,
                    end_reason: EPROTO,
                    owner: None,
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
    /// `tagged.rs`), or `ETIMEDOUT` for credits never returned.
    pub(crate) fn end_reason(&self) -> Error {
        self.st.lock().end_reason
    }

    /// Starts the watchdog of sends waiting for credits (when the
    /// connection comes up). Process context.
    pub(crate) fn start_watch(self: &Arc<Self>) -> Watch {
        Watch(self.clone().start(Delta::from_millis(WATCH_MS)))
    }

    /// The watchdog's look: sends that have waited for credits longer
    /// than [`CREDIT_WAIT_MS`] end the connection with `ETIMEDOUT`.
    /// Softirq context.
    fn watch(&self) {
        let mut st = self.st.lock();
        let Some(since) = st.stalled_since else {
            return;
        };
        if st.broken || !st.up || since.elapsed().as_millis() < CREDIT_WAIT_MS {
            return;
        }
        st.stalled_since = None;
        pr_warn!("the peer returned no credits for {CREDIT_WAIT_MS} ms: connection ended\n");
        Self::end(&mut st, ETIMEDOUT);
    }

    /// Sets where operations complete (at `kfi_enable`): the CQs and
    /// counters bound to the transmit and the receive side.
    pub(crate) fn set_cqs(&self, tx: Reports, rx: Reports) {
        let mut st = self.st.lock();
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
        let mut st = self.st.lock();
        st.qp = qp;
        st.ring = ring;
        st.credits = SLOTS;
        st.to_return = 0;
        Ok(())
    }

    /// The connection came up (sends may go) or ended.
    pub(crate) fn set_up(&self, up: bool) {
        let mut st = self.st.lock();
        st.up = up;
        if up {
            Self::pump(&mut st);
            Self::pump_rma(&mut st);
        }
    }

    /// Stops using the QP (before it is drained and destroyed): no more
    /// posting. Any context but hard interrupt.
    pub(crate) fn detach(&self) {
        let mut st = self.st.lock();
        st.qp = core::ptr::null_mut();
        st.held.clear();
    }

    /// Completes every posted receive and every send with frames still to
    /// go as canceled (the endpoint closes or its connection ended), and
    /// refuses new operations once `closing`. Sends already on the wire
    /// complete as their work requests flush.
    pub(crate) fn cancel(&self, closing: bool) {
        let mut st = self.st.lock();
        st.closed |= closing;
        let cq = st.rx_cq;
        if let Some(f) = st.filling.take() {
            report_err(cq, &f.p.entry, ECANCELED);
        }
        for p in st.posted.iter() {
            report_err(cq, &p.entry, ECANCELED);
        }
        st.posted.clear();
        st.tagged.cancel(cq, closing);
        let cq = st.tx_cq;
        // Sends that waited for credits in vain say so.
        let why = if st.broken && st.end_reason == ETIMEDOUT {
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
            report_err(cq, &a.entry, ECANCELED);
        }
        st.awaiting.clear();
        st.acks_due = 0;
        st.rma.cancel(cq);
    }

    /// Takes back the posted receive with `context`: it completes with
    /// `ECANCELED`. `ENOENT` if no such receive waits (one that a message
    /// is arriving into is no longer waiting).
    pub(crate) fn cancel_recv(&self, context: usize) -> Result {
        let mut st = self.st.lock();
        let Some(i) = st.posted.iter().position(|p| p.entry.context == context) else {
            let cq = st.rx_cq;
            return st.tagged.cancel_recv(context, cq);
        };
        let p = st.posted.remove(i).map_err(|_| ENOENT)?;
        report_err(st.rx_cq, &p.entry, ECANCELED);
        Ok(())
    }

    /// `kfi_sendmsg`, or `kfi_tsendmsg` with `tag`: queues the message
    /// and sends what the credits allow at once. An inject goes whole at
    /// once or not at all (`EAGAIN`). Any context but hard interrupt.
    ///
    /// # Safety
    ///
    /// `msg` was passed by kfabric.ko to `sendmsg` or `tsendmsg` (checked
    /// list).
    pub(crate) unsafe fn send(&self, msg: &ksys::kfi_msg, flags: u64, tag: Option<u64>) -> Result {
        // SAFETY: The caller's contract.
        let bufs = unsafe { Buffers::of(msg) }?;
        let inject = flags & ksys::KFI_INJECT != 0;
        let one_frame = if tag.is_some() { INJECT_MAX } else { FRAME_MAX };
        if bufs.total > if inject { one_frame } else { MSG_MAX } {
            return Err(EMSGSIZE);
        }
        let (kind, tag_flag) = match tag {
            Some(_) => (ksys::KFI_TAGGED, F_TAGGED),
            None => (ksys::KFI_MSG, 0),
        };
        let mut p = Pending {
            op: Op {
                entry: CqEntry {
                    context: msg.context as usize,
                    flags: ksys::KFI_SEND | kind,
                    len: bufs.total,
                    asked: flags & ksys::KFI_COMPLETION != 0,
                    ..Default::default()
                },
                report: !inject,
                delivery: !inject
                    && flags & (ksys::KFI_DELIVERY_COMPLETE | ksys::KFI_COMMIT_COMPLETE) != 0,
                seq: 0,
            },
            bufs,
            sent: 0,
            flags: tag_flag
                | if flags & ksys::KFI_REMOTE_CQ_DATA != 0 {
                    F_CQ_DATA
                } else {
                    0
                },
            data: msg.data,
            tag: tag.unwrap_or(0),
        };
        let mut st = self.st.lock();
        if st.closed || !st.up || st.qp.is_null() {
            return Err(ENOTCONN);
        }
        // The room above TX_MAX is for the remote CQ data of writes.
        if st.pending.len() >= TX_MAX {
            return Err(EAGAIN);
        }
        // At most TX_MAX sends wait for the peer's acknowledgement.
        if p.op.delivery
            && st.awaiting.len() + st.pending.iter().filter(|q| q.op.delivery).count() >= TX_MAX
        {
            return Err(EAGAIN);
        }
        if inject {
            // Its buffer is only valid during this call.
            if !st.pending.is_empty() || !Self::can_post(&st) {
                return Err(EAGAIN);
            }
            Self::post_frame(&mut st, &mut p)?;
            // Its buffer is free again: done, for the counter.
            st.tx_cq.count_only(p.op.entry.flags);
            return Ok(());
        }
        st.pending.push_within_capacity(p).map_err(|_| EAGAIN)?;
        Self::pump(&mut st);
        Ok(())
    }

    /// A frame may be posted now: a free slot and a credit to spare.
    fn can_post(st: &State) -> bool {
        st.up && !st.qp.is_null() && st.credits >= 2 && !st.free.is_empty()
    }

    /// Posts the frames of waiting sends that the credits allow, oldest
    /// first. A send that cannot be posted fails. Notes since when the
    /// oldest one waits for credits.
    fn pump(st: &mut State) {
        let mut moved = false;
        while Self::can_post(st) {
            let Some(mut p) = st.pending.first().copied() else {
                break;
            };
            moved = true;
            let done = match Self::post_frame(st, &mut p) {
                Ok(last) => last,
                Err(e) => {
                    if p.op.report {
                        report_err(st.tx_cq, &p.op.entry, e);
                    }
                    true
                }
            };
            if done {
                let _ = st.pending.remove(0);
            } else if let Some(head) = st.pending.first_mut() {
                *head = p;
            }
        }
        if st.pending.is_empty() {
            st.stalled_since = None;
        } else if moved || st.stalled_since.is_none() {
            st.stalled_since = Some(Instant::now());
        }
    }

    /// Posts the next frame of `p`; whether it was the last. The caller
    /// checked [`Self::can_post`].
    fn post_frame(st: &mut State, p: &mut Pending) -> Result<bool> {
        // The first frame of a tagged message carries its tag (every
        // frame but the last has payload, so it is the one at 0).
        let tagged = p.flags & F_TAGGED != 0 && p.sent == 0;
        let ext = if tagged { TAG_EXT } else { 0 };
        let len = (p.bufs.total - p.sent).min(FRAME_MAX - ext);
        let last = p.sent + len == p.bufs.total;
        let slot = st.free.pop().ok_or(EAGAIN)?;
        let credits = st.to_return.min(u16::MAX.into());
        // SAFETY: The ring is live while `qp` is set (attach's contract).
        let ring = unsafe { &*st.ring };
        let buf = &ring.bufs[SLOTS + slot];
        let ack = if last && p.op.delivery { F_ACK_REQ } else { 0 };
        let more = if last { 0 } else { F_MORE };
        let first = if tagged { F_TAGGED } else { 0 };
        let (flags, magic) = tampered(F_DATA | (p.flags & !F_TAGGED) | first | ack | more);
        let h = Header {
            flags,
            credits,
            len: ext + len,
            data: p.data,
        };
        let tag = tag_ext(p.tag, p.bufs.total);
        // SAFETY: A free send slot is no work request's and no other CPU's (taken from `free`
        // under the lock); the ULP's buffers are valid until the send completes, after this
        // frame; `HDR + ext + len <= SLOT`.
        unsafe {
            write_header_magic(buf.addr(), &h, magic);
            core::ptr::copy_nonoverlapping(tag.as_ptr(), buf.addr().add(HDR), ext);
            p.bufs.gather(p.sent, len, buf.addr().add(HDR + ext));
        }
        let mut op = p.op;
        op.seq = st.next_seq;
        st.ops[slot] = if last { Some(op) } else { None };
        let sge = buf.sge(HDR + ext + len, ring.lkey);
        let cqe = (&raw const ring.slots[SLOTS + slot].cqe).cast_mut();
        // SAFETY: `qp` is live (attach's contract); the slot and its
        // buffer stay valid until the request completes.
        match unsafe { dma::post_send(st.qp, sge, cqe) } {
            Ok(()) => {
                st.credits -= 1;
                st.to_return -= credits;
                p.sent += len;
                if ack != 0 {
                    let a = Awaiting {
                        seq: op.seq,
                        entry: op.entry,
                        sent: false,
                        acked: false,
                    };
                    // Cannot fail: `send` keeps TX_MAX sends for delivery
                    // at most.
                    let _ = st.awaiting.push_within_capacity(a);
                    st.next_seq = st.next_seq.wrapping_add(1);
                }
                Ok(last)
            }
            Err(e) => {
                st.ops[slot] = None;
                let _ = st.free.push_within_capacity(slot);
                Err(e)
            }
        }
    }

    /// `kfi_recvmsg`: takes held frames, or queues the receive. Any
    /// context but hard interrupt.
    ///
    /// # Safety
    ///
    /// `msg` was passed by kfabric.ko to `recvmsg` (checked list).
    pub(crate) unsafe fn recv(&self, msg: &ksys::kfi_msg, flags: u64) -> Result {
        // SAFETY: The caller's contract.
        let bufs = unsafe { Buffers::of(msg) }?;
        let p = Posted {
            entry: CqEntry {
                context: msg.context as usize,
                flags: ksys::KFI_RECV | ksys::KFI_MSG,
                buf: bufs.first(),
                asked: flags & ksys::KFI_COMPLETION != 0,
                ..Default::default()
            },
            bufs,
        };
        let mut st = self.st.lock();
        if st.closed || st.broken {
            return Err(ENOTCONN);
        }
        st.posted.push_within_capacity(p).map_err(|_| EAGAIN)?;
        if !st.qp.is_null() {
            // SAFETY: Held slots belong to the live ring (`detach` clears
            // them).
            let ring = unsafe { &*st.ring };
            while !st.held.is_empty() && (st.filling.is_some() || !st.posted.is_empty()) {
                let Ok((index, h)) = st.held.remove(0) else {
                    break;
                };
                Self::place(&mut st, ring, index, &h);
            }
        }
        Self::return_credits(&mut st);
        Ok(())
    }

    /// `kfi_trecvmsg`: the oldest matching held tagged message completes
    /// it at once, else it waits (`tagged.rs`). Any context but hard
    /// interrupt.
    ///
    /// # Safety
    ///
    /// `t` was passed by kfabric.ko to `trecvmsg` (checked list).
    pub(crate) unsafe fn trecv(&self, t: &ksys::kfi_msg_tagged, flags: u64) -> Result {
        // SAFETY: The caller's contract.
        let r = unsafe { TRecv::of(&t.msg, flags) }?;
        let mut st = self.st.lock();
        if st.closed || st.broken {
            return Err(ENOTCONN);
        }
        let cq = st.rx_cq;
        st.tagged.post(t.tag, t.ignore, r, cq)
    }

    /// Copies the frame in receive slot `index` into the receive being
    /// filled (or the oldest posted one), completes that receive at the
    /// message's last frame, and reposts the slot. The caller checked
    /// that there is such a receive.
    fn place(st: &mut State, ring: &Ring, index: usize, h: &Header) {
        let f = st.filling.take().or_else(|| {
            st.posted.remove(0).ok().map(|p| Filling {
                p,
                placed: 0,
                total: 0,
            })
        });
        let Some(mut f) = f else {
            return;
        };
        let src = ring.bufs[index].addr().wrapping_add(HDR);
        let room = f.p.bufs.total.saturating_sub(f.placed);
        // SAFETY: The slot holds `h.len` bytes after the header (checked
        // at receipt); the ULP's buffers are valid until this receive
        // completes.
        let n = unsafe { f.p.bufs.scatter(f.placed, src, h.len.min(room)) };
        f.placed += n;
        f.total = f.total.saturating_add(h.len);
        if f.total > st.max_msg {
            // Longer than any message may be: the receive ends with what
            // it holds (EMSGSIZE, olen the bytes beyond it so far), and so
            // does the connection.
            f.p.entry.len = f.placed;
            report_recv(st.rx_cq, &f.p.entry, f.total - f.placed);
            Self::protocol_error(st, "message longer than max_msg_size");
            return;
        }
        Self::repost(st, ring, index);
        if h.flags & F_MORE != 0 {
            st.filling = Some(f);
            return;
        }
        f.p.entry.len = f.placed;
        if h.flags & F_CQ_DATA != 0 {
            f.p.entry.flags |= ksys::KFI_REMOTE_CQ_DATA;
            f.p.entry.data = h.data;
        }
        report_recv(st.rx_cq, &f.p.entry, f.total - f.placed);
        if h.flags & F_ACK_REQ != 0 {
            // Placed: the sender's delivery completion may go.
            st.acks_due = st.acks_due.saturating_add(1);
        }
    }

    /// The peer acknowledged the placement of `n` of our messages, oldest
    /// first; more than wait for it is a protocol error.
    fn acked(st: &mut State, n: u64) {
        let mut left = n;
        for a in st.awaiting.iter_mut().filter(|a| !a.acked) {
            if left == 0 {
                break;
            }
            a.acked = true;
            left -= 1;
        }
        if left > 0 || n == 0 {
            Self::protocol_error(st, "acknowledgement of no message");
            return;
        }
        Self::complete_delivered(st);
    }

    /// Completes the sends for delivery that are sent and acknowledged,
    /// oldest first.
    fn complete_delivered(st: &mut State) {
        while let Some(a) = st.awaiting.first().copied() {
            if !(a.sent && a.acked) {
                return;
            }
            let _ = st.awaiting.remove(0);
            report(st.tx_cq, &a.entry);
        }
    }

    /// Gives receive slot `index` back to the device and counts the credit.
    fn repost(st: &mut State, ring: &Ring, index: usize) {
        if st.qp.is_null() {
            return;
        }
        // SAFETY: `qp` is live and the ring is its (attach's contract).
        if unsafe { post_recv_slot(st.qp, ring, index) }.is_ok() {
            st.to_return += 1;
        }
    }

    /// A receive slot's work request completed.
    fn received(&self, index: usize, d: &dma::Done) {
        let mut st = self.st.lock();
        if !d.ok || st.qp.is_null() || st.broken {
            // A broken peer's frames are dropped, their slots not
            // reposted: it cannot make this side work for ever.
            return;
        }
        // SAFETY: A completion for a slot of the attached ring.
        let ring = unsafe { &*st.ring };
        let Some(h) = read_header(ring.bufs[index].bytes(), d.len) else {
            Self::protocol_error(&mut st, "malformed frame");
            return;
        };
        if h.flags & !F_KNOWN != 0 {
            Self::protocol_error(&mut st, "unknown frame flags");
            return;
        }
        if h.flags & F_TAGGED != 0 && h.flags & (F_DATA | F_RMA_DATA) != F_DATA {
            Self::protocol_error(&mut st, "tag on a frame that is no message");
            return;
        }
        // An acknowledgement is a header only; a request for one is on
        // the last frame of a message.
        let bad_ack = h.flags & F_ACKED != 0 && (h.flags != F_ACKED || h.len != 0);
        let bad_req =
            h.flags & F_ACK_REQ != 0 && h.flags & (F_DATA | F_MORE | F_RMA_DATA) != F_DATA;
        if bad_ack || bad_req {
            Self::protocol_error(&mut st, "bad acknowledgement flags");
            return;
        }
        st.credits = st.credits.saturating_add(h.credits).min(SLOTS);
        if h.flags & F_RMA_DATA != 0 {
            // Only the header of a write's remote CQ data, between
            // messages. Its completion is the peer's to decide, so a CQ
            // with no room for it ends the connection: a flood must not
            // go on crowding out the endpoint's own completions.
            if h.len != 0
                || h.flags & (F_MORE | F_CQ_DATA) != F_CQ_DATA
                || st.filling.is_some()
                || st.tagged.mid_message()
            {
                Self::protocol_error(&mut st, "bad remote CQ data frame");
                return;
            }
            let e = CqEntry {
                flags: ksys::KFI_RMA | ksys::KFI_REMOTE_WRITE | ksys::KFI_REMOTE_CQ_DATA,
                data: h.data,
                // Not the ULP's to ask for: a selective CQ reports it too.
                asked: true,
                ..Default::default()
            };
            if st.rx_cq.try_report(&e).is_err() {
                Self::protocol_error(&mut st, "remote CQ data flood");
                return;
            }
            Self::repost(&mut st, ring, index);
        } else if h.flags & F_DATA == 0 {
            if h.len != 0 || (h.flags != 0 && h.flags != F_ACKED) {
                Self::protocol_error(&mut st, "bad credit frame");
                return;
            }
            if h.flags == F_ACKED {
                Self::acked(&mut st, h.data);
                if st.broken {
                    return;
                }
            }
            Self::repost(&mut st, ring, index);
        } else if h.flags & F_MORE != 0 && h.len != FRAME_MAX {
            // Every frame of a message but its last is full, so a message
            // of max_msg_size has a bounded number of frames.
            Self::protocol_error(&mut st, "short frame inside a message");
            return;
        } else {
            match st.tagged.is_tagged(&h) {
                Err(b) => {
                    Self::broken(&mut st, b);
                    return;
                }
                Ok(true) => {
                    if !Self::tagged_frame(&mut st, ring, index, &h) {
                        return;
                    }
                }
                Ok(false)
                    if !st.held.is_empty() || (st.filling.is_none() && st.posted.is_empty()) =>
                {
                    // Cannot overflow: at most SLOTS slots exist.
                    let _ = st.held.push_within_capacity((index, h));
                }
                Ok(false) => Self::place(&mut st, ring, index, &h),
            }
        }
        Self::pump(&mut st);
        Self::return_credits(&mut st);
    }

    /// Takes the frame of a tagged message in receive slot `index` (see
    /// `tagged.rs`) and reposts the slot; `false` when the frame ended the
    /// connection.
    fn tagged_frame(st: &mut State, ring: &Ring, index: usize, h: &Header) -> bool {
        // The header was checked at receipt: `HDR + h.len` bytes arrived.
        let end = HDR.saturating_add(h.len);
        let payload = ring.bufs[index].bytes().get(HDR..end).unwrap_or(&[]);
        let (cq, max) = (st.rx_cq, st.max_msg);
        match st.tagged.frame(h, payload, cq, max) {
            Ok(done) => {
                if done && h.flags & F_ACK_REQ != 0 {
                    // Placed or held: the sender's delivery completion may
                    // go.
                    st.acks_due = st.acks_due.saturating_add(1);
                }
                Self::repost(st, ring, index);
                true
            }
            Err(b) => {
                Self::broken(st, b);
                false
            }
        }
    }

    /// A send slot's work request completed.
    fn sent(&self, slot: usize, d: &dma::Done) {
        let mut st = self.st.lock();
        let op = st.ops.get_mut(slot).and_then(Option::take);
        let _ = st.free.push_within_capacity(slot);
        if let Some(op) = op.filter(|o| o.report && o.delivery) {
            // Gone already when the connection ended meanwhile.
            if let Some(i) = st.awaiting.iter().position(|a| a.seq == op.seq) {
                if d.ok {
                    st.awaiting[i].sent = true;
                    Self::complete_delivered(&mut st);
                } else {
                    let _ = st.awaiting.remove(i);
                    report_err(st.tx_cq, &op.entry, if d.flushed { ECANCELED } else { EIO });
                }
            }
        } else if let Some(op) = op.filter(|o| o.report) {
            if d.ok {
                report(st.tx_cq, &op.entry);
            } else {
                report_err(st.tx_cq, &op.entry, if d.flushed { ECANCELED } else { EIO });
            }
        }
        Self::pump(&mut st);
        Self::return_credits(&mut st);
    }

    /// `kfi_readmsg`/`kfi_writemsg`: queues `op` and posts what the free
    /// requests allow. Any context but hard interrupt.
    pub(crate) fn rma(&self, op: RmaOp) -> Result {
        let mut st = self.st.lock();
        if st.closed || !st.up || st.qp.is_null() {
            return Err(ENOTCONN);
        }
        if op.is_empty() {
            report(st.tx_cq, &op.entry);
            return Ok(());
        }
        st.rma.submit(op)?;
        Self::pump_rma(&mut st);
        Ok(())
    }

    /// Posts waiting RMA requests; queues the remote CQ data of writes
    /// that are all posted (it follows them on the QP, so the peer
    /// reports it after the data is placed).
    fn pump_rma(st: &mut State) {
        if !st.up || st.qp.is_null() {
            return;
        }
        // SAFETY: The ring is live while `qp` is set (attach's contract).
        let ring = unsafe { &*st.ring };
        let link = Link {
            qp: st.qp,
            dev: ring.dev,
            lkey: ring.lkey,
            write_sges: ring.sges.0,
            read_sges: ring.sges.1,
            results: &ring.results,
        };
        let State {
            rma,
            pending,
            tx_cq,
            ..
        } = st;
        rma.pump(
            &link,
            *tx_cq,
            |i| (&raw const ring.slots[2 * SLOTS + i].cqe).cast_mut(),
            |data| {
                let p = Pending {
                    op: Op {
                        entry: CqEntry::default(),
                        report: false,
                        delivery: false,
                        seq: 0,
                    },
                    bufs: Buffers::default(),
                    sent: 0,
                    flags: F_CQ_DATA | F_RMA_DATA,
                    data,
                    tag: 0,
                };
                // Cannot fail: room for one per RMA operation is kept.
                let _ = pending.push_within_capacity(p);
            },
        );
        Self::pump(st);
    }

    /// An RMA request completed.
    fn rma_done(&self, index: usize, d: &dma::Done) {
        let mut st = self.st.lock();
        // The request's pieces were mapped for the ring's device, which
        // outlives the drain that completes the last request.
        // SAFETY: Set at attach, live until the drain is done.
        let ring = unsafe { st.ring.as_ref() };
        let dev = ring.map_or(core::ptr::null_mut(), |r| r.dev);
        let cq = st.tx_cq;
        st.rma.done(index, d, dev, ring.map(|r| &r.results), cq);
        Self::pump_rma(&mut st);
    }

    /// Posts the registration of `fr` with `access` on this connection's
    /// QP; `ENOTCONN` when it is not up. Any context but hard interrupt.
    pub(crate) fn post_reg(&self, fr: &mut FastReg, access: u32) -> Result {
        let st = self.st.lock();
        if st.closed || !st.up || st.qp.is_null() {
            return Err(ENOTCONN);
        }
        // SAFETY: A live QP of the domain's PD (attach's contract); its
        // teardown drains it, completing the request first.
        unsafe { fr.post(st.qp, access) }
    }

    /// Sends a header-only frame when half the peer's credits are due
    /// (on the credit kept for that), or acknowledgements (on a credit to
    /// spare, as a message frame); it carries both.
    fn return_credits(st: &mut State) {
        let credits_due = st.to_return >= SLOTS / 2 && st.credits >= 1;
        let acks_due = st.acks_due > 0 && st.credits >= 2;
        if st.qp.is_null() || st.broken || !(credits_due || acks_due) {
            return;
        }
        let Some(slot) = st.free.pop() else {
            return;
        };
        // SAFETY: Attached ring (qp is set).
        let ring = unsafe { &*st.ring };
        let credits = st.to_return.min(u16::MAX.into());
        let buf = &ring.bufs[SLOTS + slot];
        let acks = st.acks_due;
        let h = Header {
            flags: if acks > 0 { F_ACKED } else { 0 },
            credits,
            len: 0,
            data: acks,
        };
        // SAFETY: A free send slot, ours under the lock.
        unsafe { write_header(buf.addr(), &h) };
        let sge = buf.sge(HDR, ring.lkey);
        let cqe = (&raw const ring.slots[SLOTS + slot].cqe).cast_mut();
        // SAFETY: As in `post_frame`.
        if unsafe { dma::post_send(st.qp, sge, cqe) }.is_ok() {
            st.credits -= 1;
            st.to_return -= credits;
            st.acks_due = 0;
        } else {
            let _ = st.free.push_within_capacity(slot);
        }
    }
}

/// Posts receive slot `index` of `ring` on `qp`.
///
/// # Safety
///
/// `qp` is live; the ring stays valid until the request completes.
unsafe fn post_recv_slot(qp: *mut sys::ib_qp, ring: &Ring, index: usize) -> Result {
    let sge = ring.bufs[index].sge(SLOT, ring.lkey);
    let cqe = (&raw const ring.slots[index].cqe).cast_mut();
    // SAFETY: The caller's contract.
    unsafe { dma::post_recv(qp, sge, cqe) }
}
