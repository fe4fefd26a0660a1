// SPDX-License-Identifier: GPL-2.0

//! What a run costs besides its time: kernel CPU time over all CPUs (and
//! its softirq part), the TCP counters nstat shows (retransmits, delayed
//! ACKs) and the guest's context switches, as the difference of two
//! readings around the run. `kfi_bench_cost.c` reads them. Process
//! context.

/// One reading, or the difference of two (`kfi_bench_cost.c` fills it).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct Cost {
    /// System, softirq and irq time of all CPUs, in nanoseconds.
    pub(crate) sys_ns: u64,
    /// The softirq part of it.
    pub(crate) softirq_ns: u64,
    /// TCP segments retransmitted.
    pub(crate) retrans: u64,
    /// Delayed ACKs sent.
    pub(crate) delacks: u64,
    /// Context switches of all CPUs (`ctxt` of `/proc/stat`).
    pub(crate) ctxt: u64,
    /// 1 if `ctxt` could be read.
    pub(crate) have_ctxt: u64,
}

extern "C" {
    /// `kfi_bench_cost.c`: fills `c` with the counters now.
    fn kfi_bench_cost_read(c: *mut Cost);
}

impl Cost {
    /// The counters now.
    pub(crate) fn now() -> Self {
        let mut c = Self::default();
        // SAFETY: `c` is valid for writes of a `Cost`, the layout the C
        // side fills.
        unsafe { kfi_bench_cost_read(&mut c) };
        c
    }

    /// What happened since `before` (counters only grow; a wrap reads 0).
    pub(crate) fn since(self, before: Self) -> Self {
        Self {
            sys_ns: self.sys_ns.saturating_sub(before.sys_ns),
            softirq_ns: self.softirq_ns.saturating_sub(before.softirq_ns),
            retrans: self.retrans.saturating_sub(before.retrans),
            delacks: self.delacks.saturating_sub(before.delacks),
            ctxt: self.ctxt.saturating_sub(before.ctxt),
            have_ctxt: self.have_ctxt & before.have_ctxt,
        }
    }

    /// The context switches, if both readings had them.
    pub(crate) fn ctxt(&self) -> Option<u64> {
        (self.have_ctxt == 1).then_some(self.ctxt)
    }
}
