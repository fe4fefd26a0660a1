// SPDX-License-Identifier: GPL-2.0

//! Untagged messages that arrived before a receive was posted, held (in
//! arrival order) so that the connection they came on goes on reading
//! the frames behind them: responses to our own operations, the peer's
//! RMA, the end of the stream.
//!
//! The same bounds as the tagged messages held by the tag matcher: at
//! most `UNEXP_MAX` messages and `unexpected_bytes_max` payload bytes per
//! endpoint, room reserved before the payload is read (so several
//! connections reading at once cannot exceed them), and on an RDM
//! endpoint a share of them per peer host (`Shared::share`), so that one
//! peer's messages cannot take the room of the others. A message that finds no room
//! parks its connection until a receive is posted, as before.
//!
//! No locking of its own: kept under the lock of the receive queues. No
//! method sleeps or allocates but `new` (process context). Held payloads
//! may be vmalloc'd: callers drop them outside the lock.

use kernel::prelude::*;

use crate::op::Unexpected;

/// Room for one message of `bytes` payload bytes from source `src`,
/// promised by [`HeldMsgs::reserve_from`]; given back by
/// [`HeldMsgs::hold`] or [`HeldMsgs::release`].
#[must_use = "a reservation that is neither held nor released shrinks the queue for good"]
pub(crate) struct MsgRoom {
    bytes: usize,
    src: usize,
}

/// Held messages, oldest first, with the source each came from.
///
/// # Invariants
///
/// `msgs.len() + open.len() <= max` and `bytes + reserved_bytes <=
/// max_bytes`, where `bytes` is the sum of the held payloads' lengths and
/// `reserved_bytes` that of the open reservations; a source holds and has
/// reserved at most `share` messages and `share_bytes` bytes of them.
pub(crate) struct HeldMsgs {
    msgs: KVec<(usize, Unexpected)>,
    bytes: usize,
    /// Open reservations: (source, bytes).
    open: KVec<(usize, usize)>,
    reserved_bytes: usize,
    max: usize,
    max_bytes: usize,
    share: usize,
    share_bytes: usize,
}

impl HeldMsgs {
    /// An empty queue for at most `max` messages of `max_bytes` payload
    /// bytes in all, a source at most `1 / div` of each (at least one
    /// message), allocated now. Process context.
    pub(crate) fn new(max: usize, max_bytes: usize, div: usize) -> Result<Self> {
        let div = div.max(1);
        Ok(Self {
            msgs: KVec::with_capacity(max, GFP_KERNEL)?,
            bytes: 0,
            open: KVec::with_capacity(max, GFP_KERNEL)?,
            reserved_bytes: 0,
            max,
            max_bytes,
            share: (max / div).max(1),
            share_bytes: max_bytes / div,
        })
    }

    /// What source `src` holds and has reserved: (messages, bytes).
    fn used_by(&self, src: usize) -> (usize, usize) {
        let held = self
            .msgs
            .iter()
            .filter(|m| m.0 == src)
            .map(|m| m.1.payload.len());
        let open = self.open.iter().filter(|o| o.0 == src).map(|o| o.1);
        Iterator::chain(held, open).fold((0, 0), |(n, b), len| (n + 1, b.saturating_add(len)))
    }

    /// Whether [`Self::reserve_from`] would find room for `bytes` from
    /// `src` now (it reserves nothing).
    pub(crate) fn fits(&self, bytes: usize, src: usize) -> bool {
        let count = self.msgs.len().saturating_add(self.open.len());
        let total = self
            .bytes
            .saturating_add(self.reserved_bytes)
            .saturating_add(bytes);
        if count >= self.max || total > self.max_bytes {
            // Before the share: a scan of every message.
            return false;
        }
        let (n, b) = self.used_by(src);
        n < self.share && b.saturating_add(bytes) <= self.share_bytes
    }

    /// Reserves room for a message of `bytes` payload bytes from source
    /// `src` (any number naming it: on an RDM endpoint, its peer's host);
    /// `None` when there is none now, for it or for anyone.
    pub(crate) fn reserve_from(&mut self, bytes: usize, src: usize) -> Option<MsgRoom> {
        if !self.fits(bytes, src) {
            return None;
        }
        // Within the capacity allocated at `new` (`count < max`).
        self.open.push_within_capacity((src, bytes)).ok()?;
        self.reserved_bytes += bytes;
        Some(MsgRoom { bytes, src })
    }

    /// Gives back the room `r` reserved (the message was not read).
    pub(crate) fn release(&mut self, r: MsgRoom) {
        if let Some(i) = self.open.iter().position(|o| *o == (r.src, r.bytes)) {
            let _ = self.open.remove(i);
        }
        self.reserved_bytes = self.reserved_bytes.saturating_sub(r.bytes);
    }

    /// Holds `msg` in the room `r` reserved. Within the capacity that
    /// `new` allocated, so it neither allocates nor fails while the room
    /// is kept; `msg` is given back if it does anyway.
    pub(crate) fn hold(&mut self, r: MsgRoom, msg: Unexpected) -> Result<(), Unexpected> {
        let (bytes, src) = (r.bytes, r.src);
        self.release(r);
        self.msgs
            .push_within_capacity((src, msg))
            .map_err(|e| e.0 .1)?;
        self.bytes = self.bytes.saturating_add(bytes);
        Ok(())
    }

    /// Takes the oldest held message.
    pub(crate) fn take(&mut self) -> Option<Unexpected> {
        if self.msgs.is_empty() {
            return None;
        }
        let (_, m) = self.msgs.remove(0).ok()?;
        self.bytes = self.bytes.saturating_sub(m.payload.len());
        Some(m)
    }

    /// Takes every held message (the queues close), for the caller to
    /// drop outside its lock.
    pub(crate) fn take_all(&mut self) -> KVec<(usize, Unexpected)> {
        self.bytes = 0;
        core::mem::take(&mut self.msgs)
    }
}
