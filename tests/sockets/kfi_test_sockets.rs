// SPDX-License-Identifier: GPL-2.0

//! kfi_test_sockets.ko: KUnit suites for the building blocks of
//! kfi_sockets: `kfi_sockets_wire` (the wire header's encoding and its
//! checks against garbage), `kfi_ksock` (the kernel socket layer over
//! loopback TCP, IPv4 and IPv6) and `kfi_sockets_frame` (framing and the
//! connection handshake over loopback), and `kfi_sockets_msg`: the
//! provider itself, through kfabric.ko, over loopback (the VM runner loads
//! kfi_sockets.ko first), and `kfi_sockets_hostile` (hostile.rs): raw
//! peers that break the protocol on purpose. The provider's sources are
//! included by path, so the building-block tests exercise the very code
//! the provider runs.

use kernel::prelude::*;

#[path = "../../prov/sockets/frame.rs"]
mod frame;
#[path = "hostile.rs"]
mod hostile;
#[path = "hostile_deadlines.rs"]
mod hostile_deadlines;
#[path = "../../kfi/api/mod.rs"]
mod kfi;
#[allow(dead_code)]
#[path = "../../prov/sockets/ksock.rs"]
mod ksock;
// Shared by source inclusion; each module uses a part.
#[allow(dead_code)]
#[path = "../common/net.rs"]
mod net;
#[path = "../../prov/sockets/wire.rs"]
mod wire;

module! {
    type: KfiTestSockets,
    name: "kfi_test_sockets",
    authors: ["kfabric developers"],
    description: "KUnit tests of kfi_sockets' wire protocol and socket layer",
    license: "GPL",
}

struct KfiTestSockets;

impl kernel::Module for KfiTestSockets {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        Ok(Self)
    }
}

#[kunit_tests(kfi_sockets_wire)]
mod wire_tests {
    use super::wire::*;
    use kernel::prelude::*;

    const OPS: [Op; 12] = [
        Op::ConnReq,
        Op::Accept,
        Op::Reject,
        Op::Msg,
        Op::Tagged,
        Op::Write,
        Op::ReadReq,
        Op::ReadResp,
        Op::Atomic,
        Op::AtomicResp,
        Op::Ack,
        Op::Shutdown,
    ];

    fn valid(op: Op) -> Hdr {
        let mut h = Hdr::new(op, 0x1122_3344_5566_7788, 0);
        if matches!(op, Op::Write | Op::ReadReq | Op::Atomic) {
            h.rma_count = 2;
        }
        if matches!(op, Op::Msg | Op::Write) {
            h.len = 4096;
            h.flags = flags::REMOTE_CQ_DATA | flags::DELIVERY_COMPLETE;
            h.data = 0xdead_beef;
        }
        h.tag = 7;
        h
    }

    #[test]
    fn headers_round_trip() {
        for op in OPS {
            let h = valid(op);
            assert_eq!(Hdr::decode(&h.encode()), Ok(h));
        }
        let d = RmaDesc {
            addr: 1 << 40,
            len: 12345,
            key: u64::MAX,
        };
        assert_eq!(RmaDesc::decode(&d.encode()), d);
        assert_eq!(valid(Op::Write).rma_bytes(), 2 * RMA_DESC_LEN);
    }

    #[test]
    fn garbage_is_refused() {
        let good = valid(Op::Msg).encode();
        let refused = |b: [u8; HDR_LEN]| Hdr::decode(&b) == Err(EPROTO);
        let mut b = good;
        b[0] ^= 1;
        // bad magic
        assert!(refused(b));
        b = good;
        b[2] = VERSION + 1;
        // unknown version
        assert!(refused(b));
        for op in [0u8, 13, 200, 255] {
            b = good;
            b[3] = op;
            // unknown op
            assert!(refused(b));
        }
        b = good;
        b[5] = 0x80;
        // unknown flag
        assert!(refused(b));
        b = good;
        b[7] = 1;
        // reserved byte set
        assert!(refused(b));
        b = good;
        b[6] = 1;
        // descriptors on a message
        assert!(refused(b));
        let mut h = valid(Op::Write);
        h.rma_count = 0;
        // RMA without descriptors
        assert!(refused(h.encode()));
        h.rma_count = (RMA_IOV_MAX + 1) as u8;
        // too many descriptors
        assert!(refused(h.encode()));
        let mut h = valid(Op::Msg);
        h.len = PAYLOAD_MAX + 1;
        // payload too large
        assert!(refused(h.encode()));
        let mut h = valid(Op::ConnReq);
        h.len = CM_DATA_MAX + 1;
        // private data too large
        assert!(refused(h.encode()));
        let mut h = valid(Op::ReadReq);
        h.len = 1;
        // payload on a read request
        assert!(refused(h.encode()));
        let mut h = valid(Op::Write);
        h.flags = flags::FETCH;
        // a fetch that is no atomic
        assert!(refused(h.encode()));
        let mut h = valid(Op::Atomic);
        h.flags = flags::FETCH;
        assert_eq!(Hdr::decode(&h.encode()), Ok(h));
    }

    /// A small deterministic generator (xorshift64*).
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
    }

    /// Random headers, half of them mutations of valid ones: decoding never
    /// fails open: what it accepts re-encodes to the same bytes and keeps
    /// every limit.
    #[test]
    fn random_headers_are_checked() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut accepted = 0;
        for i in 0..20000u32 {
            let mut b = [0u8; HDR_LEN];
            if i % 2 == 0 {
                b = valid(OPS[(rng.next() % 12) as usize]).encode();
                let at = (rng.next() % HDR_LEN as u64) as usize;
                b[at] = rng.next() as u8;
            } else {
                for chunk in b.chunks_mut(8) {
                    let v = rng.next().to_le_bytes();
                    chunk.copy_from_slice(&v[..chunk.len()]);
                }
            }
            if let Ok(h) = Hdr::decode(&b) {
                accepted += 1;
                assert_eq!(h.encode(), b);
                assert!(h.len <= PAYLOAD_MAX);
                assert!((h.rma_count as usize) <= RMA_IOV_MAX);
            }
        }
        // The mutations of valid headers that only touch payload fields
        // stay valid: the generator did reach the accepting paths.
        assert!(accepted > 1000);
    }
}

#[kunit_tests(kfi_ksock)]
mod ksock_tests {
    use super::ksock::*;
    use kernel::prelude::*;

    /// A connected pair over a loopback listener at `addr` (port 0: any).
    fn pair(addr: SockAddr) -> Result<(Socket, Socket, Socket)> {
        let l = Socket::tcp(&addr)?;
        l.bind(&addr)?;
        l.listen(8)?;
        let bound = l.local_addr()?;
        assert!(bound.port() != 0);
        let c = Socket::tcp(&addr)?;
        // The handshake completes in the listener's backlog.
        c.connect(&bound)?;
        let s = l.accept(true)?;
        Ok((l, c, s))
    }

    fn exchange(c: &Socket, s: &Socket) -> Result {
        let a = *b"kfabric ";
        let b = *b"over kernel TCP";
        assert_eq!(c.send(&[&a, &b])?, a.len() + b.len());
        let mut got = [0u8; 23];
        assert_eq!(s.recv(&mut got, true)?, got.len());
        assert_eq!(&got[..8], &a);
        assert_eq!(&got[8..], &b);
        // An orderly end reads as the end of the stream.
        c.shutdown();
        assert_eq!(s.recv(&mut got, false)?, 0);
        Ok(())
    }

    #[test]
    fn loopback_ipv4() -> Result {
        let (_l, c, s) = pair(SockAddr::v4([127, 0, 0, 1], 0))?;
        exchange(&c, &s)
    }

    #[test]
    fn loopback_ipv6() -> Result {
        let mut lo = [0u8; 16];
        lo[15] = 1;
        let (_l, c, s) = pair(SockAddr::v6(lo, 0))?;
        exchange(&c, &s)
    }

    #[test]
    fn numeric_addresses_parse() -> Result {
        let a = SockAddr::parse(b"192.0.2.10", b"7471")?;
        assert_eq!(a.as_bytes(), SockAddr::v4([192, 0, 2, 10], 7471).as_bytes());
        let mut lo = [0u8; 16];
        lo[15] = 1;
        assert_eq!(
            SockAddr::parse(b"::1", b"0")?.as_bytes(),
            SockAddr::v6(lo, 0).as_bytes()
        );
        let mut ll = [0u8; 16];
        ll[0] = 0xfe;
        ll[1] = 0x80;
        ll[13] = 1;
        ll[15] = 2;
        assert_eq!(
            SockAddr::parse(b"fe80::1:2", b"65535")?.as_bytes(),
            SockAddr::v6(ll, 65535).as_bytes()
        );
        let full = SockAddr::parse(b"1:2:3:4:5:6:7:8", b"1")?;
        assert_eq!(
            full.as_bytes(),
            SockAddr::parse(b"1:2:3:4:5:6:7:8", b"1")?.as_bytes()
        );
        for (host, port) in [
            (&b"256.0.0.1"[..], &b"1"[..]),
            (b"1.2.3", b"1"),
            (b"1.2.3.4.5", b"1"),
            (b"1.2.3.4", b"65536"),
            (b"1.2.3.4", b"-1"),
            (b"1.2.3.4", b""),
            (b"::1::2", b"1"),
            (b"1:2:3:4:5:6:7", b"1"),
            (b"1:2:3:4:5:6:7:8:9", b"1"),
            (b"12345::", b"1"),
            (b"g::1", b"1"),
            (b"", b"1"),
        ] {
            assert!(SockAddr::parse(host, port).is_err());
        }
        Ok(())
    }

    #[test]
    fn errors_are_errnos() -> Result {
        let addr = SockAddr::v4([127, 0, 0, 1], 0);
        // A port nobody listens on: bind one, then close it.
        let port = {
            let t = Socket::tcp(&addr)?;
            t.bind(&addr)?;
            t.local_addr()?.port()
        };
        let c = Socket::tcp(&addr)?;
        assert_eq!(
            c.connect(&SockAddr::v4([127, 0, 0, 1], port))
                .map_err(|e| e.to_errno()),
            Err(ECONNREFUSED.to_errno())
        );
        // Nothing to accept yet.
        let l = Socket::tcp(&addr)?;
        l.bind(&addr)?;
        l.listen(1)?;
        assert_eq!(
            l.accept(true).err().map(|e| e.to_errno()),
            Some(EAGAIN.to_errno())
        );
        // Addresses that are not IPv4/IPv6, or too short.
        assert!(SockAddr::from_bytes(&[0u8; 16]).is_err());
        assert!(SockAddr::from_bytes(&[2u8]).is_err());
        let back = SockAddr::from_bytes(addr.as_bytes())?;
        assert_eq!(back.as_bytes(), addr.as_bytes());
        Ok(())
    }
}

#[kunit_tests(kfi_sockets_frame)]
mod frame_tests {
    use super::{frame::*, ksock::*, wire::*};
    use kernel::prelude::*;

    /// A listener on 127.0.0.1 (any port) and its address.
    fn listener() -> Result<(Socket, SockAddr)> {
        let any = SockAddr::v4([127, 0, 0, 1], 0);
        let l = Socket::tcp(&any)?;
        l.bind(&any)?;
        l.listen(8)?;
        let a = l.local_addr()?;
        Ok((l, a))
    }

    #[test]
    fn handshake_accept_carries_private_data() -> Result {
        let (l, a) = listener()?;
        let c = Socket::tcp(&a)?;
        connect_start(&c, &a, b"hello from the client")?;
        let s = l.accept(true)?;
        assert_eq!(&read_connreq(&s)?[..], b"hello from the client");
        accept(&s, b"welcome")?;
        match connect_finish(&c)? {
            Answer::Accepted(d) => assert_eq!(&d[..], b"welcome"),
            Answer::Rejected(_) => return Err(EINVAL),
        }
        Ok(())
    }

    #[test]
    fn handshake_reject_carries_private_data() -> Result {
        let (l, a) = listener()?;
        let c = Socket::tcp(&a)?;
        connect_start(&c, &a, &[])?;
        let s = l.accept(true)?;
        assert_eq!(read_connreq(&s)?.len(), 0);
        reject(&s, b"no room")?;
        match connect_finish(&c)? {
            Answer::Rejected(d) => assert_eq!(&d[..], b"no room"),
            Answer::Accepted(_) => return Err(EINVAL),
        }
        // Too much private data is refused before anything is sent.
        let big = [0u8; CM_DATA_MAX as usize + 1];
        let c3 = Socket::tcp(&a)?;
        let r = connect_start(&c3, &a, &big);
        assert_eq!(r.err().map(|e| e.to_errno()), Some(EINVAL.to_errno()));
        Ok(())
    }

    #[test]
    fn frames_carry_descriptors_and_payload() -> Result {
        let (l, a) = listener()?;
        let c = Socket::tcp(&a)?;
        c.connect(&a)?;
        let s = l.accept(true)?;
        let rma = [
            RmaDesc {
                addr: 4096,
                len: 10,
                key: 7,
            },
            RmaDesc {
                addr: 8192,
                len: 3,
                key: 7,
            },
        ];
        let mut h = Hdr::new(Op::Write, 42, 0);
        h.flags = flags::DELIVERY_COMPLETE;
        send_frame(&c, &h, &rma, &[b"0123456789", b"abc"])?;
        let got = recv_hdr(&s)?;
        assert_eq!(
            (got.op, got.id, got.len, got.rma_count),
            (Op::Write, 42, 13, 2)
        );
        assert_eq!(&recv_rma(&s, &got)?[..], &rma[..]);
        let mut payload = [0u8; 13];
        recv_exact(&s, &mut payload)?;
        assert_eq!(&payload, b"0123456789abc");
        Ok(())
    }

    #[test]
    fn garbage_and_eof_are_errors() -> Result {
        let (l, a) = listener()?;
        let c = Socket::tcp(&a)?;
        c.connect(&a)?;
        let s = l.accept(true)?;
        // A peer sending garbage instead of a header.
        let junk = [0x5au8; HDR_LEN];
        c.send(&[&junk])?;
        assert_eq!(
            recv_hdr(&s).err().map(|e| e.to_errno()),
            Some(EPROTO.to_errno())
        );
        // A peer that goes away in the middle of a header.
        c.send(&[&Hdr::new(Op::Msg, 1, 0).encode()[..10]])?;
        c.shutdown();
        assert_eq!(
            recv_hdr(&s).err().map(|e| e.to_errno()),
            Some(ECONNRESET.to_errno())
        );
        // A connection request that is not one.
        let (l2, a2) = listener()?;
        let c2 = Socket::tcp(&a2)?;
        c2.connect(&a2)?;
        let s2 = l2.accept(true)?;
        send_frame(&c2, &Hdr::new(Op::Msg, 1, 0), &[], &[b"hi"])?;
        assert_eq!(
            read_connreq(&s2).err().map(|e| e.to_errno()),
            Some(EPROTO.to_errno())
        );
        Ok(())
    }
}

#[kunit_tests(kfi_sockets_msg)]
mod msg_tests {
    use super::{
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
        // SAFETY: As above.
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
        // SAFETY: As above.
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
        const AFTER: usize = 12;
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
}
