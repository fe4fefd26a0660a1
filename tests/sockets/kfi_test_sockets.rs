// SPDX-License-Identifier: GPL-2.0

//! kfi_test_sockets.ko: KUnit suites for the building blocks of
//! kfi_sockets: `kfi_sockets_wire` (the wire header's encoding and its
//! checks against garbage), `kfi_ksock` (the kernel socket layer over
//! loopback TCP, IPv4 and IPv6) and `kfi_sockets_frame` (framing and the
//! connection handshake over loopback), and `kfi_sockets_msg` (msg.rs): the
//! provider itself, through kfabric.ko, over loopback (the VM runner loads
//! kfi_sockets.ko first), and `kfi_sockets_hostile` (hostile.rs, its peers
//! in hostile_peers.rs): raw peers that break the protocol on purpose, and
//! `kfi_sockets_scale` (scale.rs): what idle objects hold, and
//! `kfi_sockets_unanswered` (unanswered.rs): writes that asked for inject
//! completion only, and `kfi_sockets_by_ref` (by_ref.rs): writes whose
//! payload goes by page reference, and `kfi_sockets_rdm_peers`
//! (rdm_peers.rs): how an RDM endpoint files its peers' connections, and
//! `kfi_sockets_handlers` (handlers.rs): CQ handlers that post again, and
//! `kfi_sockets_inline_rx` (inline_rx.rs): receives posted while their
//! message waits, which their poster receives itself. The
//! provider's sources are
//! included by path, so the building-block tests exercise the very code
//! the provider runs.

use kernel::prelude::*;

#[path = "answers.rs"]
mod answers;
#[path = "by_ref.rs"]
mod by_ref;
#[path = "cm.rs"]
mod cm;
// The provider's framing, shared by source: the tests use a part.
#[allow(dead_code)]
#[path = "../../prov/sockets/frame.rs"]
mod frame;
#[path = "framing.rs"]
mod framing;
#[path = "handlers.rs"]
mod handlers;
#[path = "held_shares.rs"]
mod held_shares;
#[path = "hostile.rs"]
mod hostile;
#[path = "hostile_deadlines.rs"]
mod hostile_deadlines;
#[path = "hostile_peers.rs"]
mod hostile_peers;
#[path = "inline_rx.rs"]
mod inline_rx;
#[path = "../../kfi/api/mod.rs"]
mod kfi;
#[allow(dead_code)]
#[path = "../../prov/sockets/ksock.rs"]
mod ksock;
#[path = "peer_bounds.rs"]
mod peer_bounds;
// Shared by source inclusion; each module uses a part.
#[path = "msg.rs"]
mod msg;
#[allow(dead_code)]
#[path = "../common/net.rs"]
mod net;
#[path = "rdm_peers.rs"]
mod rdm_peers;
#[path = "scale.rs"]
mod scale;
#[path = "unanswered.rs"]
mod unanswered;
// ksock.rs's kernel call not in the kernel crate's bindings.
#[path = "../../prov/sockets/sock_sys.rs"]
mod sock_sys;
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
        let mut h = valid(Op::Msg);
        h.flags = flags::UNANSWERED;
        // no answer asked of anything but a write
        assert!(refused(h.encode()));
        let mut h = valid(Op::Write);
        h.flags = flags::UNANSWERED | flags::DELIVERY_COMPLETE;
        // no answer, and an acknowledgement
        assert!(refused(h.encode()));
        h.flags = flags::UNANSWERED | flags::COMMIT_COMPLETE;
        assert!(refused(h.encode()));
        h.flags = flags::UNANSWERED | flags::REMOTE_CQ_DATA;
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

    /// The per-host bounds count peers together by `same_host`: one IPv4
    /// address, written as such or IPv4-mapped; for IPv6, the addresses
    /// that share the prefix given (`ipv6_host_prefix`), on one link
    /// (scope) for link-local addresses.
    #[test]
    fn hosts_are_grouped() -> Result {
        let v6 = |host: &[u8]| SockAddr::parse(host, b"1");
        let scoped = |host: &[u8], scope: u32| -> Result<SockAddr> {
            let mut b = [0u8; size_of::<kernel::bindings::sockaddr_in6>()];
            for (d, s) in b.iter_mut().zip(v6(host)?.as_bytes()) {
                *d = *s;
            }
            let at = core::mem::offset_of!(kernel::bindings::sockaddr_in6, sin6_scope_id);
            for (d, s) in b.iter_mut().skip(at).zip(scope.to_ne_bytes()) {
                *d = s;
            }
            SockAddr::from_bytes(&b)
        };
        let a = SockAddr::v4([192, 0, 2, 1], 1);
        for prefix in [0, 64, 128] {
            assert!(a.same_host(&SockAddr::v4([192, 0, 2, 1], 2), prefix));
            assert!(!a.same_host(&SockAddr::v4([192, 0, 2, 2], 1), prefix));
            assert!(a.same_host(&v6(b"::ffff:c000:201")?, prefix));
            assert!(v6(b"::ffff:c000:201")?.same_host(&a, prefix));
            assert!(!a.same_host(&v6(b"::ffff:c000:202")?, prefix));
            // IPv4-compatible is not IPv4-mapped.
            assert!(!a.same_host(&v6(b"::c000:201")?, prefix));
        }
        let b = v6(b"2001:db8:1:2::1")?;
        let same_64 = v6(b"2001:db8:1:2:ffff:ffff:ffff:ffff")?;
        let next_64 = v6(b"2001:db8:1:3::1")?;
        assert!(b.same_host(&v6(b"2001:db8:1:2::1")?, 128));
        assert!(!b.same_host(&same_64, 128));
        assert!(b.same_host(&same_64, 64));
        assert!(!b.same_host(&next_64, 64));
        assert!(b.same_host(&next_64, 56));
        assert!(b.same_host(&next_64, 0));
        // Prefixes that end inside a byte: the 4th groups 0x0002 and
        // 0x000f agree in their first 12 bits, 0x0002 and 0x0003 in 15.
        let low_f = v6(b"2001:db8:1:f::1")?;
        assert!(b.same_host(&low_f, 60));
        assert!(!b.same_host(&low_f, 61));
        assert!(b.same_host(&next_64, 63));
        // Beyond 128 counts as 128.
        assert!(!b.same_host(&same_64, 200));
        assert!(!b.same_host(&v6(b"::ffff:2001:db8")?, 64));
        // A scope on a global address does not make another host.
        assert!(b.same_host(&scoped(b"2001:db8:1:2::1", 5)?, 128));
        let ll = scoped(b"fe80::1", 2)?;
        assert!(ll.same_host(&scoped(b"fe80::2:3", 2)?, 64));
        assert!(!ll.same_host(&scoped(b"fe80::2:3", 2)?, 128));
        assert!(!ll.same_host(&scoped(b"fe80::1", 3)?, 64));
        assert!(!ll.same_host(&scoped(b"fe80::1", 3)?, 128));
        Ok(())
    }

    /// A send that runs out of time fails with `ETIMEDOUT`, whatever part
    /// of it the socket took: never a short count (which frames read as a
    /// failed connection). The socket's timeout counts in jiffies and may
    /// end up to a tick before the deadline it was set from; the peer
    /// reads a little after each round, so each send takes a part.
    #[test]
    fn a_send_out_of_time_is_etimedout() -> Result {
        const BIG: usize = 16 << 20;
        let (_l, c, s) = pair(SockAddr::v4([127, 0, 0, 1], 0))?;
        let mut big = KVVec::with_capacity(BIG, GFP_KERNEL)?;
        big.resize(BIG, 0x5a, GFP_KERNEL)?;
        let mut chunk = KVVec::with_capacity(256 << 10, GFP_KERNEL)?;
        chunk.resize(256 << 10, 0, GFP_KERNEL)?;
        for ms in 3..15u64 {
            c.set_tx_deadline(Some(Deadline::after_ms(ms)));
            assert_eq!(
                c.send(&[&big]).map_err(|e| e.to_errno()),
                Err(ETIMEDOUT.to_errno())
            );
            // Room for a part of the next send: whatever the failed send
            // got into the socket (under TCG a few ms may not be 256 KiB).
            s.set_rx_deadline(Some(Deadline::after_ms(1000)));
            assert!(s.recv(&mut chunk, false)? > 0);
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
        assert_eq!(recv_rma(&s, &got)?.as_slice(), &rma[..]);
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
