// SPDX-License-Identifier: GPL-2.0

//! `kfi_info` lists: allocation, copying, freeing, and `kfi_getinfo`, which
//! asks every provider and keeps the entries that match the hints.
//!
//! An entry is one allocation holding the `kfi_info` and its five attribute
//! structures. Its names and addresses are separate kmalloc'ed buffers;
//! the entry owns exactly those kfabric.ko made for it (`kfi_info_set`,
//! `kfi_dupinfo`, `kfi_getinfo`) and records them, so `kfi_freeinfo` frees
//! what it allocated and never a pointer a caller stored (a string literal
//! in a hint stays the caller's).

use core::{ffi::CStr, ptr};
use kernel::{bindings, prelude::*, str::CStrExt, task::might_sleep};

use crate::{kfi_sys as sys, registry, slot::errno};

/// One `kfi_info` entry with its attributes.
///
/// # Invariants
///
/// `info`'s attribute pointers point at the fields of the same block; each
/// non-NULL `owned` entry is a kmalloc'ed buffer only this block frees.
#[repr(C)]
#[derive(Default)]
struct Block {
    info: sys::kfi_info,
    tx: sys::kfi_tx_attr,
    rx: sys::kfi_rx_attr,
    ep: sys::kfi_ep_attr,
    domain: sys::kfi_domain_attr,
    fabric: sys::kfi_fabric_attr,
    /// The buffers kfabric.ko made for this entry, by `kfi_info_field`.
    owned: [usize; FIELDS],
}

/// The longest address an entry holds (`struct sockaddr_storage`).
const ADDR_MAX: usize = 128;

/// The pointer fields of an entry (`enum kfi_info_field`).
const FIELDS: usize = sys::KFI_INFO_FIELD_LAST as usize;

/// The block of an entry.
///
/// # Safety
///
/// `info` was made by `alloc_block` and is live.
unsafe fn block<'a>(info: *mut sys::kfi_info) -> &'a mut Block {
    // SAFETY: `info` is the first field of a live `Block` (safety
    // requirement).
    unsafe { &mut *info.cast::<Block>() }
}

/// Points field `field` of `b` at `p` (with length `len` for addresses)
/// and makes `b` own `p`, freeing what it owned there before.
fn own(b: &mut Block, field: u32, p: *mut c_void, len: usize) -> Result {
    let slot = b.owned.get_mut(field as usize).ok_or(EINVAL)?;
    let old = core::mem::replace(slot, p as usize);
    match field {
        sys::KFI_INFO_SRC_ADDR => {
            b.info.src_addr = p;
            b.info.src_addrlen = if p.is_null() { 0 } else { len };
        }
        sys::KFI_INFO_DEST_ADDR => {
            b.info.dest_addr = p;
            b.info.dest_addrlen = if p.is_null() { 0 } else { len };
        }
        sys::KFI_INFO_FABRIC_NAME => b.fabric.name = p.cast(),
        sys::KFI_INFO_PROV_NAME => b.fabric.prov_name = p.cast(),
        _ => b.domain.name = p.cast(),
    }
    // SAFETY: A buffer this block owned; no field points at it any more
    // (the one that did was just replaced).
    unsafe { kfree(old as *mut c_void) };
    Ok(())
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
    // SAFETY: A block, no longer used (safety requirement); it owns the
    // buffers it recorded (type invariant of `Block`).
    unsafe {
        for p in (*info.cast::<Block>()).owned {
            kfree(p as *mut c_void);
        }
        drop(KBox::from_raw(info.cast::<Block>()));
    }
}

/// Frees a list of entries (NULL is fine).
pub(crate) fn free_list(mut info: *mut sys::kfi_info) {
    while !info.is_null() {
        // SAFETY: Entries of kfi_info lists are made by `alloc_block` (the
        // C contract of kfi_freeinfo).
        let next = unsafe { (*info).next };
        // SAFETY: `info` was made by `alloc_block` (kfi_freeinfo's C contract)
        // and the list is the caller's to free; `next` was read first, so
        // nothing uses the entry afterwards.
        unsafe { free_one(info) };
        info = next;
    }
}

/// A deep copy of one entry.
///
/// # Safety
///
/// `src` is a valid entry: one made by `alloc_block`, or a caller's whose
/// attribute pointers are NULL or valid.
unsafe fn dup_one(src: *const sys::kfi_info) -> Result<*mut sys::kfi_info> {
    let dst = alloc_block()?;
    // SAFETY: Both are valid blocks; the copied pointers are replaced by
    // fresh copies the new block owns before anything can use them.
    let r = unsafe {
        let s = &*src;
        let d = block(dst);
        // A caller's entry may lack attributes (NULL): the copy keeps the
        // defaults of its own then.
        if let Some(a) = s.tx_attr.as_ref() {
            d.tx = *a;
        }
        if let Some(a) = s.rx_attr.as_ref() {
            d.rx = *a;
        }
        if let Some(a) = s.ep_attr.as_ref() {
            d.ep = *a;
        }
        if let Some(a) = s.domain_attr.as_ref() {
            d.domain = *a;
        }
        if let Some(a) = s.fabric_attr.as_ref() {
            d.fabric = *a;
        }
        d.domain.name = ptr::null_mut();
        d.fabric.name = ptr::null_mut();
        d.fabric.prov_name = ptr::null_mut();
        d.info.caps = s.caps;
        d.info.mode = s.mode;
        d.info.addr_format = s.addr_format;
        d.info.handle = s.handle;
        (|| -> Result {
            let src_addr = dup_bytes(s.src_addr, s.src_addrlen)?;
            own(d, sys::KFI_INFO_SRC_ADDR, src_addr, s.src_addrlen)?;
            let dest_addr = dup_bytes(s.dest_addr, s.dest_addrlen)?;
            own(d, sys::KFI_INFO_DEST_ADDR, dest_addr, s.dest_addrlen)?;
            let dom = s.domain_attr.as_ref();
            let fab = s.fabric_attr.as_ref();
            let name = dup_str(dom.map_or(ptr::null_mut(), |a| a.name))?;
            own(d, sys::KFI_INFO_DOMAIN_NAME, name.cast(), 0)?;
            let name = dup_str(fab.map_or(ptr::null_mut(), |a| a.name))?;
            own(d, sys::KFI_INFO_FABRIC_NAME, name.cast(), 0)?;
            let name = dup_str(fab.map_or(ptr::null_mut(), |a| a.prov_name))?;
            own(d, sys::KFI_INFO_PROV_NAME, name.cast(), 0)?;
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
            if !str_matches(h.name, (*info.domain_attr).name) || !domain_fits(h, &*info.domain_attr)
            {
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

/// Whether a domain's threading, progress and memory region modes meet
/// what the hints ask (`enum kfi_threading`, `enum kfi_progress`).
fn domain_fits(want: &sys::kfi_domain_attr, have: &sys::kfi_domain_attr) -> bool {
    let threading = want.threading == sys::KFI_THREAD_UNSPEC
        || want.threading == have.threading
        || have.threading == sys::KFI_THREAD_SAFE;
    let progress = |w: u32, h: u32| {
        w == sys::KFI_PROGRESS_UNSPEC
            || w == h
            || (w == sys::KFI_PROGRESS_MANUAL && h == sys::KFI_PROGRESS_AUTO)
    };
    // Hints without memory region modes accept any.
    let mr_mode = want.mr_mode == 0 || have.mr_mode & !want.mr_mode == 0;
    threading
        && progress(want.control_progress, have.control_progress)
        && progress(want.data_progress, have.data_progress)
        && mr_mode
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
            // Entries always name their provider, so kfi_fabric() finds it.
            if (*(*cur).fabric_attr).prov_name.is_null() {
                let named = dup_str(p.name)
                    .and_then(|n| own(block(cur), sys::KFI_INFO_PROV_NAME, n.cast(), 0));
                if let Err(e) = named {
                    free_one(cur);
                    free_list(list);
                    return Err(e);
                }
            }
            let f = &mut *(*cur).fabric_attr;
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

/// `kfi_info_set`.
///
/// # Safety
///
/// The C contract: `info` NULL or an entry made by kfabric.ko; `val` NULL,
/// or a NUL-terminated string (names) or `len` bytes (addresses).
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_info_set(
    info: *mut sys::kfi_info,
    field: u32,
    val: *const c_void,
    len: usize,
) -> c_int {
    errno((|| {
        might_sleep();
        if info.is_null() || field >= sys::KFI_INFO_FIELD_LAST {
            return Err(EINVAL);
        }
        let is_addr = matches!(field, sys::KFI_INFO_SRC_ADDR | sys::KFI_INFO_DEST_ADDR);
        let copy = if is_addr {
            if !val.is_null() && (len == 0 || len > ADDR_MAX) {
                return Err(EINVAL);
            }
            // SAFETY: `val` holds `len` bytes (C contract).
            unsafe { dup_bytes(val, len) }?
        } else {
            // SAFETY: NULL or a NUL-terminated string (C contract).
            unsafe { dup_str(val.cast()) }?.cast()
        };
        // SAFETY: An entry of kfabric.ko's (C contract).
        let r = own(unsafe { block(info) }, field, copy, len);
        if r.is_err() {
            // SAFETY: Made above, never handed out.
            unsafe { kfree(copy) };
        }
        r
    })())
}
