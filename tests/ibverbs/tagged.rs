// SPDX-License-Identifier: GPL-2.0

//! Tagged messages: every size, expected and unexpected, the unexpected
//! bound, bad lengths.

use crate::common::*;
use crate::kfi::{
    kfi_sys as sys,
    ulp::{Cq, CqError, Endpoint},
};
use crate::tamper;
use kernel::prelude::*;

/// The first frame of a tagged message (prov/ibverbs/frame.rs).
pub(crate) const F_TAGGED: u32 = 64;
/// Unexpected tagged messages a connection holds
/// (prov/ibverbs/tagged.rs).
pub(crate) const UNEXP_MAX: u64 = 64;

/// Tagged messages of every size around the frames' boundaries (the
/// first frame also carries the 16-byte tag extension), each sent
/// once after and once before its receive is posted, with remote CQ
/// data: every byte, the tag, the length and the flags arrive.
pub(crate) fn tagged_messages_of_every_size() -> Result {
    with_pair(c"7633", |cep, sep, ccq, scq| {
        let sizes = [0, 1, 4063, 4064, 4065, 4080, 8144, 8145, 12245, 70000];
        for (i, &len) in sizes.iter().enumerate() {
            for early in [false, true] {
                let src = pattern(len, i as u32)?;
                let mut dst = zeroed(len + 8)?;
                let tag = 0x5000 + i as u64;
                let ctx = 100 + 2 * i + usize::from(early);
                if !early {
                    // SAFETY: `dst` outlives the completion read below.
                    unsafe { sep.trecv(&mut dst, tag, 0, ctx)? };
                }
                // SAFETY: `src` outlives the completion read below.
                unsafe { cep.tsend(&src, tag, ctx, tag + 1, sys::KFI_REMOTE_CQ_DATA)? };
                let c = ccq.sread(WAIT_MS).map_err(|e| e.errno())?;
                assert_eq!(c.context, ctx);
                assert_eq!(
                    c.flags & (sys::KFI_SEND | sys::KFI_TAGGED),
                    sys::KFI_SEND | sys::KFI_TAGGED
                );
                if early {
                    // Held by now (it is copied as it arrives).
                    kernel::time::delay::fsleep(kernel::time::Delta::from_millis(20));
                    // SAFETY: `dst` outlives the completion read below.
                    unsafe { sep.trecv(&mut dst, tag, 0, ctx)? };
                }
                let r = step("tagged receive", scq.sread(WAIT_MS).map_err(|e| e.errno()))?;
                assert_eq!((r.context, r.len, r.tag, r.data), (ctx, len, tag, tag + 1));
                let want = sys::KFI_RECV | sys::KFI_TAGGED | sys::KFI_REMOTE_CQ_DATA;
                assert_eq!(r.flags & want, want);
                assert!(dst[..len] == src[..]);
                assert!(dst[len..].iter().all(|&b| b == 0xee));
            }
        }
        Ok(())
    })
}

/// An untagged message for delivery that waits for its receive, then a
/// tagged one for delivery that is placed at once: the tagged message's
/// acknowledgement does not complete the untagged send (each kind is
/// acknowledged in its own count), and both complete once the untagged
/// message has its receive.
pub(crate) fn tagged_and_untagged_acknowledgements_are_counted_apart() -> Result {
    with_pair(c"7682", |cep, sep, ccq, scq| {
        let done = |cq: &Cq<'_>, what: &str| {
            cq.sread(WAIT_MS).map(|c| c.context).map_err(|e| {
                pr_err!("kfi_ibverbs test: {what}: {e:?}\n");
                e.errno()
            })
        };
        // SAFETY: The buffer is static.
        step("untagged send", unsafe {
            cep.send(b"untagged", 1, sys::KFI_DELIVERY_COMPLETE)
        })?;
        let (mut t, mut u) = ([0u8; 8], [0u8; 8]);
        // SAFETY: `t` outlives the completion read below.
        step("tagged receive", unsafe { sep.trecv(&mut t, 7, 0, 3) })?;
        // SAFETY: The buffer is static.
        step("tagged send", unsafe {
            cep.tsend(b"tagged!!", 7, 2, 0, sys::KFI_DELIVERY_COMPLETE)
        })?;
        assert_eq!(done(scq, "tagged receive")?, 3);
        // The tagged message is placed and acknowledged; the untagged
        // one still waits for a receive: no send may complete yet (they
        // complete in order), certainly not the untagged one.
        let early = ccq.sread(500);
        if !matches!(early, Err(CqError::Queue(e)) if e == ETIMEDOUT) {
            pr_err!("kfi_ibverbs test: before the untagged receive: {early:?}\n");
        }
        assert!(matches!(early, Err(CqError::Queue(e)) if e == ETIMEDOUT));
        // SAFETY: `u` outlives the completion read below.
        step("untagged receive", unsafe { sep.recv(&mut u, 4) })?;
        assert_eq!(done(scq, "untagged receive")?, 4);
        assert_eq!(done(ccq, "untagged delivered")?, 1);
        assert_eq!(done(ccq, "tagged delivered")?, 2);
        assert_eq!((&t, &u), (b"tagged!!", b"untagged"));
        Ok(())
    })
}

/// Sends `msg` tagged with each of `tags` (context: the tag), waiting
/// for send completions while the sends queue is full.
pub(crate) fn tsend_many(
    cep: &Endpoint<'_>,
    ccq: &Cq<'_>,
    msg: &[u8],
    tags: core::ops::Range<u64>,
) -> Result {
    for tag in tags {
        loop {
            // SAFETY: `msg` outlives the test case, so every
            // completion.
            match unsafe { cep.tsend(msg, tag, tag as usize, 0, 0) } {
                Ok(()) => break,
                Err(e) if e == EAGAIN => {
                    ccq.sread(WAIT_MS).map_err(|e| e.errno())?;
                }
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

/// Tagged messages nobody receives are held up to the bound (64
/// messages) while the connection goes on; the one beyond it ends that
/// connection with `ENOSPC` on the EQ, and another connection of the
/// same domain is not hurt.
pub(crate) fn tagged_unexpected_flood_ends_the_connection() -> Result {
    let s = step("side", side(c"7634"))?;
    let d = s.fabric.domain(s.src.entry())?;
    let eq = s.fabric.eq(16)?;
    let _pep = s.fabric.listen(s.src.entry(), &eq)?;
    let (ccq, scq) = (d.cq(256)?, d.cq(16)?);
    let (ccq2, scq2) = (d.cq(16)?, d.cq(16)?);
    let cep = endpoint(&d, s.dst.entry(), &ccq, &eq)?;
    cep.connect(&[])?;
    let sep = serve(&d, &eq, &scq, &[])?;
    let cep2 = endpoint(&d, s.dst.entry(), &ccq2, &eq)?;
    cep2.connect(&[])?;
    let sep2 = serve(&d, &eq, &scq2, &[])?;
    let msg = pattern(100, 3)?;
    step(
        "the bound's messages",
        tsend_many(&cep, &ccq, &msg, 0..UNEXP_MAX),
    )?;
    // All held, nothing ended.
    assert!(eq.sread(1000).is_err());
    let mut got = [0u8; 100];
    // SAFETY: `got` outlives the completion read below.
    unsafe { sep.trecv(&mut got, 3, 0, 900)? };
    let r = step("a held message", scq.sread(WAIT_MS).map_err(|e| e.errno()))?;
    assert_eq!((r.context, r.tag, r.len), (900, 3, 100));
    assert!(got[..] == msg[..]);
    // Room for one more; the next is beyond the bound.
    let _ = tsend_many(&cep, &ccq, &msg, UNEXP_MAX..UNEXP_MAX + 2);
    step("ENOSPC", expect_end(&eq, &sep, ENOSPC))?;
    // SAFETY: Refused, so the buffer is not used after the call.
    assert_eq!(unsafe { sep.trecv(&mut got, 5, 0, 901) }, Err(ENOTCONN));
    // The other connection goes on.
    let mut other = [0u8; 8];
    // SAFETY: The buffers outlive the completions read below.
    unsafe {
        sep2.trecv(&mut other, 7, 0, 1)?;
        cep2.tsend(b"unharmed", 7, 2, 0, 0)?;
    }
    let r = step(
        "the other connection",
        scq2.sread(WAIT_MS).map_err(|e| e.errno()),
    )?;
    assert_eq!((r.context, r.tag), (1, 7));
    assert_eq!(&other, b"unharmed");
    Ok(())
}

/// A tagged first frame too short for its tag extension, and one whose
/// declared length its frames do not have: protocol errors (EPROTO on
/// the EQ); the tagged receive the second was arriving into is
/// canceled.
pub(crate) fn tagged_frame_with_a_bad_length_ends_the_connection() -> Result {
    hostile_pair(c"7635", 16, |cep, sep, _ccq, _scq, eq| {
        tamper(F_TAGGED, 0, 1)?;
        // SAFETY: The buffer is static.
        unsafe { cep.send(b"short!!!", 2, 0)? };
        expect_eproto(eq, sep)
    })?;
    hostile_pair(c"7636", 16, |cep, sep, _ccq, scq, eq| {
        // Tag 0x77, a declared length of 100 bytes; 8 bytes follow.
        static M: [u8; 24] = [
            0x77, 0, 0, 0, 0, 0, 0, 0, 100, 0, 0, 0, 0, 0, 0, 0, b'e', b'i', b'g', b'h', b't',
            b'!', b'!', b'!',
        ];
        let mut buf = [0u8; 128];
        // SAFETY: `buf` outlives the completion read below.
        unsafe { sep.trecv(&mut buf, 0x77, 0, 1)? };
        tamper(F_TAGGED, 0, 1)?;
        // SAFETY: The buffer is static.
        unsafe { cep.send(&M, 2, 0)? };
        expect_eproto(eq, sep)?;
        match scq.sread(WAIT_MS) {
            Err(CqError::Failed {
                context: 1, err, ..
            }) => assert_eq!(err, ECANCELED),
            _ => return Err(EPROTO),
        }
        Ok(())
    })
}
