// SPDX-License-Identifier: GPL-2.0

//! References to kfabric.ko's objects a provider keeps: the queues,
//! counters and address vectors bound to its endpoints, and object headers
//! for events.

use core::ptr::NonNull;
use kernel::{error::to_result, prelude::*};

use super::super::kfi_sys as sys;

/// A completion queue, event queue, counter or address vector bound to an
/// endpoint.
///
/// # Invariants
///
/// The pointer is an open util queue or counter of kfabric.ko, or an open
/// AV of the endpoint's domain; it stays open while the endpoint it is
/// bound to is (kfabric.ko refuses to close a bound object).
#[derive(Clone, Copy)]
pub(crate) enum Bound {
    /// A completion queue, with the bind flags (KFI_TRANSMIT, KFI_RECV, ...).
    Cq(CqRef, u64),
    /// An event queue.
    Eq(EqRef),
    /// A counter, with the bind flags.
    Cntr(CntrRef, u64),
    /// An address vector (RDM endpoints resolve `kfi_addr_t` in it).
    Av(AvRef),
    /// Anything else (an MR, ...), as its header.
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
#[derive(Clone, Copy, PartialEq, Eq)]
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

    /// A completion follows at once (a small operation being placed now):
    /// wakes the CQ's waiters so that their wakeup overlaps the placement.
    /// Any context but hard interrupt.
    pub(crate) fn wake_early(&self) {
        // SAFETY: An open util CQ (type invariant).
        unsafe { sys::kfi_util_cq_expect(self.0.as_ptr()) }
    }

    /// Holds back the CQ's completion handler until [`Self::release`]
    /// (see `kfi_util_cq_hold`). Any context but hard interrupt.
    pub(crate) fn hold(&self) {
        // SAFETY: An open util CQ (type invariant).
        unsafe { sys::kfi_util_cq_hold(self.0.as_ptr()) }
    }

    /// Ends a [`Self::hold`]: the handler runs now if a completion came
    /// meanwhile. Any context but hard interrupt, with no lock held that
    /// the handler's calls into the provider may take.
    pub(crate) fn release(&self) {
        // SAFETY: An open util CQ (type invariant), held by the caller.
        unsafe { sys::kfi_util_cq_release(self.0.as_ptr()) }
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

/// An address vector an endpoint resolves its peers' `kfi_addr_t` in.
///
/// # Invariants
///
/// See [`Bound`].
#[derive(Clone, Copy)]
pub(crate) struct AvRef(pub(super) NonNull<sys::kfid_av>);

// SAFETY: AVs are locked internally; lookups on kfabric.ko's util AV may
// run in any context but hard interrupt.
unsafe impl Send for AvRef {}
// SAFETY: See `Send`.
unsafe impl Sync for AvRef {}

impl AvRef {
    /// Copies the address behind `fi_addr` into `out` (as much as fits)
    /// and returns its full length: a longer one did not fit. `ENOENT`
    /// (or the AV's error) for an address not in the AV. Any context but
    /// hard interrupt for kfabric.ko's util AV (`kfi_util_av_open`); a
    /// provider's own AV says what it allows.
    pub(crate) fn lookup(&self, fi_addr: u64, out: &mut [u8]) -> Result<usize> {
        let mut len = out.len();
        // SAFETY: An open AV (type invariant); `out` holds `len` bytes.
        to_result(unsafe {
            sys::kfi_av_lookup(self.0.as_ptr(), fi_addr, out.as_mut_ptr().cast(), &mut len)
        })?;
        Ok(len)
    }
}
