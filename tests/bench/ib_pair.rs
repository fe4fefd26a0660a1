// SPDX-License-Identifier: GPL-2.0

//! The baseline of the kfi_ibverbs rows: raw ib_core verbs over the same
//! soft RDMA device (siw, rxe), an RC QP pair connected through rdma_cm,
//! whose runs (`raw_ib.rs`) post work requests in the shapes of the kfi
//! runs. This file is the pair: its connection, completions and memory.
//! Every call into ib_core goes
//! through kfi_ibverbs' own safe wrappers (`prov/ibverbs/ib/`, included by
//! path, and its C shim, built in by `kfi_bench_ib_shim.c`).
//!
//! Memory: for the ping-pongs, one buffer of kmalloc memory, mapped for
//! DMA once, holds a run's source and destination halves and the server's
//! two echo slots; local access is through the PD's local DMA key. A
//! bandwidth run has its own slots (`ib_ring.rs`), registered for the
//! peer's RDMA reads (source) and writes (destination) before it, as the
//! kfi run registers its target's buffer. A run copies the bench's source
//! in before it and the destination out after it, outside the timed part,
//! so the bench checks it as every other row; a bandwidth run restamps
//! and checks its slots as they are reused, as the kfi run does
//! (`pattern.rs`).
//!
//! Completions: both QPs complete to CQs that ib_core polls in softirq
//! context, as kfi_ibverbs' do; the `ib_cqe` of a request names its side
//! and queue, its callback counts it and wakes the side's thread, which
//! waits (with a deadline) for the count it needs. A failed completion or
//! a receive of another length than the run's fails the run. The send
//! side of a send/recv run never outruns the receiver: every receive of
//! the run is posted before it starts (iWARP has no receiver-not-ready
//! retry: a send without a posted receive ends the connection): the
//! receiver keeps a receive posted in every free slot, and the sender
//! sends operation `i` only once receive `i` is posted, which the
//! receiver tells it through memory they share (flow control that costs
//! nothing on the wire, where kfi_ibverbs pays credits).
//!
//! The device stays registered while the pair lives: rdma_cm's device
//! removal waits until the pair's identifiers are destroyed, which happens
//! after every other object of the pair; a removal during the bench waits
//! for it to end (every wait of a run has a deadline).

use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use kernel::{
    new_condvar, new_mutex, new_spinlock_irq,
    prelude::*,
    sync::{Arc, CondVar, Mutex, SpinLockIrq},
    time::msecs_to_jiffies,
    types::Opaque,
};

use crate::{
    ib::{
        addr::Addr,
        cm::{CmId, Event, Handler, Private, RdDepth},
        dma::{self, DmaBuf},
        verbs::{Cq, Pd},
    },
    ib_sys as sys,
    run::{span_ns, Bufs, Shape, Time},
};

/// Send queue depth: a window (8) and a registration, with room.
const SEND_DEPTH: u32 = 32;
/// Receive queue depth: every receive of a send/recv run is posted before
/// it starts, so a run has at most this many operations.
pub(crate) const RECV_DEPTH: usize = 4096;
/// Entries of each side's CQ (its send and its receive queue).
const CQ_ENTRIES: u32 = SEND_DEPTH + RECV_DEPTH as u32 + 1;
/// How long connecting or waiting for one completion may take.
pub(crate) const WAIT_MS: i64 = 20000;
/// Bytes of a page as ib_core maps regions.
const PAGE: usize = 4096;

/// Connection events of one rdma_cm identifier, as seen by its waiter.
#[derive(Default)]
pub(crate) struct CmState {
    addr: bool,
    route: bool,
    up: bool,
    err: Option<Error>,
    /// The client's identifier while it connects: its route event
    /// creates the QP and connects it (rdma_cm wants that done in the
    /// identifier's own handler).
    id: Option<CmId<Cm>>,
    /// What the client's QP is created on.
    qp_on: Option<(Arc<Pd>, Arc<Cq>)>,
    /// The listener's connection request, with the peer's offer of read
    /// and atomic depths.
    child: Option<(CmId<()>, RdDepth)>,
    /// Once connected: the depths of this side of the connection.
    rd: RdDepth,
}

/// The event handler of one identifier, and its waiter.
#[pin_data]
pub(crate) struct Cm {
    #[pin]
    st: Mutex<CmState>,
    #[pin]
    cv: CondVar,
}

impl Cm {
    fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Cm {
                st <- new_mutex!(CmState::default()),
                cv <- new_condvar!(),
            }),
            GFP_KERNEL,
        )
    }

    /// Waits until `done` holds, an error is reported or the deadline
    /// passes. Process context.
    pub(crate) fn wait(&self, done: impl Fn(&CmState) -> bool) -> Result {
        let t0 = Time::now();
        let mut g = self.st.lock();
        loop {
            if let Some(e) = g.err {
                return Err(e);
            }
            if done(&g) {
                return Ok(());
            }
            let left = WAIT_MS - span_ns(t0, &[Time::now()]) / 1_000_000;
            if left <= 0 {
                return Err(ETIMEDOUT);
            }
            let _ = self
                .cv
                .wait_interruptible_timeout(&mut g, msecs_to_jiffies(left as u32));
        }
    }
}

impl Handler for Cm {
    fn event(&self, _id: *mut sys::rdma_cm_id, ev: Event<'_>) -> Result {
        let mut s = self.st.lock();
        let mut ret = Ok(());
        match ev {
            Event::AddrResolved => s.addr = true,
            Event::RouteResolved => {
                let r = match (s.id.as_ref(), s.qp_on.as_ref()) {
                    (Some(id), Some((pd, cq))) => id
                        .create_qp(pd, cq, cq, (SEND_DEPTH, RECV_DEPTH as u32), 1)
                        .and_then(|()| id.rd_limits())
                        .and_then(|offer| id.connect_in_handler(&[], &[], offer).map(|()| offer)),
                    _ => Err(EINVAL),
                };
                match r {
                    Ok(offer) => {
                        // The client's offer, settled at Established.
                        s.rd = offer;
                        s.route = true;
                    }
                    Err(e) => s.err = Some(e),
                }
            }
            Event::Established(_, reported) => {
                // The client's depths, as kfi_ibverbs' active side settles
                // them (the server's are its answer, set before).
                if s.route {
                    s.rd = s.rd.settle(reported);
                }
                s.up = true;
            }
            Event::Rejected(_) => s.err = Some(ECONNREFUSED),
            Event::Failed(e) => s.err = Some(e),
            Event::Disconnected => s.err = s.err.or(Some(ECONNRESET)),
            // The pair destroys its identifiers itself; the removal waits
            // for that.
            Event::DeviceRemoval => {
                s.err = Some(ENODEV);
                ret = Err(EBUSY);
            }
            Event::Other => {}
        }
        drop(s);
        self.cv.notify_all();
        ret
    }

    fn request(
        &self,
        child: CmId<()>,
        _data: Private<'_>,
        offer: RdDepth,
    ) -> core::result::Result<(), CmId<()>> {
        let mut s = self.st.lock();
        if s.child.is_some() {
            return Err(child);
        }
        s.child = Some((child, offer));
        drop(s);
        self.cv.notify_all();
        Ok(())
    }
}

/// A side's completion counts.
#[derive(Default)]
pub(crate) struct Counts {
    /// Send queue: sends, RDMA writes and reads.
    sq: usize,
    /// Receive queue.
    rq: usize,
    /// Receives the peer has posted in a send/recv run: the sends this
    /// side may make.
    credits: usize,
    /// The first failed completion.
    err: Option<Error>,
}

/// The completions of one side's QP.
#[pin_data]
pub(crate) struct Done {
    /// The `ib_cqe` of the side's send-queue requests.
    #[pin]
    sq: Opaque<sys::ib_cqe>,
    /// The `ib_cqe` of its receives.
    #[pin]
    rq: Opaque<sys::ib_cqe>,
    #[pin]
    counts: SpinLockIrq<Counts>,
    #[pin]
    cv: CondVar,
    /// The length every receive of the run must have.
    recv_len: AtomicUsize,
}

// SAFETY: The `ib_cqe` entries are written once, at creation, and only
// read afterwards (by ib_core, from any CPU); the counts are behind their
// lock and the length is atomic.
unsafe impl Send for Done {}
// SAFETY: See `Send`.
unsafe impl Sync for Done {}

/// The done callback of send-queue requests.
///
/// # Safety
///
/// Called by ib_core with the completion of a request posted with the
/// `sq` entry of a live [`Done`].
unsafe extern "C" fn on_sq(_cq: *mut sys::ib_cq, wc: *mut sys::ib_wc) {
    // SAFETY: ib_core passes a valid completion.
    let d = unsafe { dma::done(wc) };
    // SAFETY: The request was posted with `sq` of a `Done` that the pair
    // keeps until its QPs are drained (the caller's contract), so the
    // container is live.
    let done = unsafe { &*kernel::container_of!(d.cqe.cast::<Opaque<sys::ib_cqe>>(), Done, sq) };
    done.count(true, &d);
}

/// The done callback of receives.
///
/// # Safety
///
/// As for [`on_sq`], with the `rq` entry.
unsafe extern "C" fn on_rq(_cq: *mut sys::ib_cq, wc: *mut sys::ib_wc) {
    // SAFETY: ib_core passes a valid completion.
    let d = unsafe { dma::done(wc) };
    // SAFETY: The receive was posted with `rq` of a `Done` that the pair
    // keeps until its QPs are drained (the caller's contract), so the
    // container is live.
    let done = unsafe { &*kernel::container_of!(d.cqe.cast::<Opaque<sys::ib_cqe>>(), Done, rq) };
    done.count(false, &d);
}

impl Done {
    fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Done {
                sq: Opaque::new(sys::ib_cqe { done: Some(on_sq) }),
                rq: Opaque::new(sys::ib_cqe { done: Some(on_rq) }),
                counts <- new_spinlock_irq!(Counts::default()),
                cv <- new_condvar!(),
                recv_len: AtomicUsize::new(0),
            }),
            GFP_KERNEL,
        )
    }

    /// Counts a completion (softirq context).
    fn count(&self, sq: bool, d: &dma::Done) {
        let mut c = self.counts.lock();
        if !d.ok {
            c.err = c.err.or(Some(d.err));
        } else if !sq && d.len != self.recv_len.load(Ordering::Relaxed) {
            c.err = c.err.or(Some(EPROTO));
        }
        if sq {
            c.sq += 1;
        } else {
            c.rq += 1;
        }
        drop(c);
        self.cv.notify_all();
    }

    /// Starts a run whose receives are `len` bytes (nothing in flight).
    fn reset(&self, len: usize) {
        self.recv_len.store(len, Ordering::Relaxed);
        *self.counts.lock() = Counts::default();
    }

    /// Waits until at least `sq` send-queue and `rq` receive completions
    /// have arrived, one fails, or `WAIT_MS` pass without one. Process
    /// context.
    pub(crate) fn wait(&self, sq: usize, rq: usize) -> Result {
        self.wait_for(sq, rq, 0)
    }

    /// As [`Done::wait`], also for `credits`.
    pub(crate) fn wait_for(&self, sq: usize, rq: usize, credits: usize) -> Result {
        let mut t0 = Time::now();
        let mut g = self.counts.lock();
        let mut seen = (g.sq, g.rq, g.credits);
        loop {
            if let Some(e) = g.err {
                return Err(e);
            }
            if g.sq >= sq && g.rq >= rq && g.credits >= credits {
                return Ok(());
            }
            if (g.sq, g.rq, g.credits) != seen {
                seen = (g.sq, g.rq, g.credits);
                t0 = Time::now();
            }
            let left = WAIT_MS - span_ns(t0, &[Time::now()]) / 1_000_000;
            if left <= 0 {
                return Err(ETIMEDOUT);
            }
            let _ = self
                .cv
                .wait_interruptible_timeout(&mut g, msecs_to_jiffies(left as u32));
        }
    }

    pub(crate) fn sq_cqe(&self) -> *mut sys::ib_cqe {
        self.sq.get()
    }

    pub(crate) fn rq_cqe(&self) -> *mut sys::ib_cqe {
        self.rq.get()
    }

    /// Send-queue completions so far.
    pub(crate) fn sq_done(&self) -> usize {
        self.counts.lock().sq
    }

    /// The peer has posted `n` receives of the run.
    pub(crate) fn credit(&self, n: usize) {
        self.counts.lock().credits = n;
        self.cv.notify_all();
    }
}

/// A connected identifier with its QP: disconnected, and its QP flushed
/// and destroyed, when dropped (before the PD and CQs it uses).
pub(crate) struct Conn<H> {
    pub(crate) id: CmId<H>,
}

impl<H> Conn<H> {
    pub(crate) fn qp(&self) -> *mut sys::ib_qp {
        self.id.qp()
    }
}

impl<H> Drop for Conn<H> {
    fn drop(&mut self) {
        self.id.disconnect();
        self.id.destroy_qp();
    }
}

/// The connected QP pair and its memory. Fields drop in order: the
/// connections (QPs drained, so nothing uses the memory or the
/// completion entries after), the regions, the memory, the completions,
/// the CQs, the PD, the listener.
pub(crate) struct IbPair {
    pub(crate) client: Conn<Cm>,
    pub(crate) server: Conn<Cm>,
    /// `[source | destination | two echo slots]`.
    pub(crate) mem: DmaBuf,
    pub(crate) cdone: Arc<Done>,
    pub(crate) sdone: Arc<Done>,
    pub(crate) _ccq: Arc<Cq>,
    pub(crate) _scq: Arc<Cq>,
    pub(crate) lkey: u32,
    pub(crate) pd: Arc<Pd>,
    pub(crate) _listener: CmId<Cm>,
    pub(crate) _lcm: Arc<Cm>,
    /// Bytes of each half: the most a run moves.
    pub(crate) cap: usize,
    /// Bytes of an echo slot: the largest ping-pong.
    pub(crate) slot: usize,
    /// Bytes of one region of a bandwidth run's slots.
    pub(crate) region: usize,
    /// A run failed with requests in flight: no more runs.
    pub(crate) broken: AtomicBool,
}

/// Takes the client's identifier back out of its handler's state (where
/// it waited for its route), with its QP if one was created.
fn take_client(cm: &Cm) -> Option<Conn<Cm>> {
    let mut s = cm.st.lock();
    s.qp_on = None;
    s.id.take().map(|id| Conn { id })
}

/// Connects a QP pair on the RDMA device of `node`:`port` (numeric), each
/// half of its ping-pong memory `cap` bytes, echo slots of `slot` bytes;
/// a bandwidth run's regions at most `region` bytes (a multiple of the
/// page size the device can register in one region at any alignment).
/// Process context.
pub(crate) fn pair(
    node: &CStr,
    port: &CStr,
    cap: usize,
    slot: usize,
    region: usize,
) -> Result<Arc<IbPair>> {
    if cap == 0 || slot == 0 || region == 0 || region % PAGE != 0 {
        return Err(EINVAL);
    }
    let addr = Addr::parse(core::ptr::null_mut(), node, port)?;
    let lcm = Cm::new()?;
    let listener = CmId::new(core::ptr::null_mut(), lcm.clone())?;
    listener.listen(&addr, 4)?;
    let ccm = Cm::new()?;
    let cid = CmId::new(core::ptr::null_mut(), ccm.clone())?;
    cid.resolve_addr(&addr)?;
    ccm.wait(|s| s.addr)?;
    let dev = cid.device();
    if dev.is_null() {
        return Err(ENODEV);
    }
    // SAFETY: `dev` is `cid`'s device: rdma_cm's removal of it waits for the pair's
    // identifiers, destroyed after these objects (declaration and `IbPair` field order).
    let (pd, ccq, scq) = unsafe {
        (
            Arc::new(Pd::new(dev)?, GFP_KERNEL)?,
            Arc::new(Cq::new(dev, CQ_ENTRIES)?, GFP_KERNEL)?,
            Arc::new(Cq::new(dev, CQ_ENTRIES)?, GFP_KERNEL)?,
        )
    };
    let lkey = pd.local_key();
    // SAFETY: `dev` is `cid`'s device: rdma_cm's removal of it waits for the pair's
    // identifiers, destroyed after `mem` (declaration and `IbPair` field order).
    let mem = unsafe { DmaBuf::new(dev, cap.checked_mul(2).ok_or(EINVAL)? + 2 * slot)? };
    let (cdone, sdone) = (Done::new()?, Done::new()?);
    let routed = {
        let mut s = ccm.st.lock();
        s.qp_on = Some((pd.clone(), ccq.clone()));
        s.id = Some(cid);
        // Under the lock: the route event waits for it, and finds the
        // identifier there.
        s.id.as_ref().map_or(Err(EINVAL), |id| id.resolve_route())
    };
    let req = routed.and_then(|()| ccm.wait(|s| s.route)).and_then(|()| {
        lcm.wait(|s| s.child.is_some())?;
        lcm.st.lock().child.take().ok_or(EPROTO)
    });
    // Always taken back out: the identifier holds its handler, which
    // must not hold it in turn once this returns.
    let client = take_client(&ccm);
    let req = req?;
    let client = client.ok_or(EPROTO)?;
    let (req, offer) = req;
    if !core::ptr::eq(req.device(), dev) {
        return Err(ENODEV);
    }
    // Answered as kfi_ibverbs' passive side answers.
    let answer = req.rd_limits()?.answer(offer);
    let scm = Cm::new()?;
    scm.st.lock().rd = answer;
    let server = Conn {
        id: req.set_handler(scm.clone()),
    };
    server
        .id
        .create_qp(&pd, &scq, &scq, (SEND_DEPTH, RECV_DEPTH as u32), 1)?;
    server.id.accept(&[], &[], answer)?;
    ccm.wait(|s| s.up)?;
    scm.wait(|s| s.up)?;
    let rd = ccm.st.lock().rd;
    pr_info!(
        "bench: raw verbs rd depth: client initiator {} responder {}, server initiator {} responder {}\n",
        rd.initiator,
        rd.responder,
        answer.initiator,
        answer.responder
    );
    Ok(Arc::new(
        IbPair {
            client,
            server,
            mem,
            cdone,
            sdone,
            _ccq: ccq,
            _scq: scq,
            lkey,
            pd,
            _listener: listener,
            _lcm: lcm,
            cap,
            slot,
            region,
            broken: AtomicBool::new(false),
        },
        GFP_KERNEL,
    )?)
}

/// Where in the memory an operation's bytes are.
#[derive(Clone, Copy)]
pub(crate) enum Area {
    Src,
    Dst,
    Slot,
}

impl IbPair {
    /// The entry of operation `i` of `area` (`sh`'s layout; slots: `i`
    /// is 0 or 1).
    pub(crate) fn sge(&self, area: Area, sh: Shape, i: usize) -> Result<sys::ib_sge> {
        Ok(self.mem.sge_at(self.at(area, sh, i)?, sh.size, self.lkey))
    }

    /// Where operation `i` of `area` starts in the memory.
    fn at(&self, area: Area, sh: Shape, i: usize) -> Result<usize> {
        let span = sh.span(i)?;
        let (base, room) = match area {
            Area::Src => (0, self.cap),
            Area::Dst => (self.cap, self.cap),
            Area::Slot => (2 * self.cap, 2 * self.slot),
        };
        if span.end > room {
            return Err(EINVAL);
        }
        Ok(base + span.start)
    }

    /// The first byte of operation `i` of `area`, for the CPU.
    pub(crate) fn ptr(&self, area: Area, sh: Shape, i: usize) -> Result<*mut u8> {
        let at = self.at(area, sh, i)?;
        // SAFETY: `at` and the operation's bytes lie in the memory
        // (checked in `at`: the areas do).
        Ok(unsafe { self.mem.addr().add(at) })
    }

    /// Before a run: the bench's source in, the destination cleared, the
    /// counts reset. Nothing is in flight between runs (a run that left
    /// requests in flight marks the pair broken), so the CPU may write the
    /// memory.
    pub(crate) fn load(&self, sh: Shape, bufs: &Bufs) -> Result {
        let total = sh.total()?;
        self.start(sh)?;
        if total > self.cap || sh.size > self.slot {
            return Err(EINVAL);
        }
        let src = bufs.src.get(..total).ok_or(EINVAL)?;
        // SAFETY: `mem` holds `2 * cap + 2 * slot` bytes, so both ranges
        // lie inside it; no work request uses them (see above), and the
        // bench's buffers are other memory.
        unsafe {
            let m = self.mem.addr();
            core::ptr::copy_nonoverlapping(src.as_ptr(), m, total);
            core::ptr::write_bytes(m.add(self.cap), 0, total);
        }
        Ok(())
    }

    /// Before a run: the counts reset, unless the pair is broken.
    pub(crate) fn start(&self, sh: Shape) -> Result {
        if self.broken.load(Ordering::Relaxed) {
            return Err(EIO);
        }
        self.cdone.reset(sh.size);
        self.sdone.reset(sh.size);
        Ok(())
    }

    /// After a run: the destination out into the bench's buffer, checked
    /// there.
    pub(crate) fn unload(&self, sh: Shape, bufs: &mut Bufs) -> Result {
        let total = sh.total()?;
        let end = self.cap.checked_add(total).ok_or(EINVAL)?;
        let d = self.mem.bytes().get(self.cap..end).ok_or(EINVAL)?;
        bufs.dst.get_mut(..total).ok_or(EINVAL)?.copy_from_slice(d);
        Ok(())
    }

    /// The end of a run: a failed one may have left requests in flight.
    pub(crate) fn finish<T>(&self, r: Result<T>) -> Result<T> {
        if r.is_err() {
            self.broken.store(true, Ordering::Relaxed);
        }
        r
    }
}
