// SPDX-License-Identifier: GPL-2.0

//! The hostile suites' peers and checks: raw kernel-socket peers of a
//! kfabric endpoint (listeners, clients, RDM requests, a hang-up timer),
//! the kfabric side's regions, RDM side and completion checks, and
//! `ensure!`, which fails a case with a message instead of asserting (so
//! that a failing case still closes its objects).

use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use kernel::{
    prelude::*,
    sync::Arc,
    time::{delay::fsleep, Delta, Instant, Monotonic},
    workqueue::{self, impl_has_work, new_work, Work, WorkItem},
};

use super::{
    frame,
    kfi::{kfabric::Owned, kfi_sys as sys, toolkit::task},
    ksock::{SockAddr, Socket},
    net::*,
    wire::{flags, Hdr, Op},
};

/// Fails the case with a message unless `$c` holds.
macro_rules! ensure {
    ($c:expr, $($msg:tt)+) => {
        if !$c {
            pr_err!("kfi_sockets_hostile: {}\n", format_args!($($msg)+));
            return Err(EBADE);
        }
    };
}
pub(crate) use ensure;

/// A work item that shuts raw peers' sockets down after a while unless
/// stopped first, so that a case run against a provider that never lets
/// go ends instead of hanging (a work item of this module: the kernel
/// crate's `try_spawn` shares one lockdep key among modules, which lockdep
/// refuses).
#[pin_data]
pub(crate) struct Hangup {
    socks: KVec<Arc<Socket>>,
    /// Ticks of 10 ms to wait.
    ticks: u32,
    /// The case is done with the peers: do not hang them up.
    stop: AtomicBool,
    /// It has ended.
    done: AtomicBool,
    #[pin]
    work: Work<Hangup>,
}

impl_has_work! {
    impl HasWork<Self> for Hangup { self.work }
}

impl WorkItem for Hangup {
    type Pointer = Arc<Hangup>;

    fn run(this: Arc<Hangup>) {
        let mut stopped = false;
        for _ in 0..this.ticks {
            stopped = this.stop.load(Ordering::Acquire);
            if stopped {
                break;
            }
            fsleep(Delta::from_millis(10));
        }
        if !stopped {
            for s in this.socks.iter() {
                s.shutdown();
            }
        }
        this.done.store(true, Ordering::Release);
    }
}

impl Hangup {
    /// Hangs up `socks` in `after_ms` unless [`Self::stop`] comes first
    /// (on the long-running system queue: it sleeps meanwhile).
    pub(crate) fn start(socks: KVec<Arc<Socket>>, after_ms: u32) -> Result<Arc<Self>> {
        let h = Arc::pin_init(
            pin_init!(Hangup {
                socks,
                ticks: after_ms / 10,
                stop: AtomicBool::new(false),
                done: AtomicBool::new(false),
                work <- new_work!("kfi_sockets_hostile::Hangup"),
            }),
            GFP_KERNEL,
        )?;
        if workqueue::system_long().enqueue(h.clone()).is_err() {
            return Err(EBUSY);
        }
        Ok(h)
    }

    /// Calls the hang-up off (if it has not happened yet) and waits until
    /// the work item has ended.
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        while !self.done.load(Ordering::Acquire) {
            fsleep(Delta::from_millis(10));
        }
    }
}

/// Waits up to `ms` for a completion: 1, or a negative errno
/// (`-KFI_EAVAIL` for an error entry).
pub(crate) fn sread_ms(cq: &Owned<sys::kfid_cq>, e: &mut sys::kfi_cq_data_entry, ms: i32) -> isize {
    cq.sread_data(e, ms)
}

/// Waits up to `ms` for an error completion and returns it.
pub(crate) fn cq_error(cq: &Owned<sys::kfid_cq>, ms: i32) -> Result<sys::kfi_cq_err_entry> {
    let mut e = sys::kfi_cq_data_entry::default();
    let r = sread_ms(cq, &mut e, ms);
    ensure!(
        r == -(sys::KFI_EAVAIL as isize),
        "expected an error completion, got {} (context {})",
        r,
        e.op_context as usize
    );
    let mut err = sys::kfi_cq_err_entry::default();
    let n = cq.readerr(&mut err);
    ensure!(n == 1, "kfi_cq_readerr: {}", n);
    Ok(err)
}

/// A raw listener on 127.0.0.1:`port`.
pub(crate) fn raw_listener(port: u16) -> Result<Socket> {
    let a = SockAddr::v4([127, 0, 0, 1], port);
    let l = Socket::tcp(&a)?;
    l.bind(&a)?;
    l.listen(8)?;
    Ok(l)
}

/// A kfabric client endpoint of `n` connected to the raw server `l`,
/// which accepts it: (endpoint, the raw server's socket).
pub(crate) fn kfi_client(
    n: &Net,
    c: &Owned<sys::kfid_cq>,
    l: &Socket,
) -> Result<(Owned<sys::kfid_ep>, Socket)> {
    let ep = endpoint(n, n.dst.first(), c)?;
    let ret = rc(ep.connect(&[]));
    kernel::error::to_result(ret)?;
    let s = l.accept(false)?;
    frame::read_connreq(&s)?;
    frame::accept(&s, &[])?;
    let (ev, _, _) = event(n)?;
    ensure!(ev == sys::KFI_CONNECTED, "client event {}", ev);
    Ok((ep, s))
}

/// A raw client of the kfabric listener of `n` on 127.0.0.1:`port`; the
/// test accepts it: (the raw socket, the server endpoint).
pub(crate) fn raw_client(
    n: &Net,
    port: u16,
    c: &Owned<sys::kfid_cq>,
) -> Result<(Socket, Owned<sys::kfid_ep>)> {
    let a = SockAddr::v4([127, 0, 0, 1], port);
    let raw = Socket::tcp(&a)?;
    frame::connect_start(&raw, &a, b"hostile")?;
    let (ev, buf, _) = event(n)?;
    ensure!(ev == sys::KFI_CONNREQ, "listener event {}", ev);
    let sep = endpoint_for(n, &take_req(&buf)?, c)?;
    let ret = rc(sep.accept(&[]));
    kernel::error::to_result(ret)?;
    let (ev, _, _) = event(n)?;
    ensure!(ev == sys::KFI_CONNECTED, "server event {}", ev);
    match frame::connect_finish(&raw)? {
        frame::Answer::Accepted(_) => Ok((raw, sep)),
        frame::Answer::Rejected(_) => Err(ECONNREFUSED),
    }
}

/// Registers `buf` on the domain of `n` at remote address 0 with
/// `access` (and `requested` as the key, if not 0).
pub(crate) fn region(
    n: &Net,
    buf: &mut [u8],
    access: u64,
    requested: u64,
) -> Result<Owned<sys::kfid_mr>> {
    // SAFETY: Callers close the region before `buf` goes.
    unsafe {
        n.domain
            .register_raw(buf.as_mut_ptr(), buf.len(), access, 0, requested, 0)
    }
}

pub(crate) fn key(mr: &Owned<sys::kfid_mr>) -> u64 {
    // SAFETY: An open region.
    unsafe { (*mr.as_ptr()).key }
}

/// Posts an RMA write of `buf` to `len` bytes at 0 of region `key`.
pub(crate) fn post_write(ep: &Owned<sys::kfid_ep>, buf: &[u8], key: u64, ctx: usize) -> c_int {
    post_rma(ep, &[kvec(buf)], 0, 0, key, ctx, false, 0)
}

/// Posts an RMA write of `buf` from an RDM endpoint to the peer `dest`
/// (its AV handle), at 0 of its region `key`, with the operation flags
/// `flags`.
pub(crate) fn post_write_to(
    ep: &Owned<sys::kfid_ep>,
    buf: &[u8],
    dest: u64,
    key: u64,
    ctx: usize,
    flags: u64,
) -> c_int {
    post_rma(ep, &[kvec(buf)], dest, 0, key, ctx, false, flags)
}

/// Posts an RMA write of `buf` to as many bytes at `addr` of region
/// `key`, with the operation flags `flags`.
pub(crate) fn post_write_at(
    ep: &Owned<sys::kfid_ep>,
    buf: &[u8],
    addr: u64,
    key: u64,
    ctx: usize,
    flags: u64,
) -> c_int {
    post_rma(ep, &[kvec(buf)], 0, addr, key, ctx, false, flags)
}

/// Posts one RMA write of the buffers `bufs`, gathered, to as many bytes
/// at 0 of region `key`.
pub(crate) fn post_write_iov(
    ep: &Owned<sys::kfid_ep>,
    bufs: &[&[u8]],
    key: u64,
    ctx: usize,
) -> c_int {
    let mut v = KVec::new();
    for b in bufs {
        if v.push(kvec(b), GFP_KERNEL).is_err() {
            return -ENOMEM.to_errno();
        }
    }
    post_rma(ep, &v, 0, 0, key, ctx, false, 0)
}

/// Posts a write of `bufs` (context `ctx`) on `ep` and, as its raw target
/// `raw`, answers it right after its header and descriptors, before TCP
/// has its payload. Expects what that answer must cause: the write fails
/// (`ECANCELED` at the teardown, or `EPROTO`), never completes, and the
/// connection ends with an `EPROTO` EQ error.
pub(crate) fn write_answered_early(
    n: &Net,
    c: &Owned<sys::kfid_cq>,
    ep: &Owned<sys::kfid_ep>,
    raw: &Socket,
    bufs: &[&[u8]],
    ctx: usize,
) -> Result {
    ensure!(post_write_iov(ep, bufs, 0x99, ctx) == 0, "write not posted");
    let h = frame::recv_hdr(raw)?;
    let len: usize = bufs.iter().map(|b| b.len()).sum();
    ensure!(h.op == Op::Write && h.len == len as u64, "not the write");
    frame::recv_rma(raw, &h)?;
    frame::send_frame(raw, &Hdr::new(Op::Ack, h.id, 0), &[], &[])?;
    let err = cq_error(c, WAIT_MS)?;
    ensure!(
        err.op_context as usize == ctx
            && [-ECANCELED.to_errno(), -EPROTO.to_errno()].contains(&err.err),
        "write {} ended with {}",
        err.op_context as usize,
        err.err
    );
    eq_eproto(n, ep)
}

/// Expects the EQ of `n` to hold an `EPROTO` error entry of `ep`: the peer
/// broke the protocol.
pub(crate) fn eq_eproto(n: &Net, ep: &Owned<sys::kfid_ep>) -> Result {
    let e = eq_error(n)?;
    ensure!(
        e.fid == ep.fid() && e.err == -EPROTO.to_errno(),
        "EQ error {}",
        e.err
    );
    Ok(())
}

/// Posts an RMA read of `buf.len()` bytes at 0 of region `key` into
/// `buf`.
pub(crate) fn post_read(ep: &Owned<sys::kfid_ep>, buf: &mut [u8], key: u64, ctx: usize) -> c_int {
    post_rma(ep, &[kvec_mut(buf)], 0, 0, key, ctx, true, 0)
}

/// Posts an RMA write (or, `read`, a read) of the buffers `v`, gathered
/// (scattered), to as many bytes at `addr` of region `key` of the peer
/// `dest` (an RDM endpoint's; a MSG endpoint ignores it), with the
/// operation flags `flags`.
#[allow(clippy::too_many_arguments)]
fn post_rma(
    ep: &Owned<sys::kfid_ep>,
    v: &[kernel::bindings::kvec],
    dest: u64,
    addr: u64,
    key: u64,
    ctx: usize,
    read: bool,
    flags: u64,
) -> c_int {
    let remote = sys::kfi_rma_iov {
        addr,
        len: v.iter().map(|v| v.iov_len).sum(),
        key,
    };
    let mut m = sys::kfi_msg_rma {
        rma_iov: &remote,
        rma_iov_count: 1,
        ..Default::default()
    };
    m.msg.iov_type = sys::KFI_KVEC;
    m.msg.__bindgen_anon_1.msg_iov = v.as_ptr();
    m.msg.iov_count = v.len();
    m.msg.context = ctx as *mut c_void;
    m.msg.addr = dest;
    // SAFETY: An open endpoint; callers keep the buffers until the
    // completion (the provider copies the list of them at post).
    unsafe {
        rc(if read {
            ep.readmsg(&m, flags)
        } else {
            ep.writemsg(&m, flags)
        })
    }
}

/// Reads and drops `len` bytes from `s`.
pub(crate) fn drain(s: &Socket, mut len: usize) -> Result {
    let mut sink = KVec::with_capacity(64 << 10, GFP_KERNEL)?;
    sink.resize(64 << 10, 0u8, GFP_KERNEL)?;
    while len > 0 {
        let k = len.min(sink.len());
        frame::recv_exact(s, &mut sink[..k])?;
        len -= k;
    }
    Ok(())
}

/// An RDM endpoint of kfi_sockets on 127.0.0.1:`port` with its CQ and
/// AV (4 entries). The fields drop in order: the endpoint first.
pub(crate) struct RdmSide {
    pub(crate) ep: Owned<sys::kfid_ep>,
    pub(crate) c: Owned<sys::kfid_cq>,
    pub(crate) av: Owned<sys::kfid_av>,
    pub(crate) _n: Net,
}

pub(crate) fn rdm_side(port: &core::ffi::CStr) -> Result<RdmSide> {
    let (n, av) = rdm_net(port, 4)?;
    let c = cq(&n)?;
    let ep = rdm_endpoint(&n, &c, &av)?;
    Ok(RdmSide { ep, c, av, _n: n })
}

/// The kfi_sockets objects for RDM endpoints on 127.0.0.1:`port`, and an
/// AV of `count` entries.
pub(crate) fn rdm_net(port: &core::ffi::CStr, count: usize) -> Result<(Net, Owned<sys::kfid_av>)> {
    rdm_net_at(c"127.0.0.1", port, count)
}

/// As [`rdm_net`], on `host`.
pub(crate) fn rdm_net_at(
    host: &core::ffi::CStr,
    port: &core::ffi::CStr,
    count: usize,
) -> Result<(Net, Owned<sys::kfid_av>)> {
    let n = net_typed(
        c"sockets",
        host,
        port,
        core::ptr::null_mut(),
        sys::KFI_EP_RDM,
    )?;
    let av = n.domain.open_av_table(count)?;
    Ok((n, av))
}

/// The first connection to listener `l` within `ms` milliseconds (a
/// non-blocking accept every 10 ms).
pub(crate) fn accept_within(l: &Socket, ms: u64) -> Option<Socket> {
    for _ in 0..ms / 10 {
        if let Ok(a) = l.accept(true) {
            return Some(a);
        }
        fsleep(Delta::from_millis(10));
    }
    l.accept(true).ok()
}

/// Waits up to `ms` for bytes (or the end of the stream) on `s`, so
/// that a read of an answer cannot hang a case on a provider that never
/// answers.
pub(crate) fn wait_readable(s: &Socket, ms: u64) -> bool {
    for _ in 0..ms / 10 {
        if s.readable() {
            return true;
        }
        fsleep(Delta::from_millis(10));
    }
    s.readable()
}

/// kfi_sockets' default `rdm_max_peers`, `rdm_max_peers_per_host`,
/// `listen_backlog_max` and `handshake_max_per_host`.
pub(crate) const RDM_MAX_PEERS: usize = 128;
pub(crate) const RDM_MAX_PEERS_PER_HOST: usize = RDM_MAX_PEERS / 2;
pub(crate) const LISTEN_BACKLOG_MAX: usize = 64;
pub(crate) const HANDSHAKE_MAX_PER_HOST: usize = 8;

/// A raw peer from `from` that has asked the RDM endpoint on
/// 127.0.0.1:`port` for a connection, claiming to be `claim`; not
/// answered yet.
pub(crate) fn rdm_request(from: [u8; 4], port: u16, claim: &SockAddr) -> Result<Socket> {
    let local = SockAddr::v4(from, 0);
    let s = Socket::tcp(&local)?;
    s.bind(&local)?;
    frame::connect_start(&s, &SockAddr::v4([127, 0, 0, 1], port), claim.as_bytes())?;
    Ok(s)
}

/// Whether the RDM endpoint accepted the request of `s`.
pub(crate) fn rdm_accepted(s: &Socket) -> bool {
    matches!(frame::connect_finish(s), Ok(frame::Answer::Accepted(_)))
}

/// A raw peer from `from` that asks the RDM endpoint on 127.0.0.1:`port`
/// for a connection, claiming to be `claim`: whether it was accepted.
pub(crate) fn rdm_claim(from: [u8; 4], port: u16, claim: &SockAddr) -> Result<(bool, Socket)> {
    let s = rdm_request(from, port, claim)?;
    Ok((rdm_accepted(&s), s))
}

/// An RDM endpoint on 127.0.0.1:`port` (`cport`, the same as a
/// string) and two raw peers it accepted, on hosts 127.0.0.1 and .2 (the
/// peers of one host share one share of held messages), claiming the
/// next two ports.
pub(crate) fn two_rdm_peers(
    cport: &core::ffi::CStr,
    port: u16,
) -> Result<(RdmSide, Socket, Socket)> {
    let r = rdm_side(cport)?;
    let (one, two) = ([127, 0, 0, 1], [127, 0, 0, 2]);
    let (ok_a, a) = rdm_claim(one, port, &SockAddr::v4(one, port + 1))?;
    let (ok_b, b) = rdm_claim(two, port, &SockAddr::v4(two, port + 2))?;
    ensure!(ok_a && ok_b, "peers refused: {} {}", ok_a, ok_b);
    Ok((r, a, b))
}

/// Peer `b` sends a small message that nobody receives (tagged `tag`
/// if given), with delivery completion: it must be held, and so
/// answered, within 3 s; `why` says what it means if not.
pub(crate) fn small_message_is_held(b: &Socket, tag: Option<u64>, why: &str) -> Result {
    let mut h = Hdr::new(if tag.is_some() { Op::Tagged } else { Op::Msg }, 77, 0);
    h.tag = tag.unwrap_or(0);
    h.flags = flags::DELIVERY_COMPLETE;
    frame::send_frame(b, &h, &[], &[&[7u8; 8]])?;
    ensure!(wait_readable(b, 3000), "{}: no answer in 3 s", why);
    let ack = frame::recv_hdr(b)?;
    ensure!(
        ack.op == Op::Ack && ack.id == 77 && ack.data == 0,
        "answer {:?} for {} with status {}",
        ack.op,
        ack.id,
        ack.data
    );
    Ok(())
}

/// What the side user of [`side_open_close`] measured: ms plus one (0: not
/// done yet).
static SIDE_MS: AtomicUsize = AtomicUsize::new(0);

/// Another user of kfabric, on the side: after `delay_ms`, a task opens and
/// closes a CQ on `domain` and notes how long that took (read it with
/// [`side_open_close_ms`], which waits for it; the domain stays open until
/// then).
pub(crate) fn side_open_close(domain: &Owned<sys::kfid_domain>, delay_ms: u64) -> Result {
    SIDE_MS.store(0, Ordering::SeqCst);
    let dom = domain.as_ptr() as usize;
    task::spawn(workqueue::system_unbound(), move || {
        fsleep(Delta::from_millis(delay_ms as i64));
        let t = Instant::<Monotonic>::now();
        let mut a = sys::kfi_cq_attr {
            size: 4,
            format: sys::KFI_CQ_FORMAT_DATA,
            ..Default::default()
        };
        let mut cq: *mut sys::kfid_cq = core::ptr::null_mut();
        // SAFETY: The domain stays open until `side_open_close_ms` saw this
        // task done; valid attributes; the CQ is closed right away.
        let r = unsafe {
            let r = sys::kfi_cq_open(dom as *mut _, &mut a, &mut cq, core::ptr::null_mut());
            if r == 0 {
                sys::kfi_close(&raw mut (*cq).fid);
            }
            r
        };
        let ms = if r == 0 {
            t.elapsed().as_millis() as usize
        } else {
            1 << 30
        };
        SIDE_MS.store(ms + 1, Ordering::SeqCst);
    })
}

/// What the side user measured, in ms (`1 << 30` if its open failed);
/// waits for it.
pub(crate) fn side_open_close_ms() -> usize {
    while SIDE_MS.load(Ordering::SeqCst) == 0 {
        fsleep(Delta::from_millis(1));
    }
    SIDE_MS.load(Ordering::SeqCst) - 1
}
