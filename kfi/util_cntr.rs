// SPDX-License-Identifier: GPL-2.0

//! The util counter: success and error counts that providers bump from any
//! context but hard interrupt and ULPs read or wait on.

use core::{pin::Pin, ptr::NonNull};
use kernel::{
    new_condvar, new_spinlock_irq,
    prelude::*,
    sync::{CondVar, SpinLockIrq},
};

use crate::{kfi_sys as sys, slot::errno, util_wait::Deadline};

#[derive(Default)]
struct Counts {
    ok: u64,
    err: u64,
    /// Threads asleep in `kfi_cntr_wait` (the close is refused meanwhile).
    waiters: u32,
}

/// A util counter; its `kfid_cntr` comes first.
///
/// # Invariants
///
/// `cntr.ops` is `&CNTR_OPS` and `cntr.fid.ops` is `&FID_OPS`.
#[repr(C)]
#[pin_data]
struct UtilCntr {
    cntr: sys::kfid_cntr,
    #[pin]
    counts: SpinLockIrq<Counts>,
    #[pin]
    wait: CondVar,
}

// SAFETY: The raw pointers in `cntr` are static ops tables and the ULP's
// context, which is only handed back; the counts are locked.
unsafe impl Send for UtilCntr {}
// SAFETY: See `Send`.
unsafe impl Sync for UtilCntr {}

static FID_OPS: sys::kfi_ops = sys::kfi_ops {
    size: size_of::<sys::kfi_ops>(),
    close: Some(cntr_close),
    bind: None,
    control: None,
};

static CNTR_OPS: sys::kfi_ops_cntr = sys::kfi_ops_cntr {
    size: size_of::<sys::kfi_ops_cntr>(),
    read: Some(cntr_read),
    readerr: Some(cntr_readerr),
    add: Some(cntr_add),
    set: Some(cntr_set),
    wait: Some(cntr_wait),
    adderr: Some(cntr_adderr),
    seterr: Some(cntr_seterr),
};

/// The util counter behind `cntr`, if it is one.
///
/// # Safety
///
/// `cntr` is NULL or a valid counter header.
unsafe fn util<'a>(cntr: *mut sys::kfid_cntr) -> Result<&'a UtilCntr> {
    let c = NonNull::new(cntr).ok_or(EINVAL)?;
    // SAFETY: A valid counter header (safety requirement).
    if !core::ptr::eq(unsafe { c.as_ref() }.ops, &CNTR_OPS) {
        return Err(EINVAL);
    }
    // SAFETY: Only `UtilCntr`s have `CNTR_OPS` (type invariant); the
    // `kfid_cntr` is their first field.
    Ok(unsafe { &*c.as_ptr().cast::<UtilCntr>() })
}

/// Changes the counts with `f` and wakes the waiters.
///
/// # Safety
///
/// `cntr` is NULL or a valid counter header.
unsafe fn update(cntr: *mut sys::kfid_cntr, f: impl FnOnce(&mut Counts)) -> c_int {
    errno((|| {
        // SAFETY: The caller's guarantee.
        let u = unsafe { util(cntr) }?;
        let mut counts = u.counts.lock();
        f(&mut counts);
        // Under the lock: a thread that reads the new count may close the
        // counter at once, which takes this lock first.
        u.wait.notify_all();
        drop(counts);
        Ok(())
    })())
}

/// The counter's `read` op.
///
/// # Safety
///
/// Called by kfabric.ko with an open object of this type and the
/// arguments of the kfi_* call, checked.
unsafe extern "C" fn cntr_read(cntr: *mut sys::kfid_cntr) -> u64 {
    // SAFETY: kfabric.ko passes an open counter.
    unsafe { util(cntr) }.map_or(0, |u| u.counts.lock().ok)
}

/// The counter's `readerr` op.
///
/// # Safety
///
/// Called by kfabric.ko with an open object of this type and the
/// arguments of the kfi_* call, checked.
unsafe extern "C" fn cntr_readerr(cntr: *mut sys::kfid_cntr) -> u64 {
    // SAFETY: kfabric.ko passes an open counter.
    unsafe { util(cntr) }.map_or(0, |u| u.counts.lock().err)
}

/// The counter's `add` op.
///
/// # Safety
///
/// Called by kfabric.ko with an open object of this type and the
/// arguments of the kfi_* call, checked.
unsafe extern "C" fn cntr_add(cntr: *mut sys::kfid_cntr, v: u64) -> c_int {
    // SAFETY: kfabric.ko passes an open counter.
    unsafe { update(cntr, |c| c.ok = c.ok.wrapping_add(v)) }
}

/// The counter's `set` op.
///
/// # Safety
///
/// Called by kfabric.ko with an open object of this type and the
/// arguments of the kfi_* call, checked.
unsafe extern "C" fn cntr_set(cntr: *mut sys::kfid_cntr, v: u64) -> c_int {
    // SAFETY: kfabric.ko passes an open counter.
    unsafe { update(cntr, |c| c.ok = v) }
}

/// The counter's `adderr` op.
///
/// # Safety
///
/// Called by kfabric.ko with an open object of this type and the
/// arguments of the kfi_* call, checked.
unsafe extern "C" fn cntr_adderr(cntr: *mut sys::kfid_cntr, v: u64) -> c_int {
    // SAFETY: kfabric.ko passes an open counter.
    unsafe { update(cntr, |c| c.err = c.err.wrapping_add(v)) }
}

/// The counter's `seterr` op.
///
/// # Safety
///
/// Called by kfabric.ko with an open object of this type and the
/// arguments of the kfi_* call, checked.
unsafe extern "C" fn cntr_seterr(cntr: *mut sys::kfid_cntr, v: u64) -> c_int {
    // SAFETY: kfabric.ko passes an open counter.
    unsafe { update(cntr, |c| c.err = v) }
}

/// The counter's `wait` op.
///
/// # Safety
///
/// Called by kfabric.ko with an open object of this type and the
/// arguments of the kfi_* call, checked.
unsafe extern "C" fn cntr_wait(cntr: *mut sys::kfid_cntr, threshold: u64, timeout: c_int) -> c_int {
    errno((|| {
        // SAFETY: kfabric.ko passes an open counter.
        let u = unsafe { util(cntr) }?;
        let mut deadline = Deadline::new(timeout);
        let mut counts = u.counts.lock();
        let errors = counts.err;
        loop {
            if counts.ok >= threshold {
                return Ok(());
            }
            if counts.err != errors {
                return Err(EIO);
            }
            counts.waiters += 1;
            let woken = deadline.wait(&u.wait, &mut counts);
            counts.waiters -= 1;
            woken?;
        }
    })())
}

/// The counter's `close` op.
///
/// # Safety
///
/// Called by kfabric.ko with an open object of this type and the
/// arguments of the kfi_* call, checked.
unsafe extern "C" fn cntr_close(fid: *mut sys::kfid) -> c_int {
    // SAFETY: kfabric.ko closes an open util counter once.
    match unsafe { util(fid.cast()) } {
        Ok(u) => {
            // A thread asleep in `kfi_cntr_wait` would wake in freed memory
            // (a caller's bug, refused).
            if u.counts.lock().waiters > 0 {
                return EBUSY.to_errno();
            }
            let p: *const UtilCntr = u;
            // SAFETY: Made by `KBox::pin_init` in `kfi_util_cntr_open`;
            // unused from now on.
            drop(unsafe { Pin::new_unchecked(KBox::from_raw(p.cast_mut())) });
            0
        }
        Err(e) => e.to_errno(),
    }
}

/// `kfi_util_cntr_open`: a util counter for a provider's `cntr_open`.
///
/// # Safety
///
/// The C contract: NULL or valid pointers.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_util_cntr_open(
    _domain: *mut sys::kfid_domain,
    attr: *mut sys::kfi_cntr_attr,
    cntr: *mut *mut sys::kfid_cntr,
    context: *mut c_void,
) -> c_int {
    errno((|| {
        kernel::task::might_sleep();
        // SAFETY: NULL or valid for reads (C contract).
        if attr.is_null() || cntr.is_null() || unsafe { (*attr).flags } != 0 {
            return Err(EINVAL);
        }
        let u = KBox::pin_init(
            // INVARIANT: the ops tables are the util counter's.
            try_pin_init!(UtilCntr {
                cntr: sys::kfid_cntr {
                    fid: sys::kfid {
                        fclass: sys::KFI_CLASS_CNTR,
                        context,
                        ops: &FID_OPS,
                        core: core::ptr::null_mut(),
                    },
                    ops: &CNTR_OPS,
                },
                counts <- new_spinlock_irq!(Counts::default()),
                wait <- new_condvar!(),
            }),
            GFP_KERNEL,
        )?;
        // SAFETY: The box is never moved out of; `cntr_close` rebuilds it.
        let raw = KBox::into_raw(unsafe { Pin::into_inner_unchecked(u) });
        // SAFETY: `cntr` is valid for writes (C contract).
        unsafe { *cntr = raw.cast() };
        Ok(())
    })())
}
