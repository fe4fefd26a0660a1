// SPDX-License-Identifier: GPL-2.0

//! References to kfabric.ko's objects a provider keeps: the queues and
//! counters bound to its endpoints, and object headers for events.

use core::ptr::NonNull;
use kernel::{error::to_result, prelude::*};

use super::super::kfi_sys as sys;

/// A completion queue, event queue or counter bound to an endpoint.
///
/// # Invariants
///
/// The pointer is an open util queue or counter of kfabric.ko; it stays
/// open while the endpoint it is bound to is (kfabric.ko refuses to close
/// a bound object).
#[derive(Clone, Copy)]
pub(crate) enum Bound {
    /// A completion queue, with the bind flags (KFI_TRANSMIT, KFI_RECV, ...).
    Cq(CqRef, u64),
    /// An event queue.
    Eq(EqRef),
    /// A counter, with the bind flags.
    Cntr(CntrRef, u64),
    /// Anything else (an AV, an MR), as its header.
    Other(*mut sys::kfid),
}

/// The header of an open object of this provider, as events name it.
///
/// # Invariants
///
/// Points to the header of an object that is open; providers keep it only
/// in the object's own value (so it lives exactly as long).
#[derive(Clone, Copy)]
pub(crate) struct FidRef(pub(super) NonNull<sys::kfid>);

// SAFETY: Only the address is used (to name the object in events).
unsafe impl Send for FidRef {}
// SAFETY: See `Send`.
unsafe impl Sync for FidRef {}

impl FidRef {
    /// The raw header, for event entries.
    pub(crate) fn as_ptr(&self) -> *mut sys::kfid {
        self.0.as_ptr()
    }
}

/// A util CQ an endpoint reports to.
///
/// # Invariants
///
/// See [`Bound`].
#[derive(Clone, Copy)]
pub(crate) struct CqRef(pub(super) NonNull<sys::kfid_cq>);

// SAFETY: The util CQ is locked internally and may be written from any
// context but hard interrupt.
unsafe impl Send for CqRef {}
// SAFETY: See `Send`.
unsafe impl Sync for CqRef {}

impl CqRef {
    /// Reports a completion. Any context but hard interrupt.
    pub(crate) fn complete(&self, e: &sys::kfi_cq_tagged_entry) -> Result {
        // SAFETY: An open util CQ (type invariant); `e` is valid.
        to_result(unsafe { sys::kfi_util_cq_write(self.0.as_ptr(), e) })
    }

    /// Reports a failed operation. Any context but hard interrupt.
    pub(crate) fn complete_err(&self, e: &sys::kfi_cq_err_entry) -> Result {
        // SAFETY: An open util CQ (type invariant); `e` is valid.
        to_result(unsafe { sys::kfi_util_cq_write_err(self.0.as_ptr(), e) })
    }
}

/// A util EQ an endpoint reports to.
///
/// # Invariants
///
/// See [`Bound`].
#[derive(Clone, Copy)]
pub(crate) struct EqRef(pub(super) NonNull<sys::kfid_eq>);

// SAFETY: The util EQ is locked internally.
unsafe impl Send for EqRef {}
// SAFETY: See `Send`.
unsafe impl Sync for EqRef {}

impl EqRef {
    /// Queues connection event `event` with the bytes `entry` (a
    /// `kfi_eq_cm_entry` and private data); a `KFI_CONNREQ`'s `info`
    /// belongs to the EQ once this succeeds. Any context but hard
    /// interrupt.
    pub(crate) fn write(&self, event: u32, entry: &[u8]) -> Result {
        // SAFETY: An open util EQ (type invariant); `entry` is valid.
        to_result(unsafe {
            sys::kfi_util_eq_write_cm(self.0.as_ptr(), event, entry.as_ptr().cast(), entry.len())
        })
    }

    /// Queues an error entry (its `err_data` is copied).
    pub(crate) fn write_err(&self, e: &sys::kfi_eq_err_entry) -> Result {
        // SAFETY: An open util EQ (type invariant); `e` is valid.
        to_result(unsafe { sys::kfi_util_eq_write_err(self.0.as_ptr(), e) })
    }
}

/// A counter an endpoint counts in.
///
/// # Invariants
///
/// See [`Bound`].
#[derive(Clone, Copy)]
pub(crate) struct CntrRef(pub(super) NonNull<sys::kfid_cntr>);

// SAFETY: Counters are locked internally.
unsafe impl Send for CntrRef {}
// SAFETY: See `Send`.
unsafe impl Sync for CntrRef {}

impl CntrRef {
    /// Counts `n` successes (`err`: errors).
    pub(crate) fn add(&self, n: u64, err: bool) -> Result {
        // SAFETY: An open counter (type invariant).
        to_result(unsafe {
            if err {
                sys::kfi_cntr_adderr(self.0.as_ptr(), n)
            } else {
                sys::kfi_cntr_add(self.0.as_ptr(), n)
            }
        })
    }
}
