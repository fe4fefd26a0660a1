// SPDX-License-Identifier: GPL-2.0

//! The peers' requests a listening endpoint (passive or RDM) is reading,
//! by the host they come from. Each holds a worker until it arrives or its
//! handshake deadline passes, so an endpoint reads `handshake_max` at
//! most, and `handshake_max_per_host` from one host (`SockAddr::same_host`,
//! `ipv6_host_prefix`): a host that keeps silent connections open cannot
//! take every slot and keep the other hosts out. Kept under the endpoint's
//! lock; process context ([`Readers::begin`] allocates).

use kernel::prelude::*;

use crate::ksock::SockAddr;

/// The hosts of the requests being read, one entry per request.
///
/// # Invariants
///
/// At most `handshake_max` entries at the time each was added, and at
/// most `handshake_max_per_host` of them on one host.
pub(crate) struct Readers {
    from: KVec<SockAddr>,
}

impl Readers {
    pub(crate) const fn new() -> Self {
        Self { from: KVec::new() }
    }

    /// Counts a request from `peer` about to be read: `EBUSY` if the
    /// endpoint, or `peer`'s host, reads as many as it may already.
    pub(crate) fn begin(&mut self, peer: &SockAddr) -> Result {
        if self.from.len() >= crate::handshake_max() {
            return Err(EBUSY);
        }
        let prefix = crate::ipv6_host_prefix();
        let same = self
            .from
            .iter()
            .filter(|f| f.same_host(peer, prefix))
            .count();
        if same >= crate::handshake_max_per_host() {
            return Err(EBUSY);
        }
        self.from.push(*peer, GFP_KERNEL)?;
        Ok(())
    }

    /// Ends a request from `peer` that [`Readers::begin`] counted.
    pub(crate) fn end(&mut self, peer: &SockAddr) {
        if let Some(i) = self
            .from
            .iter()
            .position(|f| f.as_bytes() == peer.as_bytes())
        {
            let _ = self.from.remove(i);
        }
    }
}
