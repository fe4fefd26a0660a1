// SPDX-License-Identifier: GPL-2.0

//! Receiving in the socket's data callback (softirq, or the thread that
//! releases the socket's lock): whole frames that need nothing that may
//! sleep are handled right there, from the socket's buffers
//! (`tcp_read_sock`), without waking the receive work. A message for a
//! posted receive is copied into it and reported; a peer's RMA write is
//! placed in our regions (`soft/write.rs`); a response to our own
//! operation completes it (with an acknowledgement) or fills its buffers
//! first (a read's data, an atomic's old values: `soft/answer.rs`). The
//! receive work still does everything else: a frame not whole yet (it
//! waits for the rest, within the frame's deadline), a message with no
//! receive posted (one that waits in the socket for its receive is parked
//! here, for the post of that receive to take: `rxq.rs`), a refused or
//! committed write, the peer's reads and atomics, the end of the stream.
//!
//! One receiver at a time (`State::rx_running` for the work,
//! `State::rx_soft` here): the callback leaves everything to the work
//! while the work runs, noting it (`State::rx_again`: the work looks
//! again before it ends, rather than being queued while it runs), and the
//! work that finds the callback receiving notes it the same way and is
//! queued again when the callback is done. A frame is begun here only when all of it is in the socket, so
//! the work always starts at a frame's boundary, or with the header the
//! callback read and handed over (`State::parked`; for a peer's RMA or
//! atomic, its descriptors too, `State::parked_rma`, when they are all in
//! the socket). A frame that breaks the protocol is handed over as an
//! error (`State::rx_failed`): ending the connection may sleep.

use core::{borrow::Borrow, ffi::c_void};
use kernel::{bindings, prelude::*, sync::Arc};

use super::{recv::finish_recv, resp, respond_now, Rx};
use crate::{
    bufs::Buf,
    conn::Shared,
    kfi::{kfi_sys as sys, toolkit::completion::Reports},
    op::{Resp, RxOp},
    progress,
    sock_sys::{
        self, c_callback, kfi_sockets_inq, kfi_sockets_peek, kfi_sockets_read_sock,
        kfi_sockets_skb_copy, kfi_sockets_urg_pending,
    },
    wire::{flags, Hdr, Op, RmaDescs, HDR_LEN, RMA_DESC_LEN, RMA_IOV_MAX},
};

mod answer;
mod write;

/// Bytes of a socket buffer the parser is given.
struct Chunk {
    skb: *const bindings::sk_buff,
    /// Where the given bytes start in `skb`.
    offset: usize,
}

impl Chunk {
    /// Copies `len` bytes from `at` bytes into the chunk to `to`.
    ///
    /// # Safety
    ///
    /// `to` is valid for writes of `len` bytes; the chunk has at least
    /// `at + len` bytes (the parser never asks for more than it was
    /// given).
    unsafe fn copy(&self, at: usize, to: *mut u8, len: usize) -> Result {
        let off = self.offset.checked_add(at).ok_or(EIO)?;
        let off = c_uint::try_from(off).map_err(|_| EIO)?;
        let n = c_uint::try_from(len).map_err(|_| EIO)?;
        // SAFETY: A live skb of the socket (`tcp_read_sock` holds it for
        // the call) with these bytes, by the caller's promise; `to` is
        // writable for `len` bytes.
        let r = unsafe { kfi_sockets_skb_copy(self.skb, off, to.cast(), n) };
        if r != 0 {
            return Err(EIO);
        }
        Ok(())
    }
}

/// A message being copied into the posted receive it took.
struct Placing {
    h: Hdr,
    op: RxOp,
    cq: Reports,
    /// Bytes placed so far and dropped (beyond the receive's buffers).
    placed: usize,
    dropped: usize,
    /// Payload bytes still to come.
    left: usize,
}

/// The descriptors of a peer's RMA or atomic frame being read, to be
/// handed to the receive work with its header.
struct DescsIn {
    h: Hdr,
    buf: [u8; RMA_IOV_MAX * RMA_DESC_LEN],
    /// Bytes of `buf` read.
    got: usize,
}

/// The frame a pass of the callback is in the middle of: one at a time,
/// so the largest sets the callback's stack use (it may run on an inline
/// sender's stack, from `release_sock`).
enum InHand {
    /// Between frames: the next header comes.
    Nothing,
    /// A message being placed in its posted receive.
    Msg(Placing),
    /// A peer's RMA or atomic's descriptors being read.
    Descs(DescsIn),
    /// A peer's write being placed (`soft/write.rs`).
    Write(write::Writing),
    /// A response to our read or atomic being read (`soft/answer.rs`).
    Answer(answer::Answering),
}

/// The state of one pass of the callback over the socket's bytes.
struct Parser<'a> {
    sh: &'a Arc<Shared>,
    /// Bytes in the socket not taken yet.
    avail: usize,
    hdr: [u8; HDR_LEN],
    /// Bytes of `hdr` read.
    got: usize,
    hand: InHand,
    /// No more frames in this pass: the next needs the receive work, or
    /// is not whole yet.
    stop: bool,
    /// The peer broke the protocol, or the connection is closing.
    failed: Option<Error>,
    /// Frames this pass may still begin.
    budget: usize,
    /// Bytes (headers included) this pass may still take: a frame whose
    /// payload is larger is left to the receive work.
    bytes_left: usize,
    /// The waiters of the first receive's CQ were woken for the message at
    /// the head of the socket ([`expect_early`]).
    expected: bool,
    /// This pass parked a message for its receive ([`Parser::wait_for_receive`]),
    /// which may wait this many milliseconds.
    waits: Option<u32>,
}

/// Frames one pass of the callback handles at most: a peer that sends a
/// flood of small frames keeps a softirq busy for a bounded time only; the
/// receive work takes the rest.
const FRAME_BUDGET: usize = 64;

/// Bytes (headers included) one pass of the callback takes at most, about:
/// a frame whose payload does not fit in what is left of it (any frame of
/// this size or more) is left to the receive work, so a peer's burst of large
/// messages or writes, or one frame as large as the socket's buffer,
/// keeps a softirq busy for a bounded time only.
const BYTE_BUDGET: usize = 256 << 10;

/// Messages up to this size wake their CQ's waiters before they are
/// parsed and copied (`kfi_util_cq_expect`).
const EXPECT_MAX: usize = 4096;

/// Wakes the threads waiting on the CQ of the first posted receive if the
/// frame at the head of the socket (`avail` bytes, `sk` locked) looks like
/// a whole message of at most [`EXPECT_MAX`] bytes that it will report:
/// their wakeup, the longest part of such a message's way to a waiting
/// thread, then overlaps this pass instead of following it. A header that
/// only looks right costs a waiter an early wakeup (it waits again),
/// nothing more: the pass checks the frame as usual. True if it tried.
fn expect_early(sh: &Shared, sk: *mut bindings::sock, avail: usize) -> bool {
    let mut b = [0u8; HDR_LEN];
    // SAFETY: The data callback's socket, locked by the caller; `b` is
    // `HDR_LEN` writable bytes.
    if unsafe { kfi_sockets_peek(sk, b.as_mut_ptr().cast(), HDR_LEN as u32) } != 0 {
        return false;
    }
    let whole = |n: u64| {
        usize::try_from(n).is_ok_and(|n| n <= EXPECT_MAX && n <= avail.saturating_sub(HDR_LEN))
    };
    if !Hdr::msg_len_hint(&b).is_some_and(whole) {
        return false;
    }
    let (cq, asked) = {
        let s = sh.rxq.state.lock();
        match s.rx.first() {
            Some(op) if !s.closing => (s.cq, op.asked),
            _ => return false,
        }
    };
    match cq.cq {
        Some(c) if asked || !cq.selective => {
            c.wake_early();
            true
        }
        _ => false,
    }
}

/// The socket `sk` of connection `sh` has new bytes (its data callback,
/// with the socket locked): handles the whole frames it can, then queues
/// the receive work if anything is left for it. Softirq or process
/// context; never sleeps.
pub(crate) fn receive(sh: &Arc<Shared>, sk: *mut bindings::sock) {
    // SAFETY: The data callback's socket, locked by the caller.
    if unsafe { kfi_sockets_urg_pending(sk) } {
        urgent(sh);
        return;
    }
    match claim(sh) {
        Claim::Mine => {}
        Claim::Work => {
            progress::kick_rx(sh);
            return;
        }
        Claim::Nobody => return,
    }
    // SAFETY: The data callback's socket, locked by the caller.
    let inq = unsafe { kfi_sockets_inq(sk) };
    let mut p = Parser {
        sh,
        // Urgent data (`EPROTO`) ends the connection.
        avail: usize::try_from(inq).unwrap_or(0),
        hdr: [0; HDR_LEN],
        got: 0,
        hand: InHand::Nothing,
        stop: false,
        failed: None,
        budget: FRAME_BUDGET,
        bytes_left: BYTE_BUDGET,
        expected: false,
        waits: None,
    };
    if inq < 0 {
        p.failed = Some(Error::from_errno(inq));
    } else if p.avail >= HDR_LEN {
        p.expected = expect_early(sh, sk, p.avail);
        // SAFETY: As above for `sk`; `p` outlives the call, which hands it
        // to `kfi_sockets_rx_skb` only.
        unsafe { kfi_sockets_read_sock(sk, (&raw mut p).cast()) };
    }
    if p.got != 0 || !matches!(p.hand, InHand::Nothing) {
        // Cut inside a frame that was all there: not expected of TCP, but
        // the stream can no longer be followed. Its operation fails; a
        // write's regions are let go now.
        match &p.hand {
            InHand::Msg(c) => super::recv::fail_recv(c.cq, &c.op, sys::KFI_MSG, EIO),
            InHand::Answer(w) => w.fail(sh, EIO),
            _ => {}
        }
        p.hand = InHand::Nothing;
        p.failed.get_or_insert(EIO);
    }
    let (work, closing) = {
        let mut s = sh.state.lock();
        s.rx_soft = false;
        if let Some(e) = p.failed {
            s.rx_failed = Some(e);
        }
        // Also after a park: a receive posted meanwhile took the
        // connection off the stalled list (`Parser::wait_for_receive`).
        let again = core::mem::take(&mut s.rx_again);
        // A message parked for its receive leaves the bytes behind it to
        // the post of that receive, or to the timer.
        let left = p.waits.is_none() && (p.avail > 0 || s.parked.is_some());
        let work = again || left || s.rx_failed.is_some();
        (work, s.draining || s.closing)
    };
    if let Some(ms) = p.waits {
        // SAFETY: The data callback's socket, its callback lock held by
        // the caller (`kfi_sockets_data_ready`).
        unsafe { sock_sys::kfi_sockets_arm_timer_in_callback(sk, ms) };
    }
    // A close may wait for this pass (`Shared::drain` sets `draining`
    // under the same lock before it waits).
    if closing {
        sh.wake.notify_all();
    }
    if work {
        progress::kick_rx(sh);
    }
}

/// The peer sent TCP urgent data, which the protocol has none of: the
/// connection ends with `EPROTO`, whoever reads the socket (the receive
/// work, which reads an urgent byte inline as any other, ends it before
/// its next frame). Softirq or process context; never sleeps.
fn urgent(sh: &Arc<Shared>) {
    sh.state.lock().rx_failed.get_or_insert(EPROTO);
    progress::kick_rx(sh);
}

/// Who handles the bytes that arrived.
enum Claim {
    /// This callback.
    Mine,
    /// The receive work (queued for them).
    Work,
    /// Nobody yet: the message in front waits for its receive, and the
    /// posting of one or the connection's timer runs the receive work
    /// (`rx/recv.rs`); waking it for every segment behind would only
    /// park it again.
    Nobody,
}

/// Takes the receive side for the callback, unless the receive work has
/// it or has something to finish first.
fn claim(sh: &Shared) -> Claim {
    let mut s = sh.state.lock();
    // Not while this side waits for responses: they may be behind the
    // message (an operation posted after it was parked; `recv_wait`
    // holds it then), and must not wait for its timer.
    let waiting = s.parked.is_some() && s.recv_wait.is_some() && s.pending.is_empty();
    if waiting && !s.rx_running && s.rx_failed.is_none() {
        return Claim::Nobody;
    }
    if s.rx_running {
        // The work looks again before it ends (`rx::run`).
        s.rx_again = true;
        return Claim::Nobody;
    }
    let busy = s.rx_running || s.rx_soft || s.parked.is_some() || s.rx_failed.is_some();
    if !crate::rx_in_callback() || busy || s.dead || s.closing || s.draining || !s.connected {
        return Claim::Work;
    }
    s.rx_soft = true;
    Claim::Mine
}

/// `kfi_sockets_sock.c`: the next bytes of the socket, `len` of them from
/// `offset` in `skb`; returns how many the parser took (0: stop).
///
/// # Safety
///
/// `parser` is the [`Parser`] that [`receive`] handed to
/// `kfi_sockets_read_sock`, which calls this during that call only, with
/// a live skb holding `len` bytes from `offset`.
#[no_mangle]
unsafe extern "C" fn kfi_sockets_rx_skb(
    parser: *mut c_void,
    skb: *const bindings::sk_buff,
    offset: c_uint,
    len: usize,
) -> c_int {
    // SAFETY: As required: the live parser of the calling `receive`, not
    // otherwise used during this call.
    let p = unsafe { &mut *parser.cast::<Parser<'_>>() };
    let chunk = Chunk {
        skb,
        offset: offset as usize,
    };
    // What the return value can say.
    let len = len.min(c_int::MAX as usize);
    p.take(&chunk, len) as c_int
}

// kfi_sockets_sock.c calls this by its declaration in kfi_sockets_glue.h:
// the build fails unless it has the same signature.
c_callback!(sock_sys::kfi_sockets_rx_skb, kfi_sockets_rx_skb);

impl Parser<'_> {
    /// Takes what it can of `len` bytes of `chunk`.
    fn take(&mut self, chunk: &Chunk, len: usize) -> usize {
        let mut used = 0;
        // The frame in hand is worked on where it lies: a message being
        // placed or descriptors being read are a few hundred bytes, and
        // moving them in and out for every piece copies them.
        while used < len && !self.stop && self.failed.is_none() {
            let left = len - used;
            let r = match self.hand {
                InHand::Nothing => self.header(chunk, used, left),
                InHand::Msg(_) => self.payload(chunk, used, left),
                InHand::Descs(_) => self.rma_descs(chunk, used, left),
                InHand::Write(_) => self.write_payload(chunk, used, left),
                InHand::Answer(_) => self.answer_payload(chunk, used, left),
            };
            match r {
                Ok(0) => break,
                Ok(n) => {
                    used += n;
                    self.bytes_left = self.bytes_left.saturating_sub(n);
                }
                Err(e) => self.failed = Some(e),
            }
        }
        used
    }

    /// Header bytes from `at` in `chunk` (`len` there); a whole header
    /// starts its frame.
    fn header(&mut self, chunk: &Chunk, at: usize, len: usize) -> Result<usize> {
        if self.got == 0 && (self.avail < HDR_LEN || self.budget == 0 || self.bytes_left == 0) {
            // The work waits for the rest within the frame's deadline, or
            // takes what is beyond this pass's budget.
            self.stop = true;
            return Ok(0);
        }
        let n = (HDR_LEN - self.got).min(len);
        let to = self.hdr.get_mut(self.got..self.got + n).ok_or(EIO)?;
        // SAFETY: `to` is `n` writable bytes; the chunk has `len >= n`
        // bytes from `at`.
        unsafe { chunk.copy(at, to.as_mut_ptr(), n) }?;
        self.got += n;
        self.avail = self.avail.saturating_sub(n);
        if self.got == HDR_LEN {
            self.got = 0;
            self.budget = self.budget.saturating_sub(1);
            self.begin(Hdr::decode(&self.hdr)?)?;
        }
        Ok(n)
    }

    /// Starts the frame of header `h`: here if it can be handled here,
    /// else hands the header to the receive work.
    fn begin(&mut self, h: Hdr) -> Result {
        match h.op {
            Op::Ack => resp::ack(self.sh, &h),
            Op::ReadResp | Op::AtomicResp => {
                if !self.start_answer(&h)? {
                    self.hand_over(h, None);
                }
                Ok(())
            }
            Op::Msg => {
                if self.take_receive(&h) {
                    // An empty message is placed already.
                    return self.complete_if_placed();
                }
                if !self.wait_for_receive(&h) {
                    self.hand_over(h, None);
                }
                Ok(())
            }
            Op::Tagged => {
                if !self.wait_for_receive(&h) {
                    self.hand_over(h, None);
                }
                Ok(())
            }
            // Its descriptors too, when they are all there: the receive
            // work then starts with the payload (one socket call less
            // per RMA frame there).
            Op::Write | Op::ReadReq | Op::Atomic if self.avail >= h.rma_bytes() => {
                self.hand = InHand::Descs(DescsIn {
                    h,
                    buf: [0; RMA_IOV_MAX * RMA_DESC_LEN],
                    got: 0,
                });
                Ok(())
            }
            _ => {
                self.hand_over(h, None);
                Ok(())
            }
        }
    }

    /// Descriptor bytes from `at` in `chunk` (`len` there) for the frame
    /// in hand (`descs`); once all are read, the frame goes to the receive
    /// work.
    fn rma_descs(&mut self, chunk: &Chunk, at: usize, len: usize) -> Result<usize> {
        let InHand::Descs(d) = &mut self.hand else {
            return Ok(0);
        };
        let want = d.h.rma_bytes();
        let n = want.saturating_sub(d.got).min(len);
        let Some(to) = d.buf.get_mut(d.got..d.got + n) else {
            self.hand = InHand::Nothing;
            return Err(EIO);
        };
        // SAFETY: `to` is `n` writable bytes; the chunk has `len >= n`
        // bytes from `at`.
        if let Err(e) = unsafe { chunk.copy(at, to.as_mut_ptr(), n) } {
            self.hand = InHand::Nothing;
            return Err(e);
        }
        d.got += n;
        self.avail = self.avail.saturating_sub(n);
        if d.got == want {
            let (h, decoded) = (d.h, RmaDescs::decode(&d.buf, usize::from(d.h.rma_count)));
            self.hand = InHand::Nothing;
            let descs = decoded?;
            // A write may be placed here; the rest is the work's.
            let left = match h.op {
                Op::Write => self.start_write(h, descs)?,
                _ => Some(descs),
            };
            if let Some(d) = left {
                self.hand_over(h, Some(d));
            }
        }
        Ok(n)
    }

    /// Leaves the frame of `h` (and its descriptors, if read) to the
    /// receive work; this pass ends.
    fn hand_over(&mut self, h: Hdr, descs: Option<RmaDescs>) {
        let mut s = self.sh.state.lock();
        s.parked = Some(h);
        s.parked_rma = descs;
        drop(s);
        self.stop = true;
    }

    /// Parks message `h`, for which no receive is posted, to wait in the
    /// socket for its receive, as the receive work would (`Rx::msg`), so
    /// that the work is not woken only to park it: the post of the
    /// receive takes it (`rxq.rs`), or the work once the wait's timer
    /// (armed by [`receive`]) runs out. False if the work must take it
    /// (a receive was posted, or the message does not wait); this pass
    /// ends either way.
    ///
    /// A receive posted while this pass still runs finds the connection
    /// stalled, takes it off the list and finds us receiving (`rx_soft`):
    /// it notes that (`State::rx_again`) and returns, and nothing but
    /// [`receive`], which turns the note into a run of the work, gets to
    /// the message before the timer.
    fn wait_for_receive(&mut self, h: &Hdr) -> bool {
        let Some(ms) = super::recv::park_for_receive(self.sh, h) else {
            return false;
        };
        self.waits = Some(ms);
        self.stop = true;
        true
    }

    /// Takes, as the message in hand, the posted receive message
    /// `h` goes to, if the whole message is in the socket and its
    /// acknowledgement (if asked for) has room; false if not.
    fn take_receive(&mut self, h: &Hdr) -> bool {
        let Ok(len) = usize::try_from(h.len) else {
            return false;
        };
        if len > self.avail || len > self.bytes_left {
            return false;
        }
        let acked = h.flags & (flags::DELIVERY_COMPLETE | flags::COMMIT_COMPLETE) != 0;
        let q = &self.sh.rxq;
        let mut s = q.state.lock();
        if s.closing || s.rx.is_empty() {
            return false;
        }
        // Receive queues, then the connection: the documented order.
        if acked && !self.sh.state.lock().reserve_resp() {
            return false;
        }
        let Ok(op) = s.rx.remove(0) else {
            return false;
        };
        let cq = s.cq;
        drop(s);
        // Its completion follows the copy: a thread waiting for it starts
        // waking now, in parallel with the copy (a wakeup of an idle CPU
        // takes longer than copying this much).
        if !core::mem::take(&mut self.expected) && len <= EXPECT_MAX && (op.asked || !cq.selective)
        {
            if let Some(c) = cq.cq {
                c.wake_early();
            }
        }
        self.hand = InHand::Msg(Placing {
            h: *h,
            op,
            cq,
            placed: 0,
            dropped: 0,
            left: len,
        });
        true
    }

    /// Payload bytes of the message being placed.
    fn payload(&mut self, chunk: &Chunk, at: usize, len: usize) -> Result<usize> {
        let InHand::Msg(c) = &mut self.hand else {
            return Ok(0);
        };
        let n = c.left.min(len);
        // SAFETY: The buffers of the posted receive `c` took, valid until
        // it completes.
        let placed = match unsafe { place_at(c.op.bufs.as_slice(), c.placed, chunk, at, n) } {
            Ok(k) => k,
            Err(e) => {
                super::recv::fail_recv(c.cq, &c.op, sys::KFI_MSG, e);
                self.hand = InHand::Nothing;
                return Err(e);
            }
        };
        c.placed += placed;
        c.dropped += n - placed;
        c.left -= n;
        self.avail = self.avail.saturating_sub(n);
        self.complete_if_placed()?;
        Ok(n)
    }

    /// Completes the message in hand once it is all placed.
    fn complete_if_placed(&mut self) -> Result {
        let r = match &self.hand {
            InHand::Msg(c) if c.left == 0 => self.complete(c),
            _ => return Ok(()),
        };
        self.hand = InHand::Nothing;
        r
    }

    /// The message `c` is placed: its receive completes, and the sender
    /// gets the acknowledgement it asked for.
    fn complete(&self, c: &Placing) -> Result {
        finish_recv(
            c.cq,
            &c.op,
            sys::KFI_MSG,
            0,
            Rx::cq_data(&c.h),
            c.placed,
            c.dropped,
        );
        if c.h.flags & (flags::DELIVERY_COMPLETE | flags::COMMIT_COMPLETE) != 0 {
            respond_now(self.sh, Resp::ack(c.h.id, Ok(())))?;
        }
        Ok(())
    }
}

/// Copies `n` bytes from `at` in `chunk` into `bufs`, starting `pos`
/// bytes into them; returns the bytes placed (fewer where the buffers
/// end: the rest is dropped).
///
/// # Safety
///
/// `bufs` are a live operation's buffers, not otherwise used meanwhile.
unsafe fn place_at(
    bufs: impl IntoIterator<Item = impl Borrow<Buf>>,
    pos: usize,
    chunk: &Chunk,
    at: usize,
    n: usize,
) -> Result<usize> {
    let mut start = 0usize;
    let mut done = 0usize;
    for b in bufs {
        let b = b.borrow();
        if done == n {
            break;
        }
        let end = start.saturating_add(b.len);
        let to = pos + done;
        if to < end {
            let inner = to - start;
            let k = (b.len - inner).min(n - done);
            // SAFETY: `inner + k <= b.len` in a live buffer, as required;
            // the chunk has `n` bytes from `at`.
            unsafe { chunk.copy(at + done, (b.base + inner) as *mut u8, k) }?;
            done += k;
        }
        start = end;
    }
    Ok(done)
}
