// SPDX-License-Identifier: GPL-2.0

//! Two providers the core tests register:
//!
//! - `kfi_test_loop`: a whole object tree (fabric, domain, endpoints, util
//!   CQs, EQs and counters, memory regions); an endpoint's send is delivered
//!   to the receive posted on the same endpoint, with real completions.
//!   Its endpoints claim KFI_TAGGED without a tagged ops table, so that the
//!   core's -ENOSYS path is reachable.
//! - `kfi_test_tag`: lists different capabilities and opens nothing.

use core::{ffi::CStr, pin::Pin};
use kernel::{new_spinlock_irq, prelude::*, sync::SpinLockIrq};

use crate::kfi::{kfabric::*, kfi_sys as sys};

/// Capabilities `kfi_test_loop` lists.
pub(crate) const LOOP_CAPS: u64 = sys::KFI_MSG | sys::KFI_SEND | sys::KFI_RECV;
/// Capabilities `kfi_test_tag` lists.
pub(crate) const TAG_CAPS: u64 = sys::KFI_MSG | sys::KFI_TAGGED | sys::KFI_SEND | sys::KFI_RECV;
/// A mode bit `kfi_test_tag` requires of its users.
pub(crate) const TAG_MODE: u64 = 1 << 59;
/// Limits of loop endpoints.
pub(crate) const LOOP_IOV_LIMIT: usize = 4;
/// Largest inject of loop endpoints.
pub(crate) const LOOP_INJECT: usize = 64;

pub(crate) static LOOP: StaticProvider = StaticProvider::with_getinfo(
    c"kfi_test_loop",
    version(1, 0),
    loop_getinfo,
    Some(loop_fabric),
);
pub(crate) static TAG: StaticProvider =
    StaticProvider::with_getinfo(c"kfi_test_tag", version(1, 2), tag_getinfo, None);

/// A kmalloc'ed copy of `s`, owned by the `kfi_info` it is stored in.
pub(crate) fn kstr(s: &CStr) -> Result<*mut c_char> {
    let bytes = s.to_bytes_with_nul();
    let mut v = KVec::with_capacity(bytes.len(), GFP_KERNEL)?;
    v.extend_from_slice(bytes, GFP_KERNEL)?;
    let (p, _, _) = v.into_raw_parts();
    Ok(p.cast())
}

/// One `kfi_info` entry as the test providers list it.
fn entry(
    caps: u64,
    mode: u64,
    ep_type: u32,
    format: u32,
    fabric: &CStr,
    domain: &CStr,
) -> Result<*mut sys::kfi_info> {
    // SAFETY: No arguments; returns NULL or a fresh entry.
    let info = unsafe { sys::kfi_allocinfo() };
    if info.is_null() {
        return Err(ENOMEM);
    }
    // SAFETY: A fresh entry with its attributes (kfi_allocinfo).
    unsafe {
        let i = &mut *info;
        i.caps = caps;
        i.mode = mode;
        i.addr_format = format;
        (*i.tx_attr).caps = caps;
        (*i.rx_attr).caps = caps;
        (*i.ep_attr).type_ = ep_type;
        let names = (|| -> Result {
            (*i.fabric_attr).name = kstr(fabric)?;
            (*i.domain_attr).name = kstr(domain)?;
            Ok(())
        })();
        if let Err(e) = names {
            sys::kfi_freeinfo(info);
            return Err(e);
        }
    }
    Ok(info)
}

/// # Safety
///
/// kfabric.ko's contract: `info` is valid for writes.
unsafe extern "C" fn loop_getinfo(
    _version: u32,
    _node: *const c_char,
    _service: *const c_char,
    _flags: u64,
    _hints: *const sys::kfi_info,
    info: *mut *mut sys::kfi_info,
) -> c_int {
    match entry(
        LOOP_CAPS,
        0,
        sys::KFI_EP_RDM,
        sys::KFI_SOCKADDR_IN,
        c"loopfab",
        c"loop0",
    ) {
        Ok(i) => {
            // SAFETY: Valid for writes (kfabric.ko's contract).
            unsafe { *info = i };
            0
        }
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// kfabric.ko's contract: `info` is valid for writes.
unsafe extern "C" fn tag_getinfo(
    _version: u32,
    _node: *const c_char,
    _service: *const c_char,
    _flags: u64,
    _hints: *const sys::kfi_info,
    info: *mut *mut sys::kfi_info,
) -> c_int {
    match entry(
        TAG_CAPS,
        TAG_MODE,
        sys::KFI_EP_MSG,
        sys::KFI_SOCKADDR_IN6,
        c"tagfab",
        c"tag0",
    ) {
        Ok(i) => {
            // SAFETY: Valid for writes (kfabric.ko's contract).
            unsafe { *info = i };
            0
        }
        Err(e) => e.to_errno(),
    }
}

/// Frees an object of type `T` made by `KBox::new`.
///
/// # Safety
///
/// `fid` is the header (first field) of a `KBox<T>`-allocated `T`, closed
/// once.
unsafe extern "C" fn free_obj<T>(fid: *mut sys::kfid) -> c_int {
    // SAFETY: As required.
    drop(unsafe { KBox::from_raw(fid.cast::<T>()) });
    0
}

/// Puts a boxed object into `out`.
///
/// # Safety
///
/// `out` is valid for writes; `T` starts with the object header `O`.
unsafe fn hand_out<T, O>(obj: Result<KBox<T>>, out: *mut *mut O) -> c_int {
    match obj {
        Ok(b) => {
            // SAFETY: As required.
            unsafe { *out = KBox::into_raw(b).cast() };
            0
        }
        Err(e) => e.to_errno(),
    }
}

const fn fid_ops(close: unsafe extern "C" fn(*mut sys::kfid) -> c_int) -> sys::kfi_ops {
    sys::kfi_ops {
        size: size_of::<sys::kfi_ops>(),
        close: Some(close),
        bind: None,
        control: None,
    }
}

fn header(ops: &'static sys::kfi_ops) -> sys::kfid {
    sys::kfid {
        ops,
        ..Default::default()
    }
}

#[repr(C)]
struct LoopFabric {
    fabric: sys::kfid_fabric,
}

static FABRIC_FID_OPS: sys::kfi_ops = fid_ops(free_obj::<LoopFabric>);
static FABRIC_OPS: sys::kfi_ops_fabric = sys::kfi_ops_fabric {
    size: size_of::<sys::kfi_ops_fabric>(),
    domain: Some(loop_domain),
    passive_ep: None,
    eq_open: Some(sys::kfi_util_eq_open),
};

/// # Safety
///
/// kfabric.ko's contract: `fabric` is valid for writes.
unsafe extern "C" fn loop_fabric(
    _attr: *const sys::kfi_fabric_attr,
    fabric: *mut *mut sys::kfid_fabric,
    _context: *mut c_void,
) -> c_int {
    let f = KBox::new(
        LoopFabric {
            fabric: sys::kfid_fabric {
                fid: header(&FABRIC_FID_OPS),
                ops: &FABRIC_OPS,
                api_version: 0,
            },
        },
        GFP_KERNEL,
    );
    // SAFETY: `fabric` is valid for writes; the fabric is the first field.
    unsafe { hand_out(f.map_err(Into::into), fabric) }
}

#[repr(C)]
struct LoopDomain {
    domain: sys::kfid_domain,
}

static DOMAIN_FID_OPS: sys::kfi_ops = fid_ops(free_obj::<LoopDomain>);
static DOMAIN_OPS: sys::kfi_ops_domain = sys::kfi_ops_domain {
    size: size_of::<sys::kfi_ops_domain>(),
    av_open: None,
    cq_open: Some(sys::kfi_util_cq_open),
    endpoint: Some(loop_ep_open),
    cntr_open: Some(sys::kfi_util_cntr_open),
};
static MR_OPS: sys::kfi_ops_mr = sys::kfi_ops_mr {
    size: size_of::<sys::kfi_ops_mr>(),
    regattr: Some(loop_mr_reg),
};

/// # Safety
///
/// kfabric.ko's contract: `domain` is valid for writes.
unsafe extern "C" fn loop_domain(
    _fabric: *mut sys::kfid_fabric,
    _info: *mut sys::kfi_info,
    domain: *mut *mut sys::kfid_domain,
    _context: *mut c_void,
) -> c_int {
    let d = KBox::new(
        LoopDomain {
            domain: sys::kfid_domain {
                fid: header(&DOMAIN_FID_OPS),
                ops: &DOMAIN_OPS,
                mr: &MR_OPS,
            },
        },
        GFP_KERNEL,
    );
    // SAFETY: `domain` is valid for writes; the domain is the first field.
    unsafe { hand_out(d.map_err(Into::into), domain) }
}

#[repr(C)]
struct LoopMr {
    mr: sys::kfid_mr,
}

static MR_FID_OPS: sys::kfi_ops = fid_ops(free_obj::<LoopMr>);

/// # Safety
///
/// kfabric.ko's contract: `attr` is valid, `mr` valid for writes.
unsafe extern "C" fn loop_mr_reg(
    _domain: *mut sys::kfid_domain,
    attr: *const sys::kfi_mr_attr,
    _flags: u64,
    mr: *mut *mut sys::kfid_mr,
) -> c_int {
    // SAFETY: Valid (kfabric.ko's contract).
    let key = unsafe { (*attr).requested_key };
    let m = KBox::new(
        LoopMr {
            mr: sys::kfid_mr {
                fid: header(&MR_FID_OPS),
                mem_desc: core::ptr::null_mut(),
                key,
            },
        },
        GFP_KERNEL,
    );
    // SAFETY: `mr` is valid for writes; the region is the first field.
    unsafe { hand_out(m.map_err(Into::into), mr) }
}

/// A posted receive.
#[derive(Clone, Copy)]
struct Recv {
    buf: *mut u8,
    len: usize,
    context: *mut c_void,
}

struct EpState {
    tx_cq: *mut sys::kfid_cq,
    rx_cq: *mut sys::kfid_cq,
    recv: Option<Recv>,
    enabled: bool,
}

// SAFETY: The pointers are CQs kept open by the binding and the ULP's
// posted buffer; all are only used under the lock.
unsafe impl Send for EpState {}

/// A loop endpoint.
#[repr(C)]
#[pin_data]
struct LoopEp {
    ep: sys::kfid_ep,
    #[pin]
    state: SpinLockIrq<EpState>,
}

static EP_FID_OPS: sys::kfi_ops = sys::kfi_ops {
    size: size_of::<sys::kfi_ops>(),
    close: Some(loop_ep_close),
    bind: Some(loop_ep_bind),
    control: Some(loop_ep_control),
};
static EP_MSG_OPS: sys::kfi_ops_msg = sys::kfi_ops_msg {
    size: size_of::<sys::kfi_ops_msg>(),
    recvmsg: Some(loop_recvmsg),
    sendmsg: Some(loop_sendmsg),
};

/// The loop endpoint of `ep`.
///
/// # Safety
///
/// `ep` is an open loop endpoint.
unsafe fn loop_ep<'a>(ep: *mut sys::kfid_ep) -> &'a LoopEp {
    // SAFETY: The endpoint is the first field of a LoopEp (requirement).
    unsafe { &*ep.cast::<LoopEp>() }
}

/// # Safety
///
/// kfabric.ko's contract: `ep` is valid for writes.
unsafe extern "C" fn loop_ep_open(
    _domain: *mut sys::kfid_domain,
    _info: *mut sys::kfi_info,
    ep: *mut *mut sys::kfid_ep,
    _context: *mut c_void,
) -> c_int {
    let e = KBox::pin_init(
        try_pin_init!(LoopEp {
            ep: sys::kfid_ep {
                fid: header(&EP_FID_OPS),
                msg: &EP_MSG_OPS,
                caps: sys::KFI_MSG | sys::KFI_TAGGED | sys::KFI_SEND | sys::KFI_RECV,
                op_flags: sys::KFI_INJECT | sys::KFI_REMOTE_CQ_DATA | sys::KFI_TRANSMIT_COMPLETE,
                tx_iov_limit: LOOP_IOV_LIMIT,
                rx_iov_limit: LOOP_IOV_LIMIT,
                rma_iov_limit: 1,
                inject_size: LOOP_INJECT,
                ..Default::default()
            },
            state <- new_spinlock_irq!(EpState {
                tx_cq: core::ptr::null_mut(),
                rx_cq: core::ptr::null_mut(),
                recv: None,
                enabled: false,
            }),
        }),
        GFP_KERNEL,
    );
    match e {
        Ok(b) => {
            // SAFETY: Never moved out of; `loop_ep_close` rebuilds the box.
            let raw = KBox::into_raw(unsafe { Pin::into_inner_unchecked(b) });
            // SAFETY: `ep` is valid for writes; the endpoint is the first field.
            unsafe { *ep = raw.cast() };
            0
        }
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// kfabric.ko's contract: an open loop endpoint, closed once.
unsafe extern "C" fn loop_ep_close(fid: *mut sys::kfid) -> c_int {
    // SAFETY: Made by `KBox::pin_init` in `loop_ep_open`; closed once.
    drop(unsafe { Pin::new_unchecked(KBox::from_raw(fid.cast::<LoopEp>())) });
    0
}

/// # Safety
///
/// kfabric.ko's contract: an open loop endpoint and an open object.
unsafe extern "C" fn loop_ep_bind(fid: *mut sys::kfid, bfid: *mut sys::kfid, flags: u64) -> c_int {
    // SAFETY: An open loop endpoint (kfabric.ko's contract).
    let e = unsafe { loop_ep(fid.cast()) };
    // SAFETY: An open object.
    if unsafe { (*bfid).fclass } != sys::KFI_CLASS_CQ {
        return 0;
    }
    let mut s = e.state.lock();
    if flags & sys::KFI_TRANSMIT != 0 {
        s.tx_cq = bfid.cast();
    }
    if flags & sys::KFI_RECV != 0 {
        s.rx_cq = bfid.cast();
    }
    0
}

/// # Safety
///
/// kfabric.ko's contract: an open loop endpoint.
unsafe extern "C" fn loop_ep_control(
    fid: *mut sys::kfid,
    command: c_int,
    _arg: *mut c_void,
) -> c_int {
    if command != sys::KFI_ENABLE as c_int {
        return ENOSYS.to_errno();
    }
    // SAFETY: An open loop endpoint.
    let e = unsafe { loop_ep(fid.cast()) };
    let mut s = e.state.lock();
    if s.tx_cq.is_null() || s.rx_cq.is_null() {
        return EINVAL.to_errno();
    }
    s.enabled = true;
    0
}

/// # Safety
///
/// kfabric.ko's contract: an open loop endpoint, a checked message.
unsafe extern "C" fn loop_recvmsg(
    ep: *mut sys::kfid_ep,
    msg: *const sys::kfi_msg,
    _flags: u64,
) -> c_int {
    // SAFETY: kfabric.ko's contract.
    let (e, m) = unsafe { (loop_ep(ep), &*msg) };
    if m.iov_type != sys::KFI_KVEC || m.iov_count != 1 {
        return EINVAL.to_errno();
    }
    // SAFETY: A kvec list of one entry.
    let iov = unsafe { *m.__bindgen_anon_1.msg_iov };
    let mut s = e.state.lock();
    if s.recv.is_some() {
        return EAGAIN.to_errno();
    }
    s.recv = Some(Recv {
        buf: iov.iov_base.cast(),
        len: iov.iov_len,
        context: m.context,
    });
    0
}

/// # Safety
///
/// kfabric.ko's contract: an open loop endpoint, a checked message.
unsafe extern "C" fn loop_sendmsg(
    ep: *mut sys::kfid_ep,
    msg: *const sys::kfi_msg,
    flags: u64,
) -> c_int {
    // SAFETY: kfabric.ko's contract.
    let (e, m) = unsafe { (loop_ep(ep), &*msg) };
    if m.iov_type != sys::KFI_KVEC {
        return EOPNOTSUPP.to_errno();
    }
    let mut s = e.state.lock();
    if !s.enabled {
        return EINVAL.to_errno();
    }
    let Some(r) = s.recv.take() else {
        return EAGAIN.to_errno();
    };
    let (tx_cq, rx_cq) = (s.tx_cq, s.rx_cq);
    drop(s);
    let mut len = 0;
    for i in 0..m.iov_count {
        // SAFETY: `iov_count` kvecs (checked by kfabric.ko).
        let v = unsafe { *m.__bindgen_anon_1.msg_iov.add(i) };
        let n = v.iov_len.min(r.len.saturating_sub(len));
        // SAFETY: Both buffers hold at least `n` bytes at these offsets.
        unsafe { core::ptr::copy_nonoverlapping(v.iov_base.cast::<u8>(), r.buf.add(len), n) };
        len += v.iov_len;
    }
    let data = if flags & sys::KFI_REMOTE_CQ_DATA != 0 {
        m.data
    } else {
        0
    };
    let rx = sys::kfi_cq_tagged_entry {
        op_context: r.context,
        flags: sys::KFI_RECV | sys::KFI_MSG | (flags & sys::KFI_REMOTE_CQ_DATA),
        len: len.min(r.len),
        buf: r.buf.cast(),
        data,
        tag: 0,
    };
    // SAFETY: The CQs are bound, so open, while the endpoint is.
    unsafe {
        if len > r.len {
            let err = sys::kfi_cq_err_entry {
                op_context: r.context,
                flags: rx.flags,
                len: r.len,
                buf: rx.buf,
                olen: len - r.len,
                err: EMSGSIZE.to_errno().abs(),
                ..Default::default()
            };
            sys::kfi_util_cq_write_err(rx_cq, &err);
        } else {
            sys::kfi_util_cq_write(rx_cq, &rx);
        }
        if flags & sys::KFI_INJECT == 0 {
            let tx = sys::kfi_cq_tagged_entry {
                op_context: m.context,
                flags: sys::KFI_SEND | sys::KFI_MSG,
                len,
                ..Default::default()
            };
            sys::kfi_util_cq_write(tx_cq, &tx);
        }
    }
    0
}
