// SPDX-License-Identifier: GPL-2.0

//! Deadlines that move with the bytes that go through a socket
//! (`ksock.rs`, `Socket::set_rx_deadline_paced`): a peer earns time with
//! the bytes it sends or reads, not with a length it claims.

use core::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

/// Bytes received or sent that move a paced deadline once
/// (`Socket::set_rx_deadline_paced`, `Socket::set_tx_deadline_paced`); no
/// single call in that direction takes more while one is set.
pub(crate) const PACE_BYTES: usize = 1 << 20;

/// How a deadline moves with the bytes that go through (see
/// [`PACE_BYTES`]).
///
/// # Invariants
///
/// `ns` is 0 (the deadline is fixed) or what it moves by for every
/// [`PACE_BYTES`]; `done` counts the bytes since it last moved (below
/// [`PACE_BYTES`]). Each direction has one user at a time.
pub(super) struct Pace {
    ns: AtomicI64,
    done: AtomicUsize,
}

impl Pace {
    pub(super) const fn new() -> Self {
        Self {
            ns: AtomicI64::new(0),
            done: AtomicUsize::new(0),
        }
    }

    /// Moves by `step_ms` per [`PACE_BYTES`] from now on (0: fixed).
    pub(super) fn set(&self, step_ms: u64) {
        let ns = i64::try_from(step_ms.saturating_mul(1_000_000)).unwrap_or(i64::MAX);
        self.ns.store(ns, Ordering::Relaxed);
        self.done.store(0, Ordering::Relaxed);
    }

    /// The most bytes one call may take or give: a paced deadline moves
    /// between calls only, so a call waits for at most what moves it once.
    pub(super) fn limit(&self, len: usize) -> usize {
        if self.ns.load(Ordering::Relaxed) != 0 {
            len.min(PACE_BYTES)
        } else {
            len
        }
    }

    /// Counts `n` bytes that went through, moving `deadline` (nanoseconds,
    /// 0: none) for each [`PACE_BYTES`] completed.
    pub(super) fn went(&self, n: usize, deadline: &AtomicI64) {
        let step = self.ns.load(Ordering::Relaxed);
        if step == 0 || n == 0 {
            return;
        }
        let done = self.done.load(Ordering::Relaxed).saturating_add(n);
        self.done.store(done % PACE_BYTES, Ordering::Relaxed);
        let units = i64::try_from(done / PACE_BYTES).unwrap_or(i64::MAX);
        let d = deadline.load(Ordering::Relaxed);
        if units > 0 && d != 0 {
            deadline.store(
                d.saturating_add(step.saturating_mul(units)),
                Ordering::Relaxed,
            );
        }
    }
}
