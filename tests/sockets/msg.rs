// SPDX-License-Identifier: GPL-2.0

//! `kfi_sockets_msg`: the provider itself, through kfabric.ko, over
//! loopback: connection management, messages of every buffer type and
//! size, rejects, garbage from raw and user-space peers, handshake
//! deadlines, a delivery complete send whose receiver closes at once.

use kernel::prelude::*;

#[kunit_tests(kfi_sockets_msg)]
mod msg_tests {
    use crate::{
        frame,
        kfi::kfi_sys as sys,
        ksock::{SockAddr, Socket},
        net::*,
        wire::{Hdr, Op, HDR_LEN},
    };
    use kernel::{bindings, prelude::*};

    #[test]
    fn connect_accept_send_receive() -> Result {
        let n = net(c"7471")?;
        let pep = listen(&n)?;
        let (ccq, scq) = (cq(&n)?, cq(&n)?);
        let cep = endpoint(&n, n.dst.first(), &ccq)?;
        let ret = rc(cep.connect(b"hi"));
        assert_eq!(ret, 0);
        let (ev, buf, len) = event(&n)?;
        assert_eq!(ev, sys::KFI_CONNREQ);
        assert_eq!(&buf[CM..len], b"hi");
        let req = cm_entry(&buf);
        assert_eq!(req.fid, pep.fid());
        let sep = endpoint_for(&n, &take_req(&buf)?, &scq)?;
        let ret = rc(sep.accept(b"yo"));
        assert_eq!(ret, 0);
        let mut seen = 0;
        for _ in 0..2 {
            let (ev, buf, len) = event(&n)?;
            assert_eq!(ev, sys::KFI_CONNECTED);
            let e = cm_entry(&buf);
            if e.fid == cep.fid() {
                assert_eq!(&buf[CM..len], b"yo");
                seen |= 1;
            } else if e.fid == sep.fid() {
                seen |= 2;
            }
        }
        assert_eq!(seen, 3);

        // A message with remote CQ data, placed straight into the receive.
        let mut rbuf = [0u8; 64];
        let r = kvec_mut(&mut rbuf);
        let text = b"hello over kernel TCP";
        let t = kvec(text);
        // SAFETY: Open endpoints; the buffers outlive the completions read below.
        unsafe {
            assert_eq!(rc(sep.recvmsg(&msg(&r, 11, 0), sys::KFI_COMPLETION)), 0);
            assert_eq!(
                rc(cep.sendmsg(
                    &msg(&t, 22, 99),
                    sys::KFI_COMPLETION | sys::KFI_REMOTE_CQ_DATA
                )),
                0
            );
        }
        let mut e = sys::kfi_cq_data_entry::default();
        assert_eq!(sread(&scq, &mut e), 1);
        assert_eq!((e.op_context as usize, e.len, e.data), (11, text.len(), 99));
        assert_eq!(e.flags & sys::KFI_RECV, sys::KFI_RECV);
        assert_eq!(&rbuf[..text.len()], &text[..]);
        assert_eq!(sread(&ccq, &mut e), 1);
        assert_eq!(
            (e.op_context as usize, e.flags & sys::KFI_SEND),
            (22, sys::KFI_SEND)
        );

        // Too long for the receive: what fits, then a truncation error.
        let mut small = [0u8; 4];
        let sr = kvec_mut(&mut small);
        // SAFETY: Open endpoints; `small` and `text` outlive the completions
        // (and the truncation error) read below.
        unsafe {
            assert_eq!(rc(sep.recvmsg(&msg(&sr, 33, 0), 0)), 0);
            assert_eq!(rc(cep.sendmsg(&msg(&t, 44, 0), 0)), 0);
        }
        assert_eq!(sread(&scq, &mut e), -(sys::KFI_EAVAIL as isize));
        let mut err = sys::kfi_cq_err_entry::default();
        assert_eq!(scq.readerr(&mut err), 1);
        assert_eq!(
            (err.op_context as usize, err.len, err.olen),
            (33, 4, text.len() - 4)
        );
        assert_eq!(err.err, -EMSGSIZE.to_errno());
        assert_eq!(&small, &text[..4]);
        assert_eq!(sread(&ccq, &mut e), 1);

        // An inject: no completion on the sender.
        // SAFETY: Open endpoints; `rbuf` outlives the receive's completion read
        // below; the inject's buffer is only read during the call.
        unsafe {
            assert_eq!(rc(sep.recvmsg(&msg(&r, 55, 0), 0)), 0);
            assert_eq!(
                rc(cep.sendmsg(&msg(&kvec(b"inj"), 0, 0), sys::KFI_INJECT)),
                0
            );
        }
        assert_eq!(sread(&scq, &mut e), 1);
        assert_eq!((e.op_context as usize, e.len), (55, 3));
        // Nothing to read.
        let none = ccq.read_data(&mut e);
        assert_eq!(none, EAGAIN.to_errno() as isize);

        // The client goes away: the server hears of it.
        drop(cep);
        let (ev, buf, _) = event(&n)?;
        assert_eq!(ev, sys::KFI_SHUTDOWN);
        assert_eq!(cm_entry(&buf).fid, sep.fid());
        drop(sep);
        drop(pep);
        Ok(())
    }

    #[test]
    fn reject_and_nobody_listening() -> Result {
        let n = net(c"7472")?;
        let pep = listen(&n)?;
        let c = cq(&n)?;
        let cep = endpoint(&n, n.dst.first(), &c)?;
        let please = b"please";
        let ret = rc(cep.connect(please));
        assert_eq!(ret, 0);
        let (ev, buf, _) = event(&n)?;
        assert_eq!(ev, sys::KFI_CONNREQ);
        let req = take_req(&buf)?;
        assert_eq!(rc(pep.reject(req.info(), b"no")), 0);
        // Answered already: the handle is stale now.
        assert_eq!(rc(pep.reject(req.info(), &[])), EINVAL.to_errno());
        drop(req);
        let err = eq_error(&n)?;
        assert_eq!((err.fid, err.err), (cep.fid(), -ECONNREFUSED.to_errno()));
        // SAFETY: The error data lives until the next error read.
        let data =
            unsafe { core::slice::from_raw_parts(err.err_data.cast::<u8>(), err.err_data_size) };
        assert_eq!(data, b"no");
        drop(cep);
        drop(pep);

        // Nobody listens on the next port.
        let n2 = net(c"7473")?;
        let c2 = cq(&n2)?;
        let lonely = endpoint(&n2, n2.dst.first(), &c2)?;
        let ret = rc(lonely.connect(&[]));
        assert_eq!(ret, 0);
        assert_eq!(eq_error(&n2)?.err, -ECONNREFUSED.to_errno());
        // Sending on an endpoint that never connected.
        // SAFETY: Open endpoint, valid message.
        let r = unsafe { rc(lonely.sendmsg(&msg(&kvec(b"x"), 0, 0), 0)) };
        assert_eq!(r, ENOTCONN.to_errno());
        Ok(())
    }

    /// A peer that is no kfabric endpoint: raw kernel sockets sending
    /// garbage, before and after the handshake.
    #[test]
    fn garbage_from_the_peer_ends_only_its_connection() -> Result {
        let n = net(c"7474")?;
        let pep = listen(&n)?;
        let addr = SockAddr::v4([127, 0, 0, 1], 7474);

        // Garbage instead of a connection request: dropped, no event.
        let junk = Socket::tcp(&addr)?;
        junk.connect(&addr)?;
        junk.send(&[&[0xa5u8; HDR_LEN]])?;
        let mut b = [0u8; 1];
        // The listener hangs up on it.
        assert_eq!(junk.recv(&mut b, false)?, 0);

        // A well-formed request from a raw peer still gets through.
        let raw = Socket::tcp(&addr)?;
        frame::connect_start(&raw, &addr, b"raw")?;
        let (ev, buf, len) = event(&n)?;
        assert_eq!(ev, sys::KFI_CONNREQ);
        assert_eq!(&buf[CM..len], b"raw");
        let scq = cq(&n)?;
        let sep = endpoint_for(&n, &take_req(&buf)?, &scq)?;
        let ret = rc(sep.accept(&[]));
        assert_eq!(ret, 0);
        let (ev, _, _) = event(&n)?;
        assert_eq!(ev, sys::KFI_CONNECTED);
        match frame::connect_finish(&raw)? {
            frame::Answer::Accepted(d) => assert_eq!(d.len(), 0),
            frame::Answer::Rejected(_) => return Err(EINVAL),
        }

        // A receive is posted; the peer sends a bad header instead of a
        // message: the endpoint reports EPROTO and the end of the
        // connection, and fails the posted receive.
        let mut rbuf = [0u8; 16];
        let r = kvec_mut(&mut rbuf);
        // SAFETY: Open endpoint; the buffer outlives the completion.
        let ret = unsafe { rc(sep.recvmsg(&msg(&r, 77, 0), 0)) };
        assert_eq!(ret, 0);
        let mut bad = Hdr::new(Op::Msg, 0, 0).encode();
        bad[3] = 200;
        raw.send(&[&bad])?;
        let err = eq_error(&n)?;
        assert_eq!((err.fid, err.err), (sep.fid(), -EPROTO.to_errno()));
        let (ev, _, _) = event(&n)?;
        assert_eq!(ev, sys::KFI_SHUTDOWN);
        let mut e = sys::kfi_cq_data_entry::default();
        assert_eq!(sread(&scq, &mut e), -(sys::KFI_EAVAIL as isize));
        let mut ce = sys::kfi_cq_err_entry::default();
        assert_eq!(scq.readerr(&mut ce), 1);
        assert_eq!(
            (ce.op_context as usize, ce.err),
            (77, -ECANCELED.to_errno())
        );
        // The peer sees the connection end.
        assert_eq!(raw.recv(&mut b, false)?, 0);
        drop(sep);
        drop(pep);
        Ok(())
    }

    /// Pages as a block ULP holds them (bio_vec), over IPv6.
    #[test]
    fn page_buffers_over_ipv6() -> Result {
        let n = net_at(c"::1", c"7475")?;
        let pep = listen(&n)?;
        let (ccq, scq) = (cq(&n)?, cq(&n)?);
        let (cep, sep) = connected_pair(&n, &ccq, &scq)?;
        let src = kernel::page::Page::alloc_page(GFP_KERNEL)?;
        let dst = kernel::page::Page::alloc_page(GFP_KERNEL)?;
        let pattern = [0x3cu8; 512];
        // SAFETY: Writing 512 bytes at offset 100 of a page we own.
        unsafe { src.write_raw(pattern.as_ptr(), 100, pattern.len()) }?;
        let bv = |p: &kernel::page::Page, off: u32, len: u32| bindings::bio_vec {
            bv_page: p.as_ptr(),
            bv_len: len,
            bv_offset: off,
        };
        let (sbv, rbv) = (bv(&src, 100, 512), bv(&dst, 1000, 1024));
        let bmsg = |b: &bindings::bio_vec, ctx: usize| {
            let mut m = sys::kfi_msg {
                iov_type: sys::KFI_BVEC,
                iov_count: 1,
                context: ctx as *mut c_void,
                ..Default::default()
            };
            m.__bindgen_anon_1.msg_bvec = b;
            m
        };
        // SAFETY: Open endpoints; the pages outlive the completions.
        unsafe {
            assert_eq!(rc(sep.recvmsg(&bmsg(&rbv, 1), 0)), 0);
            assert_eq!(rc(cep.sendmsg(&bmsg(&sbv, 2), 0)), 0);
        }
        let mut e = sys::kfi_cq_data_entry::default();
        assert_eq!(sread(&scq, &mut e), 1);
        assert_eq!((e.op_context as usize, e.len), (1, 512));
        let mut got = [0u8; 512];
        // SAFETY: Reading 512 bytes at offset 1000 of a page we own.
        unsafe { dst.read_raw(got.as_mut_ptr(), 1000, got.len()) }?;
        assert_eq!(&got[..], &pattern[..]);
        assert_eq!(sread(&ccq, &mut e), 1);
        drop(sep);
        drop(cep);
        drop(pep);
        Ok(())
    }

    /// Several connections on one listener, each with several messages of
    /// odd sizes in flight (0 B, 1 B, a page and one, 64 KiB and three),
    /// every byte checked.
    #[test]
    fn many_connections_and_sizes() -> Result {
        const CONNS: usize = 4;
        const SIZES: [usize; 4] = [0, 1, 4097, 65539];
        const RBUF: usize = 128 * 1024;
        let n = net(c"7477")?;
        let pep = listen(&n)?;
        let (ccq, scq) = (cq_sized(&n, 64)?, cq_sized(&n, 64)?);
        let mut ceps = KVec::new();
        for _ in 0..CONNS {
            let ep = endpoint(&n, n.dst.first(), &ccq)?;
            let ret = rc(ep.connect(&[]));
            assert_eq!(ret, 0);
            ceps.push(ep, GFP_KERNEL)?;
        }
        let mut seps = KVec::new();
        let mut connected = 0;
        while seps.len() < CONNS || connected < 2 * CONNS {
            let (ev, buf, _) = event(&n)?;
            if ev == sys::KFI_CONNREQ {
                let sep = endpoint_for(&n, &take_req(&buf)?, &scq)?;
                let ret = rc(sep.accept(&[]));
                assert_eq!(ret, 0);
                seps.push(sep, GFP_KERNEL)?;
            } else {
                assert_eq!(ev, sys::KFI_CONNECTED);
                connected += 1;
            }
        }
        // Every server endpoint gets a receive per message size.
        let mut rbufs = KVec::with_capacity(CONNS * SIZES.len() * RBUF, GFP_KERNEL)?;
        rbufs.resize(CONNS * SIZES.len() * RBUF, 0xff, GFP_KERNEL)?;
        for (i, sep) in seps.iter().enumerate() {
            for j in 0..SIZES.len() {
                let k = i * SIZES.len() + j;
                let r = kvec_mut(&mut rbufs[k * RBUF..(k + 1) * RBUF]);
                // SAFETY: Open endpoint; the buffer outlives the completion.
                let ret = unsafe { rc(sep.recvmsg(&msg(&r, k, 0), 0)) };
                assert_eq!(ret, 0);
            }
        }
        // Every client sends all sizes, each filled with its own byte.
        let mut sbufs = KVec::with_capacity(CONNS * SIZES.len() * RBUF, GFP_KERNEL)?;
        sbufs.resize(CONNS * SIZES.len() * RBUF, 0, GFP_KERNEL)?;
        for (i, cep) in ceps.iter().enumerate() {
            for (j, &size) in SIZES.iter().enumerate() {
                let k = i * SIZES.len() + j;
                let b = &mut sbufs[k * RBUF..k * RBUF + size];
                b.fill((k + 1) as u8);
                let t = kvec(b);
                // SAFETY: Open endpoint; the buffer outlives the completion.
                let ret = unsafe { rc(cep.sendmsg(&msg(&t, k, 0), 0)) };
                assert_eq!(ret, 0);
            }
        }
        let total = CONNS * SIZES.len();
        let mut seen = [0usize; CONNS * SIZES.len()];
        let mut e = sys::kfi_cq_data_entry::default();
        for _ in 0..total {
            assert_eq!(sread(&scq, &mut e), 1);
            let k = e.op_context as usize;
            let got = &rbufs[k * RBUF..k * RBUF + e.len];
            // A message arrives whole and in order on its connection: the
            // j-th receive of an endpoint holds the j-th size.
            assert_eq!(e.len, SIZES[k % SIZES.len()]);
            if let Some(&first) = got.first() {
                assert!(got.iter().all(|&b| b == first));
                seen[first as usize - 1] += 1;
            }
        }
        for _ in 0..total {
            assert_eq!(sread(&ccq, &mut e), 1);
        }
        // Each non-empty message arrived exactly once.
        for (k, &count) in seen.iter().enumerate() {
            assert_eq!(count, usize::from(SIZES[k % SIZES.len()] != 0));
        }
        drop(ceps);
        drop(seps);
        drop(pep);
        Ok(())
    }

    /// A user-space peer (tests/guest/garbage.py, started by the VM
    /// runner) sends garbage before and after handshakes: requests that
    /// never were are not reported, every accepted connection that gets a
    /// bad frame ends with an EPROTO error and a SHUTDOWN, and the
    /// listener keeps working.
    #[test]
    fn user_space_garbage_sender() -> Result {
        // Bad frames after a handshake that garbage.py sends.
        const AFTER: usize = 14;
        let n = net(c"7479")?;
        let pep = listen(&n)?;
        let c = cq_sized(&n, 64)?;
        let mut eps = KVec::new();
        let (mut eproto, mut shut, mut done) = (0, 0, false);
        while !done || shut < AFTER {
            let (ev, buf, len) = match event(&n) {
                Ok(e) => e,
                Err(e) if e.to_errno() == -(sys::KFI_EAVAIL as i32) => {
                    let mut err = sys::kfi_eq_err_entry::default();
                    let ret = n.eq.readerr(&mut err);
                    assert_eq!(ret, 1);
                    assert_eq!(err.err, EPROTO.to_errno().wrapping_neg());
                    eproto += 1;
                    continue;
                }
                Err(e) => return Err(e),
            };
            match ev {
                sys::KFI_CONNREQ => {
                    let req = take_req(&buf)?;
                    let data = &buf[CM..len];
                    if data == b"done" {
                        let ret = rc(pep.reject(req.info(), &[]));
                        assert_eq!(ret, 0);
                        done = true;
                    } else {
                        assert!(data.starts_with(b"garbage-"));
                        let ep = endpoint_for(&n, &req, &c)?;
                        let ret = rc(ep.accept(&[]));
                        assert_eq!(ret, 0);
                        eps.push(ep, GFP_KERNEL)?;
                    }
                    // The request's info is freed.
                    drop(req);
                }
                sys::KFI_CONNECTED => {}
                _ => {
                    assert_eq!(ev, sys::KFI_SHUTDOWN);
                    shut += 1;
                }
            }
        }
        assert_eq!((eps.len(), eproto, shut), (AFTER, AFTER, AFTER));
        drop(eps);
        // The listener still serves a well-behaved peer.
        let (cq2, cq3) = (cq(&n)?, cq(&n)?);
        let (cep, sep) = connected_pair(&n, &cq2, &cq3)?;
        let mut r = [0u8; 8];
        let rk = kvec_mut(&mut r);
        // SAFETY: Open endpoints; the buffers outlive the completions.
        unsafe {
            assert_eq!(rc(sep.recvmsg(&msg(&rk, 1, 0), 0)), 0);
            assert_eq!(rc(cep.sendmsg(&msg(&kvec(b"still ok"), 2, 0), 0)), 0);
        }
        let mut e = sys::kfi_cq_data_entry::default();
        assert_eq!(sread(&cq3, &mut e), 1);
        assert_eq!(&r, b"still ok");
        drop(cep);
        drop(sep);
        drop(pep);
        Ok(())
    }

    /// Handshakes are bounded (kfi_sockets' `handshake_timeout_ms`, 10 s):
    /// a request nobody answers ends in an ETIMEDOUT EQ error, and a peer
    /// that connects and stays silent does not hold up the listener's
    /// close.
    #[test]
    fn handshake_timeouts() -> Result {
        let n = net(c"7470")?;
        let pep = listen(&n)?;
        let c = cq(&n)?;
        let cep = endpoint(&n, n.dst.first(), &c)?;
        let ret = rc(cep.connect(&[]));
        assert_eq!(ret, 0);
        let (ev, buf, _) = event(&n)?;
        assert_eq!(ev, sys::KFI_CONNREQ);
        // The request's info is freed; it stays unanswered.
        drop(take_req(&buf)?);
        let err = eq_error(&n)?;
        assert_eq!((err.fid, err.err), (cep.fid(), -ETIMEDOUT.to_errno()));
        drop(cep);
        // A silent peer: the listener's close shuts its socket down.
        let addr = SockAddr::v4([127, 0, 0, 1], 7470);
        let silent = Socket::tcp(&addr)?;
        silent.connect(&addr)?;
        drop(pep);
        drop(silent);
        Ok(())
    }

    /// A delivery complete send whose receiver closes its endpoint as
    /// soon as it has the message (as the two-host suite's cases end):
    /// the send was delivered, so it completes as done, never with
    /// `ECANCELED`, and then the sender hears of the end. The close races
    /// with the receiver's `Ack`: a few rounds.
    #[test]
    fn delivered_send_completes_when_the_receiver_closes() -> Result {
        const ROUNDS: usize = 8;
        let n = net(c"7507")?;
        let pep = listen(&n)?;
        let mut failed = 0;
        for round in 0..ROUNDS {
            let (ccq, scq) = (cq(&n)?, cq(&n)?);
            let (cep, sep) = connected_pair(&n, &ccq, &scq)?;
            let mut rbuf = [0u8; 8];
            let r = kvec_mut(&mut rbuf);
            let t = kvec(b"all done");
            // SAFETY: Open endpoints; the buffers outlive them.
            let posted = unsafe {
                (
                    rc(sep.recvmsg(&msg(&r, 1, 0), 0)),
                    rc(cep.sendmsg(&msg(&t, 2, 0), sys::KFI_DELIVERY_COMPLETE)),
                )
            };
            let mut e = sys::kfi_cq_data_entry::default();
            let received = if posted == (0, 0) {
                sread(&scq, &mut e)
            } else {
                0
            };
            // The receiver closes as soon as it has the message.
            drop(sep);
            let sent = sread(&ccq, &mut e);
            let mut err = sys::kfi_cq_err_entry::default();
            if sent == -(sys::KFI_EAVAIL as isize) {
                ccq.readerr(&mut err);
            }
            let ended = event(&n).map(|(ev, buf, _)| (ev, cm_entry(&buf).fid == cep.fid()));
            // Nothing asserted before the endpoints are closed.
            drop(cep);
            let ok = posted == (0, 0)
                && received == 1
                && sent == 1
                && e.op_context as usize == 2
                && ended == Ok((sys::KFI_SHUTDOWN, true))
                && &rbuf == b"all done";
            if !ok {
                pr_err!(
                    "kfi_sockets_msg: round {}: received {}, the delivered send completed {} (error {})\n",
                    round,
                    received,
                    sent,
                    err.err
                );
                failed += 1;
            }
        }
        drop(pep);
        assert_eq!(failed, 0);
        Ok(())
    }

    /// One 16 MiB message, from vmalloc memory into vmalloc memory.
    #[test]
    fn sixteen_mib_message() -> Result {
        const LEN: usize = 16 << 20;
        let n = net(c"7478")?;
        let pep = listen(&n)?;
        let (ccq, scq) = (cq(&n)?, cq(&n)?);
        let (cep, sep) = connected_pair(&n, &ccq, &scq)?;
        let mut src = KVVec::with_capacity(LEN, GFP_KERNEL)?;
        for i in 0..LEN {
            src.push((i % 251) as u8, GFP_KERNEL)?;
        }
        let mut dst = KVVec::with_capacity(LEN, GFP_KERNEL)?;
        dst.resize(LEN, 0, GFP_KERNEL)?;
        let r = kvec_mut(&mut dst);
        let t = kvec(&src);
        // SAFETY: Open endpoints; the buffers outlive the completions.
        unsafe {
            assert_eq!(rc(sep.recvmsg(&msg(&r, 1, 0), 0)), 0);
            assert_eq!(rc(cep.sendmsg(&msg(&t, 2, 0), 0)), 0);
        }
        let mut e = sys::kfi_cq_data_entry::default();
        assert_eq!(sread(&scq, &mut e), 1);
        assert_eq!(e.len, LEN);
        assert!(dst[..] == src[..]);
        assert_eq!(sread(&ccq, &mut e), 1);
        drop(sep);
        drop(cep);
        drop(pep);
        Ok(())
    }

    /// A message too large for the socket to take at once is left begun
    /// by the posting call; the small ones posted right behind it must not
    /// go out ahead of it (a post may send from its own call only when
    /// nothing waits before it): every message arrives whole, in posting
    /// order, and the sends complete in that order too.
    #[test]
    fn sends_behind_a_begun_frame_keep_their_order() -> Result {
        const BIG: usize = 4 << 20;
        const SMALL: usize = 8;
        // More than one run of the transmit work sends (32 frames): the
        // run that takes them over stops at its budget and is queued
        // again.
        const SMALLS: usize = 48;
        let n = net(c"7483")?;
        let pep = listen(&n)?;
        let (ccq, scq) = (cq_sized(&n, 2 * SMALLS)?, cq_sized(&n, 2 * SMALLS)?);
        let (cep, sep) = connected_pair(&n, &ccq, &scq)?;
        let mut src = KVVec::with_capacity(BIG, GFP_KERNEL)?;
        for i in 0..BIG {
            src.push((i % 251) as u8, GFP_KERNEL)?;
        }
        let mut dst = KVVec::with_capacity(BIG, GFP_KERNEL)?;
        dst.resize(BIG, 0, GFP_KERNEL)?;
        let small_src: [[u8; SMALL]; SMALLS] = core::array::from_fn(|i| [i as u8 + 1; SMALL]);
        let mut small_dst = [[0u8; SMALL]; SMALLS];
        let r = kvec_mut(&mut dst);
        // SAFETY: Open endpoint; the buffers outlive the completions read
        // below.
        unsafe {
            assert_eq!(rc(sep.recvmsg(&msg(&r, 0, 0), 0)), 0);
            for (i, d) in small_dst.iter_mut().enumerate() {
                assert_eq!(rc(sep.recvmsg(&msg(&kvec_mut(d), i + 1, 0), 0)), 0);
            }
        }
        let t = kvec(&src);
        // SAFETY: Open endpoint; the buffers outlive the completions read
        // below.
        unsafe {
            assert_eq!(rc(cep.sendmsg(&msg(&t, 10, 0), 0)), 0);
            for (i, b) in small_src.iter().enumerate() {
                assert_eq!(rc(cep.sendmsg(&msg(&kvec(b), 11 + i, 0), 0)), 0);
            }
        }
        let mut e = sys::kfi_cq_data_entry::default();
        for k in 0..=SMALLS {
            assert_eq!(sread(&scq, &mut e), 1);
            assert_eq!(e.op_context as usize, k);
            assert_eq!(e.len, if k == 0 { BIG } else { SMALL });
        }
        assert!(dst[..] == src[..]);
        assert_eq!(small_dst, small_src);
        for k in 0..=SMALLS {
            assert_eq!(sread(&ccq, &mut e), 1);
            assert_eq!(e.op_context as usize, 10 + k);
        }
        drop(sep);
        drop(cep);
        drop(pep);
        Ok(())
    }
}
