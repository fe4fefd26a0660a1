// SPDX-License-Identifier: GPL-2.0

//! The fan-out rows: one kfi_sockets RDM endpoint, the hub, talking to N
//! peer RDM endpoints (N = 1, 64, 1024), all over loopback in this guest,
//! each on its own port. The hub reaches the peers through its address
//! vector; kfi_sockets opens one TCP connection to a peer on the first
//! message to it.
//!
//! A row opens the peers (all on one domain, sharing one receive CQ and
//! one address vector) and two hubs. The first hub sends one message to
//! every peer (an open pass: N connections opened, every message
//! checked), so that the kernel has started the worker threads a burst
//! of N handshakes needs; then, the guest's memory read once it has
//! settled, the measured hub does the same, and the memory is read again
//! once it has settled: the difference is what N more idle connections
//! take, both ends of each (the hub's and the peer's connection state,
//! their two TCP sockets). The first hub's difference, which includes the
//! threads, is printed beside it. Then the rate passes: the measured hub
//! sends `msgs` messages of 64 bytes
//! round-robin to the peers (message `i` to peer `i % N`), `WIN` in
//! flight; every peer keeps receives posted. One warm-up pass, then `reps`
//! timed ones. Each message carries its own pattern (`pattern.rs`; message
//! `i` lands in slot `i` of the destination, so one delivered to the wrong
//! peer or out of order fails the check); every completion on both sides
//! is checked (its context names a posted, not yet completed operation of
//! the side's kind, its length is 64, its flags the kind's).
//!
//! Every wait is bounded (CQ reads time out, connection handshakes do);
//! every object is closed when the row ends, on every path. Process
//! context.

use kernel::{
    prelude::*,
    str::CString,
    sync::Arc,
    time::{delay::fsleep, Delta},
};

use crate::{
    cost::Cost,
    kfi::{kfabric::Owned, kfi_sys as sys},
    kfi_runs::{cq_error, index_of, reap, Kind, Track},
    mem::Mem,
    net::*,
    pattern,
    run::{cpu_now, span_ns, Back, Bufs, Cpus, Grave, Sample, Shape, Time},
    spawn::{join_both, spawn},
    Costs, Rep, Sides,
};

/// Bytes of every message.
const SIZE: usize = 64;
/// Sends in flight at the hub. kfi_sockets queues at most 64 operations
/// on an RDM endpoint and 16 for one peer: a post it refuses (`EAGAIN`)
/// waits for a completion and is tried again.
const WIN: usize = 32;
/// Most receives posted on one peer (kfi_sockets takes 64).
const MAX_DEPTH: usize = 32;
/// The rows' peers.
const PEERS: [usize; 3] = [1, 64, 1024];
/// The first port of the fan-out rows; every endpoint takes the next one
/// (no row reuses a port another row's connections used).
const BASE_PORT: u16 = 7500;
/// How long the connections stay idle before their memory is measured:
/// longer than kfi_sockets waits before an idle connection gives back
/// what its bursts took (1 s).
const IDLE_MS: i64 = 2000;
/// Most waits of a sender whose posts are refused with nothing of its own
/// in flight, 1 ms each.
const MAX_STALLS: usize = 5000;

/// A post refused with nothing of the sender's in flight waits this long.
const STALL_MS: i64 = 1;

/// What a receive slot holds.
const FREE: u8 = 0;
const POSTED: u8 = 1;
const DONE: u8 = 2;

/// The hub. Fields drop in order: the endpoint, then its CQ and AV, then
/// the domain and fabric.
struct Hub {
    ep: Owned<sys::kfid_ep>,
    cq: Owned<sys::kfid_cq>,
    av: Owned<sys::kfid_av>,
    /// The peers' addresses in the AV, peer `p` at `p`.
    to: KVec<u64>,
    _n: Net,
}

/// The peers. Fields drop in order: the endpoints, then their CQ and AV,
/// then the domain and fabric.
struct Peers {
    eps: KVec<Owned<sys::kfid_ep>>,
    cq: Owned<sys::kfid_cq>,
    _av: Owned<sys::kfid_av>,
    _n: Net,
}

/// The hubs and their peers; the hubs close first.
struct Fan {
    /// The measured hub.
    hub: Hub,
    /// The hub whose connections are opened first.
    first: Hub,
    peers: Peers,
}

/// The measured hub of `f`.
fn measured(f: &Fan) -> &Hub {
    &f.hub
}

/// The hub of `f` whose connections are opened first.
fn first(f: &Fan) -> &Hub {
    &f.first
}

// SAFETY: kfabric objects may be used from any thread (kfabric.ko and the
// provider lock what they share); the two sides of a pass use disjoint
// endpoints and CQs.
unsafe impl Send for Fan {}
// SAFETY: See `Send`.
unsafe impl Sync for Fan {}

/// The port numbers of a row, taken in turn.
struct Ports(u16);

impl Ports {
    /// The next port, as a numeric service string.
    fn next(&mut self) -> Result<CString> {
        let p = self.0;
        self.0 = p.checked_add(1).ok_or(EADDRNOTAVAIL)?;
        CString::try_from_fmt(fmt!("{}", p))
    }
}

/// The settings of the rows (module parameters).
pub(crate) struct FanPlan {
    /// The largest row's peers (0: no rows).
    pub(crate) max_peers: usize,
    /// Messages of a rate pass (at least one per peer).
    pub(crate) msgs: usize,
    pub(crate) reps: usize,
}

/// The peers of the rows up to `max`: those of `PEERS` below it, and
/// `max` itself.
fn row_peers(max: usize) -> impl Iterator<Item = usize> {
    Iterator::chain(
        PEERS.into_iter().filter(move |&n| n < max),
        (max > 0).then_some(max),
    )
}

/// Every row: the number of passes with wrong data.
pub(crate) fn rows(plan: &FanPlan) -> Result<usize> {
    let mut ports = Ports(BASE_PORT);
    let mut bad = 0;
    for n in row_peers(plan.max_peers) {
        bad += row(n, plan, &mut ports)
            .inspect_err(|e| pr_err!("bench: fanout of {} peers: {:?}\n", n, e))?;
    }
    Ok(bad)
}

/// The row of `asked` peers: the number of passes with wrong data.
fn row(asked: usize, plan: &FanPlan, ports: &mut Ports) -> Result<usize> {
    let n = asked;
    if n == 0 {
        pr_err!("bench: fanout: no peers\n");
        return Err(EINVAL);
    }
    let msgs = plan.msgs.max(n);
    let total = msgs.checked_mul(SIZE).ok_or(EINVAL)?;
    let grave = Grave::new();
    let mut bufs = Bufs {
        src: pattern::buffer(total, Some(SIZE))?,
        dst: pattern::buffer(total, None)?,
    };
    let t0 = Time::now();
    let fan = Arc::new(open(n, ports)?, GFP_KERNEL)?;
    let open_ns = span_ns(t0, &[Time::now()]);
    let mut r = Row {
        fan,
        grave,
        n,
        bad: 0,
    };
    let (m0, w0) = Mem::settled();
    let (b, s0) = r.pass(first, n, bufs)?;
    bufs = b;
    let ok0 = r.check(&mut bufs, n)?;
    fsleep(Delta::from_millis(IDLE_MS));
    let (m1, w1) = Mem::settled();
    let cost0 = Cost::now();
    let (b, s) = r.pass(measured, n, bufs)?;
    let cost = Cost::now().since(cost0);
    bufs = b;
    let ok = r.check(&mut bufs, n)?;
    fsleep(Delta::from_millis(IDLE_MS));
    let (m2, w2) = Mem::settled();
    let cold = m1.taken_since(m0);
    let m = m2.taken_since(m1);
    pr_info!(
        "bench: fanout_open peers={} asked={} conns={} endpoints_ns={} first_ns={} ns={} cpus={} {} slab={} used={} stack={} vmalloc={} first_slab={} first_used={} first_stack={} settle_ms={} verified={}\n",
        n,
        asked,
        n,
        open_ns,
        s0.ns,
        s.ns,
        Sides(s.cpus),
        Costs(&cost),
        m.slab,
        m.free,
        m.stack,
        m.vmalloc,
        cold.slab,
        cold.free,
        cold.stack,
        w0 + w1 + w2,
        u8::from(ok && ok0)
    );
    for rep in (0..=plan.reps).map(|r| r.checked_sub(1)) {
        let cost0 = Cost::now();
        let (b, s) = r.pass(measured, msgs, bufs)?;
        let cost = Cost::now().since(cost0);
        bufs = b;
        let ok = r.check(&mut bufs, msgs)?;
        pr_info!(
            "bench: fanout peers={} rep={} msgs={} bytes={} win={} ns={} cpus={} {} verified={}\n",
            n,
            Rep(rep),
            msgs,
            SIZE,
            WIN,
            s.ns,
            Sides(s.cpus),
            Costs(&cost),
            u8::from(ok)
        );
    }
    let bad = r.bad;
    let t0 = Time::now();
    // The endpoints close before the buffers go (the grave after them).
    drop(r);
    pr_info!(
        "bench: fanout_close peers={} ns={}\n",
        n,
        span_ns(t0, &[Time::now()])
    );
    drop(bufs);
    Ok(bad)
}

/// A hub for `n` peers on the next port of `ports`, its address vector
/// empty.
fn open_hub(n: usize, ports: &mut Ports) -> Result<Hub> {
    let port = ports.next()?;
    let hn = net_typed(
        c"sockets",
        c"127.0.0.1",
        &port,
        core::ptr::null_mut(),
        sys::KFI_EP_RDM,
    )?;
    let av = av(&hn, n)?;
    let cq = cq_sized(&hn, 2 * WIN)?;
    let ep = rdm_endpoint(&hn, &cq, &av)?;
    Ok(Hub {
        ep,
        cq,
        av,
        to: KVec::with_capacity(n, GFP_KERNEL)?,
        _n: hn,
    })
}

/// Opens two hubs and `n` peers on the next ports of `ports`; puts the
/// peers in the hubs' address vectors.
fn open(n: usize, ports: &mut Ports) -> Result<Fan> {
    let mut hub = open_hub(n, ports)?;
    let mut first_hub = open_hub(n, ports)?;
    let first = ports.next()?;
    let pn = net_typed(
        c"sockets",
        c"127.0.0.1",
        &first,
        core::ptr::null_mut(),
        sys::KFI_EP_RDM,
    )?;
    let depth = depth(n);
    let slots = n.checked_mul(depth).and_then(|s| s.checked_add(2 * WIN));
    let pcq = cq_sized(&pn, slots.ok_or(EINVAL)?)?;
    let pav = av(&pn, 1)?;
    let mut eps = KVec::with_capacity(n, GFP_KERNEL)?;
    for p in 0..n {
        let later;
        let port: &CStr = if p == 0 {
            &first
        } else {
            later = ports.next()?;
            &later
        };
        let info = source_info(c"sockets", c"127.0.0.1", port, sys::KFI_EP_RDM)?;
        let ep = rdm_endpoint_on(&pn, &info, &pcq, &pav)?;
        // Within the capacity reserved above: does not allocate.
        eps.push(ep, GFP_KERNEL)?;
        for h in [&mut hub, &mut first_hub] {
            let a = h.av.insert(info.src_addr()).map_err(|_| EINVAL)?;
            // Within the capacity reserved at open: does not allocate.
            h.to.push(a, GFP_KERNEL)?;
        }
    }
    Ok(Fan {
        hub,
        first: first_hub,
        peers: Peers {
            eps,
            cq: pcq,
            _av: pav,
            _n: pn,
        },
    })
}

/// An address vector of `n`'s domain for `count` addresses.
fn av(n: &Net, count: usize) -> Result<Owned<sys::kfid_av>> {
    n.domain.open_av_table(count)
}

/// Receives a peer keeps posted: room for twice the hub's window over all
/// peers, at least one each.
fn depth(n: usize) -> usize {
    (2 * WIN).div_ceil(n.max(1)).clamp(1, MAX_DEPTH)
}

/// A row's open objects, the buffers of failed passes, and its passes
/// with wrong data. Fields drop in order: the endpoints close before the
/// buffers they may still use.
struct Row {
    fan: Arc<Fan>,
    grave: Grave,
    n: usize,
    bad: usize,
}

impl Row {
    /// One pass of `msgs` messages from the hub `pick` gives, message `i`
    /// from operation `i` of the source to peer `i % n`, into operation
    /// `i` of the destination.
    fn pass(&mut self, pick: fn(&Fan) -> &Hub, msgs: usize, bufs: Bufs) -> Result<(Bufs, Sample)> {
        let n = self.n;
        let (src, dst) = bufs.split();
        let fr = self.fan.clone();
        let receiver = spawn(move || receive_side(&fr.peers, n, msgs, dst))?;
        let fs = self.fan.clone();
        let sender = spawn(move || send_side(pick(&fs), msgs, src));
        let g = &mut self.grave;
        // Alone, the receiver gives up at its CQ timeout.
        let (sb, rb) = join_both(sender, receiver, |j| {
            let _ = g.sort(j.join());
        })?;
        let s = g.sort(sb);
        let (dst, received, rc) = g.sort(rb)?;
        let (src, (t0, sent), sc) = s?;
        Ok((
            Bufs::rejoin(src, dst),
            Sample::stream(t0, [sent, received], [sc, rc]),
        ))
    }

    /// Checks the first `msgs` messages of the destination against the
    /// pattern and clears them for the next pass: whether they matched.
    fn check(&mut self, bufs: &mut Bufs, msgs: usize) -> Result<bool> {
        let len = msgs.checked_mul(SIZE).ok_or(EINVAL)?;
        let d = bufs.dst.get_mut(..len).ok_or(EINVAL)?;
        let bad = pattern::first_bad(d, SIZE);
        d.fill(0);
        if let Some(at) = bad {
            pr_err!(
                "bench: fanout of {} peers: wrong data at byte {}\n",
                self.n,
                at
            );
            self.bad += 1;
        }
        Ok(bad.is_none())
    }
}

/// Sends `buf` to the peer at `to` with context `ctx`.
///
/// # Safety
///
/// `buf` stays valid and unchanged until the send completes or the
/// endpoint is closed.
unsafe fn send_to(ep: &Owned<sys::kfid_ep>, buf: &[u8], to: u64, ctx: usize) -> Result {
    let v = kvec(buf);
    let mut m = msg(&v, ctx, 0);
    m.addr = to;
    // SAFETY: The descriptor is read during the call; the buffer is kept
    // as the caller guarantees.
    unsafe { ep.sendmsg(&m, 0) }
}

/// The hub's side of a pass, as a work item: its source buffer back, with
/// the start and end of its sends.
fn send_side(h: &Hub, msgs: usize, src: Bufs) -> Back<(Time, Time)> {
    let first = cpu_now();
    let sh = Shape::new(SIZE, msgs, WIN);
    let mut send = match Track::new(Kind::Send, sh, false) {
        Ok(t) => t,
        Err(e) => {
            return Back {
                bufs: src,
                res: Err(e),
                busy: false,
                cpus: Cpus { first, last: first },
            }
        }
    };
    let res = transmit(h, sh, &src.src, &mut send);
    Back {
        busy: res.is_err() && send.in_flight() > 0,
        bufs: src,
        res,
        cpus: Cpus {
            first,
            last: cpu_now(),
        },
    }
}

/// Sends operation `i` of `src` to peer `i % n`, `WIN` in flight, each
/// completion checked.
fn transmit(h: &Hub, sh: Shape, src: &[u8], send: &mut Track) -> Result<(Time, Time)> {
    let mut stalls = 0;
    let t0 = Time::now();
    while send.done < sh.iters {
        while send.posted < sh.iters && send.in_flight() < WIN {
            let i = send.posted;
            let to =
                h.to.get(i.checked_rem(h.to.len()).ok_or(EINVAL)?)
                    .copied()
                    .ok_or(EINVAL)?;
            // SAFETY: The source is never written during a pass; the side
            // keeps its buffers while sends are in flight (`Back::busy`,
            // `Grave`).
            match unsafe { send_to(&h.ep, sh.op(src, i)?, to, Kind::Send.context(i)) } {
                Ok(()) => send.posted(),
                Err(e) if e == EAGAIN => break,
                Err(e) => return Err(e),
            }
        }
        if send.in_flight() == 0 {
            // Refused with none of ours queued: wait for room, bounded.
            stalls += 1;
            if stalls > MAX_STALLS {
                return Err(EAGAIN);
            }
            fsleep(Delta::from_millis(STALL_MS));
            continue;
        }
        reap(&h.cq, &mut [&mut *send])?;
    }
    Ok((t0, Time::now()))
}

/// The receive slots of a pass: which are posted and done, and each
/// peer's next one.
struct Inbox {
    n: usize,
    state: KVec<u8>,
    /// Receives each peer has had posted.
    next: KVec<usize>,
    posted: usize,
    done: usize,
}

impl Inbox {
    fn new(n: usize, msgs: usize) -> Result<Self> {
        if n == 0 {
            return Err(EINVAL);
        }
        Ok(Self {
            n,
            state: KVec::from_elem(FREE, msgs, GFP_KERNEL)?,
            next: KVec::from_elem(0, n, GFP_KERNEL)?,
            posted: 0,
            done: 0,
        })
    }

    /// Posts peer `p`'s next receive, into the slot of the next message
    /// the hub sends it (`k * n + p` for its `k`-th), if there is one.
    fn post(&mut self, peers: &Peers, p: usize, dst: &mut [u8]) -> Result {
        let k = self.next.get(p).copied().ok_or(EINVAL)?;
        let Some(i) = k.checked_mul(self.n).and_then(|x| x.checked_add(p)) else {
            return Ok(());
        };
        let sh = Shape::new(SIZE, self.state.len(), 1);
        let Some(slot) = self.state.get_mut(i) else {
            return Ok(());
        };
        let ep = peers.eps.get(p).ok_or(EINVAL)?;
        let v = kvec_mut(sh.op_mut(dst, i)?);
        // SAFETY: Slot `i` is used by nothing else until this receive
        // completes; the side keeps its buffer while receives are posted
        // (`Back::busy`, `Grave`).
        unsafe { ep.recvmsg(&msg(&v, Kind::Recv.context(i), 0), 0) }?;
        *slot = POSTED;
        if let Some(next) = self.next.get_mut(p) {
            *next = k + 1;
        }
        self.posted += 1;
        Ok(())
    }

    /// Checks completion `e`: a posted, not yet completed receive of 64
    /// bytes; its slot.
    fn take(&mut self, e: &sys::kfi_cq_data_entry) -> Result<usize> {
        let i = index_of(Kind::Recv, e);
        match i.and_then(|i| self.state.get_mut(i)) {
            Some(slot) if *slot == POSTED && e.len == SIZE => {
                *slot = DONE;
                self.done += 1;
                i.ok_or(EINVAL)
            }
            _ => {
                pr_err!(
                    "bench: fanout: unexpected receive completion: context {:#x}, len {}, flags {:#x}\n",
                    e.op_context as usize,
                    e.len,
                    e.flags
                );
                Err(EPROTO)
            }
        }
    }
}

/// The peers' side of a pass, as a work item: its destination buffer
/// back, with the end of its receives.
fn receive_side(peers: &Peers, n: usize, msgs: usize, dst: Bufs) -> Back<Time> {
    let first = cpu_now();
    let mut dst = dst;
    let mut inbox = match Inbox::new(n, msgs) {
        Ok(b) => b,
        Err(e) => {
            return Back {
                bufs: dst,
                res: Err(e),
                busy: false,
                cpus: Cpus { first, last: first },
            }
        }
    };
    let res = receive(peers, &mut dst.dst, &mut inbox);
    Back {
        busy: res.is_err() && inbox.posted > inbox.done,
        bufs: dst,
        res,
        cpus: Cpus {
            first,
            last: cpu_now(),
        },
    }
}

/// Keeps `depth` receives posted on every peer until every message has
/// arrived; checks each completion.
fn receive(peers: &Peers, dst: &mut [u8], inbox: &mut Inbox) -> Result<Time> {
    for _ in 0..depth(inbox.n) {
        for p in 0..inbox.n {
            inbox.post(peers, p, dst)?;
        }
    }
    let msgs = inbox.state.len();
    while inbox.done < msgs {
        let mut e = sys::kfi_cq_data_entry::default();
        let got = sread(&peers.cq, &mut e);
        if got != 1 {
            return Err(cq_error(&peers.cq, got));
        }
        let i = inbox.take(&e)?;
        inbox.post(peers, i.checked_rem(inbox.n).ok_or(EINVAL)?, dst)?;
    }
    Ok(Time::now())
}
