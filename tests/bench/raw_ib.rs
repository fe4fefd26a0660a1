// SPDX-License-Identifier: GPL-2.0

//! The baseline of the kfi_ibverbs rows: raw ib_core verbs over the same
//! soft RDMA device (siw, rxe) on an RC QP pair (`ib_pair.rs`), with work
//! requests posted and completed in the shapes of the kfi runs: a send
//! ping-pong, and `IB_WR_SEND`, `IB_WR_RDMA_WRITE` and `IB_WR_RDMA_READ`
//! with `win` in flight.

use kernel::{prelude::*, sync::Arc};

use crate::{
    ib::dma,
    ib_pair::{Area, IbPair, RECV_DEPTH},
    ib_ring::Ring,
    kfi_runs::Kind,
    pattern::{before_recv, before_send},
    run::{cpu_now, span_ns, Bufs, Cpus, Lat, Sample, Shape, Time},
    spawn::{join_both, spawn},
};

/// Two-thread send ping-pong, as `kfi_runs::pingpong`: the client posts a
/// receive into operation `i` of the destination and sends operation `i`
/// of the source; the server echoes it from one of two slots, the next
/// receive posted before the echo. The server's first receive is posted
/// before either side starts.
pub(crate) fn pingpong(p: &Arc<IbPair>, sh: Shape, bufs: &mut Bufs) -> Result<Sample> {
    p.load(sh, bufs)?;
    let slot = Shape { iters: 2, ..sh };
    let r = (|| {
        // SAFETY: The slot is the pair's mapped memory, used by nothing
        // else until the receive completes; the pair outlives its QPs'
        // requests (field order).
        unsafe { dma::post_recv(p.server.qp(), p.sge(Area::Slot, slot, 0)?, p.sdone.rq_cqe()) }?;
        let ps = p.clone();
        let server = spawn(move || side(|| echo(&ps, sh)))?;
        let pc = p.clone();
        let client = spawn(move || side(|| ping(&pc, sh)));
        // Alone, the server gives up at its deadline.
        let (c, s) = join_both(client, server, |j| {
            let _ = j.join();
        })?;
        let ((), sc) = s?;
        let ((ns, lat), cc) = c?;
        Ok(Sample {
            ns,
            lat,
            cpus: [Some(cc), Some(sc)],
        })
    })();
    let s = p.finish(r)?;
    p.unload(sh, bufs)?;
    Ok(s)
}

/// Runs a side's body and notes the CPUs it started and ended on.
fn side<T>(body: impl FnOnce() -> Result<T>) -> Result<(T, Cpus)> {
    let first = cpu_now();
    let v = body()?;
    Ok((
        v,
        Cpus {
            first,
            last: cpu_now(),
        },
    ))
}

/// The client of [`pingpong`].
fn ping(p: &IbPair, sh: Shape) -> Result<(i64, Option<Lat>)> {
    let qp = p.client.qp();
    let d = &p.cdone;
    let mut rtt = KVec::with_capacity(sh.iters, GFP_KERNEL)?;
    let t0 = Time::now();
    for i in 0..sh.iters {
        // A ring's slot: its last send must be done before it is restamped
        // (its receive is, the round trip before).
        if let Some(last) = sh.before(i) {
            d.wait(last + 1, 0)?;
        }
        // SAFETY: The slots' last operations have completed (above), and
        // nothing else uses them; they lie in the pair's memory.
        unsafe {
            before_send(sh, i, p.ptr(Area::Src, sh, i)?)?;
            before_recv(sh, i, p.ptr(Area::Dst, sh, i)?, true)?;
        }
        let t = Time::now();
        // SAFETY: Operation `i` of the destination is only this receive's until it completes,
        // the source is not written while a send of it is in flight (above); both are the
        // pair's mapped memory, which outlives its QPs' requests.
        unsafe {
            dma::post_recv(qp, p.sge(Area::Dst, sh, i)?, d.rq_cqe())?;
            dma::post_send(qp, p.sge(Area::Src, sh, i)?, d.sq_cqe())?;
        }
        d.wait(0, i + 1)?;
        rtt.push(span_ns(t, &[Time::now()]), GFP_KERNEL)?;
    }
    let ns = span_ns(t0, &[Time::now()]);
    d.wait(sh.iters, sh.iters)?;
    Ok((ns, Lat::of(&mut rtt)))
}

/// The server of [`pingpong`]: its first receive is posted.
fn echo(p: &IbPair, sh: Shape) -> Result {
    let qp = p.server.qp();
    let d = &p.sdone;
    let slot = Shape { iters: 2, ..sh };
    for i in 0..sh.iters {
        d.wait(0, i + 1)?;
        if i + 1 < sh.iters {
            // The other slot held echo `i - 1`: it must be sent.
            d.wait(i, 0)?;
            // SAFETY: Nothing uses the other slot now; the pair's memory
            // outlives its QPs' requests.
            unsafe { dma::post_recv(qp, p.sge(Area::Slot, slot, (i + 1) % 2)?, d.rq_cqe()) }?;
        }
        // SAFETY: The slot is not written again before this send completes
        // (waited for above before the next receive into it).
        unsafe { dma::post_send(qp, p.sge(Area::Slot, slot, i % 2)?, d.sq_cqe()) }?;
    }
    d.wait(sh.iters, sh.iters)
}

/// Bandwidth runs, as `kfi_runs::stream`: sends, RDMA writes into the
/// destination's regions or RDMA reads from the source's, `sh.win` in
/// flight, in the slots of a [`Ring`] made for the run; operation `i`
/// of the source lands in operation `i` of the destination.
pub(crate) fn stream(p: &Arc<IbPair>, kind: Kind, sh: Shape, bufs: &mut Bufs) -> Result<Sample> {
    if sh.win == 0 || sh.iters > RECV_DEPTH {
        return Err(EINVAL);
    }
    p.start(sh)?;
    // The pair's device stays registered while the pair lives (rdma_cm's
    // removal waits for its identifiers).
    // SAFETY: So the device outlives the ring, dropped (or leaked) here;
    // the server's QP is of the pair's PD, drained when the pair drops it.
    let ring = unsafe { Ring::new(p.client.id.device(), &p.pd, p.server.qp(), sh, p.region) }?;
    ring.load(bufs)?;
    let ring = Arc::new(ring, GFP_KERNEL)?;
    let r = (|| {
        if kind != Kind::Send {
            let (pc, rc) = (p.clone(), ring.clone());
            let (ns, c) = spawn(move || side(|| rma(&pc, &rc, kind, sh)))?.join()?;
            return Ok(Sample {
                ns,
                lat: None,
                cpus: [Some(c), None],
            });
        }
        let posted = sh.slots();
        for i in 0..posted {
            // SAFETY: Slot `i` of the destination is used by nothing else
            // until the receive completes; the ring outlives the QPs'
            // requests (leaked if the run fails).
            unsafe { dma::post_recv(p.server.qp(), ring.sge(false, i)?, p.sdone.rq_cqe()) }?;
        }
        p.cdone.credit(posted);
        let (ps, rs) = (p.clone(), ring.clone());
        let receiver = spawn(move || side(|| receive(&ps, &rs, sh)))?;
        let (pc, rc) = (p.clone(), ring.clone());
        let sender = spawn(move || side(|| transmit(&pc, &rc, sh)));
        let (s, r) = join_both(sender, receiver, |j| {
            let _ = j.join();
        })?;
        let (received, rc) = r?;
        let ((t0, sent), sc) = s?;
        Ok(Sample::stream(t0, [sent, received], [sc, rc]))
    })();
    match p.finish(r) {
        Ok(s) => {
            ring.unload(bufs)?;
            Ok(s)
        }
        Err(e) => {
            // Requests may still use the slots: never freed.
            core::mem::forget(ring);
            Err(e)
        }
    }
}

/// Posts operations with `post(i)` on the client's send queue, `sh.win`
/// in flight, until all have completed.
fn windowed(p: &IbPair, sh: Shape, post: impl Fn(usize) -> Result) -> Result {
    let d = &p.cdone;
    let mut posted = 0;
    loop {
        let done = d.sq_done();
        if done >= sh.iters {
            return Ok(());
        }
        while posted < sh.iters && posted - done.min(posted) < sh.win {
            post(posted)?;
            posted += 1;
        }
        d.wait(done + 1, 0)?;
    }
}

/// The sender of a send/recv run: its start and end. Send `i` waits until
/// receive `i` is posted.
fn transmit(p: &IbPair, ring: &Ring, sh: Shape) -> Result<(Time, Time)> {
    let qp = p.client.qp();
    let t0 = Time::now();
    windowed(p, sh, |i| {
        p.cdone.wait_for(0, 0, i + 1)?;
        // SAFETY: The slot's last send has completed (fewer than the slots
        // are in flight, completed in order); the ring outlives the QPs'
        // requests.
        unsafe {
            before_send(sh, i, ring.ptr(true, i)?)?;
            dma::post_send(qp, ring.sge(true, i)?, p.cdone.sq_cqe())
        }
    })?;
    Ok((t0, Time::now()))
}

/// The receiver of a send/recv run: each receive checked and its slot
/// posted again for the operation that takes it next; its end.
fn receive(p: &IbPair, ring: &Ring, sh: Shape) -> Result<Time> {
    let d = &p.sdone;
    let slots = sh.slots();
    for i in 0..sh.iters {
        d.wait(0, i + 1)?;
        let next = i + slots;
        if next < sh.iters {
            // SAFETY: Receive `i` has completed and nothing else uses its
            // slot until receive `next` is posted into it; the ring
            // outlives the QPs' requests.
            unsafe {
                before_recv(sh, next, ring.ptr(false, next)?, true)?;
                dma::post_recv(p.server.qp(), ring.sge(false, next)?, d.rq_cqe())?;
            }
            p.cdone.credit(next + 1);
        }
    }
    Ok(Time::now())
}

/// An RDMA write or read run from the client: nanoseconds from the first
/// post to the last completion.
fn rma(p: &IbPair, ring: &Ring, kind: Kind, sh: Shape) -> Result<i64> {
    let qp = p.client.qp();
    let read = kind == Kind::Read;
    let t0 = Time::now();
    windowed(p, sh, |i| {
        // The local slot is the destination's for a read, the source's for
        // a write; the remote one the other.
        let mut sge = [ring.sge(!read, i)?];
        let (at, rkey) = ring.remote(read, i)?;
        let (src, dst) = (ring.ptr(true, i)?, ring.ptr(false, i)?);
        // SAFETY: The slots' last operation has completed (fewer than the
        // slots are in flight) and nothing else uses them until this one
        // does; the ring outlives the QPs' requests.
        unsafe {
            before_send(sh, i, src)?;
            before_recv(sh, i, dst, read)?;
            dma::post_rdma(qp, read, &mut sge, at, rkey, p.cdone.sq_cqe())
        }
    })?;
    Ok(span_ns(t0, &[Time::now()]))
}
