// SPDX-License-Identifier: GPL-2.0

//! Where a util queue's notice of a lost entry stands among its entries.
//!
//! A full CQ or EQ refuses a provider's entry and later tells the ULP with
//! an `EOVERFLOW` error entry. That notice takes the place the lost entry
//! would have had: the entries queued before the loss are read first, then
//! the notice, then those queued after it. One notice stands for every
//! loss until it is read.

/// The notice's place, kept under the queue's lock with its entries.
#[derive(Default)]
pub(crate) struct Overflow {
    /// Entries still to be read before the notice; `None`: no notice.
    ahead: Option<usize>,
}

impl Overflow {
    /// An entry was refused while the queue held `queued` entries.
    pub(crate) fn lost(&mut self, queued: usize) {
        if self.ahead.is_none() {
            self.ahead = Some(queued);
        }
    }

    /// Entries still to be read before the notice, if there is one.
    pub(crate) fn ahead(&self) -> Option<usize> {
        self.ahead
    }

    /// `n` of the entries ahead of the notice were taken out unread.
    pub(crate) fn dropped(&mut self, n: usize) {
        if let Some(a) = &mut self.ahead {
            *a = a.saturating_sub(n);
        }
    }

    /// Whether the notice is the next thing to read.
    pub(crate) fn due(&self) -> bool {
        self.ahead == Some(0)
    }

    /// The entry at the front of the queue was taken.
    pub(crate) fn popped(&mut self) {
        if let Some(n) = &mut self.ahead {
            *n = n.saturating_sub(1);
        }
    }

    /// The notice was read.
    pub(crate) fn taken(&mut self) {
        self.ahead = None;
    }
}
