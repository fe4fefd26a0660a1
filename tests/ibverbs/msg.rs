// SPDX-License-Identifier: GPL-2.0

//! Messages: every size up to the limit with remote CQ data, truncation,
//! inject, credit flow control, receives canceled at shutdown and close.

use crate::common::*;
use crate::kfi::{kfi_sys as sys, ulp::CqError};
use kernel::prelude::*;

pub(crate) fn messages_of_every_size_with_cq_data() -> Result {
    let max = max_msg()?;
    assert!(max >= 1024);
    with_pair(c"7615", |cep, sep, ccq, scq| {
        // Around one frame's payload (4080 B), several frames, the
        // longest.
        let sizes = [0, 1, 7, 100, 4079, 4080, 4081, 12245, max];
        for (i, &len) in sizes.iter().enumerate() {
            let src = pattern(len, i as u32)?;
            let mut dst = zeroed(len + 8)?;
            // SAFETY: The buffers outlive the completions read below.
            unsafe {
                sep.recv(&mut dst, 100 + i)?;
                cep.send_data(&src, 200 + i, 0x1000 + i as u64, 0)?;
            }
            let c = ccq.sread(WAIT_MS).map_err(|e| e.errno())?;
            assert_eq!(c.context, 200 + i);
            assert!(c.flags & sys::KFI_SEND != 0);
            let r = scq.sread(WAIT_MS).map_err(|e| e.errno())?;
            assert_eq!(
                (r.context, r.len, r.data),
                (100 + i, len, 0x1000 + i as u64)
            );
            assert!(r.flags & sys::KFI_RECV != 0 && r.flags & sys::KFI_REMOTE_CQ_DATA != 0);
            assert!(dst[..len] == src[..]);
            assert!(dst[len..].iter().all(|&b| b == 0xee));
        }
        // Above the limit: refused at the call, nothing posted.
        let big = zeroed(max + 1)?;
        // SAFETY: Refused, so the buffer is not used after the call.
        assert_eq!(unsafe { cep.send(&big, 1, 0) }, Err(EMSGSIZE));
        Ok(())
    })
}

pub(crate) fn truncation_and_inject() -> Result {
    with_pair(c"7616", |cep, sep, ccq, scq| {
        let mut small = [0u8; 3];
        let mut r = [0u8; 8];
        let mut inj = *b"inject!!";
        // SAFETY: The buffers outlive the completions read below; an
        // inject's buffer is only needed for the call.
        unsafe {
            sep.recv(&mut small, 1)?;
            cep.send(b"truncated", 2, 0)?;
        }
        match scq.sread(WAIT_MS) {
            Err(CqError::Failed {
                context, err, olen, ..
            }) => {
                assert_eq!((context, olen), (1, 6));
                assert_eq!(err, EMSGSIZE);
            }
            _ => return Err(EPROTO),
        }
        assert_eq!(&small, b"tru");
        assert_eq!(ccq.sread(WAIT_MS).map_err(|e| e.errno())?.context, 2);
        // SAFETY: `r` outlives the receive read below; an inject is copied
        // at the call.
        unsafe {
            sep.recv(&mut r, 3)?;
            cep.send(&inj, 0, sys::KFI_INJECT)?;
        }
        inj.fill(0);
        assert_eq!(scq.sread(WAIT_MS).map_err(|e| e.errno())?.context, 3);
        assert_eq!(&r, b"inject!!");
        // An inject completes nothing.
        assert!(matches!(ccq.read(), Err(CqError::Queue(e)) if e == EAGAIN));
        Ok(())
    })
}

pub(crate) fn flow_control_holds_messages_until_received() -> Result {
    with_pair(c"7617", |cep, sep, ccq, scq| {
        // Nothing posted on the server: the client may send until the
        // server's slots are all used, then waits for credits.
        let msgs = pattern(64 * 200, 7)?;
        let mut sent = 0usize;
        let mut refused = false;
        while sent < 200 {
            let m = &msgs[sent * 64..(sent + 1) * 64];
            // SAFETY: `msgs` outlives every completion read below.
            match unsafe { cep.send(m, sent, 0) } {
                Ok(()) => sent += 1,
                Err(e) if e == EAGAIN => {
                    refused = true;
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        assert!(refused && sent > 0 && sent < 200);
        let mut got = KVec::with_capacity(200, GFP_KERNEL)?;
        got.resize(200, [0u8; 64], GFP_KERNEL)?;
        let mut received = 0usize;
        let mut next_send = sent;
        let mut send_done = 0usize;
        // Posting receives delivers the held messages in order and
        // returns credits, so the rest can go.
        while received < 200 {
            if received < next_send {
                // SAFETY: `got` outlives the completions read below.
                unsafe { sep.recv(&mut got[received], received)? };
                let c = scq.sread(WAIT_MS).map_err(|e| e.errno())?;
                assert_eq!((c.context, c.len), (received, 64));
                received += 1;
            }
            while ccq.read().is_ok() {
                send_done += 1;
            }
            while next_send < 200 {
                let m = &msgs[next_send * 64..(next_send + 1) * 64];
                // SAFETY: `msgs` outlives the test case, so every send's completion.
                match unsafe { cep.send(m, next_send, 0) } {
                    Ok(()) => next_send += 1,
                    Err(e) if e == EAGAIN => break,
                    Err(e) => return Err(e),
                }
            }
        }
        while send_done < 200 {
            ccq.sread(WAIT_MS).map_err(|e| e.errno())?;
            send_done += 1;
        }
        for (i, g) in got.iter().enumerate() {
            assert!(g[..] == msgs[i * 64..(i + 1) * 64]);
        }
        Ok(())
    })
}

pub(crate) fn receives_canceled_at_close_and_shutdown() -> Result {
    let s = side(c"7618")?;
    let d = s.fabric.domain(s.src.entry())?;
    let eq = s.fabric.eq(16)?;
    let _pep = s.fabric.listen(s.src.entry(), &eq)?;
    let (ccq, scq) = (d.cq(16)?, d.cq(16)?);
    let mut buf = [0u8; 16];
    let mut buf2 = [0u8; 16];
    {
        let cep = endpoint(&d, s.dst.entry(), &ccq, &eq)?;
        // A receive posted before the connection exists is kept.
        // SAFETY: `buf` outlives the completion read below.
        unsafe { cep.recv(&mut buf, 7)? };
        step("connect", cep.connect(&[]))?;
        let sep = step("serve", serve(&d, &eq, &scq, &[]))?;
        // The early receive takes the first message.
        // SAFETY: The static message and `buf` outlive the completions read below.
        unsafe {
            sep.send(b"early receive ok", 8, 0)?;
            sep.recv(&mut buf2, 9)?;
        }
        let c = step("early receive", ccq.sread(WAIT_MS).map_err(|e| e.errno()))?;
        assert_eq!((c.context, c.len), (7, 16));
        assert_eq!(&buf, b"early receive ok");
        // The peer shuts down: the server's posted receive is canceled.
        // The send may complete or be flushed: its ack can lose the race
        // with the peer's disconnect (seen on rxe under the debug kernel).
        step("shutdown", cep.shutdown())?;
        let mut canceled = false;
        for _ in 0..3 {
            match scq.sread(WAIT_MS) {
                Err(CqError::Failed {
                    context: 9, err, ..
                }) => {
                    assert_eq!(err, ECANCELED);
                    canceled = true;
                    break;
                }
                Ok(c) if c.context == 8 => {}
                Err(CqError::Failed {
                    context: 8, err, ..
                }) if err == ECANCELED => {}
                other => {
                    pr_err!("kfi_ibverbs test: after shutdown: {other:?}\n");
                    return Err(EPROTO);
                }
            }
        }
        assert!(canceled);
        // A receive on the closing endpoint is canceled at its close.
        // SAFETY: `buf` outlives the endpoint, whose close completes the receive.
        unsafe { cep.recv(&mut buf, 10)? };
    }
    match ccq.sread(WAIT_MS) {
        Err(CqError::Failed {
            context: 10, err, ..
        }) => assert_eq!(err, ECANCELED),
        other => {
            pr_err!("kfi_ibverbs test: at close: {other:?}\n");
            return Err(EPROTO);
        }
    }
    Ok(())
}

pub(crate) fn cancel_takes_back_a_receive() -> Result {
    with_pair(c"7621", |cep, sep, _ccq, scq| {
        let (mut a, mut b) = ([0u8; 8], [0u8; 8]);
        // SAFETY: The buffers outlive the completions read below (the
        // canceled one completes at the cancel).
        unsafe { sep.recv(&mut a, 5)? };
        sep.cancel(5)?;
        match scq.sread(WAIT_MS) {
            Err(CqError::Failed {
                context: 5, err, ..
            }) => assert_eq!(err, ECANCELED),
            _ => return Err(EPROTO),
        }
        assert_eq!(sep.cancel(5), Err(ENOENT));
        // The next message goes to the next receive, not the canceled.
        // SAFETY: `b` and the static message outlive the completions read below.
        unsafe {
            sep.recv(&mut b, 6)?;
            cep.send(b"after!!!", 7, 0)?;
        }
        assert_eq!(scq.sread(WAIT_MS).map_err(|e| e.errno())?.context, 6);
        assert_eq!((&b, a), (b"after!!!", [0u8; 8]));
        Ok(())
    })
}
