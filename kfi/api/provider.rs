// SPDX-License-Identifier: GPL-2.0

//! Writing a kfabric provider in Rust.
//!
//! A provider implements [`Provider`] and the object traits ([`Fabric`],
//! [`Domain`], [`Endpoint`], [`PassiveEndpoint`]); [`Registration`] builds
//! the C descriptor and ops tables from them (`#[vtable]`: a method the
//! provider leaves out becomes a NULL slot, which kfabric.ko answers with
//! `-ENOSYS`) and registers the provider. Every object is an [`Object`]: the
//! C header kfabric.ko sees, followed by the provider's Rust value, dropped
//! when kfabric.ko closes the object. Completion queues, event queues and
//! counters are kfabric.ko's util ones; the provider reaches the ones bound
//! to its endpoints through [`Bound`].
//!
//! Contexts: the open, bind and connection-management methods run in
//! process context and may sleep; the data transfer methods (`sendmsg`,
//! `readmsg`, ...) and `cancel` may be called from any context but hard
//! interrupt and must not sleep.

use core::{ffi::CStr, marker::PhantomData, ptr::NonNull};
use kernel::{
    error::{from_result, to_result},
    prelude::*,
    str::CStrExt,
    ThisModule,
};

use super::kfi_sys as sys;

/// A kfabric object implemented in Rust: the C header `H`, then `T`.
#[repr(C)]
pub(crate) struct Object<H, T> {
    hdr: H,
    data: T,
}

/// The Rust value of the object whose C header is at `hdr`.
///
/// # Safety
///
/// `hdr` is the header of a live `Object<H, T>`.
unsafe fn data<'a, H, T>(hdr: *mut H) -> &'a T {
    // SAFETY: The header is the first field of a live `Object<H, T>`.
    unsafe { &(*hdr.cast::<Object<H, T>>()).data }
}

/// Boxes `data` behind the header `hdr` and hands the object out.
///
/// # Safety
///
/// `out` is valid for writes.
unsafe fn hand_out<H, T>(hdr: H, data: T, out: *mut *mut H) -> Result<c_int> {
    let obj = KBox::new(Object { hdr, data }, GFP_KERNEL)?;
    // SAFETY: `out` is valid for writes; the header is the first field.
    unsafe { *out = KBox::into_raw(obj).cast() };
    Ok(0)
}

/// `close` of every Rust object: drops it.
///
/// # Safety
///
/// `fid` is the header of a live `Object<H, T>` made by `hand_out`, closed
/// once (kfabric.ko's contract).
unsafe extern "C" fn close<H, T>(fid: *mut sys::kfid) -> c_int {
    // SAFETY: As required.
    drop(unsafe { KBox::from_raw(fid.cast::<Object<H, T>>()) });
    0
}

const fn fid_ops<H, T>(
    bind: Option<unsafe extern "C" fn(*mut sys::kfid, *mut sys::kfid, u64) -> c_int>,
    control: Option<unsafe extern "C" fn(*mut sys::kfid, c_int, *mut c_void) -> c_int>,
) -> sys::kfi_ops {
    sys::kfi_ops {
        size: size_of::<sys::kfi_ops>(),
        close: Some(close::<H, T>),
        bind,
        control,
    }
}

fn header(ops: &'static sys::kfi_ops) -> sys::kfid {
    sys::kfid {
        ops,
        ..Default::default()
    }
}

/// An optional C string argument.
///
/// # Safety
///
/// `p` is NULL or NUL-terminated.
unsafe fn opt_str<'a>(p: *const c_char) -> Option<&'a CStr> {
    // SAFETY: As required.
    (!p.is_null()).then(|| unsafe { CStr::from_char_ptr(p) })
}

/// One `kfi_info` entry a provider lists; freed if never handed out.
///
/// # Invariants
///
/// `ptr` was made by `kfi_allocinfo` and is owned by this value.
pub(crate) struct Info {
    ptr: NonNull<sys::kfi_info>,
}

impl Info {
    /// An empty entry.
    pub(crate) fn new() -> Result<Self> {
        // SAFETY: No arguments.
        let ptr = NonNull::new(unsafe { sys::kfi_allocinfo() }).ok_or(ENOMEM)?;
        // INVARIANT: fresh from kfi_allocinfo.
        Ok(Self { ptr })
    }

    /// The entry, to fill in; its attribute pointers must stay as they are.
    pub(crate) fn get(&mut self) -> &mut sys::kfi_info {
        // SAFETY: Owned and valid (type invariant).
        unsafe { self.ptr.as_mut() }
    }

    /// Attribute structures of the entry.
    pub(crate) fn attrs(
        &mut self,
    ) -> (
        &mut sys::kfi_tx_attr,
        &mut sys::kfi_rx_attr,
        &mut sys::kfi_ep_attr,
        &mut sys::kfi_domain_attr,
        &mut sys::kfi_fabric_attr,
    ) {
        let i = self.get();
        // SAFETY: The attributes of an entry from kfi_allocinfo are distinct
        // parts of its allocation.
        unsafe {
            (
                &mut *i.tx_attr,
                &mut *i.rx_attr,
                &mut *i.ep_attr,
                &mut *i.domain_attr,
                &mut *i.fabric_attr,
            )
        }
    }

    /// Sets the fabric and domain names (copied). Process context.
    pub(crate) fn set_names(&mut self, fabric: &CStr, domain: &CStr) -> Result {
        self.set(sys::KFI_INFO_FABRIC_NAME, fabric.as_char_ptr().cast(), 0)?;
        self.set(sys::KFI_INFO_DOMAIN_NAME, domain.as_char_ptr().cast(), 0)
    }

    /// Sets the source or destination address (copied). Process context.
    pub(crate) fn set_addr(&mut self, dest: bool, format: u32, addr: &[u8]) -> Result {
        let field = if dest {
            sys::KFI_INFO_DEST_ADDR
        } else {
            sys::KFI_INFO_SRC_ADDR
        };
        self.set(field, addr.as_ptr().cast(), addr.len())?;
        self.get().addr_format = format;
        Ok(())
    }

    /// `kfi_info_set` on this entry.
    fn set(&mut self, field: u32, val: *const c_void, len: usize) -> Result {
        // SAFETY: An entry of kfabric.ko's (type invariant); `val` is a
        // string or `len` bytes, copied before this returns.
        to_result(unsafe { sys::kfi_info_set(self.ptr.as_ptr(), field, val, len) })
    }

    /// Hands the entry over (to kfabric.ko or an EQ event).
    pub(crate) fn into_raw(self) -> *mut sys::kfi_info {
        let p = self.ptr.as_ptr();
        core::mem::forget(self);
        p
    }
}

impl Drop for Info {
    fn drop(&mut self) {
        // SAFETY: Owned (type invariant), freed once.
        unsafe { sys::kfi_freeinfo(self.ptr.as_ptr()) };
    }
}

/// The entry points of a provider.
#[vtable]
pub(crate) trait Provider: 'static {
    /// The provider's name.
    const NAME: &'static CStr;
    /// Its version, `version(major, minor)`.
    const VERSION: u32;
    /// Its fabrics.
    type Fabric: Fabric;

    /// Lists what the provider offers for `node`/`service` (kfabric.ko
    /// filters the list by `hints` afterwards). Process context.
    fn getinfo(
        _node: Option<&CStr>,
        _service: Option<&CStr>,
        _flags: u64,
        _hints: Option<&sys::kfi_info>,
    ) -> Result<KVec<Info>> {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// Opens a fabric. Process context.
    fn fabric(_attr: &sys::kfi_fabric_attr) -> Result<Self::Fabric> {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
}

/// A fabric.
#[vtable]
pub(crate) trait Fabric: Send + Sync + Sized + 'static {
    /// Its domains.
    type Domain: Domain;
    /// Its passive endpoints.
    type PassiveEndpoint: PassiveEndpoint;

    /// Opens a domain for `info`.
    fn domain(&self, _info: &sys::kfi_info) -> Result<Self::Domain> {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// Opens a passive endpoint for `info`, reporting to `eq` once bound.
    fn passive_ep(&self, _info: &sys::kfi_info) -> Result<Self::PassiveEndpoint> {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
}

/// What a registration of memory gives back.
pub(crate) struct Region<R> {
    /// The provider's data for the region.
    pub(crate) data: R,
    /// The key peers use.
    pub(crate) key: u64,
    /// The local descriptor (`kfi_mr_desc`).
    pub(crate) desc: *mut c_void,
}

/// A domain.
#[vtable]
pub(crate) trait Domain: Send + Sync + Sized + 'static {
    /// Its endpoints.
    type Endpoint: Endpoint;
    /// The provider's data of a registered region.
    type Region: Send + Sync + 'static;
    /// Whether the domain's addresses are socket addresses, so that its
    /// address vectors can be kfabric.ko's util AV.
    const SOCKADDR_AV: bool = false;

    /// Opens an endpoint for `info`.
    fn endpoint(&self, _info: &sys::kfi_info) -> Result<Self::Endpoint> {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// Registers the memory of `attr` (kfabric.ko checked the access bits
    /// and list type; `flags` is 0 or KFI_RMA_PMEM).
    fn mr_reg(&self, _attr: &sys::kfi_mr_attr, _flags: u64) -> Result<Region<Self::Region>> {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
}

/// A completion queue, event queue or counter bound to an endpoint.
///
/// # Invariants
///
/// The pointer is an open util queue or counter of kfabric.ko; it stays
/// open while the endpoint it is bound to is (kfabric.ko refuses to close
/// a bound object).
#[derive(Clone, Copy)]
pub(crate) enum Bound {
    /// A completion queue, with the bind flags (KFI_TRANSMIT, KFI_RECV, ...).
    Cq(CqRef, u64),
    /// An event queue.
    Eq(EqRef),
    /// A counter, with the bind flags.
    Cntr(CntrRef, u64),
    /// Anything else (an AV, an MR), as its header.
    Other(*mut sys::kfid),
}

/// The header of an open object of this provider, as events name it.
///
/// # Invariants
///
/// Points to the header of an object that is open; providers keep it only
/// in the object's own value (so it lives exactly as long).
#[derive(Clone, Copy)]
pub(crate) struct FidRef(NonNull<sys::kfid>);

// SAFETY: Only the address is used (to name the object in events).
unsafe impl Send for FidRef {}
// SAFETY: See `Send`.
unsafe impl Sync for FidRef {}

impl FidRef {
    /// The raw header, for event entries.
    pub(crate) fn as_ptr(&self) -> *mut sys::kfid {
        self.0.as_ptr()
    }
}

/// A util CQ an endpoint reports to.
///
/// # Invariants
///
/// See [`Bound`].
#[derive(Clone, Copy)]
pub(crate) struct CqRef(NonNull<sys::kfid_cq>);

// SAFETY: The util CQ is locked internally and may be written from any
// context but hard interrupt.
unsafe impl Send for CqRef {}
// SAFETY: See `Send`.
unsafe impl Sync for CqRef {}

impl CqRef {
    /// Reports a completion. Any context but hard interrupt.
    pub(crate) fn complete(&self, e: &sys::kfi_cq_tagged_entry) -> Result {
        // SAFETY: An open util CQ (type invariant); `e` is valid.
        to_result(unsafe { sys::kfi_util_cq_write(self.0.as_ptr(), e) })
    }

    /// Reports a failed operation. Any context but hard interrupt.
    pub(crate) fn complete_err(&self, e: &sys::kfi_cq_err_entry) -> Result {
        // SAFETY: An open util CQ (type invariant); `e` is valid.
        to_result(unsafe { sys::kfi_util_cq_write_err(self.0.as_ptr(), e) })
    }
}

/// A util EQ an endpoint reports to.
///
/// # Invariants
///
/// See [`Bound`].
#[derive(Clone, Copy)]
pub(crate) struct EqRef(NonNull<sys::kfid_eq>);

// SAFETY: The util EQ is locked internally.
unsafe impl Send for EqRef {}
// SAFETY: See `Send`.
unsafe impl Sync for EqRef {}

impl EqRef {
    /// Queues connection event `event` with the bytes `entry` (a
    /// `kfi_eq_cm_entry` and private data); a `KFI_CONNREQ`'s `info`
    /// belongs to the EQ once this succeeds. Any context but hard
    /// interrupt.
    pub(crate) fn write(&self, event: u32, entry: &[u8]) -> Result {
        // SAFETY: An open util EQ (type invariant); `entry` is valid.
        to_result(unsafe {
            sys::kfi_util_eq_write_cm(self.0.as_ptr(), event, entry.as_ptr().cast(), entry.len())
        })
    }

    /// Queues an error entry (its `err_data` is copied).
    pub(crate) fn write_err(&self, e: &sys::kfi_eq_err_entry) -> Result {
        // SAFETY: An open util EQ (type invariant); `e` is valid.
        to_result(unsafe { sys::kfi_util_eq_write_err(self.0.as_ptr(), e) })
    }
}

/// A counter an endpoint counts in.
///
/// # Invariants
///
/// See [`Bound`].
#[derive(Clone, Copy)]
pub(crate) struct CntrRef(NonNull<sys::kfid_cntr>);

// SAFETY: Counters are locked internally.
unsafe impl Send for CntrRef {}
// SAFETY: See `Send`.
unsafe impl Sync for CntrRef {}

impl CntrRef {
    /// Counts `n` successes (`err`: errors).
    pub(crate) fn add(&self, n: u64, err: bool) -> Result {
        // SAFETY: An open counter (type invariant).
        to_result(unsafe {
            if err {
                sys::kfi_cntr_adderr(self.0.as_ptr(), n)
            } else {
                sys::kfi_cntr_add(self.0.as_ptr(), n)
            }
        })
    }
}

/// What kfabric.ko checks operations of an endpoint against.
#[derive(Clone, Copy, Default)]
pub(crate) struct EndpointAttr {
    /// Capabilities (KFI_MSG, KFI_RMA, ...).
    pub(crate) caps: u64,
    /// Supported operation flags (completion levels, KFI_INJECT, ...).
    pub(crate) op_flags: u64,
    /// Most local buffers of a transmit.
    pub(crate) tx_iov_limit: usize,
    /// Most buffers of a receive.
    pub(crate) rx_iov_limit: usize,
    /// Most remote buffers of an RMA or atomic.
    pub(crate) rma_iov_limit: usize,
    /// Largest inject.
    pub(crate) inject_size: usize,
    /// Longest send, RMA or atomic transfer (0: not checked).
    pub(crate) max_msg_size: usize,
}

/// Which atomic a validity query is about.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum AtomicKind {
    /// `kfi_atomic`.
    Write,
    /// `kfi_fetch_atomic`.
    Fetch,
    /// `kfi_compare_atomic`.
    Compare,
}

/// An active endpoint.
#[vtable]
pub(crate) trait Endpoint: Send + Sync + Sized + 'static {
    /// Its limits, read once when it is opened.
    fn attr(&self) -> EndpointAttr;

    /// The endpoint's header, once it exists (before the ULP sees it).
    fn opened(&self, _fid: FidRef) {}

    /// Something was bound to it (process context).
    fn bind(&self, _what: Bound) -> Result {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
    /// `kfi_enable`.
    fn enable(&self) -> Result {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
    /// `kfi_getname`: writes the address, returns its full length.
    fn getname(&self, _addr: &mut [u8]) -> Result<usize> {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
    /// `kfi_getpeer`.
    fn getpeer(&self, _addr: &mut [u8]) -> Result<usize> {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
    /// `kfi_connect` (the address in the domain's format).
    fn connect(&self, _addr: *const c_void, _param: &[u8]) -> Result {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
    /// `kfi_accept`.
    fn accept(&self, _param: &[u8]) -> Result {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
    /// `kfi_shutdown`.
    fn shutdown(&self, _flags: u64) -> Result {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
    /// `kfi_cancel` (any context but hard interrupt).
    fn cancel(&self, _context: *mut c_void) -> Result {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
    /// `kfi_sendmsg` (any context but hard interrupt; checked by kfabric.ko).
    fn sendmsg(&self, _msg: &sys::kfi_msg, _flags: u64) -> Result {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
    /// `kfi_recvmsg`.
    fn recvmsg(&self, _msg: &sys::kfi_msg, _flags: u64) -> Result {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
    /// `kfi_readmsg`.
    fn readmsg(&self, _msg: &sys::kfi_msg_rma, _flags: u64) -> Result {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
    /// `kfi_writemsg`.
    fn writemsg(&self, _msg: &sys::kfi_msg_rma, _flags: u64) -> Result {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
    /// `kfi_tsendmsg`.
    fn tsendmsg(&self, _msg: &sys::kfi_msg_tagged, _flags: u64) -> Result {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
    /// `kfi_trecvmsg`.
    fn trecvmsg(&self, _msg: &sys::kfi_msg_tagged, _flags: u64) -> Result {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
    /// `kfi_atomicmsg`, `kfi_fetch_atomicmsg` (`result`) and
    /// `kfi_compare_atomicmsg` (`compare` and `result`).
    fn atomic(
        &self,
        _msg: &sys::kfi_msg_atomic,
        _compare: &[sys::kfi_ioc],
        _result: &[sys::kfi_ioc],
        _flags: u64,
    ) -> Result {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
    /// Whether an atomic of `kind` on (`datatype`, `op`) works: the most
    /// elements of one operation.
    fn atomic_valid(&self, _kind: AtomicKind, _datatype: u32, _op: u32) -> Result<usize> {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
}

/// A passive endpoint.
#[vtable]
pub(crate) trait PassiveEndpoint: Send + Sync + Sized + 'static {
    /// The passive endpoint's header, once it exists.
    fn opened(&self, _fid: FidRef) {}

    /// The EQ for its connection requests was bound.
    fn bind_eq(&self, _eq: EqRef) -> Result {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
    /// `kfi_listen`.
    fn listen(&self) -> Result {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
    /// `kfi_reject` of the request `handle` (a `kfi_info.handle`).
    fn reject(&self, _handle: *mut sys::kfid, _param: &[u8]) -> Result {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
    /// `kfi_getname`.
    fn getname(&self, _addr: &mut [u8]) -> Result<usize> {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
}

/// A provider that has no passive endpoints.
pub(crate) enum NoPassiveEndpoint {}

#[vtable]
impl PassiveEndpoint for NoPassiveEndpoint {}

/// A byte slice from a C pointer and length (empty for NULL).
///
/// # Safety
///
/// `p` is NULL or valid for `len` bytes for `'a`.
unsafe fn bytes<'a>(p: *const c_void, len: usize) -> &'a [u8] {
    if p.is_null() || len == 0 {
        &[]
    } else {
        // SAFETY: As required.
        unsafe { core::slice::from_raw_parts(p.cast(), len) }
    }
}

/// A writable byte slice for an address out-parameter.
///
/// # Safety
///
/// `p` is NULL or valid for `*len` bytes.
unsafe fn addr_buf<'a>(p: *mut c_void, len: *mut usize) -> &'a mut [u8] {
    // SAFETY: kfabric.ko checked `len` non-NULL.
    let n = unsafe { *len };
    if p.is_null() || n == 0 {
        &mut []
    } else {
        // SAFETY: As required.
        unsafe { core::slice::from_raw_parts_mut(p.cast(), n) }
    }
}

/// The ops tables of the objects of provider `P`.
struct Tables<P: Provider>(PhantomData<P>);

type FabricOf<P> = <P as Provider>::Fabric;
type DomainOf<P> = <FabricOf<P> as Fabric>::Domain;
type EndpointOf<P> = <DomainOf<P> as Domain>::Endpoint;
type PepOf<P> = <FabricOf<P> as Fabric>::PassiveEndpoint;
type RegionOf<P> = <DomainOf<P> as Domain>::Region;

impl<P: Provider> Tables<P> {
    const FABRIC_FID: sys::kfi_ops = fid_ops::<sys::kfid_fabric, FabricOf<P>>(None, None);
    const FABRIC: sys::kfi_ops_fabric = sys::kfi_ops_fabric {
        size: size_of::<sys::kfi_ops_fabric>(),
        domain: if <FabricOf<P>>::HAS_DOMAIN {
            Some(Self::domain)
        } else {
            None
        },
        passive_ep: if <FabricOf<P>>::HAS_PASSIVE_EP {
            Some(Self::passive_ep)
        } else {
            None
        },
        eq_open: Some(sys::kfi_util_eq_open),
    };
    const DOMAIN_FID: sys::kfi_ops = fid_ops::<sys::kfid_domain, DomainOf<P>>(None, None);
    const DOMAIN: sys::kfi_ops_domain = sys::kfi_ops_domain {
        size: size_of::<sys::kfi_ops_domain>(),
        av_open: if <DomainOf<P>>::SOCKADDR_AV {
            Some(sys::kfi_util_av_open)
        } else {
            None
        },
        cq_open: Some(sys::kfi_util_cq_open),
        endpoint: if <DomainOf<P>>::HAS_ENDPOINT {
            Some(Self::endpoint)
        } else {
            None
        },
        cntr_open: Some(sys::kfi_util_cntr_open),
    };
    const MR: sys::kfi_ops_mr = sys::kfi_ops_mr {
        size: size_of::<sys::kfi_ops_mr>(),
        regattr: if <DomainOf<P>>::HAS_MR_REG {
            Some(Self::mr_reg)
        } else {
            None
        },
    };
    const MR_FID: sys::kfi_ops = fid_ops::<sys::kfid_mr, RegionOf<P>>(None, None);
    const EP_FID: sys::kfi_ops =
        fid_ops::<sys::kfid_ep, EndpointOf<P>>(Some(Self::ep_bind), Some(Self::ep_control));
    const EP: sys::kfi_ops_ep = sys::kfi_ops_ep {
        size: size_of::<sys::kfi_ops_ep>(),
        cancel: if <EndpointOf<P>>::HAS_CANCEL {
            Some(Self::cancel)
        } else {
            None
        },
        getopt: None,
        setopt: None,
    };
    const CM: sys::kfi_ops_cm = sys::kfi_ops_cm {
        size: size_of::<sys::kfi_ops_cm>(),
        getname: if <EndpointOf<P>>::HAS_GETNAME {
            Some(Self::getname)
        } else {
            None
        },
        getpeer: if <EndpointOf<P>>::HAS_GETPEER {
            Some(Self::getpeer)
        } else {
            None
        },
        connect: if <EndpointOf<P>>::HAS_CONNECT {
            Some(Self::connect)
        } else {
            None
        },
        listen: None,
        accept: if <EndpointOf<P>>::HAS_ACCEPT {
            Some(Self::accept)
        } else {
            None
        },
        reject: None,
        shutdown: if <EndpointOf<P>>::HAS_SHUTDOWN {
            Some(Self::shutdown)
        } else {
            None
        },
    };
    const MSG: sys::kfi_ops_msg = sys::kfi_ops_msg {
        size: size_of::<sys::kfi_ops_msg>(),
        recvmsg: if <EndpointOf<P>>::HAS_RECVMSG {
            Some(Self::recvmsg)
        } else {
            None
        },
        sendmsg: if <EndpointOf<P>>::HAS_SENDMSG {
            Some(Self::sendmsg)
        } else {
            None
        },
    };
    const RMA: sys::kfi_ops_rma = sys::kfi_ops_rma {
        size: size_of::<sys::kfi_ops_rma>(),
        readmsg: if <EndpointOf<P>>::HAS_READMSG {
            Some(Self::readmsg)
        } else {
            None
        },
        writemsg: if <EndpointOf<P>>::HAS_WRITEMSG {
            Some(Self::writemsg)
        } else {
            None
        },
    };
    const TAGGED: sys::kfi_ops_tagged = sys::kfi_ops_tagged {
        size: size_of::<sys::kfi_ops_tagged>(),
        recvmsg: if <EndpointOf<P>>::HAS_TRECVMSG {
            Some(Self::trecvmsg)
        } else {
            None
        },
        sendmsg: if <EndpointOf<P>>::HAS_TSENDMSG {
            Some(Self::tsendmsg)
        } else {
            None
        },
    };
    const ATOMIC: sys::kfi_ops_atomic = sys::kfi_ops_atomic {
        size: size_of::<sys::kfi_ops_atomic>(),
        writemsg: if <EndpointOf<P>>::HAS_ATOMIC {
            Some(Self::atomic_write)
        } else {
            None
        },
        readwritemsg: if <EndpointOf<P>>::HAS_ATOMIC {
            Some(Self::atomic_fetch)
        } else {
            None
        },
        compwritemsg: if <EndpointOf<P>>::HAS_ATOMIC {
            Some(Self::atomic_compare)
        } else {
            None
        },
        writevalid: if <EndpointOf<P>>::HAS_ATOMIC_VALID {
            Some(Self::valid_write)
        } else {
            None
        },
        readwritevalid: if <EndpointOf<P>>::HAS_ATOMIC_VALID {
            Some(Self::valid_fetch)
        } else {
            None
        },
        compwritevalid: if <EndpointOf<P>>::HAS_ATOMIC_VALID {
            Some(Self::valid_compare)
        } else {
            None
        },
    };
    const PEP_FID: sys::kfi_ops = fid_ops::<sys::kfid_pep, PepOf<P>>(Some(Self::pep_bind), None);
    const PEP_EP: sys::kfi_ops_ep = sys::kfi_ops_ep {
        size: size_of::<sys::kfi_ops_ep>(),
        cancel: None,
        getopt: None,
        setopt: None,
    };
    const PEP_CM: sys::kfi_ops_cm = sys::kfi_ops_cm {
        size: size_of::<sys::kfi_ops_cm>(),
        getname: if <PepOf<P>>::HAS_GETNAME {
            Some(Self::pep_getname)
        } else {
            None
        },
        getpeer: None,
        connect: None,
        listen: if <PepOf<P>>::HAS_LISTEN {
            Some(Self::listen)
        } else {
            None
        },
        accept: None,
        reject: if <PepOf<P>>::HAS_REJECT {
            Some(Self::reject)
        } else {
            None
        },
        shutdown: None,
    };

    /// # Safety
    ///
    /// kfabric.ko's contract: valid arguments, `info` valid for writes.
    unsafe extern "C" fn getinfo(
        _version: u32,
        node: *const c_char,
        service: *const c_char,
        flags: u64,
        hints: *const sys::kfi_info,
        info: *mut *mut sys::kfi_info,
    ) -> c_int {
        from_result(|| {
            // SAFETY: Valid arguments (kfabric.ko's contract).
            let list =
                unsafe { P::getinfo(opt_str(node), opt_str(service), flags, hints.as_ref()) }?;
            let mut head: *mut sys::kfi_info = core::ptr::null_mut();
            let mut tail: *mut *mut sys::kfi_info = &mut head;
            for e in list {
                let p = e.into_raw();
                // SAFETY: `tail` is `head` or the `next` of the last entry,
                // which the list owns now.
                unsafe {
                    *tail = p;
                    tail = &raw mut (*p).next;
                }
            }
            if head.is_null() {
                return Err(ENODATA);
            }
            // SAFETY: Valid for writes.
            unsafe { *info = head };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// kfabric.ko's contract.
    unsafe extern "C" fn fabric(
        attr: *const sys::kfi_fabric_attr,
        out: *mut *mut sys::kfid_fabric,
        _context: *mut c_void,
    ) -> c_int {
        from_result(|| {
            // SAFETY: Valid attributes (kfabric.ko's contract).
            let f = P::fabric(unsafe { &*attr })?;
            let hdr = sys::kfid_fabric {
                fid: header(&Self::FABRIC_FID),
                ops: &Self::FABRIC,
                api_version: 0,
            };
            // SAFETY: `out` is valid for writes.
            unsafe { hand_out(hdr, f, out) }
        })
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open fabric of `P`.
    unsafe extern "C" fn domain(
        fabric: *mut sys::kfid_fabric,
        info: *mut sys::kfi_info,
        out: *mut *mut sys::kfid_domain,
        _context: *mut c_void,
    ) -> c_int {
        from_result(|| {
            // SAFETY: An open fabric of `P`; a valid entry.
            let d = unsafe { data::<_, FabricOf<P>>(fabric).domain(&*info) }?;
            let hdr = sys::kfid_domain {
                fid: header(&Self::DOMAIN_FID),
                ops: &Self::DOMAIN,
                mr: &Self::MR,
            };
            // SAFETY: `out` is valid for writes.
            unsafe { hand_out(hdr, d, out) }
        })
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open fabric of `P`.
    unsafe extern "C" fn passive_ep(
        fabric: *mut sys::kfid_fabric,
        info: *mut sys::kfi_info,
        out: *mut *mut sys::kfid_pep,
        _context: *mut c_void,
    ) -> c_int {
        from_result(|| {
            // SAFETY: An open fabric of `P`; a valid entry.
            let p = unsafe { data::<_, FabricOf<P>>(fabric).passive_ep(&*info) }?;
            let hdr = sys::kfid_pep {
                fid: header(&Self::PEP_FID),
                ops: &Self::PEP_EP,
                cm: &Self::PEP_CM,
            };
            // SAFETY: `out` is valid for writes.
            unsafe { hand_out(hdr, p, out) }?;
            // SAFETY: Just handed out: a live object of `P`.
            unsafe {
                if let Some(f) = NonNull::new((*out).cast::<sys::kfid>()) {
                    Self::pep(*out).opened(FidRef(f));
                }
            }
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open domain of `P`.
    unsafe extern "C" fn endpoint(
        domain: *mut sys::kfid_domain,
        info: *mut sys::kfi_info,
        out: *mut *mut sys::kfid_ep,
        _context: *mut c_void,
    ) -> c_int {
        from_result(|| {
            // SAFETY: An open domain of `P`; a valid entry.
            let e = unsafe { data::<_, DomainOf<P>>(domain).endpoint(&*info) }?;
            let a = e.attr();
            let hdr = sys::kfid_ep {
                fid: header(&Self::EP_FID),
                ops: &Self::EP,
                cm: &Self::CM,
                msg: &Self::MSG,
                rma: &Self::RMA,
                tagged: &Self::TAGGED,
                atomic: &Self::ATOMIC,
                caps: a.caps,
                op_flags: a.op_flags,
                tx_iov_limit: a.tx_iov_limit,
                rx_iov_limit: a.rx_iov_limit,
                rma_iov_limit: a.rma_iov_limit,
                inject_size: a.inject_size,
                max_msg_size: a.max_msg_size,
            };
            // SAFETY: `out` is valid for writes.
            unsafe { hand_out(hdr, e, out) }?;
            // SAFETY: Just handed out: a live object of `P`.
            unsafe {
                if let Some(f) = NonNull::new((*out).cast::<sys::kfid>()) {
                    Self::ep(*out).opened(FidRef(f));
                }
            }
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open domain of `P`, checked attributes.
    unsafe extern "C" fn mr_reg(
        domain: *mut sys::kfid_domain,
        attr: *const sys::kfi_mr_attr,
        flags: u64,
        out: *mut *mut sys::kfid_mr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: An open domain of `P`; valid attributes.
            let r = unsafe { data::<_, DomainOf<P>>(domain).mr_reg(&*attr, flags) }?;
            let hdr = sys::kfid_mr {
                fid: header(&Self::MR_FID),
                mem_desc: r.desc,
                key: r.key,
            };
            // SAFETY: `out` is valid for writes.
            unsafe { hand_out(hdr, r.data, out) }
        })
    }

    /// The endpoint of `P` behind `ep`.
    ///
    /// # Safety
    ///
    /// `ep` is an open endpoint of `P`.
    unsafe fn ep<'a>(ep: *mut sys::kfid_ep) -> &'a EndpointOf<P> {
        // SAFETY: As required.
        unsafe { data::<_, EndpointOf<P>>(ep) }
    }

    /// What `bfid`, an open object, is to a provider.
    ///
    /// # Safety
    ///
    /// `bfid` is an open object.
    unsafe fn bound(bfid: *mut sys::kfid, flags: u64) -> Bound {
        // SAFETY: An open object (requirement).
        let class = unsafe { (*bfid).fclass };
        match (class, NonNull::new(bfid)) {
            // INVARIANT: open and bound; kfabric.ko keeps it open.
            (sys::KFI_CLASS_CQ, Some(p)) => Bound::Cq(CqRef(p.cast()), flags),
            (sys::KFI_CLASS_EQ, Some(p)) => Bound::Eq(EqRef(p.cast())),
            (sys::KFI_CLASS_CNTR, Some(p)) => Bound::Cntr(CntrRef(p.cast()), flags),
            _ => Bound::Other(bfid),
        }
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open endpoint of `P`, an open object.
    unsafe extern "C" fn ep_bind(fid: *mut sys::kfid, bfid: *mut sys::kfid, flags: u64) -> c_int {
        if !<EndpointOf<P>>::HAS_BIND {
            return ENOSYS.to_errno();
        }
        // SAFETY: As required.
        from_result(|| unsafe { Self::ep(fid.cast()).bind(Self::bound(bfid, flags)) }.map(|()| 0))
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open endpoint of `P`.
    unsafe extern "C" fn ep_control(
        fid: *mut sys::kfid,
        command: c_int,
        _arg: *mut c_void,
    ) -> c_int {
        if command != sys::KFI_ENABLE as c_int || !<EndpointOf<P>>::HAS_ENABLE {
            return ENOSYS.to_errno();
        }
        // SAFETY: As required.
        from_result(|| unsafe { Self::ep(fid.cast()).enable() }.map(|()| 0))
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open endpoint of `P`.
    unsafe extern "C" fn cancel(fid: *mut sys::kfid, context: *mut c_void) -> c_int {
        // SAFETY: As required.
        from_result(|| unsafe { Self::ep(fid.cast()).cancel(context) }.map(|()| 0))
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open endpoint of `P`, a length pointer.
    unsafe extern "C" fn getname(
        fid: *mut sys::kfid,
        addr: *mut c_void,
        addrlen: *mut usize,
    ) -> c_int {
        from_result(|| {
            // SAFETY: As required.
            let n = unsafe { Self::ep(fid.cast()).getname(addr_buf(addr, addrlen)) }?;
            // SAFETY: Checked non-NULL by kfabric.ko.
            unsafe { *addrlen = n };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open endpoint of `P`, a length pointer.
    unsafe extern "C" fn getpeer(
        ep: *mut sys::kfid_ep,
        addr: *mut c_void,
        addrlen: *mut usize,
    ) -> c_int {
        from_result(|| {
            // SAFETY: As required.
            let n = unsafe { Self::ep(ep).getpeer(addr_buf(addr, addrlen)) }?;
            // SAFETY: Checked non-NULL by kfabric.ko.
            unsafe { *addrlen = n };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open endpoint of `P`.
    unsafe extern "C" fn connect(
        ep: *mut sys::kfid_ep,
        addr: *const c_void,
        param: *const c_void,
        len: usize,
    ) -> c_int {
        // SAFETY: As required; `param` holds `len` bytes.
        from_result(|| unsafe { Self::ep(ep).connect(addr, bytes(param, len)) }.map(|()| 0))
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open endpoint of `P`.
    unsafe extern "C" fn accept(ep: *mut sys::kfid_ep, param: *const c_void, len: usize) -> c_int {
        // SAFETY: As required; `param` holds `len` bytes.
        from_result(|| unsafe { Self::ep(ep).accept(bytes(param, len)) }.map(|()| 0))
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open endpoint of `P`.
    unsafe extern "C" fn shutdown(ep: *mut sys::kfid_ep, flags: u64) -> c_int {
        // SAFETY: As required.
        from_result(|| unsafe { Self::ep(ep).shutdown(flags) }.map(|()| 0))
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open endpoint of `P`, a checked message.
    unsafe extern "C" fn sendmsg(
        ep: *mut sys::kfid_ep,
        msg: *const sys::kfi_msg,
        flags: u64,
    ) -> c_int {
        // SAFETY: As required.
        from_result(|| unsafe { Self::ep(ep).sendmsg(&*msg, flags) }.map(|()| 0))
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open endpoint of `P`, a checked message.
    unsafe extern "C" fn recvmsg(
        ep: *mut sys::kfid_ep,
        msg: *const sys::kfi_msg,
        flags: u64,
    ) -> c_int {
        // SAFETY: As required.
        from_result(|| unsafe { Self::ep(ep).recvmsg(&*msg, flags) }.map(|()| 0))
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open endpoint of `P`, a checked message.
    unsafe extern "C" fn readmsg(
        ep: *mut sys::kfid_ep,
        msg: *const sys::kfi_msg_rma,
        flags: u64,
    ) -> c_int {
        // SAFETY: As required.
        from_result(|| unsafe { Self::ep(ep).readmsg(&*msg, flags) }.map(|()| 0))
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open endpoint of `P`, a checked message.
    unsafe extern "C" fn writemsg(
        ep: *mut sys::kfid_ep,
        msg: *const sys::kfi_msg_rma,
        flags: u64,
    ) -> c_int {
        // SAFETY: As required.
        from_result(|| unsafe { Self::ep(ep).writemsg(&*msg, flags) }.map(|()| 0))
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open endpoint of `P`, a checked message.
    unsafe extern "C" fn tsendmsg(
        ep: *mut sys::kfid_ep,
        msg: *const sys::kfi_msg_tagged,
        flags: u64,
    ) -> c_int {
        // SAFETY: As required.
        from_result(|| unsafe { Self::ep(ep).tsendmsg(&*msg, flags) }.map(|()| 0))
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open endpoint of `P`, a checked message.
    unsafe extern "C" fn trecvmsg(
        ep: *mut sys::kfid_ep,
        msg: *const sys::kfi_msg_tagged,
        flags: u64,
    ) -> c_int {
        // SAFETY: As required.
        from_result(|| unsafe { Self::ep(ep).trecvmsg(&*msg, flags) }.map(|()| 0))
    }

    /// An operand array from C (empty for NULL).
    ///
    /// # Safety
    ///
    /// `p` is NULL or holds `n` entries.
    unsafe fn iocs<'a>(p: *const sys::kfi_ioc, n: usize) -> &'a [sys::kfi_ioc] {
        if p.is_null() {
            &[]
        } else {
            // SAFETY: As required.
            unsafe { core::slice::from_raw_parts(p, n) }
        }
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open endpoint of `P`, a checked message.
    unsafe extern "C" fn atomic_write(
        ep: *mut sys::kfid_ep,
        msg: *const sys::kfi_msg_atomic,
        flags: u64,
    ) -> c_int {
        // SAFETY: As required.
        from_result(|| unsafe { Self::ep(ep).atomic(&*msg, &[], &[], flags) }.map(|()| 0))
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open endpoint of `P`, checked arguments.
    unsafe extern "C" fn atomic_fetch(
        ep: *mut sys::kfid_ep,
        msg: *const sys::kfi_msg_atomic,
        resultv: *mut sys::kfi_ioc,
        _result_desc: *mut *mut c_void,
        result_count: usize,
        flags: u64,
    ) -> c_int {
        from_result(|| {
            // SAFETY: As required.
            unsafe { Self::ep(ep).atomic(&*msg, &[], Self::iocs(resultv, result_count), flags) }
                .map(|()| 0)
        })
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open endpoint of `P`, checked arguments.
    #[allow(clippy::too_many_arguments)]
    unsafe extern "C" fn atomic_compare(
        ep: *mut sys::kfid_ep,
        msg: *const sys::kfi_msg_atomic,
        comparev: *const sys::kfi_ioc,
        _compare_desc: *mut *mut c_void,
        compare_count: usize,
        resultv: *mut sys::kfi_ioc,
        _result_desc: *mut *mut c_void,
        result_count: usize,
        flags: u64,
    ) -> c_int {
        from_result(|| {
            // SAFETY: As required.
            unsafe {
                Self::ep(ep).atomic(
                    &*msg,
                    Self::iocs(comparev, compare_count),
                    Self::iocs(resultv, result_count),
                    flags,
                )
            }
            .map(|()| 0)
        })
    }

    /// # Safety
    ///
    /// An open endpoint of `P`; `count` valid for writes.
    unsafe fn valid(
        ep: *mut sys::kfid_ep,
        kind: AtomicKind,
        datatype: u32,
        op: u32,
        count: *mut usize,
    ) -> c_int {
        from_result(|| {
            // SAFETY: As required.
            let n = unsafe { Self::ep(ep).atomic_valid(kind, datatype, op) }?;
            // SAFETY: Checked non-NULL by kfabric.ko.
            unsafe { *count = n };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// kfabric.ko's contract.
    unsafe extern "C" fn valid_write(
        ep: *mut sys::kfid_ep,
        datatype: u32,
        op: u32,
        count: *mut usize,
    ) -> c_int {
        // SAFETY: As required.
        unsafe { Self::valid(ep, AtomicKind::Write, datatype, op, count) }
    }

    /// # Safety
    ///
    /// kfabric.ko's contract.
    unsafe extern "C" fn valid_fetch(
        ep: *mut sys::kfid_ep,
        datatype: u32,
        op: u32,
        count: *mut usize,
    ) -> c_int {
        // SAFETY: As required.
        unsafe { Self::valid(ep, AtomicKind::Fetch, datatype, op, count) }
    }

    /// # Safety
    ///
    /// kfabric.ko's contract.
    unsafe extern "C" fn valid_compare(
        ep: *mut sys::kfid_ep,
        datatype: u32,
        op: u32,
        count: *mut usize,
    ) -> c_int {
        // SAFETY: As required.
        unsafe { Self::valid(ep, AtomicKind::Compare, datatype, op, count) }
    }

    /// The passive endpoint of `P` behind `pep`.
    ///
    /// # Safety
    ///
    /// `pep` is an open passive endpoint of `P`.
    unsafe fn pep<'a>(pep: *mut sys::kfid_pep) -> &'a PepOf<P> {
        // SAFETY: As required.
        unsafe { data::<_, PepOf<P>>(pep) }
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open passive endpoint of `P`, an open object.
    unsafe extern "C" fn pep_bind(fid: *mut sys::kfid, bfid: *mut sys::kfid, flags: u64) -> c_int {
        // SAFETY: As required.
        match unsafe { Self::bound(bfid, flags) } {
            Bound::Eq(eq) if <PepOf<P>>::HAS_BIND_EQ => {
                // SAFETY: As required.
                from_result(|| unsafe { Self::pep(fid.cast()).bind_eq(eq) }.map(|()| 0))
            }
            Bound::Eq(_) => ENOSYS.to_errno(),
            _ => EINVAL.to_errno(),
        }
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open passive endpoint of `P`.
    unsafe extern "C" fn listen(pep: *mut sys::kfid_pep) -> c_int {
        // SAFETY: As required.
        from_result(|| unsafe { Self::pep(pep).listen() }.map(|()| 0))
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open passive endpoint of `P`.
    unsafe extern "C" fn reject(
        pep: *mut sys::kfid_pep,
        handle: *mut sys::kfid,
        param: *const c_void,
        len: usize,
    ) -> c_int {
        // SAFETY: As required; `param` holds `len` bytes.
        from_result(|| unsafe { Self::pep(pep).reject(handle, bytes(param, len)) }.map(|()| 0))
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open passive endpoint of `P`.
    unsafe extern "C" fn pep_getname(
        fid: *mut sys::kfid,
        addr: *mut c_void,
        addrlen: *mut usize,
    ) -> c_int {
        from_result(|| {
            // SAFETY: As required.
            let n = unsafe { Self::pep(fid.cast()).getname(addr_buf(addr, addrlen)) }?;
            // SAFETY: Checked non-NULL by kfabric.ko.
            unsafe { *addrlen = n };
            Ok(0)
        })
    }
}

/// Provider `P` registered with kfabric.ko; deregistered when dropped.
///
/// # Invariants
///
/// `desc` was registered by a successful `kfi_provider_register` and stays
/// at this address (boxed) until deregistered.
pub(crate) struct Registration<P: Provider> {
    desc: KBox<sys::kfi_provider>,
    _p: PhantomData<P>,
}

// SAFETY: The descriptor is only read after registration (by kfabric.ko,
// from any thread).
unsafe impl<P: Provider> Send for Registration<P> {}
// SAFETY: See `Send`.
unsafe impl<P: Provider> Sync for Registration<P> {}

impl<P: Provider> Registration<P> {
    /// Registers `P`, implemented by `module`. Process context.
    pub(crate) fn register(module: &'static ThisModule) -> Result<Self> {
        let mut desc = KBox::new(
            sys::kfi_provider {
                name: P::NAME.as_char_ptr(),
                version: P::VERSION,
                owner: module.as_ptr(),
                getinfo: if P::HAS_GETINFO {
                    Some(Tables::<P>::getinfo)
                } else {
                    None
                },
                fabric: if P::HAS_FABRIC {
                    Some(Tables::<P>::fabric)
                } else {
                    None
                },
            },
            GFP_KERNEL,
        )?;
        // SAFETY: The descriptor is valid and boxed: it keeps its address
        // until `drop` deregisters it.
        to_result(unsafe { sys::kfi_provider_register(super::kfabric::API_VERSION, &mut *desc) })?;
        // INVARIANT: registered just now.
        Ok(Self {
            desc,
            _p: PhantomData,
        })
    }
}

impl<P: Provider> Drop for Registration<P> {
    fn drop(&mut self) {
        // SAFETY: Registered (type invariant). Objects of the provider pin
        // its module, so none is open when the module goes.
        let ret = unsafe { sys::kfi_provider_deregister(&mut *self.desc) };
        if ret != 0 {
            pr_err!("provider deregistration failed: {}\n", ret);
        }
    }
}
