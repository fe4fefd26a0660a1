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
    sync::{Arc, CondVar, Mutex, SpinLockIrq},
    time::msecs_to_jiffies,
    workqueue::{
        impl_has_delayed_work, impl_has_work, new_delayed_work, new_work, DelayedWork, Work,
        WorkItem,
    },
};

use crate::{
    accept::Listening,
    conn::{self, shrink_vec, Shared, QUEUE, QUEUE_FIRST},
    ep,
    frame::{self, Answer},
    info_ns,
    kfi::{
        kfabric::kfi_error,
        kfi_sys as sys,
        provider::{AvRef, Bound, EndpointAttr},
        toolkit::{
            completion::{bind_reports, report_err, Reports},
            workers::Workers,
        },
    },
    ksock::{NetNs, SockAddr, Socket},
    mr::MrTable,
    op::TxOp,
    pep::{listen_socket, refuse, with_timeout},
    rxq::RxQueues,
    wq,
};

/// The socket address behind `fi_addr` in `av` (the util AV of the
/// domain holds socket addresses).
fn peer_of(av: AvRef, fi_addr: u64) -> Result<SockAddr> {
    let mut b = [0u8; 32];
    let len = av.lookup(fi_addr, &mut b).map_err(|_| EHOSTUNREACH)?;
    SockAddr::from_bytes(b.get(..len).ok_or(EINVAL)?)
}

/// Most operations one peer may have waiting in the endpoint's queue: a
/// peer whose connection is stuck (its ring full, its handshake slow)
/// leaves the rest of the queue to the others.
const PEER_BACKLOG: usize = QUEUE / 4;

/// How soon the dispatch work looks again at a peer whose ring was full
/// (a connection has no way to tell the endpoint that room came back).
const FULL_RING_POLL_MS: u32 = 10;

/// Most passes over the queue in one run of the dispatch work (then it
/// queues itself again, behind the other work on the provider's queue).
const DISPATCH_PASSES: usize = 8;

/// An operation and its destination.
#[derive(Default)]
struct Queued {
    op: TxOp,
    dest: u64,
}

struct TxQueue {
    /// Operations not handed to a connection yet, oldest first: at most
    /// `QUEUE`, in room that grows on demand from `QUEUE_FIRST` and goes
    /// back to it when the queue empties (an idle endpoint holds little).
    /// Only posting adds (at the end), only the dispatch work removes
    /// (until close), so its index of an entry stays valid.
    ops: KVec<Queued>,
    /// Something changed that the dispatch work should look at.
    kicked: bool,
    /// `kfi_enable` has run: operations are dispatched.
    enabled: bool,
    /// The dispatch work and its poll, queued or running.
    active: u32,
    closing: bool,
}

struct State {
    av: Option<AvRef>,
    tx_cq: Reports,
    listener: Option<Listening>,
    /// Connections by the peer's listening address.
    conns: KVec<Conn>,
    /// Sockets of requests being read, and of a connection being opened:
    /// shut down at close so no worker waits on a silent peer.
    busy: KVec<Arc<Socket>>,
    /// Peers' requests being read (at most `handshake_max`).
    reading: usize,
    /// Addresses of peers' requests that passed the check and are being
    /// accepted (at most one per address, and `handshake_max` in all):
    /// taken until the connection is filed, so that a twin request is
    /// refused before we answer either, not after the first was accepted.
    claimed: KVec<SockAddr>,
    /// Peers a worker is opening a connection to.
    opening: KVec<SockAddr>,
    /// Peers whose opening failed, with the error, for the dispatcher to
    /// fail the operations that waited for them.
    failed: KVec<(SockAddr, Error)>,
    closing: bool,
}

/// A connection to a peer.
struct Conn {
    /// The peer's listening address (checked against the socket's peer IP
    /// for connections it opened).
    peer: SockAddr,
    conn: Arc<Shared>,
    /// The peer opened it: at most one live such connection per address.
    incoming: bool,
}

/// What an RDM endpoint and its workers share.
#[pin_data]
pub(crate) struct Rdm {
    #[pin]
    state: Mutex<State>,
    #[pin]
    txq: SpinLockIrq<TxQueue>,
    /// Signalled when `TxQueue::active` drops.
    #[pin]
    idle: CondVar,
    /// Hands queued operations to connections ([`dispatch`]).
    #[pin]
    dispatch: Work<Rdm, 0>,
    /// Queues `dispatch` after `FULL_RING_POLL_MS`.
    #[pin]
    repoll: DelayedWork<Rdm, 1>,
    #[pin]
    workers: Workers,
    rxq: Arc<RxQueues>,
    src: SockAddr,
    ns: NetNs,
    mrs: Arc<MrTable>,
}

/// An RDM endpoint.
pub(crate) struct RdmEp(Arc<Rdm>);

fn spawn(r: &Arc<Rdm>, f: impl FnOnce(&Arc<Rdm>) + Send + 'static) -> Result {
    Workers::spawn(r, |r| &r.workers, f)
}

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
                    reading: 0,
                    claimed: KVec::new(),
                    opening: KVec::new(),
                    failed: KVec::new(),
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
        let take: crate::accept::Take = KBox::new(move |s: &Arc<Socket>| take(&r, s), GFP_KERNEL)?;
        let listening = Listening::start(l, take)?;
        {
            let mut s = self.0.state.lock();
            if s.listener.is_some() {
                // A second `kfi_enable` raced this one: it won.
                drop(s);
                drop(listening);
                return Err(EINVAL);
            }
            s.listener = Some(listening);
        }
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
        drop(q);
        kick(&self.0);
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

/// Whether a live connection that `peer` opened is filed already.
fn has_incoming(conns: &[Conn], peer: &SockAddr) -> bool {
    conns
        .iter()
        .any(|c| c.incoming && c.peer.as_bytes() == peer.as_bytes() && c.conn.usable())
}

/// Takes the connections that ended out of the list, for the caller to
/// close outside the lock (the next use of such a peer reconnects). If
/// there is no memory to hold them, they stay listed until a later call.
fn take_ended(conns: &mut KVec<Conn>) -> KVec<Arc<Shared>> {
    let n = conns.iter().filter(|c| !c.conn.usable()).count();
    let Ok(mut ended) = KVec::with_capacity(n, GFP_KERNEL) else {
        return KVec::new();
    };
    let mut i = 0;
    while i < conns.len() && ended.len() < n {
        if conns.get(i).is_some_and(|c| c.conn.usable()) {
            i += 1;
            continue;
        }
        match conns.remove(i) {
            // Within the capacity: does not allocate or fail.
            Ok(c) => {
                if let Err(e) = ended.push_within_capacity(c.conn) {
                    // Closed rather than dropped while hooked.
                    e.0.close();
                }
            }
            Err(_) => break,
        }
    }
    ended
}

/// Files a connection under the peer's address, unless the endpoint is
/// closing: then it is closed here. Its room was reserved by `track` of
/// its socket, which the caller untracks after this; an `incoming` one's
/// address by `claim_peer`, which the caller releases after this.
fn add_conn(r: &Rdm, peer: SockAddr, conn: Arc<Shared>, incoming: bool) -> Result<Arc<Shared>> {
    let mut s = r.state.lock();
    if s.closing {
        drop(s);
        conn.close();
        return Err(ECANCELED);
    }
    let ended = take_ended(&mut s.conns);
    let filed = s.conns.push(
        Conn {
            peer,
            conn: conn.clone(),
            incoming,
        },
        GFP_KERNEL,
    );
    drop(s);
    for c in ended.iter() {
        c.close();
    }
    if let Err(e) = filed {
        conn.close();
        return Err(e.into());
    }
    Ok(conn)
}

/// Tracks a socket a worker may wait on (see `State::busy`), reserving
/// room for its connection: an endpoint has at most `rdm_max_peers`
/// connections, handshakes in progress included (`ENOSPC` beyond; ended
/// connections are closed first to make room). The socket stays tracked
/// until its connection is filed or has failed, so the count never drops
/// below what exists.
fn track(r: &Rdm, sock: &Arc<Socket>) -> Result {
    let mut s = r.state.lock();
    if s.closing {
        return Err(ECANCELED);
    }
    let ended = take_ended(&mut s.conns);
    let room = s.conns.len().saturating_add(s.busy.len()) < crate::rdm_max_peers();
    let pushed = if room {
        s.busy.push(sock.clone(), GFP_KERNEL).map_err(Error::from)
    } else {
        Err(ENOSPC)
    };
    drop(s);
    for c in ended.iter() {
        c.close();
    }
    pushed
}

fn untrack(r: &Rdm, sock: &Arc<Socket>) {
    r.state.lock().busy.retain(|b| !Arc::ptr_eq(b, sock));
}

/// A new connection on our socket `sock` to `peer`, running.
fn connection(r: &Rdm, sock: Arc<Socket>, peer: SockAddr) -> Result<Arc<Shared>> {
    let conn = Shared::new(
        Some(sock),
        Some(peer),
        r.ns,
        r.mrs.clone(),
        r.rxq.clone(),
        false,
    )?;
    let cq = r.state.lock().tx_cq;
    conn.state.lock().tx_cq = cq;
    conn::start(&conn)?;
    Ok(conn)
}

/// Takes a peer's connection (from the listener's accept work): its
/// request is read on a worker of its own.
fn take(r: &Arc<Rdm>, s: &Arc<Socket>) -> Result {
    begin_reading(r).map_err(|e| refuse(s, e))?;
    if let Err(e) = track(r, s) {
        end_reading(r);
        return Err(if e == ENOSPC { refuse(s, e) } else { e });
    }
    let s2 = s.clone();
    spawn(r, move |r| incoming(r, s2)).inspect_err(|_| {
        untrack(r, s);
        end_reading(r);
    })
}

/// Counts a peer's request about to be read: at most `handshake_max` at
/// once (`EBUSY` beyond), so peers that connect and stay silent cannot
/// make the endpoint hold a worker for each.
fn begin_reading(r: &Rdm) -> Result {
    let mut s = r.state.lock();
    if s.reading >= crate::handshake_max() {
        return Err(EBUSY);
    }
    s.reading += 1;
    Ok(())
}

fn end_reading(r: &Rdm) {
    let mut s = r.state.lock();
    s.reading = s.reading.saturating_sub(1);
}

/// The address a peer's request claims (its listening address), checked
/// against the socket: the IP must be the one the peer connects from (a
/// wildcard claim is filed under that IP), and no live connection that the
/// peer opened may have it already, nor a request being accepted (`EACCES`
/// or `EADDRINUSE` otherwise). Taken for this request in the same step
/// (`State::claimed`): the caller releases it with [`unclaim`] once the
/// connection is filed or has failed.
fn claim_peer(r: &Rdm, sock: &Socket, data: &[u8]) -> Result<SockAddr> {
    let claim = SockAddr::from_bytes(data)?;
    let real = sock.peer_addr()?;
    let peer = if claim.ip_unspecified() {
        real.with_port(claim.port())
    } else if claim.same_ip(&real) {
        claim
    } else {
        return Err(EACCES);
    };
    let mut s = r.state.lock();
    if has_incoming(&s.conns, &peer) || s.claimed.iter().any(|c| c.as_bytes() == peer.as_bytes()) {
        return Err(EADDRINUSE);
    }
    s.claimed.push(peer, GFP_KERNEL)?;
    Ok(peer)
}

/// Releases the claim [`claim_peer`] took.
fn unclaim(r: &Rdm, peer: &SockAddr) {
    let mut s = r.state.lock();
    if let Some(i) = s
        .claimed
        .iter()
        .position(|c| c.as_bytes() == peer.as_bytes())
    {
        let _ = s.claimed.remove(i);
    }
}

/// A peer's request: its private data is the peer's listening address.
fn incoming(r: &Arc<Rdm>, sock: Arc<Socket>) {
    let outcome = (|| -> Result {
        let data = with_timeout(&sock, || frame::read_connreq(&sock))?;
        let peer = match claim_peer(r, &sock, &data) {
            Ok(p) => p,
            Err(e) => {
                // The peer hears `ECONNREFUSED`.
                let _ = with_timeout(&sock, || frame::reject(&sock, &[]));
                return Err(e);
            }
        };
        let filed = (|| -> Result {
            frame::accept(&sock, &[])?;
            let conn = connection(r, sock.clone(), peer)?;
            add_conn(r, peer, conn, true)?;
            Ok(())
        })();
        // Filed by now (the filed connection refuses twins from here on)
        // or failed.
        unclaim(r, &peer);
        filed
    })();
    untrack(r, &sock);
    end_reading(r);
    if outcome.is_err() {
        sock.shutdown();
    }
}

/// Opens a connection to `peer`: our listening address is the request's
/// private data. `ENOSPC` when the endpoint has `rdm_max_peers`
/// connections already.
fn open(r: &Rdm, peer: SockAddr) -> Result<Arc<Shared>> {
    let sock = Arc::new(Socket::tcp_in(&peer, r.ns)?, GFP_KERNEL)?;
    track(r, &sock)?;
    let conn = open_tracked(r, &sock, peer);
    untrack(r, &sock);
    conn
}

/// The handshake of `open` on its tracked socket `sock`, and the filing of
/// the connection.
fn open_tracked(r: &Rdm, sock: &Arc<Socket>, peer: SockAddr) -> Result<Arc<Shared>> {
    let answer = (|| -> Result<Answer> {
        let l = r.state.lock().listener.as_ref().map(|l| l.sock().clone());
        let me = l.ok_or(ENOTCONN)?.local_addr()?;
        // From our listening IP, which the peer checks our claim against.
        if !me.ip_unspecified() {
            sock.bind(&me.with_port(0))?;
        }
        with_timeout(sock, || {
            frame::connect_start(sock, &peer, me.as_bytes())?;
            frame::connect_finish(sock)
        })
    })();
    match answer? {
        Answer::Accepted(_) => {}
        Answer::Rejected(_) => return Err(ECONNREFUSED),
    }
    let conn = connection(r, sock.clone(), peer)?;
    add_conn(r, peer, conn, false)
}

impl_has_work! {
    impl HasWork<Self, 0> for Rdm { self.dispatch }
}

impl_has_delayed_work! {
    impl HasDelayedWork<Self, 1> for Rdm { self.repoll }
}

impl WorkItem<0> for Rdm {
    type Pointer = Arc<Rdm>;

    fn run(this: Arc<Rdm>) {
        dispatch(&this);
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
    drop(t);
    r.idle.notify_all();
}

/// Tells the dispatch work to look at the queue again (any context but
/// hard interrupt).
fn kick(r: &Arc<Rdm>) {
    r.txq.lock().kicked = true;
    if work_begin(r) && wq::queue().enqueue::<_, 0>(r.clone()).is_err() {
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
        if let Err(e) = outcome {
            // Without memory to note it, the next pass simply opens again.
            let _ = s.failed.push((peer, e), GFP_KERNEL);
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
    let found = s
        .conns
        .iter()
        .find(|c| c.peer.as_bytes() == peer.as_bytes() && c.conn.usable())
        .map(|c| c.conn.clone());
    if let Some(c) = found {
        drop(s);
        return match c.queue(op) {
            Err(e) if e == EAGAIN => Handed::Wait,
            other => Handed::Done(other),
        };
    }
    if let Some((_, e)) = failed.iter().find(|(p, _)| p.as_bytes() == peer.as_bytes()) {
        return Handed::Done(Err(*e));
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
        r.rxq.close();
        // One bound for all of them: each sends the responses it has
        // queued (`Shared::close_by`).
        let by = conn::drain_deadline();
        for c in conns.iter() {
            c.conn.close_by(by);
        }
        r.workers.wait_idle();
        // The dispatch work queues no more; a poll still planned runs
        // within `FULL_RING_POLL_MS`.
        let mut t = r.txq.lock();
        while t.active > 0 {
            r.idle.wait(&mut t);
        }
        drop(t);
        // Operations never handed to a connection.
        let cq = r.state.lock().tx_cq;
        let left = core::mem::take(&mut r.txq.lock().ops);
        for q in left.iter() {
            report_err(cq, &q.op.entry(), ECANCELED);
        }
    }
}
