// SPDX-License-Identifier: GPL-2.0

//! Waiting with a timeout in milliseconds, interruptibly, on a util
//! queue's condition variable.

use kernel::{
    prelude::*,
    sync::{lock::Backend, lock::Guard, CondVar, CondVarTimeoutResult},
    time::{msecs_to_jiffies, Jiffies},
};

/// The time left to wait: `None` waits forever.
pub(crate) struct Deadline(Option<Jiffies>);

impl Deadline {
    /// A deadline `timeout` ms from now; negative: none.
    pub(crate) fn new(timeout: c_int) -> Self {
        Self(u32::try_from(timeout).ok().map(msecs_to_jiffies))
    }

    /// Sleeps on `cv` until woken, the deadline or a signal.
    ///
    /// Returns `ETIMEDOUT` at the deadline and `EINTR` on a signal.
    pub(crate) fn wait<T: ?Sized, B: Backend>(
        &mut self,
        cv: &CondVar,
        guard: &mut Guard<'_, T, B>,
    ) -> Result {
        match self.0 {
            None => {
                if cv.wait_interruptible(guard) {
                    return Err(EINTR);
                }
                Ok(())
            }
            Some(0) => Err(ETIMEDOUT),
            Some(left) => match cv.wait_interruptible_timeout(guard, left) {
                CondVarTimeoutResult::Timeout => Err(ETIMEDOUT),
                CondVarTimeoutResult::Signal { .. } => Err(EINTR),
                CondVarTimeoutResult::Woken { jiffies } => {
                    self.0 = Some(jiffies);
                    Ok(())
                }
            },
        }
    }
}
