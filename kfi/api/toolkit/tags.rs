// SPDX-License-Identifier: GPL-2.0

//! Tag matching for a provider that does it in software: posted tagged
//! receives, and tagged messages that arrived before their receive was
//! posted ("unexpected"), held in a bounded queue.
//!
//! A message tagged `t` is for a receive posted with `tag` and `ignore`
//! when `(t ^ tag) & !ignore == 0`. A message takes the oldest matching
//! posted receive; a posted receive takes the oldest matching held
//! message: matching is in posting (and arrival) order.
//!
//! Holding a message takes room the provider reserves before it reads the
//! message's payload ([`TagMatcher::reserve`]), so the bounds (messages
//! and bytes) hold even while several connections read into one matcher,
//! and a peer can never make the provider hold more. A reservation ends
//! in [`TagMatcher::hold`] or [`TagMatcher::release`].
//!
//! Several sources (an RDM endpoint's peer hosts) may share one matcher:
//! each gets a share of the bounds ([`Limits::source_held`],
//! [`Limits::source_bytes`]), so one source's unmatched messages cannot
//! take all the room and park the others. A message larger than a share
//! is never held for a source that shares (it waits for its receive; only
//! one larger than the whole queue cannot be held at all).
//!
//! The matcher does no locking: the provider keeps it under the lock of
//! its receive queues. No method sleeps or allocates beyond what
//! [`TagMatcher::new`] did (process context), so all others may run in
//! any context but hard interrupt.

use kernel::prelude::*;

/// Whether a message tagged `tag` is for a receive posted with `want`
/// and `ignore`.
pub(crate) fn matches(tag: u64, want: u64, ignore: u64) -> bool {
    (tag ^ want) & !ignore == 0
}

/// How much a matcher holds at most.
#[derive(Clone, Copy)]
pub(crate) struct Limits {
    /// Posted receives waiting for a message.
    pub(crate) posted: usize,
    /// Messages held for receives not posted yet.
    pub(crate) held: usize,
    /// Payload bytes of the held messages.
    pub(crate) held_bytes: usize,
    /// Messages held and reserved for one source at most (`held`: no
    /// share, one source may take all).
    pub(crate) source_held: usize,
    /// Payload bytes held and reserved for one source at most, unless it
    /// holds nothing yet (`held_bytes`: no share).
    pub(crate) source_bytes: usize,
}

struct Posted<R> {
    tag: u64,
    ignore: u64,
    recv: R,
}

struct Held<U> {
    tag: u64,
    bytes: usize,
    src: usize,
    msg: U,
}

/// A posted receive and the message it takes.
pub(crate) struct Matched<R, U> {
    pub(crate) recv: R,
    /// The message's tag (for the receive's completion).
    pub(crate) tag: u64,
    pub(crate) msg: U,
}

/// Room for one held message of `bytes` payload bytes, promised by
/// [`TagMatcher::reserve`]; given back by [`TagMatcher::hold`] or
/// [`TagMatcher::release`] of the same matcher.
#[must_use = "a reservation that is neither held nor released shrinks the queue for good"]
pub(crate) struct Reservation {
    bytes: usize,
    src: usize,
}

/// Whether a message may be held.
pub(crate) enum Room {
    /// Yes: read its payload, then hold it.
    Reserved(Reservation),
    /// Not now: wait until a receive is posted (the queue is full).
    Full,
    /// Never: the message is larger than all the queue may hold.
    Never,
}

/// Posted tagged receives `R` and held messages `U`.
///
/// # Invariants
///
/// `held.len() + reserved <= limits.held` and `held_bytes +
/// reserved_bytes <= limits.held_bytes`, where `held_bytes` is the sum of
/// the held messages' bytes; `posted.len() <= limits.posted`; `open`
/// lists the (source, bytes) of every reservation not held or released
/// (`reserved` of them, `reserved_bytes` in all).
pub(crate) struct TagMatcher<R, U> {
    posted: KVec<Posted<R>>,
    held: KVec<Held<U>>,
    held_bytes: usize,
    reserved: usize,
    reserved_bytes: usize,
    open: KVec<(usize, usize)>,
    limits: Limits,
}

impl<R, U> TagMatcher<R, U> {
    /// An empty matcher with room for `limits`, allocated now. Process
    /// context.
    pub(crate) fn new(limits: Limits) -> Result<Self> {
        Ok(Self {
            posted: KVec::with_capacity(limits.posted, GFP_KERNEL)?,
            held: KVec::with_capacity(limits.held, GFP_KERNEL)?,
            held_bytes: 0,
            reserved: 0,
            reserved_bytes: 0,
            open: KVec::with_capacity(limits.held, GFP_KERNEL)?,
            limits,
        })
    }

    /// Posts receive `recv` for tags matching `tag` outside `ignore`: it
    /// takes the oldest matching held message (returned with it), else it
    /// waits in the matcher (`EAGAIN` if `limits.posted` wait already).
    pub(crate) fn post(&mut self, tag: u64, ignore: u64, recv: R) -> Result<Option<Matched<R, U>>> {
        if let Some(i) = self.held.iter().position(|h| matches(h.tag, tag, ignore)) {
            let h = self.held.remove(i).map_err(|_| EINVAL)?;
            self.held_bytes = self.held_bytes.saturating_sub(h.bytes);
            return Ok(Some(Matched {
                recv,
                tag: h.tag,
                msg: h.msg,
            }));
        }
        if self.posted.len() >= self.limits.posted {
            return Err(EAGAIN);
        }
        // Within the capacity allocated at `new`: does not allocate.
        self.posted
            .push(Posted { tag, ignore, recv }, GFP_ATOMIC)
            .map_err(|_| EAGAIN)?;
        Ok(None)
    }

    /// Whether a receive is posted for a message tagged `tag` (the one
    /// [`Self::take_posted`] would take), left posted.
    pub(crate) fn is_posted(&self, tag: u64) -> bool {
        self.posted.iter().any(|p| matches(tag, p.tag, p.ignore))
    }

    /// A message tagged `tag` arrived: the oldest posted receive it is
    /// for, taken out of the matcher.
    pub(crate) fn take_posted(&mut self, tag: u64) -> Option<R> {
        let i = self
            .posted
            .iter()
            .position(|p| matches(tag, p.tag, p.ignore))?;
        self.posted.remove(i).ok().map(|p| p.recv)
    }

    /// Takes back the oldest posted receive for which `f` holds (a
    /// `kfi_cancel`), or `None`.
    pub(crate) fn cancel_where(&mut self, f: impl Fn(&R) -> bool) -> Option<R> {
        let i = self.posted.iter().position(|p| f(&p.recv))?;
        self.posted.remove(i).ok().map(|p| p.recv)
    }

    /// Reserves room to hold a message of `bytes` payload bytes that no
    /// posted receive takes (one source for all).
    pub(crate) fn reserve(&mut self, bytes: usize) -> Room {
        self.reserve_from(bytes, 0)
    }

    /// What source `src` holds and has reserved: (messages, bytes).
    fn used_by(&self, src: usize) -> (usize, usize) {
        let mut n = 0usize;
        let mut bytes = 0usize;
        let held = self.held.iter().filter(|h| h.src == src).map(|h| h.bytes);
        let open = self.open.iter().filter(|o| o.0 == src).map(|o| o.1);
        for b in held {
            n += 1;
            bytes = bytes.saturating_add(b);
        }
        for b in open {
            n += 1;
            bytes = bytes.saturating_add(b);
        }
        (n, bytes)
    }

    /// Whether [`Self::reserve_from`] would find room for `bytes` from
    /// `src` now (it reserves nothing).
    pub(crate) fn fits_from(&self, bytes: usize, src: usize) -> bool {
        let count = self.held.len() + self.reserved;
        let total = self
            .held_bytes
            .saturating_add(self.reserved_bytes)
            .saturating_add(bytes);
        if count >= self.limits.held || total > self.limits.held_bytes {
            // Before the share: a scan of every message.
            return false;
        }
        let (n, b) = self.used_by(src);
        n < self.limits.source_held && b.saturating_add(bytes) <= self.limits.source_bytes
    }

    /// As [`Self::reserve`], for a message from source `src` (any number
    /// naming it, such as its peer's host): `Full` also when
    /// `src` has used its share, though the queue has room for others, or
    /// when the message alone is larger than a share (a first message
    /// too: one peer's single large message must not take the room of
    /// every other).
    pub(crate) fn reserve_from(&mut self, bytes: usize, src: usize) -> Room {
        let count = self.held.len() + self.reserved;
        if self.fits_from(bytes, src) {
            // Within the capacity allocated at `new` (`count` < `held`):
            // does not allocate.
            if self.open.push((src, bytes), GFP_ATOMIC).is_err() {
                return Room::Full;
            }
            self.reserved += 1;
            self.reserved_bytes += bytes;
            return Room::Reserved(Reservation { bytes, src });
        }
        if count == 0 && bytes > self.limits.held_bytes {
            // Nothing will ever make room for it.
            Room::Never
        } else {
            Room::Full
        }
    }

    /// Holds message `msg` tagged `tag` in the room `r` reserved, unless
    /// a receive posted meanwhile takes it: then it is returned with that
    /// receive. `ENOMEM` only after [`Self::take_all`] freed the queues
    /// (the message is dropped then).
    pub(crate) fn hold(
        &mut self,
        r: Reservation,
        tag: u64,
        msg: U,
    ) -> Result<Option<Matched<R, U>>> {
        let (bytes, src) = (r.bytes, r.src);
        self.release(r);
        if let Some(recv) = self.take_posted(tag) {
            return Ok(Some(Matched { recv, tag, msg }));
        }
        // The reservation kept room: within the capacity allocated at
        // `new`, so this does not allocate.
        self.held.push(
            Held {
                tag,
                bytes,
                src,
                msg,
            },
            GFP_ATOMIC,
        )?;
        self.held_bytes += bytes;
        Ok(None)
    }

    /// Gives back the room `r` reserved (the message was not read).
    pub(crate) fn release(&mut self, r: Reservation) {
        // A reservation of another matcher is not found: nothing changes.
        let Some(i) = self.open.iter().position(|o| *o == (r.src, r.bytes)) else {
            return;
        };
        let _ = self.open.remove(i);
        self.reserved = self.reserved.saturating_sub(1);
        self.reserved_bytes = self.reserved_bytes.saturating_sub(r.bytes);
    }

    /// Posted receives waiting, and messages held.
    pub(crate) fn len(&self) -> (usize, usize) {
        (self.posted.len(), self.held.len())
    }

    /// Payload bytes held.
    pub(crate) fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    /// Empties the matcher (its endpoint closes): the posted receives are
    /// returned, oldest first, for the provider to cancel, with the held
    /// messages, which go when the result is dropped (outside the
    /// provider's lock: a large message's buffer may need process context
    /// to be freed); the queues' memory goes with them.
    pub(crate) fn take_all(&mut self) -> Canceled<R, U> {
        self.held_bytes = 0;
        Canceled {
            posted: core::mem::take(&mut self.posted),
            _held: core::mem::take(&mut self.held),
        }
    }
}

/// Posted receives and held messages taken out of a closing matcher.
pub(crate) struct Canceled<R, U> {
    posted: KVec<Posted<R>>,
    _held: KVec<Held<U>>,
}

impl<R, U> Canceled<R, U> {
    /// The receives, oldest first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &R> {
        self.posted.iter().map(|p| &p.recv)
    }
}
