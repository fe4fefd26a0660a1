// SPDX-License-Identifier: GPL-2.0

//! Checks of a caller's buffer lists (kvec, bio_vec, scatterlist), shared
//! by the data path and memory registration: no NULL buffer with bytes, no
//! length or total above `isize::MAX`. Any context; walks the list once.

use kernel::prelude::*;

use crate::kfi_sys as sys;

/// Adds one buffer's length to a total: `EINVAL` for a NULL buffer with
/// bytes, or a total above `isize::MAX`.
pub(crate) fn add_len(total: usize, null: bool, len: usize) -> Result<usize> {
    if null && len != 0 {
        return Err(EINVAL);
    }
    total
        .checked_add(len)
        .filter(|&t| isize::try_from(t).is_ok())
        .ok_or(EINVAL)
}

/// Checks every buffer of a list of `count` entries of type `iov_type` and
/// returns their total length.
///
/// # Safety
///
/// `list` is NULL or has `count` valid entries of the type `iov_type` names
/// (a scatterlist: a chain that is valid up to its end mark).
pub(crate) unsafe fn list_len(iov_type: u32, list: *const c_void, count: usize) -> Result<usize> {
    if count != 0 && list.is_null() {
        return Err(EINVAL);
    }
    let mut total = 0usize;
    match iov_type {
        sys::KFI_KVEC => {
            let iov = list.cast::<kernel::bindings::kvec>();
            for i in 0..count {
                // SAFETY: `count` kvecs (safety requirement).
                let v = unsafe { &*iov.add(i) };
                total = add_len(total, v.iov_base.is_null(), v.iov_len)?;
            }
        }
        sys::KFI_BVEC => {
            let bvec = list.cast::<kernel::bindings::bio_vec>();
            for i in 0..count {
                // SAFETY: `count` bio_vecs (safety requirement).
                let v = unsafe { &*bvec.add(i) };
                total = add_len(total, v.bv_page.is_null(), v.bv_len as usize)?;
            }
        }
        sys::KFI_SGL => {
            let mut sg = list.cast_mut().cast::<kernel::bindings::scatterlist>();
            for _ in 0..count {
                if sg.is_null() {
                    // The chain ended before `count` entries.
                    return Err(EINVAL);
                }
                let mut page = core::ptr::null_mut();
                let (mut off, mut len) = (0, 0);
                // SAFETY: A valid entry of the caller's scatterlist (safety
                // requirement); the outputs are locals.
                sg = unsafe { sys::kfi_sg_entry(sg, &mut page, &mut off, &mut len) };
                total = add_len(total, page.is_null(), len as usize)?;
            }
        }
        _ => return Err(EINVAL),
    }
    Ok(total)
}
