// SPDX-License-Identifier: GPL-2.0

//! kfi_sockets.ko: the kfabric provider over kernel TCP.
//!
//! Implemented so far: connected (MSG) endpoints over IPv4 and IPv6 with
//! connection management (listen, connect, accept and reject with private
//! data, shutdown) and messages (send/receive with kvec, bio_vec and
//! scatterlist buffers, inject, remote CQ data), completion at inject
//! level. The wire protocol is in Documentation/sockets-wire.rst. RMA,
//! atomics, tagged messages, RDM endpoints and the delivery/commit levels
//! are not advertised and not implemented yet.

use core::ffi::CStr;
use kernel::prelude::*;

#[path = "../../kfi/api/mod.rs"]
mod kfi;
#[path = "../../kfi/util_ring.rs"]
mod util_ring;

mod ep;
mod events;
mod handles;
mod pep;
// Shared with tests/sockets by `#[path]`; each crate uses a part.
#[allow(dead_code)]
mod frame;
#[allow(dead_code)]
mod ksock;
#[allow(dead_code)]
mod wire;

use kfi::{
    kfabric::version,
    kfi_sys as sys,
    provider::{self, Bound, EndpointAttr, EqRef, FidRef, Info, Registration},
};
use ksock::SockAddr;

module! {
    type: KfiSockets,
    name: "kfi_sockets",
    authors: ["kfabric developers"],
    description: "kfabric provider over kernel TCP sockets",
    license: "GPL",
}

struct KfiSockets {
    _reg: Registration<Sockets>,
}

impl kernel::Module for KfiSockets {
    fn init(module: &'static ThisModule) -> Result<Self> {
        // SAFETY: Once, before the provider is registered.
        unsafe { handles::init() };
        Ok(Self {
            _reg: Registration::register(module)?,
        })
    }
}

impl Drop for KfiSockets {
    fn drop(&mut self) {
        handles::release();
    }
}

/// Capabilities of every entry.
const CAPS: u64 = sys::KFI_MSG | sys::KFI_SEND | sys::KFI_RECV;

/// An entry for `addr`, as source (`src`) or destination.
fn entry(addr: &SockAddr, src: bool) -> Result<Info> {
    let mut i = Info::new()?;
    i.set_names(c"tcp", c"kernel")?;
    let format = match addr {
        SockAddr::V4(_) => sys::KFI_SOCKADDR_IN,
        SockAddr::V6(_) => sys::KFI_SOCKADDR_IN6,
    };
    i.set_addr(!src, format, addr.as_bytes())?;
    i.get().caps = CAPS;
    let (tx, rx, epa, _, _) = i.attrs();
    tx.caps = CAPS;
    tx.op_flags = sys::KFI_INJECT | sys::KFI_REMOTE_CQ_DATA | sys::KFI_INJECT_COMPLETE;
    tx.inject_size = ep::INJECT_MAX;
    tx.size = ep::QUEUE;
    tx.iov_limit = ep::IOV_MAX;
    rx.caps = CAPS;
    rx.size = ep::QUEUE;
    rx.iov_limit = ep::IOV_MAX;
    epa.type_ = sys::KFI_EP_MSG;
    epa.max_msg_size = wire::PAYLOAD_MAX as usize;
    Ok(i)
}

/// The info of a connection request: the listener's address and the
/// request's handle.
pub(crate) fn request_info(src: &SockAddr, handle: *mut sys::kfid) -> Result<Info> {
    let mut i = entry(src, true)?;
    i.get().handle = handle;
    Ok(i)
}

/// The `sockets` provider.
struct Sockets;

#[vtable]
impl provider::Provider for Sockets {
    const NAME: &'static CStr = c"sockets";
    const VERSION: u32 = version(0, 2);
    type Fabric = SockFabric;

    fn getinfo(
        node: Option<&CStr>,
        service: Option<&CStr>,
        flags: u64,
        _hints: Option<&sys::kfi_info>,
    ) -> Result<KVec<Info>> {
        let port = service.map_or(&b"0"[..], |s| s.to_bytes());
        let src = flags & sys::KFI_SOURCE != 0 || node.is_none();
        let host = node.map_or(&b"0.0.0.0"[..], |n| n.to_bytes());
        let addr = SockAddr::parse(host, port)?;
        let mut v = KVec::new();
        v.push(entry(&addr, src)?, GFP_KERNEL)?;
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
        Ok(SockDomain)
    }

    fn passive_ep(&self, info: &sys::kfi_info) -> Result<pep::SockPep> {
        pep::SockPep::new(info)
    }
}

struct SockDomain;

#[vtable]
impl provider::Domain for SockDomain {
    type Endpoint = ep::SockEp;
    type Region = ();

    fn endpoint(&self, info: &sys::kfi_info) -> Result<ep::SockEp> {
        ep::SockEp::new(info)
    }
}

#[vtable]
impl provider::Endpoint for ep::SockEp {
    fn attr(&self) -> EndpointAttr {
        ep::SockEp::attr(self)
    }

    fn opened(&self, fid: FidRef) {
        ep::SockEp::opened(self, fid)
    }

    fn bind(&self, what: Bound) -> Result {
        ep::SockEp::bind(self, what)
    }

    fn enable(&self) -> Result {
        ep::SockEp::enable(self)
    }

    fn connect(&self, addr: *const c_void, param: &[u8]) -> Result {
        ep::SockEp::connect(self, addr, param)
    }

    fn accept(&self, param: &[u8]) -> Result {
        ep::SockEp::accept(self, param)
    }

    fn shutdown(&self, _flags: u64) -> Result {
        ep::SockEp::shutdown(self)
    }

    fn sendmsg(&self, msg: &sys::kfi_msg, flags: u64) -> Result {
        ep::SockEp::sendmsg(self, msg, flags)
    }

    fn recvmsg(&self, msg: &sys::kfi_msg, flags: u64) -> Result {
        ep::SockEp::recvmsg(self, msg, flags)
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
}
