// SPDX-License-Identifier: GPL-2.0

//! kfi_demo.ko: the demo of `make run`. At load it connects two kfi_sockets
//! endpoints over loopback through kfabric.ko, exchanges messages and RMA,
//! and prints what happened: the connection events with their private
//! data, a ping-pong latency, a one-way message throughput, RMA writes and
//! reads into a registered region (throughput, bytes checked), a commit-
//! complete write to a persistent-memory region and an atomic fetch-add.

use kernel::{
    prelude::*,
    time::{Instant, Monotonic},
};

#[path = "../../kfi/api/mod.rs"]
mod kfi;
// Shared by source inclusion; each module uses a part.
#[allow(dead_code)]
#[path = "../common/net.rs"]
mod net;

use kfi::{kfabric::Owned, kfi_sys as sys};
use net::*;

module! {
    type: KfiDemo,
    name: "kfi_demo",
    authors: ["kfabric developers"],
    description: "kfabric demo: two kfi_sockets endpoints over loopback",
    license: "GPL",
}

struct KfiDemo;

impl kernel::Module for KfiDemo {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        match demo() {
            Ok(()) => pr_info!("demo: done\n"),
            Err(e) => pr_err!("demo: failed: {:?}\n", e),
        }
        Ok(Self)
    }
}

const PINGS: usize = 200;
const PING_LEN: usize = 64;
const CHUNK: usize = 64 * 1024;
const CHUNKS: usize = 128;
const WINDOW: usize = 8;

/// Posts a receive of `buf` with context `ctx`.
fn post_recv(ep: &Owned<sys::kfid_ep>, buf: &mut [u8], ctx: usize) -> Result {
    let v = kvec_mut(buf);
    // SAFETY: An open endpoint; `buf` outlives the receive's completion
    // (every caller waits for it before reusing or freeing the buffer).
    kernel::error::to_result(unsafe { sys::kfi_recvmsg(ep.as_ptr(), &msg(&v, ctx, 0), 0) })
}

/// Sends `buf` with context `ctx`.
fn send(ep: &Owned<sys::kfid_ep>, buf: &[u8], ctx: usize) -> Result {
    let v = kvec(buf);
    // SAFETY: An open endpoint; `buf` outlives the send's completion.
    kernel::error::to_result(unsafe { sys::kfi_sendmsg(ep.as_ptr(), &msg(&v, ctx, 0), 0) })
}

/// Waits for the next completion on `cq`: its flags.
fn next(cq: &Owned<sys::kfid_cq>) -> Result<u64> {
    let mut e = sys::kfi_cq_data_entry::default();
    match sread(cq, &mut e) {
        1 => Ok(e.flags),
        n => Err(Error::from_errno(n as i32)),
    }
}

/// Waits until `cq` reports a receive, skipping send completions.
fn next_recv(cq: &Owned<sys::kfid_cq>) -> Result {
    while next(cq)? & sys::KFI_RECV == 0 {}
    Ok(())
}

fn demo() -> Result {
    let n = net(c"7480")?;
    let pep = listen(&n)?;
    let (ccq, scq) = (cq(&n)?, cq(&n)?);
    let cep = endpoint(&n, n.dst.first(), &ccq)?;
    let hello = b"client says hello";
    // SAFETY: An open, bound endpoint; the data lives across the call.
    let r = unsafe {
        sys::kfi_connect(
            cep.as_ptr(),
            core::ptr::null(),
            hello.as_ptr().cast(),
            hello.len(),
        )
    };
    kernel::error::to_result(r)?;
    let (ev, buf, len) = event(&n)?;
    if ev != sys::KFI_CONNREQ {
        return Err(EPROTO);
    }
    pr_info!(
        "demo: server got a connection request with {:?}\n",
        core::str::from_utf8(&buf[CM..len]).unwrap_or("?")
    );
    let req = cm_entry(&buf);
    let sep = endpoint(&n, req.info, &scq);
    // SAFETY: The request's info is ours to free.
    unsafe { sys::kfi_freeinfo(req.info) };
    let sep = sep?;
    let welcome = b"server says welcome";
    // SAFETY: An open endpoint made for the request.
    let r = unsafe { sys::kfi_accept(sep.as_ptr(), welcome.as_ptr().cast(), welcome.len()) };
    kernel::error::to_result(r)?;
    for _ in 0..2 {
        let (ev, buf, len) = event(&n)?;
        let side = if cm_entry(&buf).fid == cep.fid() {
            "client"
        } else {
            "server"
        };
        if ev != sys::KFI_CONNECTED {
            return Err(EPROTO);
        }
        pr_info!(
            "demo: {} connected (private data {:?})\n",
            side,
            core::str::from_utf8(&buf[CM..len]).unwrap_or("?")
        );
    }

    // Ping-pong: the client sends, the server answers.
    let ping = [0x11u8; PING_LEN];
    let (mut cbuf, mut sbuf) = ([0u8; PING_LEN], [0u8; PING_LEN]);
    let t0 = Instant::<Monotonic>::now();
    for _ in 0..PINGS {
        post_recv(&sep, &mut sbuf, 1)?;
        post_recv(&cep, &mut cbuf, 2)?;
        send(&cep, &ping, 3)?;
        next_recv(&scq)?;
        send(&sep, &sbuf, 4)?;
        next_recv(&ccq)?;
    }
    let us = t0.elapsed().as_micros_ceil();
    pr_info!(
        "demo: ping-pong {} B x {}: {} us per round trip\n",
        PING_LEN,
        PINGS,
        us / PINGS as i64
    );
    if cbuf != ping {
        return Err(EIO);
    }

    // One-way stream with a window of posted receives and sends.
    let mut src = KVec::with_capacity(CHUNK, GFP_KERNEL)?;
    src.resize(CHUNK, 0x5a, GFP_KERNEL)?;
    let mut dst = KVec::with_capacity(CHUNK * WINDOW, GFP_KERNEL)?;
    dst.resize(CHUNK * WINDOW, 0, GFP_KERNEL)?;
    // Drain what the ping-pong left on the CQs (send completions).
    let mut e = sys::kfi_cq_data_entry::default();
    // SAFETY: Open CQ; one entry of room.
    while unsafe { sys::kfi_cq_read(ccq.as_ptr(), (&raw mut e).cast(), 1) } > 0 {}
    let t0 = Instant::<Monotonic>::now();
    let (mut posted, mut received, mut sent, mut acked) = (0, 0, 0, 0);
    while posted < WINDOW.min(CHUNKS) {
        post_recv(&sep, &mut dst[posted * CHUNK..(posted + 1) * CHUNK], posted)?;
        posted += 1;
    }
    while received < CHUNKS {
        while sent < CHUNKS && sent - acked < WINDOW {
            send(&cep, &src, 0)?;
            sent += 1;
        }
        if sread(&scq, &mut e) == 1 {
            received += 1;
            if posted < CHUNKS {
                let slot = e.op_context as usize;
                post_recv(&sep, &mut dst[slot * CHUNK..(slot + 1) * CHUNK], slot)?;
                posted += 1;
            }
        }
        // SAFETY: Open CQ; one entry of room.
        while unsafe { sys::kfi_cq_read(ccq.as_ptr(), (&raw mut e).cast(), 1) } == 1 {
            acked += 1;
        }
    }
    let us = t0.elapsed().as_micros_ceil().max(1);
    let bytes = (CHUNK * CHUNKS) as i64;
    pr_info!(
        "demo: stream {} KiB x {} = {} MiB in {} ms: {} MB/s\n",
        CHUNK / 1024,
        CHUNKS,
        bytes >> 20,
        us / 1000,
        bytes / us
    );
    if dst.iter().any(|&b| b != 0x5a) {
        return Err(EIO);
    }
    rma(&n, &cep, &ccq)?;
    drop(sep);
    drop(cep);
    drop(pep);
    Ok(())
}

/// Registers `buf` on the server's domain with remote read and write.
fn register(n: &Net, buf: &mut [u8], flags: u64) -> Result<Owned<sys::kfid_mr>> {
    // SAFETY: An open domain; `buf` outlives the region (callers close the
    // region first).
    Owned::open(|o| unsafe {
        sys::kfi_mr_reg(
            n.domain.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            sys::KFI_REMOTE_READ | sys::KFI_REMOTE_WRITE,
            0,
            0,
            flags,
            o,
            core::ptr::null_mut(),
        )
    })
}

/// Posts one RMA operation of `local` at remote `addr` of region `key`.
fn post_rma(
    ep: &Owned<sys::kfid_ep>,
    read: bool,
    local: &mut [u8],
    addr: u64,
    key: u64,
    flags: u64,
) -> Result {
    let l = kvec_mut(local);
    let r = sys::kfi_rma_iov {
        addr,
        len: local.len(),
        key,
    };
    let m = sys::kfi_msg_rma {
        msg: msg(&l, 0, 0),
        rma_iov: &r,
        rma_iov_count: 1,
    };
    // SAFETY: An open endpoint; `local` outlives the operation's completion
    // (every caller waits for it).
    kernel::error::to_result(unsafe {
        if read {
            sys::kfi_readmsg(ep.as_ptr(), &m, flags)
        } else {
            sys::kfi_writemsg(ep.as_ptr(), &m, flags)
        }
    })
}

/// RMA: writes and reads through a 16 MiB region of the server, a commit
/// to a persistent-memory region, an atomic fetch-add.
fn rma(n: &Net, cep: &Owned<sys::kfid_ep>, ccq: &Owned<sys::kfid_cq>) -> Result {
    const REGION: usize = 16 << 20;
    const OP: usize = 1 << 20;
    const ROUNDS: usize = 4;
    let mut target = KVVec::with_capacity(REGION, GFP_KERNEL)?;
    target.resize(REGION, 0, GFP_KERNEL)?;
    let region = register(n, &mut target, 0)?;
    // SAFETY: An open region.
    let key = unsafe { (*region.as_ptr()).key };
    let mut local = KVVec::with_capacity(REGION, GFP_KERNEL)?;
    for i in 0..REGION {
        local.push((i % 253) as u8, GFP_KERNEL)?;
    }
    let ops = REGION / OP;
    for read in [false, true] {
        if read {
            local.fill(0);
        }
        let t0 = Instant::<Monotonic>::now();
        for _ in 0..ROUNDS {
            // All operations of a round in flight at once.
            for i in 0..ops {
                post_rma(
                    cep,
                    read,
                    &mut local[i * OP..(i + 1) * OP],
                    (i * OP) as u64,
                    key,
                    0,
                )?;
            }
            for _ in 0..ops {
                next(ccq)?;
            }
        }
        let us = t0.elapsed().as_micros_ceil().max(1);
        let bytes = (REGION * ROUNDS) as i64;
        pr_info!(
            "demo: rma {} {} MiB ({} ops of {} KiB in flight) in {} ms: {} MB/s\n",
            if read { "read" } else { "write" },
            bytes >> 20,
            ops,
            OP >> 10,
            us / 1000,
            bytes / us
        );
    }
    if target
        .iter()
        .zip(local.iter())
        .enumerate()
        .any(|(i, (&t, &l))| t != (i % 253) as u8 || l != t)
    {
        return Err(EIO);
    }
    pr_info!(
        "demo: rma: all {} MiB checked on both sides\n",
        REGION >> 20
    );
    drop(region);

    // Commit completion on a region registered as persistent memory.
    let mut pmem = KVec::with_capacity(4096, GFP_KERNEL)?;
    pmem.resize(4096, 0u8, GFP_KERNEL)?;
    let pregion = register(n, &mut pmem, sys::KFI_RMA_PMEM)?;
    // SAFETY: An open region.
    let pkey = unsafe { (*pregion.as_ptr()).key };
    let mut record = *b"journal record 42";
    post_rma(cep, false, &mut record, 100, pkey, sys::KFI_COMMIT_COMPLETE)?;
    next(ccq)?;
    pr_info!(
        "demo: commit-complete write of {} B to a pmem region: persistent at the target before its completion\n",
        record.len()
    );

    // An atomic fetch-add on a counter in the same region.
    let one = 5u64;
    let mut old = 0u64;
    let ioc = sys::kfi_ioc {
        addr: (&raw const one).cast_mut().cast(),
        count: 1,
    };
    let mut res = sys::kfi_ioc {
        addr: (&raw mut old).cast(),
        count: 1,
    };
    let rioc = sys::kfi_rma_ioc {
        addr: 0,
        count: 1,
        key: pkey,
    };
    let m = sys::kfi_msg_atomic {
        msg_iov: &ioc,
        iov_count: 1,
        rma_iov: &rioc,
        rma_iov_count: 1,
        datatype: sys::KFI_UINT64,
        op: sys::KFI_SUM,
        ..Default::default()
    };
    for _ in 0..2 {
        // SAFETY: An open endpoint; the operands outlive the completion.
        let r = unsafe {
            sys::kfi_fetch_atomicmsg(cep.as_ptr(), &m, &mut res, core::ptr::null_mut(), 1, 0)
        };
        kernel::error::to_result(r)?;
        next(ccq)?;
    }
    drop(pregion);
    let counter = u64::from_ne_bytes([
        pmem[0], pmem[1], pmem[2], pmem[3], pmem[4], pmem[5], pmem[6], pmem[7],
    ]);
    pr_info!(
        "demo: atomic fetch-add 5, twice: old value {}, counter now {}\n",
        old,
        counter
    );
    if counter != 10 || old != 5 || pmem[100..117] != record {
        return Err(EIO);
    }
    Ok(())
}
