// SPDX-License-Identifier: GPL-2.0

//! The key an RDM endpoint counts a peer's held messages under
//! (`rxq.rs`): one per host (`SockAddr::host`, `ipv6_host_prefix`), so that
//! a peer that reconnects, or opens connections from several ports, keeps
//! the one share of its host: its held messages outlive its connections.

use crate::{ksock::SockAddr, sock_sys::kfi_sockets_host_key};

/// The key of `peer`'s host: a keyed hash (`kfi_sockets_host_key`, its key
/// drawn once per module load), so a peer cannot pick addresses whose keys
/// collide with another host's. Any context.
pub(crate) fn of(peer: &SockAddr) -> u64 {
    let (ip, scope) = peer.host(crate::ipv6_host_prefix());
    // SAFETY: `ip` is 16 readable bytes, only read during the call.
    unsafe { kfi_sockets_host_key(ip.as_ptr(), scope) }
}
