// SPDX-License-Identifier: GPL-2.0

//! kfi_sockets.ko: the kfabric provider over kernel TCP.
//!
//! Connected (MSG) endpoints and reliable-datagram (RDM) endpoints over
//! an address vector, IPv4 and IPv6, in any network namespace: connection
//! management (listen, connect, accept and reject with private data,
//! shutdown), messages and tagged messages (kvec, bio_vec and scatterlist
//! buffers, inject, remote CQ data, unexpected tagged messages held until
//! their receive is posted), RMA write/read on registered memory checked
//! by key, bounds and access, atomics on 32- and 64-bit integers, and the
//! delivery and commit completion levels. Progress is driven by socket
//! callbacks (progress.rs). The wire protocol is in
//! Documentation/sockets-wire.rst.

use core::ffi::CStr;
use kernel::prelude::*;

#[path = "../../kfi/api/mod.rs"]
mod kfi;

mod accept;
mod atomics;
mod buflist;
mod bufs;
mod conn;
mod ep;
mod held;
mod host_key;
mod mr;
mod op;
mod pep;
mod progress;
mod rdm;
mod readers;
mod rx;
mod rxq;
mod sock_sys;
mod splice;
mod tx;
mod wq;
// Shared with tests/sockets by `#[path]`; each crate uses a part.
#[allow(dead_code)]
mod frame;
#[allow(dead_code)]
mod ksock;
#[allow(dead_code)]
mod wire;

use kernel::sync::Arc;
use kfi::{
    kfabric::version,
    kfi_sys as sys,
    provider::{self, AtomicKind, Bound, EndpointAttr, EqRef, FidRef, Info, Region, Registration},
};
use ksock::{NetNs, SockAddr};

module! {
    type: KfiSockets,
    name: "kfi_sockets",
    authors: ["kfabric developers"],
    description: "kfabric provider over kernel TCP sockets",
    license: "GPL",
    params: {
        handshake_timeout_ms: u32 {
            default: 10000,
            description: "How long a connection handshake may take (ms, 0: unbounded)",
        },
        mr_close_grace_ms: u32 {
            default: 2000,
            description: "How long closing a region waits for peers' accesses before aborting their connections (ms)",
        },
        rdm_max_peers: u32 {
            default: 128,
            description: "Most connections of one RDM endpoint, accepted and opened, handshakes included (more are refused)",
        },
        rdm_max_peers_per_host: u32 {
            default: 0,
            description: "Most connections that the peers on one host (see ipv6_host_prefix) may open to an RDM endpoint, handshakes included (more are refused; 0: half of rdm_max_peers)",
        },
        listen_backlog_max: u32 {
            default: 64,
            description: "Most connection requests a passive endpoint holds until the ULP answers them (more are refused)",
        },
        unexpected_bytes_max: u32 {
            default: 4194304,
            description: "Most payload bytes of tagged messages an endpoint holds for receives not posted yet",
        },
        frame_timeout_ms: u32 {
            default: 5000,
            description: "How long a frame may take to arrive once begun, per started MiB of payload (ms, 0: unbounded)",
        },
        response_timeout_ms: u32 {
            default: 30000,
            description: "How long an operation waits for the peer's response once its frame is sent (ms, 0: unbounded)",
        },
        handshake_max: u32 {
            default: 16,
            description: "Most accepted connections per listening endpoint whose request is still being read (more are refused; at most 256)",
        },
        ipv6_host_prefix: u32 {
            default: 128,
            description: "Leading bits of an IPv6 address that name its host for the per-host bounds (64: a /64 is one host; at most 128, one address)",
        },
        handshake_max_per_host: u32 {
            default: 0,
            description: "Most of a listening endpoint's requests being read that come from one host (see ipv6_host_prefix; more are refused; 0: half of handshake_max)",
        },
        inline_tx: u32 {
            default: 1,
            description: "Send from the posting thread or the receive work when they may sleep (1), or always from the transmit work (0)",
        },
        inline_rx: u32 {
            default: 1,
            description: "Receive the message a posted receive was waiting for in the posting thread when it may sleep and the message is whole in the socket (1), or always in the receive work (0)",
        },
        rx_in_callback: u32 {
            default: 1,
            description: "Handle whole small frames (messages for posted receives, acknowledgements) in the socket's data callback (1), or always in the receive work (0)",
        },
        recv_wait_ms: u32 {
            default: 20,
            description: "How long a message of 4 KiB or more waits in the socket for its receive to be posted before it is copied aside (ms, 0: copied at once)",
        },
        splice_min_bytes: u32 {
            default: 16384,
            description: "Send the payload of an answered write or message of this many bytes or more by page reference, not a copy (0: always copy)",
        },
        wq_unbound: u32 {
            default: 1,
            description: "Run the provider's work on an unbound workqueue (1) or on the queuing CPU (0)",
        },
    },
}

/// The `inline_tx` parameter: whether frames may be sent inline
/// (`progress::push_tx`).
pub(crate) fn inline_tx() -> bool {
    module_parameters::inline_tx.value() != 0
}

/// The `inline_rx` parameter: whether a poster of a receive may receive
/// inline (`rx::run_inline`).
pub(crate) fn inline_rx() -> bool {
    module_parameters::inline_rx.value() != 0
}

/// The `rx_in_callback` parameter: whether the socket's data callback
/// handles frames itself (`rx/soft.rs`).
pub(crate) fn rx_in_callback() -> bool {
    module_parameters::rx_in_callback.value() != 0
}

/// The `recv_wait_ms` parameter.
pub(crate) fn recv_wait_ms() -> u32 {
    module_parameters::recv_wait_ms.value()
}

/// The `mr_close_grace_ms` parameter.
pub(crate) fn mr_close_grace_ms() -> u32 {
    module_parameters::mr_close_grace_ms.value()
}

/// The `rdm_max_peers` parameter (at least 1).
pub(crate) fn rdm_max_peers() -> usize {
    (module_parameters::rdm_max_peers.value() as usize).max(1)
}

/// The `rdm_max_peers_per_host` parameter, half of `rdm_max_peers` when 0
/// (at least 1): enough for many endpoints on one host, and never all.
pub(crate) fn rdm_max_peers_per_host() -> usize {
    match module_parameters::rdm_max_peers_per_host.value() as usize {
        0 => rdm_max_peers() / 2,
        n => n,
    }
    .max(1)
}

/// The `listen_backlog_max` parameter (at least 1).
pub(crate) fn listen_backlog_max() -> usize {
    (module_parameters::listen_backlog_max.value() as usize).max(1)
}

/// The `unexpected_bytes_max` parameter.
pub(crate) fn unexpected_bytes_max() -> usize {
    module_parameters::unexpected_bytes_max.value() as usize
}

/// The `frame_timeout_ms` parameter.
pub(crate) fn frame_timeout_ms() -> u32 {
    module_parameters::frame_timeout_ms.value()
}

/// The `splice_min_bytes` parameter (0: never by reference).
pub(crate) fn splice_min_bytes() -> usize {
    module_parameters::splice_min_bytes.value() as usize
}

/// The `response_timeout_ms` parameter.
pub(crate) fn response_timeout_ms() -> u32 {
    module_parameters::response_timeout_ms.value()
}

/// The `handshake_max` parameter, 1 to 256: a worker each, and the
/// listener's lock scans them all for each request when they are full
/// (`readers.rs`).
pub(crate) fn handshake_max() -> usize {
    (module_parameters::handshake_max.value() as usize).clamp(1, 256)
}

/// The `handshake_max_per_host` parameter, half of `handshake_max` when 0
/// (at least 1): one host's silent connections leave the others room.
pub(crate) fn handshake_max_per_host() -> usize {
    match module_parameters::handshake_max_per_host.value() as usize {
        0 => handshake_max() / 2,
        n => n,
    }
    .max(1)
}

/// The `ipv6_host_prefix` parameter (at most 128): how many leading bits
/// of an IPv6 peer's address `SockAddr::same_host` compares.
pub(crate) fn ipv6_host_prefix() -> u32 {
    module_parameters::ipv6_host_prefix.value().min(128)
}

/// The `handshake_timeout_ms` parameter.
pub(crate) fn handshake_timeout_ms() -> u32 {
    module_parameters::handshake_timeout_ms.value()
}

/// The fields drop in order: the provider is unregistered before its
/// workqueue goes.
struct KfiSockets {
    _reg: Registration<Sockets>,
    _wq: wq::OwnQueue,
}

impl kernel::Module for KfiSockets {
    fn init(module: &'static ThisModule) -> Result<Self> {
        // SAFETY: Once, before the provider is registered.
        unsafe { pep::init_requests() };
        let wq = wq::OwnQueue::new(module_parameters::wq_unbound.value() != 0)?;
        Ok(Self {
            _reg: Registration::register(module)?,
            _wq: wq,
        })
    }
}

impl Drop for KfiSockets {
    fn drop(&mut self) {
        pep::release_requests();
    }
}

/// An entry for `addr` in namespace `ns`, as source (`src`) or
/// destination.
fn entry(addr: &SockAddr, src: bool, ns: NetNs, ep_type: u32) -> Result<Info> {
    let mut i = Info::new()?;
    i.set_names(c"tcp", c"kernel")?;
    let format = match addr {
        SockAddr::V4(_) => sys::KFI_SOCKADDR_IN,
        SockAddr::V6(_) => sys::KFI_SOCKADDR_IN6,
    };
    i.set_addr(!src, format, addr.as_bytes())?;
    i.get().caps = ep::CAPS;
    let (tx, rx, epa, dom, _) = i.attrs();
    dom.net = ns.as_raw();
    // Endpoints serialize internally; work items move data and connections
    // without the ULP's calls; regions are addressed by offset, local
    // buffers need no descriptor, and a ULP may choose keys: no MR mode.
    dom.threading = sys::KFI_THREAD_SAFE;
    dom.control_progress = sys::KFI_PROGRESS_AUTO;
    dom.data_progress = sys::KFI_PROGRESS_AUTO;
    dom.mr_mode = 0;
    // Util counters, bound per kind (`toolkit::completion::bind_reports`).
    dom.cntr_cnt = usize::MAX;
    tx.caps = ep::CAPS;
    tx.op_flags = ep::OP_FLAGS;
    tx.rma_iov_limit = wire::RMA_IOV_MAX;
    tx.inject_size = op::INJECT_MAX;
    tx.size = conn::QUEUE;
    tx.iov_limit = buflist::LIST_MAX;
    rx.caps = ep::CAPS;
    rx.size = conn::QUEUE;
    rx.iov_limit = buflist::LIST_MAX;
    epa.type_ = ep_type;
    epa.max_msg_size = wire::PAYLOAD_MAX as usize;
    Ok(i)
}

/// The namespace an entry's objects live in (`kfi_domain_attr.net`).
pub(crate) fn info_ns(info: &sys::kfi_info) -> NetNs {
    // SAFETY: An entry's domain attributes are NULL or valid; the namespace
    // is kept alive by the ULP while objects opened from it are open.
    unsafe {
        NetNs::from_raw(
            info.domain_attr
                .as_ref()
                .map_or(core::ptr::null_mut(), |d| d.net),
        )
    }
}

/// The info of a connection request: the listener's address and the
/// request's handle.
pub(crate) fn request_info(src: &SockAddr, ns: NetNs, handle: *mut sys::kfid) -> Result<Info> {
    let mut i = entry(src, true, ns, sys::KFI_EP_MSG)?;
    i.get().handle = handle;
    Ok(i)
}

/// The `sockets` provider.
struct Sockets;

#[vtable]
impl provider::Provider for Sockets {
    const NAME: &'static CStr = c"sockets";
    const VERSION: u32 = version(0, 3);
    type Fabric = SockFabric;

    fn getinfo(
        node: Option<&CStr>,
        service: Option<&CStr>,
        flags: u64,
        hints: Option<&sys::kfi_info>,
    ) -> Result<KVec<Info>> {
        // SAFETY: The hints' attributes are NULL or valid; their namespace
        // is kept alive by the ULP (the contract of `kfi_domain_attr.net`).
        let ns = unsafe {
            NetNs::from_raw(
                hints
                    .and_then(|h| h.domain_attr.as_ref())
                    .map_or(core::ptr::null_mut(), |d| d.net),
            )
        };
        let port = service.map_or(&b"0"[..], |s| s.to_bytes());
        let src = flags & sys::KFI_SOURCE != 0 || node.is_none();
        let host = node.map_or(&b"0.0.0.0"[..], |n| n.to_bytes());
        let addr = SockAddr::parse(host, port)?;
        // MSG first: the usual choice of a ULP that asks for anything.
        let mut v = KVec::new();
        v.push(entry(&addr, src, ns, sys::KFI_EP_MSG)?, GFP_KERNEL)?;
        v.push(entry(&addr, src, ns, sys::KFI_EP_RDM)?, GFP_KERNEL)?;
        Ok(v)
    }

    fn fabric(_attr: &sys::kfi_fabric_attr) -> Result<SockFabric> {
        Ok(SockFabric)
    }
}

struct SockFabric;

#[vtable]
impl provider::Fabric for SockFabric {
    type Domain = SockDomain;
    type PassiveEndpoint = pep::SockPep;

    fn domain(&self, _info: &sys::kfi_info) -> Result<SockDomain> {
        Ok(SockDomain {
            mrs: mr::MrTable::new()?,
        })
    }

    fn passive_ep(&self, info: &sys::kfi_info) -> Result<pep::SockPep> {
        pep::SockPep::new(info)
    }
}

/// A domain: its registered memory, shared with its endpoints.
struct SockDomain {
    mrs: Arc<mr::MrTable>,
}

#[vtable]
impl provider::Domain for SockDomain {
    type Endpoint = SockEndpoint;
    type Region = mr::MrHandle;
    const SOCKADDR_AV: bool = true;

    fn endpoint(&self, info: &sys::kfi_info) -> Result<SockEndpoint> {
        // SAFETY: An entry's endpoint attributes are NULL or valid.
        let ep_type = unsafe { info.ep_attr.as_ref() }.map_or(sys::KFI_EP_MSG, |e| e.type_);
        match ep_type {
            sys::KFI_EP_MSG | sys::KFI_EP_UNSPEC => {
                Ok(SockEndpoint::Msg(ep::SockEp::new(info, self.mrs.clone())?))
            }
            sys::KFI_EP_RDM => Ok(SockEndpoint::Rdm(rdm::RdmEp::new(info, self.mrs.clone())?)),
            _ => Err(EOPNOTSUPP),
        }
    }

    fn mr_reg(&self, attr: &sys::kfi_mr_attr, flags: u64) -> Result<Region<mr::MrHandle>> {
        self.mrs.register(attr, flags)
    }

    fn mr_alloc(&self, max_segs: usize, access: u64, flags: u64) -> Result<Region<mr::MrHandle>> {
        self.mrs.alloc(max_segs, access, flags)
    }

    fn mr_map(region: &mr::MrHandle, map: &sys::kfi_mr_map) -> Result<u64> {
        region.map(map)
    }

    fn mr_unmap(region: &mr::MrHandle) -> Result {
        region.unmap()
    }
}

/// An endpoint of either type.
enum SockEndpoint {
    Msg(ep::SockEp),
    Rdm(rdm::RdmEp),
}

impl SockEndpoint {
    /// Sends or queues operation `op` (built in the caller's frame: a MSG
    /// endpoint may send it from there, never moving it); `addr` is the
    /// peer of RDM endpoints.
    fn post(&self, op: &mut op::TxOp, addr: u64) -> Result {
        match self {
            Self::Msg(e) => e.post(op),
            Self::Rdm(e) => {
                op.answer_always();
                e.post(core::mem::take(op), addr)
            }
        }
    }

    fn msg_only(&self) -> Result<&ep::SockEp> {
        match self {
            Self::Msg(e) => Ok(e),
            Self::Rdm(_) => Err(EOPNOTSUPP),
        }
    }
}

#[vtable]
impl provider::Endpoint for SockEndpoint {
    fn attr(&self) -> EndpointAttr {
        match self {
            Self::Msg(e) => e.attr(),
            Self::Rdm(e) => e.attr(),
        }
    }

    fn opened(&self, fid: FidRef) {
        if let Self::Msg(e) = self {
            e.opened(fid);
        }
    }

    fn bind(&self, what: Bound) -> Result {
        match self {
            Self::Msg(e) => e.bind(what),
            Self::Rdm(e) => e.bind(what),
        }
    }

    fn enable(&self) -> Result {
        match self {
            Self::Msg(e) => e.enable(),
            Self::Rdm(e) => e.enable(),
        }
    }

    fn connect(&self, addr: *const c_void, param: &[u8]) -> Result {
        self.msg_only()?.connect(addr, param)
    }

    fn accept(&self, param: &[u8]) -> Result {
        self.msg_only()?.accept(param)
    }

    fn shutdown(&self, _flags: u64) -> Result {
        self.msg_only()?.shutdown()
    }

    fn cancel(&self, context: *mut c_void) -> Result {
        match self {
            Self::Msg(e) => e.cancel(context as usize),
            Self::Rdm(e) => e.cancel(context as usize),
        }
    }

    fn sendmsg(&self, msg: &sys::kfi_msg, flags: u64) -> Result {
        let mut op = op::TxOp::default();
        op::send_op(msg, flags, &mut op)?;
        self.post(&mut op, msg.addr)
    }

    fn recvmsg(&self, msg: &sys::kfi_msg, flags: u64) -> Result {
        match self {
            Self::Msg(e) => e.recvmsg(msg, flags),
            Self::Rdm(e) => e.recvmsg(msg, flags),
        }
    }

    fn tsendmsg(&self, msg: &sys::kfi_msg_tagged, flags: u64) -> Result {
        let mut op = op::TxOp::default();
        op::tsend_op(msg, flags, &mut op)?;
        self.post(&mut op, msg.msg.addr)
    }

    fn trecvmsg(&self, msg: &sys::kfi_msg_tagged, flags: u64) -> Result {
        match self {
            Self::Msg(e) => e.trecvmsg(msg, flags),
            Self::Rdm(e) => e.trecvmsg(msg, flags),
        }
    }

    fn writemsg(&self, msg: &sys::kfi_msg_rma, flags: u64) -> Result {
        let mut op = op::TxOp::default();
        op::rma_op(op::Kind::Write, msg, flags, &mut op)?;
        self.post(&mut op, msg.msg.addr)
    }

    fn readmsg(&self, msg: &sys::kfi_msg_rma, flags: u64) -> Result {
        let mut op = op::TxOp::default();
        op::rma_op(op::Kind::Read, msg, flags, &mut op)?;
        self.post(&mut op, msg.msg.addr)
    }

    fn atomic(
        &self,
        msg: &sys::kfi_msg_atomic,
        compare: &[sys::kfi_ioc],
        result: &[sys::kfi_ioc],
        flags: u64,
    ) -> Result {
        let mut op = op::atomic_op(msg, compare, result, flags)?;
        self.post(&mut op, msg.addr)
    }

    fn atomic_valid(&self, kind: AtomicKind, datatype: u32, op: u32) -> Result<usize> {
        op::atomic_valid(kind, datatype, op)
    }

    fn getname(&self, addr: &mut [u8]) -> Result<usize> {
        match self {
            Self::Msg(e) => e.getname(addr),
            Self::Rdm(e) => e.getname(addr),
        }
    }

    fn getpeer(&self, addr: &mut [u8]) -> Result<usize> {
        self.msg_only()?.getpeer(addr)
    }
}

#[vtable]
impl provider::PassiveEndpoint for pep::SockPep {
    fn opened(&self, fid: FidRef) {
        pep::SockPep::opened(self, fid)
    }

    fn bind_eq(&self, eq: EqRef) -> Result {
        pep::SockPep::bind_eq(self, eq)
    }

    fn listen(&self) -> Result {
        pep::SockPep::listen(self)
    }

    fn reject(&self, handle: *mut sys::kfid, param: &[u8]) -> Result {
        pep::SockPep::reject(self, handle, param)
    }

    fn getname(&self, addr: &mut [u8]) -> Result<usize> {
        pep::SockPep::getname(self, addr)
    }
}
