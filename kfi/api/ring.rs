// SPDX-License-Identifier: GPL-2.0

//! A ring of slots, allocated at open so that it can be filled from any
//! context without allocating: behind kfabric.ko's util CQ and EQ (fixed)
//! and kfi_sockets' operation queues (growing on demand within a bound,
//! so that an idle connection holds little). The first piece of the
//! provider toolkit, shared by source.

use core::ops::{Deref, DerefMut};
use kernel::{
    alloc::{Allocator, Flags, Vec},
    prelude::*,
};

/// A ring's slots. A ring that never grows may have them from vmalloc (a
/// CQ of many entries: 64 Ki slots of 72 bytes is more than kmalloc gives
/// without a warning), freed with the ring in process context; a growing
/// ring's are always kmalloc'd, because a push or a shrink frees the old
/// room in any context and `vfree` may sleep (`kvmalloc` falls back to
/// vmalloc even for `GFP_ATOMIC`).
enum Room<S> {
    Fixed(KVVec<S>),
    Growing(KVec<S>),
}

impl<S> Deref for Room<S> {
    type Target = [S];

    fn deref(&self) -> &[S] {
        match self {
            Self::Fixed(v) => v,
            Self::Growing(v) => v,
        }
    }
}

impl<S> DerefMut for Room<S> {
    fn deref_mut(&mut self) -> &mut [S] {
        match self {
            Self::Fixed(v) => v,
            Self::Growing(v) => v,
        }
    }
}

/// A ring of `S`, whose slots are a [`Room`].
///
/// # Invariants
///
/// `len <= slots.len() <= most`, `head < slots.len()` (unless empty),
/// `first <= most`, and `slots` is `Room::Growing` if `first < most`.
pub(crate) struct Ring<S> {
    slots: Room<S>,
    head: usize,
    len: usize,
    /// Room it starts with, and goes back to when emptied ([`Ring::shrink`]).
    first: usize,
    /// Room it may grow to.
    most: usize,
}

impl<S: Default> Ring<S> {
    /// A ring with room for `size` (non-zero) slots, for good. Process
    /// context.
    pub(crate) fn new(size: usize) -> Result<Self> {
        Self::growing(size, size)
    }

    /// A ring with room for `first` (non-zero) slots that grows, doubling,
    /// up to `most` when a push finds it full. Process context.
    pub(crate) fn growing(first: usize, most: usize) -> Result<Self> {
        if first == 0 || first > most {
            return Err(EINVAL);
        }
        let slots = if first == most {
            Room::Fixed(Self::filled(first, GFP_KERNEL)?)
        } else {
            Room::Growing(Self::filled(first, GFP_KERNEL)?)
        };
        // INVARIANT: a ring that may grow has kmalloc'd slots.
        Ok(Self {
            slots,
            head: 0,
            len: 0,
            first,
            most,
        })
    }

    /// `n` default slots from allocator `A`.
    fn filled<A: Allocator>(n: usize, flags: Flags) -> Result<Vec<S, A>> {
        let mut slots = Vec::<S, A>::with_capacity(n, flags)?;
        for _ in 0..n {
            slots.push(S::default(), flags)?;
        }
        Ok(slots)
    }

    /// `n` default kmalloc'd slots, for a growing ring; any context but
    /// hard interrupt.
    fn room(n: usize) -> Result<Room<S>> {
        Ok(Room::Growing(Self::filled(n, GFP_ATOMIC)?))
    }

    /// Room for twice as many slots (at most `most`), the slots kept in
    /// order; false if it is at `most` or no memory is to be had without
    /// sleeping. Any context but hard interrupt. Kept out of its callers:
    /// it is rare, and its frame would grow every push's.
    #[inline(never)]
    fn grow(&mut self) -> bool {
        let n = self.slots.len().saturating_mul(2).min(self.most);
        if n <= self.slots.len() {
            return false;
        }
        let Ok(mut slots) = Self::room(n) else {
            return false;
        };
        for k in 0..self.len {
            let at = self.wrap(k);
            if let (Some(to), Some(from)) = (slots.get_mut(k), self.slots.get_mut(at)) {
                core::mem::swap(to, from);
            }
        }
        self.slots = slots;
        self.head = 0;
        true
    }

    /// Gives back the room grown beyond what the ring started with, if it
    /// is empty (an idle connection). Any context but hard interrupt; on
    /// failure to allocate the smaller room it simply keeps the larger.
    pub(crate) fn shrink(&mut self) {
        if self.len != 0 || self.slots.len() <= self.first {
            return;
        }
        if let Ok(slots) = Self::room(self.first) {
            self.slots = slots;
            self.head = 0;
        }
    }

    /// Slots it has room for now.
    pub(crate) fn room_now(&self) -> usize {
        self.slots.len()
    }

    /// Slots in use.
    pub(crate) fn used(&self) -> usize {
        self.len
    }

    /// The index `n` slots after the head (`n` below the capacity).
    fn wrap(&self, n: usize) -> usize {
        let i = self.head + n;
        if i >= self.slots.len() {
            i - self.slots.len()
        } else {
            i
        }
    }

    /// Appends `slot`; `ENOSPC` when full.
    pub(crate) fn push(&mut self, slot: S) -> Result {
        self.try_push(slot).map_err(|_| ENOSPC)
    }

    /// Appends `slot`, or gives it back when the ring is full (and cannot
    /// grow).
    pub(crate) fn try_push(&mut self, slot: S) -> core::result::Result<(), S> {
        if self.len == self.slots.len() && !self.grow() {
            return Err(slot);
        }
        let tail = self.wrap(self.len);
        match self.slots.get_mut(tail) {
            Some(s) => *s = slot,
            None => return Err(slot),
        }
        self.len += 1;
        Ok(())
    }

    /// Appends what `from` holds, swapping it with the free slot's default
    /// (a large slot is not copied out and in again); false when the ring
    /// is full (and cannot grow), and then `from` is untouched.
    pub(crate) fn push_swap(&mut self, from: &mut S) -> bool {
        if self.len == self.slots.len() && !self.grow() {
            return false;
        }
        let tail = self.wrap(self.len);
        let Some(s) = self.slots.get_mut(tail) else {
            return false;
        };
        core::mem::swap(s, from);
        self.len += 1;
        true
    }

    /// The oldest slot.
    pub(crate) fn front(&self) -> Option<&S> {
        if self.len == 0 {
            return None;
        }
        self.slots.get(self.head)
    }

    /// Takes out the oldest slot that `pred` accepts; the slots after it
    /// move up, so the order of the rest is kept. O(len).
    pub(crate) fn take_where(&mut self, pred: impl Fn(&S) -> bool) -> Option<S> {
        let n = (0..self.len).find(|&n| self.slots.get(self.wrap(n)).is_some_and(&pred))?;
        let at = self.wrap(n);
        let taken = core::mem::take(self.slots.get_mut(at)?);
        for m in n..self.len - 1 {
            let (to, from) = (self.wrap(m), self.wrap(m + 1));
            let next = core::mem::take(self.slots.get_mut(from)?);
            *self.slots.get_mut(to)? = next;
        }
        self.len -= 1;
        Some(taken)
    }

    /// Takes out every slot `pred` accepts, keeping the order of the rest;
    /// `gone` gets the place of each (0: the oldest), counted before any
    /// was taken out, and the slot, just before it is dropped. O(len).
    pub(crate) fn take_all_where(
        &mut self,
        pred: impl Fn(&S) -> bool,
        mut gone: impl FnMut(usize, &S),
    ) {
        let mut kept = 0;
        for n in 0..self.len {
            let from = self.wrap(n);
            let Some(slot) = self.slots.get_mut(from) else {
                break;
            };
            if pred(slot) {
                gone(n, slot);
                *slot = S::default();
                continue;
            }
            if kept != n {
                let moved = core::mem::take(slot);
                let to = self.wrap(kept);
                if let Some(t) = self.slots.get_mut(to) {
                    *t = moved;
                }
            }
            kept += 1;
        }
        self.len = kept;
    }

    /// Drops the oldest slot (if any).
    pub(crate) fn pop(&mut self) {
        let _ = self.pop_front();
    }

    /// Takes out the oldest slot (its place keeps a default value).
    pub(crate) fn pop_front(&mut self) -> Option<S> {
        if self.len == 0 {
            return None;
        }
        let taken = core::mem::take(self.slots.get_mut(self.head)?);
        self.head = self.wrap(1);
        self.len -= 1;
        Some(taken)
    }
}
