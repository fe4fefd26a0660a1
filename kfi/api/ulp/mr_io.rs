// SPDX-License-Identifier: GPL-2.0

//! Per-I/O memory registration on the handles: a region allocated once
//! ([`Owned::<sys::kfid_domain>::mr_alloc`], process context) is mapped to
//! one I/O's pages and unmapped again ([`Owned::<sys::kfid_mr>::map_bvec`],
//! [`Owned::<sys::kfid_mr>::unmap`]: any context but hard interrupt, they
//! neither sleep nor allocate). See `Documentation/api.rst`, "Per-I/O
//! memory registration".

use kernel::{bindings, error::to_result, prelude::*};

use super::super::{kfabric::Owned, kfi_sys as sys};

impl Owned<sys::kfid_domain> {
    /// An unmapped region for mappings of up to `max_segs` buffers with
    /// the rights `access`. Process context.
    pub(crate) fn mr_alloc(&self, max_segs: usize, access: u64) -> Result<Owned<sys::kfid_mr>> {
        // SAFETY: An open domain; `o` is the out pointer `open` provides.
        Owned::open(|o| unsafe {
            sys::kfi_mr_alloc(self.as_ptr(), max_segs, access, 0, o, core::ptr::null_mut())
        })
    }
}

impl Owned<sys::kfid_mr> {
    /// Maps `segs` into this region of `mr_alloc` at remote address
    /// `offset`; returns the mapping's fresh key.
    ///
    /// # Safety
    ///
    /// The pages of `segs` stay valid, and are not freed or reused, until
    /// [`Self::unmap`] returns `Ok` or the region is closed: peers read and
    /// (per the region's rights) write them meanwhile, so no Rust
    /// reference to their bytes lives meanwhile either.
    pub(crate) unsafe fn map_bvec(&self, segs: &[bindings::bio_vec], offset: u64) -> Result<u64> {
        // SAFETY: An open region; `segs` is a valid list of its length,
        // read during the call; its pages outlive the mapping (safety
        // requirement).
        to_result(unsafe { sys::kfi_mr_mapbv(self.as_ptr(), segs.as_ptr(), segs.len(), offset) })?;
        Ok(self.key())
    }

    /// Invalidates the mapping: `Ok` once the pages are the caller's
    /// again, `EBUSY` while a peer access still uses them (call again).
    pub(crate) fn unmap(&self) -> Result {
        // SAFETY: An open region.
        to_result(unsafe { sys::kfi_mr_unmap(self.as_ptr()) })
    }
}
