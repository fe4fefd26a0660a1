// SPDX-License-Identifier: GPL-2.0

//! kfi_demo.ko: the demo of `make run`. At load it connects two kfi_sockets
//! endpoints over loopback through kfabric.ko, exchanges messages, and
//! prints what happened: the connection events with their private data, a
//! ping-pong latency and a one-way message throughput.

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
    drop(sep);
    drop(cep);
    drop(pep);
    Ok(())
}
