// SPDX-License-Identifier: GPL-2.0

//! Safe Rust access to kfabric for Rust ULPs, providers and tests.
//!
//! This file is compiled into each crate that uses it (`#[path]` inclusion
//! next to `kfi_sys.rs`); the objects it hands out are those of
//! `kfabric.ko`, reached through the exported C ABI, so every crate sees the
//! same registry and objects.

use core::{cell::UnsafeCell, ffi::CStr, ptr::NonNull};
use kernel::{error::to_result, prelude::*, str::CStrExt, ThisModule};

use super::kfi_sys as sys;

/// The kfabric API version this crate was built against.
pub(crate) const API_VERSION: u32 = sys::KFI_MAJOR_VERSION << 16 | sys::KFI_MINOR_VERSION;

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
/// The inner `kfi_provider` is written only by [`Registration::register`]
/// before it is handed to kfabric.ko, and only read afterwards.
pub(crate) struct StaticProvider(UnsafeCell<sys::kfi_provider>);

// SAFETY: After registration the description is only read (type invariant);
// the one write happens before it is shared with kfabric.ko.
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
        Self(UnsafeCell::new(sys::kfi_provider {
            name: name.as_ptr().cast(),
            version,
            owner: core::ptr::null_mut(),
            fabric,
        }))
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
        // SAFETY: The description is not shared yet (or was deregistered):
        // nothing else reads it while the owner is written.
        unsafe { (*prov.as_ptr()).owner = module.as_ptr() };
        // SAFETY: `prov` is a valid provider description that lives forever.
        to_result(unsafe { sys::kfi_provider_register(api, prov.as_ptr()) })?;
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
            pr_err!("provider deregistration failed: {}\n", ret);
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
            prov_name: prov_name.as_char_ptr(),
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
