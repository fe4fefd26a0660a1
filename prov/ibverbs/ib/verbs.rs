// SPDX-License-Identifier: GPL-2.0

//! Protection domains and completion queues of a device.

use core::ptr::NonNull;
use kernel::prelude::*;

use crate::ib_sys as sys;

/// A protection domain.
///
/// # Invariants
///
/// `ptr` is a live PD owned by this value, of a device that stays
/// registered while it lives (its owner frees it in the device's removal).
pub(crate) struct Pd {
    ptr: NonNull<sys::ib_pd>,
}

// SAFETY: ib_core objects may be used from any thread.
unsafe impl Send for Pd {}
// SAFETY: See `Send`; the PD is not mutated through `&self`.
unsafe impl Sync for Pd {}

impl Pd {
    /// A PD on `dev`. Process context.
    ///
    /// # Safety
    ///
    /// `dev` is registered and the PD is dropped before its removal ends.
    pub(crate) unsafe fn new(dev: *mut sys::ib_device) -> Result<Self> {
        // SAFETY: The caller's contract.
        let pd = unsafe { sys::kfi_ib_alloc_pd(dev) };
        let pd = NonNull::new(kernel::error::from_err_ptr(pd)?).ok_or(ENOMEM)?;
        // INVARIANT: Allocated above.
        Ok(Self { ptr: pd })
    }

    pub(crate) fn as_ptr(&self) -> *mut sys::ib_pd {
        self.ptr.as_ptr()
    }

    /// The key of local memory mapped for DMA (no registration needed).
    pub(crate) fn local_key(&self) -> u32 {
        // SAFETY: A live PD (invariant).
        unsafe { sys::kfi_ib_pd_lkey(self.ptr.as_ptr()) }
    }
}

impl Drop for Pd {
    fn drop(&mut self) {
        // SAFETY: Ours (invariant); its QPs and regions are gone first
        // (they are owned by endpoints and domains that drop before it).
        unsafe { sys::kfi_ib_dealloc_pd(self.ptr.as_ptr()) };
    }
}

/// A completion queue polled in softirq context.
///
/// # Invariants
///
/// `ptr` is a live CQ owned by this value, of a device that stays
/// registered while it lives.
pub(crate) struct Cq {
    ptr: NonNull<sys::ib_cq>,
}

// SAFETY: ib_core objects may be used from any thread.
unsafe impl Send for Cq {}
// SAFETY: See `Send`.
unsafe impl Sync for Cq {}

impl Cq {
    /// A CQ of `entries` on `dev`. Process context.
    ///
    /// # Safety
    ///
    /// `dev` is registered and the CQ is dropped before its removal ends,
    /// after the QPs that complete to it.
    pub(crate) unsafe fn new(dev: *mut sys::ib_device, entries: u32) -> Result<Self> {
        let n = i32::try_from(entries).map_err(|_| EINVAL)?;
        // SAFETY: The caller's contract.
        let cq = unsafe { sys::kfi_ib_alloc_cq(dev, core::ptr::null_mut(), n, 0) };
        let cq = NonNull::new(kernel::error::from_err_ptr(cq)?).ok_or(ENOMEM)?;
        // INVARIANT: Allocated above.
        Ok(Self { ptr: cq })
    }

    pub(crate) fn as_ptr(&self) -> *mut sys::ib_cq {
        self.ptr.as_ptr()
    }
}

impl Drop for Cq {
    fn drop(&mut self) {
        // SAFETY: Ours (invariant); its QPs are destroyed first.
        unsafe { sys::ib_free_cq(self.ptr.as_ptr()) };
    }
}
