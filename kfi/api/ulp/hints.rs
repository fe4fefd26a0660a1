// SPDX-License-Identifier: GPL-2.0

//! Discovery: hints for `kfi_getinfo` and the entries it lists.

use core::{ffi::CStr, ptr::NonNull};
use kernel::{error::to_result, prelude::*, str::CStrExt};

use super::super::{
    kfabric::{getinfo_at, Info, InfoList},
    kfi_sys as sys,
};

/// A hints entry, freed when dropped.
///
/// # Invariants
///
/// `ptr` was made by `kfi_allocinfo` and is owned by this value.
pub(crate) struct Hints {
    ptr: NonNull<sys::kfi_info>,
}

impl Hints {
    /// Empty hints. Process context.
    pub(crate) fn new() -> Result<Self> {
        // SAFETY: No arguments.
        let ptr = NonNull::new(unsafe { sys::kfi_allocinfo() }).ok_or(ENOMEM)?;
        // INVARIANT: fresh from kfi_allocinfo.
        Ok(Self { ptr })
    }

    /// Hints that ask for the provider `name`. Process context.
    pub(crate) fn provider(name: &CStr) -> Result<Self> {
        let h = Self::new()?;
        // SAFETY: An entry of kfabric.ko's (type invariant); the name is
        // copied.
        to_result(unsafe {
            sys::kfi_info_set(
                h.ptr.as_ptr(),
                sys::KFI_INFO_PROV_NAME,
                name.as_char_ptr().cast(),
                0,
            )
        })?;
        Ok(h)
    }

    /// The entry, to set more hints in.
    ///
    /// # Safety
    ///
    /// No pointer field of the entry is changed (kfabric.ko follows them,
    /// and frees them with it); what they point to may be, but a pointer
    /// in those (an attribute's `prov_name`, `name`, `net`) that the
    /// caller sets points to what outlives these hints and every object
    /// opened with them.
    pub(crate) unsafe fn get(&mut self) -> &mut sys::kfi_info {
        // SAFETY: Owned and valid (type invariant).
        unsafe { self.ptr.as_mut() }
    }

    /// The entry, for the calls that take one.
    pub(crate) fn info(&self) -> Info<'_> {
        // SAFETY: kfi_allocinfo's entry, whose pointers only `get`'s
        // callers could change, and promise not to.
        unsafe { Info::new(self.ptr.as_ref()) }
    }

    /// Lists what matches these hints for `node`/`service` (`flags`:
    /// `KFI_SOURCE` for a local address). Process context.
    pub(crate) fn getinfo(&self, node: &CStr, service: &CStr, flags: u64) -> Result<InfoList> {
        getinfo_at(node, service, flags, Some(self.info()))
    }
}

impl Drop for Hints {
    fn drop(&mut self) {
        // SAFETY: Owned (type invariant), freed once.
        unsafe { sys::kfi_freeinfo(self.ptr.as_ptr()) };
    }
}

impl InfoList {
    /// The source address of the first entry (empty if it has none).
    pub(crate) fn src_addr(&self) -> &[u8] {
        let e = self.entry();
        // SAFETY: An entry of the list, owned by it: its address is
        // `src_addrlen` bytes, allocated with the entry.
        unsafe { addr_bytes(e.src_addr, e.src_addrlen) }
    }

    /// The destination address of the first entry (empty if it has none).
    pub(crate) fn dest_addr(&self) -> &[u8] {
        let e = self.entry();
        // SAFETY: As for `src_addr`.
        unsafe { addr_bytes(e.dest_addr, e.dest_addrlen) }
    }
}

/// The `len` bytes at `addr` (NULL: none).
///
/// # Safety
///
/// `addr` is NULL or valid for reads of `len` bytes for `'a`.
unsafe fn addr_bytes<'a>(addr: *mut c_void, len: usize) -> &'a [u8] {
    if addr.is_null() {
        return &[];
    }
    // SAFETY: Valid for `len` bytes (safety requirement).
    unsafe { core::slice::from_raw_parts(addr.cast::<u8>(), len) }
}
