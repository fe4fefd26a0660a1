// SPDX-License-Identifier: GPL-2.0

//! The provider registry.
//!
//! Providers live in one list behind a mutex; the list is touched only on
//! control paths (registration, object creation, debugfs). An open object
//! does not look its provider up again: it holds a [`ProviderRef`].

use core::{ffi::CStr, ptr::NonNull};
use kernel::{
    bindings,
    prelude::*,
    str::CStrExt,
    sync::{
        atomic::{Acquire, Atomic, Relaxed, Release},
        Arc,
    },
    task::might_sleep,
};

use crate::kfi_sys as sys;

/// One registered provider.
///
/// # Invariants
///
/// `prov` points to a provider description that stays valid and unchanged
/// while it is registered, and longer while `objects` is non-zero (it cannot
/// be deregistered then).
pub(crate) struct Entry {
    prov: NonNull<sys::kfi_provider>,
    /// Open objects of the provider, and opens in flight.
    objects: Atomic<i64>,
}

// SAFETY: The provider description is only read, from any thread; providers
// hand it over for exactly that (kfi_provider_register's contract).
unsafe impl Send for Entry {}
// SAFETY: See `Send`; `objects` is atomic.
unsafe impl Sync for Entry {}

impl Entry {
    /// The provider's description.
    pub(crate) fn provider(&self) -> &sys::kfi_provider {
        // SAFETY: Valid while this entry exists (type invariant).
        unsafe { self.prov.as_ref() }
    }

    /// The provider's name.
    pub(crate) fn name(&self) -> &CStr {
        // SAFETY: `register` checked that the name is non-NULL; the
        // description, name included, is valid (type invariant).
        unsafe { CStr::from_char_ptr(self.provider().name) }
    }

    /// Open objects of the provider.
    pub(crate) fn objects(&self) -> i64 {
        self.objects.load(Relaxed)
    }
}

kernel::sync::global_lock! {
    // SAFETY: Initialized by `init` in the module initializer before first use.
    unsafe(uninit) static REGISTRY: Mutex<KVec<Arc<Entry>>> = KVec::new();
}

/// Sets up the registry.
///
/// # Safety
///
/// Must be called exactly once, before any other function of this module.
pub(crate) unsafe fn init() {
    // SAFETY: Called once, before use (the function's safety requirement).
    unsafe { REGISTRY.init() };
}

/// Frees the registry's memory at module exit (a static is never dropped).
///
/// Providers are gone by then: each holds a module reference on kfabric.ko
/// through its use of the exported symbols.
pub(crate) fn release() {
    let old = core::mem::take(&mut *REGISTRY.lock());
    if !old.is_empty() {
        pr_err!("{} provider(s) still registered at unload\n", old.len());
    }
}

/// Calls `f` for each registered provider, in registration order.
pub(crate) fn for_each(mut f: impl FnMut(&Entry) -> core::fmt::Result) -> core::fmt::Result {
    REGISTRY.lock().iter().try_for_each(|e| f(e))
}

/// Adds `prov` to the registry (`kfi_provider_register`).
pub(crate) fn register(version: u32, prov: *mut sys::kfi_provider) -> Result {
    might_sleep();
    let prov = NonNull::new(prov).ok_or(EINVAL)?;
    if version >> 16 != sys::KFI_MAJOR_VERSION || version & 0xffff > sys::KFI_MINOR_VERSION {
        pr_warn!(
            "provider built for API {}.{} refused (core is {}.{})\n",
            version >> 16,
            version & 0xffff,
            sys::KFI_MAJOR_VERSION,
            sys::KFI_MINOR_VERSION
        );
        return Err(EINVAL);
    }
    // A provider in a module must name it: its objects pin the module by
    // that, or it could unload under them. A description, or a callback,
    // in module (or vmalloc) memory is taken for a module's (a module may
    // allocate its description); a built-in one has none.
    // SAFETY: The caller hands over a valid description (the C contract).
    let p = unsafe { prov.as_ref() };
    let in_module = |addr: *const c_void| {
        // SAFETY: Only compares the address with the module and vmalloc
        // areas.
        !addr.is_null() && unsafe { bindings::is_vmalloc_or_module_addr(addr) } != 0
    };
    let modular = in_module(prov.as_ptr().cast_const().cast())
        || in_module(p.getinfo.map_or(core::ptr::null(), |f| f as *const c_void))
        || in_module(p.fabric.map_or(core::ptr::null(), |f| f as *const c_void));
    if p.owner.is_null() && modular {
        pr_warn!("provider without its owner module refused\n");
        return Err(EINVAL);
    }
    let name_ptr = p.name;
    if name_ptr.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: A non-NULL provider name is a NUL-terminated string (the C
    // contract).
    let len = unsafe { CStr::from_char_ptr(name_ptr) }.to_bytes().len();
    if len == 0 || len >= sys::KFI_NAME_MAX as usize {
        return Err(EINVAL);
    }
    // INVARIANT: the description is valid until deregistered (C contract).
    let entry = Arc::new(
        Entry {
            prov,
            objects: Atomic::new(0),
        },
        GFP_KERNEL,
    )?;
    let mut reg = REGISTRY.lock();
    if reg
        .iter()
        .any(|e| e.prov == prov || e.name() == entry.name())
    {
        return Err(EEXIST);
    }
    reg.push(entry, GFP_KERNEL)?;
    Ok(())
}

/// Removes `prov` from the registry (`kfi_provider_deregister`).
pub(crate) fn deregister(prov: *mut sys::kfi_provider) -> Result {
    might_sleep();
    let prov = NonNull::new(prov).ok_or(EINVAL)?;
    let mut reg = REGISTRY.lock();
    let idx = reg.iter().position(|e| e.prov == prov).ok_or(ENOENT)?;
    // New references are only taken under the lock we hold, so a zero
    // count stays zero until the entry is gone.
    if reg[idx].objects.load(Acquire) != 0 {
        return Err(EBUSY);
    }
    reg.remove(idx).map_err(|_| EINVAL)?;
    Ok(())
}

/// A counted reference to a registered provider, held by every open object.
///
/// # Invariants
///
/// `entry.objects` counts this reference, and when the provider has an owner
/// module, one reference on that module is held for it.
pub(crate) struct ProviderRef {
    entry: Arc<Entry>,
}

/// References on every registered provider whose module is live, in
/// registration order (for calls that ask all providers).
pub(crate) fn snapshot() -> Result<KVec<ProviderRef>> {
    let reg = REGISTRY.lock();
    let mut out = KVec::with_capacity(reg.len(), GFP_KERNEL)?;
    for e in reg.iter() {
        if let Ok(r) = ProviderRef::take(e) {
            out.push(r, GFP_KERNEL)?;
        }
    }
    Ok(out)
}

impl ProviderRef {
    /// Takes a reference on `entry` (called with the registry locked).
    fn take(entry: &Arc<Entry>) -> Result<Self> {
        let owner = entry.provider().owner;
        // SAFETY: A registered provider's owner is NULL or its live module:
        // the module deregisters in its exit path, which needs the registry
        // lock our caller holds.
        if !owner.is_null() && !unsafe { bindings::try_module_get(owner) } {
            return Err(ENODEV);
        }
        entry.objects.add(1, Relaxed);
        // INVARIANT: counted and the module reference taken just above.
        Ok(Self {
            entry: entry.clone(),
        })
    }

    /// The name of the provider.
    pub(crate) fn name(&self) -> &CStr {
        self.entry.name()
    }

    /// Takes a reference on the provider called `name`.
    ///
    /// Fails with `ENODEV` when there is none or its module is going away.
    pub(crate) fn get(name: &CStr) -> Result<Self> {
        let reg = REGISTRY.lock();
        let entry = reg.iter().find(|e| e.name() == name).ok_or(ENODEV)?;
        Self::take(entry)
    }

    /// The provider's description.
    pub(crate) fn provider(&self) -> &sys::kfi_provider {
        self.entry.provider()
    }

    /// Takes another reference on the same provider (for a child object).
    pub(crate) fn try_clone(&self) -> Result<Self> {
        let owner = self.entry.provider().owner;
        // SAFETY: `self` holds a module reference on `owner` (type
        // invariant), so the module is alive.
        if !owner.is_null() && !unsafe { bindings::try_module_get(owner) } {
            return Err(ENODEV);
        }
        self.entry.objects.add(1, Relaxed);
        // INVARIANT: counted and the module reference taken just above.
        Ok(Self {
            entry: self.entry.clone(),
        })
    }
}

impl Drop for ProviderRef {
    fn drop(&mut self) {
        let owner = self.entry.provider().owner;
        self.entry.objects.fetch_sub(1, Release);
        if !owner.is_null() {
            // SAFETY: This reference holds one reference on `owner` (type
            // invariant), which keeps the module alive until this call.
            unsafe { bindings::module_put(owner) };
        }
    }
}
