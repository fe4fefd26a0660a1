// SPDX-License-Identifier: GPL-2.0

//! `kfi_sockets_scale`: what an idle kfi_sockets object holds. An idle RDM
//! endpoint holds no worker (its listener is served by work queued from
//! the socket's callback, its dispatching by work queued at post), so the
//! number of endpoints is bounded by memory, not by the system's
//! long-running workqueue, which runs at most 1,024 items per CPU at once.

use kernel::{prelude::*, str::CString};

use super::{
    frame,
    kfi::{kfabric::Owned, kfi_sys as sys},
    ksock::{SockAddr, Socket},
    net::*,
};

use super::hostile_peers::*;

#[kunit_tests(kfi_sockets_scale)]
mod cases {
    use super::*;

    /// Endpoints of the case: more than the long-running queue of a
    /// two-CPU guest runs at once if each held two workers (2 x 1,024).
    const ENDPOINTS: usize = 1100;
    /// The listening port of endpoint 0; endpoint `i` is on `BASE + i`
    /// (below the ephemeral range, so no connecting socket holds one).
    const BASE: u16 = 12000;

    fn port_of(i: usize) -> Result<u16> {
        u16::try_from(i)
            .ok()
            .and_then(|i| BASE.checked_add(i))
            .ok_or(EINVAL)
    }

    /// Whether the RDM endpoint on 127.0.0.1:`port` answers a raw peer's
    /// request with `Accept` within 5 s.
    fn answers(port: u16) -> Result<bool> {
        let local = SockAddr::v4([127, 0, 0, 1], 0);
        let s = Socket::tcp(&local)?;
        s.bind(&local)?;
        let claim = SockAddr::v4([127, 0, 0, 1], 9);
        frame::connect_start(&s, &SockAddr::v4([127, 0, 0, 1], port), claim.as_bytes())?;
        if !wait_readable(&s, 5000) {
            return Ok(false);
        }
        Ok(matches!(
            frame::connect_finish(&s),
            Ok(frame::Answer::Accepted(_))
        ))
    }

    /// An RDM endpoint's queue of operations not handed to a connection
    /// starts small and grows on demand (an idle endpoint holds little);
    /// its bounds hold as it grows: 16 operations per peer, 64 in all
    /// (`EAGAIN` beyond), and every queued operation completes once, with
    /// an error, when the endpoint closes. The peers take the TCP
    /// connection and never answer, so nothing leaves the queue.
    #[test]
    fn rdm_queue_grows_within_its_bounds() -> Result {
        const PEERS: usize = 5;
        const PER_PEER: usize = 16;
        const QUEUE: usize = 64;
        let payload = [7u8; 8];
        // The endpoint's close reports all of them: room for every one.
        let (n, av) = rdm_net(c"11998", 8)?;
        let c = cq_sized(&n, 2 * QUEUE)?;
        let ep = rdm_endpoint(&n, &c, &av)?;
        let mut silent = KVec::with_capacity(PEERS, GFP_KERNEL)?;
        let mut to = [0u64; PEERS];
        for (i, a) in to.iter_mut().enumerate() {
            let port = 11990 + i as u16;
            silent.push(raw_listener(port)?, GFP_KERNEL)?;
            *a = av
                .insert(SockAddr::v4([127, 0, 0, 1], port).as_bytes())
                .map_err(|_| EINVAL)?;
        }
        let sv = kvec(&payload);
        let post = |peer: usize, ctx: usize| -> i32 {
            let mut m = msg(&sv, ctx, 0);
            m.addr = to[peer];
            // SAFETY: Open endpoint; `payload` is declared before `ep`, so
            // it outlives the endpoint, whose close ends the sends.
            unsafe { rc(ep.sendmsg(&m, 0)) }
        };
        let outcome = (|| -> Result {
            for peer in 0..QUEUE / PER_PEER {
                for k in 0..PER_PEER {
                    let ret = post(peer, 1 + peer * PER_PEER + k);
                    ensure!(ret == 0, "send {} to peer {}: {}", k, peer, ret);
                }
                let ret = post(peer, 1000);
                ensure!(
                    ret == EAGAIN.to_errno(),
                    "send 17 to peer {}: {}",
                    peer,
                    ret
                );
            }
            let ret = post(PEERS - 1, 1000);
            ensure!(ret == EAGAIN.to_errno(), "send 65 to a fresh peer: {}", ret);
            Ok(())
        })();
        drop(ep);
        outcome?;
        let mut seen = [false; QUEUE];
        for i in 0..QUEUE {
            let e = cq_error(&c, 5000).inspect_err(|_| {
                pr_err!("kfi_sockets_scale: {} of {} sends completed\n", i, QUEUE)
            })?;
            let ctx = e.op_context as usize;
            ensure!((1..=QUEUE).contains(&ctx), "context {}", ctx);
            ensure!(!seen[ctx - 1], "send {} completed twice", ctx);
            seen[ctx - 1] = true;
        }
        let mut e = sys::kfi_cq_data_entry::default();
        ensure!(
            sread_ms(&c, &mut e, 100) == ETIMEDOUT.to_errno() as isize,
            "a completion too many"
        );
        drop(c);
        drop(av);
        drop(n);
        drop(silent);
        Ok(())
    }

    /// Issue 10 (scale): 1,100 open RDM endpoints each accept a peer's
    /// request, and the last one's message reaches the first. With an
    /// acceptor and a dispatcher worker per endpoint on the long-running
    /// queue, the workers beyond its limit never started: endpoints
    /// opened last never answered.
    #[test]
    fn idle_rdm_endpoints_hold_no_worker() -> Result {
        let mut rbuf = [0u8; 16];
        let payload = *b"from the last...";
        let (n, av) = rdm_net(c"11999", 4)?;
        let c = cq(&n)?;
        let mut eps: KVec<Owned<sys::kfid_ep>> = KVec::with_capacity(ENDPOINTS, GFP_KERNEL)?;
        let outcome = (|| -> Result {
            for i in 0..ENDPOINTS {
                let port = CString::try_from_fmt(fmt!("{}", port_of(i)?))?;
                let info = source_info(c"sockets", c"127.0.0.1", &port, sys::KFI_EP_RDM)?;
                let ep = rdm_endpoint_on(&n, &info, &c, &av)
                    .inspect_err(|e| pr_err!("kfi_sockets_scale: endpoint {}: {:?}\n", i, e))?;
                eps.push(ep, GFP_KERNEL)?;
            }
            for i in 0..ENDPOINTS {
                ensure!(
                    answers(port_of(i)?)?,
                    "endpoint {} of {} did not answer",
                    i,
                    ENDPOINTS
                );
            }
            let first = eps.first().ok_or(EINVAL)?;
            let last = eps.last().ok_or(EINVAL)?;
            let to_first = av
                .insert(SockAddr::v4([127, 0, 0, 1], BASE).as_bytes())
                .map_err(|_| EINVAL)?;
            let rv = kvec_mut(&mut rbuf);
            // SAFETY: Open endpoint; `rbuf` outlives the endpoints (dropped
            // before it below, on every path).
            let ret = unsafe { rc(first.recvmsg(&msg(&rv, 1, 0), 0)) };
            ensure!(ret == 0, "receive not posted: {}", ret);
            let sv = kvec(&payload);
            let mut m = msg(&sv, 2, 0);
            m.addr = to_first;
            // SAFETY: Open endpoint; `payload` outlives the endpoints.
            let ret = unsafe { rc(last.sendmsg(&m, 0)) };
            ensure!(ret == 0, "send not posted: {}", ret);
            let mut seen = [false; 2];
            for _ in 0..2 {
                let mut e = sys::kfi_cq_data_entry::default();
                let r = sread_ms(&c, &mut e, 10000);
                ensure!(
                    r == 1,
                    "completion {}: {}",
                    seen.iter().filter(|s| **s).count(),
                    r
                );
                let ctx = e.op_context as usize;
                ensure!(ctx == 1 || ctx == 2, "context {}", ctx);
                seen[ctx - 1] = true;
            }
            ensure!(seen == [true, true], "a completion came twice");
            Ok(())
        })();
        drop(eps);
        outcome?;
        ensure!(rbuf == payload, "the message's bytes differ");
        Ok(())
    }
}
