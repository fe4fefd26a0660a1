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

impl<S: Clone + Default> Ring<S> {
    /// A ring with room for `size` (non-zero) slots. Process context.
    pub(crate) fn new(size: usize) -> Result<Self> {
        let mut slots = KVec::with_capacity(size, GFP_KERNEL)?;
        slots.resize(size, S::default(), GFP_KERNEL)?;
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
        if self.len == self.slots.len() {
            return Err(ENOSPC);
        }
        let tail = self.wrap(self.len);
        *self.slots.get_mut(tail).ok_or(ENOSPC)? = slot;
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
        let taken = self.slots.get(self.wrap(n))?.clone();
        for m in n..self.len - 1 {
            let (to, from) = (self.wrap(m), self.wrap(m + 1));
            let next = self.slots.get(from)?.clone();
            *self.slots.get_mut(to)? = next;
        }
        self.len -= 1;
        Some(taken)
    }

    /// Drops the oldest slot (if any).
    pub(crate) fn pop(&mut self) {
        if self.len > 0 {
            self.head = self.wrap(1);
            self.len -= 1;
        }
    }
}
