// SPDX-License-Identifier: GPL-2.0

//! The responses that carry data to our own operations (`ReadResp`,
//! `AtomicResp`), handled by the data callback when all of the response
//! is in the socket: a read's data goes from the socket's buffers straight
//! into the read's buffers, an atomic's old values into its result
//! buffers, and the operation completes without waking the receive work.
//! A response not all there yet is left to the receive work
//! (`rx/resp.rs`), which checks it the same way.

use kernel::prelude::*;

use super::{place_at, Chunk, InHand, Parser};
use crate::{
    atomics::ATOMIC_MAX,
    conn::Shared,
    op::Kind,
    rx::resp::{data_response, fail_answered, finish_answered, finish_atomic, Answered},
    wire::{Hdr, Op},
};

/// A response being read.
pub(super) struct Answering {
    /// What it answers: a read or an atomic.
    kind: Kind,
    a: Answered,
    /// The response's status.
    st: Result,
    /// Payload bytes read so far.
    got: usize,
    /// Payload bytes still to come.
    left: usize,
    /// An atomic's old values, gathered until all are in.
    old: [u8; ATOMIC_MAX],
}

impl Parser<'_> {
    /// Starts response `h` here if all of it is in the socket (`true`);
    /// else it is the receive work's (`false`). `EPROTO` if it answers
    /// nothing we asked, or carries the wrong number of bytes.
    // Not inlined: its temporaries stay out of the frame of every pass.
    #[inline(never)]
    pub(super) fn start_answer(&mut self, h: &Hdr) -> Result<bool> {
        let Ok(len) = usize::try_from(h.len) else {
            return Ok(false);
        };
        if len > self.avail || len > self.bytes_left {
            return Ok(false);
        }
        let (kind, most) = match h.op {
            Op::ReadResp => (Kind::Read, usize::MAX),
            Op::AtomicResp => (Kind::Atomic, ATOMIC_MAX),
            _ => return Ok(false),
        };
        let (a, st) = data_response(self.sh, h, kind, most)?;
        self.hand = InHand::Answer(Answering {
            kind,
            a,
            st,
            got: 0,
            left: len,
            old: [0; ATOMIC_MAX],
        });
        // An error status comes with no bytes: done already.
        self.answer_done_if_read()?;
        Ok(true)
    }

    /// Payload bytes of the response being read.
    pub(super) fn answer_payload(&mut self, chunk: &Chunk, at: usize, len: usize) -> Result<usize> {
        let InHand::Answer(w) = &mut self.hand else {
            return Ok(0);
        };
        let n = w.left.min(len);
        let r = match w.kind {
            Kind::Atomic => match w.old.get_mut(w.got..w.got + n) {
                // SAFETY: `to` is `n` writable bytes; the chunk has
                // `len >= n` bytes from `at`.
                Some(to) => unsafe { chunk.copy(at, to.as_mut_ptr(), n) },
                None => Err(EPROTO),
            },
            // SAFETY: The buffers of our read, valid until it completes,
            // and used by nothing else meanwhile (its frame never carries
            // them).
            _ => unsafe { place_at(&w.a.p.bufs, w.got, chunk, at, n) }.map(|_| ()),
        };
        if let Err(e) = r {
            w.fail(self.sh, e);
            self.hand = InHand::Nothing;
            return Err(e);
        }
        w.got += n;
        w.left -= n;
        self.avail = self.avail.saturating_sub(n);
        self.answer_done_if_read()?;
        Ok(n)
    }

    /// Completes the operation the response in hand answers once all of
    /// the response is read.
    fn answer_done_if_read(&mut self) -> Result {
        let sh = self.sh;
        let InHand::Answer(w) = &mut self.hand else {
            return Ok(());
        };
        if w.left != 0 {
            return Ok(());
        }
        match w.kind {
            Kind::Atomic => finish_atomic(sh, &w.a, w.st, &mut w.old),
            _ => finish_answered(sh, &w.a, w.st),
        }
        self.hand = InHand::Nothing;
        Ok(())
    }
}

impl Answering {
    /// The response broke off (`e`): its operation fails (if it can: else
    /// the teardown that follows cancels it).
    pub(super) fn fail(&self, sh: &Shared, e: Error) {
        fail_answered(sh, &self.a, e);
    }
}
