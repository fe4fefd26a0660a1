// SPDX-License-Identifier: GPL-2.0

//! The util address vector: a table of socket addresses (`sockaddr_in`,
//! `sockaddr_in6`; each address's family says which) for providers whose
//! domains use the `KFI_SOCKADDR*` formats. `kfi_addr_t` values are table
//! indexes in insert order, whatever the requested type. Insert and remove
//! in process context; lookup from any context but hard interrupt.

use core::{pin::Pin, ptr::NonNull};
use kernel::{
    bindings, new_mutex, new_spinlock_irq,
    prelude::*,
    sync::{Mutex, SpinLockIrq},
};

use crate::{kfi_sys as sys, slot::errno};

/// Room for the largest supported address.
const ADDR_MAX: usize = size_of::<bindings::sockaddr_in6>();

/// Most addresses an AV ever takes (indices are not reused, so removed
/// ones count): what its table holds in 3 MiB.
const AV_MAX: usize = 1 << 16;

/// One stored address.
#[derive(Clone, Copy)]
struct Addr {
    bytes: [u8; ADDR_MAX],
    len: usize,
}

/// A util address vector; its `kfid_av` comes first.
///
/// # Invariants
///
/// `av.ops` is `&AV_OPS` and `av.fid.ops` is `&FID_OPS`.
#[repr(C)]
#[pin_data]
struct UtilAv {
    av: sys::kfid_av,
    /// `None` for removed addresses (their index is not reused).
    #[pin]
    table: SpinLockIrq<KVVec<Option<Addr>>>,
    /// Serializes inserts, which grow the table outside its spinlock.
    #[pin]
    writer: Mutex<()>,
}

// SAFETY: The raw pointers in `av` are static ops tables and the ULP's
// context, which is only handed back; the table is locked.
unsafe impl Send for UtilAv {}
// SAFETY: See `Send`.
unsafe impl Sync for UtilAv {}

static FID_OPS: sys::kfi_ops = sys::kfi_ops {
    size: size_of::<sys::kfi_ops>(),
    close: Some(av_close),
    bind: None,
    control: None,
};

static AV_OPS: sys::kfi_ops_av = sys::kfi_ops_av {
    size: size_of::<sys::kfi_ops_av>(),
    insert: Some(av_insert),
    insertsvc: None,
    remove: Some(av_remove),
    lookup: Some(av_lookup),
};

/// The util AV behind `av`, if it is one.
///
/// # Safety
///
/// `av` is NULL or a valid AV header.
unsafe fn util<'a>(av: *mut sys::kfid_av) -> Result<&'a UtilAv> {
    let a = NonNull::new(av).ok_or(EINVAL)?;
    // SAFETY: A valid AV header (safety requirement).
    if !core::ptr::eq(unsafe { a.as_ref() }.ops, &AV_OPS) {
        return Err(EINVAL);
    }
    // SAFETY: Only `UtilAv`s have `AV_OPS` (type invariant); the `kfid_av`
    // is their first field.
    Ok(unsafe { &*a.as_ptr().cast::<UtilAv>() })
}

/// The length of the socket address at the start of `b`, by its family.
fn sockaddr_len(b: &[u8]) -> Result<usize> {
    let family = u16::from_ne_bytes([*b.first().ok_or(EINVAL)?, *b.get(1).ok_or(EINVAL)?]);
    match u32::from(family) {
        bindings::AF_INET => Ok(size_of::<bindings::sockaddr_in>()),
        bindings::AF_INET6 => Ok(size_of::<bindings::sockaddr_in6>()),
        _ => Err(EINVAL),
    }
}

/// Makes room for `more` addresses, allocating outside the table's lock:
/// at least twice the room it had (so that inserts one at a time do not
/// copy the table each time), within [`AV_MAX`] (`ENOSPC` beyond). Called
/// with `writer` held, so the table only shrinks meanwhile.
fn grow(u: &UtilAv, more: usize) -> Result {
    let (len, cap) = {
        let t = u.table.lock();
        (t.len(), t.capacity())
    };
    let need = len
        .checked_add(more)
        .filter(|&n| n <= AV_MAX)
        .ok_or(ENOSPC)?;
    if need <= cap {
        return Ok(());
    }
    let room = need.max(cap.saturating_mul(2)).min(AV_MAX);
    // From vmalloc when large; the old table is freed here, outside the
    // lock, in process context.
    let mut bigger = KVVec::with_capacity(room, GFP_KERNEL)?;
    let mut t = u.table.lock();
    // Within the new capacity: no allocation under the lock.
    bigger.extend_from_slice(&t, GFP_ATOMIC)?;
    core::mem::swap(&mut *t, &mut bigger);
    drop(t);
    drop(bigger);
    Ok(())
}

/// The AV's `insert`: `count` addresses back to back; returns how many
/// were inserted (the rest get `KFI_ADDR_NOTAVAIL`).
///
/// # Safety
///
/// kfabric.ko's contract: an open AV; `addr` holds `count` addresses and
/// `fi_addr` room for `count` handles (checked non-NULL).
unsafe extern "C" fn av_insert(
    av: *mut sys::kfid_av,
    addr: *const c_void,
    count: usize,
    fi_addr: *mut sys::kfi_addr_t,
    flags: u64,
    _context: *mut c_void,
) -> c_int {
    (|| -> Result<c_int> {
        kernel::task::might_sleep();
        // SAFETY: As required.
        let u = unsafe { util(av) }?;
        // The count of inserted addresses is returned as a `c_int`.
        if flags != 0 || addr.is_null() || fi_addr.is_null() || c_int::try_from(count).is_err() {
            return Err(EINVAL);
        }
        // SAFETY: `fi_addr` has room for `count` handles.
        let out = unsafe { core::slice::from_raw_parts_mut(fi_addr, count) };
        out.fill(sys::KFI_ADDR_NOTAVAIL);
        let _w = u.writer.lock();
        grow(u, count)?;
        let mut at = addr.cast::<u8>();
        for (n, slot) in out.iter_mut().enumerate() {
            // SAFETY: At least the family of the next address is readable.
            let head = unsafe { core::slice::from_raw_parts(at, 2) };
            let Ok(len) = sockaddr_len(head) else {
                return Ok(n as c_int);
            };
            let mut a = Addr {
                bytes: [0; ADDR_MAX],
                len,
            };
            // SAFETY: The address is `len` bytes by its family.
            a.bytes[..len].copy_from_slice(unsafe { core::slice::from_raw_parts(at, len) });
            let mut t = u.table.lock();
            *slot = t.len() as u64;
            t.push(Some(a), GFP_ATOMIC)?;
            drop(t);
            // SAFETY: The next address follows this one.
            at = unsafe { at.add(len) };
        }
        Ok(count as c_int)
    })()
    .unwrap_or_else(|e| e.to_errno())
}

/// The AV's `remove`.
///
/// # Safety
///
/// kfabric.ko's contract: an open AV; `fi_addr` holds `count` handles.
unsafe extern "C" fn av_remove(
    av: *mut sys::kfid_av,
    fi_addr: *mut sys::kfi_addr_t,
    count: usize,
    flags: u64,
) -> c_int {
    errno((|| {
        // SAFETY: As required.
        let u = unsafe { util(av) }?;
        if flags != 0 || fi_addr.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: `fi_addr` holds `count` handles.
        let handles = unsafe { core::slice::from_raw_parts(fi_addr, count) };
        let mut t = u.table.lock();
        if handles
            .iter()
            .any(|&h| !matches!(t.get(h as usize), Some(Some(_))))
        {
            return Err(EINVAL);
        }
        for &h in handles {
            if let Some(e) = t.get_mut(h as usize) {
                *e = None;
            }
        }
        Ok(())
    })())
}

/// The AV's `lookup`: copies what fits of the address and sets `*addrlen`
/// to its full length. Any context but hard interrupt.
///
/// # Safety
///
/// kfabric.ko's contract: an open AV; `addrlen` valid; `addr` NULL or
/// valid for `*addrlen` bytes.
unsafe extern "C" fn av_lookup(
    av: *mut sys::kfid_av,
    fi_addr: sys::kfi_addr_t,
    addr: *mut c_void,
    addrlen: *mut usize,
) -> c_int {
    errno((|| {
        // SAFETY: As required.
        let u = unsafe { util(av) }?;
        let a = u
            .table
            .lock()
            .get(fi_addr as usize)
            .copied()
            .flatten()
            .ok_or(ENOENT)?;
        // SAFETY: Checked non-NULL by kfabric.ko.
        let room = unsafe { *addrlen };
        if !addr.is_null() {
            let n = room.min(a.len);
            // SAFETY: `addr` is valid for `room` bytes.
            unsafe { core::ptr::copy_nonoverlapping(a.bytes.as_ptr(), addr.cast::<u8>(), n) };
        }
        // SAFETY: `addrlen` is valid for writes (kfabric.ko's contract; it
        // checked it non-NULL).
        unsafe { *addrlen = a.len };
        Ok(())
    })())
}

/// The AV's `close`.
///
/// # Safety
///
/// Called by kfabric.ko with an open object of this type.
unsafe extern "C" fn av_close(fid: *mut sys::kfid) -> c_int {
    // SAFETY: kfabric.ko closes an open util AV once.
    match unsafe { util(fid.cast()) } {
        Ok(u) => {
            let p: *const UtilAv = u;
            // SAFETY: Made by `KBox::pin_init` in `kfi_util_av_open`;
            // unused from now on.
            drop(unsafe { Pin::new_unchecked(KBox::from_raw(p.cast_mut())) });
            0
        }
        Err(e) => e.to_errno(),
    }
}

/// `kfi_util_av_open`: a util AV for a provider's `av_open`.
///
/// # Safety
///
/// The C contract: NULL or valid pointers.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_util_av_open(
    _domain: *mut sys::kfid_domain,
    attr: *mut sys::kfi_av_attr,
    av: *mut *mut sys::kfid_av,
    context: *mut c_void,
) -> c_int {
    errno((|| {
        kernel::task::might_sleep();
        // SAFETY: NULL or valid for reads (C contract).
        if attr.is_null() || av.is_null() || unsafe { (*attr).flags } != 0 {
            return Err(EINVAL);
        }
        // SAFETY: `attr` is non-NULL (checked just above) and valid for reads
        // (C contract).
        let expect = unsafe { (*attr).count };
        let mut table = KVVec::new();
        table.reserve(expect.min(1024), GFP_KERNEL)?;
        let u = KBox::pin_init(
            // INVARIANT: the ops tables are the util AV's.
            try_pin_init!(UtilAv {
                av: sys::kfid_av {
                    fid: sys::kfid {
                        fclass: sys::KFI_CLASS_AV,
                        context,
                        ops: &FID_OPS,
                        core: core::ptr::null_mut(),
                    },
                    ops: &AV_OPS,
                },
                table <- new_spinlock_irq!(table),
                writer <- new_mutex!(()),
            }),
            GFP_KERNEL,
        )?;
        // SAFETY: The box is never moved out of; `av_close` rebuilds it.
        let raw = KBox::into_raw(unsafe { Pin::into_inner_unchecked(u) });
        // SAFETY: `av` is valid for writes (C contract).
        unsafe { *av = raw.cast() };
        Ok(())
    })())
}
