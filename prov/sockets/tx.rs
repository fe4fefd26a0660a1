// SPDX-License-Identifier: GPL-2.0

//! The transmitters of a kfi_sockets connection, the only writers of its
//! socket, one at a time (`State::tx_busy`): the transmit work (process
//! context; it may sleep while the socket is full, until the frame's
//! deadline), and inline senders, a thread that posts or the receive work
//! that queues a response, which send from their own context but never
//! wait for the peer: a frame the socket does not take whole is left
//! begun (`State::tx_begun`) for the transmit work to finish, before
//! anything else (`progress::push_tx` says who may send inline).
//!
//! They send the responses the receive work queued first (they free the
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
//! peer's frames must arrive within theirs), counted from when its first
//! byte was offered: a peer that stops reading ends the connection with
//! `ETIMEDOUT` instead of holding the transmit work for ever.
//! A fenced operation (`KFI_FENCE`) and everything after it waits until
//! no earlier operation is pending: every earlier one has completed.

use kernel::{prelude::*, sync::Arc};

use crate::{
    atomics::{self, ATOMIC_MAX},
    bufs::{self, slice},
    conn::{self, Shared, State, QUEUE},
    frame::{self, Parts, Sent},
    kfi::{
        kfi_sys as sys,
        toolkit::completion::{report, report_err, CqEntry, Reports},
    },
    ksock::{Deadline, SendPages, Socket, Wait},
    op::{Begun, Job, Kind, Pending, Resp, TxOp},
    progress, rx, splice,
    wire::{flags, Hdr, Op},
    wq::NoIo,
};

/// Buffers of one frame gathered on the transmitter's stack.
const PARTS_ON_STACK: usize = 4;

/// Frames one inline run sends at most before it leaves the rest to the
/// transmit work: a poster's call stays short.
const INLINE_BUDGET: usize = 8;

/// Frames one run of the transmit work sends at most before it is queued
/// again behind the other work: a connection that always has something
/// to send (a peer that keeps asking for answers) does not keep a worker.
/// Fewer than its queues hold (`conn::QUEUE` operations and as many
/// responses).
const RUN_FRAMES: usize = 32;

/// Payload bytes after which a run ends the same way.
const RUN_BYTES: u64 = 1 << 20;

/// The transmit work (`progress.rs`): sends responses and queued
/// operations until there is nothing it may send or its budget is spent
/// ([`RUN_FRAMES`], [`RUN_BYTES`]: then it queues itself again), first
/// the rest of a frame an inline sender began. Nothing if an inline
/// sender has the socket: it queues this work again when it lets go.
pub(crate) fn run(sh: &Arc<Shared>) {
    let (sock, begun, dead) = {
        let mut s = sh.state.lock();
        if s.tx_busy {
            return;
        }
        s.tx_busy = true;
        // Ours from here: what is queued meanwhile we find ourselves.
        s.tx_again = false;
        // A torn-down connection's begun frame fails in the flush.
        let begun = if s.dead { None } else { s.tx_begun.take() };
        (s.sock.clone(), begun, s.dead)
    };
    let mut again = false;
    if dead {
        // Torn down: nothing is being sent any more, so the operations
        // can fail now.
        conn::flush(sh);
    } else if let Some(sock) = sock {
        let mut sent = begun.is_some();
        let go_on = match begun {
            Some(b) => step(sh, &sock, b.job, b.at, b.start, Wait::Deadline),
            None => true,
        };
        if go_on {
            let ran = send_queued(sh, &sock);
            sent |= ran.sent;
            again = ran.budget;
            conn::note_idle(sh, &sock, sent);
        }
    }
    let looked = {
        let mut s = sh.state.lock();
        s.tx_busy = false;
        // A teardown during this run (its kick may have been taken by a
        // look in `send_queued`, which does not flush): the next run does.
        let died = s.dead && !dead;
        core::mem::take(&mut s.tx_again) || died
    };
    // Work that came after our last look (`progress::kick_tx`) queues us
    // again, now that we no longer have the socket: as we still run, that
    // wakes no other worker.
    if again || looked {
        // Behind the work items queued meanwhile; a run that finds
        // nothing to send returns at once.
        progress::kick_tx(sh);
    }
}

/// How a run of the transmit work over the queues ended.
struct Ran {
    /// It sent a frame.
    sent: bool,
    /// It spent its budget (there may be more to send).
    budget: bool,
}

/// Sends responses and queued operations, waiting for room in the socket,
/// until nothing may go or the run's budget is spent; the socket is ours.
/// Work queued meanwhile (`State::tx_again`) gets another look.
fn send_queued(sh: &Arc<Shared>, sock: &Socket) -> Ran {
    let (mut frames, mut bytes) = (0usize, 0u64);
    loop {
        while frames < RUN_FRAMES && bytes < RUN_BYTES {
            let Some(job) = next_job(sh) else { break };
            frames += 1;
            bytes = bytes.saturating_add(job_len(&job));
            if !step(sh, sock, job, 0, Deadline::now(), Wait::Deadline) {
                return Ran {
                    sent: true,
                    budget: false,
                };
            }
        }
        let budget = frames >= RUN_FRAMES || bytes >= RUN_BYTES;
        if budget || !core::mem::take(&mut sh.state.lock().tx_again) {
            return Ran {
                sent: frames > 0,
                budget,
            };
        }
    }
}

/// The payload bytes of `job`'s frame.
fn job_len(job: &Job) -> u64 {
    match job {
        Job::Resp(r, _) => r.payload_len(),
        Job::Op(op, ..) => op.payload_len(),
    }
}

/// Sends what is queued from the calling thread, without ever waiting for
/// the peer: a frame the socket does not take whole, and everything after
/// it, are left to the transmit work, and so is everything if another
/// transmitter has the socket. At most [`INLINE_BUDGET`] frames. Process
/// context that may sleep (the socket's lock), counted as a user of the
/// connection (`progress::push_tx`). Never inlined into its caller: its
/// frame (an operation moves through it) is taken only once the caller's
/// stack was found deep enough (`kfi_sockets_may_send_inline`), not on
/// every post. Ends the caller's use of the connection. Its allocations
/// start no I/O ([`NoIo`]): while it has the socket, the transmit work
/// waits for it, and a storage ULP's writeback may wait for that work.
#[inline(never)]
pub(crate) fn inline(sh: &Arc<Shared>) {
    let _noio = NoIo::begin();
    let sock = {
        let mut s = sh.state.lock();
        let free = !s.tx_busy && s.tx_begun.is_none() && !s.dead;
        let sock = s.sock.clone().filter(|_| free);
        if sock.is_some() {
            s.tx_busy = true;
        }
        sock
    };
    let Some(sock) = sock else {
        progress::kick_tx(sh);
        progress::done(sh);
        return;
    };
    let mut sent = false;
    for _ in 0..INLINE_BUDGET {
        let Some(job) = next_job(sh) else { break };
        sent = true;
        if !step(sh, &sock, job, 0, Deadline::now(), Wait::No) {
            break;
        }
    }
    let_go(sh, &sock, sent);
}

/// Whether a poster may send its operation itself, right now, ahead of
/// the queue ([`direct`]): nobody has the socket, nothing is queued or
/// begun, no response waits, the connection is not draining, and the
/// operation may go ([`may_go`]). With the connection's state locked.
pub(crate) fn may_send_direct(s: &mut State, op: &TxOp) -> bool {
    !s.tx_busy
        && s.tx_begun.is_none()
        && !s.dead
        && !s.draining
        && s.resp.is_empty()
        && s.tx.front().is_none()
        && s.sock.is_some()
        && may_go(s, op.fenced(), op.wants_reply())
}

/// Sends the poster's own operation `op` (entered as `id` with
/// [`enter_in_place`]) from where it lies, while the transmitter was free
/// ([`may_send_direct`]; the caller marked the socket busy and counted
/// itself as a user of the connection), from the poster's context: the
/// operation skips the transmit queue. As [`inline`]: never waits for the
/// peer; what the socket does not take is left to the transmit work (the
/// operation moves there, a default left in `op`). Ends the caller's use
/// of the connection. Process context that may sleep; allocates with no
/// I/O, as [`inline`].
#[inline(never)]
pub(crate) fn direct(sh: &Arc<Shared>, sock: &Socket, op: &mut TxOp, id: u64, cq: Reports) {
    let _noio = NoIo::begin();
    step_op(sh, sock, op, id, cq, 0, Deadline::now(), Wait::No);
    // What others queued while we had the socket goes to the transmit
    // work.
    let_go(sh, sock, true);
}

/// An inline sender lets go of the socket (`State::tx_busy`), having sent
/// frames or not (`sent`), and ends its use of the connection: the
/// transmit work takes over what is left, or what others queued meanwhile
/// (they found the socket busy). Usually one lock: a small message's path
/// counts every one.
fn let_go(sh: &Arc<Shared>, sock: &Socket, sent: bool) {
    let (more, first) = {
        let mut s = sh.state.lock();
        s.tx_busy = false;
        // What was queued while we had the socket (`progress::kick_tx`
        // noted it) is in the queues we look at here.
        s.tx_again = false;
        // The transmit work returned at once while we had the socket.
        let more = s.dead || s.tx_begun.is_some() || !s.resp.is_empty() || s.tx.front().is_some();
        let first = sent && !s.sent;
        // With something left to do, we stay a user (a close waits) until
        // it is handed over.
        if !more && !first && progress::end_use(&mut s) {
            // Before the unlock, after which a close may free `sh`.
            sh.idle.notify_all();
        }
        (more, first)
    };
    if !more && !first {
        return;
    }
    if more {
        progress::kick_tx(sh);
    } else {
        // The first frame since the last shrink: the idle timer gives the
        // socket's page fragment back.
        conn::note_idle(sh, sock, true);
    }
    progress::done(sh);
}

/// Sends `job`'s frame from byte `at` on (begun at `start`) and completes
/// what it completes; false when the transmitter stops: the socket did not
/// take it whole (`Wait::No`: the rest is left in `State::tx_begun`) or
/// the connection failed (torn down here).
fn step(sh: &Arc<Shared>, sock: &Socket, job: Job, at: usize, start: Deadline, wait: Wait) -> bool {
    match job {
        Job::Resp(r, more) => step_resp(sh, sock, r, more, at, start, wait),
        Job::Op(mut op, id, cq) => step_op(sh, sock, &mut op, id, cq, at, start, wait),
    }
}

/// Before a frame, or the rest of one from byte `at`: one that may wait
/// gets its deadline, `frame_timeout_ms` from its start and as much again
/// for each MiB the peer takes of it (as it gets for its own frames,
/// `rx.rs`), those taken before `at` included (an inline sender that
/// could not wait began it): a peer that asked for a large read and does
/// not read the answer holds the transmitter for that long, not for as
/// long as the answer's length would buy.
fn begin_frame(sock: &Socket, start: Deadline, at: usize, wait: Wait) {
    if wait == Wait::Deadline {
        let ms = u64::from(crate::frame_timeout_ms());
        sock.set_tx_deadline_paced(rx::frame_deadline(start), ms, at);
    }
}

/// [`step`] for our response `r` (`more`: another follows it at once).
fn step_resp(
    sh: &Arc<Shared>,
    sock: &Socket,
    r: Resp,
    more: bool,
    at: usize,
    start: Deadline,
    wait: Wait,
) -> bool {
    // The receive work may wait for the room this response left in the
    // queue.
    sh.wake.notify_all();
    begin_frame(sock, start, at, wait);
    let res = match send_resp(sock, &r, more, at, wait) {
        Ok(Sent::Upto(at)) => {
            let job = Job::Resp(r, more);
            sh.state.lock().tx_begun = Some(Begun { job, at, start });
            return false;
        }
        Ok(Sent::Whole) => Ok(()),
        Err(e) => Err(e),
    };
    let read_done = res.is_ok() && matches!(r, Resp::Read { status: 0, .. });
    // A close may wait for the queued responses to be out.
    sh.state.lock().resp_out = false;
    sh.wake.notify_all();
    // The read's hold on our region goes before the count tells the ULP
    // it may reuse the region (`kfi_mr_unmap` would find it busy).
    drop(r);
    if read_done {
        sh.rxq.cq().count_only(sys::KFI_RMA | sys::KFI_REMOTE_READ);
    }
    stop_on_err(sh, sock, res)
}

/// [`step`] for our operation `op`, entered as `id` (0: it waits for no
/// response), reported to `cq`; sent from where it lies, and moved into
/// `State::tx_begun` (a default left in its place) only if the socket
/// does not take it whole.
#[allow(clippy::too_many_arguments)]
fn step_op(
    sh: &Arc<Shared>,
    sock: &Socket,
    op: &mut TxOp,
    id: u64,
    cq: Reports,
    at: usize,
    start: Deadline,
    wait: Wait,
) -> bool {
    begin_frame(sock, start, at, wait);
    let res = match send_op(sock, op, id, at, wait) {
        Ok(Sent::Upto(at)) => {
            let job = Job::Op(core::mem::take(op), id, cq);
            sh.state.lock().tx_begun = Some(Begun { job, at, start });
            return false;
        }
        Ok(Sent::Whole) => Ok(()),
        Err(e) => Err(e),
    };
    let res = match (id, res) {
        (0, Ok(())) => {
            completed(op, cq);
            Ok(())
        }
        (_, Ok(())) => {
            sent(sh, sock, id, cq);
            Ok(())
        }
        // Not in the pending list, so nobody else will report it; an
        // inject that failed is reported like any other operation.
        (0, Err(e)) => {
            report_err(cq, &op.entry(), e);
            Err(e)
        }
        (_, Err(e)) => Err(e),
    };
    stop_on_err(sh, sock, res)
}

/// After a frame: true to go on; a failed connection is torn down here
/// (the receive work may be parked).
fn stop_on_err(sh: &Arc<Shared>, sock: &Socket, res: Result) -> bool {
    if let Err(e) = res {
        conn::teardown(sh, sock, e);
        sh.wake.notify_all();
        return false;
    }
    true
}

/// Our operation `op`, which waits for no response, has left whole: it
/// completes (an inject silently, but it is counted).
fn completed(op: &TxOp, cq: Reports) {
    if op.inject.is_some() {
        cq.count_only(op.completion_flags());
        return;
    }
    let c = CqEntry {
        len: op.bufs.total(),
        ..op.entry()
    };
    report(cq, &c);
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
        // The next transmitter's step takes the one behind it: it goes
        // out with that one (this transmitter, or the transmit work it
        // leaves the rest to, sends it).
        let more = !s.resp.is_empty();
        return Some(Job::Resp(r, more));
    }
    if s.draining {
        // Our operations fail with `ECANCELED` at the close.
        return None;
    }
    let (fenced, reply) = s.tx.front().map(|op| (op.fenced(), op.wants_reply()))?;
    if !may_go(&mut s, fenced, reply) {
        return None;
    }
    let op = s.tx.pop_front()?;
    Some(enter(&mut s, op))
}

/// Whether our next operation may go now: a `fenced` one waits until no
/// earlier operation is pending (kicked again when the last completes),
/// one that waits for a `reply` needs room in the pending list (made
/// here, so that [`enter`] never fails). With the state locked.
fn may_go(s: &mut State, fenced: bool, reply: bool) -> bool {
    if fenced && !s.pending.is_empty() {
        return false;
    }
    !reply || (s.pending.len() < QUEUE && s.pending.reserve(1, GFP_ATOMIC).is_ok())
}

/// The job of our operation `op`, which [`may_go`] ([`enter_in_place`]).
/// With the state locked.
fn enter(s: &mut State, mut op: TxOp) -> Job {
    let (id, cq) = enter_in_place(s, &mut op);
    Job::Op(op, id, cq)
}

/// Enters our operation `op`, which [`may_go`], where it lies: one that
/// waits for a response gets its id (0: none) and is entered in the
/// pending list before its frame leaves, so the response always finds
/// it. Returns the id and where the operation is reported. With the
/// state locked.
pub(crate) fn enter_in_place(s: &mut State, op: &mut TxOp) -> (u64, Reports) {
    if !op.wants_reply() {
        return (0, s.tx_cq);
    }
    let id = s.next_id;
    s.next_id = id.wrapping_add(1).max(1);
    let mut p = pending_of(op, id);
    if op.by_ref {
        // The frame goes next (the caller is the transmitter): a response
        // counts only once TCP has acknowledged it to its end (`rx/resp.rs`).
        // Without a mark, it is copied.
        let len = frame::frame_len(op.nrma, op.bufs.total());
        p.by_ref = s
            .sock
            .as_deref()
            .zip(len)
            .and_then(|(sock, len)| splice::mark(sock, len));
        op.by_ref = p.by_ref.is_some();
    }
    // Within the room `may_go` reserved: does not fail.
    let _ = s.pending.push_within_capacity(p);
    (id, s.tx_cq)
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
        // A frame the receive work is in the middle of ends by then
        // (`Rx::cap_by_responses`), unless that frame is the answer, or
        // the answer came already.
        if let Some(d) = due.filter(|_| early.is_none() && !p.answering) {
            sock.lower_rx_cap(d);
        }
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
    let sent = op.sent_len();
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
        answering: false,
        by_ref: None,
    };
    match op.kind {
        Kind::Read => {
            p.bufs = core::mem::take(&mut op.bufs);
            p.expect = sent;
        }
        Kind::Atomic => {
            if let Some(a) = op.atomic.as_mut() {
                p.bufs = core::mem::take(&mut a.res);
                // Old values come back only to a fetch (wire flag FETCH).
                p.expect = if a.fetch { op.rma[0].len as usize } else { 0 };
                p.elem = atomics::elem_size(a.datatype)
                    .and_then(|n| u8::try_from(n).ok())
                    .unwrap_or(8);
            }
            p.len = 0;
        }
        _ => {}
    }
    p
}

/// Sends one of our operations' frame from byte `at` on.
fn send_op(sock: &Socket, op: &TxOp, id: u64, at: usize, wait: Wait) -> Result<Sent> {
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
    } else if !op.wants_reply() && op.kind == Kind::Write {
        h.flags |= flags::UNANSWERED;
    }
    let rma = &op.rma[..op.nrma];
    if op.kind == Kind::Atomic {
        return send_atomic(sock, op, h, at, wait);
    }
    let mut one: [&[u8]; 1] = [&[]];
    // The ULP's buffers: a long list gathers into an allocation of its
    // own (process context), a short one on the stack.
    let mut short = Parts::<PARTS_ON_STACK>::new();
    let mut long: KVec<&[u8]> = KVec::new();
    let payload: &[&[u8]] = match (op.kind, &op.inject) {
        (Kind::Read, _) => &[],
        (_, Some(inj)) => {
            one[0] = inj.bytes();
            &one
        }
        _ if op.bufs.len() <= PARTS_ON_STACK => {
            for b in &op.bufs {
                // SAFETY: A queued operation's buffer, valid until it
                // completes.
                short.push(unsafe { slice(b) })?;
            }
            short.as_slice()
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
    let pages: Option<SendPages> = op.by_ref.then_some(splice::send_pages);
    frame::send_frame_split(sock, &h, rma, payload, pages, at, wait)
}

/// [`send_op`] for an atomic, header `h`: its operands (and compare
/// operands) gathered in wire order. Apart, so that other frames do not
/// clear room for them.
#[inline(never)]
fn send_atomic(sock: &Socket, op: &TxOp, mut h: Hdr, at: usize, wait: Wait) -> Result<Sent> {
    let a = op.atomic.as_ref().ok_or(EINVAL)?;
    h.tag = u64::from(a.datatype) | u64::from(a.op) << 32;
    if a.fetch {
        h.flags |= flags::FETCH;
    }
    let mut operands = [0u8; 2 * ATOMIC_MAX];
    let len = op.rma[0].len as usize;
    let want = if a.cmp.is_empty() { len } else { 2 * len };
    let (ops, cmps) = operands
        .get_mut(..want)
        .ok_or(EINVAL)?
        .split_at_mut(len.min(want));
    // SAFETY: The operation's operand buffers, valid until it completes.
    unsafe {
        bufs::gather(&op.bufs, ops);
        bufs::gather(&a.cmp, cmps);
    }
    let size = atomics::elem_size(a.datatype).ok_or(EINVAL)?;
    let wire = operands.get_mut(..want).ok_or(EINVAL)?;
    atomics::to_wire(wire, size);
    frame::send_frame_from(sock, &h, &op.rma[..op.nrma], &[wire], at, wait)
}

/// Sends a response the receiver queued, from byte `at` on; one without
/// data held for the next if `more`.
fn send_resp(sock: &Socket, r: &Resp, more: bool, at: usize, wait: Wait) -> Result<Sent> {
    let (id, status) = r.id_status();
    let mut h = Hdr::new(r.op(), id, 0);
    h.data = status;
    match r {
        Resp::Atomic { old, .. } => {
            frame::send_frame_from(sock, &h, &[], &[old.as_slice()], at, wait)
        }
        Resp::Read { reads, .. } => {
            let mut parts: KVec<&[u8]> = KVec::new();
            for a in reads.iter() {
                for b in a.bufs() {
                    // SAFETY: A checked range of a registered region, held
                    // by `a` until the response is sent.
                    parts.push(unsafe { slice(&b) }, GFP_KERNEL)?;
                }
            }
            frame::send_frame_from(sock, &h, &[], &parts, at, wait)
        }
        Resp::Ack { .. } => frame::send_hdr_from(sock, &h, at, wait, more),
    }
}
