// SPDX-License-Identifier: GPL-2.0

//! A ULP's buffer list (`KFI_KVEC`, `KFI_BVEC` or `KFI_SGL`) as segments:
//! kernel virtual ranges for kvecs, (page, offset, len) for bio_vecs and
//! scatterlist entries. A provider maps each to what its transport needs:
//! kfi_sockets copies through kernel addresses ([`Segment::kernel_addr`]),
//! an RDMA provider maps pages (or a kvec's address) for DMA and builds
//! its scatter/gather entries.
//!
//! Walking a list reads only the list, never the buffers; any context.
//! The buffers themselves stay the ULP's: they are valid until the
//! operation that names them completes (or the region is closed).

use core::marker::PhantomData;
use kernel::{bindings, prelude::*};

use super::super::kfi_sys as sys;

/// One contiguous piece of a ULP's buffer list.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Segment {
    /// `len` bytes of kernel virtual memory at `addr` (a kvec entry).
    Addr { addr: usize, len: usize },
    /// `len` bytes from `offset` in `page` (a bio_vec or scatterlist
    /// entry; `offset + len` may run into the pages that follow `page`
    /// in memory, as in a multi-page bio_vec).
    Page {
        page: *mut bindings::page,
        offset: usize,
        len: usize,
    },
}

impl Segment {
    /// The segment's bytes.
    pub(crate) fn len(&self) -> usize {
        match *self {
            Self::Addr { len, .. } | Self::Page { len, .. } => len,
        }
    }

    /// Whether the segment has no bytes.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The kernel address of the segment's first byte (0 for a NULL
    /// segment or an unmapped highmem page; every page is lowmem on the
    /// 64-bit kernels kfabric builds for). Any context.
    pub(crate) fn kernel_addr(&self) -> usize {
        match *self {
            Self::Addr { addr, .. } => addr,
            Self::Page { page, .. } if page.is_null() => 0,
            Self::Page { page, offset, .. } => {
                // SAFETY: A page of the ULP's list, which it keeps valid
                // while the list is in use; only its address is computed.
                let base = unsafe { sys::kfi_page_address(page) } as usize;
                if base == 0 {
                    0
                } else {
                    base.wrapping_add(offset)
                }
            }
        }
    }
}

/// Where the walk is in the list.
enum Cursor {
    Kvec(*const bindings::kvec),
    Bvec(*const bindings::bio_vec),
    Sgl(*mut bindings::scatterlist),
}

/// The segments of a buffer list, in order; one per entry.
///
/// # Invariants
///
/// The cursor points into a list that has `left` more valid entries of
/// its type (a scatterlist: a chain valid up to its end mark), for `'a`.
pub(crate) struct Segments<'a> {
    cursor: Cursor,
    left: usize,
    _list: PhantomData<&'a c_void>,
}

impl<'a> Segments<'a> {
    /// The segments of a list of `count` entries of type `iov_type`;
    /// `EINVAL` for another type, or a NULL list with entries.
    ///
    /// # Safety
    ///
    /// `list` points to `count` entries of the type `iov_type` names (for
    /// scatterlists: a chain of at least `count` entries or ended by its
    /// end mark), valid for `'a`.
    pub(crate) unsafe fn new(iov_type: u32, list: *const c_void, count: usize) -> Result<Self> {
        if list.is_null() && count != 0 {
            return Err(EINVAL);
        }
        let cursor = match iov_type {
            sys::KFI_KVEC => Cursor::Kvec(list.cast()),
            sys::KFI_BVEC => Cursor::Bvec(list.cast()),
            sys::KFI_SGL => Cursor::Sgl(list.cast_mut().cast()),
            _ => return Err(EINVAL),
        };
        // INVARIANT: As required.
        Ok(Self {
            cursor,
            left: count,
            _list: PhantomData,
        })
    }

    /// The segments of a message's buffers.
    ///
    /// # Safety
    ///
    /// `m` is a message kfabric.ko passed to a data-path method of the
    /// provider (its list was checked against its type and count), used
    /// within that call or while the operation it posts is outstanding.
    pub(crate) unsafe fn of_msg(m: &'a sys::kfi_msg) -> Result<Self> {
        // SAFETY: All union members are pointers to a list of `iov_count`
        // entries of the type `iov_type` names (requirement).
        let list = unsafe { m.__bindgen_anon_1.msg_iov };
        // SAFETY: `list` points to `iov_count` entries of the type `iov_type`
        // names, checked by kfabric.ko and valid for `'a` (requirement).
        unsafe { Self::new(m.iov_type, list.cast(), m.iov_count) }
    }

    /// Segments not walked yet.
    pub(crate) fn remaining(&self) -> usize {
        self.left
    }
}

impl Iterator for Segments<'_> {
    /// A segment, or `EINVAL` once if a scatterlist ends before its count
    /// (the walk stops there).
    type Item = Result<Segment>;

    fn next(&mut self) -> Option<Result<Segment>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let seg = match &mut self.cursor {
            Cursor::Kvec(v) => {
                // SAFETY: At least one more entry (type invariant).
                let e = unsafe { &**v };
                // The walk may step one past the last entry, never beyond.
                *v = v.wrapping_add(1);
                Segment::Addr {
                    addr: e.iov_base as usize,
                    len: e.iov_len,
                }
            }
            Cursor::Bvec(v) => {
                // SAFETY: At least one more entry (type invariant).
                let e = unsafe { &**v };
                *v = v.wrapping_add(1);
                Segment::Page {
                    page: e.bv_page,
                    offset: e.bv_offset as usize,
                    len: e.bv_len as usize,
                }
            }
            Cursor::Sgl(sg) => {
                if sg.is_null() {
                    self.left = 0;
                    return Some(Err(EINVAL));
                }
                let mut page = core::ptr::null_mut();
                let (mut offset, mut len) = (0, 0);
                // SAFETY: A valid entry of the chain (type invariant); the
                // outputs are locals.
                *sg = unsafe { sys::kfi_sg_entry(*sg, &mut page, &mut offset, &mut len) };
                Segment::Page {
                    page,
                    offset: offset as usize,
                    len: len as usize,
                }
            }
        };
        Some(Ok(seg))
    }
}
