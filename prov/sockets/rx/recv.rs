// SPDX-License-Identifier: GPL-2.0

//! The receive work's messages (`Msg`, `Tagged`): straight from the socket
//! into the oldest posted receive (tagged ones into the oldest matching
//! tagged receive), or into a held copy when none is posted yet, within
//! the endpoint's bounds (`held.rs`, the tag matcher), so that the frames
//! behind them are still read; a message that finds no room parks the
//! connection until a receive is posted.

use core::sync::atomic::Ordering;
use kernel::{prelude::*, sync::Arc};

use super::{Rx, Step};
use crate::{
    bufs,
    conn::Shared,
    frame,
    held::{HeldMsgs, MsgRoom},
    kfi::{
        kfi_sys as sys,
        toolkit::{
            completion::{report_err, report_recv, CqEntry, Reports},
            tags::{Matched, Room, TagMatcher},
        },
    },
    ksock::Deadline,
    ksock::Socket,
    op::{RxOp, Unexpected},
    progress,
    rxq::{RxQueues, RxState},
    wire::{Hdr, Op},
};

/// Smallest message that waits in the socket for its receive
/// ([`recv_wait`]).
const RECV_WAIT_MIN: u64 = 4096;

/// Completes a receive (`kind`: `KFI_MSG` or `KFI_TAGGED`) from a held
/// message.
pub(crate) fn complete_held(
    cq: Reports,
    op: &RxOp,
    kind: u64,
    tag: u64,
    data: Option<u64>,
    payload: &[u8],
) {
    // SAFETY: A posted receive's buffers, valid until it completes.
    let placed = unsafe { bufs::scatter(&op.bufs, payload) };
    finish_recv(
        cq,
        op,
        kind,
        tag,
        data,
        placed,
        payload.len().saturating_sub(placed),
    );
}

/// Completes a tagged receive with the held message the tag matcher gave
/// it.
pub(crate) fn complete_matched(cq: Reports, m: &Matched<RxOp, Unexpected>) {
    complete_held(
        cq,
        &m.recv,
        sys::KFI_TAGGED,
        m.tag,
        m.msg.data,
        &m.msg.payload,
    );
}

/// Fails a receive (`kind`: `KFI_MSG` or `KFI_TAGGED`) taken off its
/// queue with `e`: nobody else can report it any more.
pub(super) fn fail_recv(cq: Reports, op: &RxOp, kind: u64, e: Error) {
    report_err(cq, &op.entry(sys::KFI_RECV | kind), e);
}

/// A receive taken off its queue whose payload could not be read: it
/// fails here, as nobody else can report it any more.
fn fail_recv_on_err(
    cq: Reports,
    op: &RxOp,
    kind: u64,
    r: Result<(usize, usize)>,
) -> Result<(usize, usize)> {
    if let Err(e) = r {
        fail_recv(cq, op, kind, e);
    }
    r
}

/// Reports a receive that got `placed` bytes and lost `truncated`.
pub(super) fn finish_recv(
    cq: Reports,
    op: &RxOp,
    kind: u64,
    tag: u64,
    data: Option<u64>,
    placed: usize,
    truncated: usize,
) {
    let cq_data = if data.is_some() {
        sys::KFI_REMOTE_CQ_DATA
    } else {
        0
    };
    let c = CqEntry {
        len: placed,
        buf: op.bufs.first_base(),
        data: data.unwrap_or(0),
        tag,
        ..op.entry(sys::KFI_RECV | kind | cq_data)
    };
    report_recv(cq, &c, truncated);
}

/// Parks message `h` of connection `sh` until a receive is posted: the
/// post receives it (`rxq.rs`). Called with the receive queues locked,
/// so no posting slips between the check and this; any context but hard
/// interrupt.
pub(super) fn park(sh: &Arc<Shared>, s: &mut RxState, h: &Hdr) -> Result {
    // Once: a parked connection is re-run by every arriving segment.
    if !sh.on_stalled.load(Ordering::Relaxed) {
        s.stalled.push(sh.clone(), GFP_ATOMIC)?;
        sh.on_stalled.store(true, Ordering::Relaxed);
    }
    sh.state.lock().parked = Some(*h);
    Ok(())
}

/// Whether stalled connection `sh` may go on now (`RxQueues::resume`):
/// its parked message has a receive (an untagged one takes one of the
/// `receives` left, so that one receive wakes one connection), or,
/// unless it still waits in the socket for its receive ([`recv_wait`]),
/// room to be held. A connection that closes or ended goes (its entry
/// is dropped; it takes nothing), and so does one with any other frame
/// parked. Called with the receive queues locked; any context but hard
/// interrupt.
pub(crate) fn may_go_on(
    sh: &Shared,
    receives: &mut usize,
    held: &HeldMsgs,
    tagged: &TagMatcher<RxOp, Unexpected>,
) -> bool {
    let (h, waits) = {
        let s = sh.state.lock();
        if s.closing || s.draining || s.dead {
            return true;
        }
        // As `recv_wait` decides: not while responses may be behind it.
        let waits = s.pending.is_empty() && s.recv_wait.is_some_and(|d| d.left_ms().is_some());
        (s.parked, waits)
    };
    let Some(h) = h else {
        return true;
    };
    let (len, src) = (h.len as usize, sh.share as usize);
    match h.op {
        Op::Msg if *receives > 0 => {
            *receives -= 1;
            true
        }
        Op::Msg => !waits && held.fits(len, src),
        Op::Tagged => tagged.is_posted(h.tag) || (!waits && tagged.fits_from(len, src)),
        _ => true,
    }
}

/// Whether message `h` of connection `sh`, for which no receive is
/// posted, waits in the socket for one, and how many more milliseconds:
/// a message of [`RECV_WAIT_MIN`] bytes or more does, for `recv_wait_ms`
/// from when it was first parked (a ULP usually posts its next receive
/// soon, and holding it would cost a buffer and a second copy), unless
/// this side waits for responses, which may be behind it. Smaller
/// messages are held at once. The wait is bounded, so the frames behind
/// the message (the peer's RMA, the end of the stream) are read in
/// bounded time whatever the ULP does. Any context but hard interrupt.
pub(super) fn recv_wait(sh: &Shared, h: &Hdr) -> Option<u32> {
    let ms = crate::recv_wait_ms();
    if ms == 0 || h.len < RECV_WAIT_MIN {
        return None;
    }
    let mut s = sh.state.lock();
    if !s.pending.is_empty() {
        s.recv_wait = None;
        return None;
    }
    // Kept once it has passed, until the message is placed or held
    // (`recv_found`): a message parked for want of room is tried again
    // on every post, and must not start a new wait, and a new timer,
    // each time.
    let due = *s
        .recv_wait
        .get_or_insert_with(|| Deadline::after_ms(u64::from(ms)));
    due.left_ms()
}

/// Parks message `h` (`Msg` or `Tagged`) of connection `sh` to wait in
/// the socket for its receive, as [`Rx::msg`] or [`Rx::tagged`] would,
/// without reading any of it: the
/// post of the receive takes it (`rxq.rs`), or the receive work once the
/// wait is over. Returns the milliseconds it may wait, for the caller to
/// arm the connection's timer with; None, and nothing done, if a receive
/// is posted, the message does not wait or the connection closes (its
/// close may have begun since the caller looked). Any context but hard
/// interrupt.
pub(super) fn park_for_receive(sh: &Arc<Shared>, h: &Hdr) -> Option<u32> {
    let mut s = sh.rxq.state.lock();
    let posted = match h.op {
        Op::Msg => !s.rx.is_empty(),
        Op::Tagged => s.tagged.is_posted(h.tag),
        _ => return None,
    };
    if s.closing || posted {
        return None;
    }
    {
        let c = sh.state.lock();
        // An ended connection (`dead`) is not filed among those waiting
        // for a receive again (`Rx::closing`).
        if c.closing || c.draining || c.dead {
            return None;
        }
    }
    let ms = recv_wait(sh, h)?;
    park(sh, &mut s, h).ok()?;
    Some(ms)
}

impl Rx<'_> {
    /// Parks `h`, for which there is no room to hold it, until a receive
    /// or room comes (as [`Self::park`]), unless the peer has ended the
    /// connection: such a park has no deadline, and the parked frame keeps
    /// the receive from ever reading the end of the stream, so it is
    /// looked at here, each time the frame is tried again (the socket's
    /// state change tries it again). The message is lost with the
    /// connection.
    fn park_full(&self, s: &mut RxState, h: &Hdr) -> Result<Step> {
        self.sock.rx_ended()?;
        self.park(s, h)
    }

    /// Parks `h` until a receive is posted ([`park`]).
    fn park(&self, s: &mut RxState, h: &Hdr) -> Result<Step> {
        park(self.sh, s, h)?;
        Ok(Step::Parked)
    }

    /// [`recv_wait`] for this connection.
    fn recv_wait(&self, h: &Hdr) -> Option<u32> {
        recv_wait(self.sh, h)
    }

    /// Message `h` found its receive, or was held: a wait for it is over.
    fn recv_found(&self, h: &Hdr) {
        if h.len >= RECV_WAIT_MIN {
            self.sh.state.lock().recv_wait = None;
        }
    }

    /// A message for the oldest posted receive; held until there is one
    /// (`held.rs`), so that the frames behind it are read meanwhile, or,
    /// when there is no room to hold it, parked.
    pub(super) fn msg(&mut self, h: &Hdr) -> Result<Step> {
        let q = &self.sh.rxq;
        let (op, cq) = {
            let mut s = q.state.lock();
            if s.closing || self.closing() {
                return Err(ECANCELED);
            }
            if s.rx.is_empty() {
                if let Some(ms) = self.recv_wait(h) {
                    let step = self.park(&mut s, h);
                    drop(s);
                    // Not under the receive queues' lock: it disables
                    // interrupts, and arming takes the socket's callback
                    // lock with bottom halves off.
                    progress::arm_timer(self.sock, ms);
                    return step;
                }
                // The share of the connection's source (on an RDM
                // endpoint, the peer's host): it alone parks when that is
                // used.
                return match s.held.reserve_from(h.len as usize, self.sh.share as usize) {
                    Some(room) => {
                        drop(s);
                        self.hold_msg(h, room)
                    }
                    None => self.park_full(&mut s, h),
                };
            }
            (s.rx.remove(0).map_err(|_| EINVAL)?, s.cq)
        };
        self.recv_found(h);
        // SAFETY: A posted receive's buffers, valid until it completes.
        let placing = unsafe { self.place(&op.bufs, h.len as usize, true) };
        let (placed, dropped) = fail_recv_on_err(cq, &op, sys::KFI_MSG, placing)?;
        finish_recv(cq, &op, sys::KFI_MSG, 0, Self::cq_data(h), placed, dropped);
        self.ack_if_asked(h)?;
        Ok(Step::Done)
    }

    /// Reads the payload of message `h` into the `room` reserved for it
    /// and holds it, unless a receive was posted meanwhile: that receive
    /// takes it at once.
    fn hold_msg(&mut self, h: &Hdr, room: MsgRoom) -> Result<Step> {
        let q = &self.sh.rxq;
        let payload = match Self::read_payload(self.sock, h.len as usize) {
            Ok(p) => p,
            Err(e) => {
                let mut s = q.state.lock();
                s.held.release(room);
                // Connections parked for want of that room may go on.
                RxQueues::resume(&mut s);
                return Err(e);
            }
        };
        let u = Unexpected {
            data: Self::cq_data(h),
            payload,
        };
        // Dropped (maybe vmalloc'd) after the lock.
        let (unheld, cq) = {
            let mut s = q.state.lock();
            if s.closing {
                s.held.release(room);
                (Some((None, u)), s.cq)
            } else if s.rx.is_empty() {
                (s.held.hold(room, u).err().map(|u| (None, u)), s.cq)
            } else {
                // Posted while we read: it would have taken this message.
                s.held.release(room);
                let op = s.rx.remove(0).ok();
                // The room is back: connections parked for want of it go
                // on (the post kicked them while we still had it).
                RxQueues::resume(&mut s);
                (Some((op, u)), s.cq)
            }
        };
        match unheld {
            None => {}
            Some((Some(op), u)) => {
                complete_held(cq, &op, sys::KFI_MSG, 0, u.data, &u.payload);
            }
            Some((None, _)) => return Err(ECANCELED),
        }
        self.recv_found(h);
        // Held counts as delivered: the data is placed at the target.
        self.ack_if_asked(h)?;
        Ok(Step::Done)
    }

    /// A tagged message: into the oldest matching tagged receive, or held
    /// until one is posted (parked while too much is held).
    pub(super) fn tagged(&mut self, h: &Hdr) -> Result<Step> {
        let len = h.len as usize;
        let q = &self.sh.rxq;
        let found = {
            let mut s = q.state.lock();
            if s.closing || self.closing() {
                return Err(ECANCELED);
            }
            match s.tagged.take_posted(h.tag) {
                Some(op) => Ok((op, s.cq)),
                None => {
                    if let Some(ms) = self.recv_wait(h) {
                        let step = self.park(&mut s, h);
                        drop(s);
                        // Outside the lock, as for `msg`.
                        progress::arm_timer(self.sock, ms);
                        return step;
                    }
                    // The share of the connection's source (on an RDM
                    // endpoint, the peer's host): it alone parks when
                    // that is used.
                    match s.tagged.reserve_from(len, self.sh.share as usize) {
                        Room::Reserved(r) => Err(r),
                        // Larger than everything we would ever hold.
                        Room::Never => return Err(EPROTO),
                        Room::Full => return self.park_full(&mut s, h),
                    }
                }
            }
        };
        let room = match found {
            Err(room) => room,
            Ok((op, cq)) => {
                self.recv_found(h);
                // SAFETY: A posted receive's buffers, valid until it
                // completes.
                let placing = unsafe { self.place(&op.bufs, len, true) };
                let (placed, dropped) = fail_recv_on_err(cq, &op, sys::KFI_TAGGED, placing)?;
                finish_recv(
                    cq,
                    &op,
                    sys::KFI_TAGGED,
                    h.tag,
                    Self::cq_data(h),
                    placed,
                    dropped,
                );
                self.ack_if_asked(h)?;
                return Ok(Step::Done);
            }
        };
        let payload = match Self::read_payload(self.sock, len) {
            Ok(p) => p,
            Err(e) => {
                let mut s = q.state.lock();
                s.tagged.release(room);
                // Connections parked for want of that room may go on.
                RxQueues::resume(&mut s);
                return Err(e);
            }
        };
        let u = Unexpected {
            data: Self::cq_data(h),
            payload,
        };
        // A matching receive may have been posted meanwhile.
        let taken = {
            let mut s = q.state.lock();
            if s.closing {
                s.tagged.release(room);
                return Err(ECANCELED);
            }
            let cq = s.cq;
            let taken = s.tagged.hold(room, h.tag, u)?;
            if taken.is_some() {
                // A receive posted while we read took it, and the room is
                // back: connections parked for want of it go on (the post
                // kicked them while we still had it).
                RxQueues::resume(&mut s);
            }
            taken.map(|m| (m, cq))
        };
        if let Some((m, cq)) = taken {
            complete_matched(cq, &m);
        }
        self.recv_found(h);
        // Held counts as delivered: the data is placed at the target.
        self.ack_if_asked(h)?;
        Ok(Step::Done)
    }

    /// Reads a tagged message's `len` payload bytes into a buffer of its
    /// own (for the unexpected queue, which has room reserved for them);
    /// from pages when large, never one high-order kmalloc.
    fn read_payload(sock: &Socket, len: usize) -> Result<KVVec<u8>> {
        let mut payload = KVVec::with_capacity(len, GFP_KERNEL)?;
        payload.resize(len, 0, GFP_KERNEL)?;
        frame::recv_exact(sock, &mut payload)?;
        Ok(payload)
    }
}
