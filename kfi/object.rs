// SPDX-License-Identifier: GPL-2.0

//! Object lifetime: creation through a provider, binding, and `kfi_close`.
//!
//! For every open object kfabric.ko keeps an [`ObjectCore`] behind
//! `kfid.core`. It holds the object's [`ProviderRef`] (the provider stays
//! registered and loaded), counts the objects that depend on it (children
//! such as a fabric's domains, and objects bound to it such as an
//! endpoint's CQ), and remembers what was bound to it. An object with
//! dependents cannot be closed (`-EBUSY`), so no provider sees a parent
//! vanish under a child.

use core::{cell::UnsafeCell, ffi::CStr, mem::offset_of, ptr::NonNull};
use kernel::{
    error::to_result,
    prelude::*,
    str::CStrExt,
    sync::atomic::{Acquire, Atomic, Relaxed, Release},
    task::might_sleep,
};

use crate::{kfi_sys as sys, live, registry::ProviderRef, util_eq};

const CLASSES: usize = sys::KFI_CLASS_MAX as usize;

/// Live objects per class (`enum kfi_fclass`).
static LIVE: [Atomic<i64>; CLASSES] = [const { Atomic::new(0) }; CLASSES];

kernel::sync::global_lock! {
    // SAFETY: Initialized by `init` in the module initializer before first use.
    unsafe(uninit) static GRAPH: Mutex<()> = ();
}

/// Sets up the object graph lock.
///
/// # Safety
///
/// Must be called exactly once, before any other function of this module.
pub(crate) unsafe fn init() {
    // SAFETY: Called once, before use (the function's safety requirement).
    unsafe { GRAPH.init() };
}

/// The name of object class `class`, for debugfs.
pub(crate) fn class_name(class: usize) -> &'static str {
    const NAMES: [&str; CLASSES] = [
        "unspec", "fabric", "domain", "ep", "pep", "av", "mr", "eq", "cq", "cntr",
    ];
    NAMES.get(class).copied().unwrap_or("?")
}

/// Live objects of class `class`.
pub(crate) fn live(class: usize) -> i64 {
    LIVE.get(class).map_or(0, |c| c.load(Relaxed))
}

/// Number of object classes.
pub(crate) const fn classes() -> usize {
    CLASSES
}

/// Whether an ops table of `size` bytes has the slot at `offset`.
pub(crate) fn has_slot(size: usize, offset: usize) -> bool {
    size >= offset + size_of::<usize>()
}

/// kfabric.ko's part of an open object.
///
/// # Invariants
///
/// - `pref` pins the provider that created the object.
/// - `parent`, when set, is the `ObjectCore` of an open object whose
///   `users` counts this object.
/// - Every entry of `bound` is the `ObjectCore` of an open object whose
///   `users` counts the binding; `bound` is only accessed under `GRAPH`.
/// - `closing` is set (under `GRAPH`) while the provider closes the
///   object without `GRAPH` held: nothing may start to use it meanwhile.
/// - `fid`, once set (by [`Pending::attach`]), is the object's header,
///   valid while the object is open.
pub(crate) struct ObjectCore {
    pref: ProviderRef,
    class: u32,
    users: Atomic<i64>,
    parent: Option<NonNull<ObjectCore>>,
    bound: UnsafeCell<KVec<NonNull<ObjectCore>>>,
    closing: Atomic<bool>,
    /// The object's header, once attached.
    fid: Option<NonNull<sys::kfid>>,
}

// SAFETY: `bound` is only touched under the GRAPH mutex; everything else is
// immutable or atomic, and the pointers refer to objects that stay open while
// referenced (type invariants).
unsafe impl Send for ObjectCore {}
// SAFETY: See `Send`.
unsafe impl Sync for ObjectCore {}

/// An open object's header and core, after checking the class.
///
/// # Safety
///
/// `fid` is NULL or points to an object header valid for reads whose
/// `core`, when non-NULL, was set by [`attach`] and is still open.
pub(crate) unsafe fn checked<'a>(fid: *mut sys::kfid, class: u32) -> Result<&'a ObjectCore> {
    let fid = NonNull::new(fid).ok_or(EINVAL)?;
    // SAFETY: Valid for reads (safety requirement).
    let f = unsafe { fid.as_ref() };
    if f.fclass != class || f.core.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: `core` was set by `attach` and the object is open.
    Ok(unsafe { &*f.core.cast::<ObjectCore>() })
}

/// As [`checked`], for a call off the data path: `fid` must also be
/// filed as open (`live.rs`), which is looked at before `fid` is read, so
/// a pointer to an object closed already is `EINVAL`.
///
/// # Safety
///
/// `fid` is NULL, an object closed already, or points to an object header
/// valid for reads whose `core` was set by [`attach`].
pub(crate) unsafe fn checked_open<'a>(fid: *mut sys::kfid, class: u32) -> Result<&'a ObjectCore> {
    // SAFETY: As required.
    unsafe { filed_core(fid) }?;
    // SAFETY: Filed as open, so a valid header of an open object.
    unsafe { checked(fid, class) }
}

/// The core `fid` is filed with (`live.rs`), looked up before `fid` is
/// read, and found in its header too: `EINVAL` for an object closed
/// already, or not attached yet (a new object that got the address of a
/// closed one is filed just before its header is written).
///
/// # Safety
///
/// As for [`checked_open`].
unsafe fn filed_core(fid: *mut sys::kfid) -> Result<*const c_void> {
    let filed = live::core_of(fid).ok_or(EINVAL)?;
    // SAFETY: Filed as open: a header valid for reads until its close,
    // which the caller does not run at the same time (the C contract).
    if unsafe { (*fid).core }.cast_const() != filed {
        return Err(EINVAL);
    }
    Ok(filed)
}

/// [`class_of`] for a call off the data path: `fid` must be filed as open.
///
/// # Safety
///
/// As for [`checked_open`].
pub(crate) unsafe fn class_of_open(fid: *mut sys::kfid) -> Result<u32> {
    // SAFETY: As required.
    unsafe { filed_core(fid) }?;
    // SAFETY: Filed as open, so a valid header of an open object.
    unsafe { class_of(fid) }
}

/// The class of an open object, or `EINVAL`.
///
/// # Safety
///
/// As for [`checked`].
pub(crate) unsafe fn class_of(fid: *mut sys::kfid) -> Result<u32> {
    let fid = NonNull::new(fid).ok_or(EINVAL)?;
    // SAFETY: Valid for reads (safety requirement).
    let f = unsafe { fid.as_ref() };
    if f.core.is_null() || f.fclass == sys::KFI_CLASS_UNSPEC || f.fclass >= sys::KFI_CLASS_MAX {
        return Err(EINVAL);
    }
    Ok(f.fclass)
}

/// A reservation for a new object: its core, allocated before the provider
/// is asked, so that nothing can fail after the provider created it.
pub(crate) struct Pending {
    core: KBox<ObjectCore>,
}

impl Pending {
    /// Reserves a root object (a fabric) of the provider `pref`.
    pub(crate) fn root(pref: ProviderRef, class: u32) -> Result<Self> {
        Self::new(pref, class, None)
    }

    /// Reserves a child of the open object `parent`; `parent` counts it
    /// from now on, so it cannot be closed meanwhile.
    pub(crate) fn child(parent: &ObjectCore, class: u32) -> Result<Self> {
        let pref = parent.pref.try_clone()?;
        let mut me = Self::new(pref, class, None)?;
        // Under GRAPH, so that a concurrent close of the parent either sees
        // this child (-EBUSY) or finished before it.
        let _guard = GRAPH.lock();
        // A parent being closed takes no child. Not counted yet, so `me`
        // does not touch the parent as it drops: that parent may be freed
        // as soon as GRAPH is released.
        if parent.closing.load(Relaxed) {
            return Err(EBUSY);
        }
        parent.users.add(1, Relaxed);
        // INVARIANT: counted by the parent from here; `me` uncounts itself
        // as it drops.
        me.core.parent = Some(NonNull::from(parent));
        Ok(me)
    }

    fn new(pref: ProviderRef, class: u32, parent: Option<NonNull<ObjectCore>>) -> Result<Self> {
        let core = KBox::new(
            ObjectCore {
                pref,
                class,
                users: Atomic::new(0),
                parent,
                bound: UnsafeCell::new(KVec::new()),
                closing: Atomic::new(false),
                fid: None,
            },
            GFP_KERNEL,
        )?;
        Ok(Self { core })
    }

    /// The provider the object will belong to.
    pub(crate) fn provider(&self) -> &sys::kfi_provider {
        self.core.pref.provider()
    }

    /// Makes `fid`, just created by the provider, an open object.
    ///
    /// # Safety
    ///
    /// `fid` must point to a valid object header, not yet shared with the
    /// ULP.
    pub(crate) unsafe fn attach(mut self, fid: NonNull<sys::kfid>, context: *mut c_void) {
        let class = self.core.class;
        self.core.fid = Some(fid);
        let core = KBox::into_raw(self.core);
        // SAFETY: Valid and exclusively ours (safety requirement).
        let f = unsafe { &mut *fid.as_ptr() };
        f.fclass = class;
        f.context = context;
        // INVARIANT: the parent already counts this object (`child`).
        f.core = core.cast();
        if let Some(c) = LIVE.get(class as usize) {
            c.add(1, Relaxed);
        }
    }
}

impl Drop for ObjectCore {
    fn drop(&mut self) {
        if let Some(p) = self.parent {
            // SAFETY: The parent is open while it counts us (type invariant).
            unsafe { p.as_ref() }.users.fetch_sub(1, Release);
        }
    }
}

/// Runs a provider's open entry point and attaches what it returns.
///
/// `open` gets the out pointer to fill and returns the provider's result.
///
/// # Safety
///
/// `out` is valid for writes; `open` returns a valid object header of the
/// class of `pending` (at `obj`'s `fid`) when it succeeds.
pub(crate) unsafe fn finish_open<T>(
    pending: Pending,
    out: *mut *mut T,
    context: *mut c_void,
    fid_of: impl FnOnce(*mut T) -> *mut sys::kfid,
    open: impl FnOnce(*mut *mut T) -> c_int,
) -> Result {
    if out.is_null() {
        return Err(EINVAL);
    }
    let mut obj: *mut T = core::ptr::null_mut();
    to_result(open(&mut obj))?;
    let fid = NonNull::new(fid_of(obj)).filter(|_| !obj.is_null());
    let Some(fid) = fid else {
        pr_err!("provider {} returned no object\n", pending.provider_name());
        return Err(EIO);
    };
    let core: *const ObjectCore = &*pending.core;
    if let Err(e) = live::insert(fid.as_ptr(), core.cast()) {
        // Not handed out: the provider takes it back.
        // SAFETY: The provider's new, valid and unshared object.
        unsafe { provider_close(fid) };
        return Err(e);
    }
    // SAFETY: The provider returned a valid, unshared object (safety
    // requirement); `out` is valid for writes.
    unsafe {
        pending.attach(fid, context);
        *out = obj;
    }
    Ok(())
}

/// Closes `fid` through its provider, for an object never handed out;
/// its provider's failure is logged (it can only leak).
///
/// # Safety
///
/// `fid` is a valid object header its provider just created.
unsafe fn provider_close(fid: NonNull<sys::kfid>) {
    // SAFETY: A valid header (safety requirement).
    let ops = unsafe { fid.as_ref() }.ops;
    if ops.is_null() {
        pr_err!("a provider's new object has no ops: it leaks\n");
        return;
    }
    // SAFETY: A provider's ops table is valid while it is loaded, and it
    // is (the reservation pins it).
    let ops = unsafe { &*ops };
    let close = Some(ops)
        .filter(|o| has_slot(o.size, offset_of!(sys::kfi_ops, close)))
        .and_then(|o| o.close);
    let Some(close) = close else {
        pr_err!("a provider's new object has no close: it leaks\n");
        return;
    };
    // SAFETY: The provider's own object, unshared.
    let r = unsafe { close(fid.as_ptr()) };
    if r != 0 {
        pr_err!(
            "a provider failed to close an object never handed out: {}\n",
            r
        );
    }
}

impl Pending {
    fn provider_name(&self) -> &str {
        // SAFETY: A registered provider's name is a valid NUL-terminated
        // string (checked at registration).
        unsafe { CStr::from_char_ptr(self.provider().name) }
            .to_str()
            .unwrap_or("?")
    }
}

/// `kfi_fabric`: opens a fabric of the provider named in `attr`.
///
/// # Safety
///
/// `attr` is NULL or valid for reads, `fabric` NULL or valid for writes.
pub(crate) unsafe fn fabric_open(
    attr: *const sys::kfi_fabric_attr,
    fabric: *mut *mut sys::kfid_fabric,
    context: *mut c_void,
) -> Result {
    might_sleep();
    if attr.is_null() || fabric.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: Non-NULL and valid for reads (safety requirement).
    let name_ptr = unsafe { (*attr).prov_name };
    if name_ptr.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: A non-NULL name is NUL-terminated (the C contract).
    let name = unsafe { CStr::from_char_ptr(name_ptr) };
    let pending = Pending::root(ProviderRef::get(name)?, sys::KFI_CLASS_FABRIC)?;
    let open = pending.provider().fabric.ok_or(ENOSYS)?;
    // SAFETY: `fabric` is valid for writes; the provider returns a fabric.
    unsafe {
        finish_open(
            pending,
            fabric,
            context,
            |f| &raw mut (*f).fid,
            // SAFETY: The provider is pinned; the arguments are valid.
            |out| open(attr, out, context),
        )
    }?;
    // SAFETY: Just opened, valid.
    unsafe {
        (**fabric).api_version =
            crate::kfi_sys::KFI_MAJOR_VERSION << 16 | crate::kfi_sys::KFI_MINOR_VERSION
    };
    Ok(())
}

/// `kfi_close`: closes any object and drops its provider reference.
///
/// The provider's `close` runs without the object graph lock, which every
/// open, bind and close in the kernel takes: a close that waits (a region
/// a peer still reaches, for a bounded grace) holds up no one else. The
/// object is marked closing meanwhile: it takes no child and no binding,
/// and a second close is `-EBUSY`.
///
/// # Safety
///
/// `fid` is NULL, an object closed already, or points to an object header
/// valid for reads.
pub(crate) unsafe fn close(fid: *mut sys::kfid) -> Result {
    might_sleep();
    // Not read unless filed as open: a second close is `EINVAL`.
    // SAFETY: As required.
    let filed = unsafe { filed_core(fid) }?;
    // SAFETY: Filed as open, so a readable header of an open object.
    let class = unsafe { class_of(fid) }?;
    // SAFETY: `fid` is NULL or a readable header of an open object (this
    // function's requirement); `class` was just read from it.
    let core = unsafe { checked(fid, class) }?;
    // SAFETY: `fid` is valid for reads (checked above).
    let ops = unsafe { (*fid).ops };
    if ops.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: An open object's ops table lives as long as its provider,
    // which the object pins.
    let ops = unsafe { &*ops };
    if !has_slot(ops.size, offset_of!(sys::kfi_ops, close)) {
        return Err(ENOSYS);
    }
    let close = ops.close.ok_or(ENOSYS)?;
    {
        let _guard = GRAPH.lock();
        if core.users.load(Acquire) != 0 || core.closing.load(Relaxed) {
            return Err(EBUSY);
        }
        core.closing.store(true, Relaxed);
    }
    let core_ptr: *const ObjectCore = core;
    // SAFETY: `fid` is an open object of this provider with no dependents,
    // and none can come while it is closing.
    let r = to_result(unsafe { close(fid) });
    let guard = GRAPH.lock();
    if let Err(e) = r {
        core.closing.store(false, Relaxed);
        return Err(e);
    }
    // An object opened since the provider's close returned may have this
    // one's address (the allocator gave it the memory) and events queued
    // already, bound before this took GRAPH: those stay, and so then do
    // this one's, which nothing tells apart from them.
    let reused = live::core_of(fid).is_some_and(|c| c != filed);
    // Before its core is freed: a new object at this address has another.
    live::remove(fid, filed);
    // SAFETY: The object is gone; its core was made by `attach` from a
    // `KBox` and nothing else refers to it (no users).
    let core = unsafe { KBox::from_raw(core_ptr.cast_mut()) };
    // SAFETY: Under GRAPH (invariant of `bound`).
    for b in unsafe { &*core.bound.get() }.iter() {
        // SAFETY: Bound objects are open while counted (type invariant).
        let b = unsafe { b.as_ref() };
        match (b.class, b.fid) {
            (sys::KFI_CLASS_EQ, Some(eq)) if !reused => {
                // SAFETY: An open EQ (it is counted until just below); the
                // provider posts nothing about `fid` once its close
                // returned.
                unsafe { util_eq::forget(eq.as_ptr().cast(), fid) };
            }
            _ => {}
        }
        b.users.fetch_sub(1, Release);
    }
    drop(guard);
    if let Some(c) = LIVE.get(class as usize) {
        c.fetch_sub(1, Relaxed);
    }
    drop(core);
    Ok(())
}

/// Binds `bound` to `target` through the provider's `bind`: on success
/// `bound` cannot be closed before `target`.
pub(crate) fn bind(
    target: &ObjectCore,
    bound: &ObjectCore,
    provider_bind: impl FnOnce() -> c_int,
) -> Result {
    might_sleep();
    {
        let _guard = GRAPH.lock();
        if target.closing.load(Relaxed) || bound.closing.load(Relaxed) {
            return Err(EBUSY);
        }
        // SAFETY: Under GRAPH (invariant of `bound`).
        let list = unsafe { &mut *target.bound.get() };
        // INVARIANT: counted right away; undone below if the bind fails.
        list.push(NonNull::from(bound), GFP_KERNEL)?;
        bound.users.add(1, Relaxed);
    }
    let ret = to_result(provider_bind());
    if ret.is_err() {
        let _guard = GRAPH.lock();
        // SAFETY: Under GRAPH (invariant of `bound`).
        let list = unsafe { &mut *target.bound.get() };
        if let Some(i) = list.iter().rposition(|b| core::ptr::eq(b.as_ptr(), bound)) {
            let _ = list.remove(i);
            bound.users.fetch_sub(1, Release);
        }
    }
    ret
}
