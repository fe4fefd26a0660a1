// SPDX-License-Identifier: GPL-2.0

//! Connection-management events and error entries a provider posts on the
//! event queue bound to an endpoint or passive endpoint ([`EqRef`]).
//!
//! Every method may be called in any context but hard interrupt (the util
//! EQ takes its lock with interrupts disabled and never allocates
//! sleeping), and fails with `ENOSPC` when the EQ is full; the events
//! fail with `EINVAL` when their private data is longer than
//! `KFI_EQ_DATA_MAX`.

use kernel::prelude::*;

use super::super::{
    kfi_sys as sys,
    provider::{EqRef, FidRef, Info},
};

/// Bytes of the fixed part of a connection event.
const CM_ENTRY: usize = size_of::<sys::kfi_eq_cm_entry>();

impl EqRef {
    /// Posts connection event `event` about endpoint `fid`, with `info`
    /// (NULL, or an entry the EQ owns once this succeeds) and the peer's
    /// private `data`.
    fn post_cm(&self, event: u32, fid: FidRef, info: *mut sys::kfi_info, data: &[u8]) -> Result {
        let mut buf = [0u8; CM_ENTRY + sys::KFI_EQ_DATA_MAX as usize];
        let end = CM_ENTRY.checked_add(data.len()).ok_or(EINVAL)?;
        let tail = buf.get_mut(CM_ENTRY..end).ok_or(EINVAL)?;
        tail.copy_from_slice(data);
        let entry = sys::kfi_eq_cm_entry {
            fid: fid.as_ptr(),
            info,
            ..Default::default()
        };
        // SAFETY: `buf` holds at least `CM_ENTRY` bytes; the write is
        // unaligned.
        unsafe {
            buf.as_mut_ptr()
                .cast::<sys::kfi_eq_cm_entry>()
                .write_unaligned(entry)
        };
        self.write(event, &buf[..end])
    }

    /// Posts `KFI_CONNREQ` from passive endpoint `pep`: `info` (whose
    /// `handle` names the request) goes to the ULP with the event, along
    /// with the peer's private `data`. On failure the entry is freed here
    /// and the provider drops the request (its handle is never seen).
    pub(crate) fn post_connreq(&self, pep: FidRef, info: Info, data: &[u8]) -> Result {
        let raw = info.into_raw();
        let r = self.post_cm(sys::KFI_CONNREQ, pep, raw, data);
        if r.is_err() {
            // SAFETY: Not handed to anybody: the event was not queued.
            unsafe { sys::kfi_freeinfo(raw) };
        }
        r
    }

    /// Posts `KFI_CONNECTED` for endpoint `ep`, with the peer's private
    /// `data` (an accept's; empty on the accepting side).
    pub(crate) fn post_connected(&self, ep: FidRef, data: &[u8]) -> Result {
        self.post_cm(sys::KFI_CONNECTED, ep, core::ptr::null_mut(), data)
    }

    /// Posts `KFI_SHUTDOWN` for endpoint `ep`: its connection has ended.
    pub(crate) fn post_shutdown(&self, ep: FidRef) -> Result {
        self.post_cm(sys::KFI_SHUTDOWN, ep, core::ptr::null_mut(), &[])
    }

    /// Posts an error entry about `fid`: `err` with the peer's private
    /// `data`, if any (a reject's: `ECONNREFUSED` with the rejecter's
    /// data). The EQ copies `data`.
    pub(crate) fn post_err(&self, fid: FidRef, err: Error, data: &[u8]) -> Result {
        if data.len() > sys::KFI_EQ_DATA_MAX as usize {
            return Err(EINVAL);
        }
        self.write_err(&sys::kfi_eq_err_entry {
            fid: fid.as_ptr(),
            err: -err.to_errno(),
            err_data: data.as_ptr().cast_mut().cast(),
            err_data_size: data.len(),
            ..Default::default()
        })
    }
}
