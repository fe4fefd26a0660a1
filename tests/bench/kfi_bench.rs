// SPDX-License-Identifier: GPL-2.0

//! kfi_bench.ko: the benchmark of `make bench`. At load it measures, in the
//! same boot and over the same loopback, plain kernel TCP (the baseline:
//! a ping-pong and a one-way stream between two kernel sockets) and
//! kfi_sockets through kfabric.ko (ping-pong, messages, RMA write and RMA
//! read), and prints each result with its ratio to the baseline. Numbers
//! only: nothing here passes or fails on speed (the machine is noisy).

use kernel::{
    new_condvar, new_mutex,
    prelude::*,
    sync::{Arc, CondVar, Mutex},
    time::{Instant, Monotonic},
    workqueue,
};

#[path = "../../kfi/api/mod.rs"]
mod kfi;
#[allow(dead_code)]
#[path = "../../prov/sockets/ksock.rs"]
mod ksock;
// Shared by source inclusion; each module uses a part.
#[allow(dead_code)]
#[path = "../common/net.rs"]
mod net;

use kfi::{kfabric::Owned, kfi_sys as sys};
use ksock::{SockAddr, Socket};
use net::*;

module! {
    type: KfiBench,
    name: "kfi_bench",
    authors: ["kfabric developers"],
    description: "kfabric benchmark: kfi_sockets against plain kernel TCP",
    license: "GPL",
}

struct KfiBench;

impl kernel::Module for KfiBench {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        match bench() {
            Ok(()) => pr_info!("bench: done\n"),
            Err(e) => pr_err!("bench: failed: {:?}\n", e),
        }
        Ok(Self)
    }
}

const PINGS: usize = 500;
const PING_LEN: usize = 64;
/// Bytes of each throughput run, and of one operation in it.
const TOTAL: usize = 64 << 20;
const CHUNK: usize = 1 << 20;
/// Operations in flight in the kfabric throughput runs.
const WINDOW: usize = 8;

fn micros_since(t0: Instant<Monotonic>) -> i64 {
    t0.elapsed().as_micros_ceil().max(1)
}

/// MB/s of `bytes` in `us` microseconds.
fn mbps(bytes: usize, us: i64) -> i64 {
    bytes as i64 / us
}

/// A connected pair of plain kernel sockets over loopback.
fn tcp_pair(port: u16) -> Result<(Socket, Socket, Socket)> {
    let addr = SockAddr::v4([127, 0, 0, 1], port);
    let l = Socket::tcp(&addr)?;
    l.bind(&addr)?;
    l.listen(4)?;
    let c = Socket::tcp(&addr)?;
    c.connect(&addr)?;
    let s = l.accept(false)?;
    Ok((l, c, s))
}

fn recv_all(s: &Socket, buf: &mut [u8]) -> Result {
    let mut got = 0;
    while got < buf.len() {
        match s.recv(&mut buf[got..], true)? {
            0 => return Err(ECONNRESET),
            n => got += n,
        }
    }
    Ok(())
}

/// Baseline: 64-byte ping-pong between two kernel sockets; us per round
/// trip.
fn tcp_pingpong() -> Result<i64> {
    let (_l, c, s) = tcp_pair(7490)?;
    let ping = [0x11u8; PING_LEN];
    let mut buf = [0u8; PING_LEN];
    let t0 = Instant::<Monotonic>::now();
    for _ in 0..PINGS {
        c.send(&[&ping])?;
        recv_all(&s, &mut buf)?;
        s.send(&[&buf])?;
        recv_all(&c, &mut buf)?;
    }
    Ok(micros_since(t0) / PINGS as i64)
}

/// What the stream's receiver worker reports.
#[pin_data]
struct Done {
    #[pin]
    result: Mutex<Option<Result>>,
    #[pin]
    cv: CondVar,
}

/// Baseline: `TOTAL` bytes one way between two kernel sockets, the
/// receiver on a worker; MB/s.
fn tcp_stream() -> Result<i64> {
    let (_l, c, s) = tcp_pair(7491)?;
    let done = Arc::pin_init(
        pin_init!(Done {
            result <- new_mutex!(None),
            cv <- new_condvar!(),
        }),
        GFP_KERNEL,
    )?;
    let mut src = KVVec::with_capacity(CHUNK, GFP_KERNEL)?;
    src.resize(CHUNK, 0x5a, GFP_KERNEL)?;
    let d2 = done.clone();
    let s = Arc::new(s, GFP_KERNEL)?;
    let s2 = s.clone();
    let t0 = Instant::<Monotonic>::now();
    workqueue::system_long().try_spawn(GFP_KERNEL, move || {
        let r = (|| -> Result {
            let mut dst = KVVec::with_capacity(CHUNK, GFP_KERNEL)?;
            dst.resize(CHUNK, 0, GFP_KERNEL)?;
            for _ in 0..TOTAL / CHUNK {
                recv_all(&s2, &mut dst)?;
            }
            Ok(())
        })();
        *d2.result.lock() = Some(r);
        d2.cv.notify_all();
    })?;
    let sent = (|| -> Result {
        for _ in 0..TOTAL / CHUNK {
            if c.send(&[&src])? != CHUNK {
                return Err(EPIPE);
            }
        }
        Ok(())
    })();
    if sent.is_err() {
        // Unblocks the receiver.
        s.shutdown();
    }
    let mut g = done.result.lock();
    while g.is_none() {
        done.cv.wait(&mut g);
    }
    let us = micros_since(t0);
    let r = g.take().unwrap_or(Err(EINVAL));
    drop(g);
    sent?;
    r?;
    Ok(mbps(TOTAL, us))
}

/// A connected kfi_sockets pair with its own CQs, on `port`.
struct Pair {
    cep: Owned<sys::kfid_ep>,
    sep: Owned<sys::kfid_ep>,
    _pep: Owned<sys::kfid_pep>,
    ccq: Owned<sys::kfid_cq>,
    scq: Owned<sys::kfid_cq>,
    n: Net,
}

fn kfi_pair(port: &CStr) -> Result<Pair> {
    let n = net(port)?;
    let pep = listen(&n)?;
    let ccq = cq_sized(&n, 64)?;
    let scq = cq_sized(&n, 64)?;
    let (cep, sep) = connected_pair(&n, &ccq, &scq)?;
    Ok(Pair {
        cep,
        sep,
        _pep: pep,
        ccq,
        scq,
        n,
    })
}

fn wait(cq: &Owned<sys::kfid_cq>) -> Result<sys::kfi_cq_data_entry> {
    let mut e = sys::kfi_cq_data_entry::default();
    match sread(cq, &mut e) {
        1 => Ok(e),
        n => Err(Error::from_errno(n as i32)),
    }
}

fn post(r: c_int) -> Result {
    kernel::error::to_result(r)
}

/// kfi_sockets: 64-byte ping-pong; us per round trip.
fn kfi_pingpong(p: &Pair) -> Result<i64> {
    let ping = [0x11u8; PING_LEN];
    let (mut cbuf, mut sbuf) = ([0u8; PING_LEN], [0u8; PING_LEN]);
    let (cr, sr, pv) = (kvec_mut(&mut cbuf), kvec_mut(&mut sbuf), kvec(&ping));
    let t0 = Instant::<Monotonic>::now();
    for _ in 0..PINGS {
        // SAFETY: Open endpoints; the buffers outlive the completions, which
        // are all waited for in this round.
        unsafe {
            post(sys::kfi_recvmsg(p.sep.as_ptr(), &msg(&sr, 1, 0), 0))?;
            post(sys::kfi_recvmsg(p.cep.as_ptr(), &msg(&cr, 2, 0), 0))?;
            post(sys::kfi_sendmsg(
                p.cep.as_ptr(),
                &msg(&pv, 3, 0),
                sys::KFI_INJECT,
            ))?;
        }
        wait(&p.scq)?;
        // SAFETY: As above.
        unsafe {
            post(sys::kfi_sendmsg(
                p.sep.as_ptr(),
                &msg(&sr, 4, 0),
                sys::KFI_INJECT,
            ))?
        };
        wait(&p.ccq)?;
    }
    Ok(micros_since(t0) / PINGS as i64)
}

/// What a kfabric throughput run moves.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Send,
    Write,
    Read,
}

/// kfi_sockets: `TOTAL` bytes as `CHUNK`-sized operations of `kind`,
/// `WINDOW` in flight; MB/s.
fn kfi_stream(p: &Pair, kind: Kind) -> Result<i64> {
    let mut local = KVVec::with_capacity(CHUNK * WINDOW, GFP_KERNEL)?;
    local.resize(CHUNK * WINDOW, 0x5a, GFP_KERNEL)?;
    let mut remote = KVVec::with_capacity(CHUNK * WINDOW, GFP_KERNEL)?;
    remote.resize(CHUNK * WINDOW, 0, GFP_KERNEL)?;
    let access = sys::KFI_REMOTE_READ | sys::KFI_REMOTE_WRITE;
    // SAFETY: An open domain; `remote` outlives the region (closed below).
    let mr = Owned::open(|o| unsafe {
        sys::kfi_mr_reg(
            p.n.domain.as_ptr(),
            remote.as_mut_ptr().cast(),
            remote.len(),
            access,
            0,
            0,
            0,
            o,
            core::ptr::null_mut(),
        )
    })?;
    // SAFETY: An open region.
    let key = unsafe { (*mr.as_ptr()).key };
    let ops = TOTAL / CHUNK;
    let (mut issued, mut done) = (0, 0);
    let t0 = Instant::<Monotonic>::now();
    while done < ops {
        while issued < ops && issued - done < WINDOW {
            let slot = issued % WINDOW;
            let at = slot * CHUNK;
            let l = kvec_mut(&mut local[at..at + CHUNK]);
            let rv = sys::kfi_rma_iov {
                addr: at as u64,
                len: CHUNK,
                key,
            };
            let mut m = sys::kfi_msg_rma {
                msg: msg(&l, slot, 0),
                rma_iov: &rv,
                rma_iov_count: 1,
            };
            // SAFETY: Open endpoints; every buffer slot is reused only after
            // its operation completed (at most `WINDOW` in flight).
            unsafe {
                match kind {
                    Kind::Send => {
                        let r = kvec_mut(&mut remote[at..at + CHUNK]);
                        post(sys::kfi_recvmsg(p.sep.as_ptr(), &msg(&r, slot, 0), 0))?;
                        post(sys::kfi_sendmsg(p.cep.as_ptr(), &m.msg, 0))?;
                    }
                    Kind::Write => post(sys::kfi_writemsg(p.cep.as_ptr(), &m, 0))?,
                    Kind::Read => {
                        m.msg.context = slot as *mut c_void;
                        post(sys::kfi_readmsg(p.cep.as_ptr(), &m, 0))?
                    }
                }
            }
            issued += 1;
        }
        wait(&p.ccq)?;
        if kind == Kind::Send {
            wait(&p.scq)?;
        }
        done += 1;
    }
    let us = micros_since(t0);
    drop(mr);
    if remote.iter().any(|&b| b != 0x5a) && kind != Kind::Read {
        return Err(EIO);
    }
    Ok(mbps(TOTAL, us))
}

/// `a / b` as a decimal with two digits, e.g. "0.85".
struct Ratio(i64, i64);

impl kernel::fmt::Display for Ratio {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let hundredths = self.0.saturating_mul(100) / self.1.max(1);
        write!(f, "{}.{:02}", hundredths / 100, hundredths % 100)
    }
}

fn bench() -> Result {
    pr_info!(
        "bench: loopback, {} B ping-pong x {}, {} MiB streams of {} KiB operations\n",
        PING_LEN,
        PINGS,
        TOTAL >> 20,
        CHUNK >> 10
    );
    let tcp_pp = tcp_pingpong()?;
    pr_info!(
        "bench: baseline tcp ping-pong: {} us per round trip\n",
        tcp_pp
    );
    let tcp_bw = tcp_stream()?;
    pr_info!("bench: baseline tcp stream: {} MB/s\n", tcp_bw);
    let p = kfi_pair(c"7492")?;
    let pp = kfi_pingpong(&p)?;
    pr_info!(
        "bench: kfi_sockets ping-pong: {} us per round trip (x{} the tcp baseline)\n",
        pp,
        Ratio(pp, tcp_pp)
    );
    for (name, kind) in [
        ("send/recv", Kind::Send),
        ("rma write", Kind::Write),
        ("rma read", Kind::Read),
    ] {
        let bw = kfi_stream(&p, kind)?;
        pr_info!(
            "bench: kfi_sockets {}: {} MB/s ({} of the tcp baseline)\n",
            name,
            bw,
            Ratio(bw, tcp_bw)
        );
    }
    Ok(())
}
