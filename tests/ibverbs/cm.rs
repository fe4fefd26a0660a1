// SPDX-License-Identifier: GPL-2.0

//! Connection management through rdma_cm: getinfo, connect and accept with
//! private data, reject, refused connects, closes in every state, explicit
//! addresses.

use crate::common::*;
use crate::device;
use crate::kfi::{kfi_sys as sys, ulp::CmEvent};
use core::ffi::CStr;
use kernel::prelude::*;

pub(crate) fn getinfo_names_the_device() -> Result {
    let s = side(c"7610")?;
    let e = s.src.entry();
    // SAFETY: An entry from getinfo has valid attributes and strings.
    let (fabric, domain, ep_type) = unsafe {
        (
            CStr::from_char_ptr((*e.fabric_attr).name),
            CStr::from_char_ptr((*e.domain_attr).name),
            (*e.ep_attr).type_,
        )
    };
    assert_eq!((domain, fabric), device());
    assert_eq!(ep_type, sys::KFI_EP_MSG);
    let d = s.fabric.domain(e)?;
    drop(d);
    Ok(())
}

/// Private data as long as the transport takes reaches the peer exactly:
/// on iWARP (siw: 251 bytes with the provider's length byte) 234 bytes
/// (room for the provider's flush-region trailer, see `flush.rs`), 235
/// (none: it is left out) and 250; on RoCE the 55 the IB CM's request
/// takes. One byte more than the provider's framing takes (251 on iWARP,
/// 255 on RoCE) is `EINVAL` at the connect itself, and at a reject, which
/// still refuses the request (without the data).
pub(crate) fn long_private_data_arrives_exactly() -> Result {
    let iwarp = device().1 == c"iWARP";
    let sizes: &[(usize, &CStr)] = if iwarp {
        &[(234, c"7640"), (235, c"7641"), (250, c"7642")]
    } else {
        &[(55, c"7640")]
    };
    {
        let s = step("side", side(c"7643"))?;
        let d = step("domain", s.fabric.domain(s.src.entry()))?;
        let eq = step("eq", s.fabric.eq(16))?;
        let pep = step("listen", s.fabric.listen(s.src.entry(), &eq))?;
        let cq = d.cq(16)?;
        let cep = step("endpoint", endpoint(&d, s.dst.entry(), &cq, &eq))?;
        let long = zeroed(if iwarp { 251 } else { 255 })?;
        assert_eq!(cep.connect(&long), Err(EINVAL));
        step("connect", cep.connect(b"short"))?;
        let req = match step("connreq", eq.sread(WAIT_MS))? {
            CmEvent::ConnReq { req, .. } => req,
            other => return Err(unexpected("connreq", &other)),
        };
        assert_eq!(pep.reject(&req, &long), Err(EINVAL));
        match step("refused", eq.sread(WAIT_MS))? {
            CmEvent::Failed { fid, err, data } => {
                assert!(cep.is(fid));
                assert_eq!(err, ECONNREFUSED);
                assert!(data.as_bytes().is_empty());
            }
            other => return Err(unexpected("refused", &other)),
        }
    }
    for &(n, port) in sizes {
        private_data_of(n, port).inspect_err(|e| {
            pr_err!("kfi_ibverbs test: {n} bytes of private data: {e:?}\n");
        })?;
    }
    Ok(())
}

/// Connects and accepts with `n` bytes of private data each way, on
/// `port`, and checks what each side got.
fn private_data_of(n: usize, port: &CStr) -> Result {
    let s = step("side", side(port))?;
    let d = step("domain", s.fabric.domain(s.src.entry()))?;
    let eq = step("eq", s.fabric.eq(16))?;
    let _pep = step("listen", s.fabric.listen(s.src.entry(), &eq))?;
    let (ccq, scq) = (d.cq(16)?, d.cq(16)?);
    let (ask, answer) = (pattern(n, 1)?, pattern(n, 2)?);
    let cep = step("client endpoint", endpoint(&d, s.dst.entry(), &ccq, &eq))?;
    step("connect", cep.connect(&ask))?;
    let (req, data) = match step("connreq", eq.sread(WAIT_MS))? {
        CmEvent::ConnReq { req, data } => (req, data),
        other => return Err(unexpected("connreq", &other)),
    };
    assert!(data.as_bytes() == &ask[..]);
    let sep = endpoint(&d, req.info(), &scq, &eq)?;
    drop(req);
    step("accept", sep.accept(&answer))?;
    let mut got = 0;
    for _ in 0..2 {
        let (fid, data) = match step("connected", eq.sread(WAIT_MS))? {
            CmEvent::Connected { fid, data } => (fid, data),
            other => return Err(unexpected("connected", &other)),
        };
        if cep.is(fid) {
            assert!(data.as_bytes() == &answer[..]);
        }
        got += 1;
    }
    assert_eq!(got, 2);
    Ok(())
}

/// Says what came instead of the event `want`: `EPROTO`.
fn unexpected(want: &str, got: &CmEvent) -> Error {
    match got {
        CmEvent::Failed { err, .. } => pr_err!("kfi_ibverbs test: {want}: failed: {err:?}\n"),
        CmEvent::Shutdown { .. } => pr_err!("kfi_ibverbs test: {want}: shutdown\n"),
        _ => pr_err!("kfi_ibverbs test: {want}: another event\n"),
    }
    EPROTO
}

pub(crate) fn connect_accept_with_private_data() -> Result {
    let s = step("side", side(c"7611"))?;
    let d = step("domain", s.fabric.domain(s.src.entry()))?;
    let eq = step("eq", s.fabric.eq(16))?;
    let _pep = step("listen", s.fabric.listen(s.src.entry(), &eq))?;
    let (ccq, scq) = (d.cq(16)?, d.cq(16)?);
    let cep = step("client endpoint", endpoint(&d, s.dst.entry(), &ccq, &eq))?;
    step("connect", cep.connect(b"hello from the client"))?;
    let CmEvent::ConnReq { req, data } = step("connreq", eq.sread(WAIT_MS))? else {
        return Err(EPROTO);
    };
    assert_eq!(data.as_bytes(), b"hello from the client");
    let sep = endpoint(&d, req.info(), &scq, &eq)?;
    drop(req);
    sep.accept(b"welcome")?;
    let (mut client_data, mut server_seen) = (false, false);
    for _ in 0..2 {
        let CmEvent::Connected { fid, data } = eq.sread(WAIT_MS)? else {
            return Err(EPROTO);
        };
        if cep.is(fid) {
            assert_eq!(data.as_bytes(), b"welcome");
            client_data = true;
        } else {
            assert!(sep.is(fid));
            server_seen = true;
        }
    }
    assert!(client_data && server_seen);
    // Both ends learn of the shutdown.
    cep.shutdown()?;
    let mut ends = 0;
    for _ in 0..2 {
        let CmEvent::Shutdown { fid } = eq.sread(WAIT_MS)? else {
            return Err(EPROTO);
        };
        assert!(cep.is(fid) || sep.is(fid));
        ends += 1;
    }
    assert_eq!(ends, 2);
    // A second shutdown has no connection left.
    assert_eq!(cep.shutdown(), Err(ENOTCONN));
    Ok(())
}

/// A reject's private data reaches the side that connected. Over iWARP,
/// siw may see the listener's close before it reads the MPA reply that
/// carries the data (its `SIW_CM_WORK_PEER_CLOSE` in `AWAIT_MPAREP`):
/// rdma_cm then reports a reject with no private data, seen once in about
/// forty CI runs. There a reject without data is tried again, on another
/// port, a few times; data that does arrive must be the ULP's, and at
/// least one try must bring it.
pub(crate) fn reject_carries_private_data() -> Result {
    let iwarp = device().1 == c"iWARP";
    let ports: &[&CStr] = if iwarp {
        &[c"7612", c"7647", c"7648", c"7649"]
    } else {
        &[c"7612"]
    };
    for port in ports {
        if reject_once(port)? {
            return Ok(());
        }
        pr_info!("kfi_ibverbs test: a reject came without its private data (siw)\n");
    }
    pr_err!("kfi_ibverbs test: no reject brought its private data\n");
    Err(ENODATA)
}

/// One connect that the listener on `port` rejects with private data:
/// true if the data arrived, false if none did (see above), an error for
/// anything else. Checks fail without a panic (this is not a case's own
/// body).
fn reject_once(port: &CStr) -> Result<bool> {
    let s = side(port)?;
    let d = step("domain", s.fabric.domain(s.src.entry()))?;
    let eq = step("eq", s.fabric.eq(16))?;
    let pep = step("listen", s.fabric.listen(s.src.entry(), &eq))?;
    let ccq = d.cq(16)?;
    let cep = step("client endpoint", endpoint(&d, s.dst.entry(), &ccq, &eq))?;
    cep.connect(b"may I")?;
    let CmEvent::ConnReq { req, .. } = eq.sread(WAIT_MS)? else {
        return Err(EPROTO);
    };
    pep.reject(&req, b"no room")?;
    // The handle is answered: a second answer is refused.
    let again = pep.reject(&req, b"again");
    if again != Err(EINVAL) {
        pr_err!("kfi_ibverbs test: a second reject gave {:?}\n", again);
        return Err(EBADE);
    }
    let CmEvent::Failed { fid, err, data } = eq.sread(WAIT_MS)? else {
        return Err(EPROTO);
    };
    if !cep.is(fid) || err != ECONNREFUSED {
        pr_err!("kfi_ibverbs test: the reject was reported as {:?}\n", err);
        return Err(EBADE);
    }
    match data.as_bytes() {
        b"no room" => Ok(true),
        [] if device().1 == c"iWARP" => Ok(false),
        other => {
            pr_err!("kfi_ibverbs test: the reject's data was {:?}\n", other);
            Err(EBADE)
        }
    }
}

pub(crate) fn connect_to_nobody_fails_in_time() -> Result {
    let s = side(c"7613")?;
    let d = step("domain", s.fabric.domain(s.src.entry()))?;
    let eq = step("eq", s.fabric.eq(16))?;
    let ccq = d.cq(16)?;
    let cep = step("client endpoint", endpoint(&d, s.dst.entry(), &ccq, &eq))?;
    cep.connect(&[])?;
    let CmEvent::Failed { fid, err, .. } = eq.sread(WAIT_MS)? else {
        return Err(EPROTO);
    };
    assert!(cep.is(fid));
    assert!(err == ECONNREFUSED || err == ECONNRESET || err == EHOSTUNREACH);
    // Connecting again on a failed endpoint is refused.
    assert_eq!(cep.connect(&[]), Err(EISCONN));
    Ok(())
}

pub(crate) fn closes_in_every_state() -> Result {
    let s = side(c"7614")?;
    let d = step("domain", s.fabric.domain(s.src.entry()))?;
    let eq = step("eq", s.fabric.eq(16))?;
    let ccq = d.cq(16)?;
    // Opened, never enabled; enabled, never connected.
    drop(d.endpoint(s.dst.entry())?);
    drop(endpoint(&d, s.dst.entry(), &ccq, &eq)?);
    // A request the ULP never answers: closed with its listener.
    let pep = step("listen", s.fabric.listen(s.src.entry(), &eq))?;
    let cep = step("client endpoint", endpoint(&d, s.dst.entry(), &ccq, &eq))?;
    cep.connect(&[])?;
    let CmEvent::ConnReq { req, .. } = eq.sread(WAIT_MS)? else {
        return Err(EPROTO);
    };
    drop(req);
    drop(pep);
    drop(cep);
    // A connecting endpoint closed before the answer.
    let pep = step("listen", s.fabric.listen(s.src.entry(), &eq))?;
    let cep = step("client endpoint", endpoint(&d, s.dst.entry(), &ccq, &eq))?;
    cep.connect(&[])?;
    drop(cep);
    drop(pep);
    // Enabling twice is refused.
    let ep = endpoint(&d, s.dst.entry(), &ccq, &eq)?;
    assert_eq!(ep.enable(), Err(EINVAL));
    Ok(())
}

pub(crate) fn connect_to_an_explicit_address() -> Result {
    let s = side(c"7622")?;
    let d = s.fabric.domain(s.src.entry())?;
    let eq = s.fabric.eq(16)?;
    let _pep = s.fabric.listen(s.src.entry(), &eq)?;
    let (ccq, scq) = (d.cq(16)?, d.cq(16)?);
    // An endpoint of the source entry has no destination of its own.
    let cep = endpoint(&d, s.src.entry(), &ccq, &eq)?;
    assert_eq!(cep.connect(&[]), Err(EINVAL));
    let e = s.dst.entry();
    // SAFETY: A destination entry holds `dest_addrlen` address bytes.
    let to = unsafe { core::slice::from_raw_parts(e.dest_addr.cast::<u8>(), e.dest_addrlen) };
    assert_eq!(cep.connect_to(&to[..4], &[]), Err(EINVAL));
    cep.connect_to(to, b"explicit")?;
    let _sep = serve(&d, &eq, &scq, b"explicit")?;
    Ok(())
}

/// `Err(EPROTO)`, logged, unless `ok`.
fn check(ok: bool, what: &str) -> Result {
    if ok {
        return Ok(());
    }
    pr_err!("kfi_ibverbs test: {what}\n");
    Err(EPROTO)
}

/// Waits for the refusal of the connect of `ep`: an `ECONNREFUSED` error
/// entry on `eq`. Other clients' connects may time out meanwhile (siw's
/// client waits 10 s for an answer): their `ETIMEDOUT` entries are passed
/// over.
fn refused(eq: &crate::kfi::ulp::Eq<'_>, ep: &crate::kfi::ulp::Endpoint<'_>) -> Result {
    loop {
        match step("refusal", eq.sread(WAIT_MS))? {
            CmEvent::Failed { fid, err, .. } if ep.is(fid) => {
                return check(err == ECONNREFUSED, "refusal: not ECONNREFUSED");
            }
            CmEvent::Failed { err, .. } if err == ETIMEDOUT => {}
            other => return Err(unexpected("refusal", &other)),
        }
    }
}

/// Whether `eq` stays empty for a while (no event, no overflow entry).
fn stays_empty(eq: &crate::kfi::ulp::Eq<'_>) -> bool {
    matches!(eq.sread(200), Err(e) if e == ETIMEDOUT || e == EAGAIN)
}

/// A connection the peer never lets be established ends in bounded time
/// (`connect_timeout_ms`; 2 s here): a listener that takes the request and
/// never answers it. Without the bound the client waits for rdma_cm's own
/// retries (minutes on the IB CM when the peer asks for long ones) and
/// its QP with it; the passive side, which the ULP accepted and whose peer
/// never sends the RTU or the first frame, is bounded by the same clock.
pub(crate) fn unanswered_connect_ends_in_time() -> Result {
    crate::set_connect_timeout(2000)?;
    let outcome = (|| -> Result {
        let s = step("side", side(c"7684"))?;
        let d = step("domain", s.fabric.domain(s.src.entry()))?;
        let ceq = step("eq", s.fabric.eq(16))?;
        let cq = d.cq(16)?;
        let leq = step("eq", s.fabric.eq(16))?;
        let _pep = step("listen", s.fabric.listen(s.src.entry(), &leq))?;
        let c = step("client", endpoint(&d, s.dst.entry(), &cq, &ceq))?;
        let t0 = kernel::time::Instant::<kernel::time::Monotonic>::now();
        step("connect", c.connect(&[]))?;
        // Taken, never answered (refused when it is dropped, at the end).
        let _req = match step("request", leq.sread(WAIT_MS))? {
            CmEvent::ConnReq { req, .. } => req,
            other => return Err(unexpected("request", &other)),
        };
        match step("end", ceq.sread(WAIT_MS))? {
            CmEvent::Failed { fid, err, .. } => {
                check(c.is(fid), "the end of another endpoint")?;
                if err != ETIMEDOUT {
                    pr_err!("kfi_ibverbs test: the unanswered connect ended with {err:?}\n");
                    return Err(EPROTO);
                }
            }
            other => return Err(unexpected("end", &other)),
        }
        let ms = t0.elapsed().as_millis();
        if !(1500..10_000).contains(&ms) {
            pr_err!("kfi_ibverbs test: the unanswered connect ended after {ms} ms\n");
            return Err(EPROTO);
        }
        Ok(())
    })();
    crate::set_connect_timeout(0)?;
    outcome
}

/// A peer's flood of connection requests is bounded: a listener's EQ takes
/// requests only while it is less than half full (kfabric.ko keeps the
/// rest for the events of connections already made), and a listener holds
/// at most 64 unanswered requests. More are refused at once; the ULP sees
/// no overflow.
pub(crate) fn connreqs_are_bounded() -> Result {
    let s = step("side", side(c"7656"))?;
    let d = step("domain", s.fabric.domain(s.src.entry()))?;
    let ceq = step("eq", s.fabric.eq(256))?;
    let cq = d.cq(16)?;
    // An EQ of 4: two requests wait in it, the third is refused.
    let leq = step("eq", s.fabric.eq(4))?;
    let pep = step("listen", s.fabric.listen(s.src.entry(), &leq))?;
    let mut clients = KVec::with_capacity(3, GFP_KERNEL)?;
    for _ in 0..3 {
        let c = step("client", endpoint(&d, s.dst.entry(), &cq, &ceq))?;
        step("connect", c.connect(&[]))?;
        clients.push(c, GFP_KERNEL)?;
    }
    // Which one is refused depends on the order rdma_cm hands them over
    // in; when it is, the other two wait in the EQ.
    let (fid, err) = match step("refusal", ceq.sread(WAIT_MS))? {
        CmEvent::Failed { fid, err, .. } => (fid, err),
        other => return Err(unexpected("refusal", &other)),
    };
    check(err == ECONNREFUSED, "half-full EQ: not ECONNREFUSED")?;
    check(
        clients.iter().any(|c| c.is(fid)),
        "half-full EQ: unknown fid",
    )?;
    for _ in 0..2 {
        match step("waiting request", leq.sread(WAIT_MS))? {
            CmEvent::ConnReq { .. } => {}
            other => return Err(unexpected("waiting request", &other)),
        }
    }
    check(
        stays_empty(&leq),
        "half-full EQ: an event after the two requests",
    )?;
    // Closing the listener refuses the two waiting requests.
    drop(pep);
    for _ in 0..2 {
        match step("closed listener", ceq.sread(WAIT_MS))? {
            CmEvent::Failed { .. } => {}
            other => return Err(unexpected("closed listener", &other)),
        }
    }
    drop(clients);
    drop(leq);
    // An EQ of 256 (room for 128 requests): the listener's own bound, 64,
    // holds.
    let leq = step("eq", s.fabric.eq(256))?;
    let pep = step("listen", s.fabric.listen(s.src.entry(), &leq))?;
    let mut clients = KVec::with_capacity(66, GFP_KERNEL)?;
    let mut reqs = KVec::with_capacity(65, GFP_KERNEL)?;
    let outcome = (|| -> Result {
        for i in 0..64 {
            let c = step("client", endpoint(&d, s.dst.entry(), &cq, &ceq))?;
            step("connect", c.connect(&[]))?;
            clients.push(c, GFP_KERNEL)?;
            match step("request", leq.sread(WAIT_MS))? {
                CmEvent::ConnReq { req, .. } => reqs.push(req, GFP_KERNEL)?,
                other => {
                    pr_err!("kfi_ibverbs test: request {i}\n");
                    return Err(unexpected("request", &other));
                }
            }
        }
        let extra = step("client", endpoint(&d, s.dst.entry(), &cq, &ceq))?;
        step("connect", extra.connect(&[]))?;
        refused(&ceq, &extra)?;
        clients.push(extra, GFP_KERNEL)?;
        check(stays_empty(&leq), "bounded listener: an event for the 65th")?;
        // Answering one makes room for the next. The newest: siw's
        // client gives up after 10 s, and siw refuses to reject a request
        // whose client has gone (-ECONNRESET).
        let last = reqs.pop().ok_or(EINVAL)?;
        step("reject", pep.reject(&last, &[]))?;
        drop(last);
        let next = step("client", endpoint(&d, s.dst.entry(), &cq, &ceq))?;
        step("connect", next.connect(&[]))?;
        clients.push(next, GFP_KERNEL)?;
        match step("request after a reject", leq.sread(WAIT_MS))? {
            CmEvent::ConnReq { req, .. } => reqs.push(req, GFP_KERNEL)?,
            other => return Err(unexpected("request after a reject", &other)),
        }
        check(
            stays_empty(&leq),
            "bounded listener: an event after the requests",
        )
    })();
    // The requests' infos, the clients, then the listener (which refuses
    // the requests never answered).
    drop(reqs);
    drop(clients);
    drop(pep);
    outcome
}
