// SPDX-License-Identifier: GPL-2.0

//! The util completion queue: a fixed ring that providers fill with
//! `kfi_util_cq_write*` from any context but hard interrupt, and ULPs read
//! by polling, by waiting (`kfi_cq_sread`) or from a handler.
//!
//! Entries and error entries share the ring in completion order; a read
//! stops at an error entry (`-KFI_EAVAIL`) until `kfi_cq_readerr` takes it.
//! A full ring refuses the completion (`-ENOSPC` to the provider) and the
//! ULP gets an `EOVERFLOW` error entry in its place: after the entries
//! queued before it, before those queued after (`overflow.rs`).

use core::{pin::Pin, ptr::NonNull};
use kernel::{
    new_condvar, new_spinlock_irq,
    prelude::*,
    sync::{
        atomic::{Acquire, Atomic, Full, Relaxed},
        CondVar, SpinLockIrq,
    },
};

use crate::{
    kfi_sys as sys,
    overflow::Overflow,
    slot::{count, eavail, errno},
    util_ring,
    util_wait::Deadline,
};

/// The most entries a util CQ holds.
const MAX_ENTRIES: usize = 1 << 16;

/// An error's details, for error entries.
#[derive(Clone, Copy, Default)]
struct ErrInfo {
    olen: usize,
    err: c_int,
    prov_errno: c_int,
}

#[derive(Clone, Copy, Default)]
struct Slot {
    entry: sys::kfi_cq_tagged_entry,
    err: Option<ErrInfo>,
}

/// The CQ's state, under its lock.
struct Ring {
    slots: util_ring::Ring<Slot>,
    /// A completion was refused since the ULP last heard of one: where
    /// its notice stands.
    overflow: Overflow,
    /// `kfi_cq_signal` was called and no waiter saw it yet.
    signaled: bool,
    /// Threads in `kfi_cq_sread` (counted under this lock before they
    /// sleep): a completion wakes the queue only if there is one, so one
    /// nobody waits for costs no wakeup call.
    waiters: u32,
}

impl Ring {
    fn push(&mut self, slot: Slot) -> Result {
        let r = self.slots.push(slot);
        if r.is_err() {
            self.overflow.lost(self.slots.used());
        }
        r
    }
}

/// A util CQ; its `kfid_cq` comes first so that the pointer is the CQ's.
///
/// # Invariants
///
/// `cq.ops` is `&CQ_OPS` and `cq.fid.ops` is `&FID_OPS`.
#[repr(C)]
#[pin_data]
struct UtilCq {
    cq: sys::kfid_cq,
    format: u32,
    handler: sys::kfi_comp_handler,
    #[pin]
    ring: SpinLockIrq<Ring>,
    #[pin]
    wait: CondVar,
    /// `Ring::waiters`, stored under the ring's lock whenever it changes,
    /// for [`kfi_util_cq_expect`] to read without taking the lock (a stale
    /// value costs a wakeup call on an empty queue, or an early wakeup
    /// missed: the write still wakes).
    sleepers: Atomic<u32>,
    /// Holds of the handler (`kfi_util_cq_hold`), and whether a
    /// completion came during one (the last release calls the handler).
    holds: Atomic<u32>,
    held_back: Atomic<bool>,
}

// SAFETY: The raw pointers in `cq` are the ops tables (statics) and the
// ULP's context, which kfabric only hands back; the ring is locked.
unsafe impl Send for UtilCq {}
// SAFETY: See `Send`.
unsafe impl Sync for UtilCq {}

static FID_OPS: sys::kfi_ops = sys::kfi_ops {
    size: size_of::<sys::kfi_ops>(),
    close: Some(cq_close),
    bind: None,
    control: None,
};

static CQ_OPS: sys::kfi_ops_cq = sys::kfi_ops_cq {
    size: size_of::<sys::kfi_ops_cq>(),
    read: Some(cq_read),
    readerr: Some(cq_readerr),
    sread: Some(cq_sread),
    signal: Some(cq_signal),
};

/// The util CQ behind `cq`, if it is one.
///
/// # Safety
///
/// `cq` is NULL or a valid CQ header.
unsafe fn util<'a>(cq: *mut sys::kfid_cq) -> Result<&'a UtilCq> {
    let cq = NonNull::new(cq).ok_or(EINVAL)?;
    // SAFETY: A valid CQ header (safety requirement).
    if !core::ptr::eq(unsafe { cq.as_ref() }.ops, &CQ_OPS) {
        return Err(EINVAL);
    }
    // SAFETY: Only `UtilCq`s have `CQ_OPS` (type invariant), and the
    // `kfid_cq` is their first field.
    Ok(unsafe { &*cq.as_ptr().cast::<UtilCq>() })
}

/// Writes entry `e` as element `i` of `buf` in `format`.
///
/// # Safety
///
/// `buf` holds more than `i` entries of `format`.
unsafe fn store(buf: *mut c_void, i: usize, format: u32, e: &sys::kfi_cq_tagged_entry) {
    // SAFETY: In bounds and of the right type (safety requirement).
    unsafe {
        match format {
            sys::KFI_CQ_FORMAT_MSG => {
                buf.cast::<sys::kfi_cq_msg_entry>()
                    .add(i)
                    .write(sys::kfi_cq_msg_entry {
                        op_context: e.op_context,
                        flags: e.flags,
                        len: e.len,
                    })
            }
            sys::KFI_CQ_FORMAT_DATA => {
                buf.cast::<sys::kfi_cq_data_entry>()
                    .add(i)
                    .write(sys::kfi_cq_data_entry {
                        op_context: e.op_context,
                        flags: e.flags,
                        len: e.len,
                        buf: e.buf,
                        data: e.data,
                    })
            }
            sys::KFI_CQ_FORMAT_TAGGED => buf.cast::<sys::kfi_cq_tagged_entry>().add(i).write(*e),
            _ => buf
                .cast::<sys::kfi_cq_entry>()
                .add(i)
                .write(sys::kfi_cq_entry {
                    op_context: e.op_context,
                }),
        }
    }
}

/// Reads up to `n` entries with the ring locked.
///
/// # Safety
///
/// `buf` holds `n` entries of `format`.
unsafe fn read_locked(ring: &mut Ring, buf: *mut c_void, n: usize, format: u32) -> Result<isize> {
    let mut done = 0;
    // Up to the notice of a lost completion, if one is due.
    while done < n && !ring.overflow.due() {
        match ring.slots.front() {
            Some(s) if s.err.is_none() => {
                // SAFETY: `done < n` (safety requirement).
                unsafe { store(buf, done, format, &s.entry) };
                ring.slots.pop();
                ring.overflow.popped();
                done += 1;
            }
            _ => break,
        }
    }
    if done > 0 {
        return Ok(done as isize);
    }
    if ring.slots.front().is_some() || ring.overflow.due() {
        Err(eavail())
    } else {
        Err(EAGAIN)
    }
}

/// The CQ's `read` op.
///
/// # Safety
///
/// Called by kfabric.ko with an open object of this type and the
/// arguments of the kfi_* call, checked.
unsafe extern "C" fn cq_read(cq: *mut sys::kfid_cq, buf: *mut c_void, n: usize) -> isize {
    count((|| {
        // SAFETY: kfabric.ko passes an open CQ.
        let u = unsafe { util(cq) }?;
        let mut ring = u.ring.lock();
        // SAFETY: `buf` holds `n` entries (the C contract of kfi_cq_read).
        unsafe { read_locked(&mut ring, buf, n, u.format) }
    })())
}

/// The CQ's `readerr` op.
///
/// # Safety
///
/// Called by kfabric.ko with an open object of this type and the
/// arguments of the kfi_* call, checked.
unsafe extern "C" fn cq_readerr(
    cq: *mut sys::kfid_cq,
    buf: *mut sys::kfi_cq_err_entry,
    _flags: u64,
) -> isize {
    count((|| {
        // SAFETY: kfabric.ko passes an open CQ.
        let u = unsafe { util(cq) }?;
        let mut ring = u.ring.lock();
        let out = match ring.slots.front() {
            _ if ring.overflow.due() => {
                ring.overflow.taken();
                sys::kfi_cq_err_entry {
                    err: EOVERFLOW.to_errno().abs(),
                    ..Default::default()
                }
            }
            Some(Slot {
                entry: e,
                err: Some(info),
            }) => {
                let out = sys::kfi_cq_err_entry {
                    op_context: e.op_context,
                    flags: e.flags,
                    len: e.len,
                    buf: e.buf,
                    data: e.data,
                    tag: e.tag,
                    olen: info.olen,
                    err: info.err,
                    prov_errno: info.prov_errno,
                    ..Default::default()
                };
                ring.slots.pop();
                ring.overflow.popped();
                out
            }
            _ => return Err(EAGAIN),
        };
        // SAFETY: `buf` is valid for writes (checked non-NULL by kfabric.ko).
        unsafe { buf.write(out) };
        Ok(1)
    })())
}

/// The CQ's `sread` op.
///
/// # Safety
///
/// Called by kfabric.ko with an open object of this type and the
/// arguments of the kfi_* call, checked.
unsafe extern "C" fn cq_sread(
    cq: *mut sys::kfid_cq,
    buf: *mut c_void,
    n: usize,
    _cond: *const c_void,
    timeout: c_int,
) -> isize {
    count((|| {
        // SAFETY: kfabric.ko passes an open CQ.
        let u = unsafe { util(cq) }?;
        let mut deadline = Deadline::new(timeout);
        let mut ring = u.ring.lock();
        loop {
            // SAFETY: `buf` holds `n` entries (the C contract).
            match unsafe { read_locked(&mut ring, buf, n, u.format) } {
                Err(e) if e == EAGAIN => {}
                r => return r,
            }
            if ring.signaled {
                ring.signaled = false;
                return Err(ECANCELED);
            }
            ring.waiters += 1;
            u.sleepers.store(ring.waiters, Relaxed);
            // A wakeup with nothing to read (`kfi_util_cq_expect` came
            // before its completion) loops back here.
            let woken = deadline.wait(&u.wait, &mut ring);
            ring.waiters -= 1;
            u.sleepers.store(ring.waiters, Relaxed);
            woken?;
        }
    })())
}

/// The CQ's `signal` op.
///
/// # Safety
///
/// Called by kfabric.ko with an open object of this type and the
/// arguments of the kfi_* call, checked.
unsafe extern "C" fn cq_signal(cq: *mut sys::kfid_cq) -> c_int {
    errno((|| {
        // SAFETY: kfabric.ko passes an open CQ.
        let u = unsafe { util(cq) }?;
        let mut ring = u.ring.lock();
        ring.signaled = true;
        // Under the lock: a waiter that sees `signaled` may return and
        // close the CQ at once, which takes this lock first.
        u.wait.notify_all();
        drop(ring);
        Ok(())
    })())
}

/// The CQ's `close` op.
///
/// # Safety
///
/// Called by kfabric.ko with an open object of this type and the
/// arguments of the kfi_* call, checked.
unsafe extern "C" fn cq_close(fid: *mut sys::kfid) -> c_int {
    // SAFETY: kfabric.ko closes an open util CQ once; `fid` is its first
    // field.
    match unsafe { util(fid.cast()) } {
        Ok(u) => {
            // A thread asleep in `kfi_cq_sread` would wake in freed memory
            // (a caller's bug, refused): it counts itself out under the
            // lock, after its last touch of the wait queue.
            if u.ring.lock().waiters > 0 {
                return EBUSY.to_errno();
            }
            let p: *const UtilCq = u;
            // SAFETY: Made by `KBox::pin_init` in `kfi_util_cq_open`; no one
            // uses it any more (kfabric.ko checked it has no users, and no
            // thread waits in it).
            drop(unsafe { Pin::new_unchecked(KBox::from_raw(p.cast_mut())) });
            0
        }
        Err(e) => e.to_errno(),
    }
}

/// `kfi_util_cq_open`: a util CQ for a provider's `cq_open`.
///
/// # Safety
///
/// The C contract: NULL or valid pointers.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_util_cq_open(
    _domain: *mut sys::kfid_domain,
    attr: *mut sys::kfi_cq_attr,
    cq: *mut *mut sys::kfid_cq,
    context: *mut c_void,
) -> c_int {
    errno((|| {
        kernel::task::might_sleep();
        if attr.is_null() || cq.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: Non-NULL, valid for reads (C contract).
        let a = unsafe { &*attr };
        if a.size == 0
            || a.size > MAX_ENTRIES
            || a.flags != 0
            || a.format > sys::KFI_CQ_FORMAT_TAGGED
        {
            return Err(EINVAL);
        }
        let slots = util_ring::Ring::new(a.size)?;
        let format = if a.format == sys::KFI_CQ_FORMAT_UNSPEC {
            sys::KFI_CQ_FORMAT_CONTEXT
        } else {
            a.format
        };
        let u = KBox::pin_init(
            // INVARIANT: the ops tables are the util CQ's.
            try_pin_init!(UtilCq {
                cq: sys::kfid_cq {
                    fid: sys::kfid {
                        fclass: sys::KFI_CLASS_CQ,
                        context,
                        ops: &FID_OPS,
                        core: core::ptr::null_mut(),
                    },
                    ops: &CQ_OPS,
                },
                format,
                handler: a.comp_handler,
                ring <- new_spinlock_irq!(Ring { slots, overflow: Overflow::default(), signaled: false, waiters: 0 }),
                wait <- new_condvar!(),
                sleepers: Atomic::new(0),
                holds: Atomic::new(0),
                held_back: Atomic::new(false),
            }),
            GFP_KERNEL,
        )?;
        // SAFETY: The box is never moved out of; `cq_close` rebuilds it.
        let raw = KBox::into_raw(unsafe { Pin::into_inner_unchecked(u) });
        // SAFETY: `cq` is valid for writes (C contract); `cq` is the first field.
        unsafe { *cq = raw.cast() };
        Ok(())
    })())
}

/// Queues `slot` and tells the ULP.
fn post(u: &UtilCq, slot: Slot) -> Result {
    let (r, waited) = {
        let mut ring = u.ring.lock();
        (ring.push(slot), ring.waiters > 0)
    };
    if waited {
        u.wait.notify_all();
    }
    if u.handler.is_some() {
        if u.holds.load(Acquire) == 0 {
            call_handler(u);
        } else {
            // The last release calls it; if that release came between the
            // two loads, it may have missed the mark: then call it here
            // (the exchange orders the mark before the second load, as the
            // release's orders its count before its look at the mark).
            u.held_back.xchg(true, Full);
            if u.holds.load(Acquire) == 0 && u.held_back.xchg(false, Full) {
                call_handler(u);
            }
        }
    }
    r
}

/// Calls the ULP's handler of `u`, if it gave one.
fn call_handler(u: &UtilCq) {
    if let Some(h) = u.handler {
        // SAFETY: The ULP's handler for this CQ, given at open.
        unsafe { h((&raw const u.cq).cast_mut(), u.cq.fid.context) };
    }
}

/// `kfi_util_cq_hold`: completions written to `cq` do not call its
/// handler until the matching [`kfi_util_cq_release`] (see
/// kfi_provider.h). Any context but hard interrupt.
///
/// # Safety
///
/// The C contract: `cq` NULL or a valid kfabric object (anything but a
/// util CQ is ignored).
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_util_cq_hold(cq: *mut sys::kfid_cq) {
    // SAFETY: The C contract.
    if let Ok(u) = unsafe { util(cq) } {
        u.holds.fetch_add(1, Full);
    }
}

/// `kfi_util_cq_release`: ends a hold; the last one calls the handler if
/// a completion came meanwhile. Any context but hard interrupt, with no
/// lock held that the handler's calls may take.
///
/// # Safety
///
/// The C contract (a release without a hold is ignored, with a warning).
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_util_cq_release(cq: *mut sys::kfid_cq) {
    // SAFETY: The C contract.
    let Ok(u) = (unsafe { util(cq) }) else {
        return;
    };
    // Only a hold is ended: a release without one (a provider's bug) must
    // not wrap the count, which would hold the handler back for good.
    let mut n = u.holds.load(Relaxed);
    loop {
        if n == 0 {
            kernel::pr_warn_once!("kfi_util_cq_release without a hold: ignored\n");
            return;
        }
        match u.holds.cmpxchg(n, n - 1, Full) {
            Ok(_) => break,
            Err(now) => n = now,
        }
    }
    if n == 1 && u.held_back.xchg(false, Full) {
        call_handler(u);
    }
}

/// `kfi_util_cq_write`: a provider reports a completion.
///
/// # Safety
///
/// The C contract: `cq` NULL or a valid CQ, `entry` NULL or valid.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_util_cq_write(
    cq: *mut sys::kfid_cq,
    entry: *const sys::kfi_cq_tagged_entry,
) -> c_int {
    errno((|| {
        // SAFETY: The C contract.
        let u = unsafe { util(cq) }?;
        if entry.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: Non-NULL, valid (C contract).
        let entry = unsafe { *entry };
        post(u, Slot { entry, err: None })
    })())
}

/// `kfi_util_cq_expect`: a provider is about to write a completion to `cq`
/// (see kfi_provider.h); wakes its waiters now. Any context but hard
/// interrupt.
///
/// # Safety
///
/// The C contract: `cq` NULL or a valid kfabric object (anything but a
/// util CQ is ignored).
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_util_cq_expect(cq: *mut sys::kfid_cq) {
    // SAFETY: The C contract.
    let Ok(u) = (unsafe { util(cq) }) else {
        return;
    };
    if u.sleepers.load(Relaxed) > 0 {
        u.wait.notify_all();
    }
}

/// `kfi_util_cq_write_err`: a provider reports a failed operation.
///
/// # Safety
///
/// The C contract: `cq` NULL or a valid CQ, `err` NULL or valid.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_util_cq_write_err(
    cq: *mut sys::kfid_cq,
    err: *const sys::kfi_cq_err_entry,
) -> c_int {
    errno((|| {
        // SAFETY: The C contract.
        let u = unsafe { util(cq) }?;
        if err.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: Non-NULL, valid (C contract).
        let e = unsafe { &*err };
        if e.err <= 0 {
            return Err(EINVAL);
        }
        let entry = sys::kfi_cq_tagged_entry {
            op_context: e.op_context,
            flags: e.flags,
            len: e.len,
            buf: e.buf,
            data: e.data,
            tag: e.tag,
        };
        let info = ErrInfo {
            olen: e.olen,
            err: e.err,
            prov_errno: e.prov_errno,
        };
        post(
            u,
            Slot {
                entry,
                err: Some(info),
            },
        )
    })())
}
