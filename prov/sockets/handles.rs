// SPDX-License-Identifier: GPL-2.0

//! Connection requests waiting for the ULP's accept or reject.
//!
//! A `KFI_CONNREQ` event's `info->handle` names one; `kfi_endpoint` with
//! that info takes its socket, `kfi_reject` answers it. Handles are checked
//! against this table, so a stale or made-up handle is an error, never a
//! wild pointer.

use kernel::{prelude::*, sync::Arc};

use crate::{kfi::kfi_sys as sys, ksock::Socket};

/// A waiting request: a `kfid` only to give it an address.
struct Pending {
    _fid: sys::kfid,
    sock: Arc<Socket>,
    /// The passive endpoint that received it (for its close).
    owner: usize,
}

// SAFETY: The `kfid` is never used as an object (only its address is), and
// the socket is shared through an `Arc`.
unsafe impl Send for Pending {}

kernel::sync::global_lock! {
    // SAFETY: Initialized in the module initializer before first use.
    unsafe(uninit) static TABLE: Mutex<KVec<KBox<Pending>>> = KVec::new();
}

/// Sets up the table.
///
/// # Safety
///
/// Called once, in the module initializer, before anything else here.
pub(crate) unsafe fn init() {
    // SAFETY: Once, before use.
    unsafe { TABLE.init() };
}

/// Files `sock` from passive endpoint `owner`; returns its handle.
pub(crate) fn insert(sock: Arc<Socket>, owner: usize) -> Result<*mut sys::kfid> {
    let mut p = KBox::new(
        Pending {
            _fid: sys::kfid::default(),
            sock,
            owner,
        },
        GFP_KERNEL,
    )?;
    let h: *mut sys::kfid = &raw mut p._fid;
    TABLE.lock().push(p, GFP_KERNEL)?;
    Ok(h)
}

/// Takes the socket of `handle` out of the table.
pub(crate) fn take(handle: *mut sys::kfid) -> Result<Arc<Socket>> {
    let mut t = TABLE.lock();
    let i = t
        .iter()
        .position(|p| core::ptr::eq(&p._fid, handle))
        .ok_or(EINVAL)?;
    let p = t.remove(i).map_err(|_| EINVAL)?;
    Ok(p.sock.clone())
}

/// Drops every request of passive endpoint `owner` (at its close).
pub(crate) fn drop_owned_by(owner: usize) {
    let mut t = TABLE.lock();
    let mut i = 0;
    while i < t.len() {
        if t[i].owner == owner {
            if let Ok(p) = t.remove(i) {
                p.sock.shutdown();
            }
        } else {
            i += 1;
        }
    }
}

/// Drops every request and the table's memory (at module unload: a static
/// is never dropped).
pub(crate) fn release() {
    let old = core::mem::take(&mut *TABLE.lock());
    for p in old.iter() {
        p.sock.shutdown();
    }
}
