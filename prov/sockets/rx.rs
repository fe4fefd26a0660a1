// SPDX-License-Identifier: GPL-2.0

//! The receive work of a kfi_sockets connection: reads the frames that
//! have arrived and acts on each (process context; it may sleep for the
//! rest of a frame, never between frames).
//!
//! This file is the frame loop and what every kind of frame uses
//! (placing, dropping, queueing a response for the transmitter); the
//! frames themselves are handled in `rx/recv.rs` (messages into posted
//! receives or held copies), `rx/target.rs` (peers' RMA and atomics on
//! our registered memory) and `rx/resp.rs` (responses to our own
//! operations, and their deadline). Anything that breaks the protocol (`EPROTO`)
//! ends the connection, and so does a frame that does not arrive whole by
//! its deadline (`ETIMEDOUT`, see [`bound_frame_rx`]): a peer that stops
//! inside a frame holds a worker for a bounded time only.

use core::{borrow::Borrow, cell::Cell};
use kernel::{prelude::*, sync::Arc, sync::CondVarTimeoutResult};

use crate::{
    bufs::{slice, Buf},
    conn::{self, teardown, Shared, RESP_MAX},
    frame,
    ksock::{Deadline, Socket},
    op::Resp,
    progress,
    sock_sys::{kfi_sockets_inq_hint, kfi_sockets_urg_hint},
    wire::{flags, Hdr, Op, RmaDescs, HDR_LEN},
    wq,
};

mod recv;
mod resp;
mod soft;
mod target;

pub(crate) use recv::{complete_held, complete_matched, may_go_on};
pub(crate) use resp::{expire_responses, finish};
pub(crate) use soft::receive as receive_in_callback;

/// The receive work (`progress.rs`): handles the frames that have arrived.
/// Marked as running (`State::rx_running`) meanwhile: a close waits for
/// the frame in hand, whose completion the ULP may have seen already, to
/// be done with, so that its `Ack` is queued before the close drains the
/// responses (`Shared::close_by`).
///
/// While the socket's callback receives (`rx/soft.rs`), it does nothing
/// but ask the callback to queue it again when done; a frame the callback
/// found broken ends the connection here.
pub(crate) fn run(sh: &Arc<Shared>) {
    run_as(sh, By::Work);
}

/// A thread that posted a receive, for which the connection's receive
/// waited (`rxq.rs`), receives itself, as the work would: the message is
/// copied in the thread that waits for it, without a worker's wakeup in
/// between. Only what cannot make it wait for the peer: messages with no
/// response to send, whole in the socket; anything else is left to the
/// work. The caller may sleep (`progress::may_receive_inline`) and was
/// counted as a user of the connection (`progress::begin_rx_inline`),
/// which this ends. Process context.
pub(crate) fn run_inline(sh: Arc<Shared>) {
    let noio = wq::NoIo::begin();
    run_as(&sh, By::Poster);
    drop(noio);
    progress::done(&sh);
    // A reference the endpoint's receive queues held (`RxState::stalled`):
    // if it is the last, the connection is freed here, in process context.
    drop(sh);
}

/// Who receives.
#[derive(Clone, Copy, PartialEq, Eq)]
enum By {
    /// The receive work.
    Work,
    /// A poster of a receive ([`run_inline`]).
    Poster,
}

/// [`run`] or [`run_inline`].
fn run_as(sh: &Arc<Shared>, by: By) {
    let (sock, failed) = {
        let mut s = sh.state.lock();
        // Before `start` has marked the connection up nothing may answer
        // (`Rx::respond`): it kicks this work once it has.
        if s.dead || s.closing || s.draining || !s.connected {
            return;
        }
        if s.rx_soft {
            s.rx_again = true;
            return;
        }
        if s.rx_running {
            // The work or an inline poster: it looks again for us.
            s.rx_kicked = true;
            return;
        }
        let Some(sock) = s.sock.clone() else {
            return;
        };
        s.rx_running = true;
        // Ours from here: what the callback notes while we run.
        s.rx_again = false;
        s.rx_kicked = false;
        (sock, s.rx_failed.take())
    };
    let mut failed = failed;
    let mut looks = 0;
    // A poster looks once: what comes meanwhile goes to the work.
    let most = if by == By::Poster { 1 } else { RUN_LOOKS };
    loop {
        looks += 1;
        let ran = match failed {
            Some(e) => {
                teardown(sh, &sock, e);
                Ran::Idle
            }
            None => run_frames(sh, &sock, by),
        };
        let mut s = sh.state.lock();
        // Bytes came while we ran (the callback left them to us): another
        // look, unless a run queued for the budget gets them, the frame
        // in front waits for a receive (their arrival changes nothing),
        // or the connection ends; after `RUN_LOOKS`, a run queued behind
        // the other work items does. The other receiver's call is looked
        // at even with a frame parked: it may be the receive it waits for.
        let ending = s.dead || s.closing || s.draining;
        let bytes = core::mem::take(&mut s.rx_again) && s.parked.is_none();
        let kicked = core::mem::take(&mut s.rx_kicked);
        let again = (bytes || kicked) && ran == Ran::Idle && !ending;
        if !again || looks >= most {
            s.rx_running = false;
            drop(s);
            // A poster's budget or hand-over is the work's turn, queued
            // only now that the socket is free for it.
            if again || (ran == Ran::Budget && by == By::Poster && !ending) {
                progress::kick_rx(sh);
            }
            break;
        }
        failed = s.rx_failed.take();
    }
    sh.wake.notify_all();
}

/// Runs over the frames one run of the receive work makes at most when
/// bytes keep coming while it runs ([`run`]).
const RUN_LOOKS: u32 = 8;

/// One run over the frames that have arrived. A run of the work that
/// ends at its budget queues the work again (behind the work items queued
/// meanwhile); a poster's leaves that to [`run_as`].
fn run_frames(sh: &Arc<Shared>, sock: &Arc<Socket>, by: By) -> Ran {
    // Not a poster's business: its post would report our operations'
    // timeouts, or end the connection for them. The timer's run does it.
    if by == By::Work {
        if let Err(e) = expire_responses(sh, sock) {
            teardown(sh, sock, e);
            return Ran::Idle;
        }
        conn::shrink_if_idle(sh, sock);
    }
    let mut rx = Rx {
        sh,
        sock,
        by,
        rma: None,
        unsent: Cell::new(0),
        ahead: [0; HDR_LEN],
        ahead_len: 0,
    };
    match rx.run() {
        Ok(Ran::Idle) => {
            rx.push_responses();
            Ran::Idle
        }
        Ok(Ran::Budget) => {
            rx.push_responses();
            if by == By::Work {
                progress::kick_rx(sh);
                // Queued already: not again at the end of the run.
                return Ran::Queued;
            }
            Ran::Budget
        }
        Ok(Ran::Queued) => Ran::Queued,
        Err(e) => {
            if e == ETIMEDOUT {
                // A frame may have run into the deadline of a response
                // (`Rx::cap_by_responses`): the operation waiting for it
                // fails with `ETIMEDOUT`, as when the timer finds it.
                let _ = expire_responses(sh, sock);
            }
            teardown(sh, sock, e);
            Ran::Idle
        }
    }
}

/// How a run of the receive work ended.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ran {
    /// Nothing more to do for now (no more bytes, a message parked, or
    /// the connection closing).
    Idle,
    /// Its budget ran out with frames left, or a poster left a frame to
    /// the work: it must be queued.
    Budget,
    /// The work was queued again already.
    Queued,
}

/// Frames one run of the receive work handles at most: a peer that keeps
/// its socket full does not keep a worker, and the CPU, for as long as it
/// likes; the run is queued again behind the other work.
const RUN_FRAMES: usize = 64;

/// Payload bytes after which a run ends the same way.
const RUN_BYTES: u64 = 1 << 20;

/// The deadline of a frame (or of its header) begun at `start`, in
/// either direction: `frame_timeout_ms` later, `None` when the parameter
/// is 0 (unbounded). The bytes that go through move it ([`bound_frame_rx`],
/// `tx::begin_frame`). A deadline for the whole frame, not for each read
/// or write: a peer that drips bytes, or reads ours a byte at a time, is
/// cut off too.
pub(crate) fn frame_deadline(start: Deadline) -> Option<Deadline> {
    let ms = u64::from(crate::frame_timeout_ms());
    (ms != 0).then(|| Deadline::after_ms_from(start, ms))
}

/// Bounds the receive of the peer's frame begun at `start`: it gets
/// `frame_timeout_ms` from there, and as much again for each MiB of it
/// that has arrived (a floor of 1 MiB per `frame_timeout_ms` on a slow
/// link), so the length its header claims buys it no time: a header that
/// claims 64 MiB and stops would otherwise hold the receive work for 65
/// times the parameter.
fn bound_frame_rx(sock: &Socket, start: Deadline) {
    let ms = u64::from(crate::frame_timeout_ms());
    sock.set_rx_deadline_paced(frame_deadline(start), ms);
}

/// Queues response `r` for the transmitter without waiting: `ENOSPC` if
/// the queue is full (the caller made sure it is not), `ECANCELED` once
/// the connection closes. Any context but hard interrupt (the transmit
/// work sends it).
fn respond_now(sh: &Arc<Shared>, r: Resp) -> Result {
    let mut s = sh.state.lock();
    if s.closing || !s.connected {
        return Err(ECANCELED);
    }
    // In the room the caller reserved (`State::reserve_resp`).
    if s.resp.len() >= RESP_MAX || s.resp.push_within_capacity(r).is_err() {
        return Err(ENOSPC);
    }
    drop(s);
    progress::kick_tx(sh);
    Ok(())
}

/// Bytes the receive work drops per read (`Rx::discard`).
const DISCARD_CHUNK: usize = 512;

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
    /// Who receives: a poster takes only what cannot make it wait
    /// ([`Self::poster_may_take`]).
    by: By,
    /// The descriptors of the frame in hand, if the data callback read
    /// them with its header (`State::parked_rma`).
    rma: Option<RmaDescs>,
    /// Responses queued but not handed to the transmitter yet: while the
    /// next frame has arrived already, they wait for its response, so
    /// that a burst of frames is answered in one segment
    /// ([`Self::respond`]).
    unsent: Cell<usize>,
    /// The first `ahead_len` bytes of the next frame's header, received
    /// with the last bytes of the frame before ([`Self::recv_last`]).
    ahead: [u8; HDR_LEN],
    ahead_len: usize,
}

/// Most responses the receive work holds back for the next frame's.
const RESP_BATCH: usize = 16;

/// Frames of this many bytes or more (after the header) have the held
/// responses handed over before they are copied, unless the next frame's
/// header is in the socket too: a copy this long would keep the peer
/// waiting for them.
const EARLY_ANSWER_MIN: usize = 16 << 10;

impl Rx<'_> {
    /// Handles frames until the socket has no more bytes, a message
    /// waits for a receive, the connection is closing (a close that
    /// drains it takes no new frame) or the run's budget is spent
    /// ([`RUN_FRAMES`], [`RUN_BYTES`]).
    fn run(&mut self) -> Result<Ran> {
        let mut frames = 0usize;
        let mut bytes = 0u64;
        loop {
            let parked = {
                let mut s = self.sh.state.lock();
                if s.closing || s.draining {
                    // A header read ahead is dropped with the connection:
                    // a drain always ends in its close.
                    return Ok(Ran::Idle);
                }
                // TCP urgent data (the protocol has none) ends the
                // connection before the next frame: the data callback
                // hands over one that arrives while we read (`rx_failed`),
                // this finds one that came before the socket had the
                // callback.
                if let Some(e) = s.rx_failed.take() {
                    return Err(e);
                }
                // SAFETY: A live socket; the call only reads sequence
                // numbers and flags.
                if unsafe { kfi_sockets_urg_hint(self.sock.as_raw()) } {
                    return Err(EPROTO);
                }
                self.rma = s.parked_rma.take();
                s.parked.take()
            };
            let h = match parked {
                Some(h) => {
                    if !self.poster_may_take(&h) {
                        return Ok(self.hand_over(h));
                    }
                    // We made it wait, not the peer: its clock starts now.
                    bound_frame_rx(self.sock, Deadline::now());
                    h
                }
                None if self.ahead_len > 0 => self.ahead_hdr()?,
                None => {
                    if self.by == By::Poster {
                        // A header not all there yet would make us wait.
                        match self.inq_hint() {
                            0 => return Ok(Ran::Idle),
                            n if n < HDR_LEN => return Ok(Ran::Budget),
                            _ => {}
                        }
                    }
                    let start = Deadline::now();
                    let Some(h) = frame::recv_hdr_begun(self.sock, || {
                        // The frame has begun: its header is due by the
                        // deadline of an empty frame, the rest by its own.
                        self.sock.set_rx_deadline(frame_deadline(start));
                        self.push_unless_ready(HDR_LEN);
                    })?
                    else {
                        return Ok(Ran::Idle);
                    };
                    if !self.poster_may_take(&h) {
                        return Ok(self.hand_over(h));
                    }
                    bound_frame_rx(self.sock, start);
                    h
                }
            };
            self.cap_by_responses(&h);
            // Held responses do not wait while we wait for the rest, nor,
            // for a large frame, while we copy the last frame the socket
            // holds: the peer, answered, sends its next frames meanwhile,
            // so a window of answered writes never drains (as it did once
            // per window when the answers left only after the copy).
            let descs = if self.rma.is_some() { 0 } else { h.rma_bytes() };
            let rest = usize::try_from(h.len)
                .ok()
                .and_then(|n| n.checked_add(descs));
            let want = match rest {
                Some(n) if n >= EARLY_ANSWER_MIN => n.saturating_add(HDR_LEN),
                Some(n) => n,
                None => usize::MAX,
            };
            self.push_unless_ready(want);
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
            // Until the next frame's header is in, its frame deadline
            // bounds it, and our operations sent meanwhile.
            self.sock.set_rx_cap(None);
            if let Step::Parked = step {
                return Ok(Ran::Idle);
            }
            frames += 1;
            bytes = bytes.saturating_add(h.len);
            if frames >= RUN_FRAMES || bytes >= RUN_BYTES {
                return self.pause();
            }
        }
    }

    /// Caps the receive of frame `h` at the earliest deadline of our
    /// operations' responses (`response_timeout_ms`, `rx/resp.rs`), the one
    /// `h` is the response to aside: those responses cannot arrive before
    /// this frame ends, and a peer that takes its time over a large frame,
    /// at the pace its deadline allows, must not hold them past their
    /// deadline (the frame then fails with `ETIMEDOUT` and `run_frames`
    /// expires them). Our operations sent meanwhile bring the cap forward
    /// (`tx::sent`).
    fn cap_by_responses(&self, h: &Hdr) {
        let answers = matches!(h.op, Op::ReadResp | Op::AtomicResp | Op::Ack);
        let s = self.sh.state.lock();
        let due = s
            .pending
            .iter()
            .filter(|p| !(p.answering || (answers && p.id == h.id)))
            .filter_map(|p| p.due)
            .reduce(Deadline::earlier);
        self.sock.set_rx_cap(due);
        drop(s);
    }

    /// Whether frame `h`, whose header is in hand, may be handled here:
    /// always by the work; by a poster ([`run_inline`]) only if it cannot
    /// make the poster wait for the peer: a message that asks for no
    /// acknowledgement (a response may wait for room in the queue), with
    /// all of its payload in the socket, and no larger than a run's
    /// payload budget ([`RUN_BYTES`]): what one post copies or drops is
    /// bounded by that, not by the socket's buffer.
    fn poster_may_take(&self, h: &Hdr) -> bool {
        if self.by == By::Work {
            return true;
        }
        let acked = h.flags & (flags::DELIVERY_COMPLETE | flags::COMMIT_COMPLETE) != 0;
        matches!(h.op, Op::Msg | Op::Tagged)
            && !acked
            && h.len <= RUN_BYTES
            && usize::try_from(h.len).is_ok_and(|n| n <= self.inq_hint())
    }

    /// Leaves frame `h`, whose header is in hand, to the work, as the
    /// data callback does (`State::parked`): a poster's run ends.
    fn hand_over(&mut self, h: Hdr) -> Ran {
        let mut s = self.sh.state.lock();
        s.parked = Some(h);
        s.parked_rma = self.rma.take();
        Ran::Budget
    }

    /// Ends a run whose budget is spent between two frames. A header read
    /// ahead is completed and left parked for the next run, as the data
    /// callback leaves a frame to this work: nothing read from the socket
    /// is lost, and the callback leaves the socket alone while a header is
    /// parked.
    fn pause(&mut self) -> Result<Ran> {
        if self.ahead_len > 0 {
            let h = self.ahead_hdr()?;
            self.sh.state.lock().parked = Some(h);
        }
        Ok(Ran::Budget)
    }

    /// The header of the frame whose first bytes came with the last
    /// bytes of the frame before: the rest is due by the deadline of an
    /// empty frame, the frame by its own.
    fn ahead_hdr(&mut self) -> Result<Hdr> {
        let start = Deadline::now();
        self.sock.set_rx_deadline(frame_deadline(start));
        let got = core::mem::take(&mut self.ahead_len);
        self.push_unless_ready(HDR_LEN.saturating_sub(got));
        frame::recv_exact(self.sock, self.ahead.get_mut(got..).ok_or(EIO)?)?;
        let h = Hdr::decode(&self.ahead)?;
        bound_frame_rx(self.sock, start);
        Ok(h)
    }

    /// Receives `buf`, the last bytes of the frame in hand, and with them
    /// what the socket already holds of the next frame's header, if it
    /// seems to hold all of it (a hint: the call never waits for it):
    /// one socket call less per frame of a burst.
    fn recv_last(&mut self, buf: &mut [u8]) -> Result {
        let want = buf.len().saturating_add(HDR_LEN);
        // A poster reads no header ahead: it could not hand over a part
        // of one, and would wait for the rest.
        if self.by == By::Poster || self.ahead_len != 0 || self.inq_hint() < want {
            return frame::recv_exact(self.sock, buf);
        }
        let n = self.sock.recv_pair(buf, &mut self.ahead)?;
        if n == 0 {
            return Err(ECONNRESET);
        }
        match n.checked_sub(buf.len()) {
            Some(extra) => self.ahead_len = extra,
            None => frame::recv_exact(self.sock, buf.get_mut(n..).ok_or(EIO)?)?,
        }
        Ok(())
    }

    /// The descriptors of `h`, the frame in hand: read by the data
    /// callback already, or from the socket now.
    fn descs(&mut self, h: &Hdr) -> Result<RmaDescs> {
        match self.rma.take() {
            Some(d) => Ok(d),
            None => frame::recv_rma(self.sock, h),
        }
    }

    /// The message's remote CQ data, if it carries some.
    fn cq_data(h: &Hdr) -> Option<u64> {
        (h.flags & flags::REMOTE_CQ_DATA != 0).then_some(h.data)
    }

    /// Reads and drops `len` bytes (through a buffer on the stack: a
    /// connection keeps none for it, and only a refused or cut payload
    /// comes here).
    fn discard(&mut self, mut len: usize) -> Result {
        let mut sink = [0u8; DISCARD_CHUNK];
        while len > 0 {
            let n = len.min(DISCARD_CHUNK);
            frame::recv_exact(self.sock, &mut sink[..n])?;
            len -= n;
        }
        Ok(())
    }

    /// Receives `len` bytes into `bufs` (as much as fits, the rest is
    /// dropped); returns (placed, dropped). `ends`: the frame ends with
    /// these bytes (then the next header may come with them,
    /// [`Self::recv_last`]).
    ///
    /// # Safety
    ///
    /// `bufs` are a live operation's or region's buffers.
    unsafe fn place(
        &mut self,
        bufs: impl IntoIterator<Item = impl Borrow<Buf>>,
        len: usize,
        ends: bool,
    ) -> Result<(usize, usize)> {
        let mut left = len;
        for b in bufs {
            if left == 0 {
                break;
            }
            let b = b.borrow();
            let n = b.len.min(left);
            // SAFETY: As required.
            let to = unsafe { slice(b) }.get_mut(..n).ok_or(EIO)?;
            left -= n;
            if left == 0 && ends {
                self.recv_last(to)?;
            } else {
                frame::recv_exact(self.sock, to)?;
            }
        }
        let dropped = left;
        self.discard(left)?;
        Ok((len - dropped, dropped))
    }

    /// Queues a response for the transmitter, waiting while the queue is
    /// full (the peer then waits for us), for `frame_timeout_ms` at most: a
    /// peer that asks and never reads the answers gets `ETIMEDOUT`. The
    /// transmitter gets it now unless the socket holds the next frame's
    /// header already (then it goes with that frame's response, at most
    /// [`RESP_BATCH`] held; the run's end, or a wait for the peer, hands
    /// over what is held).
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
            if self.unsent.get() > 0 {
                // Held responses fill the queue: they must go first.
                drop(s);
                self.push_responses();
                s = self.sh.state.lock();
                continue;
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
        self.unsent.set(self.unsent.get() + 1);
        if self.unsent.get() >= RESP_BATCH {
            self.push_responses();
        } else {
            self.push_unless_ready(HDR_LEN);
        }
        Ok(())
    }

    /// Hands the held responses to the transmitter (sent from here if it
    /// is free, see `progress::push_tx`).
    fn push_responses(&self) {
        if self.unsent.replace(0) > 0 {
            progress::push_tx(self.sh, progress::Caller::Receiver);
        }
    }

    /// Hands the held responses over unless the socket seems to hold
    /// `want` more bytes already: we would otherwise wait for the peer with
    /// them held.
    fn push_unless_ready(&self, want: usize) {
        if self.unsent.get() == 0 {
            return;
        }
        // The next header's first bytes may be in hand already.
        if self.inq_hint().saturating_add(self.ahead_len) < want {
            self.push_responses();
        }
    }

    /// About the bytes a read can take from the socket, read without its
    /// lock: it may be stale when used, but as we are its only reader it
    /// counts no bytes that are not there (a FIN that just arrived may
    /// count as one for a moment: a header then waits for a byte that
    /// does not come, and the connection ends at the FIN as it would).
    fn inq_hint(&self) -> usize {
        // SAFETY: A live socket; the call only reads sequence numbers and
        // flags.
        let ready = unsafe { kfi_sockets_inq_hint(self.sock.as_raw()) };
        usize::try_from(ready).unwrap_or(0)
    }

    /// Acknowledges `h` if its sender asked for it.
    fn ack_if_asked(&self, h: &Hdr) -> Result {
        if h.flags & (flags::DELIVERY_COMPLETE | flags::COMMIT_COMPLETE) != 0 {
            self.respond(Resp::ack(h.id, Ok(())))?;
        }
        Ok(())
    }

    /// Whether this connection is closing or ended: a message of it is
    /// neither placed nor parked (a parked one would file an ended
    /// connection among those waiting for a receive again).
    fn closing(&self) -> bool {
        let s = self.sh.state.lock();
        s.closing || s.dead
    }
}
