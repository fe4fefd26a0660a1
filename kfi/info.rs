// SPDX-License-Identifier: GPL-2.0

//! `kfi_info` lists: allocation, copying, freeing, and `kfi_getinfo`, which
//! asks every provider and keeps the entries that match the hints.
//!
//! An entry is one allocation holding the `kfi_info` and its five attribute
//! structures; its names and addresses are separate kmalloc'ed buffers it
//! owns.

use core::{ffi::CStr, ptr};
use kernel::{bindings, prelude::*, str::CStrExt, task::might_sleep};

use crate::{kfi_sys as sys, registry, slot::errno};

/// One `kfi_info` entry with its attributes.
///
/// # Invariants
///
/// `info`'s attribute pointers point at the fields of the same block.
#[repr(C)]
#[derive(Default)]
struct Block {
    info: sys::kfi_info,
    tx: sys::kfi_tx_attr,
    rx: sys::kfi_rx_attr,
    ep: sys::kfi_ep_attr,
    domain: sys::kfi_domain_attr,
    fabric: sys::kfi_fabric_attr,
}

/// A zeroed entry with its attributes linked.
fn alloc_block() -> Result<*mut sys::kfi_info> {
    let b = KBox::into_raw(KBox::new(Block::default(), GFP_KERNEL)?);
    // SAFETY: `b` is a fresh, exclusively owned block.
    unsafe {
        // INVARIANT: the attributes are linked to the block's own fields.
        (*b).info.tx_attr = &raw mut (*b).tx;
        (*b).info.rx_attr = &raw mut (*b).rx;
        (*b).info.ep_attr = &raw mut (*b).ep;
        (*b).info.domain_attr = &raw mut (*b).domain;
        (*b).info.fabric_attr = &raw mut (*b).fabric;
    }
    Ok(b.cast())
}

/// A kmalloc'ed copy of `len` bytes at `src` (NULL for none).
///
/// # Safety
///
/// `src` is NULL or valid for `len` bytes.
unsafe fn dup_bytes(src: *const c_void, len: usize) -> Result<*mut c_void> {
    if src.is_null() || len == 0 {
        return Ok(ptr::null_mut());
    }
    let mut v = KVec::<u8>::with_capacity(len, GFP_KERNEL)?;
    // SAFETY: `src` holds `len` bytes (safety requirement).
    let bytes = unsafe { core::slice::from_raw_parts(src.cast::<u8>(), len) };
    v.extend_from_slice(bytes, GFP_KERNEL)?;
    let (p, _, _) = v.into_raw_parts();
    Ok(p.cast())
}

/// A kmalloc'ed copy of the string `s` (NULL for NULL).
///
/// # Safety
///
/// `s` is NULL or a NUL-terminated string.
unsafe fn dup_str(s: *const c_char) -> Result<*mut c_char> {
    if s.is_null() {
        return Ok(ptr::null_mut());
    }
    // SAFETY: NUL-terminated (safety requirement).
    let len = unsafe { CStr::from_char_ptr(s) }.to_bytes_with_nul().len();
    // SAFETY: `s` holds `len` bytes.
    Ok(unsafe { dup_bytes(s.cast(), len) }?.cast())
}

/// Frees a kmalloc'ed buffer (NULL is fine).
///
/// # Safety
///
/// `p` is NULL or a kmalloc'ed buffer nobody uses any more.
unsafe fn kfree(p: *mut c_void) {
    // SAFETY: The safety requirement.
    unsafe { bindings::kfree(p.cast_const()) };
}

/// Frees one entry and what it owns.
///
/// # Safety
///
/// `info` was made by `alloc_block` and is no longer used.
unsafe fn free_one(info: *mut sys::kfi_info) {
    // SAFETY: A block's info and attributes (type invariant of `Block`).
    unsafe {
        let i = &*info;
        kfree(i.src_addr);
        kfree(i.dest_addr);
        kfree((*i.fabric_attr).name.cast());
        kfree((*i.fabric_attr).prov_name.cast());
        kfree((*i.domain_attr).name.cast());
        drop(KBox::from_raw(info.cast::<Block>()));
    }
}

/// Frees a list of entries (NULL is fine).
pub(crate) fn free_list(mut info: *mut sys::kfi_info) {
    while !info.is_null() {
        // SAFETY: Entries of kfi_info lists are made by `alloc_block` (the
        // C contract of kfi_freeinfo).
        let next = unsafe { (*info).next };
        // SAFETY: As above; the list is the caller's to free.
        unsafe { free_one(info) };
        info = next;
    }
}

/// A deep copy of one entry.
///
/// # Safety
///
/// `src` is a valid entry made by `alloc_block`.
unsafe fn dup_one(src: *const sys::kfi_info) -> Result<*mut sys::kfi_info> {
    let dst = alloc_block()?;
    // SAFETY: Both are valid blocks; the copy's owned buffers are replaced
    // by fresh copies before anything can free them.
    let r = unsafe {
        let s = &*src;
        let d = &mut *dst;
        *d.tx_attr = *s.tx_attr;
        *d.rx_attr = *s.rx_attr;
        *d.ep_attr = *s.ep_attr;
        *d.domain_attr = *s.domain_attr;
        *d.fabric_attr = *s.fabric_attr;
        (*d.domain_attr).name = ptr::null_mut();
        (*d.fabric_attr).name = ptr::null_mut();
        (*d.fabric_attr).prov_name = ptr::null_mut();
        d.caps = s.caps;
        d.mode = s.mode;
        d.addr_format = s.addr_format;
        d.handle = s.handle;
        (|| -> Result {
            d.src_addr = dup_bytes(s.src_addr, s.src_addrlen)?;
            d.src_addrlen = if d.src_addr.is_null() {
                0
            } else {
                s.src_addrlen
            };
            d.dest_addr = dup_bytes(s.dest_addr, s.dest_addrlen)?;
            d.dest_addrlen = if d.dest_addr.is_null() {
                0
            } else {
                s.dest_addrlen
            };
            (*d.domain_attr).name = dup_str((*s.domain_attr).name)?;
            (*d.fabric_attr).name = dup_str((*s.fabric_attr).name)?;
            (*d.fabric_attr).prov_name = dup_str((*s.fabric_attr).prov_name)?;
            Ok(())
        })()
    };
    match r {
        Ok(()) => Ok(dst),
        Err(e) => {
            // SAFETY: Made above, not shared.
            unsafe { free_one(dst) };
            Err(e)
        }
    }
}

/// Whether the C strings `want` (a hint; NULL matches all) and `have` are
/// equal.
///
/// # Safety
///
/// Both are NULL or NUL-terminated strings.
unsafe fn str_matches(want: *const c_char, have: *const c_char) -> bool {
    if want.is_null() {
        return true;
    }
    if have.is_null() {
        return false;
    }
    // SAFETY: NUL-terminated (safety requirement).
    unsafe { CStr::from_char_ptr(want) == CStr::from_char_ptr(have) }
}

/// Whether `info` satisfies `hints`.
///
/// # Safety
///
/// Both are valid entries (attribute pointers of `hints` may be NULL).
unsafe fn matches(info: &sys::kfi_info, hints: &sys::kfi_info) -> bool {
    if hints.caps & !info.caps != 0 || info.mode & !hints.mode != 0 {
        return false;
    }
    if hints.addr_format != sys::KFI_FORMAT_UNSPEC && hints.addr_format != info.addr_format {
        return false;
    }
    // SAFETY: `info`'s attributes are its block's; `hints`' are NULL or
    // valid (safety requirement).
    unsafe {
        if let Some(h) = hints.ep_attr.as_ref() {
            if h.type_ != sys::KFI_EP_UNSPEC && h.type_ != (*info.ep_attr).type_ {
                return false;
            }
        }
        if let Some(h) = hints.tx_attr.as_ref() {
            if h.caps & !(*info.tx_attr).caps != 0 {
                return false;
            }
        }
        if let Some(h) = hints.rx_attr.as_ref() {
            if h.caps & !(*info.rx_attr).caps != 0 {
                return false;
            }
        }
        if let Some(h) = hints.domain_attr.as_ref() {
            if !str_matches(h.name, (*info.domain_attr).name) {
                return false;
            }
        }
        if let Some(h) = hints.fabric_attr.as_ref() {
            let f = &*info.fabric_attr;
            if !str_matches(h.name, f.name) || !str_matches(h.prov_name, f.prov_name) {
                return false;
            }
        }
    }
    true
}

/// The provider name `hints` asks for, if any.
///
/// # Safety
///
/// `hints` is NULL or a valid entry.
unsafe fn wanted_provider<'a>(hints: *const sys::kfi_info) -> Option<&'a CStr> {
    // SAFETY: NULL or valid (safety requirement).
    let f = unsafe { hints.as_ref()?.fabric_attr.as_ref()? };
    // SAFETY: NULL or NUL-terminated.
    (!f.prov_name.is_null()).then(|| unsafe { CStr::from_char_ptr(f.prov_name) })
}

/// Asks the provider of `pref` and appends its matching entries to `tail`.
///
/// # Safety
///
/// The arguments are those of `kfi_getinfo`, checked.
unsafe fn ask(
    pref: &registry::ProviderRef,
    version: u32,
    node: *const c_char,
    service: *const c_char,
    flags: u64,
    hints: *const sys::kfi_info,
    tail: &mut *mut *mut sys::kfi_info,
) -> Result {
    let p = pref.provider();
    let Some(getinfo) = p.getinfo else {
        return Ok(());
    };
    let mut list: *mut sys::kfi_info = ptr::null_mut();
    // SAFETY: The provider is pinned by `pref`; the arguments are valid.
    let ret = unsafe { getinfo(version, node, service, flags, hints, &mut list) };
    if ret != 0 {
        free_list(list);
        return if ret == ENODATA.to_errno() {
            Ok(())
        } else {
            kernel::error::to_result(ret)
        };
    }
    while !list.is_null() {
        let cur = list;
        // SAFETY: The provider built the list with kfi_allocinfo.
        unsafe {
            list = (*cur).next;
            (*cur).next = ptr::null_mut();
            let f = &mut *(*cur).fabric_attr;
            // Entries always name their provider, so kfi_fabric() finds it.
            if f.prov_name.is_null() {
                f.prov_name = dup_str(p.name)?;
            }
            f.prov_version = p.version;
            f.api_version = sys::KFI_MAJOR_VERSION << 16 | sys::KFI_MINOR_VERSION;
            if hints.is_null() || matches(&*cur, &*hints) {
                **tail = cur;
                *tail = &raw mut (*cur).next;
            } else {
                free_one(cur);
            }
        }
    }
    Ok(())
}

/// `kfi_getinfo`.
///
/// # Safety
///
/// The C contract: NULL or valid pointers.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_getinfo(
    version: u32,
    node: *const c_char,
    service: *const c_char,
    flags: u64,
    hints: *const sys::kfi_info,
    info: *mut *mut sys::kfi_info,
) -> c_int {
    errno((|| {
        might_sleep();
        if info.is_null()
            || version >> 16 != sys::KFI_MAJOR_VERSION
            || version & 0xffff > sys::KFI_MINOR_VERSION
            || flags & !(sys::KFI_SOURCE | sys::KFI_NUMERICHOST) != 0
        {
            return Err(EINVAL);
        }
        // SAFETY: NULL or a valid entry (C contract).
        let want = unsafe { wanted_provider(hints) };
        let mut head: *mut sys::kfi_info = ptr::null_mut();
        let mut tail: *mut *mut sys::kfi_info = &mut head;
        for pref in registry::snapshot()?.iter() {
            if want.is_some_and(|w| w != pref.name()) {
                continue;
            }
            // SAFETY: Checked arguments of kfi_getinfo.
            if let Err(e) = unsafe { ask(pref, version, node, service, flags, hints, &mut tail) } {
                free_list(head);
                return Err(e);
            }
        }
        if head.is_null() {
            return Err(ENODATA);
        }
        // SAFETY: `info` is valid for writes (C contract).
        unsafe { *info = head };
        Ok(())
    })())
}

/// `kfi_allocinfo`.
#[no_mangle]
pub(crate) extern "C" fn kfi_allocinfo() -> *mut sys::kfi_info {
    alloc_block().unwrap_or(ptr::null_mut())
}

/// `kfi_dupinfo`.
///
/// # Safety
///
/// The C contract: NULL or an entry made by kfi_allocinfo.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_dupinfo(info: *const sys::kfi_info) -> *mut sys::kfi_info {
    if info.is_null() {
        return ptr::null_mut();
    }
    // SAFETY: A valid entry (C contract).
    unsafe { dup_one(info) }.unwrap_or(ptr::null_mut())
}

/// `kfi_freeinfo`.
///
/// # Safety
///
/// The C contract: NULL or a list of entries made by kfi_allocinfo.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_freeinfo(info: *mut sys::kfi_info) {
    free_list(info);
}
