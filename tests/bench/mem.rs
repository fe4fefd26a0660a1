// SPDX-License-Identifier: GPL-2.0

//! The guest's memory, for what a set of objects costs: slab, free pages,
//! kernel stacks and vmalloc'd pages (`kfi_bench_mem.c` reads them), read
//! once the counters have settled, before and after the objects are made.
//! Process context.

use kernel::time::{delay::fsleep, Delta};

/// One reading, or the difference of two (`kfi_bench_mem.c` fills it);
/// bytes.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct Mem {
    /// Slab caches, reclaimable and not (large kmallocs included).
    pub(crate) slab: i64,
    /// Free pages, the per-CPU page lists included.
    pub(crate) free: i64,
    /// Kernel stacks.
    pub(crate) stack: i64,
    /// vmalloc'd pages (kernel stacks among them).
    pub(crate) vmalloc: i64,
}

extern "C" {
    /// `kfi_bench_mem.c`: fills `m` with the counters now.
    fn kfi_bench_mem_read(m: *mut Mem);
}

/// How long the counters may take to settle, and how often they are read
/// meanwhile.
const SETTLE_MS: u64 = 10_000;
const STEP_MS: u64 = 250;
/// Settled: the free memory moved by at most this much over one step.
const STILL: i64 = 64 << 10;

impl Mem {
    /// The counters now.
    pub(crate) fn now() -> Self {
        let mut m = Self::default();
        // SAFETY: `m` is valid for writes of a `Mem`, the layout the C
        // side fills.
        unsafe { kfi_bench_mem_read(&mut m) };
        m
    }

    /// The counters once they hold still (work items that were just
    /// queued have started, RCU has freed what was waiting for it): read
    /// every `STEP_MS` until the free memory moves by at most `STILL`
    /// over a step, for at most `SETTLE_MS`. With the milliseconds waited.
    pub(crate) fn settled() -> (Self, u64) {
        let mut last = Self::now();
        let mut waited = 0;
        while waited < SETTLE_MS {
            fsleep(Delta::from_millis(STEP_MS as i64));
            waited += STEP_MS;
            let m = Self::now();
            let still = m.free.abs_diff(last.free) <= STILL as u64;
            last = m;
            if still {
                break;
            }
        }
        (last, waited)
    }

    /// What was taken since `before` (positive: memory in use grew).
    pub(crate) fn taken_since(self, before: Self) -> Self {
        Self {
            slab: self.slab.saturating_sub(before.slab),
            free: before.free.saturating_sub(self.free),
            stack: self.stack.saturating_sub(before.stack),
            vmalloc: self.vmalloc.saturating_sub(before.vmalloc),
        }
    }
}
