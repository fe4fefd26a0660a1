// SPDX-License-Identifier: GPL-2.0

//! The exported control path: opening objects under their parents, binding,
//! enabling, options and connection management. Process context; every
//! call may sleep. Each call checks the object's class and that it is open,
//! then makes one call into the provider's ops table.

use kernel::{prelude::*, task::might_sleep};

use crate::{
    buffers::list_len,
    kfi_sys as sys,
    object::{self, checked, checked_open, class_of_open, finish_open, ObjectCore, Pending},
    slot::errno,
};

/// An open-style provider entry point: (parent, attributes, out, context).
type OpenFn<P, A, C> = unsafe extern "C" fn(*mut P, *mut A, *mut *mut C, *mut c_void) -> c_int;

/// Opens a child object of class `cclass` under `parent` (class `pclass`)
/// through the entry point `op` selects from the parent.
///
/// # Safety
///
/// `parent` is NULL or an object of its class (a struct starting with its
/// `kfid`); `arg` is what the entry point takes; `out` is NULL or valid for
/// writes.
unsafe fn open_child<P, A, C>(
    parent: *mut P,
    pclass: u32,
    cclass: u32,
    arg: *mut A,
    out: *mut *mut C,
    context: *mut c_void,
    op: impl FnOnce(&P) -> Result<OpenFn<P, A, C>>,
) -> Result {
    might_sleep();
    // SAFETY: NULL, closed or an object header (safety requirement).
    let pcore = unsafe { checked_open(parent.cast(), pclass) }?;
    if arg.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: `checked` succeeded, so `parent` is an open object of `pclass`.
    let f = op(unsafe { &*parent })?;
    let pending = Pending::child(pcore, cclass)?;
    let call = |o| {
        // SAFETY: The provider is pinned by the parent; arguments valid.
        unsafe { f(parent, arg, o, context) }
    };
    // SAFETY: The provider returns an object of `cclass` on success; `out`
    // is checked by `finish_open`.
    unsafe { finish_open(pending, out, context, |c| c.cast(), call) }
}

macro_rules! open_call {
    ($(#[$doc:meta])* $name:ident($pty:ty: $pclass:ident . $table:ident : $tty:ty => $slot:ident,
        $aty:ty) -> $cty:ty : $cclass:ident) => {
        $(#[$doc])*
        ///
        /// # Safety
        ///
        /// The C contract: NULL or valid pointers of the declared types.
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(
            parent: *mut $pty,
            arg: *mut $aty,
            out: *mut *mut $cty,
            context: *mut c_void,
        ) -> c_int {
            // SAFETY: The C contract of this function.
            errno(unsafe {
                open_child(parent, sys::$pclass, sys::$cclass, arg, out, context, |p| {
                    slot!(p.$table, $tty, $slot)
                })
            })
        }
    };
}

open_call!(
    /// `kfi_domain`.
    kfi_domain(sys::kfid_fabric: KFI_CLASS_FABRIC.ops: sys::kfi_ops_fabric => domain,
        sys::kfi_info) -> sys::kfid_domain: KFI_CLASS_DOMAIN
);
open_call!(
    /// `kfi_passive_ep`.
    kfi_passive_ep(sys::kfid_fabric: KFI_CLASS_FABRIC.ops: sys::kfi_ops_fabric => passive_ep,
        sys::kfi_info) -> sys::kfid_pep: KFI_CLASS_PEP
);
open_call!(
    /// `kfi_eq_open`.
    kfi_eq_open(sys::kfid_fabric: KFI_CLASS_FABRIC.ops: sys::kfi_ops_fabric => eq_open,
        sys::kfi_eq_attr) -> sys::kfid_eq: KFI_CLASS_EQ
);
open_call!(
    /// `kfi_endpoint`.
    kfi_endpoint(sys::kfid_domain: KFI_CLASS_DOMAIN.ops: sys::kfi_ops_domain => endpoint,
        sys::kfi_info) -> sys::kfid_ep: KFI_CLASS_EP
);
open_call!(
    /// `kfi_cq_open`.
    kfi_cq_open(sys::kfid_domain: KFI_CLASS_DOMAIN.ops: sys::kfi_ops_domain => cq_open,
        sys::kfi_cq_attr) -> sys::kfid_cq: KFI_CLASS_CQ
);
open_call!(
    /// `kfi_cntr_open`.
    kfi_cntr_open(sys::kfid_domain: KFI_CLASS_DOMAIN.ops: sys::kfi_ops_domain => cntr_open,
        sys::kfi_cntr_attr) -> sys::kfid_cntr: KFI_CLASS_CNTR
);
open_call!(
    /// `kfi_av_open`.
    kfi_av_open(sys::kfid_domain: KFI_CLASS_DOMAIN.ops: sys::kfi_ops_domain => av_open,
        sys::kfi_av_attr) -> sys::kfid_av: KFI_CLASS_AV
);

/// `kfi_mr_regattr`: registers memory; the region is a child of the domain.
///
/// # Safety
///
/// The C contract: NULL or valid pointers of the declared types.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_mr_regattr(
    domain: *mut sys::kfid_domain,
    attr: *const sys::kfi_mr_attr,
    flags: u64,
    mr: *mut *mut sys::kfid_mr,
) -> c_int {
    errno((|| {
        might_sleep();
        // SAFETY: NULL, closed or a domain (C contract).
        let dcore = unsafe { checked_open(domain.cast(), sys::KFI_CLASS_DOMAIN) }?;
        if attr.is_null() || flags & !sys::KFI_RMA_PMEM != 0 {
            return Err(EINVAL);
        }
        // SAFETY: Non-NULL, valid for reads (C contract).
        let a = unsafe { &*attr };
        if a.access & !sys::KFI_MR_ACCESS != 0 || a.iov_type > sys::KFI_SGL || a.iov_count == 0 {
            return Err(EINVAL);
        }
        // SAFETY: All members of the union are pointers; the list has
        // `iov_count` entries of its type (C contract).
        let len = unsafe { list_len(a.iov_type, a.__bindgen_anon_1.mr_iov.cast(), a.iov_count) }?;
        if len == 0 {
            return Err(EINVAL);
        }
        // SAFETY: `domain` is an open domain (checked).
        let table = unsafe { (*domain).mr };
        let f = slot!(table, sys::kfi_ops_mr, regattr)?;
        let pending = Pending::child(dcore, sys::KFI_CLASS_MR)?;
        let call = |o| {
            // SAFETY: The provider is pinned; arguments valid.
            unsafe { f(domain, attr, flags, o) }
        };
        // SAFETY: The provider returns a region on success.
        unsafe { finish_open(pending, mr, a.context, |m| m.cast(), call) }
    })())
}

/// Builds the registration request of the simple `kfi_mr_reg*` spellings.
#[allow(clippy::too_many_arguments)]
fn mr_attr(
    iov_type: u32,
    list: *const c_void,
    count: usize,
    access: u64,
    offset: u64,
    requested_key: u64,
    context: *mut c_void,
) -> sys::kfi_mr_attr {
    let mut a = sys::kfi_mr_attr {
        iov_type,
        iov_count: count,
        access,
        offset,
        requested_key,
        context,
        ..Default::default()
    };
    a.__bindgen_anon_1.mr_iov = list.cast();
    a
}

macro_rules! mr_reg_call {
    ($(#[$doc:meta])* $name:ident($lty:ty, $iov_type:ident)) => {
        $(#[$doc])*
        ///
        /// # Safety
        ///
        /// The C contract: NULL or valid pointers of the declared types.
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub(crate) unsafe extern "C" fn $name(
            domain: *mut sys::kfid_domain,
            list: *const $lty,
            count: usize,
            access: u64,
            offset: u64,
            requested_key: u64,
            flags: u64,
            mr: *mut *mut sys::kfid_mr,
            context: *mut c_void,
        ) -> c_int {
            if list.is_null() {
                return EINVAL.to_errno();
            }
            let a = mr_attr(sys::$iov_type, list.cast(), count, access, offset, requested_key, context);
            // SAFETY: `a` is valid; the rest is the C contract.
            unsafe { kfi_mr_regattr(domain, &a, flags, mr) }
        }
    };
}

mr_reg_call!(
    /// `kfi_mr_regv`: registers a kvec list.
    kfi_mr_regv(kernel::bindings::kvec, KFI_KVEC)
);
mr_reg_call!(
    /// `kfi_mr_regbv`: registers a bio_vec list.
    kfi_mr_regbv(kernel::bindings::bio_vec, KFI_BVEC)
);
mr_reg_call!(
    /// `kfi_mr_regsgl`: registers a scatterlist.
    kfi_mr_regsgl(kernel::bindings::scatterlist, KFI_SGL)
);

/// `kfi_mr_reg`: registers one contiguous buffer.
///
/// # Safety
///
/// The C contract: NULL or valid pointers of the declared types.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe extern "C" fn kfi_mr_reg(
    domain: *mut sys::kfid_domain,
    buf: *const c_void,
    len: usize,
    access: u64,
    offset: u64,
    requested_key: u64,
    flags: u64,
    mr: *mut *mut sys::kfid_mr,
    context: *mut c_void,
) -> c_int {
    if buf.is_null() || len == 0 {
        return EINVAL.to_errno();
    }
    let iov = kernel::bindings::kvec {
        iov_base: buf.cast_mut(),
        iov_len: len,
    };
    // SAFETY: `iov` lives across the call; the rest is the C contract.
    unsafe {
        kfi_mr_regv(
            domain,
            &iov,
            1,
            access,
            offset,
            requested_key,
            flags,
            mr,
            context,
        )
    }
}

/// Binds `bfid` to the endpoint or passive endpoint `fid` of class `class`.
///
/// # Safety
///
/// `fid` and `bfid` are NULL or object headers.
unsafe fn bind_to(fid: *mut sys::kfid, class: u32, bfid: *mut sys::kfid, flags: u64) -> Result {
    // SAFETY: NULL, closed or object headers (safety requirement).
    let (tcore, bclass) = unsafe { (checked_open(fid, class)?, class_of_open(bfid)?) };
    let allowed = [
        sys::KFI_CLASS_CQ,
        sys::KFI_CLASS_EQ,
        sys::KFI_CLASS_CNTR,
        sys::KFI_CLASS_AV,
        sys::KFI_CLASS_MR,
    ];
    if !allowed.contains(&bclass) {
        return Err(EINVAL);
    }
    // SAFETY: `bfid` is open (class_of succeeded).
    let bcore: &ObjectCore = unsafe { checked(bfid, bclass) }?;
    // SAFETY: `fid` is open.
    let table = unsafe { (*fid).ops };
    let f = slot!(table, sys::kfi_ops, bind)?;
    // SAFETY: The provider is pinned; both objects are open.
    object::bind(tcore, bcore, || unsafe { f(fid, bfid, flags) })
}

/// `kfi_ep_bind`.
///
/// # Safety
///
/// The C contract: NULL or valid objects.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_ep_bind(
    ep: *mut sys::kfid_ep,
    bfid: *mut sys::kfid,
    flags: u64,
) -> c_int {
    // SAFETY: The C contract.
    errno(unsafe { bind_to(ep.cast(), sys::KFI_CLASS_EP, bfid, flags) })
}

/// `kfi_pep_bind`.
///
/// # Safety
///
/// The C contract: NULL or valid objects.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_pep_bind(
    pep: *mut sys::kfid_pep,
    bfid: *mut sys::kfid,
    flags: u64,
) -> c_int {
    // SAFETY: The C contract.
    errno(unsafe { bind_to(pep.cast(), sys::KFI_CLASS_PEP, bfid, flags) })
}

/// `kfi_bind`: `kfi_ep_bind` or `kfi_pep_bind` by the class of `fid`.
///
/// # Safety
///
/// The C contract: NULL or valid objects.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_bind(
    fid: *mut sys::kfid,
    bfid: *mut sys::kfid,
    flags: u64,
) -> c_int {
    errno((|| {
        // SAFETY: The C contract (NULL, closed or an object).
        let class = unsafe { class_of_open(fid) }?;
        if class != sys::KFI_CLASS_EP && class != sys::KFI_CLASS_PEP {
            return Err(EINVAL);
        }
        // SAFETY: The C contract; the class is one `bind_to` takes.
        unsafe { bind_to(fid, class, bfid, flags) }
    })())
}

/// `kfi_control`.
///
/// # Safety
///
/// The C contract: NULL or a valid object.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_control(
    fid: *mut sys::kfid,
    command: c_int,
    arg: *mut c_void,
) -> c_int {
    errno((|| {
        might_sleep();
        // SAFETY: The C contract (NULL, closed or an object).
        let class = unsafe { class_of_open(fid) }?;
        // SAFETY: The C contract; the class matches.
        unsafe { checked(fid, class) }?;
        // SAFETY: `fid` is open.
        let table = unsafe { (*fid).ops };
        let f = slot!(table, sys::kfi_ops, control)?;
        // SAFETY: The provider is pinned; the argument is the caller's.
        kernel::error::to_result(unsafe { f(fid, command, arg) })
    })())
}

/// `kfi_enable`: an endpoint starts operating.
///
/// # Safety
///
/// The C contract: NULL, an endpoint closed already, or a valid endpoint.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_enable(ep: *mut sys::kfid_ep) -> c_int {
    // SAFETY: NULL, an endpoint closed already or an endpoint (C contract).
    if let Err(e) = unsafe { checked_open(ep.cast(), sys::KFI_CLASS_EP) } {
        return e.to_errno();
    }
    // SAFETY: The C contract.
    unsafe { kfi_control(ep.cast(), sys::KFI_ENABLE as c_int, core::ptr::null_mut()) }
}

/// The control ops (`kfi_ops_ep`) and CM ops of an endpoint or passive
/// endpoint.
///
/// # Safety
///
/// `fid` is NULL, closed or an object header.
unsafe fn ep_tables(
    fid: *mut sys::kfid,
) -> Result<(*const sys::kfi_ops_ep, *const sys::kfi_ops_cm)> {
    // SAFETY: NULL, closed or an object header (safety requirement).
    let class = unsafe { class_of_open(fid) }?;
    match class {
        sys::KFI_CLASS_EP => {
            let ep = fid.cast::<sys::kfid_ep>();
            // SAFETY: An open endpoint.
            Ok(unsafe { ((*ep).ops, (*ep).cm) })
        }
        sys::KFI_CLASS_PEP => {
            let pep = fid.cast::<sys::kfid_pep>();
            // SAFETY: An open passive endpoint.
            Ok(unsafe { ((*pep).ops, (*pep).cm) })
        }
        _ => Err(EINVAL),
    }
}

/// `kfi_cancel`: cancels a queued operation. Any context but hard interrupt.
///
/// # Safety
///
/// The C contract.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_cancel(fid: *mut sys::kfid, context: *mut c_void) -> c_int {
    errno((|| {
        // SAFETY: The C contract.
        let (ops, _) = unsafe { ep_tables(fid) }?;
        let f = slot!(ops, sys::kfi_ops_ep, cancel)?;
        // SAFETY: The provider is pinned by the open object.
        kernel::error::to_result(unsafe { f(fid, context) })
    })())
}

/// `kfi_getopt`.
///
/// # Safety
///
/// The C contract.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_getopt(
    fid: *mut sys::kfid,
    level: c_int,
    optname: c_int,
    optval: *mut c_void,
    optlen: *mut usize,
) -> c_int {
    errno((|| {
        if optval.is_null() || optlen.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: The C contract.
        let (ops, _) = unsafe { ep_tables(fid) }?;
        let f = slot!(ops, sys::kfi_ops_ep, getopt)?;
        // SAFETY: The provider is pinned; the buffers are the caller's.
        kernel::error::to_result(unsafe { f(fid, level, optname, optval, optlen) })
    })())
}

/// `kfi_setopt`.
///
/// # Safety
///
/// The C contract.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_setopt(
    fid: *mut sys::kfid,
    level: c_int,
    optname: c_int,
    optval: *const c_void,
    optlen: usize,
) -> c_int {
    errno((|| {
        if optval.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: The C contract.
        let (ops, _) = unsafe { ep_tables(fid) }?;
        let f = slot!(ops, sys::kfi_ops_ep, setopt)?;
        // SAFETY: The provider is pinned; the buffer is the caller's.
        kernel::error::to_result(unsafe { f(fid, level, optname, optval, optlen) })
    })())
}

/// `kfi_getname`.
///
/// # Safety
///
/// The C contract.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_getname(
    fid: *mut sys::kfid,
    addr: *mut c_void,
    addrlen: *mut usize,
) -> c_int {
    errno((|| {
        if addrlen.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: The C contract.
        let (_, cm) = unsafe { ep_tables(fid) }?;
        let f = slot!(cm, sys::kfi_ops_cm, getname)?;
        // SAFETY: The provider is pinned; the buffers are the caller's.
        kernel::error::to_result(unsafe { f(fid, addr, addrlen) })
    })())
}

/// The CM table of an open active endpoint.
///
/// # Safety
///
/// `ep` is NULL, an object closed already, or an object header.
unsafe fn ep_cm(ep: *mut sys::kfid_ep) -> Result<*const sys::kfi_ops_cm> {
    // SAFETY: NULL, an object closed already or an object header (safety
    // requirement).
    unsafe { checked_open(ep.cast(), sys::KFI_CLASS_EP) }?;
    // SAFETY: An open endpoint.
    Ok(unsafe { (*ep).cm })
}

/// The CM table of an open passive endpoint.
///
/// # Safety
///
/// `pep` is NULL, an object closed already, or an object header.
unsafe fn pep_cm(pep: *mut sys::kfid_pep) -> Result<*const sys::kfi_ops_cm> {
    // SAFETY: NULL, an object closed already or an object header (safety
    // requirement).
    unsafe { checked_open(pep.cast(), sys::KFI_CLASS_PEP) }?;
    // SAFETY: An open passive endpoint.
    Ok(unsafe { (*pep).cm })
}

/// `kfi_getpeer`.
///
/// # Safety
///
/// The C contract.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_getpeer(
    ep: *mut sys::kfid_ep,
    addr: *mut c_void,
    addrlen: *mut usize,
) -> c_int {
    errno((|| {
        if addrlen.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: The C contract.
        let table = unsafe { ep_cm(ep) }?;
        let f = slot!(table, sys::kfi_ops_cm, getpeer)?;
        // SAFETY: The provider is pinned; the buffers are the caller's.
        kernel::error::to_result(unsafe { f(ep, addr, addrlen) })
    })())
}

/// `kfi_connect`.
///
/// # Safety
///
/// The C contract.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_connect(
    ep: *mut sys::kfid_ep,
    addr: *const c_void,
    param: *const c_void,
    paramlen: usize,
) -> c_int {
    errno((|| {
        might_sleep();
        if paramlen > sys::KFI_EQ_DATA_MAX as usize || (param.is_null() && paramlen != 0) {
            return Err(EINVAL);
        }
        // SAFETY: The C contract.
        let table = unsafe { ep_cm(ep) }?;
        let f = slot!(table, sys::kfi_ops_cm, connect)?;
        // SAFETY: The provider is pinned; the buffers are the caller's.
        kernel::error::to_result(unsafe { f(ep, addr, param, paramlen) })
    })())
}

/// `kfi_listen`.
///
/// # Safety
///
/// The C contract.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_listen(pep: *mut sys::kfid_pep) -> c_int {
    errno((|| {
        might_sleep();
        // SAFETY: The C contract.
        let table = unsafe { pep_cm(pep) }?;
        let f = slot!(table, sys::kfi_ops_cm, listen)?;
        // SAFETY: The provider is pinned.
        kernel::error::to_result(unsafe { f(pep) })
    })())
}

/// `kfi_accept`.
///
/// # Safety
///
/// The C contract.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_accept(
    ep: *mut sys::kfid_ep,
    param: *const c_void,
    paramlen: usize,
) -> c_int {
    errno((|| {
        might_sleep();
        if paramlen > sys::KFI_EQ_DATA_MAX as usize || (param.is_null() && paramlen != 0) {
            return Err(EINVAL);
        }
        // SAFETY: The C contract.
        let table = unsafe { ep_cm(ep) }?;
        let f = slot!(table, sys::kfi_ops_cm, accept)?;
        // SAFETY: The provider is pinned; the buffer is the caller's.
        kernel::error::to_result(unsafe { f(ep, param, paramlen) })
    })())
}

/// `kfi_reject`.
///
/// # Safety
///
/// The C contract.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_reject(
    pep: *mut sys::kfid_pep,
    handle: *mut sys::kfid,
    param: *const c_void,
    paramlen: usize,
) -> c_int {
    errno((|| {
        might_sleep();
        if handle.is_null()
            || paramlen > sys::KFI_EQ_DATA_MAX as usize
            || (param.is_null() && paramlen != 0)
        {
            return Err(EINVAL);
        }
        // SAFETY: The C contract.
        let table = unsafe { pep_cm(pep) }?;
        let f = slot!(table, sys::kfi_ops_cm, reject)?;
        // SAFETY: The provider is pinned; the handle is the provider's own.
        kernel::error::to_result(unsafe { f(pep, handle, param, paramlen) })
    })())
}

/// `kfi_shutdown`.
///
/// # Safety
///
/// The C contract.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_shutdown(ep: *mut sys::kfid_ep, flags: u64) -> c_int {
    errno((|| {
        might_sleep();
        // SAFETY: The C contract.
        let table = unsafe { ep_cm(ep) }?;
        let f = slot!(table, sys::kfi_ops_cm, shutdown)?;
        // SAFETY: The provider is pinned.
        kernel::error::to_result(unsafe { f(ep, flags) })
    })())
}

/// The ops table of an open address vector.
///
/// # Safety
///
/// `av` is NULL, an object closed already, or an object header.
unsafe fn av_ops(av: *mut sys::kfid_av) -> Result<*const sys::kfi_ops_av> {
    // SAFETY: NULL, an object closed already or an object header (safety
    // requirement).
    unsafe { checked_open(av.cast(), sys::KFI_CLASS_AV) }?;
    // SAFETY: An open address vector.
    Ok(unsafe { (*av).ops })
}

/// `kfi_av_insert`: returns the number inserted.
///
/// # Safety
///
/// The C contract.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_av_insert(
    av: *mut sys::kfid_av,
    addr: *const c_void,
    count: usize,
    fi_addr: *mut sys::kfi_addr_t,
    flags: u64,
    context: *mut c_void,
) -> c_int {
    might_sleep();
    if addr.is_null() || fi_addr.is_null() || count == 0 {
        return EINVAL.to_errno();
    }
    // SAFETY: The C contract.
    match unsafe { av_ops(av) }.and_then(|t| slot!(t, sys::kfi_ops_av, insert)) {
        // SAFETY: The provider is pinned; the buffers are the caller's.
        Ok(f) => unsafe { f(av, addr, count, fi_addr, flags, context) },
        Err(e) => e.to_errno(),
    }
}

/// `kfi_av_insertsvc`: returns the number inserted (1).
///
/// # Safety
///
/// The C contract.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_av_insertsvc(
    av: *mut sys::kfid_av,
    node: *const c_char,
    service: *const c_char,
    fi_addr: *mut sys::kfi_addr_t,
    flags: u64,
    context: *mut c_void,
) -> c_int {
    might_sleep();
    if node.is_null() || service.is_null() || fi_addr.is_null() {
        return EINVAL.to_errno();
    }
    // SAFETY: The C contract.
    match unsafe { av_ops(av) }.and_then(|t| slot!(t, sys::kfi_ops_av, insertsvc)) {
        // SAFETY: The provider is pinned; the strings are the caller's.
        Ok(f) => unsafe { f(av, node, service, fi_addr, flags, context) },
        Err(e) => e.to_errno(),
    }
}

/// `kfi_av_remove`.
///
/// # Safety
///
/// The C contract.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_av_remove(
    av: *mut sys::kfid_av,
    fi_addr: *mut sys::kfi_addr_t,
    count: usize,
    flags: u64,
) -> c_int {
    might_sleep();
    if fi_addr.is_null() || count == 0 {
        return EINVAL.to_errno();
    }
    // SAFETY: The C contract.
    match unsafe { av_ops(av) }.and_then(|t| slot!(t, sys::kfi_ops_av, remove)) {
        // SAFETY: The provider is pinned; the array is the caller's.
        Ok(f) => unsafe { f(av, fi_addr, count, flags) },
        Err(e) => e.to_errno(),
    }
}

/// `kfi_av_lookup`.
///
/// # Safety
///
/// The C contract.
#[no_mangle]
pub(crate) unsafe extern "C" fn kfi_av_lookup(
    av: *mut sys::kfid_av,
    fi_addr: sys::kfi_addr_t,
    addr: *mut c_void,
    addrlen: *mut usize,
) -> c_int {
    if addrlen.is_null() {
        return EINVAL.to_errno();
    }
    // SAFETY: The C contract.
    match unsafe { av_ops(av) }.and_then(|t| slot!(t, sys::kfi_ops_av, lookup)) {
        // SAFETY: The provider is pinned; the buffers are the caller's.
        Ok(f) => unsafe { f(av, fi_addr, addr, addrlen) },
        Err(e) => e.to_errno(),
    }
}
