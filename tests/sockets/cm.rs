// SPDX-License-Identifier: GPL-2.0

//! `kfi_sockets_cm`: connection management called where it does not
//! belong. `kfi_accept` answers a connection request once, on the
//! endpoint made for it, before the connection's transmitter starts: on
//! a live connection (either side, or a second time) its `Accept` frame
//! would land between the transmitter's frames, or inside one. It must be
//! refused with `EINVAL`, write nothing, and leave the connection working.

use kernel::{
    prelude::*,
    time::{delay::fsleep, Delta},
};

use super::{
    frame,
    kfi::{kfabric::Owned, kfi_sys as sys},
    ksock::{Deadline, SockAddr, Socket},
    net::*,
    wire::{Hdr, Op},
};

use super::hostile_peers::*;

/// The raw peer `raw` has no byte to read (after a moment for any to
/// arrive).
fn nothing_arrives(raw: &Socket) -> Result {
    fsleep(Delta::from_millis(200));
    let mut b = [0u8; 1];
    match raw.recv_now(&mut b)? {
        None => Ok(()),
        Some(n) => {
            pr_err!("kfi_sockets_cm: the peer got {} byte(s)\n", n);
            Err(EBADE)
        }
    }
}

/// A message from the raw peer `raw` still reaches the receive posted on
/// `ep` (completions on `c`): the connection still works.
fn still_connected(ep: &Owned<sys::kfid_ep>, c: &Owned<sys::kfid_cq>, raw: &Socket) -> Result {
    let mut buf = [0u8; 16];
    let v = kvec_mut(&mut buf);
    // SAFETY: `buf` outlives the completion read below, or the endpoint
    // (closed by the caller) on failure.
    unsafe { ep.recvmsg(&msg(&v, 9, 0), 0) }?;
    let mut h = Hdr::new(Op::Msg, 0, 0);
    h.len = 5;
    frame::send_frame(raw, &h, &[], &[b"hello"])?;
    let mut e = sys::kfi_cq_data_entry::default();
    let r = sread(c, &mut e);
    ensure!(
        r == 1 && e.op_context as usize == 9 && e.len == 5,
        "receive: {} (context {}, {} bytes)",
        r,
        e.op_context as usize,
        e.len
    );
    ensure!(&buf[..5] == b"hello", "received other bytes");
    Ok(())
}

/// Waits up to 2 s for an event (or an error entry) to be queued on the
/// EQ of `n`, without reading it.
fn event_queued(n: &Net) -> Result {
    let mut buf = [0u8; 512];
    let mut ev = 0u32;
    for _ in 0..200 {
        // SAFETY: An open EQ; `buf` is writable for its length.
        let r = unsafe {
            sys::kfi_eq_read(
                n.eq.as_ptr(),
                &mut ev,
                buf.as_mut_ptr().cast(),
                buf.len(),
                sys::KFI_PEEK,
            )
        };
        if r > 0 || r == -(sys::KFI_EAVAIL as isize) {
            return Ok(());
        }
        fsleep(Delta::from_millis(10));
    }
    pr_err!("kfi_sockets_cm: no event came\n");
    Err(ETIMEDOUT)
}

#[kunit_tests(kfi_sockets_cm)]
mod cases {
    use super::*;

    /// Connection events an EQ has no room for come back as one overflow
    /// notice, after what was queued before them: the safe API reads it
    /// as `CmEvent::Overflow`, not as the failure of a null object.
    #[test]
    fn eq_overflow_is_its_own_event() -> Result {
        use crate::kfi::ulp::{CmEvent, Fabric, Hints};
        let hints = Hints::provider(c"sockets")?;
        let src = hints.getinfo(c"127.0.0.1", c"7476", sys::KFI_SOURCE)?;
        let dst = hints.getinfo(c"127.0.0.1", c"7476", 0)?;
        let fabric = Fabric::open(src.entry())?;
        let d = fabric.domain(src.entry())?;
        let (big, small) = (fabric.eq(16)?, fabric.eq(1)?);
        let _pep = fabric.listen(src.entry(), &big)?;
        let c = d.cq(16)?;
        let mut eps = KVec::with_capacity(2, GFP_KERNEL)?;
        for i in 0..2 {
            let cep = d.endpoint(dst.entry())?;
            cep.bind_cq(&c, sys::KFI_TRANSMIT | sys::KFI_RECV)?;
            cep.bind_eq(&small)?;
            cep.enable()?;
            cep.connect(&[])?;
            let CmEvent::ConnReq { req, .. } = big.sread(WAIT_MS)? else {
                return Err(EPROTO);
            };
            let sep = d.endpoint(req.info())?;
            drop(req);
            sep.bind_cq(&c, sys::KFI_TRANSMIT | sys::KFI_RECV)?;
            sep.bind_eq(&big)?;
            sep.enable()?;
            sep.accept(&[])?;
            let CmEvent::Connected { .. } = big.sread(WAIT_MS)? else {
                return Err(EPROTO);
            };
            eps.push((cep, sep), GFP_KERNEL)?;
            ensure!(eps.len() == i + 1, "pair {} kept", i);
        }
        // Room for the first client's event only; the second's is lost
        // (each comes within milliseconds of its server's).
        fsleep(Delta::from_millis(500));
        let first = small.sread(WAIT_MS)?;
        ensure!(
            matches!(first, CmEvent::Connected { fid, .. } if eps.iter().any(|(e, _)| e.is(fid))),
            "the first event is not a client's connection"
        );
        let second = small.sread(WAIT_MS)?;
        ensure!(
            matches!(second, CmEvent::Overflow),
            "the second event is not the overflow notice"
        );
        Ok(())
    }

    /// The events of a closed endpoint that were never read leave the EQ
    /// with it (kfabric.ko's close): its connection's end is not read
    /// later, when an endpoint opened at the same address could take it
    /// for its own. The events of other objects stay, in order.
    #[test]
    fn closed_endpoint_leaves_no_events() -> Result {
        let n = net(c"7530")?;
        let l = raw_listener(7530)?;
        let c = cq(&n)?;
        let (ep, raw) = kfi_client(&n, &c, &l)?;
        let fid = ep.fid();
        // The peer ends the connection: an event for `ep` is queued.
        drop(raw);
        event_queued(&n)?;
        let other = sys::kfi_eq_entry {
            fid: n.domain.fid(),
            data: 77,
            ..Default::default()
        };
        let size = size_of::<sys::kfi_eq_entry>();
        // SAFETY: An open EQ; `other` is read during the call.
        let w = unsafe {
            sys::kfi_eq_write(
                n.eq.as_ptr(),
                sys::KFI_NOTIFY,
                (&raw const other).cast(),
                size,
                0,
            )
        };
        ensure!(w == size as isize, "write: {}", w);
        drop(ep);
        let mut buf = [0u8; 512];
        let mut ev = 0u32;
        let r = n.eq.read_event(&mut ev, &mut buf, None);
        if r == -(sys::KFI_EAVAIL as isize) {
            let mut e = sys::kfi_eq_err_entry::default();
            let _ = n.eq.readerr(&mut e);
            let closed = core::ptr::eq(e.fid, fid);
            pr_err!(
                "kfi_sockets_cm: an error entry came first (the closed endpoint's: {closed})\n"
            );
            return Err(EBADE);
        }
        ensure!(
            r == size as isize && ev == sys::KFI_NOTIFY,
            "read {} (event {})",
            r,
            ev
        );
        let got = cm_entry(&buf);
        ensure!(
            !core::ptr::eq(got.fid, fid) && core::ptr::eq(got.fid, n.domain.fid()),
            "the closed endpoint's event stayed"
        );
        let r = n.eq.read_event(&mut ev, &mut buf, None);
        ensure!(r == EAGAIN.to_errno() as isize, "more events: {}", r);
        Ok(())
    }

    /// A listener closed with a connection request unread takes the
    /// request out of its EQ, info and all (kmemleak on the debug kernel
    /// reports a leaked one); the request's peer gets no answer, its
    /// connection ends.
    #[test]
    fn closed_listener_leaves_no_requests() -> Result {
        let n = net(c"7536")?;
        let pep = listen(&n)?;
        let a = SockAddr::v4([127, 0, 0, 1], 7536);
        let raw = Socket::tcp(&a)?;
        frame::connect_start(&raw, &a, b"unread")?;
        event_queued(&n)?;
        drop(pep);
        let mut buf = [0u8; 512];
        let mut ev = 0u32;
        let r = n.eq.read_event(&mut ev, &mut buf, None);
        if r > 0 && ev == sys::KFI_CONNREQ {
            // Freed here, so that only the check fails.
            drop(take_req(&buf));
            pr_err!("kfi_sockets_cm: the closed listener's request stayed\n");
            return Err(EBADE);
        }
        ensure!(r == EAGAIN.to_errno() as isize, "read {} (event {})", r, ev);
        raw.set_rx_deadline(Some(Deadline::after_ms(5000)));
        let answered = match frame::connect_finish(&raw) {
            Ok(_) => true,
            Err(e) => e == ETIMEDOUT,
        };
        ensure!(!answered, "the peer was answered, or its connection stayed");
        Ok(())
    }

    /// `kfi_accept` on the connecting side, and a second one on the
    /// accepting side, are refused: `EINVAL`, no byte to the peer, the
    /// connection unharmed.
    #[test]
    fn accept_on_a_live_connection_is_refused() -> Result {
        let n = net(c"7527")?;
        let l = raw_listener(7527)?;
        let c = cq(&n)?;
        let (ep, raw) = kfi_client(&n, &c, &l)?;
        let outcome = (|| -> Result {
            ensure!(
                rc(ep.accept(&[])) == EINVAL.to_errno(),
                "client accept taken"
            );
            nothing_arrives(&raw)?;
            still_connected(&ep, &c, &raw)
        })();
        drop(ep);
        drop(raw);
        outcome?;
        let n = net(c"7528")?;
        let pep = listen(&n)?;
        let c = cq(&n)?;
        let (raw, sep) = raw_client(&n, 7528, &c)?;
        let outcome = (|| -> Result {
            ensure!(
                rc(sep.accept(&[])) == EINVAL.to_errno(),
                "second accept taken"
            );
            nothing_arrives(&raw)?;
            still_connected(&sep, &c, &raw)
        })();
        drop(sep);
        drop(raw);
        drop(pep);
        outcome
    }
}
