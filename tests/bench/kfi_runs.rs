// SPDX-License-Identifier: GPL-2.0

//! A kfabric provider (kfi_sockets over loopback, kfi_ibverbs over a soft
//! RDMA device) through kfabric.ko, driven the way the baselines are: a
//! client and a server endpoint, each with its own CQ, each
//! side of a run a work item (`spawn.rs`) that posts operations and waits
//! on its CQ. RMA runs have one side: the target is passive.
//!
//! Every completion is checked against what its side posted: its context
//! names a posted, not yet completed operation of a kind the side expects,
//! its length is the operation's size and its flags are its kind's.

use kernel::{
    bindings,
    prelude::*,
    str::CString,
    sync::Arc,
    time::{delay::fsleep, Delta},
};

use crate::{
    kfi::{kfabric::Owned, kfi_sys as sys},
    net::*,
    run::{cpu_now, span_ns, Back, Bufs, Cpus, Grave, Sample, Shape, Time},
    spawn::{join_both, spawn},
};

#[path = "kfi_pingpong.rs"]
mod pingpong;
pub(crate) use pingpong::{pingpong, pingpong_one_thread};

/// Entries of each CQ: more than a window's worth of completions.
const CQ_SIZE: usize = 64;

/// A connected pair of one provider. Fields drop in order: endpoints,
/// the listener, the CQs, then the domain and fabric.
pub(crate) struct Pair {
    cep: Owned<sys::kfid_ep>,
    sep: Owned<sys::kfid_ep>,
    _pep: Owned<sys::kfid_pep>,
    ccq: Owned<sys::kfid_cq>,
    scq: Owned<sys::kfid_cq>,
    n: Net,
    /// The largest message sent with `KFI_INJECT` (as a latency test
    /// sends small messages).
    inject: usize,
    /// The provider's largest message or RMA transfer.
    pub(crate) max_msg: usize,
    /// RMA addresses are the target's virtual addresses
    /// (`KFI_MR_VIRT_ADDR`), not offsets into its region.
    virt_addr: bool,
    /// The domain's name (`siw0`, `rxe0`; "-" if it has none), naming the
    /// fabric in the samples.
    pub(crate) domain: CString,
}

// SAFETY: kfabric objects may be used from any thread (kfabric.ko and the
// provider lock what they share); the two sides of a run use disjoint
// endpoints and CQs, and the domain only to register memory.
unsafe impl Send for Pair {}
// SAFETY: See `Send`.
unsafe impl Sync for Pair {}

/// Connects a pair of provider `prov` through `node`:`port` (numeric).
pub(crate) fn pair(prov: &CStr, node: &CStr, port: &CStr) -> Result<Arc<Pair>> {
    let n = net_on(prov, node, port)?;
    let pep = listen(&n)?;
    let ccq = cq_sized(&n, CQ_SIZE)?;
    let scq = cq_sized(&n, CQ_SIZE)?;
    let (cep, sep) = connected_pair(&n, &ccq, &scq)?;
    // SAFETY: A valid entry of the list `n` owns.
    let e = unsafe { &*n.dst.first() };
    // SAFETY: NULL or the entry's own attributes.
    let (tx, ep, dom) = unsafe {
        (
            e.tx_attr.as_ref(),
            e.ep_attr.as_ref(),
            e.domain_attr.as_ref(),
        )
    };
    let inject = tx.map_or(0, |t| t.inject_size);
    let max_msg = ep.map_or(0, |a| a.max_msg_size);
    let name = dom.map_or(core::ptr::null_mut(), |d| d.name);
    let virt_addr = dom.is_some_and(|d| d.mr_mode & sys::KFI_MR_VIRT_ADDR != 0);
    let domain = if name.is_null() {
        CString::try_from(c"-")?
    } else {
        // SAFETY: A domain name is a NUL-terminated string the entry owns.
        CString::try_from(unsafe { CStr::from_char_ptr(name.cast()) })?
    };
    Ok(Arc::new(
        Pair {
            cep,
            sep,
            _pep: pep,
            ccq,
            scq,
            n,
            inject,
            max_msg,
            virt_addr,
            domain,
        },
        GFP_KERNEL,
    )?)
}

/// What kind of operation a completion reports.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Kind {
    Send,
    Recv,
    Write,
    Read,
    /// Tagged send (`kfi_tsendmsg`), tag = operation index.
    TSend,
    /// Tagged receive of one tag: the operation index.
    TRecv,
    /// RMA write that asks for inject completion only
    /// (`KFI_INJECT_COMPLETE`): it completes once sent, unanswered.
    WriteIc,
}

/// The bits of a completion's flags that name the operation.
const KIND_BITS: u64 = sys::KFI_MSG
    | sys::KFI_RMA
    | sys::KFI_TAGGED
    | sys::KFI_ATOMIC
    | sys::KFI_READ
    | sys::KFI_WRITE
    | sys::KFI_RECV
    | sys::KFI_SEND
    | sys::KFI_REMOTE_READ
    | sys::KFI_REMOTE_WRITE;

/// A context holds the kind above this bit and the operation's index plus
/// one below it.
const TAG_SHIFT: u32 = 48;

impl Kind {
    fn tag(self) -> usize {
        self as usize + 1
    }

    fn flags(self) -> u64 {
        match self {
            Kind::Send => sys::KFI_SEND | sys::KFI_MSG,
            Kind::Recv => sys::KFI_RECV | sys::KFI_MSG,
            Kind::Write | Kind::WriteIc => sys::KFI_RMA | sys::KFI_WRITE,
            Kind::Read => sys::KFI_RMA | sys::KFI_READ,
            Kind::TSend => sys::KFI_SEND | sys::KFI_TAGGED,
            Kind::TRecv => sys::KFI_RECV | sys::KFI_TAGGED,
        }
    }

    /// The receive kind of a message kind.
    fn peer(self) -> Self {
        if self == Kind::TSend {
            Kind::TRecv
        } else {
            Kind::Recv
        }
    }

    /// The context of operation `i` (below 2^48: runs are far shorter).
    pub(crate) fn context(self, i: usize) -> usize {
        (self.tag() << TAG_SHIFT) | (i + 1)
    }
}

/// The index of the operation of `kind` that completion `e` reports:
/// its context must be one that `kind.context` makes and its flags
/// `kind`'s.
pub(crate) fn index_of(kind: Kind, e: &sys::kfi_cq_data_entry) -> Option<usize> {
    let ctx = e.op_context as usize;
    if ctx >> TAG_SHIFT != kind.tag() || e.flags & KIND_BITS != kind.flags() {
        return None;
    }
    (ctx & ((1 << TAG_SHIFT) - 1)).checked_sub(1)
}

/// The operations of one kind a side posted, and which have completed.
pub(crate) struct Track {
    kind: Kind,
    size: usize,
    pub(crate) posted: usize,
    pub(crate) done: usize,
    seen: KVec<bool>,
    /// Posted with `KFI_INJECT`: no completion is due.
    silent: bool,
}

impl Track {
    pub(crate) fn new(kind: Kind, sh: Shape, silent: bool) -> Result<Self> {
        Ok(Self {
            kind,
            size: sh.size,
            posted: 0,
            done: 0,
            seen: KVec::from_elem(false, sh.iters, GFP_KERNEL)?,
            silent,
        })
    }

    /// Counts an operation just posted.
    pub(crate) fn posted(&mut self) {
        self.posted += 1;
        if self.silent {
            self.done += 1;
        }
    }

    /// Posted and not completed yet.
    pub(crate) fn in_flight(&self) -> usize {
        self.posted - self.done
    }

    /// Checks entry `e` against this track; true if it is one of ours.
    fn take(&mut self, e: &sys::kfi_cq_data_entry) -> bool {
        if self.silent {
            return false;
        }
        let Some(i) = index_of(self.kind, e) else {
            return false;
        };
        let fresh = i < self.posted && self.seen.get(i) == Some(&false);
        if !fresh || e.len != self.size {
            return false;
        }
        self.seen[i] = true;
        self.done += 1;
        true
    }
}

/// Waits for the next completion on `cq`; it must be one `tracks` expect.
pub(crate) fn reap(cq: &Owned<sys::kfid_cq>, tracks: &mut [&mut Track]) -> Result {
    let mut e = sys::kfi_cq_data_entry::default();
    let n = sread(cq, &mut e);
    if n != 1 {
        return Err(cq_error(cq, n));
    }
    if tracks.iter_mut().any(|t| t.take(&e)) {
        return Ok(());
    }
    pr_err!(
        "bench: unexpected completion: context {:#x}, len {}, flags {:#x}\n",
        e.op_context as usize,
        e.len,
        e.flags
    );
    Err(EPROTO)
}

/// The error of a failed CQ read `n`, the error entry printed if there is
/// one.
pub(crate) fn cq_error(cq: &Owned<sys::kfid_cq>, n: isize) -> Error {
    if n != -(sys::KFI_EAVAIL as isize) {
        return if n < 0 {
            Error::from_errno(n as i32)
        } else {
            ETIMEDOUT
        };
    }
    let mut err = sys::kfi_cq_err_entry::default();
    if cq.readerr(&mut err) != 1 {
        return EIO;
    }
    pr_err!(
        "bench: failed completion: context {:#x}, flags {:#x}, error {}\n",
        err.op_context as usize,
        err.flags,
        err.err
    );
    Error::from_errno(-err.err.clamp(1, 4095))
}

/// Posts a receive of `buf` with context `ctx`.
///
/// # Safety
///
/// `buf` stays valid and is not otherwise used until the receive completes
/// or the endpoint is closed.
unsafe fn post_recv(ep: &Owned<sys::kfid_ep>, buf: &mut [u8], ctx: usize) -> Result {
    let v = kvec_mut(buf);
    // SAFETY: The message is read during the call, the buffer kept by the
    // caller.
    unsafe { ep.recvmsg(&msg(&v, ctx, 0), 0) }
}

/// Posts a tagged receive into `v` matching only `tag`, or sends `v` with
/// `tag` (`send`), with context `ctx`.
///
/// # Safety
///
/// As for [`post_recv`] and [`post_send`], for the buffer `v` describes
/// (made by `kvec` for a send, by `kvec_mut` for a receive).
unsafe fn post_tagged(
    ep: &Owned<sys::kfid_ep>,
    send: bool,
    v: bindings::kvec,
    tag: u64,
    ctx: usize,
) -> Result {
    let t = sys::kfi_msg_tagged {
        msg: msg(&v, ctx, 0),
        tag,
        ignore: 0,
    };
    // SAFETY: The descriptor is read during the call, the buffer kept by
    // the caller (a send only reads it).
    unsafe {
        if send {
            ep.tsendmsg(&t, 0)
        } else {
            ep.trecvmsg(&t, 0)
        }
    }
}

/// Sends `buf` with context `ctx` and `flags`. An inject the provider
/// cannot take at once (`-EAGAIN`) is posted again after a pause, up to
/// [`INJECT_RETRIES`] times: it has no completion to wait for, and the
/// room it needs comes back without one (kfi_ibverbs frees a send slot
/// when the device completes it, in its own completion handler).
///
/// # Safety
///
/// `buf` stays valid and unchanged until the send completes or the
/// endpoint is closed (with `KFI_INJECT`: until the call returns).
unsafe fn post_send(ep: &Owned<sys::kfid_ep>, buf: &[u8], ctx: usize, flags: u64) -> Result {
    let v = kvec(buf);
    let mut retries = 0;
    loop {
        // SAFETY: As for `post_recv`.
        match unsafe { ep.sendmsg(&msg(&v, ctx, 0), flags) } {
            Err(e) if e == EAGAIN && flags & sys::KFI_INJECT != 0 && retries < INJECT_RETRIES => {
                retries += 1;
                fsleep(Delta::from_micros(INJECT_RETRY_US));
            }
            r => return r,
        }
    }
}

/// Most times an inject is posted again ([`post_send`]): 5 s of pauses.
const INJECT_RETRIES: u32 = 50_000;

/// The pause before an inject is posted again, in microseconds.
const INJECT_RETRY_US: i64 = 100;

/// Posts an RMA write of `local` (or a read into it) at `addr` of the
/// remote region `key`, with context `ctx` and the operation flags
/// `flags`.
///
/// # Safety
///
/// `local` stays valid and is not otherwise used until the operation
/// completes or the endpoint is closed.
unsafe fn post_rma(
    ep: &Owned<sys::kfid_ep>,
    kind: Kind,
    local: &mut [u8],
    addr: u64,
    key: u64,
    ctx: usize,
    flags: u64,
) -> Result {
    let l = kvec_mut(local);
    let r = sys::kfi_rma_iov {
        addr,
        len: local.len(),
        key,
    };
    let m = sys::kfi_msg_rma {
        msg: msg(&l, ctx, 0),
        rma_iov: &r,
        rma_iov_count: 1,
    };
    // SAFETY: The descriptors are read during the call, the buffer kept by
    // the caller.
    unsafe {
        if kind == Kind::Read {
            ep.readmsg(&m, flags)
        } else {
            ep.writemsg(&m, flags)
        }
    }
}

/// The two tracks of a side: (kind, silent) each.
fn tracks(sh: Shape, a: (Kind, bool), b: (Kind, bool)) -> Result<(Track, Track)> {
    Ok((Track::new(a.0, sh, a.1)?, Track::new(b.0, sh, b.1)?))
}

/// A side of a run: `body` with the side's buffers and tracks; `busy` if
/// it failed with operations in flight.
fn side<T>(
    bufs: Bufs,
    tracks: Result<(Track, Track)>,
    body: impl FnOnce(&mut Bufs, &mut Track, &mut Track) -> Result<T>,
) -> Back<T> {
    let mut bufs = bufs;
    let first = cpu_now();
    let (mut a, mut b) = match tracks {
        Ok(t) => t,
        Err(e) => {
            return Back {
                bufs,
                res: Err(e),
                busy: false,
                cpus: Cpus { first, last: first },
            }
        }
    };
    let res = body(&mut bufs, &mut a, &mut b);
    let busy = res.is_err() && a.in_flight() + b.in_flight() > 0;
    let cpus = Cpus {
        first,
        last: cpu_now(),
    };
    Back {
        bufs,
        res,
        busy,
        cpus,
    }
}

/// Flags of a send of `size` bytes: inject when it fits.
fn send_flags(p: &Pair, size: usize) -> u64 {
    if size <= p.inject {
        sys::KFI_INJECT
    } else {
        0
    }
}

/// Bandwidth runs: send/recv, tagged send/recv (operation `i` with tag
/// `i`, received by a receive of that tag only), RMA write or RMA read of
/// every operation, `sh.win` in flight. The operation moves operation `i`
/// of the source to operation `i` of the destination.
pub(crate) fn stream(
    p: &Arc<Pair>,
    kind: Kind,
    sh: Shape,
    bufs: Bufs,
    g: &mut Grave,
) -> Result<(Bufs, Sample)> {
    if sh.win == 0 {
        return Err(EINVAL);
    }
    if kind != Kind::Send && kind != Kind::TSend {
        let pc = p.clone();
        let j = spawn(move || {
            let t = tracks(sh, (kind, false), (Kind::Send, true));
            side(bufs, t, |b, ops, _| rma(&pc, kind, sh, b, ops))
        })?;
        let (bufs, ns, c) = g.sort(j.join())?;
        let cpus = [Some(c), None];
        return Ok((
            bufs,
            Sample {
                ns,
                lat: None,
                cpus,
            },
        ));
    }
    let (src, dst) = bufs.split();
    let ps = p.clone();
    let receiver = spawn(move || {
        let t = tracks(sh, (kind.peer(), false), (kind, true));
        side(dst, t, |b, recv, _| receive(&ps, sh, &mut b.dst, recv))
    })?;
    let pc = p.clone();
    let sender = spawn(move || {
        let t = tracks(sh, (kind, false), (kind.peer(), true));
        side(src, t, |b, send, _| transmit(&pc, sh, &mut b.src, send))
    });
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

/// The sender of a send/recv run (tagged if `send` tracks tagged
/// sends): its start and end.
fn transmit(p: &Pair, sh: Shape, src: &mut [u8], send: &mut Track) -> Result<(Time, Time)> {
    let t0 = Time::now();
    while send.done < sh.iters {
        while send.posted < sh.iters && send.in_flight() < sh.win {
            let i = send.posted;
            let ctx = send.kind.context(i);
            // SAFETY: The slot's last send has completed (fewer than the
            // slots are in flight), and it is borrowed here.
            unsafe { crate::pattern::before_send(sh, i, sh.op_mut(src, i)?.as_mut_ptr()) }?;
            // SAFETY: The source is never written during a run (a send
            // only reads it); the side keeps its buffers while operations
            // are in flight.
            unsafe {
                if send.kind == Kind::TSend {
                    post_tagged(&p.cep, true, kvec(sh.op(src, i)?), i as u64, ctx)
                } else {
                    post_send(&p.cep, sh.op(src, i)?, ctx, 0)
                }
            }?;
            send.posted();
        }
        reap(&p.ccq, &mut [send])?;
    }
    Ok((t0, Time::now()))
}

/// The receiver of a send/recv run: `sh.win` receives posted; its end.
fn receive(p: &Pair, sh: Shape, dst: &mut [u8], recv: &mut Track) -> Result<Time> {
    while recv.done < sh.iters {
        while recv.posted < sh.iters && recv.in_flight() < sh.win {
            let i = recv.posted;
            let (buf, ctx) = (sh.op_mut(dst, i)?, recv.kind.context(i));
            // SAFETY: The slot's last receive has completed (fewer than
            // the slots are in flight, completed in order), and it is
            // borrowed here.
            unsafe { crate::pattern::before_recv(sh, i, buf.as_ptr(), true) }?;
            // SAFETY: Operation `i` of the destination is used by nothing
            // else until it completes; kept as in `transmit`.
            unsafe {
                if recv.kind == Kind::TRecv {
                    post_tagged(&p.sep, false, kvec_mut(buf), i as u64, ctx)
                } else {
                    post_recv(&p.sep, buf, ctx)
                }
            }?;
            recv.posted();
        }
        reap(&p.scq, &mut [recv])?;
    }
    Ok(Time::now())
}

/// The target's buffer of an RMA run, registered as regions of `per`
/// slots each (a region holds at most the provider's `max_msg` bytes).
/// Dropped (its regions closed) before the buffer.
struct Target {
    base: *mut u8,
    len: usize,
    per: usize,
    mrs: KVec<Owned<sys::kfid_mr>>,
    /// The base of RMA addresses: the region's first byte
    /// (`KFI_MR_VIRT_ADDR`), or 0.
    virt_addr: bool,
}

impl Target {
    /// Registers `buf` for `access`, slots of `sh` as `p` allows.
    fn register(p: &Pair, buf: &mut [u8], sh: Shape, access: u64) -> Result<Self> {
        let slots = sh.slots();
        // Without a ring, one region (as large as the run).
        let per = if sh.ring {
            (p.max_msg / sh.size.max(1)).clamp(1, slots)
        } else {
            slots
        };
        let mut t = Self {
            base: buf.as_mut_ptr(),
            len: buf.len(),
            per,
            mrs: KVec::new(),
            virt_addr: p.virt_addr,
        };
        for first in (0..slots).step_by(per) {
            let r = sh.span(first)?.start..sh.span((first + per).min(slots) - 1)?.end;
            if r.end > t.len {
                return Err(EINVAL);
            }
            // SAFETY: `r` lies in `buf`, which the caller keeps until this
            // value, which closes the region, is dropped.
            let mr = unsafe {
                p.n.domain
                    .register_raw(t.base.add(r.start), r.len(), access, 0, 0, 0)
            }?;
            t.mrs.push(mr, GFP_KERNEL)?;
        }
        Ok(t)
    }

    /// The first byte of operation `i`'s slot.
    fn slot(&self, sh: Shape, i: usize) -> Result<*mut u8> {
        let r = sh.span(i)?;
        if r.end > self.len {
            return Err(EINVAL);
        }
        // SAFETY: In the buffer (checked).
        Ok(unsafe { self.base.add(r.start) })
    }

    /// The RMA address and key of operation `i`.
    fn target(&self, sh: Shape, i: usize) -> Result<(u64, u64)> {
        let s = sh.slot(i);
        let mr = self.mrs.get(s / self.per).ok_or(EINVAL)?;
        let first = (s / self.per).checked_mul(self.per).ok_or(EINVAL)?;
        let start = sh.span(first)?.start;
        let off = (sh.span(i)?.start - start) as u64;
        let base = if self.virt_addr {
            self.slot(sh, first)? as u64
        } else {
            0
        };
        Ok((base.checked_add(off).ok_or(EINVAL)?, mr.key()))
    }
}

/// An RMA run from the client: writes into the destination, registered
/// for remote writes, or reads from the source, registered for remote
/// reads. Nanoseconds from the first post to the last completion.
/// The flags of operation `i` of an RMA run: a [`Kind::WriteIc`] asks for
/// inject completion, but for the run's last write, which completes only
/// once the target has answered it, so after every write before it has
/// landed (the target handles a connection's frames in order): the run
/// ends when all of its data is in place, not when it was sent.
fn rma_flags(kind: Kind, sh: Shape, i: usize) -> u64 {
    if kind == Kind::WriteIc && i + 1 < sh.iters {
        sys::KFI_INJECT_COMPLETE
    } else {
        0
    }
}

fn rma(p: &Pair, kind: Kind, sh: Shape, b: &mut Bufs, ops: &mut Track) -> Result<i64> {
    let read = kind == Kind::Read;
    let (remote, local, access) = if read {
        (&mut b.src, &mut b.dst, sys::KFI_REMOTE_READ)
    } else {
        (&mut b.dst, &mut b.src, sys::KFI_REMOTE_WRITE)
    };
    let total = sh.total()?;
    let target = Target::register(p, remote.get_mut(..total).ok_or(EINVAL)?, sh, access)?;
    let t0 = Time::now();
    while ops.done < sh.iters {
        while ops.posted < sh.iters && ops.in_flight() < sh.win {
            let i = ops.posted;
            let (at, key) = target.target(sh, i)?;
            let (l, r) = (sh.op_mut(local, i)?.as_mut_ptr(), target.slot(sh, i)?);
            // SAFETY: Both are operation `i`'s slot, whose last operation
            // has completed (fewer than the slots are in flight); the
            // target's buffer is only used through `target` meanwhile.
            unsafe {
                if read {
                    crate::pattern::before_send(sh, i, r)?;
                    crate::pattern::before_recv(sh, i, l, true)?;
                } else {
                    crate::pattern::before_send(sh, i, l)?;
                    crate::pattern::before_recv(sh, i, r, false)?;
                }
            }
            let (ctx, flags) = (kind.context(i), rma_flags(kind, sh, i));
            // SAFETY: Operation `i` of the local buffer is used by nothing
            // else until it completes (a write only reads it); the side
            // keeps its buffers while operations are in flight.
            unsafe { post_rma(&p.cep, kind, sh.op_mut(local, i)?, at, key, ctx, flags) }?;
            ops.posted();
        }
        reap(&p.ccq, &mut [ops])?;
    }
    let ns = span_ns(t0, &[Time::now()]);
    drop(target);
    Ok(ns)
}

/// Shows that [`Track::take`] refuses what it must: a second completion of
/// one operation, one never posted, a wrong length, wrong flags, another
/// kind's context.
pub(crate) fn self_check() -> Result {
    let sh = Shape::new(64, 4, 1);
    let mut t = Track::new(Kind::Send, sh, false)?;
    t.posted();
    t.posted();
    let entry = |ctx: usize, len: usize, flags: u64| sys::kfi_cq_data_entry {
        op_context: ctx as *mut c_void,
        len,
        flags,
        ..Default::default()
    };
    let ok = Kind::Send.flags();
    let expect = [
        (entry(Kind::Send.context(1), 64, ok), true),
        (entry(Kind::Send.context(1), 64, ok), false),
        (entry(Kind::Send.context(2), 64, ok), false),
        (entry(Kind::Send.context(0), 63, ok), false),
        (entry(Kind::Send.context(0), 64, Kind::Recv.flags()), false),
        (entry(Kind::Recv.context(0), 64, ok), false),
        (entry(0, 64, ok), false),
        (
            entry(Kind::Send.context(0), 64, ok | sys::KFI_REMOTE_CQ_DATA),
            true,
        ),
    ];
    for (i, (e, want)) in expect.iter().enumerate() {
        if t.take(e) != *want {
            pr_err!("bench: completion check {} is wrong\n", i);
            return Err(EINVAL);
        }
    }
    if t.done != 2 || t.in_flight() != 0 {
        return Err(EINVAL);
    }
    Ok(())
}
