// SPDX-License-Identifier: GPL-2.0

//! The buffers one operation names: up to [`LIST_MAX`], so that a whole
//! bio (`BIO_MAX_VECS` segments) fits one operation.
//!
//! Most operations name a few buffers: those stay inline in the operation,
//! which is queued by value and never allocates. A longer list gets an
//! allocation of its own when the operation is posted (`GFP_ATOMIC`:
//! posting may happen in softirq; at most 4 KiB), freed with the
//! operation (any context). An allocation that fails makes the post fail
//! with `ENOMEM`, and nothing is queued.

use kernel::prelude::*;

use crate::{
    bufs::{self, Buf},
    kfi::{kfi_sys as sys, toolkit::segments::Segments},
};

/// Most buffers of one operation: `BIO_MAX_VECS`.
pub(crate) const LIST_MAX: usize = 256;
/// Buffers kept inside the operation.
const INLINE: usize = 4;

/// The buffers of one operation.
///
/// # Invariants
///
/// `Inline::n <= INLINE`; a `Heap` list holds at most [`LIST_MAX`].
pub(crate) enum List {
    Inline { bufs: [Buf; INLINE], n: usize },
    Heap(KVec<Buf>),
}

impl Default for List {
    fn default() -> Self {
        List::Inline {
            bufs: [Buf::default(); INLINE],
            n: 0,
        }
    }
}

impl List {
    /// A list of `n` empty buffers. `EINVAL` above [`LIST_MAX`].
    fn with_len(n: usize) -> Result<Self> {
        if n > LIST_MAX {
            return Err(EINVAL);
        }
        if n <= INLINE {
            return Ok(List::Inline {
                bufs: [Buf::default(); INLINE],
                n,
            });
        }
        let mut v = KVec::with_capacity(n, GFP_ATOMIC)?;
        v.resize(n, Buf::default(), GFP_ATOMIC)?;
        Ok(List::Heap(v))
    }

    fn slots_mut(&mut self) -> &mut [Buf] {
        match self {
            List::Inline { bufs, n } => bufs.get_mut(..*n).unwrap_or(&mut []),
            List::Heap(v) => v,
        }
    }

    /// The buffers, in order.
    pub(crate) fn as_slice(&self) -> &[Buf] {
        match self {
            List::Inline { bufs, n } => bufs.get(..*n).unwrap_or(&[]),
            List::Heap(v) => v,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.as_slice().len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Total bytes of the buffers (checked by the core: it fits `isize`).
    pub(crate) fn total(&self) -> usize {
        bufs::total(self.as_slice())
    }

    /// The first buffer's address (0 for an empty list).
    pub(crate) fn first_base(&self) -> usize {
        self.as_slice().first().map_or(0, |b| b.base)
    }

    fn from_segs(segs: Segments<'_>) -> Result<Self> {
        let mut list = Self::with_len(segs.remaining())?;
        bufs::fill_from(segs, list.slots_mut())?;
        Ok(list)
    }

    /// The buffers of a message (checked by kfabric.ko).
    pub(crate) fn of_msg(m: &sys::kfi_msg) -> Result<Self> {
        // SAFETY: Messages reach kfi_sockets only through its data-path
        // methods, from kfabric.ko, which checked the list.
        Self::from_segs(unsafe { Segments::of_msg(m) }?)
    }

    /// Atomic operand arrays as buffers of `size`-byte elements.
    pub(crate) fn of_iocs(iocs: &[sys::kfi_ioc], size: usize) -> Result<Self> {
        let mut list = Self::with_len(iocs.len())?;
        bufs::fill_iocs(iocs, size, list.slots_mut())?;
        Ok(list)
    }
}

impl<'a> IntoIterator for &'a List {
    type Item = &'a Buf;
    type IntoIter = core::slice::Iter<'a, Buf>;

    fn into_iter(self) -> Self::IntoIter {
        self.as_slice().iter()
    }
}
