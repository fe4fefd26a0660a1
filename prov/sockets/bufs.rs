// SPDX-License-Identifier: GPL-2.0

//! The ULP's buffer lists (kvec, bio_vec, scatterlist) as kernel virtual
//! buffers, and copies between them and byte slices: the toolkit's
//! segments (`kfi/api/toolkit/segments.rs`) mapped to addresses.
//!
//! A [`Buf`] is only an address and a length: the ULP guarantees that the
//! memory stays valid until the operation that names it completes (or, for
//! a registered region, until the region is closed). Any context.

use core::borrow::Borrow;
use kernel::prelude::*;

use crate::kfi::{kfi_sys as sys, toolkit::segments::Segments};

/// A kernel virtual buffer of the ULP.
#[derive(Clone, Copy, Default)]
pub(crate) struct Buf {
    pub(crate) base: usize,
    pub(crate) len: usize,
}

/// Fills `out` with the buffers of `segs`; returns how many. `EINVAL` if
/// there are more than `out` holds, or the list is broken.
pub(crate) fn fill_from(segs: Segments<'_>, out: &mut [Buf]) -> Result<usize> {
    if segs.remaining() > out.len() {
        return Err(EINVAL);
    }
    let mut n = 0;
    for (slot, seg) in out.iter_mut().zip(segs) {
        let seg = seg?;
        *slot = Buf {
            base: seg.kernel_addr(),
            len: seg.len(),
        };
        n += 1;
    }
    Ok(n)
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
    // SAFETY: As required.
    fill_from(unsafe { Segments::new(iov_type, list, count) }?, out)
}

/// Atomic operand arrays as buffers of `size`-byte elements.
pub(crate) fn fill_iocs(iocs: &[sys::kfi_ioc], size: usize, out: &mut [Buf]) -> Result<usize> {
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
    // kfabric.ko checked the caller's lists; saturating all the same, as
    // nothing here may panic on a length a caller gave.
    bufs.iter().fold(0usize, |t, b| t.saturating_add(b.len))
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
pub(crate) unsafe fn scatter(
    bufs: impl IntoIterator<Item = impl Borrow<Buf>>,
    src: &[u8],
) -> usize {
    let mut at = 0;
    for b in bufs {
        let b = b.borrow();
        let n = b.len.min(src.len() - at);
        // SAFETY: As required.
        let dst = unsafe { slice(b) };
        dst[..n].copy_from_slice(&src[at..at + n]);
        at += n;
    }
    at
}

/// Copies `src` into `bufs` from byte `off` of them on, in order; returns
/// the bytes copied (at most what the buffers hold from `off`).
///
/// # Safety
///
/// As for [`slice`], for each of `bufs`.
pub(crate) unsafe fn scatter_at(
    bufs: impl IntoIterator<Item = impl Borrow<Buf>>,
    mut off: usize,
    src: &[u8],
) -> usize {
    let mut at = 0;
    for b in bufs {
        let b = b.borrow();
        if off >= b.len {
            off -= b.len;
            continue;
        }
        let n = (b.len - off).min(src.len() - at);
        // SAFETY: As required.
        let dst = unsafe { slice(b) };
        dst[off..off + n].copy_from_slice(&src[at..at + n]);
        at += n;
        off = 0;
        if at == src.len() {
            break;
        }
    }
    at
}

/// Copies the start of `bufs` into `dst`; returns the bytes copied.
///
/// # Safety
///
/// As for [`slice`], for each of `bufs`.
pub(crate) unsafe fn gather(
    bufs: impl IntoIterator<Item = impl Borrow<Buf>>,
    dst: &mut [u8],
) -> usize {
    let mut at = 0;
    for b in bufs {
        let b = b.borrow();
        let n = b.len.min(dst.len() - at);
        // SAFETY: As required.
        dst[at..at + n].copy_from_slice(&unsafe { slice(b) }[..n]);
        at += n;
    }
    at
}
