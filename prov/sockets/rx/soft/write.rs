// SPDX-License-Identifier: GPL-2.0

//! A peer's RMA write placed by the socket's data callback: when the whole
//! frame is in the socket, every descriptor checks out and its answer has
//! room, the payload goes from the socket's buffers straight into our
//! registered memory, as a message goes into its posted receive, without
//! waking the receive work. Anything else (a payload not all there yet, a
//! refused access, commit completion) is left to the receive work
//! (`rx/target.rs`), which checks the descriptors again and answers.

use kernel::prelude::*;

use super::{place_at, Chunk, InHand, Parser};
use crate::{
    kfi::kfi_sys as sys,
    mr::Access,
    op::Resp,
    rx::{respond_now, target::written},
    wire::{flags, Hdr, RmaDescs, RMA_IOV_MAX},
};

/// A peer's write being placed.
pub(super) struct Writing {
    h: Hdr,
    /// The checked ranges, in the frame's order; each holds its region.
    acc: [Option<Access>; RMA_IOV_MAX],
    /// Payload bytes placed so far.
    placed: usize,
    /// Payload bytes still to come.
    left: usize,
}

impl Parser<'_> {
    /// Starts placing the write `h` with descriptors `descs` here, if it
    /// can be done here; else gives the descriptors back for the receive
    /// work. `EPROTO` if the descriptors do not add up to the payload.
    // Not inlined: its temporaries stay out of the frame of every pass.
    #[inline(never)]
    pub(super) fn start_write(&mut self, h: Hdr, descs: RmaDescs) -> Result<Option<RmaDescs>> {
        let mut total = 0u64;
        for d in descs.as_slice() {
            total = total.checked_add(d.len).ok_or(EPROTO)?;
        }
        if total != h.len {
            return Err(EPROTO);
        }
        let Ok(len) = usize::try_from(h.len) else {
            return Ok(Some(descs));
        };
        let answered = h.flags & flags::UNANSWERED == 0;
        // Commit completion's write-back is left to the process context.
        if len > self.avail || len > self.bytes_left || h.flags & flags::COMMIT_COMPLETE != 0 {
            return Ok(Some(descs));
        }
        // The region's holder: the connection's socket. Dropping a clone
        // here never releases it (sleeping): the connection keeps it
        // until it is dropped, and the hook this callback runs from holds
        // the connection.
        let sock = {
            let mut s = self.sh.state.lock();
            if answered && !s.reserve_resp() {
                return Ok(Some(descs));
            }
            match s.sock.clone() {
                Some(sock) => sock,
                None => return Ok(Some(descs)),
            }
        };
        let mut acc = [const { None }; RMA_IOV_MAX];
        for (slot, d) in acc.iter_mut().zip(descs.as_slice()) {
            match self
                .sh
                .mrs
                .access(d.key, d.addr, d.len, sys::KFI_REMOTE_WRITE, &sock)
            {
                Ok(a) => *slot = Some(a),
                // The receive work refuses it (and answers, or ends the
                // connection); what was taken here is let go.
                Err(_) => return Ok(Some(descs)),
            }
        }
        self.hand = InHand::Write(Writing {
            h,
            acc,
            placed: 0,
            left: len,
        });
        // An empty write is placed already.
        self.write_done_if_placed()?;
        Ok(None)
    }

    /// Payload bytes of the write being placed.
    pub(super) fn write_payload(&mut self, chunk: &Chunk, at: usize, len: usize) -> Result<usize> {
        let InHand::Write(w) = &mut self.hand else {
            return Ok(0);
        };
        let n = w.left.min(len);
        let bufs = w.acc.iter().flatten().flat_map(Access::bufs);
        // SAFETY: Checked ranges of registered regions, held by `w.acc`
        // until the write is done; the ranges add up to the payload, so
        // nothing is dropped.
        let placed = match unsafe { place_at(bufs, w.placed, chunk, at, n) } {
            Ok(k) if k == n => k,
            Ok(_) => {
                self.hand = InHand::Nothing;
                return Err(EPROTO);
            }
            Err(e) => {
                self.hand = InHand::Nothing;
                return Err(e);
            }
        };
        w.placed += placed;
        w.left -= n;
        self.avail = self.avail.saturating_sub(n);
        self.write_done_if_placed()?;
        Ok(n)
    }

    /// Ends the write in hand once it is all placed: its regions are let
    /// go before it is reported and answered.
    fn write_done_if_placed(&mut self) -> Result {
        let h = match &self.hand {
            InHand::Write(w) if w.left == 0 => w.h,
            _ => return Ok(()),
        };
        self.hand = InHand::Nothing;
        written(self.sh, &h)?;
        if h.flags & flags::UNANSWERED == 0 {
            respond_now(self.sh, Resp::ack(h.id, Ok(())))?;
        }
        Ok(())
    }
}
