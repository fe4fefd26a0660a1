// SPDX-License-Identifier: GPL-2.0

//! Deadlines of kfi_sockets' socket waits (`ksock.rs`, which re-exports
//! [`Deadline`]): points on the monotonic clock.

use kernel::bindings;

/// A point in time after which a socket's waits fail with `ETIMEDOUT`:
/// one bound for a whole exchange (a handshake, a frame), however its
/// bytes trickle in, where the socket's own timeouts bound each call.
#[derive(Clone, Copy)]
pub(crate) struct Deadline(pub(super) i64);

/// Monotonic nanoseconds (`ktime_get()`).
fn now_ns() -> i64 {
    // SAFETY: `ktime_get` has no preconditions and works in any context.
    unsafe { bindings::ktime_get() }
}

impl Deadline {
    /// `ms` milliseconds from now.
    pub(crate) fn after_ms(ms: u64) -> Self {
        Self::after_ms_from(Self(now_ns()), ms)
    }

    /// `ms` milliseconds after `start` (`start` itself as a point).
    pub(crate) fn after_ms_from(start: Self, ms: u64) -> Self {
        let ns = i64::try_from(ms.saturating_mul(1_000_000)).unwrap_or(i64::MAX);
        Self(start.0.saturating_add(ns).max(1))
    }

    /// Now, as a starting point for [`Self::after_ms_from`].
    pub(crate) fn now() -> Self {
        Self(now_ns())
    }

    /// The milliseconds left (at least 1), or `None` once it has passed.
    pub(crate) fn left_ms(self) -> Option<u32> {
        self.left_us()
            .map(|us| u32::try_from(us / 1000 + 1).unwrap_or(u32::MAX))
    }

    /// Whichever of `self` and `other` comes first.
    pub(crate) fn earlier(self, other: Self) -> Self {
        Self(self.0.min(other.0))
    }

    /// The microseconds left (at least 1), or `None` once it has passed.
    pub(super) fn left_us(self) -> Option<i64> {
        let left = self.0.saturating_sub(now_ns());
        (left > 0).then(|| (left / 1000).saturating_add(1))
    }
}
