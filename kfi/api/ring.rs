// SPDX-License-Identifier: GPL-2.0

//! A fixed ring of slots, allocated at open so that it can be filled from
//! any context without allocating: behind kfabric.ko's util CQ and EQ and
//! kfi_sockets' operation queues (the first piece of the provider toolkit,
//! shared by source).

use kernel::prelude::*;

/// A ring of `S` with room for as many as it was made with.
pub(crate) struct Ring<S> {
    slots: KVec<S>,
    head: usize,
    len: usize,
}

impl<S: Default> Ring<S> {
    /// A ring with room for `size` (non-zero) slots. Process context.
    pub(crate) fn new(size: usize) -> Result<Self> {
        let mut slots = KVec::with_capacity(size, GFP_KERNEL)?;
        for _ in 0..size {
            slots.push(S::default(), GFP_KERNEL)?;
        }
        Ok(Self {
            slots,
            head: 0,
            len: 0,
        })
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

    /// Appends `slot`, or gives it back when the ring is full.
    pub(crate) fn try_push(&mut self, slot: S) -> core::result::Result<(), S> {
        if self.len == self.slots.len() {
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
