// SPDX-License-Identifier: GPL-2.0

//! What an RDM endpoint, its dispatch work and its connection workers
//! share: the endpoint's state, its queue of operations not yet handed to
//! a connection, and its connections by peer address.

use kernel::{
    prelude::*,
    sync::{Arc, CondVar, Mutex, SpinLockIrq},
    workqueue::{DelayedWork, Work},
};

use crate::{
    accept::Listening,
    conn::{Shared, QUEUE},
    kfi::{provider::AvRef, toolkit::completion::Reports, toolkit::workers::Workers},
    ksock::{NetNs, SockAddr, Socket},
    mr::MrTable,
    op::TxOp,
    readers::Readers,
    rxq::RxQueues,
};

/// Most operations one peer may have waiting in the endpoint's queue: a
/// peer whose connection is stuck (its ring full, its handshake slow)
/// leaves the rest of the queue to the others.
pub(super) const PEER_BACKLOG: usize = QUEUE / 4;

/// An operation and its destination.
#[derive(Default)]
pub(super) struct Queued {
    pub(super) op: TxOp,
    pub(super) dest: u64,
}

pub(super) struct TxQueue {
    /// Operations not handed to a connection yet, oldest first: at most
    /// `QUEUE`, in room that grows on demand from `QUEUE_FIRST` and goes
    /// back to it when the queue empties (an idle endpoint holds little).
    /// Only posting adds (at the end), only the dispatch work removes
    /// (until close), so its index of an entry stays valid.
    pub(super) ops: KVec<Queued>,
    /// Something changed that the dispatch work should look at.
    pub(super) kicked: bool,
    /// `kfi_enable` has run: operations are dispatched.
    pub(super) enabled: bool,
    /// The dispatch work and its poll, queued or running.
    pub(super) active: u32,
    pub(super) closing: bool,
}

pub(super) struct State {
    pub(super) av: Option<AvRef>,
    pub(super) tx_cq: Reports,
    pub(super) listener: Option<Listening>,
    /// Connections by the peer's listening address; ended ones stay until
    /// the next filing or opening closes them (at most `rdm_max_peers`
    /// live ones, so at most twice that in all).
    pub(super) conns: KVec<Conn>,
    /// Sockets of requests being read, and of a connection being opened:
    /// shut down at close so no worker waits on a silent peer.
    pub(super) busy: KVec<Arc<Socket>>,
    /// The peers' requests being read, by host (at most `handshake_max`,
    /// `handshake_max_per_host` from one host).
    pub(super) reading: Readers,
    /// Addresses of peers' requests that passed the check and are being
    /// accepted (at most one per address, and `handshake_max` in all):
    /// taken until the connection is filed, so that a twin request is
    /// refused before we answer either, not after the first was accepted.
    pub(super) claimed: KVec<SockAddr>,
    /// Peers a worker is opening a connection to.
    pub(super) opening: KVec<SockAddr>,
    /// Peers whose opening failed, with the error, for the dispatcher to
    /// fail the operations that waited for them.
    pub(super) failed: KVec<(SockAddr, Error)>,
    /// Peers we opened a connection to that has taken no operation yet:
    /// if it ends first, the next operation for that peer fails
    /// (`ECONNRESET`) instead of opening yet another, so that a peer that
    /// accepts and hangs up at once cannot keep operations waiting (and
    /// us reconnecting) for ever. At most one entry per peer, `QUEUE` in
    /// all.
    pub(super) untried: KVec<SockAddr>,
    pub(super) closing: bool,
}

/// A connection to a peer.
pub(super) struct Conn {
    /// The peer's listening address (checked against the socket's peer IP
    /// for connections it opened).
    pub(super) peer: SockAddr,
    pub(super) conn: Arc<Shared>,
    /// The peer opened it: at most one live such connection per address.
    pub(super) incoming: bool,
}

/// What an RDM endpoint and its workers share.
#[pin_data]
pub(crate) struct Rdm {
    #[pin]
    pub(super) state: Mutex<State>,
    #[pin]
    pub(super) txq: SpinLockIrq<TxQueue>,
    /// Signalled when `TxQueue::active` drops.
    #[pin]
    pub(super) idle: CondVar,
    /// Hands queued operations to connections (`dispatch.rs`).
    #[pin]
    pub(super) dispatch: Work<Rdm, 0>,
    /// Queues `dispatch` after `FULL_RING_POLL_MS`.
    #[pin]
    pub(super) repoll: DelayedWork<Rdm, 1>,
    #[pin]
    pub(super) workers: Workers,
    pub(super) rxq: Arc<RxQueues>,
    pub(super) src: SockAddr,
    pub(super) ns: NetNs,
    pub(super) mrs: Arc<MrTable>,
}

/// Runs `f` on a worker of the endpoint (`Workers`: closing waits for
/// it). Process context.
pub(super) fn spawn(r: &Arc<Rdm>, f: impl FnOnce(&Arc<Rdm>) + Send + 'static) -> Result {
    crate::wq::spawn_long(r, |r| &r.workers, f)
}
