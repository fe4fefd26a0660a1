// SPDX-License-Identifier: GPL-2.0

//! The receive work of a kfi_sockets connection: reads the frames that
//! have arrived and acts on each (process context; it may sleep for the
//! rest of a frame, never between frames).
//!
//! Messages go straight from the socket into the oldest posted receive
//! (tagged ones into the oldest matching tagged receive), or into a held
//! copy when none is posted yet, within the endpoint's bounds, so that the
//! frames behind them (responses to our operations, the end of the
//! stream) are still read; a message that finds no room parks the
//! connection until a receive is posted. Peers' RMA and atomics are checked
//! against the domain's registered memory before a byte is placed; a
//! refused access is answered with its errno and changes nothing.
//! Responses to our own operations complete them; read data goes straight
//! into the ULP's buffers. Anything that breaks the protocol (`EPROTO`)
//! ends the connection, and so does a frame that does not arrive whole by
//! its deadline (`ETIMEDOUT`, see [`frame_deadline`]): a peer that stops
//! inside a frame holds a worker for a bounded time only.

use core::borrow::Borrow;
use kernel::{prelude::*, sync::Arc, sync::CondVarTimeoutResult};

use crate::{
    atomics::{self, ATOMIC_MAX},
    bufs::{self, slice, Buf},
    ep::{Kind, Pending, Resp, RxOp, Shared, Unexpected, RESP_MAX},
    frame,
    held::MsgRoom,
    kfi::{
        kfi_sys as sys,
        provider::{EqRef, FidRef},
        toolkit::{
            completion::{report, report_err, report_recv, CqEntry, Reports},
            tags::{Matched, Room},
        },
    },
    ksock::{Deadline, Socket},
    mr::Access,
    progress,
    rxq::{RxQueues, RxState},
    wire::{flags, Hdr, Op, RmaDesc, PAYLOAD_MAX},
};

/// The receive work (`progress.rs`): handles the frames that have arrived.
pub(crate) fn run(sh: &Arc<Shared>) {
    let sock = {
        let s = sh.state.lock();
        if s.dead || s.closing {
            return;
        }
        s.sock.clone()
    };
    let Some(sock) = sock else {
        return;
    };
    if let Err(e) = expire_responses(sh, &sock) {
        teardown(sh, &sock, e);
        return;
    }
    let mut scratch = sh.scratch.lock();
    let end = Rx {
        sh,
        sock: &sock,
        scratch: &mut scratch,
    }
    .run();
    drop(scratch);
    if let Err(e) = end {
        teardown(sh, &sock, e);
    }
}

/// Our operations whose response is overdue (`response_timeout_ms` after
/// their frame was sent): the oldest such fails with `ETIMEDOUT` and so
/// does the connection (`Err`; the teardown cancels the rest, as for a
/// frame that misses its deadline). Else the timer is armed again for
/// the next response due. Called by the receive work, which the timer
/// queues; takes the connection's lock only, never waits.
pub(crate) fn expire_responses(sh: &Shared, sock: &Socket) -> Result {
    let (late, next, cq) = {
        let mut s = sh.state.lock();
        let mut next: Option<Deadline> = None;
        let mut late = None;
        for (i, p) in s.pending.iter().enumerate() {
            let Some(due) = p.due else { continue };
            if due.left_ms().is_none() {
                late = Some(i);
                break;
            }
            next = Some(next.map_or(due, |n| n.earlier(due)));
        }
        let late = late.and_then(|i| s.pending.remove(i).ok());
        (late, next, s.tx_cq)
    };
    if let Some(p) = late {
        report_err(cq, &p.entry(), ETIMEDOUT);
        return Err(ETIMEDOUT);
    }
    if let Some(ms) = next.and_then(Deadline::left_ms) {
        progress::arm_timer(sock, ms);
    }
    Ok(())
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
    if closing {
        return;
    }
    if let (Some(eq), Some(fid)) = (eq, fid) {
        report_end(eq, fid, e);
    }
}

/// Reports the end `e` of the connection of endpoint `fid`: an error
/// entry if the peer broke the protocol or stalled inside a frame, then
/// `KFI_SHUTDOWN`.
pub(crate) fn report_end(eq: EqRef, fid: FidRef, e: Error) {
    if e == EPROTO || e == ETIMEDOUT {
        let _ = eq.post_err(fid, e, &[]);
    }
    let _ = eq.post_shutdown(fid);
}

/// The rights a peer's atomic `op` needs on the target region, and
/// whether it writes it: a read needs `KFI_REMOTE_READ` and writes
/// nothing; the others need `KFI_REMOTE_WRITE`, and `KFI_REMOTE_READ` too
/// when they return the old values (`fetch`) or compare with them.
fn atomic_rights(op: u32, fetch: bool) -> (u64, bool) {
    if op == sys::KFI_ATOMIC_READ {
        (sys::KFI_REMOTE_READ, false)
    } else if fetch || atomics::has_compare(op) {
        (sys::KFI_REMOTE_READ | sys::KFI_REMOTE_WRITE, true)
    } else {
        (sys::KFI_REMOTE_WRITE, true)
    }
}

/// Our operation a response answers.
struct Answered {
    p: Pending,
    cq: Reports,
    /// Taken off the pending list (its frame had been sent).
    taken: bool,
}

/// Completes our operation `p` with the outcome `st` (a successful
/// inject completes silently).
pub(crate) fn finish(cq: Reports, p: &Pending, st: Result) {
    let c = p.entry();
    match st {
        Ok(()) if p.silent => cq.count_only(p.flags),
        Ok(()) => report(cq, &CqEntry { len: p.len, ..c }),
        Err(e) => report_err(cq, &c, e),
    }
}

/// Bytes of payload a frame may take `frame_timeout_ms` more for.
const FRAME_TIMEOUT_UNIT: u64 = 1 << 20;

/// The deadline of a frame begun at `start` with `len` payload bytes, in
/// either direction: it must arrive (or, ours, leave) whole within
/// `frame_timeout_ms`, and as much again for each whole MiB of payload (a
/// floor of 1 MiB per `frame_timeout_ms` on a slow link); `None` when the
/// parameter is 0 (unbounded). A deadline for the whole frame, not for
/// each read or write: a peer that drips bytes, or reads ours a byte at a
/// time, is cut off too.
pub(crate) fn frame_deadline(start: Deadline, len: u64) -> Option<Deadline> {
    let ms = u64::from(crate::frame_timeout_ms());
    let units = (len / FRAME_TIMEOUT_UNIT).saturating_add(1);
    (ms != 0).then(|| Deadline::after_ms_from(start, ms.saturating_mul(units)))
}

/// What handling a frame came to.
enum Step {
    Done,
    /// The frame waits for a receive to be posted.
    Parked,
}

/// The receive work's view of its connection.
struct Rx<'a> {
    sh: &'a Arc<Shared>,
    sock: &'a Arc<Socket>,
    scratch: &'a mut KVec<u8>,
}

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
    let placed = unsafe { bufs::scatter(&op.bufs[..op.n], payload) };
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

/// A receive taken off its queue whose payload could not be read: it
/// fails here, as nobody else can report it any more.
fn fail_recv_on_err(
    cq: Reports,
    op: &RxOp,
    kind: u64,
    r: Result<(usize, usize)>,
) -> Result<(usize, usize)> {
    if let Err(e) = r {
        report_err(cq, &op.entry(sys::KFI_RECV | kind), e);
    }
    r
}

/// Reports a receive that got `placed` bytes and lost `truncated`.
fn finish_recv(
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
        buf: op.bufs[0].base,
        data: data.unwrap_or(0),
        tag,
        ..op.entry(sys::KFI_RECV | kind | cq_data)
    };
    report_recv(cq, &c, truncated);
}

/// A received status word as a result: 0, or a positive errno (anything
/// else is `EIO`).
fn status(v: u64) -> Result {
    match v {
        0 => Ok(()),
        1..4096 => Err(Error::from_errno(-(v as i32))),
        _ => Err(EIO),
    }
}

impl Rx<'_> {
    /// Handles frames until the socket has no more bytes or a message
    /// waits for a receive.
    fn run(mut self) -> Result {
        loop {
            let parked = self.sh.state.lock().parked.take();
            let h = match parked {
                Some(h) => {
                    // We made it wait, not the peer: its clock starts now.
                    let d = frame_deadline(Deadline::now(), h.len);
                    self.sock.set_rx_deadline(d);
                    h
                }
                None => {
                    if self.closing() || !self.sock.readable() {
                        return Ok(());
                    }
                    // The frame has begun: its header is due by the
                    // deadline of an empty frame, the rest by its own.
                    let start = Deadline::now();
                    self.sock.set_rx_deadline(frame_deadline(start, 0));
                    let h = frame::recv_hdr(self.sock)?;
                    self.sock.set_rx_deadline(frame_deadline(start, h.len));
                    h
                }
            };
            let step = match h.op {
                Op::Msg => self.msg(&h)?,
                Op::Tagged => self.tagged(&h)?,
                Op::Write => self.write(&h).map(|()| Step::Done)?,
                Op::ReadReq => self.read_req(&h).map(|()| Step::Done)?,
                Op::Atomic => self.atomic(&h).map(|()| Step::Done)?,
                Op::ReadResp => self.read_resp(&h).map(|()| Step::Done)?,
                Op::AtomicResp => self.atomic_resp(&h).map(|()| Step::Done)?,
                Op::Ack => self.ack(&h).map(|()| Step::Done)?,
                Op::Shutdown => return Err(ESHUTDOWN),
                Op::ConnReq | Op::Accept | Op::Reject => return Err(EPROTO),
            };
            if let Step::Parked = step {
                return Ok(());
            }
        }
    }

    /// Parks `h` until a receive is posted (called with the receive
    /// queues locked, so no posting slips between the check and this).
    fn park(&self, s: &mut RxState, h: &Hdr) -> Result<Step> {
        // Once: a parked connection is re-run by every arriving segment.
        if !s.stalled.iter().any(|c| Arc::ptr_eq(c, self.sh)) {
            s.stalled.push(self.sh.clone(), GFP_ATOMIC)?;
        }
        self.sh.state.lock().parked = Some(*h);
        Ok(Step::Parked)
    }

    /// The message's remote CQ data, if it carries some.
    fn cq_data(h: &Hdr) -> Option<u64> {
        (h.flags & flags::REMOTE_CQ_DATA != 0).then_some(h.data)
    }

    /// Reads and drops `len` bytes.
    fn discard(&mut self, mut len: usize) -> Result {
        while len > 0 {
            let n = len.min(self.scratch.len());
            frame::recv_exact(self.sock, &mut self.scratch[..n])?;
            len -= n;
        }
        Ok(())
    }

    /// Receives `len` bytes into `bufs` (as much as fits, the rest is
    /// dropped); returns (placed, dropped).
    ///
    /// # Safety
    ///
    /// `bufs` are a live operation's or region's buffers.
    unsafe fn place(
        &mut self,
        bufs: impl IntoIterator<Item = impl Borrow<Buf>>,
        len: usize,
    ) -> Result<(usize, usize)> {
        let mut left = len;
        for b in bufs {
            let b = b.borrow();
            let n = b.len.min(left);
            // SAFETY: As required.
            frame::recv_exact(self.sock, &mut unsafe { slice(b) }[..n])?;
            left -= n;
        }
        let dropped = left;
        self.discard(left)?;
        Ok((len - dropped, dropped))
    }

    /// Queues a response for the transmitter, waiting while the queue is
    /// full (the peer then waits for us), for `frame_timeout_ms` at most: a
    /// peer that asks and never reads the answers gets `ETIMEDOUT`.
    fn respond(&self, r: Resp) -> Result {
        let ms = crate::frame_timeout_ms();
        let mut left = (ms != 0).then(|| kernel::time::msecs_to_jiffies(ms));
        let mut s = self.sh.state.lock();
        loop {
            if s.closing || !s.connected {
                return Err(ECANCELED);
            }
            if s.resp.len() < RESP_MAX {
                break;
            }
            match left {
                None => self.sh.wake.wait(&mut s),
                Some(j) => match self.sh.wake.wait_interruptible_timeout(&mut s, j) {
                    CondVarTimeoutResult::Timeout => return Err(ETIMEDOUT),
                    CondVarTimeoutResult::Woken { jiffies }
                    | CondVarTimeoutResult::Signal { jiffies } => left = Some(jiffies),
                },
            }
        }
        s.resp.push(r, GFP_ATOMIC)?;
        drop(s);
        progress::kick_tx(self.sh);
        Ok(())
    }

    /// Acknowledges `h` if its sender asked for it.
    fn ack_if_asked(&self, h: &Hdr) -> Result {
        if h.flags & (flags::DELIVERY_COMPLETE | flags::COMMIT_COMPLETE) != 0 {
            self.respond(Resp::status(Op::Ack, h.id, Ok(())))?;
        }
        Ok(())
    }

    /// Whether this connection is closing.
    fn closing(&self) -> bool {
        self.sh.state.lock().closing
    }

    /// A message for the oldest posted receive; held until there is one
    /// (`held.rs`), so that the frames behind it are read meanwhile, or,
    /// when there is no room to hold it, parked.
    fn msg(&mut self, h: &Hdr) -> Result<Step> {
        let q = &self.sh.rxq;
        let (op, cq) = {
            let mut s = q.state.lock();
            if s.closing || self.closing() {
                return Err(ECANCELED);
            }
            if s.rx.is_empty() {
                return match s.held.reserve(h.len as usize) {
                    Some(room) => {
                        drop(s);
                        self.hold_msg(h, room)
                    }
                    None => self.park(&mut s, h),
                };
            }
            (s.rx.remove(0).map_err(|_| EINVAL)?, s.cq)
        };
        // SAFETY: A posted receive's buffers, valid until it completes.
        let placing = unsafe { self.place(&op.bufs[..op.n], h.len as usize) };
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
                (Some((s.rx.remove(0).ok(), u)), s.cq)
            }
        };
        match unheld {
            None => {}
            Some((Some(op), u)) => {
                complete_held(cq, &op, sys::KFI_MSG, 0, u.data, &u.payload);
            }
            Some((None, _)) => return Err(ECANCELED),
        }
        // Held counts as delivered: the data is placed at the target.
        self.ack_if_asked(h)?;
        Ok(Step::Done)
    }

    /// A tagged message: into the oldest matching tagged receive, or held
    /// until one is posted (parked while too much is held).
    fn tagged(&mut self, h: &Hdr) -> Result<Step> {
        let len = h.len as usize;
        let q = &self.sh.rxq;
        let found = {
            let mut s = q.state.lock();
            if s.closing || self.closing() {
                return Err(ECANCELED);
            }
            match s.tagged.take_posted(h.tag) {
                Some(op) => Ok((op, s.cq)),
                // The connection's share: it alone parks when that is used.
                None => match s.tagged.reserve_from(len, Arc::as_ptr(self.sh) as usize) {
                    Room::Reserved(r) => Err(r),
                    // Larger than everything we would ever hold.
                    Room::Never => return Err(EPROTO),
                    Room::Full => return self.park(&mut s, h),
                },
            }
        };
        let room = match found {
            Err(room) => room,
            Ok((op, cq)) => {
                // SAFETY: A posted receive's buffers, valid until it
                // completes.
                let placing = unsafe { self.place(&op.bufs[..op.n], len) };
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
            s.tagged.hold(room, h.tag, u)?.map(|m| (m, cq))
        };
        if let Some((m, cq)) = taken {
            complete_matched(cq, &m);
        }
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

    /// Checks every descriptor of a peer's access; all or nothing.
    fn check(&mut self, h: &Hdr, need: u64) -> Result<(Result<KVec<Access>>, u64)> {
        let descs = frame::recv_rma(self.sock, h)?;
        let mut total = 0u64;
        for d in descs.iter() {
            total = total.checked_add(d.len).ok_or(EPROTO)?;
        }
        let mut acc = KVec::with_capacity(descs.len(), GFP_KERNEL)?;
        for d in descs.iter() {
            match self.sh.mrs.access(d.key, d.addr, d.len, need, self.sock) {
                Ok(a) => acc.push(a, GFP_KERNEL)?,
                Err(e) => return Ok((Err(e), total)),
            }
        }
        Ok((Ok(acc), total))
    }

    /// A peer's RMA write: placed only if every descriptor checks out.
    fn write(&mut self, h: &Hdr) -> Result {
        let (acc, total) = self.check(h, sys::KFI_REMOTE_WRITE)?;
        if total != h.len {
            return Err(EPROTO);
        }
        let acc = match acc {
            Ok(acc) => acc,
            Err(e) => {
                self.discard(h.len as usize)?;
                return self.respond(Resp::status(Op::Ack, h.id, Err(e)));
            }
        };
        for a in acc.iter() {
            // SAFETY: Checked ranges of registered regions, held by `a`.
            unsafe { self.place(a.bufs(), a.len()) }?;
        }
        if h.flags & flags::COMMIT_COMPLETE != 0 {
            for a in acc.iter() {
                a.commit();
            }
        }
        drop(acc);
        let to = self.sh.rxq.cq();
        match Self::cq_data(h) {
            // The peer decides how many of these there are: one the CQ has
            // no room for ends the connection rather than let a flood
            // crowd out the endpoint's own completions for ever.
            Some(data) if to.cq.is_some() => to
                .try_report(&CqEntry {
                    len: h.len as usize,
                    data,
                    // Remote CQ data is reported on a selective CQ too.
                    asked: true,
                    ..CqEntry::of(
                        0,
                        sys::KFI_RMA | sys::KFI_REMOTE_WRITE | sys::KFI_REMOTE_CQ_DATA,
                    )
                })
                .map_err(|_| EPROTO)?,
            _ => to.count_only(sys::KFI_RMA | sys::KFI_REMOTE_WRITE),
        }
        self.respond(Resp::status(Op::Ack, h.id, Ok(())))
    }

    /// A peer's RMA read: the transmitter sends the checked ranges.
    fn read_req(&mut self, h: &Hdr) -> Result {
        let (acc, total) = self.check(h, sys::KFI_REMOTE_READ)?;
        let r = match acc {
            Ok(_) if total > PAYLOAD_MAX => Resp::status(Op::ReadResp, h.id, Err(EMSGSIZE)),
            Ok(acc) => {
                let mut r = Resp::status(Op::ReadResp, h.id, Ok(()));
                r.reads = acc;
                r
            }
            Err(e) => Resp::status(Op::ReadResp, h.id, Err(e)),
        };
        self.respond(r)
    }

    /// A peer's atomic: one descriptor, operands (and compare values) in
    /// the payload; applied under the domain's atomic lock.
    fn atomic(&mut self, h: &Hdr) -> Result {
        let descs = frame::recv_rma(self.sock, h)?;
        let d: RmaDesc = match descs.first() {
            Some(d) if descs.len() == 1 => *d,
            _ => return Err(EPROTO),
        };
        let datatype = h.tag as u32;
        let op = (h.tag >> 32) as u32;
        // Bounded before any arithmetic: these lengths come from the peer.
        if d.len > ATOMIC_MAX as u64 {
            return Err(EPROTO);
        }
        let len = d.len as usize;
        let want = if atomics::has_compare(op) {
            2 * len
        } else {
            len
        };
        if h.len != want as u64 {
            return Err(EPROTO);
        }
        let mut operands = [0u8; 2 * ATOMIC_MAX];
        frame::recv_exact(self.sock, &mut operands[..want])?;
        let (src, cmp) = operands[..want].split_at(len);
        let mut r = Resp::status(Op::AtomicResp, h.id, Ok(()));
        let fetch = h.flags & flags::FETCH != 0;
        let (need, writes) = atomic_rights(op, fetch);
        let outcome = (|| -> Result {
            atomics::elem_size(datatype).ok_or(EOPNOTSUPP)?;
            let a = self.sh.mrs.access(d.key, d.addr, d.len, need, self.sock)?;
            let mut target = [0u8; ATOMIC_MAX];
            self.sh.mrs.atomically(|| {
                // SAFETY: A checked range of a registered region, held by
                // `a`; atomics on it are serialized by the lock we hold.
                unsafe { bufs::gather(a.bufs(), &mut target[..len]) };
                atomics::apply(
                    datatype,
                    op,
                    &mut target[..len],
                    src,
                    cmp,
                    &mut r.old[..len],
                )?;
                if writes {
                    // SAFETY: As above.
                    unsafe { bufs::scatter(a.bufs(), &target[..len]) };
                }
                Ok::<(), Error>(())
            })?;
            if writes && h.flags & flags::COMMIT_COMPLETE != 0 {
                a.commit();
            }
            // Old values only to whom may read them.
            r.old_len = if fetch { len } else { 0 };
            Ok(())
        })();
        match outcome {
            // Done with our region: counted as a write if it wrote.
            Ok(()) => self.sh.rxq.cq().count_only(if writes {
                sys::KFI_ATOMIC | sys::KFI_REMOTE_WRITE
            } else {
                sys::KFI_ATOMIC | sys::KFI_REMOTE_READ
            }),
            Err(e) => r = Resp::status(Op::AtomicResp, h.id, Err(e)),
        }
        self.respond(r)
    }

    /// Finds our operation `id` among those waiting (`EPROTO` if there is
    /// none, or it was answered already: the peer answers what we never
    /// asked). Taken off the list if its frame has been sent; else it stays
    /// there and the answer is held until the transmitter is done with it.
    fn pending(&self, id: u64, kind: Option<Kind>) -> Result<Answered> {
        let mut s = self.sh.state.lock();
        let i = s
            .pending
            .iter()
            .position(|p| p.id == id && p.early.is_none() && kind.is_none_or(|k| k == p.kind))
            .ok_or(EPROTO)?;
        let cq = s.tx_cq;
        let p = *s.pending.get(i).ok_or(EPROTO)?;
        if !p.sent {
            return Ok(Answered {
                p,
                cq,
                taken: false,
            });
        }
        s.pending.remove(i).map_err(|_| EPROTO)?;
        drop(s);
        // An operation may wait for room in the pending list.
        progress::kick_tx(self.sh);
        Ok(Answered { p, cq, taken: true })
    }

    /// Completes `a` with the outcome `st`, or, if its frame is still
    /// being sent, leaves that to the transmitter.
    fn finish(&self, a: &Answered, st: Result) {
        if a.taken {
            finish(a.cq, &a.p, st);
            return;
        }
        let done = {
            let mut s = self.sh.state.lock();
            let Some(i) = s.pending.iter().position(|p| p.id == a.p.id) else {
                // Flushed meanwhile: the flush reported it.
                return;
            };
            let Some(p) = s.pending.get_mut(i) else {
                return;
            };
            if !p.sent {
                p.early = Some(st);
                return;
            }
            s.pending.remove(i).ok()
        };
        if let Some(p) = done {
            progress::kick_tx(self.sh);
            finish(a.cq, &p, st);
        }
    }

    /// Fails `a` because its response broke the protocol (`e`). An
    /// operation whose frame is still being sent stays in the list: the
    /// teardown that follows cancels it once the transmitter lets go.
    fn fail_answered(a: &Answered, e: Error) -> Error {
        if a.taken {
            report_err(a.cq, &a.p.entry(), e);
        }
        e
    }

    /// Finds our operation a data response answers, with the response's
    /// status. The response must carry exactly the bytes asked for, or
    /// none with an error status (`EPROTO` otherwise; the operation fails).
    fn data_response(&self, h: &Hdr, kind: Kind, most: usize) -> Result<(Answered, Result)> {
        let a = self.pending(h.id, Some(kind))?;
        let st = status(h.data);
        let ok_len = if st.is_ok() { a.p.expect as u64 } else { 0 };
        if h.len != ok_len || a.p.expect > most {
            return Err(Self::fail_answered(&a, EPROTO));
        }
        Ok((a, st))
    }

    /// The data of our read, straight into the ULP's buffers (which the
    /// read's own frame does not carry, so they may be filled before it
    /// has left).
    fn read_resp(&mut self, h: &Hdr) -> Result {
        let (a, st) = self.data_response(h, Kind::Read, usize::MAX)?;
        if st.is_ok() {
            // SAFETY: The buffers of our read, valid until it completes.
            if let Err(e) = unsafe { self.place(&a.p.bufs[..a.p.n], a.p.expect) } {
                return Err(Self::fail_answered(&a, e));
            }
        }
        self.finish(&a, st);
        Ok(())
    }

    /// The old values of our atomic (its frame carries a copy of the
    /// operands, never the result buffers).
    fn atomic_resp(&mut self, h: &Hdr) -> Result {
        let (a, st) = self.data_response(h, Kind::Atomic, ATOMIC_MAX)?;
        let p = &a.p;
        let mut old = [0u8; ATOMIC_MAX];
        if let Err(e) = frame::recv_exact(self.sock, &mut old[..h.len as usize]) {
            return Err(Self::fail_answered(&a, e));
        }
        if st.is_ok() && p.n > 0 {
            atomics::to_wire(&mut old[..p.expect], p.elem);
            // SAFETY: Our fetch's result buffers, valid until it completes.
            unsafe { bufs::scatter(&p.bufs[..p.n], &old[..p.expect]) };
        }
        self.finish(&a, st);
        Ok(())
    }

    /// An acknowledgement of our operation.
    fn ack(&mut self, h: &Hdr) -> Result {
        let a = self.pending(h.id, None)?;
        if matches!(a.p.kind, Kind::Read | Kind::Atomic) {
            return Err(Self::fail_answered(&a, EPROTO));
        }
        self.finish(&a, status(h.data));
        Ok(())
    }
}
