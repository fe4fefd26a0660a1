// SPDX-License-Identifier: GPL-2.0

//! The peers' requests a listening endpoint (passive or RDM) is reading,
//! by the host they come from (`SockAddr::same_host`, `ipv6_host_prefix`).
//! Each holds a worker until it arrives or its handshake deadline passes,
//! so an endpoint reads `handshake_max` at most, and
//! `handshake_max_per_host` from one host. When all the slots are taken,
//! a request from a host that holds fewer of them than the one that holds
//! the most takes the place of that host's oldest request, which the
//! caller ends: a few hosts that keep silent connections open cannot keep
//! the others out (it takes `handshake_max` hosts, each of which holds
//! one slot). A request leaves as soon as it has been read, so only
//! requests still waiting for their peer give way. Kept under the
//! endpoint's lock; process context ([`Readers::begin`] allocates).

use kernel::{prelude::*, sync::Arc};

use crate::ksock::{SockAddr, Socket};

/// A request being read.
struct Reader {
    from: SockAddr,
    sock: Arc<Socket>,
    /// It gave its slot to a later request: its socket was handed back to
    /// be shut down, and its worker is on its way out.
    evicted: bool,
}

/// The requests being read, oldest first.
///
/// # Invariants
///
/// At most `handshake_max` entries not evicted, at the time each was
/// added, and `handshake_max_per_host` of them on one host; at most
/// `handshake_max` evicted entries (workers on their way out).
pub(crate) struct Readers {
    all: KVec<Reader>,
}

impl Readers {
    pub(crate) const fn new() -> Self {
        Self { all: KVec::new() }
    }

    /// The entries not evicted on `peer`'s host.
    fn on_host(&self, peer: &SockAddr, prefix: u32) -> usize {
        self.all
            .iter()
            .filter(|r| !r.evicted && r.from.same_host(peer, prefix))
            .count()
    }

    /// Counts a request from `peer` on `sock` about to be read. `EBUSY`
    /// if `peer`'s host reads as many as it may already, or if every slot
    /// is taken and no host holds at least two more than `peer`'s; else
    /// `Some` socket when the request takes the slot of that host's
    /// oldest request, which the caller shuts down (outside the lock).
    pub(crate) fn begin(
        &mut self,
        peer: &SockAddr,
        sock: &Arc<Socket>,
    ) -> Result<Option<Arc<Socket>>> {
        let prefix = crate::ipv6_host_prefix();
        let mine = self.on_host(peer, prefix);
        if mine >= crate::handshake_max_per_host() {
            return Err(EBUSY);
        }
        let live = self.all.iter().filter(|r| !r.evicted).count();
        let victim = if live < crate::handshake_max() {
            None
        } else {
            Some(self.victim(mine, prefix).ok_or(EBUSY)?)
        };
        self.all.push(
            Reader {
                from: *peer,
                sock: sock.clone(),
                evicted: false,
            },
            GFP_KERNEL,
        )?;
        Ok(victim.and_then(|i| {
            let r = self.all.get_mut(i)?;
            r.evicted = true;
            Some(r.sock.clone())
        }))
    }

    /// The index of the oldest request of the host that holds the most
    /// slots, if it holds at least two more than `mine` (one more would
    /// only swap which host is short), and fewer than `handshake_max`
    /// evicted workers are still on their way out.
    fn victim(&self, mine: usize, prefix: u32) -> Option<usize> {
        let evicted = self.all.iter().filter(|r| r.evicted).count();
        if evicted >= crate::handshake_max() {
            return None;
        }
        let mut best: Option<(usize, usize)> = None;
        for (i, r) in self.all.iter().enumerate() {
            if r.evicted {
                continue;
            }
            let n = self.on_host(&r.from, prefix);
            // The first (oldest) entry of a host with strictly more wins.
            if best.is_none_or(|(_, most)| n > most) {
                best = Some((i, n));
            }
        }
        best.filter(|&(_, most)| most >= mine.saturating_add(2))
            .map(|(i, _)| i)
    }

    /// Ends the request on `sock` that [`Readers::begin`] counted, once it
    /// has been read (so that eviction never takes a request that is being
    /// answered or accepted) or has failed; nothing if it ended already.
    /// Whether it had given its slot away: then its connection is to end
    /// (even with the request read, from what the socket held before its
    /// shutdown).
    pub(crate) fn end(&mut self, sock: &Arc<Socket>) -> bool {
        match self.all.iter().position(|r| Arc::ptr_eq(&r.sock, sock)) {
            Some(i) => self.all.remove(i).is_ok_and(|r| r.evicted),
            None => false,
        }
    }
}
