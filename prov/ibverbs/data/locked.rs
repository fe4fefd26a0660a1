// SPDX-License-Identifier: GPL-2.0

//! The data path's state, locked, with its CQs' completion handlers held
//! back until it is unlocked (`kfi_util_cq_hold`).
//!
//! Completions are written under the data path's lock, and a ULP's
//! `comp_handler` runs where its completion is written. A handler that
//! posts on the same endpoint again (a receive reposted from its
//! completion, as storage ULPs do) would take the lock its own caller
//! holds: a deadlock with interrupts off. Holding the CQs' handlers for
//! the length of the lock moves those calls to after the unlock, one per
//! CQ for all the completions of the section.

use core::{
    mem::ManuallyDrop,
    ops::{Deref, DerefMut},
};
use kernel::sync::SpinLockIrqGuard;

use super::{DataPath, State};
use crate::kfi::provider::CqRef;

/// [`State`] locked; its CQs' handlers run when it is dropped, after the
/// unlock.
///
/// # Invariants
///
/// `st` is dropped only in [`Drop::drop`], which then releases the holds
/// taken on `held` in [`DataPath::lock`].
pub(super) struct Locked<'a> {
    st: ManuallyDrop<SpinLockIrqGuard<'a, State>>,
    held: [Option<CqRef>; 2],
}

impl DataPath {
    /// Locks the state, holding back the handlers of the CQs bound to it
    /// then. Any context but hard interrupt.
    pub(super) fn lock(&self) -> Locked<'_> {
        let st = self.st.lock();
        let held = [st.tx_cq.cq, st.rx_cq.cq];
        // Only one hold when both sides share a CQ.
        let held = if held[0].is_some() && held[0] == held[1] {
            [held[0], None]
        } else {
            held
        };
        for c in held.iter().flatten() {
            c.hold();
        }
        // INVARIANT: Dropped by `Drop::drop` only, which releases `held`.
        Locked {
            st: ManuallyDrop::new(st),
            held,
        }
    }
}

impl Deref for Locked<'_> {
    type Target = State;

    fn deref(&self) -> &State {
        &self.st
    }
}

impl DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.st
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        // SAFETY: Dropped once, here (type invariant); not used after.
        unsafe { ManuallyDrop::drop(&mut self.st) };
        // Unlocked: a handler called now may post on this endpoint.
        for c in self.held.iter().flatten() {
            c.release();
        }
    }
}
