// SPDX-License-Identifier: GPL-2.0

//! The dispatch work of an RDM endpoint: hands the operations posted to
//! the endpoint's queue to their peers' connections, in posting order per
//! peer, without ever waiting on a peer. It runs on the provider's
//! workqueue (`wq.rs`), queued by a post, by `kfi_enable` and by an
//! opener that finishes; a queue with operations whose peer cannot take
//! them yet is looked at again after `FULL_RING_POLL_MS`.

use kernel::{
    prelude::*,
    sync::Arc,
    time::msecs_to_jiffies,
    workqueue::{impl_has_delayed_work, impl_has_work, WorkItem},
};

use super::{
    peers::open,
    state::{spawn, Rdm, TxQueue},
};
use crate::{
    conn::{shrink_vec, QUEUE},
    kfi::{provider::AvRef, toolkit::completion::report_err},
    ksock::SockAddr,
    op::TxOp,
    wq,
};

/// The socket address behind `fi_addr` in `av` (the util AV of the
/// domain holds socket addresses), in the form peers are filed under
/// (`SockAddr::canonical`).
fn peer_of(av: AvRef, fi_addr: u64) -> Result<SockAddr> {
    let mut b = [0u8; 32];
    let len = av.lookup(fi_addr, &mut b).map_err(|_| EHOSTUNREACH)?;
    Ok(SockAddr::from_bytes(b.get(..len).ok_or(EINVAL)?)?.canonical())
}

/// How soon the dispatch work looks again at a peer whose ring was full
/// (a connection has no way to tell the endpoint that room came back).
const FULL_RING_POLL_MS: u32 = 10;

/// Most passes over the queue in one run of the dispatch work (then it
/// queues itself again, behind the other work on the provider's queue).
const DISPATCH_PASSES: usize = 8;

impl_has_work! {
    impl HasWork<Self, 0> for Rdm { self.dispatch }
}

impl_has_delayed_work! {
    impl HasDelayedWork<Self, 1> for Rdm { self.repoll }
}

impl WorkItem<0> for Rdm {
    type Pointer = Arc<Rdm>;

    fn run(this: Arc<Rdm>) {
        let noio = wq::NoIo::begin();
        dispatch(&this);
        drop(noio);
        work_done(&this);
    }
}

impl WorkItem<1> for Rdm {
    type Pointer = Arc<Rdm>;

    fn run(this: Arc<Rdm>) {
        kick(&this);
        work_done(&this);
    }
}

/// Counts a work item about to be queued; false before `kfi_enable` and
/// once the endpoint closes.
fn work_begin(r: &Rdm) -> bool {
    let mut t = r.txq.lock();
    if t.closing || !t.enabled {
        return false;
    }
    t.active += 1;
    true
}

/// A work item of the endpoint has finished, or was not queued.
fn work_done(r: &Rdm) {
    let mut t = r.txq.lock();
    t.active = t.active.saturating_sub(1);
    // Before the unlock: once it is released, the close may go on and the
    // endpoint be freed (a poster holds no reference of its own).
    r.idle.notify_all();
}

/// Tells the dispatch work to look at the queue again (any context but
/// hard interrupt).
pub(super) fn kick(r: &Arc<Rdm>) {
    let go = kick_locked(&mut r.txq.lock());
    if go {
        queue_counted(r);
    }
}

/// [`kick`] under the queue's lock `t`, held by a poster that just queued
/// an operation: the dispatch work is counted (`TxQueue::active`) under
/// that same lock, so that a close cannot finish before the poster, which
/// holds no reference to the endpoint of its own, is done with it. True
/// when the caller must call [`queue_counted`] once it has unlocked.
pub(super) fn kick_locked(t: &mut TxQueue) -> bool {
    t.kicked = true;
    if t.closing || !t.enabled {
        return false;
    }
    t.active += 1;
    true
}

/// Queues the dispatch work, counted by [`kick_locked`] already.
pub(super) fn queue_counted(r: &Arc<Rdm>) {
    if wq::queue().enqueue::<_, 0>(r.clone()).is_err() {
        // Already queued: that run sees the flag.
        work_done(r);
    }
}

/// Has the queue looked at again after `FULL_RING_POLL_MS`, unless that
/// is planned already.
fn repoll(r: &Arc<Rdm>) {
    let j = msecs_to_jiffies(FULL_RING_POLL_MS);
    if work_begin(r) && wq::queue().enqueue_delayed::<_, 1>(r.clone(), j).is_err() {
        work_done(r);
    }
}

/// Opens a connection to `peer` on a worker of its own, so that a peer
/// that does not answer holds up nobody else; the outcome is left for the
/// dispatcher.
fn opener(r: &Arc<Rdm>, peer: SockAddr) {
    let outcome = open(r, peer);
    {
        let mut s = r.state.lock();
        s.opening.retain(|p| p.as_bytes() != peer.as_bytes());
        match outcome {
            Ok(_) => {
                let noted = s.untried.iter().any(|p| p.as_bytes() == peer.as_bytes());
                // Beyond `QUEUE` notes, or without memory for one, a
                // connection that ends untried is opened again.
                if !noted && s.untried.len() < QUEUE {
                    let _ = s.untried.push(peer, GFP_KERNEL);
                }
            }
            // Without memory to note it, the next pass simply opens again.
            Err(e) => {
                let _ = s.failed.push((peer, e), GFP_KERNEL);
            }
        }
    }
    kick(r);
}

/// What became of a queued operation.
enum Handed {
    /// Queued on its connection, or failed (`Err`).
    Done(Result),
    /// Its peer cannot take it now (a full ring, a connection being
    /// opened): it stays queued, and so do later ones to that peer.
    Wait,
}

/// Hands `q` to its peer's connection without waiting: starts opening the
/// connection if there is none; fails `q` if opening failed (`failed`).
/// `op` stays with the caller unless it was queued.
fn hand_over(r: &Arc<Rdm>, op: &mut TxOp, dest: u64, failed: &[(SockAddr, Error)]) -> Handed {
    // Not in one expression: the lock guard would live through it.
    let av = r.state.lock().av;
    let peer = match av.ok_or(EINVAL).and_then(|av| peer_of(av, dest)) {
        Ok(p) => p,
        Err(e) => return Handed::Done(Err(e)),
    };
    let mut s = r.state.lock();
    if s.closing {
        // The endpoint's close takes no new opener (it waits for those
        // that run).
        return Handed::Done(Err(ECANCELED));
    }
    let found = s
        .conns
        .iter()
        .find(|c| c.peer.as_bytes() == peer.as_bytes() && c.conn.usable())
        .map(|c| c.conn.clone());
    let untried = s
        .untried
        .iter()
        .position(|p| p.as_bytes() == peer.as_bytes());
    if let Some(c) = found {
        drop(s);
        return match c.queue(op) {
            // A full ring, or a connection that ended since the look
            // above: `op` is still ours, and the next pass finds room or
            // opens a new connection.
            Err(e) if e == EAGAIN || e == ENOTCONN => Handed::Wait,
            other => {
                if other.is_ok() && untried.is_some() {
                    // The peer's connection took an operation.
                    let mut s = r.state.lock();
                    s.untried.retain(|p| p.as_bytes() != peer.as_bytes());
                }
                Handed::Done(other)
            }
        };
    }
    if let Some((_, e)) = failed.iter().find(|(p, _)| p.as_bytes() == peer.as_bytes()) {
        return Handed::Done(Err(*e));
    }
    if let Some(i) = untried {
        // The connection we opened for it ended before it took anything:
        // this operation fails; the next one may try a new connection.
        let _ = s.untried.remove(i);
        return Handed::Done(Err(ECONNRESET));
    }
    if s.opening.iter().any(|p| p.as_bytes() == peer.as_bytes()) {
        return Handed::Wait;
    }
    if let Err(e) = s.opening.push(peer, GFP_KERNEL) {
        return Handed::Done(Err(e.into()));
    }
    drop(s);
    if let Err(e) = spawn(r, move |r| opener(r, peer)) {
        r.state
            .lock()
            .opening
            .retain(|p| p.as_bytes() != peer.as_bytes());
        return Handed::Done(Err(e));
    }
    Handed::Wait
}

/// One run of the dispatch work: hands queued operations to their peers'
/// connections while something changed (at most `DISPATCH_PASSES` passes).
/// It never waits on a peer: an operation whose peer cannot take it now
/// stays queued (with the later ones to that peer, which keep their order)
/// while those to other peers go on; the queue is looked at again after
/// `FULL_RING_POLL_MS` while such operations wait.
fn dispatch(r: &Arc<Rdm>) {
    // The peers that wait in a pass: at most one per queued operation.
    let Ok(mut waiting) = KVec::<u64>::with_capacity(QUEUE, GFP_KERNEL) else {
        // Without memory for this run: look again soon.
        repoll(r);
        return;
    };
    for _ in 0..DISPATCH_PASSES {
        {
            let mut t = r.txq.lock();
            if t.closing {
                return;
            }
            if !core::mem::take(&mut t.kicked) {
                if t.ops.is_empty() {
                    shrink_vec(&mut t.ops);
                } else {
                    drop(t);
                    repoll(r);
                }
                return;
            }
        }
        waiting.clear();
        // Failures noted before this pass fail the operations that were
        // waiting for them; later ones are for the next pass.
        let failed = core::mem::take(&mut r.state.lock().failed);
        let mut progressed = false;
        let mut i = 0;
        loop {
            // The operation leaves its slot while it is handed over (the
            // slot keeps its place: only this dispatcher removes, and close
            // looks at the queue only once the dispatcher has returned).
            let (mut op, dest) = {
                let mut t = r.txq.lock();
                if t.closing {
                    return;
                }
                match t.ops.get_mut(i) {
                    Some(q) if waiting.contains(&q.dest) => {
                        i += 1;
                        continue;
                    }
                    Some(q) => (core::mem::take(&mut q.op), q.dest),
                    None => break,
                }
            };
            let entry = op.entry();
            match hand_over(r, &mut op, dest, &failed) {
                Handed::Wait => {
                    if let Some(q) = r.txq.lock().ops.get_mut(i) {
                        q.op = op;
                    }
                    let _ = waiting.push_within_capacity(dest);
                    i += 1;
                }
                Handed::Done(outcome) => {
                    let _ = r.txq.lock().ops.remove(i);
                    progressed = true;
                    if let Err(e) = outcome {
                        let cq = r.state.lock().tx_cq;
                        report_err(cq, &entry, e);
                    }
                }
            }
        }
        drop(failed);
        if progressed {
            // Operations behind those handed over may go now.
            r.txq.lock().kicked = true;
        }
    }
    let (again, left) = {
        let mut t = r.txq.lock();
        if t.ops.is_empty() {
            shrink_vec(&mut t.ops);
        }
        (t.kicked, !t.ops.is_empty())
    };
    if again {
        // Passes left to do: after the other work on the provider's queue.
        kick(r);
    } else if left {
        repoll(r);
    }
}
