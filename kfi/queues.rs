// SPDX-License-Identifier: GPL-2.0

//! The exported calls on completion queues, event queues and counters:
//! checked and passed to the queue's ops table (usually the util
//! implementation of `util_queue.rs`, or a provider's own).

use kernel::prelude::*;

use crate::{
    kfi_sys as sys,
    object::checked,
    slot::{count, errno},
};

/// The ops table of an open object of class `class` (`$T` with `fid`, `ops`).
macro_rules! ops_of {
    ($obj:expr, $class:ident) => {{
        let obj = $obj;
        // SAFETY: NULL or an object header (the C contract of the caller).
        unsafe { checked(obj.cast(), sys::$class) }.map(|_| {
            // SAFETY: An open object of the class.
            unsafe { (*obj).ops }
        })
    }};
}

/// `kfi_cq_read`.
///
/// # Safety
///
/// The C contract: NULL or valid pointers; `buf` holds `count` entries of
/// the CQ's format.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_cq_read(
    cq: *mut sys::kfid_cq,
    buf: *mut c_void,
    n: usize,
) -> isize {
    count((|| {
        if buf.is_null() || n == 0 {
            return Err(EINVAL);
        }
        let f = slot!(ops_of!(cq, KFI_CLASS_CQ)?, sys::kfi_ops_cq, read)?;
        // SAFETY: The provider (or util CQ) is pinned by the open CQ.
        Ok(unsafe { f(cq, buf, n) })
    })())
}

/// `kfi_cq_readerr`.
///
/// # Safety
///
/// The C contract.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_cq_readerr(
    cq: *mut sys::kfid_cq,
    buf: *mut sys::kfi_cq_err_entry,
    flags: u64,
) -> isize {
    count((|| {
        if buf.is_null() {
            return Err(EINVAL);
        }
        let f = slot!(ops_of!(cq, KFI_CLASS_CQ)?, sys::kfi_ops_cq, readerr)?;
        // SAFETY: Pinned by the open CQ.
        Ok(unsafe { f(cq, buf, flags) })
    })())
}

/// `kfi_cq_sread`: process context only (sleeps).
///
/// # Safety
///
/// The C contract.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_cq_sread(
    cq: *mut sys::kfid_cq,
    buf: *mut c_void,
    n: usize,
    cond: *const c_void,
    timeout: c_int,
) -> isize {
    count((|| {
        kernel::task::might_sleep();
        if buf.is_null() || n == 0 {
            return Err(EINVAL);
        }
        let f = slot!(ops_of!(cq, KFI_CLASS_CQ)?, sys::kfi_ops_cq, sread)?;
        // SAFETY: Pinned by the open CQ.
        Ok(unsafe { f(cq, buf, n, cond, timeout) })
    })())
}

/// `kfi_cq_signal`.
///
/// # Safety
///
/// The C contract.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_cq_signal(cq: *mut sys::kfid_cq) -> c_int {
    errno((|| {
        let f = slot!(ops_of!(cq, KFI_CLASS_CQ)?, sys::kfi_ops_cq, signal)?;
        // SAFETY: Pinned by the open CQ.
        kernel::error::to_result(unsafe { f(cq) })
    })())
}

/// `kfi_eq_read`.
///
/// # Safety
///
/// The C contract.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_eq_read(
    eq: *mut sys::kfid_eq,
    event: *mut u32,
    buf: *mut c_void,
    len: usize,
    flags: u64,
) -> isize {
    count((|| {
        if event.is_null() || buf.is_null() {
            return Err(EINVAL);
        }
        let f = slot!(ops_of!(eq, KFI_CLASS_EQ)?, sys::kfi_ops_eq, read)?;
        // SAFETY: Pinned by the open EQ.
        Ok(unsafe { f(eq, event, buf, len, flags) })
    })())
}

/// `kfi_eq_readerr`.
///
/// # Safety
///
/// The C contract.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_eq_readerr(
    eq: *mut sys::kfid_eq,
    buf: *mut sys::kfi_eq_err_entry,
    flags: u64,
) -> isize {
    count((|| {
        if buf.is_null() {
            return Err(EINVAL);
        }
        let f = slot!(ops_of!(eq, KFI_CLASS_EQ)?, sys::kfi_ops_eq, readerr)?;
        // SAFETY: Pinned by the open EQ.
        Ok(unsafe { f(eq, buf, flags) })
    })())
}

/// `kfi_eq_write`.
///
/// # Safety
///
/// The C contract.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_eq_write(
    eq: *mut sys::kfid_eq,
    event: u32,
    buf: *const c_void,
    len: usize,
    flags: u64,
) -> isize {
    count((|| {
        if buf.is_null() && len != 0 {
            return Err(EINVAL);
        }
        let f = slot!(ops_of!(eq, KFI_CLASS_EQ)?, sys::kfi_ops_eq, write)?;
        // SAFETY: Pinned by the open EQ.
        Ok(unsafe { f(eq, event, buf, len, flags) })
    })())
}

/// `kfi_eq_sread`: process context only (sleeps).
///
/// # Safety
///
/// The C contract.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_eq_sread(
    eq: *mut sys::kfid_eq,
    event: *mut u32,
    buf: *mut c_void,
    len: usize,
    timeout: c_int,
    flags: u64,
) -> isize {
    count((|| {
        kernel::task::might_sleep();
        if event.is_null() || buf.is_null() {
            return Err(EINVAL);
        }
        let f = slot!(ops_of!(eq, KFI_CLASS_EQ)?, sys::kfi_ops_eq, sread)?;
        // SAFETY: Pinned by the open EQ.
        Ok(unsafe { f(eq, event, buf, len, timeout, flags) })
    })())
}

macro_rules! cntr_get {
    ($(#[$doc:meta])* $name:ident => $slot:ident) => {
        $(#[$doc])*
        /// Returns 0 for a counter that is not open.
        ///
        /// # Safety
        ///
        /// The C contract.
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(cntr: *mut sys::kfid_cntr) -> u64 {
            match ops_of!(cntr, KFI_CLASS_CNTR).and_then(|t| slot!(t, sys::kfi_ops_cntr, $slot)) {
                // SAFETY: Pinned by the open counter.
                Ok(f) => unsafe { f(cntr) },
                Err(_) => 0,
            }
        }
    };
}

cntr_get!(
    /// `kfi_cntr_read`.
    kfi_cntr_read => read
);
cntr_get!(
    /// `kfi_cntr_readerr`.
    kfi_cntr_readerr => readerr
);

macro_rules! cntr_set {
    ($(#[$doc:meta])* $name:ident => $slot:ident) => {
        $(#[$doc])*
        ///
        /// # Safety
        ///
        /// The C contract.
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(cntr: *mut sys::kfid_cntr, value: u64) -> c_int {
            errno((|| {
                let f = slot!(ops_of!(cntr, KFI_CLASS_CNTR)?, sys::kfi_ops_cntr, $slot)?;
                // SAFETY: Pinned by the open counter.
                kernel::error::to_result(unsafe { f(cntr, value) })
            })())
        }
    };
}

cntr_set!(
    /// `kfi_cntr_add`.
    kfi_cntr_add => add
);
cntr_set!(
    /// `kfi_cntr_set`.
    kfi_cntr_set => set
);
cntr_set!(
    /// `kfi_cntr_adderr`.
    kfi_cntr_adderr => adderr
);
cntr_set!(
    /// `kfi_cntr_seterr`.
    kfi_cntr_seterr => seterr
);

/// `kfi_cntr_wait`: process context only (sleeps).
///
/// # Safety
///
/// The C contract.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_cntr_wait(
    cntr: *mut sys::kfid_cntr,
    threshold: u64,
    timeout: c_int,
) -> c_int {
    errno((|| {
        kernel::task::might_sleep();
        let f = slot!(ops_of!(cntr, KFI_CLASS_CNTR)?, sys::kfi_ops_cntr, wait)?;
        // SAFETY: Pinned by the open counter.
        kernel::error::to_result(unsafe { f(cntr, threshold, timeout) })
    })())
}
