// SPDX-License-Identifier: GPL-2.0

//! The exported C ABI: thin `extern "C"` entry points that turn the Rust
//! results into `-errno` values. `kfi_exports.c` exports them; their
//! declarations and documentation are in `include/kfabric/`.

use kernel::{prelude::*, str::CStrExt};

use crate::{kfi_sys as sys, object, registry, slot::errno, strerror};

/// Registers a provider.
///
/// # Safety
///
/// `prov` is NULL or a valid provider description that stays valid and
/// unchanged until it is deregistered.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_provider_register(
    version: u32,
    prov: *mut sys::kfi_provider,
) -> c_int {
    errno(registry::register(version, prov))
}

/// Deregisters a provider.
///
/// # Safety
///
/// None beyond the C contract: `prov` is only compared, never dereferenced
/// unless registered.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_provider_deregister(prov: *mut sys::kfi_provider) -> c_int {
    errno(registry::deregister(prov))
}

/// Opens a fabric.
///
/// # Safety
///
/// `attr` is NULL or valid for reads, `fabric` NULL or valid for writes.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_fabric(
    attr: *const sys::kfi_fabric_attr,
    fabric: *mut *mut sys::kfid_fabric,
    context: *mut c_void,
) -> c_int {
    // SAFETY: Same requirements as this function's.
    errno(unsafe { object::fabric_open(attr, fabric, context) })
}

/// Closes an object.
///
/// # Safety
///
/// `fid` is NULL, an object closed already (`-EINVAL`), or an object
/// header valid for reads.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_close(fid: *mut sys::kfid) -> c_int {
    // SAFETY: Same requirement as this function's.
    errno(unsafe { object::close(fid) })
}

/// A static text for an error code.
#[no_mangle]
pub(crate) extern "C" fn kfi_strerror(errnum: c_int) -> *const c_char {
    strerror::text(errnum).as_char_ptr()
}
