// SPDX-License-Identifier: GPL-2.0

//! kfi_twohost_bench.ko: `make bench HOSTS=2`, one side per kernel.
//!
//! The two guests of the two-host topology (scripts/twohost.sh) each load
//! it, one with `role=server`, the other with `role=client`. The client
//! drives every run and prints its samples in the format of kfi_bench.ko
//! (`bench: sample ...`, read by scripts/bench-report.py); the server
//! serves it. Rows: ping-pong of kfi_sockets send/recv against a
//! ping-pong of plain kernel TCP (blocking `kernel_sendmsg` and
//! `kernel_recvmsg`, TCP_NODELAY, one thread per side, as the one-host raw
//! two-thread baseline), and kfi send/recv and RMA write streams (8 in
//! flight) against a raw TCP stream, sizes 64 B up by powers of 4. Every
//! run is warmed up once, then repeated `reps` times, raw and kfi
//! interleaved.
//!
//! Every operation carries its own pattern (tests/bench/pattern.rs): the
//! client checks each echo of a ping-pong; the server checks what a stream
//! delivered into its memory and sends its verdict. A stream's time runs
//! from the client's first operation to the server's acknowledgement that
//! the last byte is in place.

use kernel::{bindings, prelude::*};

#[path = "../../kfi/api/mod.rs"]
mod kfi;
#[allow(dead_code)]
#[path = "../../prov/sockets/ksock.rs"]
mod ksock;
// ksock.rs's kernel call not in the kernel crate's bindings.
#[path = "../../prov/sockets/sock_sys.rs"]
mod sock_sys;
// Shared by source inclusion; each module uses a part.
#[allow(dead_code)]
mod link;
#[allow(dead_code)]
#[path = "../common/net.rs"]
mod net;
#[allow(dead_code)]
#[path = "../bench/pattern.rs"]
mod pattern;
#[allow(dead_code)]
#[path = "../bench/run.rs"]
mod run;

use kfi::kfi_sys as sys;
use ksock::{SockAddr, Socket};
use link::{
    complete, key, link, mr, next_completion, post_recv, post_rma, post_send, role, Link, Role,
};
use run::{span_ns, Lat, Time};

module! {
    type: KfiTwohostBench,
    name: "kfi_twohost_bench",
    authors: ["kfabric developers"],
    description: "kfabric benchmark across two hosts: one side per kernel",
    license: "GPL",
    params: {
        reps: u32 {
            default: 7,
            description: "Timed repetitions of every row (1..=50)",
        },
        max_size: u32 {
            default: 1 << 20,
            description: "Largest bandwidth size, bytes (64 B up by powers of 4)",
        },
        pp_max: u32 {
            default: 64 << 10,
            description: "Largest ping-pong size, bytes (64 B up by powers of 4)",
        },
        budget_mib: u32 {
            default: 16,
            description: "MiB one run moves (within the iteration bounds)",
        },
        max_iters: u32 {
            default: 2000,
            description: "Most operations in one run",
        },
    },
}

struct KfiTwohostBench;

impl kernel::Module for KfiTwohostBench {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let t0 = Time::now();
        let r = match role()? {
            Role::Server => serve(),
            Role::Client => drive(),
        };
        match r {
            Ok(0) => pr_info!(
                "bench: done in {} s\n",
                span_ns(t0, &[Time::now()]) / 1_000_000_000
            ),
            Ok(bad) => pr_err!("bench: failed: {} runs with wrong data\n", bad),
            Err(e) => pr_err!("bench: failed: {:?}\n", e),
        }
        Ok(Self)
    }
}

/// The rows, as the client names them in its header to the server.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Row {
    End = 0,
    RawPingpong = 1,
    KfiPingpong = 2,
    RawStream = 3,
    KfiSend = 4,
    KfiWrite = 5,
}

impl Row {
    fn decode(v: u64) -> Result<Self> {
        Ok(match v {
            0 => Row::End,
            1 => Row::RawPingpong,
            2 => Row::KfiPingpong,
            3 => Row::RawStream,
            4 => Row::KfiSend,
            5 => Row::KfiWrite,
            _ => return Err(EPROTO),
        })
    }

    fn name(self) -> &'static str {
        match self {
            Row::End => "end",
            Row::RawPingpong => "raw_pingpong",
            Row::KfiPingpong => "kfi_pingpong",
            Row::RawStream => "raw_stream",
            Row::KfiSend => "kfi_send",
            Row::KfiWrite => "kfi_write",
        }
    }

    fn win(self) -> usize {
        match self {
            Row::KfiSend | Row::KfiWrite => WINDOW,
            _ => 1,
        }
    }
}

/// Operations in flight in the kfi stream rows.
const WINDOW: usize = 8;
/// Smallest size, and fewest operations of a run.
const MIN_SIZE: usize = 64;
const MIN_ITERS: usize = 32;
/// Largest size: a run of `MIN_ITERS` of them fits a 1 GiB guest twice.
const LARGEST: usize = 4 << 20;
/// Remote address of the server's region in the RMA write rows.
const WBASE: u64 = 0x4000_0000;
/// Contexts of the control messages; data operations use their index.
const CTX_HDR: usize = 1 << 30;
const CTX_READY: usize = CTX_HDR + 1;
const CTX_ACK: usize = CTX_HDR + 2;
const CTX_VERDICT: usize = CTX_HDR + 3;
const CTX_DONE: usize = CTX_HDR + 4;
/// Context of the echo of ping-pong operation `i`: `ECHO + i`.
const ECHO: usize = 1 << 28;
/// Seconds a blocking raw send or receive may take.
const RAW_TIMEOUT_S: c_int = 20;
/// Ports (after `port_base`) of the kfi connection and the raw socket.
const KFI_CASE: i32 = 10;
const RAW_CASE: i32 = 11;

// Only pointers cross; `struct socket`'s opaque parts trip the lint.
#[allow(improper_ctypes)]
extern "C" {
    /// tests/bench/kfi_bench_sock.c: TCP_NODELAY and send/receive timeouts.
    fn kfi_bench_tune(sock: *mut bindings::socket, timeout_s: c_int);
}

/// A run: `iters` operations of `size` bytes of `row`, as 32 bytes.
#[derive(Clone, Copy)]
struct Header {
    row: Row,
    size: usize,
    iters: usize,
}

impl Header {
    fn bytes(&self) -> [u8; 24] {
        let mut b = [0u8; 24];
        b[..8].copy_from_slice(&(self.row as u64).to_le_bytes());
        b[8..16].copy_from_slice(&(self.size as u64).to_le_bytes());
        b[16..].copy_from_slice(&(self.iters as u64).to_le_bytes());
        b
    }

    /// A header from the client, bounded by this side's buffers.
    fn parse(b: &[u8; 24], cap: usize) -> Result<Self> {
        let w = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[i * 8..i * 8 + 8]);
            u64::from_le_bytes(a)
        };
        let h = Self {
            row: Row::decode(w(0))?,
            size: usize::try_from(w(1)).map_err(|_| EPROTO)?,
            iters: usize::try_from(w(2)).map_err(|_| EPROTO)?,
        };
        if h.row != Row::End && (h.size == 0 || h.total().is_none_or(|t| t > cap)) {
            return Err(EPROTO);
        }
        Ok(h)
    }

    fn total(&self) -> Option<usize> {
        self.size.checked_mul(self.iters)
    }

    /// Operation `i` of a run's buffer.
    fn op<'a>(&self, buf: &'a mut [u8], i: usize) -> Result<&'a mut [u8]> {
        let at = i.checked_mul(self.size).ok_or(EINVAL)?;
        buf.get_mut(at..at.checked_add(self.size).ok_or(EINVAL)?)
            .ok_or(EINVAL)
    }
}

/// Both connections of the bench. Fields drop in order: the kfi
/// connection closes before the buffers its operations may still use.
struct Conns {
    kfi: Link,
    raw: Socket,
    _listener: Option<Socket>,
}

/// Sends all of `buf` on the raw socket.
fn raw_send(s: &Socket, buf: &[u8]) -> Result {
    let mut sent = 0;
    while let Some(rest) = buf.get(sent..).filter(|r| !r.is_empty()) {
        match s.send(&[rest])? {
            0 => return Err(EPIPE),
            n => sent += n.min(rest.len()),
        }
    }
    Ok(())
}

/// Fills `buf` from the raw socket.
fn raw_recv(s: &Socket, buf: &mut [u8]) -> Result {
    let mut got = 0;
    while let Some(rest) = buf.get_mut(got..).filter(|r| !r.is_empty()) {
        match s.recv(rest, true)? {
            0 => return Err(ECONNRESET),
            n => got += n.min(rest.len()),
        }
    }
    Ok(())
}

/// The server's address and the raw port.
fn raw_addr() -> Result<SockAddr> {
    let port = link::port(RAW_CASE)?;
    SockAddr::parse(link::server_node().to_bytes(), port.to_bytes())
}

/// Sets TCP_NODELAY and the timeouts on `s`.
fn tune(s: &Socket) {
    // SAFETY: A live socket (`Socket` invariant).
    unsafe { kfi_bench_tune(s.as_raw(), RAW_TIMEOUT_S) };
}

/// The server's connections: the raw listener is up before the kfi
/// connection, so that the client, once connected there, finds it.
fn server_conns() -> Result<Conns> {
    let addr = raw_addr()?;
    let l = Socket::tcp(&addr)?;
    l.bind(&addr)?;
    l.listen(1)?;
    let kfi = link(KFI_CASE, 64)?;
    let t0 = Time::now();
    let raw = loop {
        match l.accept(true) {
            Ok(s) => break s,
            Err(e) if e == EAGAIN && link::in_time(t0) => {
                kernel::time::delay::fsleep(kernel::time::Delta::from_millis(10))
            }
            Err(e) => return Err(e),
        }
    };
    tune(&raw);
    Ok(Conns {
        kfi,
        raw,
        _listener: Some(l),
    })
}

fn client_conns() -> Result<Conns> {
    let kfi = link(KFI_CASE, 64)?;
    let addr = raw_addr()?;
    let raw = Socket::tcp(&addr)?;
    tune(&raw);
    raw.connect(&addr)?;
    Ok(Conns {
        kfi,
        raw,
        _listener: None,
    })
}

/// The bytes a run moves when its operations are small enough.
fn budget() -> usize {
    (module_parameters::budget_mib.value() as usize).clamp(1, 64) << 20
}

/// The largest size of the rows.
fn max_size() -> usize {
    let p = |v: u32| (v as usize).clamp(MIN_SIZE, LARGEST);
    p(module_parameters::max_size.value()).max(p(module_parameters::pp_max.value()))
}

/// The largest run, in bytes (both sides' buffers; the same parameters
/// on both guests give the same): the budget, or the fewest operations
/// of the largest size.
fn capacity() -> usize {
    budget().max(MIN_ITERS * max_size())
}

/// Sends the 8-byte `value` as a control message and waits for it.
fn send_u64(l: &Link, value: u64, ctx: usize) -> Result {
    let b = value.to_le_bytes();
    post_send(l, &b, ctx, 0, 0)?;
    complete(&l.cq, [ctx])?;
    Ok(())
}

/// The server: serves runs until the client's end (or an error). The
/// number of runs whose data arrived wrong.
fn serve() -> Result<usize> {
    let mut dst = pattern::buffer(capacity(), None)?;
    let c = server_conns()?;
    let l = &c.kfi;
    let mut bad = 0;
    loop {
        let mut hb = [0u8; 24];
        post_recv(l, &mut hb, CTX_HDR)?;
        complete(&l.cq, [CTX_HDR])?;
        let h = Header::parse(&hb, dst.len())?;
        let total = h.total().ok_or(EPROTO)?;
        dst.get_mut(..total).ok_or(EPROTO)?.fill(0);
        let verdict = match h.row {
            Row::End => break,
            Row::RawPingpong => {
                send_u64(l, 0, CTX_READY)?;
                for i in 0..h.iters {
                    let op = h.op(&mut dst, i)?;
                    raw_recv(&c.raw, op)?;
                    raw_send(&c.raw, op)?;
                }
                None
            }
            Row::KfiPingpong => {
                send_u64(l, 0, CTX_READY)?;
                for i in 0..h.iters {
                    let op = h.op(&mut dst, i)?;
                    post_recv(l, op, i)?;
                    let [e] = complete(&l.cq, [i])?;
                    if e.len != h.size || e.flags & sys::KFI_RECV == 0 {
                        return Err(EPROTO);
                    }
                    post_send(l, op, ECHO + i, 0, 0)?;
                    complete(&l.cq, [ECHO + i])?;
                }
                None
            }
            Row::RawStream => {
                send_u64(l, 0, CTX_READY)?;
                raw_recv(&c.raw, &mut dst[..total])?;
                raw_send(&c.raw, b"a")?;
                Some(())
            }
            Row::KfiSend => {
                let posted = h.iters.min(WINDOW);
                for i in 0..posted {
                    post_recv(l, h.op(&mut dst, i)?, i)?;
                }
                send_u64(l, 0, CTX_READY)?;
                let t0 = Time::now();
                let mut next = posted;
                for i in 0..h.iters {
                    let e = next_completion(&l.cq, t0)?;
                    // One connection: receives complete in order.
                    if e.op_context as usize != i || e.len != h.size || e.flags & sys::KFI_RECV == 0
                    {
                        return Err(EPROTO);
                    }
                    if next < h.iters {
                        post_recv(l, h.op(&mut dst, next)?, next)?;
                        next += 1;
                    }
                }
                send_u64(l, 0, CTX_ACK)?;
                Some(())
            }
            Row::KfiWrite => {
                let region = mr(l, &mut dst[..total], sys::KFI_REMOTE_WRITE, WBASE)?;
                let mut done = [0u8; 8];
                post_recv(l, &mut done, CTX_DONE)?;
                send_u64(l, key(&region), CTX_READY)?;
                complete(&l.cq, [CTX_DONE])?;
                send_u64(l, 0, CTX_ACK)?;
                drop(region);
                Some(())
            }
        };
        if verdict.is_some() {
            let at = pattern::first_bad(&dst[..total], h.size);
            if at.is_some() {
                bad += 1;
            }
            send_u64(l, at.map_or(u64::MAX, |a| a as u64), CTX_VERDICT)?;
        }
    }
    drop(c);
    pr_info!("bench: server served its client\n");
    Ok(bad)
}

/// One run's result on the client.
struct Sample {
    ns: i64,
    lat: Option<Lat>,
    ok: bool,
}

/// The client's side of one run of `h` (buffers: `src` holds the pattern
/// of `h.size`-byte operations, `dst` and `lat` have room for the run).
fn run(c: &Conns, h: Header, src: &[u8], dst: &mut [u8], lat: &mut KVec<i64>) -> Result<Sample> {
    let l = &c.kfi;
    let total = h.total().ok_or(EINVAL)?;
    let src = src.get(..total).ok_or(EINVAL)?;
    dst.get_mut(..total).ok_or(EINVAL)?.fill(0);
    let mut ready = [0u8; 8];
    post_recv(l, &mut ready, CTX_READY)?;
    post_send(l, &h.bytes(), CTX_HDR, 0, 0)?;
    complete(&l.cq, [CTX_HDR, CTX_READY])?;
    let mut ack = [0u8; 8];
    let mut verdict = [0u8; 8];
    let streaming = matches!(h.row, Row::KfiSend | Row::KfiWrite);
    if streaming {
        post_recv(l, &mut ack, CTX_ACK)?;
    }
    if h.row != Row::RawPingpong && h.row != Row::KfiPingpong {
        post_recv(l, &mut verdict, CTX_VERDICT)?;
    }
    lat.clear();
    let mut seen = KVec::new();
    seen.resize(h.iters, false, GFP_KERNEL)?;
    // Whether the write rows' "written!" has completed.
    let mut done_sent = false;
    let t0 = Time::now();
    match h.row {
        Row::End => return Err(EINVAL),
        Row::RawPingpong => {
            for i in 0..h.iters {
                let t = Time::now();
                raw_send(&c.raw, &src[i * h.size..(i + 1) * h.size])?;
                raw_recv(&c.raw, h.op(dst, i)?)?;
                lat.push(span_ns(t, &[Time::now()]), GFP_KERNEL)?;
            }
        }
        Row::KfiPingpong => {
            for i in 0..h.iters {
                let t = Time::now();
                post_recv(l, h.op(dst, i)?, ECHO + i)?;
                post_send(l, &src[i * h.size..(i + 1) * h.size], i, 0, 0)?;
                let [e, _] = complete(&l.cq, [ECHO + i, i])?;
                if e.len != h.size || e.flags & sys::KFI_RECV == 0 {
                    return Err(EPROTO);
                }
                lat.push(span_ns(t, &[Time::now()]), GFP_KERNEL)?;
            }
        }
        Row::RawStream => {
            raw_send(&c.raw, src)?;
            let mut a = [0u8; 1];
            raw_recv(&c.raw, &mut a)?;
        }
        Row::KfiSend | Row::KfiWrite => {
            let wkey = u64::from_le_bytes(ready);
            let post = |i: usize| {
                let op = &src[i * h.size..(i + 1) * h.size];
                if h.row == Row::KfiSend {
                    post_send(l, op, i, 0, 0)
                } else {
                    let v = net::kvec(op);
                    post_rma(l, false, &v, WBASE + (i * h.size) as u64, wkey, i, 0)
                }
            };
            let mut next = h.iters.min(WINDOW);
            for i in 0..next {
                post(i)?;
            }
            let (mut done, mut acked) = (0, false);
            while done < h.iters || !acked {
                let e = next_completion(&l.cq, t0)?;
                match e.op_context as usize {
                    CTX_ACK => acked = true,
                    CTX_DONE => done_sent = true,
                    i if i < h.iters => {
                        // Each operation completes once, as what it was.
                        let want = if h.row == Row::KfiSend {
                            sys::KFI_SEND
                        } else {
                            sys::KFI_WRITE
                        };
                        if seen[i] || e.flags & want != want {
                            return Err(EPROTO);
                        }
                        seen[i] = true;
                        done += 1;
                        if next < h.iters {
                            post(next)?;
                            next += 1;
                        }
                        if done == h.iters && h.row == Row::KfiWrite {
                            // The writes are complete: the server may look.
                            post_send(l, b"written!", CTX_DONE, 0, 0)?;
                        }
                    }
                    _ => return Err(EPROTO),
                }
            }
        }
    }
    let ns = span_ns(t0, &[Time::now()]);
    let ok = match h.row {
        Row::RawPingpong | Row::KfiPingpong => pattern::first_bad(&dst[..total], h.size).is_none(),
        _ => {
            // A write row's "written!" may complete after the ack.
            let want_done = h.row == Row::KfiWrite;
            let t = Time::now();
            let mut got_done = !want_done || done_sent;
            let mut got_verdict = false;
            while !(got_done && got_verdict) {
                match next_completion(&l.cq, t)?.op_context as usize {
                    CTX_DONE if !got_done => got_done = true,
                    CTX_VERDICT => got_verdict = true,
                    _ => return Err(EPROTO),
                }
            }
            u64::from_le_bytes(verdict) == u64::MAX
        }
    };
    let lat = if lat.is_empty() { None } else { Lat::of(lat) };
    Ok(Sample { ns, lat, ok })
}

/// A repetition's number, or `warmup`.
struct Rep(Option<usize>);

impl kernel::fmt::Display for Rep {
    fn fmt(&self, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
        match self.0 {
            Some(r) => write!(f, "{}", r),
            None => f.write_str("warmup"),
        }
    }
}

/// `bench: sample ...`, as kfi_bench.ko prints it.
fn print(h: Header, rep: Option<usize>, s: &Sample) {
    let rep = Rep(rep);
    let v = u8::from(s.ok);
    match s.lat {
        Some(l) => pr_info!(
            "bench: sample row={} bytes={} win={} rep={} iters={} ns={} p50={} p99={} min={} max={} cpus=- verified={}\n",
            h.row.name(), h.size, h.row.win(), rep, h.iters, s.ns, l.p50, l.p99, l.min, l.max, v
        ),
        None => pr_info!(
            "bench: sample row={} bytes={} win={} rep={} iters={} ns={} cpus=- verified={}\n",
            h.row.name(), h.size, h.row.win(), rep, h.iters, s.ns, v
        ),
    }
}

/// 64 B up to `max` by powers of 4.
fn sizes(max: usize) -> impl Iterator<Item = usize> {
    core::iter::successors(Some(MIN_SIZE), |s| s.checked_mul(4)).take_while(move |&s| s <= max)
}

/// The client: every row, warm-up first, then the repetitions, raw and kfi
/// interleaved (in reverse order every other round). The number of runs
/// with wrong data.
fn drive() -> Result<usize> {
    let reps = (module_parameters::reps.value() as usize).clamp(1, 50);
    let max_iters = (module_parameters::max_iters.value() as usize).clamp(MIN_ITERS, 100_000);
    let budget = budget();
    let max_size = (module_parameters::max_size.value() as usize).clamp(MIN_SIZE, LARGEST);
    let pp_max = (module_parameters::pp_max.value() as usize).clamp(MIN_SIZE, LARGEST);
    pr_info!(
        "bench: config hosts=2 reps={} max_size={} pp_max={} budget_mib={} max_iters={} min_iters={}\n",
        reps,
        max_size,
        pp_max,
        budget >> 20,
        max_iters,
        MIN_ITERS
    );
    pattern::self_check()?;
    // Buffers first: they outlive the connections.
    let mut src = pattern::buffer(capacity(), None)?;
    let mut dst = pattern::buffer(capacity(), None)?;
    let mut lat = KVec::with_capacity(max_iters, GFP_KERNEL)?;
    let c = client_conns()?;
    let mut bad = 0;
    let plan = [
        (&[Row::RawPingpong, Row::KfiPingpong][..], pp_max),
        (&[Row::RawStream, Row::KfiSend, Row::KfiWrite][..], max_size),
    ];
    for (rows, max) in plan {
        for size in sizes(max) {
            let iters = (budget / size).clamp(MIN_ITERS, max_iters);
            let total = size.checked_mul(iters).ok_or(EINVAL)?;
            pattern::fill(src.get_mut(..total).ok_or(EINVAL)?, size)?;
            for rep in (0..=reps).map(|r| r.checked_sub(1)) {
                for k in 0..rows.len() {
                    let row = if rep.unwrap_or(0) % 2 == 0 {
                        rows[k]
                    } else {
                        rows[rows.len() - 1 - k]
                    };
                    let h = Header {
                        row,
                        size,
                        // The warm-up: a quarter of the run.
                        iters: if rep.is_none() {
                            (iters / 4).max(MIN_ITERS.min(iters))
                        } else {
                            iters
                        },
                    };
                    let s = run(&c, h, &src, &mut dst, &mut lat).inspect_err(|e| {
                        pr_err!("bench: {} of {} B: {:?}\n", row.name(), size, e)
                    })?;
                    if !s.ok {
                        pr_err!("bench: {} of {} B: wrong data\n", row.name(), size);
                        bad += 1;
                    }
                    print(h, rep, &s);
                }
            }
        }
    }
    let end = Header {
        row: Row::End,
        size: 0,
        iters: 0,
    };
    post_send(&c.kfi, &end.bytes(), CTX_HDR, 0, sys::KFI_DELIVERY_COMPLETE)?;
    complete(&c.kfi.cq, [CTX_HDR])?;
    drop(c);
    drop(src);
    drop(dst);
    Ok(bad)
}
