// SPDX-License-Identifier: GPL-2.0

//! Untagged messages that arrived before a receive was posted, held (in
//! arrival order) so that the connection they came on goes on reading
//! the frames behind them: responses to our own operations, the peer's
//! RMA, the end of the stream.
//!
//! The same bounds as the tagged messages held by the tag matcher: at
//! most `UNEXP_MAX` messages and `unexpected_bytes_max` payload bytes per
//! endpoint, room reserved before the payload is read (so several
//! connections reading at once cannot exceed them). A message that finds
//! no room parks its connection until a receive is posted, as before.
//!
//! No locking of its own: kept under the lock of the receive queues. No
//! method sleeps or allocates but `new` (process context). Held payloads
//! may be vmalloc'd: callers drop them outside the lock.

use kernel::prelude::*;

use crate::op::Unexpected;

/// Room for one message of `bytes` payload bytes, promised by
/// [`HeldMsgs::reserve`]; given back by [`HeldMsgs::hold`] or
/// [`HeldMsgs::release`].
#[must_use = "a reservation that is neither held nor released shrinks the queue for good"]
pub(crate) struct MsgRoom {
    bytes: usize,
}

/// Held messages, oldest first.
///
/// # Invariants
///
/// `msgs.len() + reserved <= max` and `bytes + reserved_bytes <=
/// max_bytes`, where `bytes` is the sum of the held payloads' lengths.
pub(crate) struct HeldMsgs {
    msgs: KVec<Unexpected>,
    bytes: usize,
    reserved: usize,
    reserved_bytes: usize,
    max: usize,
    max_bytes: usize,
}

impl HeldMsgs {
    /// An empty queue for at most `max` messages of `max_bytes` payload
    /// bytes in all, allocated now. Process context.
    pub(crate) fn new(max: usize, max_bytes: usize) -> Result<Self> {
        Ok(Self {
            msgs: KVec::with_capacity(max, GFP_KERNEL)?,
            bytes: 0,
            reserved: 0,
            reserved_bytes: 0,
            max,
            max_bytes,
        })
    }

    /// Reserves room for a message of `bytes` payload bytes; `None` when
    /// there is none now.
    pub(crate) fn reserve(&mut self, bytes: usize) -> Option<MsgRoom> {
        let count = self.msgs.len().saturating_add(self.reserved);
        let total = self
            .bytes
            .saturating_add(self.reserved_bytes)
            .saturating_add(bytes);
        if count >= self.max || total > self.max_bytes {
            return None;
        }
        self.reserved += 1;
        self.reserved_bytes += bytes;
        Some(MsgRoom { bytes })
    }

    /// Gives back the room `r` reserved (the message was not read).
    pub(crate) fn release(&mut self, r: MsgRoom) {
        self.reserved = self.reserved.saturating_sub(1);
        self.reserved_bytes = self.reserved_bytes.saturating_sub(r.bytes);
    }

    /// Holds `msg` in the room `r` reserved. Within the capacity that
    /// `new` allocated, so it neither allocates nor fails while the room
    /// is kept; `msg` is given back if it does anyway.
    pub(crate) fn hold(&mut self, r: MsgRoom, msg: Unexpected) -> Result<(), Unexpected> {
        let bytes = r.bytes;
        self.release(r);
        self.msgs.push_within_capacity(msg).map_err(|e| e.0)?;
        self.bytes = self.bytes.saturating_add(bytes);
        Ok(())
    }

    /// Takes the oldest held message.
    pub(crate) fn take(&mut self) -> Option<Unexpected> {
        if self.msgs.is_empty() {
            return None;
        }
        let m = self.msgs.remove(0).ok()?;
        self.bytes = self.bytes.saturating_sub(m.payload.len());
        Some(m)
    }

    /// Takes every held message (the queues close), for the caller to
    /// drop outside its lock.
    pub(crate) fn take_all(&mut self) -> KVec<Unexpected> {
        self.bytes = 0;
        core::mem::take(&mut self.msgs)
    }
}
