// SPDX-License-Identifier: GPL-2.0

//! Tagged messages: matching by tag and ignore mask, oldest first, and
//! messages that arrive before their receive is posted.

use kernel::prelude::*;

use crate::{
    kfi::{kfabric::Owned, kfi_sys as sys},
    net::*,
    sides::*,
    skip,
};

/// Posts a tagged receive (`recv`) or send of `buf` with `tag` and
/// `ignore`: the C return value.
///
/// # Safety
///
/// `buf` stays valid, and is not touched, until the operation's
/// completion (or its error entry) is read.
pub(crate) unsafe fn tagged(
    ep: &Owned<sys::kfid_ep>,
    recv: bool,
    buf: &mut [u8],
    tag: u64,
    ignore: u64,
    ctx: usize,
) -> c_int {
    let iov = kvec_mut(buf);
    let t = sys::kfi_msg_tagged {
        msg: msg(&iov, ctx, 0),
        tag,
        ignore,
    };
    // SAFETY: The descriptor lives across the call; `buf` as the caller
    // guarantees.
    rc(unsafe {
        if recv {
            ep.trecvmsg(&t, 0)
        } else {
            ep.tsendmsg(&t, 0)
        }
    })
}

/// Waits for the next completion of `cq`, with its tag.
fn tagged_entry(cq: &Owned<sys::kfid_cq>) -> Result<sys::kfi_cq_tagged_entry> {
    let mut e = sys::kfi_cq_tagged_entry::default();
    if cq.sread_tagged(&mut e, WAIT_MS) != 1 {
        return Err(EPROTO);
    }
    Ok(e)
}

/// Tagged messages: matched by tag and ignore mask, oldest first,
/// including messages that arrive before their receive is posted.
pub(crate) fn tagged_matching_and_unexpected() -> Result {
    let p = pair(1, 16, sys::KFI_CQ_FORMAT_TAGGED)?;
    if !Offers::of(&p.s).has(sys::KFI_TAGGED) {
        return skip(c"the provider offers no tagged messages (KFI_TAGGED)");
    }
    let mut sends = [[0u8; 16]; 4];
    for (i, s) in sends.iter_mut().enumerate() {
        s.fill(0x10 + i as u8);
    }
    let mut r = [[0u8; 16]; 4];
    let mut last = [0u8; 16];
    // SAFETY: Every buffer posted here lives to the end of the case, and
    // each is read only once its completion is (the sends are never
    // written after their post).
    unsafe {
        // Three messages nobody waits for yet: tags 0x101, 0x102, 0x203.
        let tags = [0x101u64, 0x102, 0x203];
        for (i, &tag) in tags.iter().enumerate() {
            assert_eq!(tagged(&p.cep, false, &mut sends[i], tag, 0, i), 0);
        }
        for _ in 0..3 {
            tagged_entry(&p.ccq)?;
        }
        // Exact match takes 0x203, although older messages wait.
        assert_eq!(tagged(&p.sep, true, &mut r[0], 0x203, 0, 10), 0);
        let e = tagged_entry(&p.scq)?;
        assert_eq!((e.op_context as usize, e.tag, e.len), (10, 0x203, 16));
        assert_eq!(e.flags & sys::KFI_TAGGED, sys::KFI_TAGGED);
        assert_eq!(r[0], sends[2]);
        // Ignoring the low byte matches the oldest of the other two.
        assert_eq!(tagged(&p.sep, true, &mut r[1], 0x100, 0xff, 11), 0);
        let e = tagged_entry(&p.scq)?;
        assert_eq!((e.op_context as usize, e.tag), (11, 0x101));
        assert_eq!(r[1], sends[0]);
        // Posted first: a receive for 0x7 waits while 0x8 arrives (and is
        // held), then 0x7 lands in it.
        assert_eq!(tagged(&p.sep, true, &mut r[2], 0x7, 0, 12), 0);
        assert_eq!(tagged(&p.cep, false, &mut sends[3], 0x8, 0, 3), 0);
        assert_eq!(tagged(&p.cep, false, &mut sends[1], 0x7, 0, 4), 0);
        let e = tagged_entry(&p.scq)?;
        assert_eq!((e.op_context as usize, e.tag), (12, 0x7));
        assert_eq!(r[2], sends[1]);
        assert_eq!(tagged(&p.sep, true, &mut r[3], 0x8, 0, 13), 0);
        let e = tagged_entry(&p.scq)?;
        assert_eq!((e.op_context as usize, e.tag), (13, 0x8));
        assert_eq!(r[3], sends[3]);
        // 0x102 is still held: a wildcard receive gets it.
        assert_eq!(tagged(&p.sep, true, &mut last, 0, u64::MAX, 14), 0);
    }
    let e = tagged_entry(&p.scq)?;
    assert_eq!((e.op_context as usize, e.tag), (14, 0x102));
    assert_eq!(last, [0x11; 16]);
    Ok(())
}
