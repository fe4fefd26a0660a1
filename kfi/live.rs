// SPDX-License-Identifier: GPL-2.0

//! The open objects by header address, so that `kfi_close` and the calls
//! that take a parent or bind an object can refuse a pointer that names
//! no open object (a second close of one object, a parent closed
//! already) before they read through it: that is `-EINVAL`, not a double
//! free. An XArray keyed by the header's address, whose entry is the
//! object's core (`object.rs`), so that a closed object's removal never
//! takes out a new object that got the same address.

use core::ffi::c_void;
use kernel::{bindings, prelude::*, types::Opaque};

use crate::kfi_sys as sys;

/// The set: an XArray, which locks itself.
struct Set(Opaque<bindings::xarray>);

// SAFETY: The XArray is only used through its own functions, which take
// its lock or RCU as they need; the Rust side never reads it.
unsafe impl Sync for Set {}

static SET: Set = Set(Opaque::uninit());

fn xa() -> *mut bindings::xarray {
    SET.0.get()
}

fn index(fid: *const sys::kfid) -> usize {
    fid as usize
}

/// Sets the set up.
///
/// # Safety
///
/// Called exactly once, before any other function of this module.
pub(crate) unsafe fn init() {
    // SAFETY: Not used yet (safety requirement); flags 0: a plain XArray.
    unsafe { bindings::xa_init_flags(xa(), 0) };
}

/// Frees what the set holds; called at module exit, when no object is
/// open (each pins its provider, which pins kfabric.ko).
pub(crate) fn release() {
    // SAFETY: Initialized by `init`; no other user is left.
    unsafe { bindings::xa_destroy(xa()) };
}

/// Files the open object `fid` with its core `core`. Process context.
pub(crate) fn insert(fid: *const sys::kfid, core: *const c_void) -> Result {
    // SAFETY: Initialized by `init`. `core` is a heap pointer (aligned, so
    // never taken for an internal entry); GFP_KERNEL in process context.
    let old =
        unsafe { bindings::xa_store(xa(), index(fid), core.cast_mut(), bindings::GFP_KERNEL) };
    // SAFETY: Only inspects the returned entry.
    let err = unsafe { bindings::xa_err(old) };
    if err != 0 {
        return Err(Error::from_errno(err));
    }
    Ok(())
}

/// The core filed for `fid`, if `fid` is an open object (or one being
/// attached). Any context.
pub(crate) fn core_of(fid: *const sys::kfid) -> Option<*const c_void> {
    // SAFETY: Initialized by `init`; the lookup takes RCU itself.
    let p = unsafe { bindings::xa_load(xa(), index(fid)) };
    (!p.is_null()).then_some(p.cast_const())
}

/// Takes `fid` out of the set if it is still filed with `core` (a new
/// object at the same address has a new core, and stays). Process
/// context (the XArray's lock is taken without disabling softirqs).
pub(crate) fn remove(fid: *const sys::kfid, core: *const c_void) {
    // SAFETY: Initialized by `init`. Under the XArray's lock, as
    // `__xa_erase` requires; the erase frees no memory that the lock
    // would need to be dropped for.
    unsafe {
        bindings::xa_lock(xa());
        if bindings::xa_load(xa(), index(fid)).cast_const() == core {
            bindings::__xa_erase(xa(), index(fid));
        }
        bindings::xa_unlock(xa());
    }
}
