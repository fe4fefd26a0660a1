// SPDX-License-Identifier: GPL-2.0

//! Connection events of kfi_sockets on the ULP's event queue.

use kernel::prelude::*;

use crate::kfi::{
    kfi_sys as sys,
    provider::{EqRef, FidRef},
};

const CM_ENTRY: usize = size_of::<sys::kfi_eq_cm_entry>();

/// Posts a connection event (`KFI_CONNREQ`, `KFI_CONNECTED`,
/// `KFI_SHUTDOWN`) about `fid`, with `info` (owned by the reader from now
/// on, or NULL) and the peer's private `data`. Any context.
pub(crate) fn post_cm(
    eq: EqRef,
    event: u32,
    fid: FidRef,
    info: *mut sys::kfi_info,
    data: &[u8],
) -> Result {
    let mut buf = [0u8; CM_ENTRY + sys::KFI_EQ_DATA_MAX as usize];
    if data.len() > sys::KFI_EQ_DATA_MAX as usize {
        return Err(EINVAL);
    }
    let entry = sys::kfi_eq_cm_entry {
        fid: fid.as_ptr(),
        info,
        ..Default::default()
    };
    // SAFETY: `buf` holds at least `CM_ENTRY` bytes; the write is unaligned.
    unsafe {
        buf.as_mut_ptr()
            .cast::<sys::kfi_eq_cm_entry>()
            .write_unaligned(entry)
    };
    buf[CM_ENTRY..CM_ENTRY + data.len()].copy_from_slice(data);
    eq.write(event, &buf[..CM_ENTRY + data.len()])
}

/// Posts an error entry about `fid`: `err` (a negative errno) with the
/// peer's private data (a reject's), if any. Any context.
pub(crate) fn post_err(eq: EqRef, fid: FidRef, err: Error, data: &[u8]) -> Result {
    let e = sys::kfi_eq_err_entry {
        fid: fid.as_ptr(),
        err: -err.to_errno(),
        err_data: data.as_ptr().cast_mut().cast(),
        err_data_size: data.len(),
        ..Default::default()
    };
    eq.write_err(&e)
}
