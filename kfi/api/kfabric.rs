// SPDX-License-Identifier: GPL-2.0

//! Safe Rust access to kfabric for Rust ULPs, providers and tests.
//!
//! This file is compiled into each crate that uses it (`#[path]` inclusion
//! next to `kfi_sys.rs`); the objects it hands out are those of
//! `kfabric.ko`, reached through the exported C ABI, so every crate sees the
//! same registry and objects.

use core::{
    cell::UnsafeCell,
    ffi::CStr,
    ptr::NonNull,
    sync::atomic::{AtomicBool, Ordering},
};
use kernel::{error::to_result, prelude::*, str::CStrExt, ThisModule};

use super::kfi_sys as sys;

/// The kfabric API version this crate was built against.
pub(crate) const API_VERSION: u32 = sys::KFI_MAJOR_VERSION << 16 | sys::KFI_MINOR_VERSION;

/// One of kfabric's own error codes (`KFI_ENOCQ`, `KFI_ENOEQ`, ...) as an
/// error, to return from a provider (`EINVAL` for a code no errno can
/// hold).
pub(crate) fn kfi_error(code: u32) -> Error {
    c_int::try_from(code).map_or(EINVAL, |c| Error::from_errno(-c))
}

/// Builds an API version number from its parts.
pub(crate) const fn version(major: u32, minor: u32) -> u32 {
    major << 16 | (minor & 0xffff)
}

/// The signature of a provider's fabric-open entry point.
pub(crate) type FabricOpenFn = unsafe extern "C" fn(
    *const sys::kfi_fabric_attr,
    *mut *mut sys::kfid_fabric,
    *mut c_void,
) -> c_int;

/// A provider description kept in a `static`.
///
/// # Invariants
///
/// The inner `kfi_provider` is written only by [`Registration::register`],
/// while it holds `registered` and before it hands the description to
/// kfabric.ko, and only read afterwards; `registered` is set from then
/// until the registration ends.
pub(crate) struct StaticProvider(UnsafeCell<sys::kfi_provider>, AtomicBool);

// SAFETY: After registration the description is only read (type invariant);
// the one write happens before it is shared with kfabric.ko, by the one
// caller that set `registered`.
unsafe impl Sync for StaticProvider {}

impl StaticProvider {
    /// Describes a provider named `name` of version `version`.
    // `CStrExt::as_char_ptr` is not a `const fn`; the cast below is what it does.
    #[allow(clippy::disallowed_methods)]
    pub(crate) const fn new(
        name: &'static CStr,
        version: u32,
        fabric: Option<FabricOpenFn>,
    ) -> Self {
        Self(
            UnsafeCell::new(sys::kfi_provider {
                name: name.as_ptr().cast(),
                version,
                owner: core::ptr::null_mut(),
                getinfo: None,
                fabric,
            }),
            AtomicBool::new(false),
        )
    }

    /// The raw description, for calls through the C ABI.
    pub(crate) fn as_ptr(&self) -> *mut sys::kfi_provider {
        self.0.get()
    }
}

/// A provider registered with kfabric.ko; deregistered when dropped.
///
/// # Invariants
///
/// `prov` was registered by a successful `kfi_provider_register` and has not
/// been deregistered.
pub(crate) struct Registration {
    prov: &'static StaticProvider,
}

impl Registration {
    /// Registers `prov`, implemented by `module`, with API version `api`.
    ///
    /// Context: process context; may sleep.
    pub(crate) fn register_version(
        prov: &'static StaticProvider,
        module: &'static ThisModule,
        api: u32,
    ) -> Result<Self> {
        // A second registration of one description must not write the
        // owner that kfabric.ko may be reading.
        if prov.1.swap(true, Ordering::AcqRel) {
            return Err(EEXIST);
        }
        // SAFETY: The description is not shared yet (or was deregistered),
        // and this caller alone set `registered`: nothing else reads or
        // writes it while the owner is written.
        unsafe { (*prov.as_ptr()).owner = module.as_ptr() };
        // SAFETY: `prov` is a valid provider description that lives forever.
        let ret = unsafe { sys::kfi_provider_register(api, prov.as_ptr()) };
        if let Err(e) = to_result(ret) {
            prov.1.store(false, Ordering::Release);
            return Err(e);
        }
        // INVARIANT: the registration succeeded.
        Ok(Self { prov })
    }

    /// Registers `prov` with the API version this crate was built against.
    pub(crate) fn register(
        prov: &'static StaticProvider,
        module: &'static ThisModule,
    ) -> Result<Self> {
        Self::register_version(prov, module, API_VERSION)
    }

    /// Deregisters now; on failure (objects still open) the registration
    /// is handed back with the error.
    pub(crate) fn deregister(self) -> core::result::Result<(), (Self, Error)> {
        // SAFETY: `self.prov` is registered (type invariant).
        let ret = unsafe { sys::kfi_provider_deregister(self.prov.as_ptr()) };
        match to_result(ret) {
            Ok(()) => {
                self.prov.1.store(false, Ordering::Release);
                core::mem::forget(self);
                Ok(())
            }
            Err(e) => Err((self, e)),
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        // SAFETY: `self.prov` is registered (type invariant).
        let ret = unsafe { sys::kfi_provider_deregister(self.prov.as_ptr()) };
        if ret != 0 {
            // Still registered: the description stays taken.
            pr_err!("provider deregistration failed: {}\n", ret);
        } else {
            self.prov.1.store(false, Ordering::Release);
        }
    }
}

/// A `kfi_info` entry that kfabric.ko made (an entry of a [`getinfo`]
/// list or of a connection request, or hints), borrowed for `'a`: the
/// only kind of entry the safe calls take, as the core and the providers
/// follow its pointers (attributes, addresses of the lengths it gives,
/// the next entry). Its fields read as a `kfi_info`'s (`Deref`); a copy of
/// them is a plain value that no safe call takes.
///
/// # Invariants
///
/// The entry's pointers are as kfabric.ko made them (or point to memory
/// of the lengths the entry gives), valid for `'a`.
#[derive(Clone, Copy)]
pub(crate) struct Info<'a>(&'a sys::kfi_info);

impl<'a> Info<'a> {
    /// Wraps an entry.
    ///
    /// # Safety
    ///
    /// `info` was made by kfabric.ko (`kfi_getinfo`, `kfi_allocinfo`,
    /// `kfi_dupinfo`, a `KFI_CONNREQ` event) and its pointer fields were
    /// not changed since, or point to memory valid for `'a` of the lengths
    /// the entry gives.
    pub(crate) unsafe fn new(info: &'a sys::kfi_info) -> Self {
        // INVARIANT: the caller's promise.
        Self(info)
    }

    /// The entry, for a raw call.
    pub(crate) fn as_ptr(self) -> *mut sys::kfi_info {
        core::ptr::from_ref(self.0).cast_mut()
    }
}

impl core::ops::Deref for Info<'_> {
    type Target = sys::kfi_info;

    fn deref(&self) -> &sys::kfi_info {
        self.0
    }
}

/// A list of `kfi_info` entries from [`getinfo`]; freed when dropped.
///
/// # Invariants
///
/// `head` is the non-empty list `kfi_getinfo` returned, not freed yet.
pub(crate) struct InfoList {
    head: NonNull<sys::kfi_info>,
}

impl InfoList {
    /// The entries, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = Info<'_>> {
        let mut cur: *const sys::kfi_info = self.head.as_ptr();
        core::iter::from_fn(move || {
            // SAFETY: The list is valid while `self` is (type invariant).
            let e = unsafe { cur.as_ref() }?;
            cur = e.next;
            // SAFETY: An entry of kfi_getinfo's list, unchanged (no
            // mutable access is given out), valid while the list is.
            Some(unsafe { Info::new(e) })
        })
    }

    /// The first entry.
    pub(crate) fn entry(&self) -> Info<'_> {
        // SAFETY: The list is owned and non-empty (type invariant); its
        // entries are kfi_getinfo's, unchanged, valid while it is.
        unsafe { Info::new(self.head.as_ref()) }
    }

    pub(crate) fn first(&self) -> *mut sys::kfi_info {
        self.head.as_ptr()
    }
}

impl Drop for InfoList {
    fn drop(&mut self) {
        // SAFETY: The list came from kfi_getinfo and is freed once here.
        unsafe { sys::kfi_freeinfo(self.head.as_ptr()) };
    }
}

/// `kfi_getinfo` with `hints` (None: everything).
///
/// Context: process context; may sleep.
pub(crate) fn getinfo(hints: Option<Info<'_>>, flags: u64) -> Result<InfoList> {
    let mut out: *mut sys::kfi_info = core::ptr::null_mut();
    let h = hints.map_or(core::ptr::null(), |h| h.as_ptr().cast_const());
    // SAFETY: `h` is NULL or a valid entry for the call; `out` is writable.
    to_result(unsafe {
        sys::kfi_getinfo(
            API_VERSION,
            core::ptr::null(),
            core::ptr::null(),
            flags,
            h,
            &mut out,
        )
    })?;
    let head = NonNull::new(out).ok_or(EIO)?;
    // INVARIANT: a non-empty list from kfi_getinfo.
    Ok(InfoList { head })
}

/// `kfi_getinfo` for `node`/`service` with `hints`.
///
/// Context: process context; may sleep.
pub(crate) fn getinfo_at(
    node: &CStr,
    service: &CStr,
    flags: u64,
    hints: Option<Info<'_>>,
) -> Result<InfoList> {
    let mut out: *mut sys::kfi_info = core::ptr::null_mut();
    let h = hints.map_or(core::ptr::null(), |h| h.as_ptr().cast_const());
    // SAFETY: Valid strings and entry for the call; `out` is writable.
    to_result(unsafe {
        sys::kfi_getinfo(
            API_VERSION,
            node.as_char_ptr(),
            service.as_char_ptr(),
            flags,
            h,
            &mut out,
        )
    })?;
    let head = NonNull::new(out).ok_or(EIO)?;
    // INVARIANT: a non-empty list from kfi_getinfo.
    Ok(InfoList { head })
}

/// An object of kfabric (a `#[repr(C)]` struct starting with its `kfid`).
///
/// # Safety
///
/// Implementors are C object types whose first field is a `kfid`.
pub(crate) unsafe trait KfiObject {}

// SAFETY: Each of these starts with `struct kfid fid`.
unsafe impl KfiObject for sys::kfid_fabric {}
// SAFETY: Starts with its kfid.
unsafe impl KfiObject for sys::kfid_domain {}
// SAFETY: Starts with its kfid.
unsafe impl KfiObject for sys::kfid_ep {}
// SAFETY: Starts with its kfid.
unsafe impl KfiObject for sys::kfid_pep {}
// SAFETY: Starts with its kfid.
unsafe impl KfiObject for sys::kfid_cq {}
// SAFETY: Starts with its kfid.
unsafe impl KfiObject for sys::kfid_eq {}
// SAFETY: Starts with its kfid.
unsafe impl KfiObject for sys::kfid_cntr {}
// SAFETY: Starts with its kfid.
unsafe impl KfiObject for sys::kfid_mr {}
// SAFETY: Starts with its kfid.
unsafe impl KfiObject for sys::kfid_av {}

/// An open object of type `T`; closed when dropped.
///
/// Dropping it calls `kfi_close()`, which may sleep (a region's close
/// waits, for a bounded grace, for the peers still reaching it; an
/// endpoint's for its work items): drop it in process context only, never
/// under a spinlock or in a completion or event handler. A close that
/// fails (another object still uses this one) is logged and the object
/// stays open, leaked; [`Owned::close`] returns it instead.
///
/// # Invariants
///
/// `ptr` was opened by a kfi_* call and is not closed yet.
pub(crate) struct Owned<T: KfiObject> {
    ptr: NonNull<T>,
}

impl<T: KfiObject> Owned<T> {
    /// Opens an object with `open`, which gets the out pointer and returns
    /// the kfi_* call's result.
    pub(crate) fn open(open: impl FnOnce(*mut *mut T) -> c_int) -> Result<Self> {
        let mut out: *mut T = core::ptr::null_mut();
        to_result(open(&mut out))?;
        let ptr = NonNull::new(out).ok_or(EIO)?;
        // INVARIANT: opened successfully just now.
        Ok(Self { ptr })
    }

    /// The object, for calls through the C ABI.
    pub(crate) fn as_ptr(&self) -> *mut T {
        self.ptr.as_ptr()
    }

    /// Its header.
    pub(crate) fn fid(&self) -> *mut sys::kfid {
        self.ptr.as_ptr().cast()
    }

    /// Closes it now, handing it back with the error when the close fails.
    pub(crate) fn close(self) -> core::result::Result<(), (Self, Error)> {
        // SAFETY: Open (type invariant); on success never used again.
        match to_result(unsafe { sys::kfi_close(self.fid()) }) {
            Ok(()) => {
                core::mem::forget(self);
                Ok(())
            }
            Err(e) => Err((self, e)),
        }
    }
}

impl<T: KfiObject> Drop for Owned<T> {
    fn drop(&mut self) {
        // SAFETY: Open (type invariant), closed only here.
        let ret = unsafe { sys::kfi_close(self.fid()) };
        if ret != 0 {
            pr_err!("kfabric: closing an object failed: {}\n", ret);
        }
    }
}

/// An open fabric; closed when dropped.
///
/// # Invariants
///
/// `ptr` is a fabric opened by `kfi_fabric` and not closed yet.
pub(crate) struct Fabric {
    ptr: NonNull<sys::kfid_fabric>,
}

impl Fabric {
    /// Opens a fabric of the provider `prov_name`.
    ///
    /// Context: process context; may sleep.
    pub(crate) fn open(prov_name: &CStr) -> Result<Self> {
        let attr = sys::kfi_fabric_attr {
            prov_name: prov_name.as_char_ptr().cast_mut(),
            ..Default::default()
        };
        let mut fabric: *mut sys::kfid_fabric = core::ptr::null_mut();
        // SAFETY: `attr` and `fabric` are valid for the duration of the call.
        to_result(unsafe { sys::kfi_fabric(&attr, &mut fabric, core::ptr::null_mut()) })?;
        let ptr = NonNull::new(fabric).ok_or(EIO)?;
        // INVARIANT: opened successfully just now.
        Ok(Self { ptr })
    }

    /// The raw object header, for calls through the C ABI.
    pub(crate) fn as_fid(&self) -> *mut sys::kfid {
        // SAFETY: `ptr` is an open fabric (type invariant); taking the field
        // address does not read it.
        unsafe { &raw mut (*self.ptr.as_ptr()).fid }
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        // SAFETY: The fabric is open (type invariant) and closed only here.
        let ret = unsafe { sys::kfi_close(self.as_fid()) };
        if ret != 0 {
            pr_err!("closing a fabric failed: {}\n", ret);
        }
    }
}
