// SPDX-License-Identifier: GPL-2.0

//! The util event queue: connection and other events with up to
//! `KFI_EQ_DATA_MAX` bytes of private data, in fixed slots allocated at open
//! so that providers can post from any context but hard interrupt.
//!
//! A `KFI_CONNREQ` event a provider posts (`kfi_util_eq_write_cm`) carries
//! a `kfi_info` the EQ owns until a read without `KFI_PEEK` hands it to the
//! reader; one still queued when the EQ is closed is freed with it. Events
//! a ULP writes (`kfi_eq_write`) own nothing: their bytes are only copied.

use core::{pin::Pin, ptr::NonNull};
use kernel::{
    new_condvar, new_spinlock_irq,
    prelude::*,
    sync::{CondVar, SpinLockIrq},
};

use crate::{
    info, kfi_sys as sys,
    overflow::Overflow,
    slot::{count, eavail, errno},
    util_ring,
    util_wait::Deadline,
};

/// The largest event: a CM entry with the most private data.
const EVENT_MAX: usize = size_of::<sys::kfi_eq_cm_entry>() + sys::KFI_EQ_DATA_MAX as usize;
/// The most events a util EQ holds.
const MAX_EVENTS: usize = 4096;

#[derive(Clone, Copy)]
struct ErrInfo {
    fid: *mut sys::kfid,
    context: *mut c_void,
    data: u64,
    err: c_int,
    prov_errno: c_int,
}

#[derive(Clone, Copy)]
struct Slot {
    event: u32,
    len: usize,
    bytes: [u8; EVENT_MAX],
    err: Option<ErrInfo>,
    /// A provider's CONNREQ: the `info` in `bytes` is the EQ's to free.
    owns_info: bool,
}

impl Default for Slot {
    fn default() -> Self {
        Self {
            event: 0,
            len: 0,
            bytes: [0; EVENT_MAX],
            err: None,
            owns_info: false,
        }
    }
}

impl Slot {
    /// The `kfi_eq_cm_entry` the event starts with, read as one (an error
    /// entry, or an event too short, has none).
    fn cm_entry(&self) -> Option<sys::kfi_eq_cm_entry> {
        if self.err.is_some() || self.len < size_of::<sys::kfi_eq_cm_entry>() {
            return None;
        }
        let at = self.bytes.as_ptr().cast::<sys::kfi_eq_cm_entry>();
        // SAFETY: `bytes` holds at least a `kfi_eq_cm_entry`'s size (checked
        // above), which has no invalid bit patterns; read unaligned.
        let e = unsafe { at.read_unaligned() };
        Some(e)
    }

    /// The `kfi_info` a queued CONNREQ owns, if any.
    fn connreq_info(&self) -> *mut sys::kfi_info {
        if !self.owns_info || self.event != sys::KFI_CONNREQ {
            return core::ptr::null_mut();
        }
        self.cm_entry().map_or(core::ptr::null_mut(), |e| e.info)
    }

    /// Whether this is a provider's event about `fid`: a connection up or
    /// ended, an error entry, or a provider's request (`KFI_CONNREQ`) to
    /// the passive endpoint `fid`, whose `info` the taker frees. A ULP's
    /// own `KFI_CONNREQ` (its bytes only) stays.
    fn about(&self, fid: *mut sys::kfid) -> bool {
        if let Some(e) = &self.err {
            return core::ptr::eq(e.fid, fid);
        }
        let named = self.cm_entry().is_some_and(|e| core::ptr::eq(e.fid, fid));
        match self.event {
            sys::KFI_CONNECTED | sys::KFI_SHUTDOWN => named,
            sys::KFI_CONNREQ => named && self.owns_info,
            _ => false,
        }
    }
}

/// The EQ's state, under its lock.
struct Ring {
    slots: util_ring::Ring<Slot>,
    /// The private data of the last error entry read (its `err_data`
    /// points here until the next read of an error).
    last_err_data: [u8; sys::KFI_EQ_DATA_MAX as usize],
    /// Threads asleep in `kfi_eq_sread` (the close is refused meanwhile).
    waiters: u32,
    /// A provider's event was refused (the queue was full) since the ULP
    /// last heard of one: reported as an `EOVERFLOW` error entry in its
    /// place, so that a lost `KFI_CONNECTED` or `KFI_SHUTDOWN` is not
    /// waited for in silence.
    overflow: Overflow,
}

/// A util EQ; its `kfid_eq` comes first.
///
/// # Invariants
///
/// `eq.ops` is `&EQ_OPS` and `eq.fid.ops` is `&FID_OPS`.
#[repr(C)]
#[pin_data]
struct UtilEq {
    eq: sys::kfid_eq,
    handler: sys::kfi_event_handler,
    #[pin]
    ring: SpinLockIrq<Ring>,
    #[pin]
    wait: CondVar,
}

// SAFETY: The raw pointers are static ops tables, the ULP's context and
// object pointers that are only handed back; the ring is locked.
unsafe impl Send for UtilEq {}
// SAFETY: See `Send`.
unsafe impl Sync for UtilEq {}

static FID_OPS: sys::kfi_ops = sys::kfi_ops {
    size: size_of::<sys::kfi_ops>(),
    close: Some(eq_close),
    bind: None,
    control: None,
};

static EQ_OPS: sys::kfi_ops_eq = sys::kfi_ops_eq {
    size: size_of::<sys::kfi_ops_eq>(),
    read: Some(eq_read),
    readerr: Some(eq_readerr),
    write: Some(eq_write),
    sread: Some(eq_sread),
};

/// The util EQ behind `eq`, if it is one.
///
/// # Safety
///
/// `eq` is NULL or a valid EQ header.
unsafe fn util<'a>(eq: *mut sys::kfid_eq) -> Result<&'a UtilEq> {
    let e = NonNull::new(eq).ok_or(EINVAL)?;
    // SAFETY: A valid EQ header (safety requirement).
    let header = unsafe { e.as_ref() };
    if !core::ptr::eq(header.ops, &EQ_OPS) {
        return Err(EINVAL);
    }
    // SAFETY: Only `UtilEq`s have `EQ_OPS` (type invariant); the `kfid_eq`
    // is their first field.
    Ok(unsafe { &*e.as_ptr().cast::<UtilEq>() })
}

/// Drops the events queued on `eq` about `fid` ([`Slot::about`]), an
/// object just closed (its provider posts none any more): an object
/// opened later at the same address must not take them for its own, and
/// a closed listener's requests (their infos freed here) cannot be
/// answered. The
/// overflow notice keeps its place among the rest. Nothing if `eq` is not
/// a util EQ. Any context but hard interrupt.
///
/// # Safety
///
/// `eq` is an open EQ.
pub(crate) unsafe fn forget(eq: *mut sys::kfid_eq, fid: *mut sys::kfid) {
    // SAFETY: An open EQ (safety requirement).
    let found = unsafe { util(eq) };
    let Ok(u) = found else {
        return;
    };
    let mut ring = u.ring.lock();
    let Ring {
        slots, overflow, ..
    } = &mut *ring;
    let notice = overflow.ahead();
    let mut before = 0;
    slots.take_all_where(
        |s| s.about(fid),
        |at, s| {
            // The passive endpoint's close dropped the request its info
            // names: nobody can use it.
            info::free_list(s.connreq_info());
            if notice.is_some_and(|a| at < a) {
                before += 1;
            }
        },
    );
    overflow.dropped(before);
}

/// Reads the next event with the ring locked.
///
/// # Safety
///
/// `buf` is valid for `len` bytes of writes, `event` for a write.
unsafe fn read_locked(
    ring: &mut Ring,
    event: *mut u32,
    buf: *mut c_void,
    len: usize,
    flags: u64,
) -> Result<isize> {
    if ring.overflow.due() {
        return Err(eavail());
    }
    let s = match ring.slots.front() {
        None => return Err(EAGAIN),
        Some(s) if s.err.is_some() => return Err(eavail()),
        Some(s) => s,
    };
    if s.len > len {
        return Err(EMSGSIZE);
    }
    let n = s.len;
    // SAFETY: `buf` holds `len >= n` bytes, `event` is writable (safety
    // requirement).
    unsafe {
        core::ptr::copy_nonoverlapping(s.bytes.as_ptr(), buf.cast::<u8>(), n);
        *event = s.event;
    }
    if flags & sys::KFI_PEEK == 0 {
        ring.slots.pop();
        ring.overflow.popped();
    }
    Ok(n as isize)
}

/// The EQ's `read` op.
///
/// # Safety
///
/// Called by kfabric.ko with an open object of this type and the
/// arguments of the kfi_* call, checked.
unsafe extern "C" fn eq_read(
    eq: *mut sys::kfid_eq,
    event: *mut u32,
    buf: *mut c_void,
    len: usize,
    flags: u64,
) -> isize {
    count((|| {
        // SAFETY: kfabric.ko passes an open EQ.
        let u = unsafe { util(eq) }?;
        // SAFETY: The C contract of kfi_eq_read.
        unsafe { read_locked(&mut u.ring.lock(), event, buf, len, flags) }
    })())
}

/// The EQ's `sread` op.
///
/// # Safety
///
/// Called by kfabric.ko with an open object of this type and the
/// arguments of the kfi_* call, checked.
unsafe extern "C" fn eq_sread(
    eq: *mut sys::kfid_eq,
    event: *mut u32,
    buf: *mut c_void,
    len: usize,
    timeout: c_int,
    flags: u64,
) -> isize {
    count((|| {
        // SAFETY: kfabric.ko passes an open EQ.
        let u = unsafe { util(eq) }?;
        let mut deadline = Deadline::new(timeout);
        let mut ring = u.ring.lock();
        loop {
            // SAFETY: The C contract of kfi_eq_sread.
            match unsafe { read_locked(&mut ring, event, buf, len, flags) } {
                Err(e) if e == EAGAIN => {}
                r => return r,
            }
            ring.waiters += 1;
            let woken = deadline.wait(&u.wait, &mut ring);
            ring.waiters -= 1;
            woken?;
        }
    })())
}

/// The EQ's `readerr` op.
///
/// # Safety
///
/// Called by kfabric.ko with an open object of this type and the
/// arguments of the kfi_* call, checked.
unsafe extern "C" fn eq_readerr(
    eq: *mut sys::kfid_eq,
    buf: *mut sys::kfi_eq_err_entry,
    _flags: u64,
) -> isize {
    count((|| {
        // SAFETY: kfabric.ko passes an open EQ.
        let u = unsafe { util(eq) }?;
        let mut ring = u.ring.lock();
        if ring.overflow.due() {
            ring.overflow.taken();
            // SAFETY: `buf` is valid for writes (checked non-NULL by
            // kfabric.ko).
            unsafe {
                buf.write(sys::kfi_eq_err_entry {
                    err: EOVERFLOW.to_errno().abs(),
                    ..Default::default()
                })
            };
            return Ok(1);
        }
        let Some(&Slot {
            len,
            bytes,
            err: Some(info),
            ..
        }) = ring.slots.front()
        else {
            return Err(EAGAIN);
        };
        ring.last_err_data[..len].copy_from_slice(&bytes[..len]);
        let err_data = if len > 0 {
            ring.last_err_data.as_mut_ptr().cast()
        } else {
            core::ptr::null_mut()
        };
        ring.slots.pop();
        ring.overflow.popped();
        // SAFETY: `buf` is valid for writes (checked non-NULL by kfabric.ko).
        unsafe {
            buf.write(sys::kfi_eq_err_entry {
                fid: info.fid,
                context: info.context,
                data: info.data,
                err: info.err,
                prov_errno: info.prov_errno,
                err_data,
                err_data_size: len,
            })
        };
        Ok(1)
    })())
}

/// Queues `slot` and tells the ULP. A provider's event that finds the
/// queue full (`from_provider`) is reported as an overflow; a ULP's own
/// write just fails.
///
/// A provider's `KFI_CONNREQ` is refused (`ENOSPC`, no overflow: the
/// provider refuses the peer, so nothing is lost) once half the queue
/// (rounded up) is in use, by events of any kind: half of it (rounded
/// down) is always left for other events. A flood of requests on an EQ
/// that connected endpoints share would otherwise fill it, and their
/// `KFI_CONNECTED`, `KFI_SHUTDOWN` and error entries would be the events
/// lost.
fn post(u: &UtilEq, slot: Slot, from_provider: bool) -> Result {
    // Read before the event is visible: without a handler, nothing of the
    // EQ is touched once the lock is dropped (a reader may take the event
    // and close the EQ at once).
    let handler = u.handler;
    let eq = (&raw const u.eq).cast_mut();
    let context = u.eq.fid.context;
    let r = {
        let mut ring = u.ring.lock();
        let kept = ring.slots.room_now() / 2;
        if from_provider
            && slot.event == sys::KFI_CONNREQ
            && ring.slots.used().saturating_add(kept) >= ring.slots.room_now()
        {
            return Err(ENOSPC);
        }
        let r = ring.slots.push(slot);
        if r.is_err() && from_provider {
            let queued = ring.slots.used();
            ring.overflow.lost(queued);
        }
        if r.is_ok() || from_provider {
            // Under the lock, which the close takes first.
            u.wait.notify_all();
        }
        r
    };
    if r.is_ok() || from_provider {
        if let Some(h) = handler {
            // SAFETY: The ULP's handler for this EQ, given at open; the EQ
            // is open while a call on it runs (the C contract: a ULP with
            // a handler does not close the EQ while its own write on it
            // may still be running).
            unsafe { h(eq, context) };
        }
    }
    r
}

/// Queues `len` bytes at `buf` as event `event`.
///
/// # Safety
///
/// `buf` holds `len` bytes (it may be NULL when `len` is 0).
unsafe fn write_event(
    u: &UtilEq,
    event: u32,
    buf: *const c_void,
    len: usize,
    owns_info: bool,
    from_provider: bool,
) -> Result {
    if len > EVENT_MAX || (len > 0 && buf.is_null()) {
        return Err(EINVAL);
    }
    let mut slot = Slot {
        event,
        len,
        owns_info,
        ..Default::default()
    };
    if len > 0 {
        // SAFETY: `buf` holds `len` bytes (safety requirement).
        let src = unsafe { core::slice::from_raw_parts(buf.cast::<u8>(), len) };
        slot.bytes[..len].copy_from_slice(src);
    }
    post(u, slot, from_provider)
}

/// The EQ's `write` op: a ULP's event, whose bytes are only copied (an
/// `info` in a CONNREQ stays the writer's).
///
/// # Safety
///
/// Called by kfabric.ko with an open object of this type and the
/// arguments of the kfi_* call, checked.
unsafe extern "C" fn eq_write(
    eq: *mut sys::kfid_eq,
    event: u32,
    buf: *const c_void,
    len: usize,
    _flags: u64,
) -> isize {
    count((|| {
        // SAFETY: kfabric.ko passes an open EQ.
        let u = unsafe { util(eq) }?;
        // SAFETY: `buf` holds `len` bytes (C contract).
        unsafe { write_event(u, event, buf, len, false, false) }?;
        Ok(len as isize)
    })())
}

/// `kfi_util_eq_write_cm`: a provider's connection event. A CONNREQ's
/// `info` belongs to the EQ once queued.
///
/// # Safety
///
/// The C contract: NULL or valid pointers.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_util_eq_write_cm(
    eq: *mut sys::kfid_eq,
    event: u32,
    buf: *const c_void,
    len: usize,
) -> c_int {
    errno((|| {
        // SAFETY: NULL or an EQ header (C contract).
        let u = unsafe { util(eq) }?;
        if event == sys::KFI_CONNREQ && len < size_of::<sys::kfi_eq_cm_entry>() {
            return Err(EINVAL);
        }
        // SAFETY: `buf` holds `len` bytes (C contract).
        unsafe { write_event(u, event, buf, len, event == sys::KFI_CONNREQ, true) }
    })())
}

/// The EQ's `close` op.
///
/// # Safety
///
/// Called by kfabric.ko with an open object of this type and the
/// arguments of the kfi_* call, checked.
unsafe extern "C" fn eq_close(fid: *mut sys::kfid) -> c_int {
    // SAFETY: kfabric.ko closes an open util EQ once.
    match unsafe { util(fid.cast()) } {
        Ok(u) => {
            {
                let mut ring = u.ring.lock();
                // A thread asleep in `kfi_eq_sread` would wake in freed
                // memory (a caller's bug, refused).
                if ring.waiters > 0 {
                    return EBUSY.to_errno();
                }
                while let Some(s) = ring.slots.front() {
                    info::free_list(s.connreq_info());
                    ring.slots.pop();
                }
            }
            let p: *const UtilEq = u;
            // SAFETY: Made by `KBox::pin_init` in `kfi_util_eq_open`; unused
            // from now on.
            drop(unsafe { Pin::new_unchecked(KBox::from_raw(p.cast_mut())) });
            0
        }
        Err(e) => e.to_errno(),
    }
}

/// `kfi_util_eq_open`: a util EQ for a provider's `eq_open`.
///
/// # Safety
///
/// The C contract: NULL or valid pointers.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_util_eq_open(
    _fabric: *mut sys::kfid_fabric,
    attr: *mut sys::kfi_eq_attr,
    eq: *mut *mut sys::kfid_eq,
    context: *mut c_void,
) -> c_int {
    errno((|| {
        kernel::task::might_sleep();
        if attr.is_null() || eq.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: Non-NULL, valid for reads (C contract).
        let a = unsafe { &*attr };
        if a.size == 0 || a.size > MAX_EVENTS || a.flags != 0 {
            return Err(EINVAL);
        }
        let slots = util_ring::Ring::new(a.size)?;
        let u = KBox::pin_init(
            // INVARIANT: the ops tables are the util EQ's.
            try_pin_init!(UtilEq {
                eq: sys::kfid_eq {
                    fid: sys::kfid {
                        fclass: sys::KFI_CLASS_EQ,
                        context,
                        ops: &FID_OPS,
                        core: core::ptr::null_mut(),
                    },
                    ops: &EQ_OPS,
                },
                handler: a.event_handler,
                 ring <- new_spinlock_irq!(Ring {
                    slots,
                    last_err_data: [0; sys::KFI_EQ_DATA_MAX as usize],
                    waiters: 0,
                    overflow: Overflow::default(),
                }),
                wait <- new_condvar!(),
            }),
            GFP_KERNEL,
        )?;
        // SAFETY: The box is never moved out of; `eq_close` rebuilds it.
        let raw = KBox::into_raw(unsafe { Pin::into_inner_unchecked(u) });
        // SAFETY: `eq` is valid for writes (C contract).
        unsafe { *eq = raw.cast() };
        Ok(())
    })())
}

/// `kfi_util_eq_write_err`: a provider reports a failed asynchronous
/// operation (its `err_data` is copied).
///
/// # Safety
///
/// The C contract: NULL or valid pointers.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_util_eq_write_err(
    eq: *mut sys::kfid_eq,
    err: *const sys::kfi_eq_err_entry,
) -> c_int {
    errno((|| {
        // SAFETY: The C contract.
        let u = unsafe { util(eq) }?;
        if err.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: Non-NULL, valid (C contract).
        let e = unsafe { &*err };
        let len = e.err_data_size.min(sys::KFI_EQ_DATA_MAX as usize);
        if e.err <= 0 || (len > 0 && e.err_data.is_null()) {
            return Err(EINVAL);
        }
        let mut slot = Slot {
            len,
            err: Some(ErrInfo {
                fid: e.fid,
                context: e.context,
                data: e.data,
                err: e.err,
                prov_errno: e.prov_errno,
            }),
            ..Default::default()
        };
        if len > 0 {
            // SAFETY: `err_data` holds `err_data_size >= len` bytes.
            let data = unsafe { core::slice::from_raw_parts(e.err_data.cast::<u8>(), len) };
            slot.bytes[..len].copy_from_slice(data);
        }
        post(u, slot, true)
    })())
}
