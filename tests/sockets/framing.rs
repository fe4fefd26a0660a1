// SPDX-License-Identifier: GPL-2.0

//! `kfi_sockets_framing`: frames cut anywhere by TCP. kfi_sockets handles
//! whole frames in the socket's data callback and hands a frame that is
//! not whole yet (its header read, or not even that) to the receive work
//! (`prov/sockets/rx/soft.rs`). A raw kernel-socket peer sends messages
//! in pieces cut inside headers and payloads, and many frames in one
//! piece; every message must reach its posted receive whole, in order,
//! truncated where the receive is short, and be acknowledged when asked.
//! RMA writes likewise: each is placed exactly where its descriptors say,
//! a refused one is answered with its errno and writes nothing, whether
//! it arrives whole or cut.

use kernel::{
    prelude::*,
    time::{delay::fsleep, Delta},
};

use super::{
    frame,
    kfi::{kfabric::Owned, kfi_sys as sys},
    ksock::Socket,
    net::*,
    wire::{flags, Hdr, Op, RmaDesc, HDR_LEN},
};

use super::hostile_peers::*;

/// Bytes of every posted receive.
const RECV_LEN: usize = 256;

/// The payload byte `i` of message `m`: differs between messages and
/// offsets, so a misplaced byte shows.
pub(super) fn pattern(m: usize, i: usize) -> u8 {
    (m.wrapping_mul(31) ^ i.wrapping_mul(7) ^ (i >> 8)) as u8
}

/// Appends message `m` of `len` bytes (acknowledged if `acked`, with id
/// `1000 + m`) to `stream`.
pub(super) fn push_msg(stream: &mut KVec<u8>, m: usize, len: usize, acked: bool) -> Result {
    let mut h = Hdr::new(Op::Msg, 1000 + m as u64, len as u64);
    if acked {
        h.flags |= flags::DELIVERY_COMPLETE;
    }
    stream.extend_from_slice(&h.encode(), GFP_KERNEL)?;
    for i in 0..len {
        stream.push(pattern(m, i), GFP_KERNEL)?;
    }
    Ok(())
}

/// Posts receives `first..first + n` of [`RECV_LEN`] bytes into `bufs`
/// (receive `i` at `i * RECV_LEN`, context `100 + i`).
fn post_receives(ep: &Owned<sys::kfid_ep>, bufs: &mut [u8], first: usize, n: usize) -> Result {
    let chunks = bufs.chunks_mut(RECV_LEN).enumerate().skip(first);
    for (i, b) in chunks.take(n) {
        let v = kvec_mut(b);
        // SAFETY: An open endpoint; the buffers outlive it (the callers
        // declare them first).
        let r = unsafe { rc(ep.recvmsg(&msg(&v, 100 + i, 0), 0)) };
        ensure!(r == 0, "receive {} not posted: {}", i, r);
    }
    Ok(())
}

/// Checks that message `m` of `len` bytes reached receive `m` whole or
/// cut to [`RECV_LEN`] (an `EMSGSIZE` error entry then), in order.
fn check_received(c: &Owned<sys::kfid_cq>, bufs: &[u8], m: usize, len: usize) -> Result {
    let placed = len.min(RECV_LEN);
    if len > RECV_LEN {
        let err = cq_error(c, 5000)?;
        ensure!(
            err.op_context as usize == 100 + m && err.err == EMSGSIZE.to_errno().abs(),
            "message {}: error entry of {} with {}",
            m,
            err.op_context as usize,
            err.err
        );
        ensure!(
            err.olen == len - RECV_LEN,
            "message {}: olen {}",
            m,
            err.olen
        );
    } else {
        check_completion(c, m, placed)?;
    }
    let got = bufs
        .get(m * RECV_LEN..m * RECV_LEN + placed)
        .ok_or(EINVAL)?;
    for (i, &b) in got.iter().enumerate() {
        ensure!(
            b == pattern(m, i),
            "message {}: byte {} is {:#x}, not {:#x}",
            m,
            i,
            b,
            pattern(m, i)
        );
    }
    Ok(())
}

/// Checks that message `m` completed receive `m` with `len` bytes.
fn check_completion(c: &Owned<sys::kfid_cq>, m: usize, len: usize) -> Result {
    let mut e = sys::kfi_cq_data_entry::default();
    let r = sread_ms(c, &mut e, 5000);
    ensure!(r == 1, "message {} not received: {}", m, r);
    ensure!(
        e.op_context as usize == 100 + m && e.len == len,
        "message {}: completion of {} with {} bytes",
        m,
        e.op_context as usize,
        e.len
    );
    ensure!(
        e.flags & sys::KFI_RECV != 0,
        "message {}: flags {:#x}",
        m,
        e.flags
    );
    Ok(())
}

/// Reads the acknowledgement of message `m` from the raw peer.
pub(super) fn check_ack(raw: &Socket, m: usize) -> Result {
    ensure!(wait_readable(raw, 5000), "no acknowledgement of {}", m);
    let h = frame::recv_hdr(raw)?;
    ensure!(
        h.op == Op::Ack && h.id == 1000 + m as u64 && h.data == 0,
        "message {}: answer {:?} for {} status {}",
        m,
        h.op,
        h.id,
        h.data
    );
    Ok(())
}

/// Checks that `got` holds message `m`'s payload ([`pattern`]).
pub(super) fn check_pattern(got: &[u8], m: usize) -> Result {
    let bad = got
        .iter()
        .enumerate()
        .position(|(i, &x)| x != pattern(m, i));
    ensure!(bad.is_none(), "message {}: byte {:?} differs", m, bad);
    Ok(())
}

/// Sends `stream` in pieces of the sizes in `cuts`, over and over, with a
/// pause after each so that they tend to arrive as segments of their own.
fn send_cut(raw: &Socket, stream: &[u8], cuts: &[usize]) -> Result {
    let mut at = 0;
    let mut k = 0;
    while at < stream.len() {
        let n = cuts[k % cuts.len()].min(stream.len() - at);
        let sent = raw.send(&[&stream[at..at + n]])?;
        ensure!(sent == n, "sent {} of {}", sent, n);
        at += n;
        k += 1;
        fsleep(Delta::from_millis(2));
    }
    Ok(())
}

/// Bytes of the region the write tests target.
const REGION_LEN: usize = 4096;

/// One RMA write of the write tests: id `2000 + w`, its descriptors and
/// the status its `Ack` must carry (0, or the positive errno).
struct WriteCase {
    descs: KVec<RmaDesc>,
    status: u64,
}

/// Appends write `w` with descriptors `descs` to `stream`: its payload is
/// `pattern(w, i)` for the descriptors' total length.
pub(super) fn push_write(stream: &mut KVec<u8>, w: usize, descs: &[RmaDesc]) -> Result {
    push_write_with(stream, w, descs, 0)
}

/// [`push_write`] with the header's `flags`.
fn push_write_with(stream: &mut KVec<u8>, w: usize, descs: &[RmaDesc], fl: u16) -> Result {
    let len: u64 = descs.iter().map(|d| d.len).sum();
    let mut h = Hdr::new(Op::Write, 2000 + w as u64, len);
    h.rma_count = descs.len() as u8;
    h.flags |= fl;
    stream.extend_from_slice(&h.encode(), GFP_KERNEL)?;
    for d in descs {
        stream.extend_from_slice(&d.encode(), GFP_KERNEL)?;
    }
    for i in 0..len as usize {
        stream.push(pattern(w, i), GFP_KERNEL)?;
    }
    Ok(())
}

/// What the region must hold after `cases` were written into it (it was
/// all zeros): the accepted writes' payloads where their descriptors say.
fn expected_region(cases: &[WriteCase]) -> Result<KVec<u8>> {
    let mut want = KVec::new();
    want.resize(REGION_LEN, 0u8, GFP_KERNEL)?;
    for (w, c) in cases.iter().enumerate().filter(|(_, c)| c.status == 0) {
        let mut i = 0;
        for d in c.descs.iter() {
            let at = d.addr as usize;
            for b in want.get_mut(at..at + d.len as usize).ok_or(EINVAL)? {
                *b = pattern(w, i);
                i += 1;
            }
        }
    }
    Ok(want)
}

/// Runs `body` against a server endpoint on `port` (`portnum`) with a
/// zeroed region of [`REGION_LEN`] bytes open for remote writes: `body`
/// gets the raw client, the region's key and its bytes (to check with
/// [`check_region`] once the writes are answered). Closes everything.
fn with_write_target(
    port: &core::ffi::CStr,
    portnum: u16,
    body: impl FnOnce(&Socket, u64, &[u8]) -> Result,
) -> Result {
    let mut buf = KVec::new();
    buf.resize(REGION_LEN, 0u8, GFP_KERNEL)?;
    let n = net(port)?;
    let pep = listen(&n)?;
    let c = cq(&n)?;
    let mr = region(&n, &mut buf, sys::KFI_REMOTE_WRITE, 0)?;
    let k = key(&mr);
    let (raw, sep) = raw_client(&n, portnum, &c)?;
    let outcome = body(&raw, k, &buf);
    drop(sep);
    drop(raw);
    drop(mr);
    drop(pep);
    drop(buf);
    outcome
}

/// Fails unless `region` holds what `cases` wrote into it (it was all
/// zeros).
fn check_region(region: &[u8], cases: &[WriteCase]) -> Result {
    let want = expected_region(cases)?;
    let bad = region.iter().zip(want.iter()).position(|(a, b)| a != b);
    ensure!(bad.is_none(), "region byte {:?} differs", bad);
    Ok(())
}

/// The body of `answers_do_not_wait_for_a_frame_not_whole` and its
/// commit twin, on `port` (`portnum`), the writes' headers with flags
/// `fl`.
fn answers_before_the_rest(port: &core::ffi::CStr, portnum: u16, fl: u16) -> Result {
    const WRITES: usize = 5;
    const LEN: u64 = 200;
    with_write_target(port, portnum, |raw, k, bytes| {
        let mut cases = KVec::new();
        let mut stream = KVec::new();
        for w in 0..WRITES {
            let mut descs = KVec::new();
            let d = RmaDesc {
                addr: w as u64 * LEN,
                len: LEN,
                key: k,
            };
            descs.push(d, GFP_KERNEL)?;
            push_write_with(&mut stream, w, &descs, fl)?;
            cases.push(WriteCase { descs, status: 0 }, GFP_KERNEL)?;
        }
        let cut = stream.len() - LEN as usize / 2;
        let sent = raw.send(&[&stream[..cut]])?;
        ensure!(sent == cut, "sent {} of {}", sent, cut);
        check_write_acks(raw, &cases[..WRITES - 1], 0)?;
        let sent = raw.send(&[&stream[cut..]])?;
        ensure!(sent == stream.len() - cut, "sent {} of the rest", sent);
        check_write_acks(raw, &cases[WRITES - 1..], WRITES - 1)?;
        check_region(bytes, &cases)
    })
}

/// Reads the answers to `cases` from the raw peer: one `Ack` each, in
/// order, with the expected status; the first is write `first`'s.
fn check_write_acks(raw: &Socket, cases: &[WriteCase], first: usize) -> Result {
    for (w, c) in cases.iter().enumerate().map(|(i, c)| (first + i, c)) {
        ensure!(wait_readable(raw, 5000), "no answer to write {}", w);
        let h = frame::recv_hdr(raw)?;
        ensure!(
            h.op == Op::Ack && h.id == 2000 + w as u64 && h.data == c.status,
            "write {}: answer {:?} for {} status {}, not {}",
            w,
            h.op,
            h.id,
            h.data,
            c.status
        );
    }
    Ok(())
}

#[kunit_tests(kfi_sockets_framing)]
mod cases {
    use super::*;

    /// Sizes of the messages: empty, shorter and longer than a header,
    /// the receive's size and beyond it (cut).
    const LENS: [usize; 12] = [0, 1, 39, 40, 41, 100, 255, 256, 257, 300, 17, 128];

    /// The data callback's early wakeup looks at a header's magic,
    /// version and kind only; anything else it leaves to the full check.
    #[test]
    fn a_header_s_message_hint_is_its_length_or_nothing() -> Result {
        let msg = Hdr::new(Op::Msg, 1, 64).encode();
        assert_eq!(Hdr::msg_len_hint(&msg), Some(64));
        assert_eq!(
            Hdr::msg_len_hint(&Hdr::new(Op::Write, 1, 64).encode()),
            None
        );
        assert_eq!(Hdr::msg_len_hint(&Hdr::new(Op::Ack, 1, 0).encode()), None);
        for at in 0..4 {
            let mut bad = msg;
            bad[at] ^= 0x80;
            assert_eq!(Hdr::msg_len_hint(&bad), None);
        }
        // A length the full check refuses is still passed on: a hint.
        let mut long = msg;
        long[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(Hdr::msg_len_hint(&long), Some(u64::MAX));
        assert!(Hdr::decode(&long).is_err());
        Ok(())
    }

    /// Messages cut at odd places (inside headers, across the boundary
    /// between header and payload, inside payloads) all arrive whole and
    /// in order; the acknowledgements asked for come back in order.
    #[test]
    fn messages_cut_anywhere_arrive_whole() -> Result {
        let mut bufs = KVec::new();
        bufs.resize(LENS.len() * RECV_LEN, 0u8, GFP_KERNEL)?;
        let n = net(c"7511")?;
        let l = raw_listener(7511)?;
        let c = cq(&n)?;
        let (ep, raw) = kfi_client(&n, &c, &l)?;
        post_receives(&ep, &mut bufs, 0, LENS.len())?;
        let mut stream = KVec::new();
        for (m, &len) in LENS.iter().enumerate() {
            push_msg(&mut stream, m, len, m % 2 == 0)?;
        }
        send_cut(
            &raw,
            &stream,
            &[1, 3, HDR_LEN, 7, 97, 2, 300, HDR_LEN + 1, 13],
        )?;
        for (m, &len) in LENS.iter().enumerate() {
            check_received(&c, &bufs, m, len)?;
        }
        for m in (0..LENS.len()).step_by(2) {
            check_ack(&raw, m)?;
        }
        drop(ep);
        drop(bufs);
        Ok(())
    }

    /// Many frames in one piece, more than the callback handles in one
    /// pass and more than there are receives: every message reaches its
    /// receive in order (the last ones held until their receives are
    /// posted), and every acknowledgement comes back in order.
    #[test]
    fn many_frames_in_one_piece() -> Result {
        // Receives one endpoint holds at most; some messages beyond.
        const POSTED: usize = 64;
        const N: usize = POSTED + 8;
        let mut bufs = KVec::new();
        bufs.resize(N * RECV_LEN, 0u8, GFP_KERNEL)?;
        let n = net(c"7512")?;
        let l = raw_listener(7512)?;
        let c = cq_sized(&n, 2 * N)?;
        let (ep, raw) = kfi_client(&n, &c, &l)?;
        post_receives(&ep, &mut bufs, 0, POSTED)?;
        let mut stream = KVec::new();
        for m in 0..N {
            push_msg(&mut stream, m, 64 + m, true)?;
        }
        let sent = raw.send(&[&stream])?;
        ensure!(sent == stream.len(), "sent {} of {}", sent, stream.len());
        for m in 0..POSTED {
            check_received(&c, &bufs, m, 64 + m)?;
        }
        post_receives(&ep, &mut bufs, POSTED, N - POSTED)?;
        for m in POSTED..N {
            check_received(&c, &bufs, m, 64 + m)?;
        }
        for m in 0..N {
            check_ack(&raw, m)?;
        }
        drop(ep);
        drop(bufs);
        Ok(())
    }

    /// A frame that breaks the protocol behind good ones: the good ones
    /// are received, then the connection ends with an error event.
    #[test]
    fn garbage_behind_good_frames_ends_the_connection() -> Result {
        const N: usize = 4;
        let mut bufs = KVec::new();
        bufs.resize(N * RECV_LEN, 0u8, GFP_KERNEL)?;
        let n = net(c"7513")?;
        let l = raw_listener(7513)?;
        let c = cq(&n)?;
        let (ep, raw) = kfi_client(&n, &c, &l)?;
        post_receives(&ep, &mut bufs, 0, N)?;
        let mut stream = KVec::new();
        for m in 0..2 {
            push_msg(&mut stream, m, 50, false)?;
        }
        // A header with a bad magic, whole in the same piece.
        stream.extend_from_slice(&[0xeeu8; HDR_LEN], GFP_KERNEL)?;
        let sent = raw.send(&[&stream])?;
        ensure!(sent == stream.len(), "sent {} of {}", sent, stream.len());
        for m in 0..2 {
            check_received(&c, &bufs, m, 50)?;
        }
        let err = eq_error(&n)?;
        ensure!(
            err.err == EPROTO.to_errno().abs(),
            "error event {}",
            err.err
        );
        let (ev, _, _) = event(&n)?;
        ensure!(ev == sys::KFI_SHUTDOWN, "event {}", ev);
        // The receives not used fail as the connection ends.
        let mut e = sys::kfi_cq_data_entry::default();
        let r = sread_ms(&c, &mut e, 2000);
        ensure!(r == -(sys::KFI_EAVAIL as isize), "an unused receive: {}", r);
        drop(ep);
        drop(bufs);
        Ok(())
    }

    /// A message of 64 KiB for which no receive is posted waits in the
    /// socket for one (`recv_wait_ms`), but for a bounded time only: then
    /// it is held and acknowledged, though still no receive is posted, and
    /// a receive posted later gets it whole. A second one finds its
    /// receive posted while it waits (or once held): whole either way.
    #[test]
    fn large_message_waits_for_its_receive_a_bounded_time() -> Result {
        const BIG: usize = 64 << 10;
        let mut bufs = KVVec::new();
        bufs.resize(2 * BIG, 0u8, GFP_KERNEL)?;
        let n = net(c"7514")?;
        let l = raw_listener(7514)?;
        let c = cq(&n)?;
        let (ep, raw) = kfi_client(&n, &c, &l)?;
        let outcome = (|| -> Result {
            let mut stream = KVec::with_capacity(HDR_LEN + BIG, GFP_KERNEL)?;
            for m in 0..2 {
                stream.clear();
                push_msg(&mut stream, m, BIG, true)?;
                let sent = raw.send(&[&stream])?;
                ensure!(sent == stream.len(), "sent {} of {}", sent, stream.len());
                if m == 0 {
                    // Nobody posts a receive: held after the wait.
                    check_ack(&raw, m)?;
                }
                let b = bufs.get_mut(m * BIG..(m + 1) * BIG).ok_or(EINVAL)?;
                let v = kvec_mut(b);
                // SAFETY: An open endpoint; the buffer outlives it (declared
                // first, dropped after it).
                let r = unsafe { rc(ep.recvmsg(&msg(&v, 100 + m, 0), 0)) };
                ensure!(r == 0, "receive {} not posted: {}", m, r);
                check_completion(&c, m, BIG)?;
                check_pattern(bufs.get(m * BIG..(m + 1) * BIG).ok_or(EINVAL)?, m)?;
                if m == 1 {
                    check_ack(&raw, m)?;
                }
            }
            Ok(())
        })();
        drop(ep);
        drop(bufs);
        outcome
    }

    /// The same for tagged messages of 64 KiB: one for which only a
    /// receive of another tag is posted waits in the socket for a
    /// bounded time, then is held and acknowledged; one for the posted
    /// tag goes to its receive; a receive for the first tag posted later
    /// gets it whole.
    #[test]
    fn large_tagged_message_waits_for_its_receive_a_bounded_time() -> Result {
        const BIG: usize = 64 << 10;
        const TAGS: [u64; 2] = [5, 6];
        // One buffer per message, each kept until the endpoint is closed.
        let mut first = KVVec::from_elem(0u8, BIG, GFP_KERNEL)?;
        let mut second = KVVec::from_elem(0u8, BIG, GFP_KERNEL)?;
        let n = net(c"7535")?;
        let l = raw_listener(7535)?;
        let c = cq(&n)?;
        let (ep, raw) = kfi_client(&n, &c, &l)?;
        let outcome = (|| -> Result {
            let post = |b: &mut [u8], m: usize| -> Result {
                let v = kvec_mut(b);
                let t = sys::kfi_msg_tagged {
                    msg: msg(&v, 100 + m, 0),
                    tag: TAGS[m],
                    ignore: 0,
                };
                // SAFETY: An open endpoint; the buffer outlives it
                // (declared first, dropped after it).
                let r = unsafe { rc(ep.trecvmsg(&t, 0)) };
                ensure!(r == 0, "tagged receive {} not posted: {}", m, r);
                Ok(())
            };
            let send = |m: usize| -> Result {
                let mut h = Hdr::new(Op::Tagged, 1000 + m as u64, BIG as u64);
                h.tag = TAGS[m];
                h.flags |= flags::DELIVERY_COMPLETE;
                let mut stream = KVec::with_capacity(HDR_LEN + BIG, GFP_KERNEL)?;
                stream.extend_from_slice(&h.encode(), GFP_KERNEL)?;
                for i in 0..BIG {
                    stream.push(pattern(m, i), GFP_KERNEL)?;
                }
                let sent = raw.send(&[&stream])?;
                ensure!(sent == stream.len(), "sent {} of {}", sent, stream.len());
                Ok(())
            };
            // Only the second tag's receive is posted: the first message
            // is held after its wait.
            post(&mut second, 1)?;
            send(0)?;
            check_ack(&raw, 0)?;
            send(1)?;
            check_completion(&c, 1, BIG)?;
            check_ack(&raw, 1)?;
            post(&mut first, 0)?;
            check_completion(&c, 0, BIG)?;
            Ok(())
        })();
        drop(ep);
        outcome?;
        check_pattern(&first, 0)?;
        check_pattern(&second, 1)
    }

    /// RMA writes whole in one piece, then cut at odd places (inside
    /// headers, descriptors and payloads): each accepted one is placed
    /// exactly where its descriptors say (two descriptors, an empty
    /// write), each refused one (no such key, outside the region, a
    /// read-only region) is answered with its errno and writes nothing;
    /// the answers come in order. Then a write whose descriptors do not
    /// add up to its length ends the connection.
    #[test]
    fn writes_cut_anywhere_are_placed_or_refused() -> Result {
        let mut buf = KVec::new();
        buf.resize(REGION_LEN, 0u8, GFP_KERNEL)?;
        let mut ro = KVec::new();
        ro.resize(64, 0u8, GFP_KERNEL)?;
        let n = net(c"7515")?;
        let pep = listen(&n)?;
        let c = cq(&n)?;
        let mr = region(&n, &mut buf, sys::KFI_REMOTE_WRITE, 0)?;
        let ro_mr = region(&n, &mut ro, sys::KFI_REMOTE_READ, 0)?;
        let (k, kro) = (key(&mr), key(&ro_mr));
        let (raw, sep) = raw_client(&n, 7515, &c)?;
        let outcome = (|| -> Result {
            let desc = |addr: u64, len: u64, key: u64| RmaDesc { addr, len, key };
            let errno = |e: Error| (-e.to_errno()) as u64;
            let mut cases = KVec::new();
            let mut add = |descs: &[RmaDesc], status: u64| -> Result {
                let mut v = KVec::new();
                v.extend_from_slice(descs, GFP_KERNEL)?;
                cases.push(WriteCase { descs: v, status }, GFP_KERNEL)?;
                Ok(())
            };
            add(&[desc(100, 300, k), desc(1000, 50, k)], 0)?;
            add(&[desc(0, 64, kro)], errno(EACCES))?;
            add(&[desc(4000, 200, k)], errno(ERANGE))?;
            add(&[desc(0, 8, k), desc(0, 16, k ^ kro ^ 1)], errno(ENOKEY))?;
            add(&[desc(2000, 1500, k)], 0)?;
            add(&[desc(3900, 0, k)], 0)?;
            add(&[desc(3990, 106, k)], 0)?;
            let mut stream = KVec::new();
            for (w, cs) in cases.iter().enumerate() {
                push_write(&mut stream, w, &cs.descs)?;
            }
            let want = expected_region(&cases)?;
            for pass in 0..2 {
                buf.fill(0);
                if pass == 0 {
                    let sent = raw.send(&[&stream])?;
                    ensure!(sent == stream.len(), "sent {} of {}", sent, stream.len());
                } else {
                    send_cut(&raw, &stream, &[1, 39, 40, 25, 700, 3, 1200, 64])?;
                }
                check_write_acks(&raw, &cases, 0)?;
                let bad = buf.iter().zip(want.iter()).position(|(a, b)| a != b);
                ensure!(
                    bad.is_none(),
                    "pass {}: region byte {:?} differs",
                    pass,
                    bad
                );
                ensure!(
                    ro.iter().all(|&b| b == 0),
                    "pass {}: read-only region written",
                    pass
                );
            }
            // Descriptors of 10 bytes for a payload of 11.
            let mut h = Hdr::new(Op::Write, 3000, 11);
            h.rma_count = 1;
            let payload = [0x55u8; 11];
            raw.send(&[&h.encode(), &desc(0, 10, k).encode(), &payload])?;
            ensure!(wait_readable(&raw, 5000), "the connection stayed up");
            let mut b = [0u8; HDR_LEN];
            ensure!(
                frame::recv_exact(&raw, &mut b).is_err(),
                "a write of the wrong length was answered"
            );
            ensure!(
                buf.iter().take(11).all(|&b| b == 0),
                "the bad write was placed"
            );
            Ok(())
        })();
        drop(sep);
        drop(raw);
        drop(ro_mr);
        drop(mr);
        drop(pep);
        drop(buf);
        drop(ro);
        outcome
    }

    /// The target sends the answers to a run of writes that are all in its
    /// socket together, but holds none back while it waits for a frame
    /// that has not arrived whole: four whole writes and the first half of
    /// a fifth come in one piece, and the four answers must come before
    /// the rest of the fifth is sent; then its answer. Every write is
    /// placed. (The data callback places these writes.)
    #[test]
    fn answers_do_not_wait_for_a_frame_not_whole() -> Result {
        answers_before_the_rest(c"7516", 7516, 0)
    }

    /// [`answers_do_not_wait_for_a_frame_not_whole`] with writes that ask
    /// for commit completion, which the receive work places: it holds the
    /// answers back while the next write is in its socket, and must hand
    /// them over before it waits for the rest of the fifth.
    #[test]
    fn held_answers_do_not_wait_for_a_frame_not_whole() -> Result {
        answers_before_the_rest(c"7522", 7522, flags::COMMIT_COMPLETE)
    }

    /// A burst of writes that the receive work places (they ask for
    /// commit completion), all in one piece: it reads the next header
    /// with the last bytes of a write, never with the last bytes of a
    /// range that is not the write's last. Writes of one to three ranges,
    /// empty ones among them, land exactly where their descriptors say,
    /// each answered once, in order.
    #[test]
    fn committed_writes_in_one_piece_land_whole() -> Result {
        with_write_target(c"7523", 7523, |raw, k, bytes| {
            let desc = |addr: u64, len: u64| RmaDesc { addr, len, key: k };
            let mut cases = KVec::new();
            let mut add = |descs: &[RmaDesc]| -> Result {
                let mut v = KVec::new();
                v.extend_from_slice(descs, GFP_KERNEL)?;
                cases.push(
                    WriteCase {
                        descs: v,
                        status: 0,
                    },
                    GFP_KERNEL,
                )?;
                Ok(())
            };
            add(&[desc(0, 300), desc(400, 100)])?;
            add(&[desc(600, 40)])?;
            add(&[desc(700, 10), desc(720, 0), desc(800, 333)])?;
            add(&[desc(1200, 1), desc(1250, 0)])?;
            add(&[desc(1300, 64), desc(1400, 32)])?;
            add(&[desc(2000, 1000)])?;
            let mut stream = KVec::new();
            for (w, cs) in cases.iter().enumerate() {
                push_write_with(&mut stream, w, &cs.descs, flags::COMMIT_COMPLETE)?;
            }
            let sent = raw.send(&[&stream])?;
            ensure!(sent == stream.len(), "sent {} of {}", sent, stream.len());
            check_write_acks(raw, &cases, 0)?;
            check_region(bytes, &cases)
        })
    }

    /// A write the receive work places, then all but one byte of a next
    /// header, then the end of the stream (FIN): the write lands and its
    /// answer reaches the peer, although the connection ends at the
    /// header that never completes.
    #[test]
    fn a_fin_behind_part_of_a_header_does_not_lose_the_answer() -> Result {
        with_write_target(c"7525", 7525, |raw, k, bytes| {
            let mut descs = KVec::new();
            descs.push(
                RmaDesc {
                    addr: 0,
                    len: 100,
                    key: k,
                },
                GFP_KERNEL,
            )?;
            let mut stream = KVec::new();
            push_write_with(&mut stream, 0, &descs, flags::COMMIT_COMPLETE)?;
            let next = Hdr::new(Op::Msg, 1, 0).encode();
            stream.extend_from_slice(&next[..HDR_LEN - 1], GFP_KERNEL)?;
            let cases = [WriteCase { descs, status: 0 }];
            let sent = raw.send(&[&stream])?;
            ensure!(sent == stream.len(), "sent {} of {}", sent, stream.len());
            // SAFETY: A live socket; only its sending side is shut.
            unsafe {
                kernel::bindings::kernel_sock_shutdown(
                    raw.as_raw(),
                    kernel::bindings::sock_shutdown_cmd_SHUT_WR,
                )
            };
            check_write_acks(raw, &cases, 0)?;
            check_region(bytes, &cases)
        })
    }

    /// More frames in one piece than one run of the receive work takes
    /// (committed writes: the work places them, not the data callback):
    /// the run stops at its budget with the next header read ahead, and
    /// the next run goes on from that header. Every write lands where it
    /// says and is answered once, in order.
    #[test]
    fn writes_beyond_a_run_s_budget_resume_where_it_stopped() -> Result {
        // Over three runs' worth (64 frames each), 20 bytes apart.
        const WRITES: usize = 200;
        const LEN: u64 = 20;
        with_write_target(c"7524", 7524, |raw, k, bytes| {
            let mut cases = KVec::new();
            let mut stream = KVec::new();
            for w in 0..WRITES {
                let mut descs = KVec::new();
                descs.push(
                    RmaDesc {
                        addr: w as u64 * LEN,
                        len: LEN,
                        key: k,
                    },
                    GFP_KERNEL,
                )?;
                push_write_with(&mut stream, w, &descs, flags::COMMIT_COMPLETE)?;
                cases.push(WriteCase { descs, status: 0 }, GFP_KERNEL)?;
            }
            let sent = raw.send(&[&stream])?;
            ensure!(sent == stream.len(), "sent {} of {}", sent, stream.len());
            check_write_acks(raw, &cases, 0)?;
            check_region(bytes, &cases)
        })
    }
}
