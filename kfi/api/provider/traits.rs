// SPDX-License-Identifier: GPL-2.0

//! The traits a provider implements: [`Provider`], [`Fabric`], [`Domain`],
//! [`Endpoint`], [`PassiveEndpoint`] (`#[vtable]`: a method left out is a
//! NULL slot, answered by kfabric.ko with `-ENOSYS`), and the plain types
//! their methods take and return.

use core::ffi::CStr;
use kernel::prelude::*;

use super::{
    super::kfi_sys as sys,
    info::Info,
    refs::{Bound, EqRef, FidRef},
};

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

    /// Makes an unmapped region for per-I/O mapping (`kfi_mr_alloc`;
    /// kfabric.ko checked `max_segs`, `access` and `flags`); its key is 0
    /// until mapped. Process context.
    fn mr_alloc(
        &self,
        _max_segs: usize,
        _access: u64,
        _flags: u64,
    ) -> Result<Region<Self::Region>> {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// Maps the buffers of `map` (checked by kfabric.ko) into `region`;
    /// returns the mapping's fresh key. `EINVAL` for a region not made by
    /// `mr_alloc`. Any context but hard interrupt: must neither sleep nor
    /// allocate.
    fn mr_map(_region: &Self::Region, _map: &sys::kfi_mr_map) -> Result<u64> {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// Invalidates `region`'s mapping: `Ok` once no peer access uses its
    /// buffers, `EBUSY` while one still does. Contexts as for `mr_map`.
    fn mr_unmap(_region: &Self::Region) -> Result {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
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
