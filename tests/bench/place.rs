// SPDX-License-Identifier: GPL-2.0

//! Room and placement for the fan-out run's endpoints
//! (`kfi_bench_place.c`): each open kfi_sockets RDM endpoint keeps two
//! work items running on the system's long-running workqueue, which runs
//! a limited number per CPU, each on the CPU that queued it. [`LongRoom`]
//! raises that limit while it lives; [`Pinned`] keeps the calling task on
//! one CPU at a time while it lives. Process context.

use core::marker::PhantomData;
use kernel::{error::to_result, prelude::*};

extern "C" {
    fn kfi_bench_long_room() -> c_int;
    fn kfi_bench_long_reset();
    fn kfi_bench_move_to(nth: c_uint) -> c_int;
    fn kfi_bench_move_back();
    fn kfi_bench_cpus() -> c_uint;
}

/// Work items one kfi_sockets RDM endpoint keeps running on the
/// long-running queue (its acceptor and its dispatcher).
pub(crate) const LONG_PER_EP: usize = 2;

/// The online CPUs (at least 1).
pub(crate) fn cpus() -> usize {
    // SAFETY: No preconditions.
    (unsafe { kfi_bench_cpus() } as usize).max(1)
}

/// The long-running queue's raised limit, until dropped.
pub(crate) struct LongRoom(usize);

impl LongRoom {
    pub(crate) fn new() -> Self {
        // SAFETY: Process context (the caller's).
        let per_cpu = unsafe { kfi_bench_long_room() };
        Self(usize::try_from(per_cpu).unwrap_or(0))
    }

    /// The work items the queue may run at once on one CPU.
    pub(crate) fn per_cpu(&self) -> usize {
        self.0
    }
}

impl Drop for LongRoom {
    fn drop(&mut self) {
        // SAFETY: Process context (the owner's).
        unsafe { kfi_bench_long_reset() };
    }
}

/// The calling task held on one CPU; back on all when dropped (by the
/// same task: not `Send`).
pub(crate) struct Pinned(PhantomData<*const ()>);

impl Pinned {
    /// Holds the calling task on the online CPU `nth` (modulo their
    /// number).
    pub(crate) fn on(nth: usize) -> Result<Self> {
        let nth = c_uint::try_from(nth % cpus()).map_err(|_| EINVAL)?;
        // SAFETY: Process context (the caller's); moves the caller.
        to_result(unsafe { kfi_bench_move_to(nth) })?;
        Ok(Self(PhantomData))
    }

    /// Moves the task to the online CPU `nth`, still held.
    pub(crate) fn to(&self, nth: usize) -> Result {
        let nth = c_uint::try_from(nth % cpus()).map_err(|_| EINVAL)?;
        // SAFETY: As in `on`.
        to_result(unsafe { kfi_bench_move_to(nth) })
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        // SAFETY: Process context (the owner's, the task it held).
        unsafe { kfi_bench_move_back() };
    }
}
