// SPDX-License-Identifier: GPL-2.0

//! The ping-pong runs of [`super`]: two work items, one per endpoint, as
//! the raw two-thread ping-pong; and one work item driving both, the
//! floor that measures the provider's CPU work per round trip.

use kernel::{prelude::*, sync::Arc};

use super::{post_recv, post_send, reap, send_flags, side, tracks, Kind, Pair, Track};
use crate::{
    run::{span_ns, Bufs, Grave, Lat, Sample, Shape, Time},
    spawn::{join_both, spawn},
};

/// Two-thread ping-pong: the client sends operation `i` of the source and
/// posts a receive for the echo into operation `i` of the destination;
/// the server echoes it from one of two receive slots, then posts its next
/// receive. Both sides make their calls in the raw row's order (send,
/// then receive), so that posting a receive is on the round trip's path
/// no more than a raw `recvmsg` call is (a message that came first would
/// wait for its receive). Round-trip times per operation, from the send
/// to the receive's completion.
pub(crate) fn pingpong(
    p: &Arc<Pair>,
    sh: Shape,
    bufs: Bufs,
    g: &mut Grave,
) -> Result<(Bufs, Sample)> {
    let inject = send_flags(p, sh.size) != 0;
    let slots = Bufs {
        src: VVec::new(),
        dst: crate::pattern::buffer(sh.size.checked_mul(2).ok_or(EINVAL)?, None)?,
    };
    let ps = p.clone();
    let server = spawn(move || {
        let t = tracks(sh, (Kind::Recv, false), (Kind::Send, inject));
        side(slots, t, |b, recv, send| {
            echo(&ps, sh, &mut b.dst, recv, send)
        })
    })?;
    let pc = p.clone();
    let client = spawn(move || {
        let t = tracks(sh, (Kind::Recv, false), (Kind::Send, inject));
        side(bufs, t, |b, recv, send| ping(&pc, sh, b, recv, send))
    });
    // Alone, the server gives up at its CQ timeout.
    let (cb, sb) = join_both(client, server, |j| {
        let _ = g.sort(j.join());
    })?;
    let r = g.sort(cb);
    let (_, (), sc) = g.sort(sb)?;
    let (bufs, (ns, lat), cc) = r?;
    let cpus = [Some(cc), Some(sc)];
    Ok((bufs, Sample { ns, lat, cpus }))
}

/// The client of [`pingpong`].
fn ping(
    p: &Pair,
    sh: Shape,
    b: &mut Bufs,
    recv: &mut Track,
    send: &mut Track,
) -> Result<(i64, Option<Lat>)> {
    let flags = send_flags(p, sh.size);
    let mut rtt = KVec::with_capacity(sh.iters, GFP_KERNEL)?;
    let t0 = Time::now();
    for i in 0..sh.iters {
        // A ring's slot: its last send must be done before it is restamped
        // (its receive is, the round trip before).
        while sh.before(i).is_some_and(|last| send.done <= last) {
            reap(&p.ccq, &mut [&mut *recv, &mut *send])?;
        }
        // SAFETY: The slots' last operations have completed (above), and
        // they are borrowed here.
        unsafe {
            crate::pattern::before_send(sh, i, sh.op_mut(&mut b.src, i)?.as_mut_ptr())?;
            crate::pattern::before_recv(sh, i, sh.op(&b.dst, i)?.as_ptr(), true)?;
        }
        let t = Time::now();
        // SAFETY: The source is not written while a send of it is in
        // flight (above); the side keeps its buffers while operations are
        // in flight (`side`, `Grave`).
        unsafe { post_send(&p.cep, sh.op(&b.src, i)?, Kind::Send.context(i), flags) }?;
        send.posted();
        // SAFETY: Operation `i` of the destination is used by nothing else
        // until this receive completes; kept as above.
        unsafe { post_recv(&p.cep, sh.op_mut(&mut b.dst, i)?, Kind::Recv.context(i)) }?;
        recv.posted();
        while recv.done <= i {
            reap(&p.ccq, &mut [&mut *recv, &mut *send])?;
        }
        rtt.push(span_ns(t, &[Time::now()]), GFP_KERNEL)?;
    }
    let ns = span_ns(t0, &[Time::now()]);
    while send.in_flight() > 0 {
        reap(&p.ccq, &mut [&mut *recv, &mut *send])?;
    }
    Ok((ns, Lat::of(&mut rtt)))
}

/// The same-thread floor of [`pingpong`], as `raw_pingpong_1thread` is
/// of the raw one: one work item drives both endpoints (the client's
/// receive and send, the server's echo from one of two slots, the
/// client's receive), so no round trip waits for a wakeup and the time is
/// the CPU work of the provider's path and of TCP.
pub(crate) fn pingpong_one_thread(
    p: &Arc<Pair>,
    sh: Shape,
    bufs: Bufs,
    g: &mut Grave,
) -> Result<(Bufs, Sample)> {
    let inject = send_flags(p, sh.size) != 0;
    let pc = p.clone();
    let j = spawn(move || {
        let t = tracks(sh, (Kind::Recv, false), (Kind::Send, inject));
        side(bufs, t, |b, recv, send| {
            let (mut srecv, mut ssend) = tracks(sh, (Kind::Recv, false), (Kind::Send, inject))?;
            let mut slots = crate::pattern::buffer(sh.size.checked_mul(2).ok_or(EINVAL)?, None)?;
            let r = one_thread(&pc, sh, b, &mut slots, [recv, send, &mut srecv, &mut ssend]);
            if r.is_err() && srecv.in_flight() + ssend.in_flight() > 0 {
                // The server's slots may still be written: never freed.
                core::mem::forget(slots);
            }
            r
        })
    })?;
    let (bufs, (ns, lat), c) = g.sort(j.join())?;
    Ok((
        bufs,
        Sample {
            ns,
            lat,
            cpus: [Some(c), None],
        },
    ))
}

/// The body of [`pingpong_one_thread`]; `t` tracks the client's receives
/// and sends, then the server's.
fn one_thread(
    p: &Pair,
    sh: Shape,
    b: &mut Bufs,
    slots: &mut [u8],
    t: [&mut Track; 4],
) -> Result<(i64, Option<Lat>)> {
    let [recv, send, srecv, ssend] = t;
    let flags = send_flags(p, sh.size);
    let slot = Shape { iters: 2, ..sh };
    let mut rtt = KVec::with_capacity(sh.iters, GFP_KERNEL)?;
    let t0 = Time::now();
    for i in 0..sh.iters {
        // The server's slot for echo `i` held echo `i - 2`: it must be
        // sent; the client's send `i - 1` too (its buffer is restamped).
        while ssend.done + 1 < i || (i > 0 && send.done < i) {
            reap_any(p, [&mut *recv, &mut *send, &mut *srecv, &mut *ssend])?;
        }
        // SAFETY: Nothing uses this source or destination operation now
        // (above); the side keeps its buffers while operations are in
        // flight.
        unsafe {
            crate::pattern::before_send(sh, i, sh.op_mut(&mut b.src, i)?.as_mut_ptr())?;
            crate::pattern::before_recv(sh, i, sh.op(&b.dst, i)?.as_ptr(), true)?;
        }
        let t = Time::now();
        // SAFETY: The slot's echo two rounds ago was sent (above); the
        // client's operation `i` is used by nothing else until it
        // completes; all are kept while in flight (`side`, `Grave`).
        unsafe {
            post_recv(&p.sep, slot.op_mut(slots, i % 2)?, Kind::Recv.context(i))?;
            srecv.posted();
            post_recv(&p.cep, sh.op_mut(&mut b.dst, i)?, Kind::Recv.context(i))?;
            recv.posted();
            post_send(&p.cep, sh.op(&b.src, i)?, Kind::Send.context(i), flags)?;
            send.posted();
        }
        while srecv.done <= i {
            reap(&p.scq, &mut [&mut *srecv, &mut *ssend])?;
        }
        // SAFETY: The slot is not written again before this send completes
        // (checked at the top two rounds on).
        unsafe { post_send(&p.sep, slot.op(slots, i % 2)?, Kind::Send.context(i), flags) }?;
        ssend.posted();
        while recv.done <= i {
            reap(&p.ccq, &mut [&mut *recv, &mut *send])?;
        }
        rtt.push(span_ns(t, &[Time::now()]), GFP_KERNEL)?;
    }
    let ns = span_ns(t0, &[Time::now()]);
    while send.in_flight() + ssend.in_flight() > 0 {
        reap_any(p, [&mut *recv, &mut *send, &mut *srecv, &mut *ssend])?;
    }
    Ok((ns, Lat::of(&mut rtt)))
}

/// Reaps a completion of the client's (`t[0..2]`) if one is due, else of
/// the server's.
fn reap_any(p: &Pair, t: [&mut Track; 4]) -> Result {
    let [recv, send, srecv, ssend] = t;
    if recv.in_flight() + send.in_flight() > 0 {
        reap(&p.ccq, &mut [recv, send])
    } else {
        reap(&p.scq, &mut [srecv, ssend])
    }
}

/// The server of [`pingpong`]: receives into slot `i % 2` of `slots`,
/// echoes, then posts the next receive into the other slot (the client
/// sends the next message only once it has the echo).
fn echo(p: &Pair, sh: Shape, slots: &mut [u8], recv: &mut Track, send: &mut Track) -> Result {
    let flags = send_flags(p, sh.size);
    let slot = Shape { iters: 2, ..sh };
    // SAFETY: Slot 0 is used by nothing else until the receive completes;
    // the side keeps its buffers while operations are in flight.
    unsafe { post_recv(&p.sep, slot.op_mut(slots, 0)?, Kind::Recv.context(0)) }?;
    recv.posted();
    for i in 0..sh.iters {
        while recv.done <= i {
            reap(&p.scq, &mut [&mut *recv, &mut *send])?;
        }
        // SAFETY: The slot is not written again before this send completes
        // (checked below before the next receive into it).
        unsafe { post_send(&p.sep, slot.op(slots, i % 2)?, Kind::Send.context(i), flags) }?;
        send.posted();
        if i + 1 < sh.iters {
            // The other slot held echo `i - 1`: it must be sent.
            while send.done < i {
                reap(&p.scq, &mut [&mut *recv, &mut *send])?;
            }
            // SAFETY: Nothing uses the other slot now (its echo was sent); the side
            // keeps its buffers while operations are in flight.
            unsafe {
                post_recv(
                    &p.sep,
                    slot.op_mut(slots, (i + 1) % 2)?,
                    Kind::Recv.context(i + 1),
                )
            }?;
            recv.posted();
        }
    }
    while send.in_flight() > 0 {
        reap(&p.scq, &mut [&mut *recv, &mut *send])?;
    }
    Ok(())
}
