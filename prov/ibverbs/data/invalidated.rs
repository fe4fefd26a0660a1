// SPDX-License-Identifier: GPL-2.0

//! The remote keys a peer's sends with invalidate named on one
//! connection, kept for the protocol-error worker, which registers their
//! regions again (`Conn::revalidate`).

use super::SLOTS;

/// Distinct keys, oldest first.
///
/// # Invariants
///
/// `n <= SLOTS`; `keys[..n]` are distinct.
pub(super) struct Invalidated {
    keys: [u32; SLOTS],
    n: usize,
}

impl Invalidated {
    /// None yet.
    pub(super) const fn new() -> Self {
        Self {
            keys: [0; SLOTS],
            n: 0,
        }
    }

    /// Notes `key`. Each one comes with a receive slot of the connection,
    /// and a connection that took one posts no slot again, so at most
    /// `SLOTS` come: one more would be dropped (the device invalidated
    /// its key; the ULP registers that region again). Any context.
    pub(super) fn note(&mut self, key: u32) {
        if self.keys.get(..self.n).is_some_and(|ks| ks.contains(&key)) {
            return;
        }
        if let Some(k) = self.keys.get_mut(self.n) {
            *k = key;
            self.n += 1;
        }
    }

    /// Takes the oldest key out.
    pub(super) fn take(&mut self) -> Option<u32> {
        if self.n == 0 {
            return None;
        }
        let key = *self.keys.first()?;
        self.keys.copy_within(1..self.n, 0);
        self.n -= 1;
        Some(key)
    }
}
