// SPDX-License-Identifier: GPL-2.0

//! Messages: every size into split receives, remote CQ data, delivery
//! completion, truncation, inject, and canceling posted receives.

use kernel::prelude::*;

use crate::{kfi::kfi_sys as sys, net::*, pattern::pattern, sides::*, tagged::tagged};

/// `kfi_cancel` takes back a posted receive and a posted tagged receive
/// (each completes once, with `ECANCELED`), refuses what is not posted,
/// and the next message goes to the next receive.
pub(crate) fn cancel_posted_receives() -> Result {
    let p = pair(12, 16, sys::KFI_CQ_FORMAT_DATA)?;
    // Without tagged messages, only the plain receive is canceled.
    let tagged_too = Offers::of(&p.s).has(sys::KFI_TAGGED);
    let (mut a, mut b, mut c) = ([0u8; 8], [0u8; 8], [0u8; 8]);
    let ra = kvec_mut(&mut a);
    // SAFETY: The buffers outlive the completions (the canceled ones
    // complete at their cancel) and are read only after them.
    unsafe {
        assert_eq!(rc(p.sep.recvmsg(&msg(&ra, 1, 0), 0)), 0);
        if tagged_too {
            assert_eq!(tagged(&p.sep, true, &mut b, 9, 0, 2), 0);
        }
    }
    let cancel = |ctx: usize| rc(p.sep.cancel(ctx));
    if tagged_too {
        assert_eq!(cancel(2), 0);
    }
    assert_eq!(cancel(1), 0);
    let mut seen = [false; 2];
    for _ in 0..1 + usize::from(tagged_too) {
        let e = wait_err(&p.scq)?;
        assert_eq!(e.err, -ECANCELED.to_errno());
        let i = (e.op_context as usize)
            .checked_sub(1)
            .filter(|&i| i < 2)
            .ok_or(EPROTO)?;
        assert!(!seen[i]);
        seen[i] = true;
    }
    assert_eq!(cancel(1), ENOENT.to_errno());
    assert_eq!(cancel(77), ENOENT.to_errno());
    let rv = kvec_mut(&mut c);
    // SAFETY: `c` outlives the receive's completion and is read only after
    // it; the literal lives forever.
    unsafe {
        assert_eq!(rc(p.sep.recvmsg(&msg(&rv, 3, 0), 0)), 0);
        assert_eq!(rc(p.cep.sendmsg(&msg(&kvec(b"canceled"), 4, 0), 0)), 0);
    }
    let mut e = sys::kfi_cq_data_entry::default();
    assert_eq!(sread(&p.scq, &mut e), 1);
    assert_eq!(e.op_context as usize, 3);
    assert_eq!((&c, a, b), (b"canceled", [0u8; 8], [0u8; 8]));
    Ok(())
}

/// Messages of 0 B, 1 B, odd sizes and 16 MiB, into two-buffer receives,
/// with remote CQ data and delivery completion; a message too long for
/// its receive; an inject.
pub(crate) fn messages_of_every_size() -> Result {
    const SIZES: [usize; 6] = [0, 1, 7, 4097, 65539, 16 << 20];
    let p = pair(0, 16, sys::KFI_CQ_FORMAT_DATA)?;
    let offers = Offers::of(&p.s);
    for (i, &size) in SIZES.iter().enumerate() {
        let src = pattern(size, i as u8)?;
        if size > offers.max_msg {
            // Above the advertised maximum: refused, nothing sent.
            // SAFETY: Refused at once (asserted): `src` is not used later.
            let r = rc(unsafe { p.cep.sendmsg(&msg(&kvec(&src), 1, 0), 0) });
            assert_eq!(r, EMSGSIZE.to_errno());
            continue;
        }
        let mut dst = zeroed(size + 8, 0xee)?;
        // Two receive buffers: the first ends in the middle.
        let (a, b) = dst.split_at_mut((size + 8) / 3);
        let r = [kvec_mut(a), kvec_mut(b)];
        let mut rm = msg(&r[0], 100 + i, 0);
        rm.iov_count = 2;
        let t = kvec(&src);
        let delivery = offers.op_flags & sys::KFI_DELIVERY_COMPLETE != 0;
        let flags = if i % 2 == 0 && delivery {
            sys::KFI_REMOTE_CQ_DATA | sys::KFI_DELIVERY_COMPLETE
        } else {
            sys::KFI_REMOTE_CQ_DATA
        };
        // SAFETY: `src` and `dst` outlive both completions, read below
        // before either buffer is.
        unsafe {
            assert_eq!(rc(p.sep.recvmsg(&rm, 0)), 0);
            assert_eq!(rc(p.cep.sendmsg(&msg(&t, 200 + i, 7 + i as u64), flags)), 0);
        }
        let mut e = sys::kfi_cq_data_entry::default();
        assert_eq!(sread(&p.ccq, &mut e), 1);
        assert_eq!(e.op_context as usize, 200 + i);
        if flags & sys::KFI_DELIVERY_COMPLETE != 0 {
            // Delivered means placed: the receive has completed.
            assert_eq!(p.scq.read_data(&mut e), 1);
        } else {
            assert_eq!(sread(&p.scq, &mut e), 1);
        }
        assert_eq!(
            (e.op_context as usize, e.len, e.data),
            (100 + i, size, 7 + i as u64)
        );
        assert_eq!(
            e.flags & (sys::KFI_RECV | sys::KFI_REMOTE_CQ_DATA),
            sys::KFI_RECV | sys::KFI_REMOTE_CQ_DATA
        );
        assert!(dst[..size] == src[..]);
        assert!(dst[size..].iter().all(|&x| x == 0xee));
    }
    // Too long: what fits arrives, the rest is reported as truncated.
    let mut small = [0u8; 3];
    let sr = kvec_mut(&mut small);
    // SAFETY: `small` outlives the receive's (error) completion and is read
    // only after it; the literal lives forever.
    unsafe {
        assert_eq!(rc(p.sep.recvmsg(&msg(&sr, 1, 0), 0)), 0);
        assert_eq!(rc(p.cep.sendmsg(&msg(&kvec(b"truncated"), 2, 0), 0)), 0);
    }
    let err = wait_err(&p.scq)?;
    assert_eq!((err.op_context as usize, err.len, err.olen), (1, 3, 6));
    assert_eq!(err.err, -EMSGSIZE.to_errno());
    assert_eq!(&small, b"tru");
    let mut e = sys::kfi_cq_data_entry::default();
    assert_eq!(sread(&p.ccq, &mut e), 1);
    // An inject: the buffer is reusable on return, no completion.
    let mut r = [0u8; 8];
    let rk = kvec_mut(&mut r);
    let mut inj = *b"inject!!";
    // SAFETY: `r` outlives the receive's completion and is read only after
    // it; the inject's buffer is only needed for the call.
    unsafe {
        assert_eq!(rc(p.sep.recvmsg(&msg(&rk, 3, 0), 0)), 0);
        let flags = sys::KFI_INJECT;
        assert_eq!(rc(p.cep.sendmsg(&msg(&kvec(&inj), 0, 0), flags)), 0);
    }
    inj.fill(0);
    assert_eq!(sread(&p.scq, &mut e), 1);
    assert_eq!(&r, b"inject!!");
    assert_eq!(p.ccq.read_data(&mut e), EAGAIN.to_errno() as isize);
    Ok(())
}
