// SPDX-License-Identifier: GPL-2.0

//! kfi_demo.ko: the demo of `make run`. At load it runs the same ULP code
//! twice, the provider picked only by the getinfo hints: over kfi_sockets
//! (loopback) and over kfi_ibverbs (the soft-iWARP device demo.sh adds on
//! a veth end), when something serves it. Each run connects two endpoints
//! through kfabric.ko and prints what happened: the connection events with
//! their private data, a ping-pong latency, a one-way message throughput,
//! and, where the provider offers RMA, RMA writes and reads into a
//! registered region (throughput, bytes checked), a commit-complete write
//! to a persistent-memory region and an atomic fetch-add.

use core::ffi::CStr;
use kernel::{
    prelude::*,
    time::{Instant, Monotonic},
};

#[path = "../../kfi/api/mod.rs"]
mod kfi;

use kfi::{
    kfi_sys as sys,
    ulp::{CmEvent, Cq, Domain, Endpoint, Eq, Fabric, Hints, Info, Mr},
};

module! {
    type: KfiDemo,
    name: "kfi_demo",
    authors: ["kfabric developers"],
    description: "kfabric demo: one ULP over kfi_sockets and kfi_ibverbs",
    license: "GPL",
}

struct KfiDemo;

impl kernel::Module for KfiDemo {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        // The same code on both providers; only the hints differ. The RDMA
        // address is the one tests/guest/demo.sh gives the siw device.
        let mut ok = true;
        for (prov, node, port) in [
            (c"sockets", c"127.0.0.1", c"7480"),
            (c"ibverbs", c"10.99.0.1", c"7490"),
        ] {
            let name = prov.to_str().unwrap_or("?");
            pr_info!("demo: --- provider {name} ---\n");
            if Hints::provider(prov)?
                .getinfo(node, port, sys::KFI_SOURCE)
                .is_err()
            {
                pr_info!("demo: {name}: nothing serves {node:?}, skipped\n");
                continue;
            }
            if let Err(e) = demo(prov, node, port) {
                pr_err!("demo: {name}: failed: {:?}\n", e);
                ok = false;
            }
        }
        if ok {
            pr_info!("demo: done\n");
        }
        Ok(Self)
    }
}

const PINGS: usize = 200;
const PING_LEN: usize = 64;
const CHUNK: usize = 64 * 1024;
const CHUNKS: usize = 128;
const WINDOW: usize = 8;
/// How long the demo waits for any one event or completion.
const WAIT_MS: i32 = 20_000;

/// Waits for the next completion on `cq`: its flags.
fn next(cq: &Cq<'_>) -> Result<u64> {
    Ok(cq.sread(WAIT_MS)?.flags)
}

/// Waits until `cq` reports a receive, skipping send completions.
fn next_recv(cq: &Cq<'_>) -> Result {
    while next(cq)? & sys::KFI_RECV == 0 {}
    Ok(())
}

/// Waits until `cq` reports a send.
fn next_send(cq: &Cq<'_>) -> Result {
    while next(cq)? & sys::KFI_SEND == 0 {}
    Ok(())
}

/// An endpoint for `info`, bound to `cq` both ways and to `eq`, enabled.
fn endpoint<'a>(
    domain: &'a Domain<'_>,
    info: Info<'_>,
    cq: &'a Cq<'_>,
    eq: &'a Eq<'_>,
) -> Result<Endpoint<'a>> {
    let ep = domain.endpoint(info)?;
    ep.bind_cq(cq, sys::KFI_TRANSMIT | sys::KFI_RECV)?;
    ep.bind_eq(eq)?;
    ep.enable()?;
    Ok(ep)
}

fn demo(prov: &CStr, node: &CStr, port: &CStr) -> Result {
    let hints = Hints::provider(prov)?;
    let src = hints.getinfo(node, port, sys::KFI_SOURCE)?;
    let dst = hints.getinfo(node, port, 0)?;
    let (caps, max_msg) = {
        let e = src.entry();
        // SAFETY: An entry from getinfo has valid endpoint attributes.
        (e.caps, unsafe { (*e.ep_attr).max_msg_size })
    };
    // SAFETY: An entry from getinfo names its fabric and domain.
    let (fname, dname) = unsafe {
        let e = src.entry();
        (
            CStr::from_char_ptr((*e.fabric_attr).name),
            CStr::from_char_ptr((*e.domain_attr).name),
        )
    };
    pr_info!("demo: fabric {fname:?}, domain {dname:?}, node {node:?}\n");
    let fabric = Fabric::open(src.entry())?;
    let domain = fabric.domain(src.entry())?;
    let eq = fabric.eq(16)?;
    let _pep = fabric.listen(src.entry(), &eq)?;
    let (ccq, scq) = (domain.cq(16)?, domain.cq(16)?);
    let cep = endpoint(&domain, dst.entry(), &ccq, &eq)?;
    cep.connect(b"client says hello")?;
    let CmEvent::ConnReq { req, data } = eq.sread(WAIT_MS)? else {
        return Err(EPROTO);
    };
    pr_info!(
        "demo: server got a connection request with {:?}\n",
        core::str::from_utf8(data.as_bytes()).unwrap_or("?")
    );
    let sep = endpoint(&domain, req.info(), &scq, &eq)?;
    drop(req);
    sep.accept(b"server says welcome")?;
    for _ in 0..2 {
        let CmEvent::Connected { fid, data } = eq.sread(WAIT_MS)? else {
            return Err(EPROTO);
        };
        pr_info!(
            "demo: {} connected (private data {:?})\n",
            if cep.is(fid) { "client" } else { "server" },
            core::str::from_utf8(data.as_bytes()).unwrap_or("?")
        );
    }

    // Ping-pong: the client sends, the server answers.
    let ping = [0x11u8; PING_LEN];
    let (mut cbuf, mut sbuf) = ([0u8; PING_LEN], [0u8; PING_LEN]);
    let t0 = Instant::<Monotonic>::now();
    for _ in 0..PINGS {
        // SAFETY: `sbuf` and `cbuf` are untouched until their receives'
        // completions below; `ping` is never written and outlives the loop.
        unsafe {
            sep.recv(&mut sbuf, 1)?;
            cep.recv(&mut cbuf, 2)?;
            cep.send(&ping, 3, 0)?;
        }
        next_recv(&scq)?;
        // SAFETY: `sbuf` is untouched until this send's completion, read
        // before the next round reposts it.
        unsafe { sep.send(&sbuf, 4, 0) }?;
        next_recv(&ccq)?;
        next_send(&scq)?;
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

    // One-way stream with a window of posted receives and sends, in the
    // largest messages the provider takes, up to 64 KiB.
    let chunk_len = CHUNK.min(max_msg);
    let mut src_buf = KVec::with_capacity(chunk_len, GFP_KERNEL)?;
    src_buf.resize(chunk_len, 0x5a, GFP_KERNEL)?;
    let mut dst_buf = KVec::with_capacity(chunk_len * WINDOW, GFP_KERNEL)?;
    dst_buf.resize(chunk_len * WINDOW, 0, GFP_KERNEL)?;
    // Drain what the ping-pong left on the CQs (send completions).
    while ccq.read().is_ok() {}
    while scq.read().is_ok() {}
    let t0 = Instant::<Monotonic>::now();
    let (mut posted, mut received, mut sent, mut acked) = (0, 0, 0, 0);
    while posted < WINDOW.min(CHUNKS) {
        // SAFETY: The slot is reposted only after its completion.
        unsafe {
            sep.recv(
                &mut dst_buf[posted * chunk_len..(posted + 1) * chunk_len],
                posted,
            )
        }?;
        posted += 1;
    }
    while received < CHUNKS {
        while sent < CHUNKS && sent - acked < WINDOW {
            // SAFETY: `src_buf` is never written and lives until every
            // send's completion is read (after the loop).
            unsafe { cep.send(&src_buf, 0, 0) }?;
            sent += 1;
        }
        let c = scq.sread(WAIT_MS)?;
        received += 1;
        if posted < CHUNKS {
            let slot = c.context;
            let chunk = dst_buf
                .get_mut(slot * chunk_len..(slot + 1) * chunk_len)
                .ok_or(EIO)?;
            // SAFETY: The slot's receive just completed.
            unsafe { sep.recv(chunk, slot) }?;
            posted += 1;
        }
        while ccq.read().is_ok() {
            acked += 1;
        }
    }
    // The rest of the sends' completions, before the CQ serves RMA.
    while acked < sent {
        next(&ccq)?;
        acked += 1;
    }
    let us = t0.elapsed().as_micros_ceil().max(1);
    let bytes = (chunk_len * CHUNKS) as i64;
    pr_info!(
        "demo: stream {} B x {} = {} KiB in {} ms: {} MB/s\n",
        chunk_len,
        CHUNKS,
        bytes >> 10,
        us / 1000,
        bytes / us
    );
    if dst_buf.iter().any(|&b| b != 0x5a) {
        return Err(EIO);
    }
    if caps & sys::KFI_RMA != 0 {
        rma(&domain, &cep, &ccq)?;
    } else {
        pr_info!("demo: no RMA on this provider yet: RMA, commit and atomics skipped\n");
    }
    Ok(())
}

/// Registers `buf` on the server's domain with remote read and write.
///
/// # Safety
///
/// As for `Domain::register`: the region is dropped, not leaked.
unsafe fn register<'a>(domain: &'a Domain<'_>, buf: &'a mut [u8], flags: u64) -> Result<Mr<'a>> {
    // SAFETY: The caller's promise.
    unsafe { domain.register(buf, sys::KFI_REMOTE_READ | sys::KFI_REMOTE_WRITE, flags) }
}

/// RMA: writes and reads through a 16 MiB region of the server, a commit
/// to a persistent-memory region, an atomic fetch-add.
fn rma(domain: &Domain<'_>, cep: &Endpoint<'_>, ccq: &Cq<'_>) -> Result {
    const REGION: usize = 16 << 20;
    const OP: usize = 1 << 20;
    const ROUNDS: usize = 4;
    let mut target = KVVec::with_capacity(REGION, GFP_KERNEL)?;
    target.resize(REGION, 0, GFP_KERNEL)?;
    // SAFETY: The region is dropped at the end of this function.
    let region = unsafe { register(domain, &mut target, 0) }?;
    let key = region.key();
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
            for (i, chunk) in local.chunks_mut(OP).enumerate() {
                let addr = (i * OP) as u64;
                // SAFETY: Each chunk stays untouched until the round's
                // completions are read below.
                unsafe {
                    if read {
                        cep.read(chunk, addr, key, i)
                    } else {
                        cep.write(chunk, addr, key, i, 0)
                    }
                }?;
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
    drop(region);
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

    // Commit completion on a region registered as persistent memory.
    let mut pmem = KVec::with_capacity(4096, GFP_KERNEL)?;
    pmem.resize(4096, 0u8, GFP_KERNEL)?;
    // SAFETY: The region is dropped at the end of this function.
    let pregion = unsafe { register(domain, &mut pmem, sys::KFI_RMA_PMEM) }?;
    let pkey = pregion.key();
    let record = *b"journal record 42";
    // SAFETY: `record` lives until the completion read below.
    unsafe { cep.write(&record, 100, pkey, 0, sys::KFI_COMMIT_COMPLETE) }?;
    next(ccq)?;
    pr_info!(
        "demo: commit-complete write of {} B to a pmem region: persistent at the target before its completion\n",
        record.len()
    );

    // An atomic fetch-add on a counter in the same region.
    let five = 5u64;
    let mut old = 0u64;
    for _ in 0..2 {
        // SAFETY: The operand and result live until the completion read
        // right after.
        unsafe { cep.fetch_atomic_u64(sys::KFI_SUM, &five, &mut old, 0, pkey, 0) }?;
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
