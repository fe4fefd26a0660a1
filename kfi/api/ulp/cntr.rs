// SPDX-License-Identifier: GPL-2.0

//! Counters: a count of successes and one of errors that a provider bumps
//! as the operations bound to it complete, whether or not their CQ
//! reports them (the way a storage ULP learns that a batch of unsignaled
//! writes is done, or that a peer's writes into its regions landed).

use kernel::{error::to_result, prelude::*};

use super::{
    super::{kfabric::Owned, kfi_sys as sys},
    objects::{Borrow, Domain, Endpoint},
};

/// An open counter of a domain.
pub(crate) struct Cntr<'d> {
    obj: Owned<sys::kfid_cntr>,
    _domain: Borrow<'d, ()>,
}

impl Domain<'_> {
    /// A counter at 0 successes and 0 errors. Process context.
    pub(crate) fn cntr<'d>(&'d self) -> Result<Cntr<'d>> {
        let mut a = sys::kfi_cntr_attr::default();
        // SAFETY: An open domain; valid attributes, read during the call.
        let obj = Owned::open(|o| unsafe {
            sys::kfi_cntr_open(self.obj.as_ptr(), &mut a, o, core::ptr::null_mut())
        })?;
        Ok(Cntr {
            obj,
            _domain: Borrow::new(),
        })
    }
}

impl Cntr<'_> {
    /// Successes so far. Any context but hard interrupt.
    pub(crate) fn read(&self) -> u64 {
        // SAFETY: An open counter.
        unsafe { sys::kfi_cntr_read(self.obj.as_ptr()) }
    }

    /// Errors so far. Any context but hard interrupt.
    pub(crate) fn errors(&self) -> u64 {
        // SAFETY: An open counter.
        unsafe { sys::kfi_cntr_readerr(self.obj.as_ptr()) }
    }

    /// Waits up to `timeout_ms` (negative: forever) until `threshold`
    /// successes are counted; `ETIMEDOUT`, or `EIO` once an error is
    /// counted while waiting. Process context.
    pub(crate) fn wait(&self, threshold: u64, timeout_ms: i32) -> Result {
        // SAFETY: An open counter.
        to_result(unsafe { sys::kfi_cntr_wait(self.obj.as_ptr(), threshold, timeout_ms) })
    }
}

impl<'a> Endpoint<'a> {
    /// Binds `cntr` to count the completions of the kinds in `flags`:
    /// `KFI_SEND`, `KFI_RECV`, `KFI_READ`, `KFI_WRITE` (our operations),
    /// `KFI_REMOTE_READ`, `KFI_REMOTE_WRITE` (a peer's accesses to our
    /// regions). Process context.
    pub(crate) fn bind_cntr(&self, cntr: &'a Cntr<'_>, flags: u64) -> Result {
        // SAFETY: Open objects; `cntr` outlives the endpoint (`'a`).
        to_result(unsafe { sys::kfi_ep_bind(self.obj.as_ptr(), cntr.obj.fid(), flags) })
    }
}
