// SPDX-License-Identifier: GPL-2.0

//! The fixed ring of slots behind the util CQ and EQ: allocated at open, so
//! that providers can post from any context without allocating.

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

    /// Appends `slot`; `ENOSPC` when full.
    pub(crate) fn push(&mut self, slot: S) -> Result {
        let cap = self.slots.len();
        if self.len == cap {
            return Err(ENOSPC);
        }
        let tail = (self.head + self.len) % cap;
        self.slots[tail] = slot;
        self.len += 1;
        Ok(())
    }

    /// The oldest slot.
    pub(crate) fn front(&self) -> Option<&S> {
        (self.len > 0).then(|| &self.slots[self.head])
    }

    /// Drops the oldest slot (if any).
    pub(crate) fn pop(&mut self) {
        if self.len > 0 {
            self.head = (self.head + 1) % self.slots.len();
            self.len -= 1;
        }
    }
}
