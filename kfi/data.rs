// SPDX-License-Identifier: GPL-2.0

//! The exported data path: messages, tagged messages, RMA and atomics.
//!
//! Callable from any context but hard interrupt; nothing here sleeps or
//! allocates. Each call checks what is cheap to check against the
//! endpoint's attributes (set once when it was opened) and makes one
//! indirect call into the provider.

use kernel::prelude::*;

use crate::{
    buffers::{add_len, list_len},
    kfi_sys as sys,
    object::checked,
    slot::errno,
};

/// Flags that need the endpoint's support (`kfid_ep.op_flags`).
const NEEDS_SUPPORT: u64 = sys::KFI_INJECT
    | sys::KFI_REMOTE_CQ_DATA
    | sys::KFI_FENCE
    | sys::KFI_MULTI_RECV
    | sys::KFI_INJECT_COMPLETE
    | sys::KFI_TRANSMIT_COMPLETE
    | sys::KFI_DELIVERY_COMPLETE
    | sys::KFI_COMMIT_COMPLETE;

/// Which limit an operation's local buffers are held to.
#[derive(Clone, Copy)]
enum Dir {
    Tx,
    Rx,
}

/// An open endpoint with capability `cap` that supports `flags`.
///
/// # Safety
///
/// `ep` is NULL or an object header.
unsafe fn ep_for<'a>(ep: *mut sys::kfid_ep, cap: u64, flags: u64) -> Result<&'a sys::kfid_ep> {
    // SAFETY: NULL or an object header (safety requirement).
    unsafe { checked(ep.cast(), sys::KFI_CLASS_EP) }?;
    // SAFETY: An open endpoint.
    let e = unsafe { &*ep };
    if flags & !sys::KFI_OP_FLAGS != 0 {
        return Err(EINVAL);
    }
    if e.caps & cap != cap || flags & NEEDS_SUPPORT & !e.op_flags != 0 {
        return Err(EOPNOTSUPP);
    }
    Ok(e)
}

/// Checks a message's buffer list against the endpoint's limits; returns
/// the buffers' total length.
///
/// # Safety
///
/// `msg` is NULL or valid for reads, with a buffer list as it says.
unsafe fn check_msg(
    e: &sys::kfid_ep,
    msg: *const sys::kfi_msg,
    dir: Dir,
    flags: u64,
) -> Result<usize> {
    if msg.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: Non-NULL, valid (safety requirement).
    let m = unsafe { &*msg };
    let limit = match dir {
        Dir::Tx => e.tx_iov_limit,
        Dir::Rx => e.rx_iov_limit,
    };
    if m.iov_type > sys::KFI_SGL || m.iov_count > limit {
        return Err(EINVAL);
    }
    // SAFETY: All members of the union are pointers; reading one as a
    // pointer is defined whichever was written. The list has `iov_count`
    // entries of its type (safety requirement).
    let len = unsafe { list_len(m.iov_type, m.__bindgen_anon_1.msg_iov.cast(), m.iov_count) }?;
    if flags & sys::KFI_INJECT != 0 && len > e.inject_size {
        return Err(EINVAL);
    }
    if matches!(dir, Dir::Tx) {
        check_size(e, len)?;
    }
    Ok(len)
}

/// `EMSGSIZE` when a transfer of `len` bytes is longer than the endpoint
/// allows.
fn check_size(e: &sys::kfid_ep, len: usize) -> Result {
    if e.max_msg_size != 0 && len > e.max_msg_size {
        return Err(EMSGSIZE);
    }
    Ok(())
}

/// Checks local atomic operand arrays: 1 to `limit` of them, none NULL with
/// elements, element counts whose byte length cannot overflow.
///
/// # Safety
///
/// `iocs` is NULL or has `count` valid entries.
unsafe fn check_iocs(iocs: *const sys::kfi_ioc, count: usize, limit: usize) -> Result {
    if iocs.is_null() || count == 0 || count > limit {
        return Err(EINVAL);
    }
    let mut total = 0usize;
    for i in 0..count {
        // SAFETY: `count` entries (safety requirement).
        let c = unsafe { &*iocs.add(i) };
        // No datatype is larger than 32 bytes (long double complex).
        let bytes = c.count.checked_mul(32).ok_or(EINVAL)?;
        total = add_len(total, c.addr.is_null(), bytes)?;
    }
    Ok(())
}

/// Checks the remote side of an RMA operation.
///
/// # Safety
///
/// `iov` is NULL or has `count` valid entries.
unsafe fn check_rma_iov(e: &sys::kfid_ep, iov: *const sys::kfi_rma_iov, count: usize) -> Result {
    if iov.is_null() || count == 0 || count > e.rma_iov_limit {
        return Err(EINVAL);
    }
    let mut total = 0usize;
    for i in 0..count {
        // SAFETY: `count` entries (safety requirement).
        let r = unsafe { &*iov.add(i) };
        total = add_len(total, false, r.len)?;
    }
    check_size(e, total)
}

macro_rules! msg_call {
    ($(#[$doc:meta])* $name:ident, $table:ident: $tty:ty => $slot:ident, $cap:expr, $dir:expr) => {
        $(#[$doc])*
        ///
        /// # Safety
        ///
        /// The C contract: NULL or valid pointers of the declared types.
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(ep: *mut sys::kfid_ep, msg: *const sys::kfi_msg, flags: u64) -> c_int {
            errno((|| {
                // SAFETY: The C contract.
                let e = unsafe { ep_for(ep, $cap, flags) }?;
                // SAFETY: The C contract.
                unsafe { check_msg(e, msg, $dir, flags) }?;
                let f = slot!(e.$table, $tty, $slot)?;
                // SAFETY: The provider is pinned by the open endpoint.
                kernel::error::to_result(unsafe { f(ep, msg, flags) })
            })())
        }
    };
}

msg_call!(
    /// `kfi_sendmsg`.
    kfi_sendmsg, msg: sys::kfi_ops_msg => sendmsg, sys::KFI_MSG, Dir::Tx
);
msg_call!(
    /// `kfi_recvmsg`.
    kfi_recvmsg, msg: sys::kfi_ops_msg => recvmsg, sys::KFI_MSG, Dir::Rx
);

macro_rules! rma_call {
    ($(#[$doc:meta])* $name:ident => $slot:ident) => {
        $(#[$doc])*
        ///
        /// # Safety
        ///
        /// The C contract: NULL or valid pointers of the declared types.
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(ep: *mut sys::kfid_ep, msg: *const sys::kfi_msg_rma, flags: u64) -> c_int {
            errno((|| {
                // SAFETY: The C contract.
                let e = unsafe { ep_for(ep, sys::KFI_RMA, flags) }?;
                if msg.is_null() {
                    return Err(EINVAL);
                }
                // SAFETY: Non-NULL, valid (C contract); `msg` is its first field.
                unsafe {
                    check_msg(e, &raw const (*msg).msg, Dir::Tx, flags)?;
                    check_rma_iov(e, (*msg).rma_iov, (*msg).rma_iov_count)?;
                }
                let f = slot!(e.rma, sys::kfi_ops_rma, $slot)?;
                // SAFETY: The provider is pinned by the open endpoint.
                kernel::error::to_result(unsafe { f(ep, msg, flags) })
            })())
        }
    };
}

rma_call!(
    /// `kfi_readmsg`.
    kfi_readmsg => readmsg
);
rma_call!(
    /// `kfi_writemsg`.
    kfi_writemsg => writemsg
);

macro_rules! tagged_call {
    ($(#[$doc:meta])* $name:ident => $slot:ident, $dir:expr) => {
        $(#[$doc])*
        ///
        /// # Safety
        ///
        /// The C contract: NULL or valid pointers of the declared types.
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(ep: *mut sys::kfid_ep, msg: *const sys::kfi_msg_tagged, flags: u64) -> c_int {
            errno((|| {
                // SAFETY: The C contract.
                let e = unsafe { ep_for(ep, sys::KFI_TAGGED, flags) }?;
                if msg.is_null() {
                    return Err(EINVAL);
                }
                // SAFETY: Non-NULL, valid (C contract).
                unsafe { check_msg(e, &raw const (*msg).msg, $dir, flags) }?;
                let f = slot!(e.tagged, sys::kfi_ops_tagged, $slot)?;
                // SAFETY: The provider is pinned by the open endpoint.
                kernel::error::to_result(unsafe { f(ep, msg, flags) })
            })())
        }
    };
}

tagged_call!(
    /// `kfi_tsendmsg`.
    kfi_tsendmsg => sendmsg, Dir::Tx
);
tagged_call!(
    /// `kfi_trecvmsg`.
    kfi_trecvmsg => recvmsg, Dir::Rx
);

/// Checks an atomic operation.
///
/// # Safety
///
/// `ep` is NULL or an object header; `msg` NULL or valid for reads.
unsafe fn atomic_ep<'a>(
    ep: *mut sys::kfid_ep,
    msg: *const sys::kfi_msg_atomic,
    flags: u64,
) -> Result<&'a sys::kfid_ep> {
    // SAFETY: The caller's guarantees.
    let e = unsafe { ep_for(ep, sys::KFI_ATOMIC, flags) }?;
    if msg.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: Non-NULL, valid (safety requirement).
    let m = unsafe { &*msg };
    if m.datatype >= sys::KFI_DATATYPE_LAST
        || m.op >= sys::KFI_ATOMIC_OP_LAST
        || m.rma_iov.is_null()
        || m.rma_iov_count == 0
        || m.rma_iov_count > e.rma_iov_limit
    {
        return Err(EINVAL);
    }
    // SAFETY: `iov_count` operand arrays (safety requirement).
    unsafe { check_iocs(m.msg_iov, m.iov_count, e.tx_iov_limit) }?;
    Ok(e)
}

/// `kfi_atomicmsg`.
///
/// # Safety
///
/// The C contract: NULL or valid pointers of the declared types.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_atomicmsg(
    ep: *mut sys::kfid_ep,
    msg: *const sys::kfi_msg_atomic,
    flags: u64,
) -> c_int {
    errno((|| {
        // SAFETY: The C contract.
        let e = unsafe { atomic_ep(ep, msg, flags) }?;
        let f = slot!(e.atomic, sys::kfi_ops_atomic, writemsg)?;
        // SAFETY: The provider is pinned by the open endpoint.
        kernel::error::to_result(unsafe { f(ep, msg, flags) })
    })())
}

/// `kfi_fetch_atomicmsg`.
///
/// # Safety
///
/// The C contract: NULL or valid pointers of the declared types.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_fetch_atomicmsg(
    ep: *mut sys::kfid_ep,
    msg: *const sys::kfi_msg_atomic,
    resultv: *mut sys::kfi_ioc,
    result_desc: *mut *mut c_void,
    result_count: usize,
    flags: u64,
) -> c_int {
    errno((|| {
        // SAFETY: The C contract.
        let e = unsafe { atomic_ep(ep, msg, flags) }?;
        if flags & sys::KFI_INJECT != 0 {
            return Err(EINVAL);
        }
        // SAFETY: `result_count` arrays (C contract).
        unsafe { check_iocs(resultv, result_count, e.tx_iov_limit) }?;
        let f = slot!(e.atomic, sys::kfi_ops_atomic, readwritemsg)?;
        // SAFETY: The provider is pinned by the open endpoint.
        kernel::error::to_result(unsafe { f(ep, msg, resultv, result_desc, result_count, flags) })
    })())
}

/// `kfi_compare_atomicmsg`.
///
/// # Safety
///
/// The C contract: NULL or valid pointers of the declared types.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe extern "C" fn kfi_compare_atomicmsg(
    ep: *mut sys::kfid_ep,
    msg: *const sys::kfi_msg_atomic,
    comparev: *const sys::kfi_ioc,
    compare_desc: *mut *mut c_void,
    compare_count: usize,
    resultv: *mut sys::kfi_ioc,
    result_desc: *mut *mut c_void,
    result_count: usize,
    flags: u64,
) -> c_int {
    errno((|| {
        // SAFETY: The C contract.
        let e = unsafe { atomic_ep(ep, msg, flags) }?;
        // SAFETY: `msg` checked non-NULL by `atomic_ep`.
        let op = unsafe { (*msg).op };
        if op < sys::KFI_CSWAP || flags & sys::KFI_INJECT != 0 {
            return Err(EINVAL);
        }
        // SAFETY: `compare_count` and `result_count` arrays (C contract).
        unsafe {
            check_iocs(comparev, compare_count, e.tx_iov_limit)?;
            check_iocs(resultv, result_count, e.tx_iov_limit)?;
        }
        let f = slot!(e.atomic, sys::kfi_ops_atomic, compwritemsg)?;
        // SAFETY: The provider is pinned by the open endpoint.
        kernel::error::to_result(unsafe {
            f(
                ep,
                msg,
                comparev,
                compare_desc,
                compare_count,
                resultv,
                result_desc,
                result_count,
                flags,
            )
        })
    })())
}

macro_rules! valid_call {
    ($(#[$doc:meta])* $name:ident => $slot:ident) => {
        $(#[$doc])*
        ///
        /// # Safety
        ///
        /// The C contract: NULL or valid pointers of the declared types.
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(ep: *mut sys::kfid_ep, datatype: u32, op: u32, count: *mut usize) -> c_int {
            errno((|| {
                // SAFETY: The C contract.
                let e = unsafe { ep_for(ep, sys::KFI_ATOMIC, 0) }?;
                if count.is_null() || datatype >= sys::KFI_DATATYPE_LAST || op >= sys::KFI_ATOMIC_OP_LAST {
                    return Err(EINVAL);
                }
                let f = slot!(e.atomic, sys::kfi_ops_atomic, $slot)?;
                // SAFETY: The provider is pinned by the open endpoint.
                kernel::error::to_result(unsafe { f(ep, datatype, op, count) })
            })())
        }
    };
}

valid_call!(
    /// `kfi_atomicvalid`.
    kfi_atomicvalid => writevalid
);
valid_call!(
    /// `kfi_fetch_atomicvalid`.
    kfi_fetch_atomicvalid => readwritevalid
);
valid_call!(
    /// `kfi_compare_atomicvalid`.
    kfi_compare_atomicvalid => compwritevalid
);
