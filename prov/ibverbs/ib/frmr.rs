// SPDX-License-Identifier: GPL-2.0

//! Fast-registration regions: an MR of a PD over the pages of a ULP's
//! buffers, made valid for peers by an `IB_WR_REG_MR` work request on a
//! QP of the same PD, and invalid again when it is freed.

use core::ptr::NonNull;
use kernel::{bindings, prelude::*, sync::Arc};

use super::verbs::Pd;
use crate::ib_sys as sys;

/// Bytes of a page: the kernel's, as the shim maps regions
/// (`ib_map_mr_sg` with `PAGE_SIZE`) and as `kfi_ib_kaddr_page` finds
/// them.
const PAGE: usize = kernel::page::PAGE_SIZE;

/// Pages that `len` bytes at kernel address `addr` touch.
pub(crate) fn pages_of(addr: usize, len: usize) -> Option<usize> {
    if len == 0 {
        return Some(0);
    }
    let last = addr.checked_add(len - 1)?;
    Some(last / PAGE - addr / PAGE + 1)
}

/// A region being built or registered.
///
/// # Invariants
///
/// `ptr` is a live `kfi_ib_frmr` of `pd`, owned by this value; while
/// `in_flight`, a registration work request of it has not completed.
pub(crate) struct FastReg {
    ptr: NonNull<sys::kfi_ib_frmr>,
    in_flight: bool,
    _pd: Arc<Pd>,
}

// SAFETY: ib_core objects may be used from any thread; the region is only
// changed through `&mut self`.
unsafe impl Send for FastReg {}
// SAFETY: See `Send`; `&self` only reads the key.
unsafe impl Sync for FastReg {}

impl FastReg {
    /// A region of up to `pages` pages on `pd`. Process context.
    pub(crate) fn new(pd: Arc<Pd>, pages: usize) -> Result<Self> {
        let pages = u32::try_from(pages).map_err(|_| E2BIG)?;
        // SAFETY: A live PD, kept alive by the region.
        let p = unsafe { sys::kfi_ib_frmr_alloc(pd.as_ptr(), pages) };
        let ptr = NonNull::new(kernel::error::from_err_ptr(p)?).ok_or(ENOMEM)?;
        // INVARIANT: Allocated above; nothing posted yet.
        Ok(Self {
            ptr,
            in_flight: false,
            _pd: pd,
        })
    }

    /// Appends `len` bytes at `offset` of `page` (contiguous pages when
    /// they run past it). Any context.
    ///
    /// # Safety
    ///
    /// The memory stays valid while the region exists.
    pub(crate) unsafe fn add_page(
        &mut self,
        page: *mut bindings::page,
        offset: usize,
        len: usize,
    ) -> Result {
        let offset = u32::try_from(offset).map_err(|_| EINVAL)?;
        let len = u32::try_from(len).map_err(|_| E2BIG)?;
        // SAFETY: A live region (invariant); the caller's contract.
        kernel::error::to_result(unsafe {
            sys::kfi_ib_frmr_add(self.ptr.as_ptr(), page.cast(), offset, len)
        })
    }

    /// Appends `len` bytes of kernel memory at `addr`, page by page.
    ///
    /// # Safety
    ///
    /// The memory stays valid while the region exists.
    pub(crate) unsafe fn add_kernel(&mut self, addr: usize, len: usize) -> Result {
        let end = addr.checked_add(len).ok_or(EINVAL)?;
        let mut at = addr;
        while at < end {
            let n = (PAGE - at % PAGE).min(end - at);
            // SAFETY: Only looks the address up.
            let page = unsafe { sys::kfi_ib_kaddr_page(at as *const c_void) };
            if page.is_null() {
                return Err(EFAULT);
            }
            // SAFETY: The caller's contract.
            unsafe { self.add_page(page.cast(), at % PAGE, n) }?;
            at += n;
        }
        Ok(())
    }

    /// Maps the pages, with the first byte at remote address `iova`.
    /// `EINVAL` when the buffers leave gaps inside pages. Process context.
    pub(crate) fn map(&mut self, iova: u64) -> Result {
        // SAFETY: A live region (invariant).
        kernel::error::to_result(unsafe { sys::kfi_ib_frmr_map(self.ptr.as_ptr(), iova) })
    }

    /// The key peers use.
    pub(crate) fn rkey(&self) -> u32 {
        // SAFETY: A live region (invariant).
        unsafe { sys::kfi_ib_frmr_rkey(self.ptr.as_ptr()) }
    }

    /// Posts the registration, with access `access` (`IB_ACCESS_*`), on
    /// `qp`. Any context.
    ///
    /// # Safety
    ///
    /// `qp` is a live QP of the region's PD whose teardown drains it (so
    /// the request completes before the QP goes).
    pub(crate) unsafe fn post(&mut self, qp: *mut sys::ib_qp, access: u32) -> Result {
        if self.in_flight {
            return Err(EBUSY);
        }
        let access = i32::try_from(access).map_err(|_| EINVAL)?;
        // SAFETY: A live region (invariant); the caller's contract.
        kernel::error::to_result(unsafe { sys::kfi_ib_frmr_post(self.ptr.as_ptr(), qp, access) })?;
        // INVARIANT: Posted: in flight until `wait` sees it complete.
        self.in_flight = true;
        Ok(())
    }

    /// Waits up to `ms` milliseconds (0: until it completes, which the
    /// QP's flush guarantees) for the posted registration. Process
    /// context.
    pub(crate) fn wait(&mut self, ms: u32) -> Result {
        if !self.in_flight {
            return Err(EINVAL);
        }
        // SAFETY: A live region (invariant).
        let r = unsafe { sys::kfi_ib_frmr_wait(self.ptr.as_ptr(), ms) };
        if r != -(bindings::ETIMEDOUT as i32) {
            // INVARIANT: Completed.
            self.in_flight = false;
        }
        kernel::error::to_result(r)
    }
}

impl Drop for FastReg {
    fn drop(&mut self) {
        if self.in_flight {
            // The QP's teardown flushes the request; freeing the MR
            // before that would leave the device a dangling MR.
            let _ = self.wait(0);
        }
        // SAFETY: Ours (invariant), no request of it in flight.
        unsafe { sys::kfi_ib_frmr_free(self.ptr.as_ptr()) };
    }
}
