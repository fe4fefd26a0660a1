// SPDX-License-Identifier: GPL-2.0

//! The baselines: plain kernel TCP between two kernel sockets over
//! loopback, TCP_NODELAY on both, each side a work item (`spawn.rs`) that
//! makes blocking `kernel_sendmsg`/`kernel_recvmsg` calls, like a TCP_RR or
//! TCP_STREAM pair of threads; and the ping-pong of both sockets from one
//! work item, the floor where the receiver's TCP work runs inline in the
//! sender's call and nothing sleeps.

use kernel::{bindings, error::to_result, prelude::*, sync::Arc};

use crate::{
    ksock::{SockAddr, Socket},
    run::{cpu_now, span_ns, Back, Bufs, Cpus, Grave, Lat, Sample, Shape, Time},
    spawn::{join_both, spawn},
};

// Only pointers cross; `struct socket`'s opaque parts trip the lint.
#[allow(improper_ctypes)]
extern "C" {
    /// `kfi_bench_sock.c`: TCP_NODELAY and send/receive timeouts.
    fn kfi_bench_tune(sock: *mut bindings::socket, timeout_s: c_int);
}

/// Seconds a blocking send or receive of the baseline may take.
const TIMEOUT_S: c_int = 20;

/// Sets TCP_NODELAY and the timeouts on `s`.
fn tune(s: &Socket) {
    // SAFETY: A live socket (`Socket` invariant).
    unsafe { kfi_bench_tune(s.as_raw(), TIMEOUT_S) };
}

/// Sends all of `buf` with blocking `kernel_sendmsg` calls (one, unless
/// cut short); no allocation, unlike `Socket::send`.
fn send_all(s: &Socket, buf: &[u8]) -> Result {
    let mut sent = 0;
    while let Some(rest) = buf.get(sent..).filter(|r| !r.is_empty()) {
        let mut iov = bindings::kvec {
            iov_base: rest.as_ptr().cast_mut().cast(),
            iov_len: rest.len(),
        };
        let mut msg = bindings::msghdr {
            msg_flags: bindings::MSG_NOSIGNAL as c_uint,
            ..Default::default()
        };
        // SAFETY: A live socket; `iov` describes `rest`, which the call
        // only reads.
        let n = unsafe { bindings::kernel_sendmsg(s.as_raw(), &mut msg, &mut iov, 1, rest.len()) };
        to_result(n.min(0))?;
        if n == 0 {
            return Err(EPIPE);
        }
        sent += (n as usize).min(rest.len());
    }
    Ok(())
}

/// Fills `buf` from the stream (blocking `kernel_recvmsg` with
/// MSG_WAITALL).
fn recv_all(s: &Socket, buf: &mut [u8]) -> Result {
    let mut got = 0;
    while let Some(rest) = buf.get_mut(got..).filter(|r| !r.is_empty()) {
        match s.recv(rest, true)? {
            0 => return Err(ECONNRESET),
            n => got += n.min(rest.len()),
        }
    }
    Ok(())
}

/// A connected pair of tuned kernel sockets over loopback.
pub(crate) struct RawPair {
    c: Arc<Socket>,
    s: Arc<Socket>,
    _l: Socket,
}

/// Connects a raw pair through 127.0.0.1:`port`.
pub(crate) fn pair(port: u16) -> Result<RawPair> {
    let addr = SockAddr::v4([127, 0, 0, 1], port);
    let l = Socket::tcp(&addr)?;
    l.bind(&addr)?;
    l.listen(4)?;
    let c = Socket::tcp(&addr)?;
    c.connect(&addr)?;
    let s = l.accept(false)?;
    tune(&c);
    tune(&s);
    Ok(RawPair {
        c: Arc::new(c, GFP_KERNEL)?,
        s: Arc::new(s, GFP_KERNEL)?,
        _l: l,
    })
}

/// Runs `body` as a side of a run on `sock`; a failed side shuts its
/// socket down so that the peer's blocking calls return at once.
fn side<T>(sock: &Socket, mut bufs: Bufs, body: impl FnOnce(&mut Bufs) -> Result<T>) -> Back<T> {
    let first = cpu_now();
    let res = body(&mut bufs);
    let cpus = Cpus {
        first,
        last: cpu_now(),
    };
    if res.is_err() {
        sock.shutdown();
    }
    // Every socket call has returned: nothing uses the buffers any more.
    Back {
        bufs,
        res,
        busy: false,
        cpus,
    }
}

/// Two-thread ping-pong: the client sends operation `i` of the source and
/// waits for it to come back into operation `i` of the destination; the
/// server echoes. Round-trip times per operation.
pub(crate) fn pingpong(
    p: &RawPair,
    sh: Shape,
    bufs: Bufs,
    g: &mut Grave,
) -> Result<(Bufs, Sample)> {
    let echo = Bufs {
        src: VVec::new(),
        dst: crate::pattern::buffer(sh.size, None)?,
    };
    let s = p.s.clone();
    let server = spawn(move || {
        side(&s, echo, |b| {
            for _ in 0..sh.iters {
                recv_all(&s, &mut b.dst)?;
                send_all(&s, &b.dst)?;
            }
            Ok(())
        })
    })?;
    let c = p.c.clone();
    let client = spawn(move || {
        side(&c, bufs, |b| {
            let mut rtt = KVec::with_capacity(sh.iters, GFP_KERNEL)?;
            let t0 = Time::now();
            for i in 0..sh.iters {
                let t = Time::now();
                send_all(&c, sh.op(&b.src, i)?)?;
                recv_all(&c, sh.op_mut(&mut b.dst, i)?)?;
                rtt.push(span_ns(t, &[Time::now()]), GFP_KERNEL)?;
            }
            Ok((span_ns(t0, &[Time::now()]), Lat::of(&mut rtt)))
        })
    });
    let (cb, sb) = join_both(client, server, |j| {
        p.s.shutdown();
        j.join();
    })?;
    let (bufs, (ns, lat), cc) = g.sort(cb)?;
    let (_, (), sc) = g.sort(sb)?;
    let cpus = [Some(cc), Some(sc)];
    Ok((bufs, Sample { ns, lat, cpus }))
}

/// The same-thread floor: one work item drives both sockets (send on the
/// client, receive and echo on the server, receive on the client).
pub(crate) fn pingpong_one_thread(
    p: &RawPair,
    sh: Shape,
    bufs: Bufs,
    g: &mut Grave,
) -> Result<(Bufs, Sample)> {
    let (c, s) = (p.c.clone(), p.s.clone());
    let mut echo = crate::pattern::buffer(sh.size, None)?;
    let j = spawn(move || {
        side(&c, bufs, |b| {
            let mut rtt = KVec::with_capacity(sh.iters, GFP_KERNEL)?;
            let t0 = Time::now();
            for i in 0..sh.iters {
                let t = Time::now();
                send_all(&c, sh.op(&b.src, i)?)?;
                recv_all(&s, &mut echo)?;
                send_all(&s, &echo)?;
                recv_all(&c, sh.op_mut(&mut b.dst, i)?)?;
                rtt.push(span_ns(t, &[Time::now()]), GFP_KERNEL)?;
            }
            Ok((span_ns(t0, &[Time::now()]), Lat::of(&mut rtt)))
        })
    })?;
    let (bufs, (ns, lat), c) = g.sort(j.join())?;
    let cpus = [Some(c), None];
    Ok((bufs, Sample { ns, lat, cpus }))
}

/// One-way stream: the sender sends the operations of the source back to
/// back, the receiver receives each into its place in the destination.
pub(crate) fn stream(p: &RawPair, sh: Shape, bufs: Bufs, g: &mut Grave) -> Result<(Bufs, Sample)> {
    let (src, dst) = bufs.split();
    let s = p.s.clone();
    let receiver = spawn(move || {
        side(&s, dst, |b| {
            for i in 0..sh.iters {
                recv_all(&s, sh.op_mut(&mut b.dst, i)?)?;
            }
            Ok(Time::now())
        })
    })?;
    let c = p.c.clone();
    let sender = spawn(move || {
        side(&c, src, |b| {
            let t0 = Time::now();
            for i in 0..sh.iters {
                send_all(&c, sh.op(&b.src, i)?)?;
            }
            Ok((t0, Time::now()))
        })
    });
    let (sb, rb) = join_both(sender, receiver, |j| {
        p.s.shutdown();
        j.join();
    })?;
    let (src, (t0, sent), sc) = g.sort(sb)?;
    let (dst, received, rc) = g.sort(rb)?;
    Ok((
        Bufs::rejoin(src, dst),
        Sample::stream(t0, [sent, received], [sc, rc]),
    ))
}
