// SPDX-License-Identifier: GPL-2.0

//! How a Rust object looks to kfabric.ko: its C header followed by the
//! provider's value, and the helpers the ops-table trampolines use to get
//! from C arguments to Rust ones.

use core::ffi::CStr;
use kernel::{prelude::*, str::CStrExt};

use super::super::kfi_sys as sys;

/// A kfabric object implemented in Rust: the C header `H`, then `T`.
#[repr(C)]
pub(crate) struct Object<H, T> {
    hdr: H,
    data: T,
}

/// The Rust value of the object whose C header is at `hdr`.
///
/// # Safety
///
/// `hdr` is the header of a live `Object<H, T>`.
pub(super) unsafe fn data<'a, H, T>(hdr: *mut H) -> &'a T {
    // SAFETY: The header is the first field of a live `Object<H, T>`.
    unsafe { &(*hdr.cast::<Object<H, T>>()).data }
}

/// Boxes `data` behind the header `hdr` and hands the object out.
///
/// # Safety
///
/// `out` is valid for writes.
pub(super) unsafe fn hand_out<H, T>(hdr: H, data: T, out: *mut *mut H) -> Result<c_int> {
    let obj = KBox::new(Object { hdr, data }, GFP_KERNEL)?;
    // SAFETY: `out` is valid for writes; the header is the first field.
    unsafe { *out = KBox::into_raw(obj).cast() };
    Ok(0)
}

/// `close` of every Rust object: drops it.
///
/// # Safety
///
/// `fid` is the header of a live `Object<H, T>` made by `hand_out`, closed
/// once (kfabric.ko's contract).
unsafe extern "C" fn close<H, T>(fid: *mut sys::kfid) -> c_int {
    // SAFETY: As required.
    drop(unsafe { KBox::from_raw(fid.cast::<Object<H, T>>()) });
    0
}

pub(super) const fn fid_ops<H, T>(
    bind: Option<unsafe extern "C" fn(*mut sys::kfid, *mut sys::kfid, u64) -> c_int>,
    control: Option<unsafe extern "C" fn(*mut sys::kfid, c_int, *mut c_void) -> c_int>,
) -> sys::kfi_ops {
    sys::kfi_ops {
        size: size_of::<sys::kfi_ops>(),
        close: Some(close::<H, T>),
        bind,
        control,
    }
}

pub(super) fn header(ops: &'static sys::kfi_ops) -> sys::kfid {
    sys::kfid {
        ops,
        ..Default::default()
    }
}

/// An optional C string argument.
///
/// # Safety
///
/// `p` is NULL or NUL-terminated.
pub(super) unsafe fn opt_str<'a>(p: *const c_char) -> Option<&'a CStr> {
    // SAFETY: As required.
    (!p.is_null()).then(|| unsafe { CStr::from_char_ptr(p) })
}

/// A byte slice from a C pointer and length (empty for NULL).
///
/// # Safety
///
/// `p` is NULL or valid for `len` bytes for `'a`.
pub(super) unsafe fn bytes<'a>(p: *const c_void, len: usize) -> &'a [u8] {
    if p.is_null() || len == 0 {
        &[]
    } else {
        // SAFETY: As required.
        unsafe { core::slice::from_raw_parts(p.cast(), len) }
    }
}

/// A writable byte slice for an address out-parameter.
///
/// # Safety
///
/// `p` is NULL or valid for `*len` bytes.
pub(super) unsafe fn addr_buf<'a>(p: *mut c_void, len: *mut usize) -> &'a mut [u8] {
    // SAFETY: kfabric.ko checked `len` non-NULL.
    let n = unsafe { *len };
    if p.is_null() || n == 0 {
        &mut []
    } else {
        // SAFETY: As required.
        unsafe { core::slice::from_raw_parts_mut(p.cast(), n) }
    }
}
