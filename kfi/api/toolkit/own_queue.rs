// SPDX-License-Identifier: GPL-2.0

//! A workqueue of the provider's own, made at module load and destroyed at
//! unload. A work item still runs module code after it has told its
//! owner's close it is done (it drops its reference, which may free the
//! owner): on a system queue that could run after the module's text is
//! gone. Destroying the provider's own queue at unload drains it, so no
//! work item outlives the module.
//!
//! The slot is a `static` of the including crate (each module compiles its
//! own copy of `kfi/api`); until the queue is made, and after it is
//! destroyed, [`QueueSlot::get`] hands out a system queue instead, which
//! only matters if something queues while no object of the provider can
//! exist.

use core::{
    ffi::c_uint,
    ptr::null_mut,
    sync::atomic::{AtomicPtr, Ordering},
};
use kernel::{bindings, prelude::*, workqueue::Queue};

/// Where a module keeps one of its own workqueues.
///
/// # Invariants
///
/// `wq` is null or a queue made by [`Self::make`] and not yet destroyed.
pub(crate) struct QueueSlot {
    wq: AtomicPtr<bindings::workqueue_struct>,
}

impl QueueSlot {
    /// An empty slot, for a `static`.
    pub(crate) const fn new() -> Self {
        Self {
            wq: AtomicPtr::new(null_mut()),
        }
    }

    /// Makes the queue, named `name`, with the workqueue flags `flags`
    /// (`bindings::wq_flags_WQ_*`; one of `WQ_UNBOUND` and `WQ_PERCPU`, or
    /// the kernel warns) and the default concurrency. `EBUSY` if the slot
    /// has one already. Process context, at module load.
    pub(crate) fn make(&self, name: &'static CStr, flags: c_uint) -> Result {
        // SAFETY: A constant format with one `%s`, given a NUL-terminated
        // string that lives for ever; process context.
        let wq = unsafe {
            bindings::alloc_workqueue_noprof(c"%s".as_char_ptr(), flags, 0, name.as_char_ptr())
        };
        if wq.is_null() {
            return Err(ENOMEM);
        }
        // INVARIANT: the slot takes a queue made just above, or none.
        let taken = self
            .wq
            .compare_exchange(null_mut(), wq, Ordering::AcqRel, Ordering::Acquire);
        if taken.is_err() {
            // SAFETY: Just made and never shared: this is its only user.
            unsafe { bindings::destroy_workqueue(wq) };
            return Err(EBUSY);
        }
        Ok(())
    }

    /// Destroys the queue, after its work items have run: call it at
    /// unload, once no object of the module that could queue work is
    /// left. Process context; may sleep (it waits for running work).
    pub(crate) fn destroy(&self) {
        let wq = self.wq.swap(null_mut(), Ordering::AcqRel);
        if !wq.is_null() {
            // SAFETY: Made by `make` (type invariant) and taken out of the
            // slot just now, so destroyed once; nothing queues on it any
            // more (the caller's promise).
            unsafe { bindings::destroy_workqueue(wq) };
        }
    }

    /// The queue, or `fallback()` while there is none. Any context.
    pub(crate) fn get(&self, fallback: fn() -> &'static Queue) -> &'static Queue {
        let wq = self.wq.load(Ordering::Acquire);
        if wq.is_null() {
            return fallback();
        }
        // SAFETY: Live until `destroy`, which the module calls only after
        // the last object that could queue on it is gone (type invariant
        // and `destroy`'s rule).
        unsafe { Queue::from_raw(wq) }
    }
}
