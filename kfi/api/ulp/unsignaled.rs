// SPDX-License-Identifier: GPL-2.0

//! Posting without `KFI_COMPLETION`, for an endpoint whose CQ is bound
//! with `KFI_SELECTIVE_COMPLETION`: the operation's success is not
//! reported on that CQ (a bound counter still counts it), its failure is.
//! A storage ULP posts the data transfers of a request this way and asks
//! for a completion only on the last one. Any context but hard interrupt.
//!
//! The buffer contract of [`super::post`] holds for each call, and the
//! ULP learns of an unsignaled operation's end only through a counter or
//! a later signaled operation on the same endpoint that completes after
//! it (in posting order, e.g. one with `KFI_FENCE`).

use kernel::prelude::*;

use super::Endpoint;

impl Endpoint<'_> {
    /// Writes `local` to `addr` of the peer's region `key` without asking
    /// for a completion.
    ///
    /// # Safety
    ///
    /// The buffer contract of [`super::post`], for `local`, except that no
    /// completion of this write is ever read when it succeeds: `local` is
    /// the ULP's again once a counter counts the write, or a later
    /// signaled operation of this endpoint that completes after it (in
    /// posting order) completes, or the endpoint is closed.
    pub(crate) unsafe fn write_unsignaled(
        &self,
        local: &[u8],
        addr: u64,
        key: u64,
        ctx: usize,
        flags: u64,
    ) -> Result {
        let local = core::ptr::from_ref(local).cast_mut();
        // SAFETY: The caller's contract.
        unsafe { self.rma(false, local, addr, key, ctx, flags) }
    }
}
