// SPDX-License-Identifier: GPL-2.0

//! `kfi_sockets_rdm_peers`: how an RDM endpoint files the connections of
//! its peers, so that an operation to a peer finds the connection it has.
//! A raw kernel-socket peer (the provider's own framing, included by
//! path) on one side of a loopback connection, a kfabric RDM endpoint on
//! the other: one filing per peer, and none kept for a peer that left.
//!
//! Checks return an error instead of asserting, so that a failing case
//! still closes its objects.

use kernel::{
    prelude::*,
    time::{delay::fsleep, Delta},
};

use super::{
    frame,
    framing::{check_ack, check_pattern, push_msg},
    kfi::kfi_sys as sys,
    ksock::SockAddr,
    net::*,
    wire::{Hdr, Op},
};

use super::hostile_peers::*;

#[kunit_tests(kfi_sockets_rdm_peers)]
mod tests {
    use super::*;

    /// An IPv4 peer of an endpoint that listens on the IPv6 wildcard (a
    /// dual-stack socket, which reports the peer as `::ffff:127.0.0.1`)
    /// is filed under the IPv4 address, the form the AV gives: a message
    /// to it goes on the connection the peer opened, and no second one is
    /// opened.
    #[test]
    fn ipv4_peer_of_a_dual_stack_endpoint_has_one_connection() -> Result {
        // Declared before the endpoint, so it outlives it on every path:
        // the endpoint's close ends the send.
        let payload = [0x3cu8; 8];
        let (n, av) = rdm_net_at(c"::", c"7650", 4)?;
        let c = cq(&n)?;
        let ep = rdm_endpoint(&n, &c, &av)?;
        // The peer listens where it claims to (a second connection to it
        // would arrive there) and asks over IPv4.
        let me = SockAddr::v4([127, 0, 0, 1], 7651);
        let listener = raw_listener(7651)?;
        let (accepted, s) = rdm_claim([127, 0, 0, 1], 7650, &me)?;
        ensure!(accepted, "the IPv4 peer was refused");
        // The endpoint files the connection just after it answers: a send
        // before that opens a second one (to a peer whose own request is
        // in flight, as any two peers that start at once), which is not
        // what this case is about.
        fsleep(Delta::from_millis(500));
        let to = av.insert(me.as_bytes());
        ensure!(to.is_ok(), "kfi_av_insert: {:?}", to);
        let pv = kvec(&payload);
        let mut m = msg(&pv, 1, 0);
        m.addr = to.map_err(|_| EINVAL)?;
        // SAFETY: Open endpoint; `payload` outlives it (declared first).
        let ret = unsafe { rc(ep.sendmsg(&m, 0)) };
        ensure!(ret == 0, "send not posted: {}", ret);
        if !wait_readable(&s, 5000) {
            let second = accept_within(&listener, 0).is_some();
            pr_err!(
                "kfi_sockets_rdm_peers: no message on the peer's connection (a second one: {})\n",
                second
            );
            return Err(EBADE);
        }
        let h = frame::recv_hdr(&s)?;
        ensure!(
            h.op == Op::Msg && h.len == payload.len() as u64,
            "not the message: {:?} of {} bytes",
            h.op,
            h.len
        );
        ensure!(
            accept_within(&listener, 200).is_none(),
            "a second connection was opened to the peer"
        );
        drop(ep);
        drop(s);
        drop(listener);
        Ok(())
    }

    /// A peer's tagged message larger than its share of the held queue
    /// (2 MiB of 4) waits in the socket, its connection parked on it with
    /// no deadline. When the peer hangs up, the connection must end all
    /// the same: its address is free again for the peer's next request
    /// (before, the parked connection never read the end of the stream,
    /// stayed up, and refused the peer's address for good).
    #[test]
    fn parked_connection_ends_when_its_peer_leaves() -> Result {
        let r = rdm_side(c"7652")?;
        let me = SockAddr::v4([127, 0, 0, 1], 7653);
        let (accepted, a) = rdm_claim([127, 0, 0, 1], 7652, &me)?;
        ensure!(accepted, "the peer was refused");
        // A header for 2 MiB and the first 16 KiB of it: all of it goes
        // out, so the peer's FIN is not held behind bytes our full window
        // would refuse. Nobody ever posts tag 9.
        let mut h = Hdr::new(Op::Tagged, 1, 0);
        h.tag = 9;
        h.len = 2 << 20;
        let head = h.encode();
        let mut first = KVec::new();
        first.resize(16 << 10, 0x44u8, GFP_KERNEL)?;
        a.send(&[&head, &first])?;
        // Past the wait in the socket for its receive (`recv_wait_ms`):
        // parked for want of room.
        fsleep(Delta::from_millis(300));
        drop(a);
        let mut again = false;
        for _ in 0..30 {
            let (ok, s) = rdm_claim([127, 0, 0, 1], 7652, &me)?;
            drop(s);
            if ok {
                again = true;
                break;
            }
            fsleep(Delta::from_millis(100));
        }
        ensure!(
            again,
            "the peer's address stayed taken by a connection it left 3 s ago"
        );
        drop(r);
        Ok(())
    }

    /// A peer's message that asked for delivery completion and was
    /// reported to the ULP is acknowledged even though the ULP closes its
    /// endpoint as soon as it has it, while the peer's next messages
    /// arrive: the close stops every connection taking new frames and
    /// lets it send what it owes before it closes the receive queues
    /// (before, the next message found them closed and ended the
    /// connection, its `Ack` unsent). The close races the receive work: a
    /// few rounds.
    #[test]
    fn reported_message_is_acknowledged_when_the_endpoint_closes() -> Result {
        const ROUNDS: usize = 8;
        /// Bytes of each message: the receive work, not the data
        /// callback, copies the first.
        const LEN: usize = 64 << 10;
        /// Messages behind the first, which no receive takes.
        const BEHIND: usize = 4;
        let mut failed = 0;
        for round in 0..ROUNDS {
            let r = rdm_side(c"7680")?;
            let me = SockAddr::v4([127, 0, 0, 1], 7681);
            let (accepted, a) = rdm_claim([127, 0, 0, 1], 7680, &me)?;
            ensure!(accepted, "the peer was refused");
            let mut buf = KVec::from_elem(0u8, LEN, GFP_KERNEL)?;
            let v = kvec_mut(&mut buf);
            // SAFETY: An open endpoint; `buf` outlives it (it is closed
            // below, before `buf` is dropped).
            let posted = unsafe { rc(r.ep.recvmsg(&msg(&v, 1, 0), 0)) };
            ensure!(posted == 0, "receive not posted: {}", posted);
            let mut stream = KVec::new();
            push_msg(&mut stream, 0, LEN, true)?;
            for m in 1..=BEHIND {
                push_msg(&mut stream, m, LEN, false)?;
            }
            let sent = a.send(&[&stream])?;
            ensure!(sent == stream.len(), "sent {} of {}", sent, stream.len());
            let mut e = sys::kfi_cq_data_entry::default();
            let got = sread_ms(&r.c, &mut e, 5000);
            // The ULP closes as soon as it has the message.
            drop(r);
            ensure!(
                got == 1 && e.op_context as usize == 1,
                "not received: {}",
                got
            );
            check_pattern(&buf, 0)?;
            if let Err(err) = check_ack(&a, 0) {
                pr_err!("kfi_sockets_rdm_peers: round {}: {:?}\n", round, err);
                failed += 1;
            }
        }
        ensure!(
            failed == 0,
            "{} of {} delivered messages not acknowledged",
            failed,
            ROUNDS
        );
        Ok(())
    }
}
