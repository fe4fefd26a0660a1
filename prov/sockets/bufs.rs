// SPDX-License-Identifier: GPL-2.0

//! The ULP's buffer lists (kvec, bio_vec, scatterlist) as kernel virtual
//! buffers, and copies between them and byte slices.
//!
//! A [`Buf`] is only an address and a length: the ULP guarantees that the
//! memory stays valid until the operation that names it completes (or, for
//! a registered region, until the region is closed). Any context.

use core::ffi::c_void;
use kernel::{bindings, prelude::*};

use crate::kfi::kfi_sys as sys;

/// A kernel virtual buffer of the ULP.
#[derive(Clone, Copy, Default)]
pub(crate) struct Buf {
    pub(crate) base: usize,
    pub(crate) len: usize,
}

// Only pointers cross; `struct page` behind them ends in zero-size arrays,
// which the lint cannot tell from by-value use.
#[allow(improper_ctypes)]
extern "C" {
    /// `kfi_sockets_mem.c`: the kernel address of a bio_vec's bytes.
    fn kfi_sockets_bvec_addr(bv: *const bindings::bio_vec) -> *mut c_void;
    /// `kfi_sockets_mem.c`: address and length of a scatterlist entry's
    /// bytes; returns the next entry.
    fn kfi_sockets_sg_buf(
        sg: *mut bindings::scatterlist,
        addr: *mut *mut c_void,
        len: *mut c_uint,
    ) -> *mut bindings::scatterlist;
}

/// Fills `out` with the `count` buffers of a list of type `iov_type`;
/// returns `count`. `EINVAL` if there are more than `out` holds.
///
/// # Safety
///
/// `list` points to `count` entries of the type `iov_type` names (for
/// scatterlists: a chain of at least `count` entries), of lowmem pages.
pub(crate) unsafe fn fill(
    iov_type: u32,
    list: *const c_void,
    count: usize,
    out: &mut [Buf],
) -> Result<usize> {
    if count > out.len() {
        return Err(EINVAL);
    }
    let mut sg: *mut bindings::scatterlist = list.cast_mut().cast();
    for (i, slot) in out.iter_mut().enumerate().take(count) {
        *slot = match iov_type {
            sys::KFI_KVEC => {
                // SAFETY: A kvec list of `count` entries.
                let v = unsafe { *list.cast::<bindings::kvec>().add(i) };
                Buf {
                    base: v.iov_base as usize,
                    len: v.iov_len,
                }
            }
            sys::KFI_BVEC => {
                // SAFETY: A bio_vec list of `count` entries.
                let bv = unsafe { list.cast::<bindings::bio_vec>().add(i) };
                Buf {
                    // SAFETY: A valid bio_vec of lowmem pages.
                    base: unsafe { kfi_sockets_bvec_addr(bv) } as usize,
                    // SAFETY: As above.
                    len: unsafe { (*bv).bv_len } as usize,
                }
            }
            sys::KFI_SGL => {
                if sg.is_null() {
                    return Err(EINVAL);
                }
                let mut addr: *mut c_void = core::ptr::null_mut();
                let mut len: c_uint = 0;
                // SAFETY: A scatterlist with at least `count` entries.
                sg = unsafe { kfi_sockets_sg_buf(sg, &mut addr, &mut len) };
                Buf {
                    base: addr as usize,
                    len: len as usize,
                }
            }
            _ => return Err(EINVAL),
        };
    }
    Ok(count)
}

/// The buffers of a message (checked by kfabric.ko) into `out`.
pub(crate) fn of_msg(m: &sys::kfi_msg, out: &mut [Buf]) -> Result<usize> {
    // SAFETY: All union members are pointers to a list of `iov_count`
    // entries of the type `iov_type` names (checked by kfabric.ko).
    let list = unsafe { m.__bindgen_anon_1.msg_iov };
    // SAFETY: As above.
    unsafe { fill(m.iov_type, list.cast(), m.iov_count, out) }
}

/// Atomic operand arrays as buffers of `size`-byte elements.
pub(crate) fn of_iocs(iocs: &[sys::kfi_ioc], size: usize, out: &mut [Buf]) -> Result<usize> {
    if iocs.len() > out.len() {
        return Err(EINVAL);
    }
    for (o, i) in out.iter_mut().zip(iocs) {
        let len = i.count.checked_mul(size).ok_or(EINVAL)?;
        if i.addr.is_null() && len != 0 {
            return Err(EINVAL);
        }
        *o = Buf {
            base: i.addr as usize,
            len,
        };
    }
    Ok(iocs.len())
}

/// Total length of `bufs`.
pub(crate) fn total(bufs: &[Buf]) -> usize {
    bufs.iter().map(|b| b.len).sum()
}

/// The ULP's buffer as a slice.
///
/// # Safety
///
/// `b` is a buffer of a live operation or region (valid until it ends),
/// not otherwise referenced while the slice lives.
pub(crate) unsafe fn slice<'a>(b: &Buf) -> &'a mut [u8] {
    if b.len == 0 {
        return &mut [];
    }
    // SAFETY: As required.
    unsafe { core::slice::from_raw_parts_mut(b.base as *mut u8, b.len) }
}

/// Copies `src` into the start of `bufs`, in order; returns the bytes
/// copied (at most the buffers' total).
///
/// # Safety
///
/// As for [`slice`], for each of `bufs`.
pub(crate) unsafe fn scatter(bufs: &[Buf], src: &[u8]) -> usize {
    let mut at = 0;
    for b in bufs {
        let n = b.len.min(src.len() - at);
        // SAFETY: As required.
        let dst = unsafe { slice(b) };
        dst[..n].copy_from_slice(&src[at..at + n]);
        at += n;
    }
    at
}

/// Copies the start of `bufs` into `dst`; returns the bytes copied.
///
/// # Safety
///
/// As for [`slice`], for each of `bufs`.
pub(crate) unsafe fn gather(bufs: &[Buf], dst: &mut [u8]) -> usize {
    let mut at = 0;
    for b in bufs {
        let n = b.len.min(dst.len() - at);
        // SAFETY: As required.
        dst[at..at + n].copy_from_slice(&unsafe { slice(b) }[..n]);
        at += n;
    }
    at
}
