// SPDX-License-Identifier: GPL-2.0

//! Reliable-datagram (RDM) endpoints of kfi_sockets: unconnected endpoints
//! that reach peers through an address vector.
//!
//! An RDM endpoint listens on its source address. The first operation to
//! a peer opens one TCP connection to the peer's RDM endpoint, from our
//! listening IP; its request carries our listening address, so the peer
//! files the connection under that address (after checking that its IP is
//! the one the connection comes from, and that no live connection of ours
//! has it already) and uses the same connection for its operations to us.
//! Each connection is the MSG machinery of `conn.rs` (its own transmit queue,
//! responses, workers); all of an endpoint's connections share its receive
//! queues (`rxq.rs`), so a posted receive takes a message from any peer.
//!
//! An endpoint holds at most `rdm_max_peers` connections (module
//! parameter), accepted and opened, handshakes in progress included: a
//! peer's request beyond that is answered with `Reject`, an operation
//! that would open one more fails with `ENOSPC`. Nothing is allocated for
//! a refused connection.
//!
//! Posting works in any context but hard interrupt: it queues the
//! operation with its `kfi_addr_t` (at most `PEER_BACKLOG` per peer, so
//! one stuck peer cannot fill the queue: `EAGAIN` beyond) and queues the
//! endpoint's dispatch work on the provider's queue. The dispatch work
//! resolves the address in the AV and hands the operation to the peer's
//! connection without waiting: a connection is opened on a worker of its
//! own, and an operation whose peer's ring is full or whose connection is
//! being opened stays queued while those to other peers go on (the work
//! looks again after `FULL_RING_POLL_MS`, or when something changes).
//! Completions go to the endpoint's CQs; a peer that cannot be reached
//! fails the operations that waited for it (`ECONNREFUSED`, ...).
//!
//! An idle endpoint holds no worker: its listener is served by work
//! queued from the socket's callback (`accept.rs`), its dispatching by
//! work queued when an operation is posted.

use kernel::{
    new_condvar, new_mutex, new_spinlock_irq,
    prelude::*,
    sync::Arc,
    workqueue::{new_delayed_work, new_work},
};

use crate::{
    accept::Listening,
    conn::{self, QUEUE, QUEUE_FIRST},
    ep, info_ns,
    kfi::{
        kfabric::kfi_error,
        kfi_sys as sys,
        provider::{Bound, EndpointAttr},
        toolkit::{
            completion::{bind_reports, report_err, Reports},
            workers::Workers,
        },
    },
    ksock::{SockAddr, Socket},
    mr::MrTable,
    op::TxOp,
    pep::listen_socket,
    readers::Readers,
    rxq::RxQueues,
};

mod dispatch;
mod peers;
mod state;

use dispatch::kick;
use state::{Queued, Rdm, State, TxQueue, PEER_BACKLOG};

/// An RDM endpoint.
pub(crate) struct RdmEp(Arc<Rdm>);

impl RdmEp {
    /// An RDM endpoint for the source address of `info`. Process context.
    pub(crate) fn new(info: &sys::kfi_info, mrs: Arc<MrTable>) -> Result<Self> {
        if info.src_addr.is_null() {
            return Err(EINVAL);
        }
        let (addr, len) = (info.src_addr.cast::<u8>(), info.src_addrlen);
        // SAFETY: An entry's address holds `src_addrlen` bytes.
        let b = unsafe { core::slice::from_raw_parts(addr, len) };
        let src = SockAddr::from_bytes(b)?;
        let r = Arc::pin_init(
            try_pin_init!(Rdm {
                state <- new_mutex!(State {
                    av: None,
                    tx_cq: Reports::default(),
                    listener: None,
                    conns: KVec::new(),
                    busy: KVec::new(),
                    reading: Readers::new(),
                    claimed: KVec::new(),
                    opening: KVec::new(),
                    failed: KVec::new(),
                    untried: KVec::new(),
                    closing: false,
                }),
                txq <- new_spinlock_irq!(TxQueue {
                    ops: KVec::with_capacity(QUEUE_FIRST, GFP_KERNEL)?,
                    kicked: false,
                    enabled: false,
                    active: 0,
                    closing: false,
                }),
                idle <- new_condvar!(),
                dispatch <- new_work!("kfi_sockets::rdm::dispatch"),
                repoll <- new_delayed_work!("kfi_sockets::rdm::repoll"),
                workers <- Workers::new(),
                rxq: RxQueues::new_shared()?,
                src,
                ns: info_ns(info),
                mrs,
            }),
            GFP_KERNEL,
        )?;
        Ok(Self(r))
    }

    pub(crate) fn attr(&self) -> EndpointAttr {
        ep::attr()
    }

    pub(crate) fn bind(&self, what: Bound) -> Result {
        match what {
            // Nothing to report: RDM endpoints have no connection events.
            Bound::Eq(_) => {}
            Bound::Av(av) => self.0.state.lock().av = Some(av),
            // Connections opened later take the transmit side's reports.
            _ => {
                // One lock at a time: a guard in a tuple would live to the
                // end of the statement (see the lock order at `Shared`).
                let mut rx = self.0.rxq.cq();
                let mut tx = self.0.state.lock().tx_cq;
                bind_reports(&what, &mut tx, &mut rx, 0)?;
                self.0.state.lock().tx_cq = tx;
                self.0.rxq.set_reports(rx);
            }
        }
        Ok(())
    }

    /// `kfi_enable`: listens on the source address, accepts peers'
    /// connections and dispatches what was posted. Process context.
    pub(crate) fn enable(&self) -> Result {
        let l = Arc::new(listen_socket(&self.0.src, self.0.ns)?, GFP_KERNEL)?;
        {
            let s = self.0.state.lock();
            if s.tx_cq.cq.is_none() || self.0.rxq.cq().cq.is_none() {
                return Err(kfi_error(sys::KFI_ENOCQ));
            }
            if s.av.is_none() {
                return Err(kfi_error(sys::KFI_ENOAV));
            }
            if s.listener.is_some() {
                return Err(EINVAL);
            }
        }
        let r = self.0.clone();
        let take: crate::accept::Take =
            KBox::new(move |s: &Arc<Socket>| peers::take(&r, s), GFP_KERNEL)?;
        Listening::start_into(l, take, |listening| {
            listening.file_in(&mut self.0.state.lock().listener)
        })?;
        self.0.txq.lock().enabled = true;
        kick(&self.0);
        Ok(())
    }

    /// `kfi_getname`: the listening address.
    pub(crate) fn getname(&self, out: &mut [u8]) -> Result<usize> {
        let l = self
            .0
            .state
            .lock()
            .listener
            .as_ref()
            .map(|l| l.sock().clone());
        Ok(ep::put_addr(&l.ok_or(EINVAL)?.local_addr()?, out))
    }

    /// Queues `op` for the peer `dest` (any context but hard interrupt):
    /// `EAGAIN` when the endpoint's queue is full, `dest` has
    /// `PEER_BACKLOG` operations in it already, or the queue's room cannot
    /// grow without sleeping.
    pub(crate) fn post(&self, op: TxOp, dest: u64) -> Result {
        let mut q = self.0.txq.lock();
        if q.closing {
            return Err(ENOTCONN);
        }
        if q.ops.len() >= QUEUE || q.ops.iter().filter(|x| x.dest == dest).count() >= PEER_BACKLOG {
            return Err(EAGAIN);
        }
        if q.ops.len() == q.ops.capacity() {
            // Doubles, up to `QUEUE`; posting may run in softirq.
            let more = q
                .ops
                .capacity()
                .max(QUEUE_FIRST)
                .min(QUEUE.saturating_sub(q.ops.len()));
            q.ops.reserve(more, GFP_ATOMIC).map_err(|_| EAGAIN)?;
        }
        q.ops
            .push_within_capacity(Queued { op, dest })
            .map_err(|_| EAGAIN)?;
        let go = dispatch::kick_locked(&mut q);
        drop(q);
        if go {
            dispatch::queue_counted(&self.0);
        }
        Ok(())
    }

    /// `kfi_recvmsg` (any context but hard interrupt).
    pub(crate) fn recvmsg(&self, m: &sys::kfi_msg, flags: u64) -> Result {
        self.0.rxq.post(m, flags)
    }

    /// `kfi_cancel` of a posted receive (any context but hard interrupt).
    pub(crate) fn cancel(&self, context: usize) -> Result {
        self.0.rxq.cancel(context)
    }

    /// `kfi_trecvmsg` (any context but hard interrupt).
    pub(crate) fn trecvmsg(&self, t: &sys::kfi_msg_tagged, flags: u64) -> Result {
        self.0.rxq.post_tagged(t, flags)
    }
}

impl Drop for RdmEp {
    fn drop(&mut self) {
        let r = &self.0;
        let (listener, busy, conns) = {
            let mut s = r.state.lock();
            s.closing = true;
            (
                s.listener.take(),
                core::mem::take(&mut s.busy),
                core::mem::take(&mut s.conns),
            )
        };
        r.txq.lock().closing = true;
        // Stops accepting, and drops the handler's reference to us.
        drop(listener);
        for b in busy.iter() {
            b.shutdown();
        }
        // Every connection stops taking new frames before any is waited
        // for, and the receive queues close only after: a message taken
        // meanwhile would find them closed and end its connection, and
        // with it the answers queued for the peer (the `Ack` of a message
        // already reported, a read's response). One bound for all of
        // them: they drain side by side, so a peer that reads nothing
        // holds up no other (`Shared::close_by`).
        for c in conns.iter() {
            c.conn.begin_drain();
        }
        let by = conn::drain_deadline();
        for c in conns.iter() {
            c.conn.close_by(by);
        }
        r.rxq.close();
        r.rxq.quiesce();
        // The dispatch work queues no more; a poll still planned runs
        // within `FULL_RING_POLL_MS`. Before the workers: a run that began
        // before `closing` may still start an opener.
        let mut t = r.txq.lock();
        while t.active > 0 {
            r.idle.wait(&mut t);
        }
        drop(t);
        r.workers.wait_idle();
        // Operations never handed to a connection.
        let cq = r.state.lock().tx_cq;
        let left = core::mem::take(&mut r.txq.lock().ops);
        for q in left.iter() {
            report_err(cq, &q.op.entry(), ECANCELED);
        }
    }
}
