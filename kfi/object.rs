// SPDX-License-Identifier: GPL-2.0

//! Object lifetime: creation through a provider, and `kfi_close`.
//!
//! The core stores the [`ProviderRef`] an object holds in its `kfid.core`
//! and counts live objects per class for debugfs.

use core::{ffi::CStr, mem::offset_of, ptr::NonNull};
use kernel::{
    error::to_result,
    prelude::*,
    str::CStrExt,
    sync::atomic::{Atomic, Relaxed},
    task::might_sleep,
};

use crate::{kfi_sys as sys, registry::ProviderRef};

const CLASSES: usize = sys::KFI_CLASS_MAX as usize;

/// Live objects per class (`enum kfi_fclass`).
static LIVE: [Atomic<i64>; CLASSES] = [const { Atomic::new(0) }; CLASSES];

/// The name of object class `class`, for debugfs.
pub(crate) fn class_name(class: usize) -> &'static str {
    match class as u32 {
        sys::KFI_CLASS_FABRIC => "fabric",
        _ => "unspec",
    }
}

/// Live objects of class `class`.
pub(crate) fn live(class: usize) -> i64 {
    LIVE.get(class).map_or(0, |c| c.load(Relaxed))
}

/// Number of object classes.
pub(crate) const fn classes() -> usize {
    CLASSES
}

/// Whether an ops table of `size` bytes has the slot at `offset`.
fn has_slot(size: usize, offset: usize) -> bool {
    size >= offset + size_of::<usize>()
}

/// Makes `fid`, just created by a provider, an open kfabric object.
///
/// # Safety
///
/// `fid` must point to a valid object header of class `class`.
unsafe fn attach(fid: NonNull<sys::kfid>, class: u32, pref: ProviderRef, context: *mut c_void) {
    // SAFETY: `fid` is valid and not yet shared with the ULP (safety
    // requirement of this function).
    let fid = unsafe { &mut *fid.as_ptr() };
    fid.fclass = class;
    fid.context = context;
    fid.core = pref.into_raw();
    if let Some(c) = LIVE.get(class as usize) {
        c.add(1, Relaxed);
    }
}

/// `kfi_fabric`: opens a fabric of the provider named in `attr`.
///
/// # Safety
///
/// `attr` is NULL or valid for reads, `fabric` NULL or valid for writes.
pub(crate) unsafe fn fabric_open(
    attr: *const sys::kfi_fabric_attr,
    fabric: *mut *mut sys::kfid_fabric,
    context: *mut c_void,
) -> Result {
    might_sleep();
    if attr.is_null() || fabric.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: Non-NULL and valid for reads (safety requirement).
    let attr_ref = unsafe { &*attr };
    if attr_ref.prov_name.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: A non-NULL name is NUL-terminated (the C contract).
    let name = unsafe { CStr::from_char_ptr(attr_ref.prov_name) };
    let pref = ProviderRef::get(name)?;
    let open = pref.provider().fabric.ok_or(ENOSYS)?;
    let mut out: *mut sys::kfid_fabric = core::ptr::null_mut();
    // SAFETY: The provider is pinned by `pref`; the arguments are valid.
    to_result(unsafe { open(attr, &mut out, context) })?;
    let out = NonNull::new(out).ok_or_else(|| {
        pr_err!("provider returned no fabric\n");
        EIO
    })?;
    // SAFETY: The provider returned a valid fabric; `fid` is its first field.
    unsafe {
        (*out.as_ptr()).api_version =
            crate::kfi_sys::KFI_MAJOR_VERSION << 16 | crate::kfi_sys::KFI_MINOR_VERSION;
        attach(
            NonNull::new_unchecked(&raw mut (*out.as_ptr()).fid),
            sys::KFI_CLASS_FABRIC,
            pref,
            context,
        );
        *fabric = out.as_ptr();
    }
    Ok(())
}

/// `kfi_close`: closes any object and drops its provider reference.
///
/// # Safety
///
/// `fid` is NULL or points to an object header valid for reads.
pub(crate) unsafe fn close(fid: *mut sys::kfid) -> Result {
    might_sleep();
    let fid = NonNull::new(fid).ok_or(EINVAL)?;
    // SAFETY: Valid for reads (safety requirement). The fields are copied
    // out because a successful close frees the object.
    let (class, core, ops) = unsafe {
        let f = fid.as_ref();
        (f.fclass, f.core, f.ops)
    };
    if core.is_null() || class == sys::KFI_CLASS_UNSPEC || class >= sys::KFI_CLASS_MAX {
        return Err(EINVAL);
    }
    if ops.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: An open object's ops table is the provider's and lives as long
    // as the provider, which the object pins.
    let ops = unsafe { &*ops };
    if !has_slot(ops.size, offset_of!(sys::kfi_ops, close)) {
        return Err(ENOSYS);
    }
    let close = ops.close.ok_or(ENOSYS)?;
    // SAFETY: `fid` is an open object of this provider.
    to_result(unsafe { close(fid.as_ptr()) })?;
    // SAFETY: `core` was set by `attach` from `ProviderRef::into_raw` and the
    // object is now gone, so this is the only taker.
    drop(unsafe { ProviderRef::from_raw(core) });
    if let Some(c) = LIVE.get(class as usize) {
        c.fetch_sub(1, Relaxed);
    }
    Ok(())
}
