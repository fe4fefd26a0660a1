// SPDX-License-Identifier: GPL-2.0

//! The transmit work of a kfi_sockets connection, the only writer of the
//! socket (process context; it may sleep while the socket is full).
//!
//! It sends the responses the receive work queued first (they free the
//! peer's operations), then our queued operations in posting order; while
//! a close drains the connection (`Shared::close_by`), responses only. An
//! operation that completes on the target's response is entered in the
//! pending list before its frame leaves, so the response always finds it;
//! at most `QUEUE` operations wait at once, which bounds what a peer must
//! answer. Operations without a response complete once the socket has
//! taken their bytes (the buffer may be reused); the others complete on
//! their response, but never before their whole frame has been sent (a
//! response that comes earlier is held in the pending entry until then),
//! and a response must come within `response_timeout_ms` of the frame
//! (`rx::expire_responses`; this work arms the connection's timer).
//! Each frame must leave within its deadline (`rx::frame_deadline`, as the
//! peer's frames must arrive within theirs): a peer that stops reading
//! ends the connection with `ETIMEDOUT` instead of holding the transmit
//! work for ever.
//! A fenced operation (`KFI_FENCE`) and everything after it waits until
//! no earlier operation is pending: every earlier one has completed.

use kernel::{prelude::*, sync::Arc};

use crate::{
    atomics::{self, ATOMIC_MAX},
    bufs::{self, slice},
    conn::{self, Shared, QUEUE},
    frame,
    kfi::{
        kfi_sys as sys,
        toolkit::completion::{report, report_err, CqEntry, Reports},
    },
    ksock::{Deadline, Socket},
    op::{Kind, Pending, Resp, TxOp},
    progress, rx,
    wire::{flags, Hdr, Op},
};

/// Buffers of one frame gathered on the transmitter's stack.
const PARTS_ON_STACK: usize = 4;

/// What the transmitter does next.
// One lives on the worker's stack at a time: boxing would allocate per
// operation under the endpoint's lock.
#[allow(clippy::large_enum_variant)]
enum Job {
    Resp(Resp),
    Op(TxOp, u64, Reports),
}

impl Job {
    /// Bytes of payload the job's frame carries (about: the few bytes of
    /// an atomic's operands do not count).
    fn payload_len(&self) -> u64 {
        let n = match self {
            Job::Resp(r) => r.reads.iter().map(|a| a.len()).sum(),
            Job::Op(op, ..) if op.kind == Kind::Read || op.kind == Kind::Atomic => 0,
            Job::Op(op, ..) => op.inject.unwrap_or_else(|| op.bufs.total()),
        };
        n as u64
    }
}

/// The transmit work (`progress.rs`): sends responses and queued
/// operations until there is nothing it may send.
pub(crate) fn run(sh: &Arc<Shared>) {
    let (sock, dead) = {
        let s = sh.state.lock();
        (s.sock.clone(), s.dead)
    };
    if dead {
        // Torn down: nothing is being sent any more, so the operations
        // can fail now.
        conn::flush(sh);
        return;
    }
    let Some(sock) = sock else {
        return;
    };
    // Queued again by whoever makes more work for us.
    while let Some(job) = next_job(sh) {
        // The receive work may wait for room in the response queue, an RDM
        // dispatcher for room in the transmit queue.
        sh.wake.notify_all();
        sock.set_tx_deadline(rx::frame_deadline(Deadline::now(), job.payload_len()));
        let r = match &job {
            Job::Resp(r) => send_resp(&sock, r).map(|()| {
                if r.op == Op::ReadResp && r.status == 0 {
                    // The peer's read is done with our region.
                    sh.rxq.cq().count_only(sys::KFI_RMA | sys::KFI_REMOTE_READ);
                }
            }),
            Job::Op(op, id, cq) => send_op(&sock, op, *id, *cq).map(|()| {
                if *id != 0 {
                    sent(sh, &sock, *id, *cq);
                }
            }),
        };
        if matches!(job, Job::Resp(_)) {
            // A close may wait for the queued responses to be out.
            sh.state.lock().resp_out = false;
            sh.wake.notify_all();
        }
        if let (Err(e), Job::Op(op, 0, cq)) = (&r, &job) {
            // Not in the pending list, so nobody else will report it; an
            // inject that failed is reported like any other operation.
            report_err(*cq, &op.entry(), *e);
        }
        drop(job);
        if let Err(e) = r {
            // The receive work may be parked: tear down from here.
            conn::teardown(sh, &sock, e);
            sh.wake.notify_all();
            return;
        }
    }
}

/// What to send next: a response, else the oldest queued operation if it
/// may go (an operation that waits for a response needs room in the
/// pending list, where it is entered now). `None`: nothing, or the
/// connection is closing (while a close drains, responses only).
fn next_job(sh: &Shared) -> Option<Job> {
    let mut s = sh.state.lock();
    if s.closing || !s.connected {
        return None;
    }
    if !s.resp.is_empty() {
        let r = s.resp.remove(0).ok()?;
        s.resp_out = true;
        return Some(Job::Resp(r));
    }
    if s.draining {
        // Our operations fail with `ECANCELED` at the close.
        return None;
    }
    let op = s.tx.front()?;
    if op.fenced() && !s.pending.is_empty() {
        // Kicked again when the last pending operation completes.
        return None;
    }
    if !op.wants_reply() {
        let op = s.tx.pop_front()?;
        return Some(Job::Op(op, 0, s.tx_cq));
    }
    if s.pending.len() >= QUEUE {
        return None;
    }
    // Room first: an operation taken out of the queue is never lost.
    s.pending.reserve(1, GFP_ATOMIC).ok()?;
    let mut op = s.tx.pop_front()?;
    let id = s.next_id;
    s.next_id = id.wrapping_add(1).max(1);
    let p = pending_of(&mut op, id);
    s.pending.push(p, GFP_ATOMIC).ok()?;
    Some(Job::Op(op, id, s.tx_cq))
}

/// The frame of our operation `id` has left: its buffers are no longer
/// read, so a response that came early completes it now; else the
/// response is due within `response_timeout_ms` (the connection's timer
/// queues the receive work then, see [`rx::expire_responses`]).
fn sent(sh: &Shared, sock: &Socket, id: u64, cq: Reports) {
    let ms = crate::response_timeout_ms();
    let due = (ms != 0).then(|| Deadline::after_ms(u64::from(ms)));
    let done = {
        let mut s = sh.state.lock();
        let Some(i) = s.pending.iter().position(|p| p.id == id) else {
            // Flushed meanwhile: the flush reported it.
            return;
        };
        let Some(p) = s.pending.get_mut(i) else {
            return;
        };
        p.sent = true;
        p.due = due;
        let early = p.early;
        match early {
            Some(st) => s.pending.remove(i).ok().map(|p| (p, st)),
            None => None,
        }
    };
    match done {
        Some((p, st)) => rx::finish(cq, &p, st),
        None if due.is_some() => progress::arm_timer(sock, ms),
        None => {}
    }
}

/// The entry of `op` in the list of operations waiting for a response;
/// where the response's data goes (a read's buffers, an atomic's result
/// buffers) moves into it, as the frame does not need it.
fn pending_of(op: &mut TxOp, id: u64) -> Pending {
    let sent = op.inject.unwrap_or_else(|| op.bufs.total());
    let mut p = Pending {
        id,
        kind: op.kind,
        context: op.context,
        flags: op.completion_flags(),
        len: sent,
        asked: op.flags & sys::KFI_COMPLETION != 0,
        bufs: Default::default(),
        expect: 0,
        elem: 0,
        silent: op.inject.is_some(),
        sent: false,
        due: None,
        early: None,
    };
    match op.kind {
        Kind::Read => {
            p.bufs = core::mem::take(&mut op.bufs);
            p.expect = sent;
        }
        Kind::Atomic => {
            p.bufs = core::mem::take(&mut op.res);
            // Old values come back only to a fetch (wire flag FETCH).
            p.expect = if op.fetch { op.rma[0].len as usize } else { 0 };
            p.elem = atomics::elem_size(op.datatype).unwrap_or(8);
            p.len = 0;
        }
        _ => {}
    }
    p
}

/// Sends one of our operations.
fn send_op(sock: &Socket, op: &TxOp, id: u64, cq: Reports) -> Result {
    let code = match op.kind {
        Kind::Msg => Op::Msg,
        Kind::Tagged => Op::Tagged,
        Kind::Write => Op::Write,
        Kind::Read => Op::ReadReq,
        Kind::Atomic => Op::Atomic,
    };
    let mut h = Hdr::new(code, id, 0);
    if op.flags & sys::KFI_REMOTE_CQ_DATA != 0 && op.kind != Kind::Read {
        h.flags |= flags::REMOTE_CQ_DATA;
        h.data = op.data;
    }
    if op.flags & sys::KFI_COMMIT_COMPLETE != 0 {
        h.flags |= flags::COMMIT_COMPLETE;
    } else if op.wants_reply() && matches!(op.kind, Kind::Msg | Kind::Tagged) {
        h.flags |= flags::DELIVERY_COMPLETE;
    }
    let rma = &op.rma[..op.nrma];
    let mut operands = [0u8; 2 * ATOMIC_MAX];
    let mut one: [&[u8]; 1] = [&[]];
    // The ULP's buffers: a long list gathers into an allocation of its
    // own (process context), a short one on the stack.
    let mut short: [&[u8]; PARTS_ON_STACK] = [&[]; PARTS_ON_STACK];
    let mut long: KVec<&[u8]> = KVec::new();
    let payload: &[&[u8]] = match (op.kind, op.inject) {
        (Kind::Read, _) => &[],
        (Kind::Atomic, _) => {
            h.tag = u64::from(op.datatype) | u64::from(op.atomic_op) << 32;
            if op.fetch {
                h.flags |= flags::FETCH;
            }
            let len = op.rma[0].len as usize;
            let want = if op.cmp.is_empty() { len } else { 2 * len };
            // SAFETY: The operation's operand buffers, valid until it
            // completes.
            unsafe {
                bufs::gather(&op.bufs, &mut operands[..len]);
                bufs::gather(&op.cmp, &mut operands[len..want]);
            }
            let size = atomics::elem_size(op.datatype).ok_or(EINVAL)?;
            atomics::to_wire(&mut operands[..want], size);
            one[0] = &operands[..want];
            &one
        }
        (_, Some(n)) => {
            one[0] = &op.inject_data[..n];
            &one
        }
        _ if op.bufs.len() <= PARTS_ON_STACK => {
            for (p, b) in short.iter_mut().zip(&op.bufs) {
                // SAFETY: A queued operation's buffer, valid until it
                // completes.
                *p = unsafe { slice(b) };
            }
            &short[..op.bufs.len()]
        }
        _ => {
            long.reserve(op.bufs.len(), GFP_KERNEL)?;
            for b in &op.bufs {
                // SAFETY: A queued operation's buffer, valid until it
                // completes.
                long.push(unsafe { slice(b) }, GFP_KERNEL)?;
            }
            &long
        }
    };
    if op.kind == Kind::Tagged {
        h.tag = op.tag;
    }
    frame::send_frame(sock, &h, rma, payload)?;
    match (op.wants_reply(), op.inject) {
        // Completes on its response.
        (true, _) => {}
        (false, None) => {
            let c = CqEntry {
                len: op.bufs.total(),
                ..op.entry()
            };
            report(cq, &c);
        }
        // An inject completes silently, but it is counted.
        (false, Some(_)) => cq.count_only(op.completion_flags()),
    }
    Ok(())
}

/// Sends a response the receiver queued.
fn send_resp(sock: &Socket, r: &Resp) -> Result {
    let mut h = Hdr::new(r.op, r.id, 0);
    h.data = r.status;
    match r.op {
        Op::AtomicResp => frame::send_frame(sock, &h, &[], &[&r.old[..r.old_len]]),
        Op::ReadResp => {
            let mut parts: KVec<&[u8]> = KVec::new();
            for a in r.reads.iter() {
                for b in a.bufs() {
                    // SAFETY: A checked range of a registered region, held
                    // by `a` until the response is sent.
                    parts.push(unsafe { slice(&b) }, GFP_KERNEL)?;
                }
            }
            frame::send_frame(sock, &h, &[], &parts)
        }
        _ => frame::send_frame(sock, &h, &[], &[]),
    }
}
