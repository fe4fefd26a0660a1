// SPDX-License-Identifier: GPL-2.0

//! Per-I/O memory registration: regions allocated once (`kfi_mr_alloc`,
//! process context) that a storage ULP maps to one I/O's buffers and
//! unmaps again on its submission and completion paths (`kfi_mr_map*`,
//! `kfi_mr_unmap`: any context but hard interrupt; nothing here sleeps or
//! allocates). Each call checks the region and the buffer list, then makes
//! one call through the region's `ops` table.

use kernel::{prelude::*, task::might_sleep};

use crate::{
    buffers::list_len,
    kfi_sys as sys,
    object::{checked, checked_open, finish_open, Pending},
    slot::errno,
};

/// `kfi_mr_alloc`: an unmapped region of `domain`, a child of it, that
/// mappings of up to `max_segs` buffers with the rights `access` use.
///
/// # Safety
///
/// The C contract: NULL or valid pointers of the declared types.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_mr_alloc(
    domain: *mut sys::kfid_domain,
    max_segs: usize,
    access: u64,
    flags: u64,
    mr: *mut *mut sys::kfid_mr,
    context: *mut c_void,
) -> c_int {
    errno((|| {
        might_sleep();
        // SAFETY: NULL, closed or a domain (C contract).
        let dcore = unsafe { checked_open(domain.cast(), sys::KFI_CLASS_DOMAIN) }?;
        if max_segs == 0
            || max_segs > sys::KFI_MR_MAP_SEGS_MAX as usize
            || access == 0
            || access & !sys::KFI_MR_ACCESS != 0
            || flags & !sys::KFI_RMA_PMEM != 0
        {
            return Err(EINVAL);
        }
        // SAFETY: `domain` is an open domain (checked).
        let table = unsafe { (*domain).mr };
        let f = slot!(table, sys::kfi_ops_mr, alloc)?;
        let pending = Pending::child(dcore, sys::KFI_CLASS_MR)?;
        let call = |o| {
            // SAFETY: The provider is pinned; arguments checked.
            unsafe { f(domain, max_segs, access, flags, o) }
        };
        // SAFETY: The provider returns a region on success.
        unsafe { finish_open(pending, mr, context, |m| m.cast(), call) }
    })())
}

/// The memory registration table of an open region.
///
/// # Safety
///
/// `mr` is NULL or an object header valid for reads.
unsafe fn ops_of(mr: *mut sys::kfid_mr) -> Result<*const sys::kfi_ops_mr> {
    // SAFETY: NULL or an object header (safety requirement).
    unsafe { checked(mr.cast(), sys::KFI_CLASS_MR) }?;
    // SAFETY: An open region (checked); its provider set `ops` (NULL if it
    // has no per-I/O mapping).
    Ok(unsafe { (*mr).ops })
}

/// `kfi_mr_map`: gives a region of `kfi_mr_alloc` the buffers of one I/O.
///
/// # Safety
///
/// The C contract: NULL or valid pointers of the declared types; the list
/// has `iov_count` entries of its type.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_mr_map(
    mr: *mut sys::kfid_mr,
    map: *const sys::kfi_mr_map,
) -> c_int {
    errno((|| {
        // SAFETY: NULL or a region (C contract).
        let table = unsafe { ops_of(mr) }?;
        if map.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: Non-NULL, valid for reads (C contract).
        let m = unsafe { &*map };
        if m.iov_type > sys::KFI_SGL
            || m.iov_count == 0
            || m.iov_count > sys::KFI_MR_MAP_SEGS_MAX as usize
        {
            return Err(EINVAL);
        }
        // SAFETY: All members of the union are pointers; the list has
        // `iov_count` entries of its type (C contract).
        let len = unsafe { list_len(m.iov_type, m.__bindgen_anon_1.mr_iov.cast(), m.iov_count) }?;
        if len == 0 || m.offset.checked_add(len as u64).is_none() {
            return Err(EINVAL);
        }
        let f = slot!(table, sys::kfi_ops_mr, map)?;
        // SAFETY: An open region of the provider, which it pins; a checked
        // list.
        kernel::error::to_result(unsafe { f(mr, map) })
    })())
}

macro_rules! mr_map_call {
    ($(#[$doc:meta])* $name:ident($lty:ty, $iov_type:ident)) => {
        $(#[$doc])*
        ///
        /// # Safety
        ///
        /// The C contract: NULL or valid pointers of the declared types.
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(
            mr: *mut sys::kfid_mr,
            list: *const $lty,
            count: usize,
            offset: u64,
        ) -> c_int {
            if list.is_null() {
                return EINVAL.to_errno();
            }
            let mut m = sys::kfi_mr_map {
                iov_type: sys::$iov_type,
                iov_count: count,
                offset,
                ..Default::default()
            };
            m.__bindgen_anon_1.mr_iov = list.cast();
            // SAFETY: `m` is valid across the call; the rest is the C
            // contract.
            unsafe { kfi_mr_map(mr, &m) }
        }
    };
}

mr_map_call!(
    /// `kfi_mr_mapv`: maps a kvec list.
    kfi_mr_mapv(kernel::bindings::kvec, KFI_KVEC)
);
mr_map_call!(
    /// `kfi_mr_mapbv`: maps a bio_vec list.
    kfi_mr_mapbv(kernel::bindings::bio_vec, KFI_BVEC)
);
mr_map_call!(
    /// `kfi_mr_mapsgl`: maps a scatterlist.
    kfi_mr_mapsgl(kernel::bindings::scatterlist, KFI_SGL)
);

/// `kfi_mr_unmap`: invalidates a region's mapping.
///
/// # Safety
///
/// The C contract: `mr` is NULL or an object header valid for reads.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_mr_unmap(mr: *mut sys::kfid_mr) -> c_int {
    errno((|| {
        // SAFETY: NULL or a region (C contract).
        let table = unsafe { ops_of(mr) }?;
        let f = slot!(table, sys::kfi_ops_mr, unmap)?;
        // SAFETY: An open region of the provider, which it pins.
        kernel::error::to_result(unsafe { f(mr) })
    })())
}
