// SPDX-License-Identifier: GPL-2.0

//! `kfi_sockets_answers`: the answers to our own RMA reads, from a raw
//! kernel-socket target. An answer that is all in the socket when it
//! arrives is handled in the socket's data callback, one that comes in
//! pieces by the receive work: both must place the same bytes, complete
//! the read once, and end the connection on an answer of the wrong
//! length or for nothing asked, failing the read with `EPROTO`.

use kernel::{
    prelude::*,
    time::{delay::fsleep, Delta},
};

use super::{
    frame,
    kfi::{kfabric::Owned, kfi_sys as sys},
    ksock::Socket,
    net::*,
    wire::{Hdr, Op},
};

use super::hostile_peers::*;

/// Bytes of each read.
const LEN: usize = 3000;

/// Byte `i` of answer `round`.
fn pattern(round: usize, i: usize) -> u8 {
    (i.wrapping_mul(7) ^ round.wrapping_mul(31)) as u8
}

/// Reads the request of our read from `raw`: its id.
fn read_request(raw: &Socket) -> Result<u64> {
    let h = frame::recv_hdr(raw)?;
    ensure!(h.op == Op::ReadReq, "not a read request: {:?}", h.op);
    let d = frame::recv_rma(raw, &h)?;
    let d = d.as_slice();
    ensure!(
        d.len() == 1 && d.first().map(|d| d.len) == Some(LEN as u64),
        "descriptors {:?}",
        d
    );
    Ok(h.id)
}

/// Sends `frame` to `raw` whole (`pieces` 1), or in `pieces` pieces some
/// milliseconds apart, so that the provider sees it begin before the
/// rest has come.
fn send_in(raw: &Socket, frame: &[u8], pieces: usize) -> Result {
    let step = frame.len().div_ceil(pieces.max(1));
    for (k, p) in frame.chunks(step.max(1)).enumerate() {
        if k > 0 {
            fsleep(Delta::from_millis(30));
        }
        let sent = raw.send(&[p])?;
        ensure!(sent == p.len(), "sent {} of {}", sent, p.len());
    }
    Ok(())
}

/// Answer `id` of `len` payload bytes (`pattern(round, _)`) with status 0,
/// as one byte string.
fn answer(id: u64, len: usize, round: usize) -> Result<KVec<u8>> {
    let h = Hdr::new(Op::ReadResp, id, len as u64);
    let mut f = KVec::new();
    f.extend_from_slice(&h.encode(), GFP_KERNEL)?;
    for i in 0..len {
        f.push(pattern(round, i), GFP_KERNEL)?;
    }
    Ok(f)
}

/// Waits for the completion of read `ctx`: it must be the only one.
fn read_done(c: &Owned<sys::kfid_cq>, ctx: usize) -> Result {
    let mut e = sys::kfi_cq_data_entry::default();
    let r = sread_ms(c, &mut e, WAIT_MS);
    ensure!(r == 1, "no read completion: {}", r);
    ensure!(
        e.op_context as usize == ctx && e.flags & sys::KFI_READ != 0,
        "completion of {} flags {:#x}",
        e.op_context as usize,
        e.flags
    );
    let r = sread_ms(c, &mut e, 100);
    ensure!(r != 1, "a second completion, of {}", e.op_context as usize);
    Ok(())
}

/// The reaction to a broken answer to read `ctx`: the read fails with
/// `read_err`, the connection ends with an `EPROTO` EQ error and the raw
/// target's socket is closed.
fn expect_broken(
    n: &Net,
    c: &Owned<sys::kfid_cq>,
    ep: &Owned<sys::kfid_ep>,
    raw: &Socket,
    (ctx, read_err): (usize, Error),
) -> Result {
    let err = cq_error(c, WAIT_MS)?;
    ensure!(
        (err.op_context as usize, err.err) == (ctx, -read_err.to_errno()),
        "read {} failed with {}",
        err.op_context as usize,
        err.err
    );
    eq_eproto(n, ep)?;
    let (ev, _, _) = event(n)?;
    ensure!(ev == sys::KFI_SHUTDOWN, "event {} after the error", ev);
    ensure!(wait_readable(raw, 5000), "the connection stayed up");
    let mut b = [0u8; 1];
    ensure!(
        frame::recv_exact(raw, &mut b).is_err(),
        "the connection stayed up"
    );
    Ok(())
}

#[kunit_tests(kfi_sockets_answers)]
mod cases {
    use super::*;

    /// Answers that arrive whole (the data callback places them) and in
    /// three pieces (the receive work does) land the same: every byte in
    /// the read's buffer, one completion each.
    #[test]
    fn read_answers_land_whole_or_in_pieces() -> Result {
        let n = net(c"7540")?;
        let l = raw_listener(7540)?;
        let c = cq(&n)?;
        let (ep, raw) = kfi_client(&n, &c, &l)?;
        let mut buf = KVec::new();
        buf.resize(LEN, 0u8, GFP_KERNEL)?;
        let outcome = (|| -> Result {
            for (round, pieces) in [1, 3, 1, 3].into_iter().enumerate() {
                buf.fill(0);
                let ctx = 10 + round;
                ensure!(post_read(&ep, &mut buf, 0x77, ctx) == 0, "read not posted");
                let id = read_request(&raw)?;
                send_in(&raw, &answer(id, LEN, round)?, pieces)?;
                read_done(&c, ctx)?;
                let bad = (0..LEN).find(|&i| buf.get(i) != Some(&pattern(round, i)));
                ensure!(
                    bad.is_none(),
                    "round {} ({} pieces): byte {:?} differs",
                    round,
                    pieces,
                    bad
                );
            }
            Ok(())
        })();
        drop(ep);
        drop(raw);
        outcome
    }

    /// An answer with fewer bytes than the read asked for, and an answer to
    /// a read never asked for, whole or in pieces: the connection ends with
    /// `EPROTO`; the read fails with `EPROTO` (its answer was broken) or
    /// `ECANCELED` (it never got one).
    #[test]
    fn broken_read_answers_end_the_connection() -> Result {
        let cases = [
            (c"7541", 7541, true, 1),
            (c"7542", 7542, true, 3),
            (c"7543", 7543, false, 1),
            (c"7544", 7544, false, 3),
        ];
        for (cport, port, short, pieces) in cases {
            let n = net(cport)?;
            let l = raw_listener(port)?;
            let c = cq(&n)?;
            let (ep, raw) = kfi_client(&n, &c, &l)?;
            let mut buf = KVec::new();
            buf.resize(LEN, 0u8, GFP_KERNEL)?;
            let outcome = (|| -> Result {
                ensure!(post_read(&ep, &mut buf, 0x77, 5) == 0, "read not posted");
                let id = read_request(&raw)?;
                let (f, read_err) = if short {
                    (answer(id, LEN / 2, 0)?, EPROTO)
                } else {
                    (answer(id + 1000, LEN, 0)?, ECANCELED)
                };
                // The provider may hang up on the header alone: the later
                // pieces then fail to go, which is fine.
                let _ = send_in(&raw, &f, pieces);
                expect_broken(&n, &c, &ep, &raw, (5, read_err))
            })()
            .inspect_err(|e| pr_err!("answers: short={} pieces={}: {:?}\n", short, pieces, e));
            drop(ep);
            drop(raw);
            outcome?;
        }
        Ok(())
    }

    /// The status word of an answer is the peer's to pick, not the code
    /// our read completes with in every case (review of session 32): the
    /// kernel's internal codes (`ERESTARTSYS`, 512) and those that ask to
    /// retry (`EAGAIN`, `EINTR`) come out as `EREMOTEIO`; a plain error
    /// (`EACCES`) stays as it is. The connection stays up.
    #[test]
    fn an_answer_cannot_pick_an_internal_errno() -> Result {
        let n = net(c"7672")?;
        let l = raw_listener(7672)?;
        let c = cq(&n)?;
        let (ep, raw) = kfi_client(&n, &c, &l)?;
        let mut buf = KVec::new();
        buf.resize(LEN, 0u8, GFP_KERNEL)?;
        let outcome = (|| -> Result {
            let cases = [
                (512u64, EREMOTEIO),
                (u64::from(EAGAIN.to_errno().unsigned_abs()), EREMOTEIO),
                (u64::from(EINTR.to_errno().unsigned_abs()), EREMOTEIO),
                (u64::from(EACCES.to_errno().unsigned_abs()), EACCES),
            ];
            for (ctx, (status, want)) in cases.into_iter().enumerate() {
                ensure!(post_read(&ep, &mut buf, 0x77, ctx) == 0, "read not posted");
                let id = read_request(&raw)?;
                let mut h = Hdr::new(Op::ReadResp, id, 0);
                h.data = status;
                send_in(&raw, &h.encode(), 1)?;
                let err = cq_error(&c, WAIT_MS)?;
                ensure!(
                    (err.op_context as usize, err.err) == (ctx, -want.to_errno()),
                    "status {}: read {} failed with {}",
                    status,
                    err.op_context as usize,
                    err.err
                );
            }
            Ok(())
        })();
        drop(ep);
        drop(raw);
        outcome
    }
}
