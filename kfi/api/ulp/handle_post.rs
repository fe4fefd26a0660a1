// SPDX-License-Identifier: GPL-2.0

//! Posting the C ABI's message forms on an [`Owned`] endpoint: messages,
//! tagged messages, RMA and atomics, each taking the C descriptor as built
//! by the caller (any buffer type: kvec, bio_vec, scatterlist). Any context but
//! hard interrupt.
//!
//! Every call is `unsafe` under the buffer contract of `post.rs`, and
//! moreover: the descriptor and the lists it points to are valid for the
//! call, and every buffer they name is valid memory for its length.

use kernel::{error::to_result, prelude::*};

use super::super::{kfabric::Owned, kfi_sys as sys};

impl Owned<sys::kfid_ep> {
    /// `kfi_sendmsg(m, flags)`.
    ///
    /// # Safety
    ///
    /// The contract of this module, for the buffers of `m`.
    pub(crate) unsafe fn sendmsg(&self, m: &sys::kfi_msg, flags: u64) -> Result {
        // SAFETY: An open endpoint; `m` and its buffers as required.
        to_result(unsafe { sys::kfi_sendmsg(self.as_ptr(), m, flags) })
    }

    /// `kfi_recvmsg(m, flags)`.
    ///
    /// # Safety
    ///
    /// The contract of this module, for the buffers of `m`.
    pub(crate) unsafe fn recvmsg(&self, m: &sys::kfi_msg, flags: u64) -> Result {
        // SAFETY: An open endpoint; `m` and its buffers as required.
        to_result(unsafe { sys::kfi_recvmsg(self.as_ptr(), m, flags) })
    }

    /// `kfi_tsendmsg(m, flags)`.
    ///
    /// # Safety
    ///
    /// The contract of this module, for the buffers of `m`.
    pub(crate) unsafe fn tsendmsg(&self, m: &sys::kfi_msg_tagged, flags: u64) -> Result {
        // SAFETY: An open endpoint; `m` and its buffers as required.
        to_result(unsafe { sys::kfi_tsendmsg(self.as_ptr(), m, flags) })
    }

    /// `kfi_trecvmsg(m, flags)`.
    ///
    /// # Safety
    ///
    /// The contract of this module, for the buffers of `m`.
    pub(crate) unsafe fn trecvmsg(&self, m: &sys::kfi_msg_tagged, flags: u64) -> Result {
        // SAFETY: An open endpoint; `m` and its buffers as required.
        to_result(unsafe { sys::kfi_trecvmsg(self.as_ptr(), m, flags) })
    }

    /// `kfi_writemsg(m, flags)`: an RMA write of the local buffers of `m`.
    ///
    /// # Safety
    ///
    /// The contract of this module, for the buffers of `m`.
    pub(crate) unsafe fn writemsg(&self, m: &sys::kfi_msg_rma, flags: u64) -> Result {
        // SAFETY: An open endpoint; `m` and its buffers as required.
        to_result(unsafe { sys::kfi_writemsg(self.as_ptr(), m, flags) })
    }

    /// `kfi_readmsg(m, flags)`: an RMA read into the local buffers of `m`.
    ///
    /// # Safety
    ///
    /// The contract of this module, for the buffers of `m`.
    pub(crate) unsafe fn readmsg(&self, m: &sys::kfi_msg_rma, flags: u64) -> Result {
        // SAFETY: An open endpoint; `m` and its buffers as required.
        to_result(unsafe { sys::kfi_readmsg(self.as_ptr(), m, flags) })
    }

    /// `kfi_atomicmsg(m, flags)`: applies the operands of `m` to the
    /// peer's region.
    ///
    /// # Safety
    ///
    /// The contract of this module, for the operands of `m`.
    pub(crate) unsafe fn atomicmsg(&self, m: &sys::kfi_msg_atomic, flags: u64) -> Result {
        // SAFETY: An open endpoint; `m` and its buffers as required.
        to_result(unsafe { sys::kfi_atomicmsg(self.as_ptr(), m, flags) })
    }

    /// `kfi_fetch_atomicmsg(m, result, flags)`: as [`Self::atomicmsg`],
    /// the old values written to `result`.
    ///
    /// # Safety
    ///
    /// The contract of this module, for the operands of `m` and `result`.
    pub(crate) unsafe fn fetch_atomicmsg(
        &self,
        m: &sys::kfi_msg_atomic,
        result: &mut sys::kfi_ioc,
        flags: u64,
    ) -> Result {
        // SAFETY: An open endpoint; `m`, `result` and their buffers as
        // required.
        to_result(unsafe {
            sys::kfi_fetch_atomicmsg(self.as_ptr(), m, result, core::ptr::null_mut(), 1, flags)
        })
    }

    /// `kfi_compare_atomicmsg(m, compare, result, flags)`: a
    /// compare-and-swap (`KFI_CSWAP` in `m`) against `compare`, the old
    /// values written to `result`.
    ///
    /// # Safety
    ///
    /// The contract of this module, for the operands of `m`, `compare` and
    /// `result`.
    pub(crate) unsafe fn compare_atomicmsg(
        &self,
        m: &sys::kfi_msg_atomic,
        compare: &sys::kfi_ioc,
        result: &mut sys::kfi_ioc,
        flags: u64,
    ) -> Result {
        let none = core::ptr::null_mut();
        // SAFETY: As for `fetch_atomicmsg`, and for `compare`.
        to_result(unsafe {
            sys::kfi_compare_atomicmsg(self.as_ptr(), m, compare, none, 1, result, none, 1, flags)
        })
    }
}
