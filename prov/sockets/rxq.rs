// SPDX-License-Identifier: GPL-2.0

//! The receive side of an endpoint: posted receives, posted tagged
//! receives and tagged messages held until their receive is posted, with
//! the CQ receives complete to. A MSG endpoint's one connection takes from
//! them; an RDM endpoint's connections to all its peers share them.
//!
//! Posting works in any context but hard interrupt (the lists are
//! allocated when the endpoint is opened, but for the receives posted
//! while another post reports, `RxState::due`, which may fail a post
//! with `ENOMEM`). A message with no receive is
//! held within the endpoint's bounds (`held.rs`, the tag matcher); one
//! that finds no room parks its connection, which files itself in
//! `stalled`; posting a receive queues that work again.

use core::sync::atomic::Ordering;
use kernel::{
    alloc::kvec::InsertError,
    new_condvar, new_spinlock_irq, new_work,
    prelude::*,
    sync::{Arc, CondVar, SpinLockIrq},
    workqueue::{impl_has_work, Work, WorkItem},
};

use crate::{
    buflist::List,
    conn::{Shared, QUEUE, UNEXP_MAX},
    held::HeldMsgs,
    kfi::{
        kfi_sys as sys,
        toolkit::{
            completion::{report_err, CqEntry, Reports},
            tags::{Limits, Matched, TagMatcher},
        },
    },
    op::{RxOp, Unexpected},
    progress, rx, wq,
};

pub(crate) struct RxState {
    /// Where receives and a peer's accesses to our regions complete.
    pub(crate) cq: Reports,
    /// No more receives: the endpoint closed or its connection ended.
    pub(crate) closing: bool,
    /// Posted receives, oldest first.
    pub(crate) rx: KVec<RxOp>,
    /// Untagged messages that came before their receive (`held.rs`); a
    /// receive is queued in `rx` only while none is held.
    pub(crate) held: HeldMsgs,
    /// Posted tagged receives and the tagged messages held for them.
    pub(crate) tagged: TagMatcher<RxOp, Unexpected>,
    /// Connections whose receive work waits for a receive to be posted,
    /// each once (`Shared::on_stalled`): at most the endpoint's
    /// connections.
    pub(crate) stalled: KVec<Arc<Shared>>,
    /// A post receives for a stalled connection itself (`post_one`).
    pub(crate) inline_rx: bool,
    /// Receives posted while another post was reporting a receive that
    /// took a held message (`reporting`): that post posts them in turn,
    /// in order, and reports those that take held messages. A CQ handler
    /// that reposts the receive that completed then never nests one post
    /// and one handler call per held message on its stack, and receives
    /// still complete in the order of their messages. Each one had room
    /// in its queue when it was posted (`EAGAIN` otherwise), so it is
    /// queued without fail later; one that fails (its endpoint closed) is
    /// reported as a failed receive. A post reports [`REPORT_BUDGET`]
    /// receives at most; the due work then posts the rest, as many per
    /// run (as before, a close or cancel may report `ECANCELED` ahead of
    /// the receive being reported meanwhile).
    due: KVec<Deferred>,
    /// A post, or the due work, is reporting (see `due`).
    reporting: bool,
    /// The due work is queued or running; it is the one reporting then
    /// (`reporting` is set too).
    due_work: bool,
}

/// A receive posted while another post was reporting (`RxState::due`).
enum Deferred {
    Msg(RxOp),
    Tagged {
        tag: u64,
        ignore: u64,
        op: RxOp,
    },
    /// A receive that took a held message in a post that may not sleep,
    /// whose copy was too large for it ([`ATOMIC_COPY_MAX`]): the due
    /// work copies and reports it. It is no longer posted: a cancel does
    /// not find it.
    Taken(Taken),
}

impl Deferred {
    fn is_tagged(&self) -> bool {
        match self {
            Deferred::Msg(_) => false,
            Deferred::Tagged { .. } => true,
            Deferred::Taken(t) => matches!(t, Taken::Tagged(_)),
        }
    }

    /// The context of a receive a cancel may take back.
    fn cancelable(&self) -> Option<usize> {
        match self {
            Deferred::Msg(op) | Deferred::Tagged { op, .. } => Some(op.context),
            Deferred::Taken(_) => None,
        }
    }

    /// Its completion, should it fail.
    fn entry(&self) -> CqEntry {
        match self {
            Deferred::Msg(op) => op.entry(sys::KFI_RECV | sys::KFI_MSG),
            Deferred::Tagged { op, .. } => op.entry(sys::KFI_RECV | sys::KFI_TAGGED),
            Deferred::Taken(t) => t.entry(),
        }
    }
}

/// A receive that took a held message: to report.
enum Taken {
    Msg(Unexpected, RxOp),
    Tagged(Matched<RxOp, Unexpected>),
}

impl Taken {
    fn report(self, cq: Reports) {
        match self {
            Taken::Msg(u, op) => rx::complete_held(cq, &op, sys::KFI_MSG, 0, u.data, &u.payload),
            Taken::Tagged(m) => rx::complete_matched(cq, &m),
        }
    }

    /// Payload bytes its report copies.
    fn copies(&self) -> usize {
        match self {
            Taken::Msg(u, _) => u.payload.len(),
            Taken::Tagged(m) => m.msg.payload.len(),
        }
    }

    /// Its completion, should it fail.
    fn entry(&self) -> CqEntry {
        match self {
            Taken::Msg(_, op) => op.entry(sys::KFI_RECV | sys::KFI_MSG),
            Taken::Tagged(m) => m.recv.entry(sys::KFI_RECV | sys::KFI_TAGGED),
        }
    }
}

/// What posting a receive came to (`RxQueues::apply`).
enum Posted {
    /// Queued for a message to come.
    Queued,
    /// It took a held message: to report.
    Took(Taken),
    /// It failed (the endpoint closed, no room): to report, unless its
    /// post can still return the error.
    Failed(CqEntry, Error),
}

impl Posted {
    fn report(self, cq: Reports) {
        match self {
            Posted::Queued => {}
            Posted::Took(t) => t.report(cq),
            Posted::Failed(e, err) => report_err(cq, &e, err),
        }
    }

    /// Payload bytes its report copies.
    fn copies(&self) -> usize {
        match self {
            Posted::Took(t) => t.copies(),
            Posted::Queued | Posted::Failed(..) => 0,
        }
    }
}

/// The share of the unexpected queues' bounds the connections of one
/// peer host of an RDM endpoint may use (`Shared::share`), however many
/// and however often they come: a quarter (16 messages, a quarter of
/// `unexpected_bytes_max`; a larger message waits in the socket for its
/// receive), so one host's unreceived messages or unmatched tags park
/// that host's connections only.
const PEER_SHARE_DIV: usize = 4;

/// Receives one post reports at most, its own included (those that take
/// held messages or fail, each with its handler call): a handler that
/// reposts while its peer keeps sending would otherwise keep the posting
/// caller, maybe a softirq, for as long as the peer likes. The due work
/// (`RxQueues::due_work`) posts the rest, as many per run.
const REPORT_BUDGET: usize = 16;

/// Payload bytes a post that may not sleep (a softirq, a caller holding a
/// spinlock) copies from held messages at most, as the data callback's
/// pass (`rx/soft.rs`): a peer's held messages are up to the endpoint's
/// `unexpected_bytes_max`. The due work copies the rest; a single larger
/// message goes to it whole.
const ATOMIC_COPY_MAX: usize = 256 << 10;

/// The receive queues of one endpoint.
#[pin_data]
pub(crate) struct RxQueues {
    #[pin]
    pub(crate) state: SpinLockIrq<RxState>,
    /// Posts what is left in `RxState::due` when a post has reported its
    /// budget, in process context.
    #[pin]
    due_work: Work<RxQueues>,
    /// Woken when the due work ends ([`RxQueues::quiesce`]).
    #[pin]
    idle: CondVar,
}

impl_has_work! {
    impl HasWork<Self> for RxQueues { self.due_work }
}

impl WorkItem for RxQueues {
    type Pointer = Arc<RxQueues>;

    fn run(this: Arc<RxQueues>) {
        let _noio = wq::NoIo::begin();
        this.post_due(0, 0, true);
    }
}

impl RxQueues {
    /// Empty queues with room for `QUEUE` receives of each kind, for the
    /// one connection of a MSG endpoint. Process context.
    pub(crate) fn new() -> Result<Arc<Self>> {
        Self::with_share(1)
    }

    /// As [`Self::new`], for the connections of an RDM endpoint, those of
    /// each peer host with one share of the unexpected queues
    /// (`PEER_SHARE_DIV`).
    pub(crate) fn new_shared() -> Result<Arc<Self>> {
        Self::with_share(PEER_SHARE_DIV)
    }

    /// Empty queues; a source (`Shared::share`) holds at most `1 / div`
    /// of the unexpected queues' bounds.
    fn with_share(div: usize) -> Result<Arc<Self>> {
        let bytes = crate::unexpected_bytes_max();
        Arc::pin_init(
            try_pin_init!(Self {
                state <- new_spinlock_irq!(RxState {
                    cq: Reports::default(),
                    closing: false,
                    rx: KVec::with_capacity(QUEUE, GFP_KERNEL)?,
                    held: HeldMsgs::new(UNEXP_MAX, bytes, div)?,
                    tagged: TagMatcher::new(Limits {
                        posted: QUEUE,
                        held: UNEXP_MAX,
                        held_bytes: bytes,
                        source_held: (UNEXP_MAX / div).max(1),
                        source_bytes: bytes / div,
                    })?,
                    stalled: KVec::new(),
                    inline_rx: false,
                    due: KVec::new(),
                    reporting: false,
                    due_work: false,
                }),
                due_work <- new_work!("kfi_sockets::rx_due"),
                idle <- new_condvar!("kfi_sockets::rx_due_idle"),
            }),
            GFP_KERNEL,
        )
    }

    /// Sets where receives complete (a bind).
    pub(crate) fn set_reports(&self, r: Reports) {
        self.state.lock().cq = r;
    }

    pub(crate) fn cq(&self) -> Reports {
        self.state.lock().cq
    }

    /// `kfi_recvmsg` with `flags`: takes the oldest held message, else
    /// queues the receive (`EAGAIN` when `QUEUE` wait).
    pub(crate) fn post(self: &Arc<Self>, m: &sys::kfi_msg, flags: u64) -> Result {
        let op = RxOp {
            context: m.context as usize,
            asked: flags & sys::KFI_COMPLETION != 0,
            bufs: List::of_msg(m)?,
        };
        self.post_one(Deferred::Msg(op))
    }

    /// Posts `d` now, or, while another post reports, leaves it to that
    /// one (see `RxState::due`); reports it if it took a held message, and
    /// then what was left meanwhile, within [`REPORT_BUDGET`]. A caller
    /// that may sleep (`progress::may_receive_inline`) then receives for a
    /// connection that waited for a receive, itself (`rx::run_inline`);
    /// the others' receive work is queued. Any context but hard interrupt.
    fn post_one(self: &Arc<Self>, d: Deferred) -> Result {
        let inline = progress::may_receive_inline();
        let bounded = !progress::may_sleep();
        let (first, mine, res) = {
            let mut s = self.state.lock();
            if s.closing {
                return Err(ENOTCONN);
            }
            if s.reporting {
                // Room now: only the reporting post queues receives while
                // it reports, so this one will find it.
                let tagged = matches!(d, Deferred::Tagged { .. });
                let queued = if tagged { s.tagged.len().0 } else { s.rx.len() };
                let before = s.due.iter().filter(|e| e.is_tagged() == tagged).count();
                if queued.saturating_add(before) >= QUEUE {
                    return Err(EAGAIN);
                }
                s.due.reserve(1, GFP_ATOMIC)?;
                // Within the room just reserved: cannot fail.
                return s.due.push_within_capacity(d).map_err(|_| ENOMEM);
            }
            let (posted, mine) = Self::apply_taking(&mut s, d, inline);
            if mine.is_some() {
                s.inline_rx = true;
            }
            match posted {
                Posted::Queued => (None, mine, Ok(())),
                // The caller still has its receive: it hears of the error.
                Posted::Failed(_, e) => (None, mine, Err(e)),
                Posted::Took(t) if bounded && t.copies() > ATOMIC_COPY_MAX => {
                    s.reporting = true;
                    let first = self.leave_to_work(&mut s, t).map(|p| (p, s.cq));
                    (first, mine, Ok(()))
                }
                p => {
                    s.reporting = true;
                    (Some((p, s.cq)), mine, Ok(()))
                }
            }
        };
        if let Some((first, cq)) = first {
            let copied = first.copies();
            first.report(cq);
            self.post_due(1, copied, false);
        }
        if let Some(sh) = mine {
            rx::run_inline(sh);
            self.state.lock().inline_rx = false;
        }
        res
    }

    /// The oldest stalled connection that can go on now (as
    /// [`Self::resume`] chooses, out of the same `receives`), for the
    /// caller to receive for itself, counted as a user of it
    /// (`progress::begin_rx_inline`); taken off the list. None while
    /// another post of the endpoint receives inline: a handler that posts
    /// again from within that receive does not nest a second one (for
    /// another peer of an RDM endpoint, and so on).
    fn take_stalled(s: &mut RxState, receives: &mut usize) -> Option<Arc<Shared>> {
        if s.inline_rx {
            return None;
        }
        let RxState {
            held,
            tagged,
            stalled,
            ..
        } = s;
        let i = stalled
            .iter()
            .position(|sh| rx::may_go_on(sh, receives, held, tagged))?;
        let sh = stalled.remove(i).ok()?;
        sh.on_stalled.store(false, Ordering::Relaxed);
        // Else it closes: its close looks after it, and passes on what it
        // was chosen for (`unstall`). The reference is not the last (see
        // `unstall`: the closing owner drops its own only after it has
        // taken this lock).
        progress::begin_rx_inline(&sh).then_some(sh)
    }

    /// Posts `d`, with the lock held, then queues the receive work of the
    /// stalled connections that can go on ([`Self::resume`]).
    fn apply(s: &mut RxState, d: Deferred) -> Posted {
        Self::apply_taking(s, d, false).0
    }

    /// [`Self::apply`]; with `inline`, when `d` is a receive that was
    /// queued, the first of those connections is not queued but returned
    /// for the caller to receive for itself ([`Self::take_stalled`]).
    fn apply_taking(s: &mut RxState, d: Deferred, inline: bool) -> (Posted, Option<Arc<Shared>>) {
        if s.closing {
            return (Posted::Failed(d.entry(), ECANCELED), None);
        }
        let posted = Self::enqueue(s, d);
        // The receive, or the room of the held message it took, may be
        // what they wait for.
        let mut receives = s.rx.len();
        let mine = match posted {
            Posted::Queued if inline => Self::take_stalled(s, &mut receives),
            _ => None,
        };
        Self::resume_with(s, receives);
        (posted, mine)
    }

    /// Posts `d` (the lock held), but for the stalled connections.
    fn enqueue(s: &mut RxState, d: Deferred) -> Posted {
        match d {
            Deferred::Msg(op) => {
                // The oldest held message, if any, is this receive's.
                if let Some(u) = s.held.take() {
                    return Posted::Took(Taken::Msg(u, op));
                }
                let e = op.entry(sys::KFI_RECV | sys::KFI_MSG);
                if s.rx.len() >= QUEUE {
                    return Posted::Failed(e, EAGAIN);
                }
                // Room for `QUEUE` receives was allocated with the queue.
                match s.rx.push_within_capacity(op) {
                    Ok(()) => Posted::Queued,
                    Err(_) => Posted::Failed(e, ENOMEM),
                }
            }
            Deferred::Tagged { tag, ignore, op } => {
                let e = op.entry(sys::KFI_RECV | sys::KFI_TAGGED);
                match s.tagged.post(tag, ignore, op) {
                    Ok(Some(m)) => Posted::Took(Taken::Tagged(m)),
                    Ok(None) => Posted::Queued,
                    Err(err) => Posted::Failed(e, err),
                }
            }
            Deferred::Taken(t) => Posted::Took(t),
        }
    }

    /// Leaves `t`, taken by the receive a reporting post (`reporting` is
    /// set) came to, at the front of `due` for the due work to copy and
    /// report in process context, and queues that work; with the lock
    /// held. The post is then done: the work reports the rest. Returns
    /// `t` to report at once if `due` has no room for it (an atomic
    /// allocation failed).
    fn leave_to_work(self: &Arc<Self>, s: &mut RxState, t: Taken) -> Option<Posted> {
        let d = Deferred::Taken(t);
        let left = match s.due.reserve(1, GFP_ATOMIC) {
            Ok(()) => s.due.insert_within_capacity(0, d),
            Err(_) => Err(InsertError::OutOfCapacity(d)),
        };
        match left {
            Ok(()) => {
                // No work is active while a post reports (see `post_due`).
                s.due_work = true;
                let _ = wq::queue().enqueue(self.clone());
                None
            }
            Err(InsertError::OutOfCapacity(d) | InsertError::IndexOutOfBounds(d)) => {
                Some(Self::apply(s, d))
            }
        }
    }

    /// The reporting post (`by_work`: the due work), which has reported
    /// `reported` receives and copied `copied` bytes of held messages,
    /// posts in order the receives left to it, and reports those that
    /// take held messages or fail, until none is left or it has reported
    /// [`REPORT_BUDGET`]: then it leaves the rest to the due work, queued
    /// (again, if it is the one) behind the other work. A post that may
    /// not sleep also leaves to it the receive whose copy would take it
    /// past [`ATOMIC_COPY_MAX`].
    fn post_due(self: &Arc<Self>, mut reported: usize, mut copied: usize, by_work: bool) {
        let bounded = !by_work && !progress::may_sleep();
        loop {
            let (p, cq) = {
                let mut s = self.state.lock();
                if reported >= REPORT_BUDGET && !s.due.is_empty() {
                    // `reporting` stays set: the work reports for us. A
                    // post only reports while the work is not active, and
                    // a running work is no longer queued, so this queues
                    // it (were it queued, that run would post the rest).
                    s.due_work = true;
                    let _ = wq::queue().enqueue(self.clone());
                    return;
                }
                let d = match s.due.remove(0) {
                    Ok(d) => d,
                    Err(_) => {
                        s.reporting = false;
                        // Its room (grown only while handlers posted) goes
                        // back.
                        s.due = KVec::new();
                        if by_work {
                            s.due_work = false;
                            self.idle.notify_all();
                        }
                        return;
                    }
                };
                let p = match Self::apply(&mut s, d) {
                    Posted::Took(t)
                        if bounded && copied.saturating_add(t.copies()) > ATOMIC_COPY_MAX =>
                    {
                        match self.leave_to_work(&mut s, t) {
                            Some(p) => p,
                            None => return,
                        }
                    }
                    p => p,
                };
                (p, s.cq)
            };
            if !matches!(p, Posted::Queued) {
                reported += 1;
            }
            copied = copied.saturating_add(p.copies());
            p.report(cq);
        }
    }

    /// Waits, after [`Self::close`], until the due work has ended: it
    /// reports nothing more once this returns (the CQ may be closed next).
    /// Process context, from the ULP's close only: never from a handler
    /// (which may not sleep), nor from a work item of the provider's queue
    /// (under memory pressure its one rescuer could be this very wait).
    pub(crate) fn quiesce(&self) {
        let mut s = self.state.lock();
        while s.due_work {
            self.idle.wait(&mut s);
        }
    }

    /// Queues the receive work of the stalled connections that can go on
    /// now (`rx::may_go_on`: their message has a receive, or room to be
    /// held), oldest first, and takes them off the list; all of them once
    /// the queues close. A posted untagged receive goes on to one of them
    /// only, not to all: with many peers parked, a post must not wake every
    /// one of them to find it taken. A connection so chosen that ends
    /// before it takes the receive passes it on (`unstall`).
    /// Under the lock: `unstall` then knows that no reference it dropped
    /// from the list is held elsewhere, so none is ever dropped last here
    /// (which could free a connection in the poster's context).
    pub(crate) fn resume(s: &mut RxState) {
        let receives = s.rx.len();
        Self::resume_with(s, receives);
    }

    /// [`Self::resume`], with `receives` of the posted untagged receives
    /// left to give out.
    fn resume_with(s: &mut RxState, mut receives: usize) {
        let RxState {
            closing,
            held,
            tagged,
            stalled,
            ..
        } = s;
        stalled.retain(|sh| {
            if !*closing && !rx::may_go_on(sh, &mut receives, held, tagged) {
                return true;
            }
            sh.on_stalled.store(false, Ordering::Relaxed);
            progress::kick_rx(sh);
            false
        });
    }

    /// Forgets a connection that closes or ended (it waits for nothing any
    /// more), and lets another go on with what it may have been chosen
    /// for ([`Self::resume`]). Any context but hard interrupt.
    pub(crate) fn unstall(&self, sh: &Shared) {
        // Not the last references: the closing owner, or the work that
        // ends it, holds one.
        let mut s = self.state.lock();
        s.stalled.retain(|c| !core::ptr::eq(&**c, sh));
        sh.on_stalled.store(false, Ordering::Relaxed);
        Self::resume(&mut s);
    }

    /// `kfi_trecvmsg`: takes the oldest matching held message, else
    /// queues the receive.
    pub(crate) fn post_tagged(self: &Arc<Self>, t: &sys::kfi_msg_tagged, flags: u64) -> Result {
        let op = RxOp {
            context: t.msg.context as usize,
            asked: flags & sys::KFI_COMPLETION != 0,
            bufs: List::of_msg(&t.msg)?,
        };
        self.post_one(Deferred::Tagged {
            tag: t.tag,
            ignore: t.ignore,
            op,
        })
    }

    /// `kfi_cancel`: takes back the receive posted with `context` (it
    /// completes with `ECANCELED`); `ENOENT` if none waits (a receive a
    /// message is being copied into is no longer in the queues). Any
    /// context but hard interrupt.
    pub(crate) fn cancel(&self, context: usize) -> Result {
        let (flags, cq) = {
            let mut s = self.state.lock();
            if let Some(i) = s.rx.iter().position(|r| r.context == context) {
                s.rx.remove(i).map_err(|_| ENOENT)?;
                (sys::KFI_RECV | sys::KFI_MSG, s.cq)
            } else if s.tagged.cancel_where(|r| r.context == context).is_some() {
                (sys::KFI_RECV | sys::KFI_TAGGED, s.cq)
            } else if let Some(i) = s.due.iter().position(|d| d.cancelable() == Some(context)) {
                let d = s.due.remove(i).map_err(|_| ENOENT)?;
                let cq = s.cq;
                drop(s);
                report_err(cq, &d.entry(), ECANCELED);
                return Ok(());
            } else {
                return Err(ENOENT);
            }
        };
        report_err(cq, &CqEntry::of(context, flags), ECANCELED);
        Ok(())
    }

    /// Closes the queues: posted receives fail with `ECANCELED`, held
    /// messages are dropped, waiting receivers return.
    pub(crate) fn close(&self) {
        // The held messages are dropped here, outside the lock, with the
        // rest.
        let (rx, trx, held, due, cq) = {
            let mut s = self.state.lock();
            s.closing = true;
            // Their receive work sees the queues closed.
            Self::resume(&mut s);
            (
                core::mem::take(&mut s.rx),
                s.tagged.take_all(),
                s.held.take_all(),
                // Posted after those queued: they fail after them (the
                // reporting post then finds none left).
                core::mem::take(&mut s.due),
                s.cq,
            )
        };
        drop(held);
        for r in rx.iter() {
            let c = r.entry(sys::KFI_RECV | sys::KFI_MSG);
            report_err(cq, &c, ECANCELED);
        }
        for r in trx.iter() {
            let c = r.entry(sys::KFI_RECV | sys::KFI_TAGGED);
            report_err(cq, &c, ECANCELED);
        }
        for d in due.iter() {
            report_err(cq, &d.entry(), ECANCELED);
        }
    }
}
