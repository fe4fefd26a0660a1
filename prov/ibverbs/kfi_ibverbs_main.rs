// SPDX-License-Identifier: GPL-2.0

//! kfi_ibverbs.ko: the kfabric provider over in-kernel ib_core and
//! rdma_cm (soft-iWARP `siw`, soft-RoCE `rxe`, RDMA adapters).
//!
//! What works so far: devices are tracked as ib_core adds and removes
//! them; one kfi fabric per link type (InfiniBand, RoCE, iWARP) and one
//! domain (and protection domain) per device; getinfo answers from the
//! device's own limits and finds the device that serves a node (the RDMA
//! device of the netdev that owns or routes to the address). Passive
//! endpoints listen through rdma_cm; MSG endpoints connect, accept, reject
//! and shut down with their RC QP, and a device's removal shuts its
//! endpoints down. Messages (send/recv, inject, remote CQ data) of up to
//! a slot (4 KiB less a header) are copied through DMA-mapped slots with
//! credit flow control (`data.rs`); tagged messages matched by the
//! provider (`tagged.rs`); RMA and the device's atomics (`rma.rs`). Not
//! yet: RDM endpoints.

use core::{
    ffi::{c_int, CStr},
    sync::atomic::{AtomicU32, Ordering},
};
use kernel::prelude::*;

#[path = "../../kfi/api/mod.rs"]
mod kfi;

mod conn;
mod data;
mod devices;
mod domain;
mod domdev;
mod ep;
mod flush;
mod frame;
mod ib;
mod ib_sys;
mod mr;
mod net;
mod pep;
mod region;
mod reglink;
mod rma;
mod tagged;

use ib::{
    addr::Addr,
    client::{Client, DeviceWatch},
    device::Device,
    device::Link,
};
use kernel::bindings;
use kfi::{
    kfabric::version,
    kfi_sys as sys,
    provider::{self, AtomicKind, Bound, EndpointAttr, EqRef, FidRef, Info, Region, Registration},
};
use net::NetPtr;

module! {
    type: KfiIbverbs,
    name: "kfi_ibverbs",
    authors: ["kfabric developers"],
    description: "kfabric provider over ib_core and rdma_cm (siw, rxe, HCAs)",
    license: "GPL",
    params: {
        unexpected_bytes_max: u32 {
            default: 4194304,
            description: "Most payload bytes of tagged messages a connection holds for receives not posted yet",
        },
        global_key_devices: u32 {
            default: 0,
            description: "Offer devices whose protection domain has a key over all memory (an iWARP device without a local DMA key of its own: siw) (1). siw checks no remote read right on a peer's read, so a peer there can read any region whatever its rights, and any kernel memory if it finds that key; only for a network where every peer is trusted (0: such devices are not offered)",
        },
        global_key_reads: u32 {
            default: 0,
            description: "Let this side issue RDMA reads (kfi_read, atomics, the flushing reads of delivery and commit completion) on an iWARP device whose local key opens all memory (siw) (1). A read names that key on the wire, and siw lets a peer read any kernel memory through it (0: such connections get no reads, -EOPNOTSUPP)",
        },
        response_timeout_ms: u32 {
            default: 30000,
            description: "Longest wait for the peer's acknowledgement of a send for delivery or commit completion, from when its last frame is posted: past it the connection ends with -ETIMEDOUT (0: no bound)",
        },
        connect_timeout_ms: u32 {
            default: 60000,
            description: "Longest time from a connection's start (kfi_accept, or the route found after kfi_connect) until it is established: past it the connection ends with -ETIMEDOUT, so a peer that never completes the handshake holds no QP for long (0: no bound)",
        },
        test_hooks: u32 {
            default: 0,
            description: "Let kfi_test_ibverbs make this provider's endpoints a hostile peer (1); never on a production system (0: the test-only exports refuse with -EPERM)",
        },
    },
}

/// Whether `dev` is offered (getinfo entries, domains, connection
/// requests): not a device whose PD has a key over all memory that
/// peers can read through (`Device::reads_show_global_key`: siw), unless
/// the `global_key_devices` parameter says every peer is trusted.
pub(crate) fn offered(dev: &Device) -> bool {
    !dev.reads_show_global_key() || module_parameters::global_key_devices.value() != 0
}

/// Whether this side may issue read-type requests (RDMA reads, atomics,
/// the flushing reads of delivery and commit completion) on `dev`: not
/// where they would show the peer a key that opens all memory
/// (`Device::reads_show_global_key`), unless the `global_key_reads`
/// parameter allows it. Else a connection gets no reads (initiator depth
/// 0) and they fail with `EOPNOTSUPP`.
pub(crate) fn may_read(dev: &Device) -> bool {
    !dev.reads_show_global_key() || module_parameters::global_key_reads.value() != 0
}

/// The `test_hooks` parameter: whether the test-only exports
/// (`kfi_ib_test_export.c`) may act. Read-only once loaded.
pub(crate) fn test_hooks() -> Result {
    if module_parameters::test_hooks.value() == 0 {
        return Err(EPERM);
    }
    Ok(())
}

/// The `response_timeout_ms` parameter (0: no bound; read when an
/// endpoint opens).
pub(crate) fn response_timeout_ms() -> u32 {
    module_parameters::response_timeout_ms.value()
}

/// The `connect_timeout_ms` parameter (0: no bound; read when a
/// connection starts), or a test's value
/// ([`kfi_ibverbs_test_connect_timeout`]).
pub(crate) fn connect_timeout_ms() -> u32 {
    match CONNECT_TIMEOUT_TEST.load(Ordering::Relaxed) {
        0 => module_parameters::connect_timeout_ms.value(),
        ms => ms,
    }
}

/// Test-only: the connect timeout a test set (0: the parameter's).
static CONNECT_TIMEOUT_TEST: AtomicU32 = AtomicU32::new(0);

/// Test-only path (exported for `kfi_test_ibverbs`, whose case of a
/// request nobody answers would otherwise wait a minute): connections that
/// start from now on get `ms` milliseconds to be established instead of
/// `connect_timeout_ms` (0: the parameter's again). `-EPERM` without the
/// `test_hooks` parameter.
#[no_mangle]
pub(crate) extern "C" fn kfi_ibverbs_test_connect_timeout(ms: u32) -> c_int {
    if let Err(e) = test_hooks() {
        return e.to_errno();
    }
    CONNECT_TIMEOUT_TEST.store(ms, Ordering::Relaxed);
    0
}

/// The `unexpected_bytes_max` parameter (read when an endpoint opens).
pub(crate) fn unexpected_bytes_max() -> usize {
    module_parameters::unexpected_bytes_max.value() as usize
}

struct KfiIbverbs {
    /// Taken in drop, in this order: no new kfabric users, then the
    /// devices go.
    reg: Option<Registration<Ibverbs>>,
    client: Option<Client>,
}

impl kernel::Module for KfiIbverbs {
    fn init(module: &'static ThisModule) -> Result<Self> {
        devices::init();
        domain::init();
        pep::init();
        conn::ERROR_QUEUE.make(
            c"kfi_ibverbs",
            bindings::wq_flags_WQ_UNBOUND | bindings::wq_flags_WQ_MEM_RECLAIM,
        )?;
        let made = (|| {
            let client = Client::register::<Watch>(c"kfi_ibverbs")?;
            Ok(Self {
                reg: Some(Registration::register(module)?),
                client: Some(client),
            })
        })();
        if made.is_err() {
            // No connection was made: nothing was queued.
            conn::ERROR_QUEUE.destroy();
        }
        made
    }
}

impl Drop for KfiIbverbs {
    fn drop(&mut self) {
        drop(self.reg.take());
        // Nothing of the ULPs' is left (they hold the module while they
        // have objects); unregistering the client removes the devices.
        pep::release();
        drop(self.client.take());
        domain::release();
        devices::release();
        // Last: drains the protocol-error work that ended a connection
        // and was still dropping its reference when the close went on.
        conn::ERROR_QUEUE.destroy();
    }
}

/// Devices coming and going: the list getinfo reads, and the domains on a
/// device that goes.
struct Watch;

impl DeviceWatch for Watch {
    unsafe fn added(dev: *mut ib_sys::ib_device) -> Result {
        // SAFETY: The caller's contract, passed on.
        unsafe { devices::add(dev) }
    }

    fn removed(dev: *mut ib_sys::ib_device) {
        devices::remove(dev);
        domain::device_removed(dev);
        // rdma_cm waits for the identifiers of unanswered requests too.
        pep::device_removed(dev);
    }
}

/// The entry of `dev` for `addr` (as source or destination) in `net`.
pub(crate) fn entry(
    dev: &Device,
    addr: Option<&Addr>,
    src: bool,
    net: *mut bindings::net,
) -> Result<Info> {
    let mut i = Info::new()?;
    i.set_names(dev.link.fabric_name(), &dev.name)?;
    if let Some(a) = addr {
        i.set_addr(!src, a.kfi_format(), a.as_bytes())?;
    }
    let caps = ep::caps(dev);
    i.get().caps = caps;
    let (tx, rx, epa, dom, _) = i.attrs();
    dom.net = net.cast();
    dom.threading = sys::KFI_THREAD_SAFE;
    dom.control_progress = sys::KFI_PROGRESS_AUTO;
    dom.data_progress = sys::KFI_PROGRESS_AUTO;
    // Regions are addressed by virtual address, keys are the device's.
    dom.mr_mode = sys::KFI_MR_VIRT_ADDR | sys::KFI_MR_PROV_KEY;
    dom.cq_data_size = size_of::<u64>();
    // Util counters for what this side completes; a peer's one-sided
    // accesses are not seen, so not countable (`ep.rs`, bind).
    dom.cntr_cnt = usize::MAX;
    // Messages are copied through slots: the provider's limits, and at
    // most as many sends in flight as the device's queue holds.
    tx.caps = caps;
    tx.op_flags = ep::OP_FLAGS;
    tx.size = (data::TX_MAX as u32).min(dev.limits.max_qp_wr.saturating_sub(1)) as usize;
    tx.iov_limit = frame::IOV_MAX;
    tx.inject_size = frame::INJECT_MAX;
    rx.caps = caps;
    rx.size = data::RECV_MAX;
    rx.iov_limit = frame::IOV_MAX;
    epa.type_ = sys::KFI_EP_MSG;
    epa.protocol = if dev.link == Link::Iwarp {
        sys::KFI_PROTO_IWARP
    } else {
        sys::KFI_PROTO_RDMA_CM_IB_RC
    };
    epa.max_msg_size = data::max_msg(&dev.limits);
    Ok(i)
}

/// The `ibverbs` provider.
struct Ibverbs;

#[vtable]
impl provider::Provider for Ibverbs {
    const NAME: &'static CStr = c"ibverbs";
    const VERSION: u32 = version(0, 2);
    type Fabric = IbFabric;

    fn getinfo(
        node: Option<&CStr>,
        service: Option<&CStr>,
        flags: u64,
        hints: Option<&sys::kfi_info>,
    ) -> Result<KVec<Info>> {
        // SAFETY: The hints' attributes are NULL or valid.
        let net: *mut bindings::net = hints
            .and_then(|h| unsafe { h.domain_attr.as_ref() })
            .map_or(core::ptr::null_mut(), |d| d.net.cast());
        let service = service.unwrap_or(c"0");
        let mut v = KVec::new();
        match node {
            Some(node) => {
                let src = flags & sys::KFI_SOURCE != 0;
                // An address this provider cannot parse is not one it serves.
                let addr = Addr::parse(net, node, service).map_err(|_| ENODATA)?;
                let (ptr, _port) = ib::device::device_for(net, &addr, src)?;
                let dev = devices::by_ptr(ptr).filter(|d| offered(d)).ok_or(ENODATA)?;
                v.push(entry(&dev, Some(&addr), src, net)?, GFP_KERNEL)?;
            }
            None => {
                let addr = Addr::parse(net, c"0.0.0.0", service).map_err(|_| ENODATA)?;
                for dev in devices::snapshot()?.iter().filter(|d| offered(d)) {
                    v.push(entry(dev, Some(&addr), true, net)?, GFP_KERNEL)?;
                }
            }
        }
        if v.is_empty() {
            return Err(ENODATA);
        }
        Ok(v)
    }

    fn fabric(attr: &sys::kfi_fabric_attr) -> Result<IbFabric> {
        if attr.name.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: A NUL-terminated name (kfabric.ko checked the attributes).
        let name = unsafe { CStr::from_char_ptr(attr.name) };
        let link = Link::from_fabric_name(name).ok_or(ENODATA)?;
        Ok(IbFabric { link })
    }
}

/// A fabric: the devices of one link type.
struct IbFabric {
    link: Link,
}

#[vtable]
impl provider::Fabric for IbFabric {
    type Domain = domain::IbDomain;
    type PassiveEndpoint = pep::IbPep;

    fn domain(&self, info: &sys::kfi_info) -> Result<domain::IbDomain> {
        // SAFETY: An entry's domain attributes are NULL or valid.
        let d = unsafe { info.domain_attr.as_ref() }.filter(|d| !d.name.is_null());
        // SAFETY: A non-NULL name is NUL-terminated.
        let name = d
            .map(|d| unsafe { CStr::from_char_ptr(d.name) })
            .ok_or(EINVAL)?;
        let dev = devices::by_name(name)
            .filter(|d| offered(d))
            .ok_or(ENODEV)?;
        if dev.link != self.link {
            return Err(EINVAL);
        }
        domain::IbDomain::new(dev, NetPtr::of(info))
    }

    fn passive_ep(&self, info: &sys::kfi_info) -> Result<pep::IbPep> {
        pep::IbPep::new(info)
    }
}

#[vtable]
impl provider::Domain for domain::IbDomain {
    type Endpoint = ep::IbEndpoint;
    type Region = mr::MrHandle;

    fn endpoint(&self, info: &sys::kfi_info) -> Result<ep::IbEndpoint> {
        ep::IbEndpoint::new(self.shared.clone(), info)
    }

    fn mr_reg(&self, attr: &sys::kfi_mr_attr, _flags: u64) -> Result<Region<mr::MrHandle>> {
        let (data, key) = mr::register(&self.shared, attr)?;
        Ok(Region {
            data,
            key,
            desc: core::ptr::null_mut(),
        })
    }
}

#[vtable]
impl provider::Endpoint for ep::IbEndpoint {
    fn attr(&self) -> EndpointAttr {
        ep::IbEndpoint::attr(self)
    }

    fn opened(&self, fid: FidRef) {
        ep::IbEndpoint::opened(self, fid)
    }

    fn bind(&self, what: Bound) -> Result {
        ep::IbEndpoint::bind(self, what)
    }

    fn enable(&self) -> Result {
        ep::IbEndpoint::enable(self)
    }

    fn connect(&self, addr: *const c_void, param: &[u8]) -> Result {
        ep::IbEndpoint::connect(self, addr, param)
    }

    fn accept(&self, param: &[u8]) -> Result {
        ep::IbEndpoint::accept(self, param)
    }

    fn shutdown(&self, _flags: u64) -> Result {
        ep::IbEndpoint::shutdown(self)
    }

    fn cancel(&self, context: *mut c_void) -> Result {
        ep::IbEndpoint::cancel(self, context)
    }

    fn sendmsg(&self, msg: &sys::kfi_msg, flags: u64) -> Result {
        // SAFETY: kfabric.ko passes a checked message to `sendmsg`.
        unsafe { ep::IbEndpoint::sendmsg(self, msg, flags) }
    }

    fn recvmsg(&self, msg: &sys::kfi_msg, flags: u64) -> Result {
        // SAFETY: kfabric.ko passes a checked message to `recvmsg`.
        unsafe { ep::IbEndpoint::recvmsg(self, msg, flags) }
    }

    fn tsendmsg(&self, msg: &sys::kfi_msg_tagged, flags: u64) -> Result {
        // SAFETY: kfabric.ko passes a checked message to `tsendmsg`.
        unsafe { ep::IbEndpoint::tsendmsg(self, msg, flags) }
    }

    fn trecvmsg(&self, msg: &sys::kfi_msg_tagged, flags: u64) -> Result {
        // Peeking at held messages is not supported.
        if flags & sys::KFI_PEEK != 0 {
            return Err(EOPNOTSUPP);
        }
        // SAFETY: kfabric.ko passes a checked message to `trecvmsg`.
        unsafe { ep::IbEndpoint::trecvmsg(self, msg, flags) }
    }

    fn readmsg(&self, msg: &sys::kfi_msg_rma, flags: u64) -> Result {
        // SAFETY: kfabric.ko passes a checked request to `readmsg`.
        unsafe { ep::IbEndpoint::rma(self, msg, flags, true) }
    }

    fn writemsg(&self, msg: &sys::kfi_msg_rma, flags: u64) -> Result {
        // SAFETY: kfabric.ko passes a checked request to `writemsg`.
        unsafe { ep::IbEndpoint::rma(self, msg, flags, false) }
    }

    fn atomic(
        &self,
        msg: &sys::kfi_msg_atomic,
        compare: &[sys::kfi_ioc],
        result: &[sys::kfi_ioc],
        flags: u64,
    ) -> Result {
        // SAFETY: kfabric.ko passes checked lists to the atomic calls.
        unsafe { ep::IbEndpoint::atomic(self, msg, compare, result, flags) }
    }

    fn atomic_valid(&self, kind: AtomicKind, datatype: u32, op: u32) -> Result<usize> {
        ep::atomic_valid(self.limits(), kind, datatype, op)
    }

    fn getname(&self, addr: &mut [u8]) -> Result<usize> {
        ep::IbEndpoint::getname(self, addr)
    }

    fn getpeer(&self, addr: &mut [u8]) -> Result<usize> {
        ep::IbEndpoint::getpeer(self, addr)
    }
}

#[vtable]
impl provider::PassiveEndpoint for pep::IbPep {
    fn opened(&self, fid: FidRef) {
        pep::IbPep::opened(self, fid)
    }

    fn bind_eq(&self, eq: EqRef) -> Result {
        pep::IbPep::bind_eq(self, eq)
    }

    fn listen(&self) -> Result {
        pep::IbPep::listen(self)
    }

    fn reject(&self, handle: *mut sys::kfid, param: &[u8]) -> Result {
        pep::IbPep::reject(self, handle, param)
    }

    fn getname(&self, addr: &mut [u8]) -> Result<usize> {
        pep::IbPep::getname(self, addr)
    }
}
