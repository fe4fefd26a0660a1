// SPDX-License-Identifier: GPL-2.0

//! Responses to our own operations (`ReadResp`, `AtomicResp`, `Ack`): each
//! completes the pending operation it names, never before that
//! operation's frame has been sent whole (an earlier answer is held in
//! the pending entry for the transmitter); read data and old values go
//! straight into the ULP's buffers. A response for nothing we asked, or
//! of the wrong length, breaks the protocol (`EPROTO`). A response that
//! does not come within `response_timeout_ms` of its frame ends the
//! connection ([`expire_responses`]). The data callback handles the
//! responses that are all in the socket with the same functions
//! (`rx/soft.rs`, `rx/soft/answer.rs`).

use kernel::{prelude::*, sync::Arc};

use super::Rx;
use crate::{
    atomics::{self, ATOMIC_MAX},
    bufs,
    conn::Shared,
    frame,
    kfi::toolkit::completion::{report, report_err, CqEntry, Reports},
    ksock::{Deadline, Socket},
    op::{Kind, Pending},
    progress, splice,
    wire::Hdr,
};

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
            let Some(due) = p.due.filter(|_| !p.answering) else {
                continue;
            };
            if due.left_ms().is_none() {
                late = Some(i);
                break;
            }
            next = Some(next.map_or(due, |n| n.earlier(due)));
        }
        let late = late.and_then(|i| s.pending.remove(i).ok());
        // The frames of this run end by then (`Rx::cap_by_responses`).
        sock.set_rx_cap(next);
        (late, next, s.tx_cq)
    };
    if let Some(p) = late {
        if splice::in_flight(sock, p.by_ref) {
            // Its pages must not go out after it is reported.
            splice::abort(sock);
        }
        report_err(cq, &p.entry(), ETIMEDOUT);
        return Err(ETIMEDOUT);
    }
    if let Some(ms) = next.and_then(Deadline::left_ms) {
        progress::arm_timer(sock, ms);
    }
    Ok(())
}

/// Our operation a response answers.
pub(super) struct Answered {
    pub(super) p: Pending,
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

/// A received status word as a result: 0, or a positive errno (anything
/// else is `EIO`). The peer picks it, so the codes our operation must
/// never complete with are `EREMOTEIO` instead: the kernel's internal ones
/// (512 and up: `ERESTARTSYS`, `EIOCBQUEUED`, ... would be taken for
/// "restart" or "still in progress" by a caller that passes the error
/// on), and `EAGAIN` and `EINTR`, which ask to retry what has ended.
fn status(v: u64) -> Result {
    match v {
        0 => Ok(()),
        1..512 => match Error::from_errno(-(v as i32)) {
            e if e == EAGAIN || e == EINTR => Err(EREMOTEIO),
            e => Err(e),
        },
        512..4096 => Err(EREMOTEIO),
        _ => Err(EIO),
    }
}

/// Finds our operation `id` among those waiting (`EPROTO` if there is
/// none, or it was answered already: the peer answers what we never
/// asked, or answers a frame sent by page reference before TCP
/// acknowledged it). Taken off the list if its frame has been sent; else
/// it stays there and the answer is held until the transmitter is done
/// with it.
/// Any context but hard interrupt.
fn pending(sh: &Arc<Shared>, id: u64, kind: Option<Kind>) -> Result<Answered> {
    let mut s = sh.state.lock();
    let i = s
        .pending
        .iter()
        .position(|p| {
            p.id == id && p.early.is_none() && !p.answering && kind.is_none_or(|k| k == p.kind)
        })
        .ok_or(EPROTO)?;
    let cq = s.tx_cq;
    let entry = s.pending.get(i).ok_or(EPROTO)?;
    if let Some(m) = &entry.by_ref {
        // Answered before TCP acknowledged the frame's bytes, which went
        // by page reference (`splice.rs`): the peer cannot have them all.
        // The entry stays for the teardown.
        let sock = s.sock.as_deref();
        if !sock.is_some_and(|sock| splice::acked(sock, m)) {
            return Err(EPROTO);
        }
    }
    let entry = s.pending.get_mut(i).ok_or(EPROTO)?;
    if !entry.sent {
        // Until it lets go of the buffers, the handler reports it.
        entry.answering = true;
        return Ok(Answered {
            p: entry.take_answer(),
            cq,
            taken: false,
        });
    }
    let p = s.pending.remove(i).map_err(|_| EPROTO)?;
    let waiting = s.tx.front().is_some();
    drop(s);
    if waiting {
        // An operation may wait for room in the pending list, or for the
        // last one to complete (a fence).
        progress::kick_tx(sh);
    }
    Ok(Answered { p, cq, taken: true })
}

/// Completes `a` with the outcome `st`, or, if its frame is still being
/// sent, leaves that to the transmitter. Any context but hard interrupt.
pub(super) fn finish_answered(sh: &Arc<Shared>, a: &Answered, st: Result) {
    if a.taken {
        finish(a.cq, &a.p, st);
        return;
    }
    let done = {
        let mut s = sh.state.lock();
        let Some(i) = s.pending.iter().position(|p| p.id == a.p.id) else {
            drop(s);
            // Flushed while we filled its buffers: the flush left it to us.
            report_err(a.cq, &a.p.entry(), ECANCELED);
            return;
        };
        let Some(p) = s.pending.get_mut(i) else {
            return;
        };
        p.answering = false;
        if !p.sent {
            p.early = Some(st);
            return;
        }
        s.pending
            .remove(i)
            .ok()
            .map(|p| (p, s.tx.front().is_some()))
    };
    if let Some((p, waiting)) = done {
        if waiting {
            // As in `pending`.
            progress::kick_tx(sh);
        }
        finish(a.cq, &p, st);
    }
}

/// Fails `a` because its response broke the protocol (`e`). An operation
/// whose frame is still being sent stays in the list: the teardown that
/// follows cancels it once the transmitter lets go (or fails it now, if
/// that flush came first and left it to us). Any context but hard
/// interrupt.
pub(super) fn fail_answered(sh: &Shared, a: &Answered, e: Error) -> Error {
    if a.taken {
        report_err(a.cq, &a.p.entry(), e);
        return e;
    }
    let mut s = sh.state.lock();
    match s.pending.iter_mut().find(|p| p.id == a.p.id) {
        Some(p) => p.answering = false,
        None => {
            drop(s);
            report_err(a.cq, &a.p.entry(), e);
        }
    }
    e
}

/// An acknowledgement `h` of our operation. Any context but hard
/// interrupt: it only looks up and completes (the receive work and the
/// receive in the socket's callback, `rx/soft.rs`).
pub(super) fn ack(sh: &Arc<Shared>, h: &Hdr) -> Result {
    let a = pending(sh, h.id, None)?;
    if matches!(a.p.kind, Kind::Read | Kind::Atomic) {
        return Err(fail_answered(sh, &a, EPROTO));
    }
    finish_answered(sh, &a, status(h.data));
    Ok(())
}

/// Finds our operation `kind` a data response `h` answers, with the
/// response's status. The response must carry exactly the bytes asked
/// for, or none with an error status (`EPROTO` otherwise; the operation
/// fails). Any context but hard interrupt.
pub(super) fn data_response(
    sh: &Arc<Shared>,
    h: &Hdr,
    kind: Kind,
    most: usize,
) -> Result<(Answered, Result)> {
    let a = pending(sh, h.id, Some(kind))?;
    let st = status(h.data);
    let ok_len = if st.is_ok() { a.p.expect as u64 } else { 0 };
    if h.len != ok_len || a.p.expect > most {
        return Err(fail_answered(sh, &a, EPROTO));
    }
    Ok((a, st))
}

/// Completes our atomic `a` with the outcome `st` and the old values
/// `old` the response carried (`a.p.expect` bytes of them when `st` is
/// `Ok`), which go to its result buffers. Any context but hard interrupt.
pub(super) fn finish_atomic(sh: &Arc<Shared>, a: &Answered, st: Result, old: &mut [u8]) {
    let p = &a.p;
    if st.is_ok() && !p.bufs.is_empty() {
        if let Some(old) = old.get_mut(..p.expect) {
            atomics::to_wire(old, usize::from(p.elem));
            // SAFETY: Our fetch's result buffers, valid until it
            // completes.
            unsafe { bufs::scatter(&p.bufs, old) };
        }
    }
    finish_answered(sh, a, st);
}

impl Rx<'_> {
    /// The data of our read, straight into the ULP's buffers (which the
    /// read's own frame does not carry, so they may be filled before it
    /// has left).
    pub(super) fn read_resp(&mut self, h: &Hdr) -> Result {
        let (a, st) = data_response(self.sh, h, Kind::Read, usize::MAX)?;
        if st.is_ok() {
            // SAFETY: The buffers of our read, valid until it completes.
            if let Err(e) = unsafe { self.place(&a.p.bufs, a.p.expect, true) } {
                return Err(fail_answered(self.sh, &a, e));
            }
        }
        finish_answered(self.sh, &a, st);
        Ok(())
    }

    /// The old values of our atomic (its frame carries a copy of the
    /// operands, never the result buffers).
    pub(super) fn atomic_resp(&mut self, h: &Hdr) -> Result {
        let (a, st) = data_response(self.sh, h, Kind::Atomic, ATOMIC_MAX)?;
        let mut old = [0u8; ATOMIC_MAX];
        if let Err(e) = frame::recv_exact(self.sock, &mut old[..h.len as usize]) {
            return Err(fail_answered(self.sh, &a, e));
        }
        finish_atomic(self.sh, &a, st, &mut old);
        Ok(())
    }

    /// An acknowledgement of our operation.
    pub(super) fn ack(&mut self, h: &Hdr) -> Result {
        ack(self.sh, h)
    }
}
