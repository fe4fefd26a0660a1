// SPDX-License-Identifier: GPL-2.0

//! `kfi_sockets_peer_bounds`: how many peers kfi_sockets takes. Raw
//! kernel-socket peers ask an RDM endpoint or a passive endpoint for
//! connections until its bound (`rdm_max_peers`,
//! `rdm_max_peers_per_host`, `listen_backlog_max`,
//! `handshake_max_per_host`): one more is refused, and room comes back
//! once a peer leaves or the ULP answers.
//!
//! Checks return an error instead of asserting, so that a failing case
//! still closes its objects.

use kernel::{
    prelude::*,
    time::{delay::fsleep, Delta},
};

use super::{
    frame,
    hostile_peers::*,
    kfi::kfi_sys as sys,
    ksock::{SockAddr, Socket},
    net::*,
};

#[kunit_tests(kfi_sockets_peer_bounds)]
mod cases {
    use super::*;

    /// Issue 10, bug 4: an RDM endpoint holds at most `rdm_max_peers`
    /// connections. One more peer is refused (no connection, no memory);
    /// once a peer hangs up, its room is free again. The peers are on as
    /// many hosts (127.0.0.N) as `rdm_max_peers_per_host` needs.
    #[test]
    fn rdm_peers_are_bounded() -> Result {
        let r = rdm_side(c"7493")?;
        let host = |i: usize| [127, 0, 0, 1 + (i / RDM_MAX_PEERS_PER_HOST) as u8];
        let claim = |i: usize| SockAddr::v4(host(i), 20000 + i as u16);
        let mut peers = KVec::with_capacity(RDM_MAX_PEERS, GFP_KERNEL)?;
        for i in 0..RDM_MAX_PEERS {
            let (accepted, s) = rdm_claim(host(i), 7493, &claim(i))?;
            ensure!(accepted, "peer {} of {} was refused", i, RDM_MAX_PEERS);
            peers.push(s, GFP_KERNEL)?;
        }
        // From a host with no connection yet.
        let last = RDM_MAX_PEERS;
        let (accepted, extra) = rdm_claim(host(last), 7493, &claim(last))?;
        ensure!(
            !accepted,
            "peer {} was accepted beyond rdm_max_peers",
            RDM_MAX_PEERS + 1
        );
        drop(extra);
        // One peer leaves: its room comes back once its end is noticed.
        drop(peers.pop());
        let mut back = false;
        for _ in 0..50 {
            let (accepted, s) = rdm_claim(host(last), 7493, &claim(last))?;
            if accepted {
                peers.push(s, GFP_KERNEL)?;
                back = true;
                break;
            }
            fsleep(Delta::from_millis(100));
        }
        ensure!(back, "the room of a peer that left never came back");
        drop(peers);
        drop(r);
        Ok(())
    }

    /// The peers on one host open at most `rdm_max_peers_per_host`
    /// connections to an RDM endpoint: one more from that host is refused
    /// while the endpoint still has room, and a peer on another host is
    /// still accepted; once one of the first hangs up, its host has room
    /// again.
    #[test]
    fn rdm_peers_of_one_host_are_bounded() -> Result {
        let r = rdm_side(c"7663")?;
        let one = [127, 0, 0, 1];
        let claim = |ip: [u8; 4], i: usize| SockAddr::v4(ip, 21000 + i as u16);
        let mut peers = KVec::with_capacity(RDM_MAX_PEERS_PER_HOST + 1, GFP_KERNEL)?;
        for i in 0..RDM_MAX_PEERS_PER_HOST {
            let (accepted, s) = rdm_claim(one, 7663, &claim(one, i))?;
            ensure!(accepted, "peer {} of one host was refused", i);
            peers.push(s, GFP_KERNEL)?;
        }
        let last = RDM_MAX_PEERS_PER_HOST;
        let (accepted, extra) = rdm_claim(one, 7663, &claim(one, last))?;
        ensure!(
            !accepted,
            "peer {} of one host was accepted beyond rdm_max_peers_per_host",
            last + 1
        );
        drop(extra);
        let other = [127, 0, 0, 2];
        let (accepted, s) = rdm_claim(other, 7663, &claim(other, 0))?;
        ensure!(accepted, "a peer on another host was refused");
        peers.push(s, GFP_KERNEL)?;
        // The first peer leaves: its host's room comes back once its end
        // is noticed.
        drop(peers.remove(0));
        let mut back = false;
        for _ in 0..50 {
            let (accepted, s) = rdm_claim(one, 7663, &claim(one, last))?;
            if accepted {
                peers.push(s, GFP_KERNEL)?;
                back = true;
                break;
            }
            fsleep(Delta::from_millis(100));
        }
        ensure!(
            back,
            "the room of a peer that left never came back to its host"
        );
        drop(peers);
        drop(r);
        Ok(())
    }

    /// An RDM endpoint reads at most `handshake_max_per_host` requests
    /// from one host at once: with that many silent peers on 127.0.0.1,
    /// one more request from there is refused, one from 127.0.0.2 is
    /// accepted, and once the silent peers go, 127.0.0.1 is served again.
    #[test]
    fn rdm_handshakes_of_one_host_are_bounded() -> Result {
        let r = rdm_side(c"7665")?;
        let one = [127, 0, 0, 1];
        let claim = |ip: [u8; 4], i: usize| SockAddr::v4(ip, 22000 + i as u16);
        let mut silent = KVec::with_capacity(HANDSHAKE_MAX_PER_HOST, GFP_KERNEL)?;
        let mut peers = KVec::with_capacity(2, GFP_KERNEL)?;
        let outcome = (|| -> Result {
            let to = SockAddr::v4(one, 7665);
            for _ in 0..HANDSHAKE_MAX_PER_HOST {
                let s = Socket::tcp(&to)?;
                s.connect(&to)?;
                silent.push(s, GFP_KERNEL)?;
            }
            // Let the acceptor take them all (they send nothing).
            fsleep(Delta::from_millis(500));
            let (accepted, extra) = rdm_claim(one, 7665, &claim(one, 0))?;
            ensure!(
                !accepted,
                "a request beyond one host's share of handshakes was accepted"
            );
            drop(extra);
            let other = [127, 0, 0, 2];
            let (accepted, s) = rdm_claim(other, 7665, &claim(other, 0))?;
            ensure!(accepted, "a peer on another host was refused");
            peers.push(s, GFP_KERNEL)?;
            silent.clear();
            let mut back = false;
            for _ in 0..50 {
                fsleep(Delta::from_millis(100));
                let (accepted, s) = rdm_claim(one, 7665, &claim(one, 1))?;
                if accepted {
                    peers.push(s, GFP_KERNEL)?;
                    back = true;
                    break;
                }
            }
            ensure!(
                back,
                "the host's silent peers left, and it still was refused"
            );
            Ok(())
        })();
        drop(silent);
        drop(peers);
        drop(r);
        outcome
    }

    /// An RDM endpoint whose handshake slots two hosts fill (8 silent
    /// peers each) still reads a third host's request: it takes the place
    /// of one silent peer, which is dropped.
    #[test]
    fn rdm_crowded_hosts_give_way() -> Result {
        let r = rdm_side(c"7667")?;
        let mut silent = KVec::with_capacity(2 * HANDSHAKE_MAX_PER_HOST, GFP_KERNEL)?;
        let outcome = (|| -> Result {
            let to = SockAddr::v4([127, 0, 0, 1], 7667);
            for host in [1u8, 2] {
                for _ in 0..HANDSHAKE_MAX_PER_HOST {
                    let local = SockAddr::v4([127, 0, 0, host], 0);
                    let s = Socket::tcp(&local)?;
                    s.bind(&local)?;
                    s.connect(&to)?;
                    silent.push(s, GFP_KERNEL)?;
                }
            }
            fsleep(Delta::from_millis(500));
            let third = [127, 0, 0, 3];
            let (accepted, s) = rdm_claim(third, 7667, &SockAddr::v4(third, 23000))?;
            ensure!(accepted, "a third host was kept out by two crowded ones");
            drop(s);
            // Nothing is ever sent to a silent peer: readable is closed.
            let dropped = silent.iter().filter(|s| wait_readable(s, 100)).count();
            ensure!(dropped == 1, "{} silent peers dropped, not 1", dropped);
            Ok(())
        })();
        drop(silent);
        drop(r);
        outcome
    }

    /// Issue 10, bug 4: a passive endpoint holds at most
    /// `listen_backlog_max` requests the ULP has not answered. One more is
    /// refused at once (`Reject`); answering one makes room again.
    #[test]
    fn listen_backlog_is_bounded() -> Result {
        let n = net(c"7494")?;
        let pep = listen(&n)?;
        let a = SockAddr::v4([127, 0, 0, 1], 7494);
        let mut raws = KVec::with_capacity(LISTEN_BACKLOG_MAX + 2, GFP_KERNEL)?;
        let mut infos: KVec<crate::kfi::ulp::ConnReq> =
            KVec::with_capacity(LISTEN_BACKLOG_MAX, GFP_KERNEL)?;
        let outcome = (|| -> Result {
            for i in 0..LISTEN_BACKLOG_MAX {
                let raw = Socket::tcp(&a)?;
                frame::connect_start(&raw, &a, b"waiting")?;
                raws.push(raw, GFP_KERNEL)?;
                let (ev, buf, _) = event(&n)?;
                ensure!(ev == sys::KFI_CONNREQ, "request {}: event {}", i, ev);
                infos.push(take_req(&buf)?, GFP_KERNEL)?;
            }
            let extra = Socket::tcp(&a)?;
            frame::connect_start(&extra, &a, b"one too many")?;
            ensure!(
                wait_readable(&extra, 5000),
                "request {} got no answer",
                LISTEN_BACKLOG_MAX + 1
            );
            ensure!(
                matches!(
                    frame::connect_finish(&extra),
                    Ok(frame::Answer::Rejected(_))
                ),
                "request {} was not refused",
                LISTEN_BACKLOG_MAX + 1
            );
            drop(extra);
            // The ULP answers one: room for one more.
            let first = infos.first().ok_or(EINVAL)?;
            let ret = rc(pep.reject(first.info(), &[]));
            ensure!(ret == 0, "kfi_reject: {}", ret);
            let next = Socket::tcp(&a)?;
            frame::connect_start(&next, &a, b"next")?;
            raws.push(next, GFP_KERNEL)?;
            let (ev, buf, _) = event(&n)?;
            ensure!(ev == sys::KFI_CONNREQ, "after a reject: event {}", ev);
            infos.push(take_req(&buf)?, GFP_KERNEL)?;
            Ok(())
        })();
        // The reported requests' infos are freed.
        drop(infos);
        drop(raws);
        drop(pep);
        outcome
    }

    /// A passive endpoint's requests take at most half of its EQ
    /// (kfabric.ko keeps the rest for the events of connections already
    /// made): of 9 peers on an EQ of 16, 8 requests wait and one peer
    /// reads a `Reject`; the ULP sees no overflow.
    #[test]
    fn requests_take_half_the_eq() -> Result {
        let n = net(c"7499")?;
        let pep = listen(&n)?;
        let a = SockAddr::v4([127, 0, 0, 1], 7499);
        let mut raws = KVec::with_capacity(9, GFP_KERNEL)?;
        let mut infos: KVec<crate::kfi::ulp::ConnReq> = KVec::with_capacity(8, GFP_KERNEL)?;
        let outcome = (|| -> Result {
            for i in 0..9u8 {
                // Each from a host of its own: no bound per host applies.
                let local = SockAddr::v4([127, 0, 0, 10 + i], 0);
                let raw = Socket::tcp(&local)?;
                raw.bind(&local)?;
                frame::connect_start(&raw, &a, b"waiting")?;
                raws.push(raw, GFP_KERNEL)?;
            }
            // The refused one is answered at once; the others, never.
            let mut first = None;
            for _ in 0..500 {
                first = raws.iter().position(|r| r.readable());
                if first.is_some() {
                    break;
                }
                fsleep(Delta::from_millis(10));
            }
            let Some(first) = first.and_then(|i| raws.get(i)) else {
                pr_err!("kfi_sockets_hostile: no peer was answered\n");
                return Err(EBADE);
            };
            fsleep(Delta::from_millis(200));
            let answered = raws.iter().filter(|r| r.readable()).count();
            ensure!(answered == 1, "{} peers answered, not 1", answered);
            ensure!(
                matches!(frame::connect_finish(first), Ok(frame::Answer::Rejected(_))),
                "the peer beyond half the EQ was not refused"
            );
            for i in 0..8 {
                let (ev, buf, _) = event(&n)?;
                ensure!(ev == sys::KFI_CONNREQ, "request {}: event {}", i, ev);
                infos.push(take_req(&buf)?, GFP_KERNEL)?;
            }
            // Nothing more: no ninth request, no overflow entry.
            let mut ev = 0u32;
            let mut buf = [0u8; 256];
            let r = n.eq.read_event(&mut ev, &mut buf, Some(200));
            ensure!(
                r == EAGAIN.to_errno() as isize || r == ETIMEDOUT.to_errno() as isize,
                "after the 8 requests: {}",
                r
            );
            Ok(())
        })();
        drop(infos);
        drop(raws);
        drop(pep);
        outcome
    }
}
