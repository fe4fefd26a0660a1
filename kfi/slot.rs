// SPDX-License-Identifier: GPL-2.0

//! Reading a function out of a provider's ops table, safely.
//!
//! Every ops table starts with its `size` as the provider was built; a slot
//! beyond it, a NULL table or a NULL slot means "not implemented".

/// The function in slot `$field` of the ops table `$table` (a `*const $T`),
/// or `Err(ENOSYS)`.
///
/// Must be used inside `unsafe` code that knows `$table` is NULL or an ops
/// table of an open object (it lives as long as the provider the object
/// pins).
macro_rules! slot {
    ($table:expr, $T:ty, $field:ident) => {{
        let table: *const $T = $table;
        if table.is_null() {
            Err(ENOSYS)
        } else {
            // SAFETY: Non-NULL; valid while the object is open (macro
            // contract).
            #[allow(unused_unsafe)]
            let t = unsafe { &*table };
            if $crate::object::has_slot(t.size, core::mem::offset_of!($T, $field)) {
                t.$field.ok_or(ENOSYS)
            } else {
                Err(ENOSYS)
            }
        }
    }};
}

/// Turns a `Result` into the C return value: 0 or `-errno`.
pub(crate) fn errno(r: kernel::error::Result) -> kernel::ffi::c_int {
    match r {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// Turns a `Result` with a count into the C return value: the count or
/// `-errno`.
pub(crate) fn count(r: kernel::error::Result<isize>) -> isize {
    match r {
        Ok(n) => n,
        Err(e) => e.to_errno() as isize,
    }
}

/// `KFI_EAVAIL` as an error: an error entry waits at a queue's head.
pub(crate) fn eavail() -> kernel::error::Error {
    kernel::error::Error::from_errno(-(crate::kfi_sys::KFI_EAVAIL as kernel::ffi::c_int))
}
