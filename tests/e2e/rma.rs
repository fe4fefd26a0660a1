// SPDX-License-Identifier: GPL-2.0

//! RMA: writes and reads of several local and remote buffers, remote CQ
//! data, the longest transfer, the access errors, and delivery and commit
//! completion.

use kernel::{bindings, prelude::*};

use crate::{
    kfi::{kfabric::Owned, kfi_sys as sys},
    net::*,
    pattern::pattern,
    sides::*,
    skip,
};

/// Posts an RMA write (`read` false) or read of `local` at `remote`: the C
/// return value.
///
/// # Safety
///
/// The buffers `local` names stay valid, and are not touched, until the
/// operation's completion (or its error entry) is read, unless it is
/// refused at once.
pub(crate) unsafe fn rma(
    ep: &Owned<sys::kfid_ep>,
    read: bool,
    local: &[bindings::kvec],
    remote: &[sys::kfi_rma_iov],
    ctx: usize,
    flags: u64,
    data: u64,
) -> c_int {
    let mut m = sys::kfi_msg_rma {
        rma_iov: remote.as_ptr(),
        rma_iov_count: remote.len(),
        ..Default::default()
    };
    m.msg.iov_type = sys::KFI_KVEC;
    m.msg.__bindgen_anon_1.msg_iov = local.as_ptr();
    m.msg.iov_count = local.len();
    m.msg.context = ctx as *mut c_void;
    m.msg.data = data;
    // SAFETY: The descriptors live across the call; the buffers they name
    // as the caller guarantees.
    rc(unsafe {
        if read {
            ep.readmsg(&m, flags)
        } else {
            ep.writemsg(&m, flags)
        }
    })
}

pub(crate) fn riov(addr: u64, len: usize, key: u64) -> sys::kfi_rma_iov {
    sys::kfi_rma_iov { addr, len, key }
}

/// RMA write and read with several local and remote buffers, write with
/// remote CQ data, and the longest transfer (16 MiB at most) each way; the
/// read lands directly in the initiator's buffer.
pub(crate) fn rma_write_read() -> Result {
    const OFF: u64 = 0x4000_0000;
    let p = pair(2, 16, sys::KFI_CQ_FORMAT_DATA)?;
    let offers = Offers::of(&p.s);
    if !offers.has(sys::KFI_RMA) {
        return skip(c"the provider offers no RMA (KFI_RMA)");
    }
    let big_len = offers.max_msg.min(16 << 20);
    let mut target = zeroed(big_len, 0)?;
    let access = sys::KFI_REMOTE_READ | sys::KFI_REMOTE_WRITE;
    // SAFETY: `target` outlives the region, dropped first; it is read only
    // once each transfer has completed.
    let region = unsafe { mr(&p.s, &mut target, access, OFF, 0) }?;
    let k = region.key();
    let base = offers.base(&target, OFF);
    // Two local buffers into two remote pieces at odd places.
    let src = pattern(9000, 1)?;
    let (a, b) = src.split_at(1234);
    let local = [kvec(a), kvec(b)];
    let remote = [riov(base + 3, 5000, k), riov(base + 70001, 4000, k)];
    // SAFETY: Every buffer posted in this case outlives its completion,
    // read right after the post.
    assert_eq!(unsafe { rma(&p.cep, false, &local, &remote, 1, 0, 0) }, 0);
    let mut e = sys::kfi_cq_data_entry::default();
    assert_eq!(sread(&p.ccq, &mut e), 1);
    assert_eq!(
        (e.op_context as usize, e.flags),
        (1, sys::KFI_RMA | sys::KFI_WRITE)
    );
    assert!(target[3..5003] == src[..5000]);
    assert!(target[70001..74001] == src[5000..]);
    assert!(target[..3].iter().all(|&x| x == 0) && target[5003..70001].iter().all(|&x| x == 0));
    // Read both pieces back into one buffer.
    let mut back = zeroed(9000, 0)?;
    let lb = [kvec_mut(&mut back)];
    // SAFETY: `back` outlives the read's completion, read right after the
    // post; `target`'s region stays open.
    assert_eq!(unsafe { rma(&p.cep, true, &lb, &remote, 2, 0, 0) }, 0);
    assert_eq!(sread(&p.ccq, &mut e), 1);
    assert_eq!(
        (e.op_context as usize, e.flags),
        (2, sys::KFI_RMA | sys::KFI_READ)
    );
    assert!(back[..] == src[..]);
    // Write with remote CQ data: the target hears of it.
    let one = [kvec(b"Z")];
    let last = [riov(base + big_len as u64 - 1, 1, k)];
    // SAFETY: The literal lives forever; the completion is read right
    // after the post.
    let ret = unsafe {
        rma(
            &p.cep,
            false,
            &one,
            &last,
            3,
            sys::KFI_REMOTE_CQ_DATA,
            0xabc,
        )
    };
    assert_eq!(ret, 0);
    assert_eq!(sread(&p.ccq, &mut e), 1);
    assert_eq!(sread(&p.scq, &mut e), 1);
    assert_eq!(e.data, 0xabc);
    assert_eq!(e.flags & sys::KFI_REMOTE_WRITE, sys::KFI_REMOTE_WRITE);
    assert_eq!(target[big_len - 1], b'Z');
    // The longest transfer (16 MiB at most) each way.
    let big = pattern(big_len, 9)?;
    let lw = [kvec(&big)];
    let whole = [riov(base, big_len, k)];
    // SAFETY: `big` outlives the write's completion, read right after the
    // post.
    assert_eq!(unsafe { rma(&p.cep, false, &lw, &whole, 4, 0, 0) }, 0);
    assert_eq!(sread(&p.ccq, &mut e), 1);
    assert!(target[..] == big[..]);
    let mut got = zeroed(big_len, 0)?;
    let lr = [kvec_mut(&mut got)];
    // SAFETY: `got` outlives the read's completion, read right after the
    // post, before `got` is.
    assert_eq!(unsafe { rma(&p.cep, true, &lr, &whole, 5, 0, 0) }, 0);
    assert_eq!(sread(&p.ccq, &mut e), 1);
    assert!(got[..] == big[..]);
    drop(region);
    drop(p);
    Ok(())
}

/// Bad key, out of bounds, missing rights, a closed region: error
/// completions, nothing written, and the connection still works.
pub(crate) fn rma_errors() -> Result {
    let p = pair(3, 16, sys::KFI_CQ_FORMAT_DATA)?;
    let offers = Offers::of(&p.s);
    if !offers.has(sys::KFI_RMA) {
        return skip(c"the provider offers no RMA (KFI_RMA)");
    }
    if offers.rdma() {
        return skip(c"on RDMA a remote access error ends the connection (the provider's own suite covers it)");
    }
    // On the heap: a kernel stack has no room for them.
    let mut rw = zeroed(4096, 0xaa)?;
    let mut ro = zeroed(4096, 0xbb)?;
    let mut wo = zeroed(4096, 0xcc)?;
    // SAFETY: The buffers outlive their regions, dropped before the
    // buffers are read at the end.
    let (rw_mr, ro_mr, wo_mr) = unsafe {
        (
            mr(
                &p.s,
                &mut rw,
                sys::KFI_REMOTE_READ | sys::KFI_REMOTE_WRITE,
                0,
                0,
            )?,
            mr(&p.s, &mut ro, sys::KFI_REMOTE_READ, 0, 0)?,
            mr(&p.s, &mut wo, sys::KFI_REMOTE_WRITE, 0, 0)?,
        )
    };
    let (krw, kro, kwo) = (rw_mr.key(), ro_mr.key(), wo_mr.key());
    let data = [0x55u8; 64];
    let mut back = [0u8; 64];
    let cases: [(bool, sys::kfi_rma_iov, i32); 6] = [
        (false, riov(0, 64, krw ^ 0x5a5a_0000), ENOKEY.to_errno()),
        (false, riov(4096 - 63, 64, krw), ERANGE.to_errno()),
        (true, riov(u64::MAX - 10, 64, krw), ERANGE.to_errno()),
        (false, riov(0, 64, kro), EACCES.to_errno()),
        (true, riov(0, 64, kwo), EACCES.to_errno()),
        // The good one last but one: a bad descriptor after a good one
        // spoils the whole operation.
        (false, riov(100, 64, krw), 0),
    ];
    for (i, (read, d, err)) in cases.iter().enumerate() {
        let l = if *read {
            [kvec_mut(&mut back)]
        } else {
            [kvec(&data)]
        };
        let spoiled = [riov(0, 32, krw), riov(4090, 32, krw)];
        // SAFETY: `data` and `back` outlive every completion, each read
        // (as an error) right after its post.
        let ret = unsafe {
            if *err == 0 {
                rma(&p.cep, false, &l, &spoiled, i, 0, 0)
            } else {
                rma(&p.cep, *read, &l, &[*d], i, 0, 0)
            }
        };
        assert_eq!(ret, 0);
        let e = wait_err(&p.ccq)?;
        assert_eq!(e.op_context as usize, i);
        let want = if *err == 0 { -ERANGE.to_errno() } else { -err };
        assert_eq!(e.err, want);
    }
    assert!(back.iter().all(|&x| x == 0));
    drop(wo_mr);
    drop(ro_mr);
    // A closed region's key is gone.
    let l = [kvec(&data)];
    // SAFETY: `data` outlives the (error) completion, waited for right
    // after the post.
    let ret = unsafe { rma(&p.cep, false, &l, &[riov(0, 64, kwo)], 9, 0, 0) };
    assert_eq!(ret, 0);
    assert_eq!(wait_err(&p.ccq)?.err, -ENOKEY.to_errno());
    // The connection still works; nothing was written before.
    // SAFETY: `data` outlives the write's completion, read right after the
    // post.
    let ret = unsafe { rma(&p.cep, false, &l, &[riov(8, 64, krw)], 10, 0, 0) };
    assert_eq!(ret, 0);
    let mut e = sys::kfi_cq_data_entry::default();
    assert_eq!(sread(&p.ccq, &mut e), 1);
    drop(rw_mr);
    drop(p);
    assert!(rw[..8].iter().all(|&x| x == 0xaa));
    assert!(rw[8..72].iter().all(|&x| x == 0x55));
    assert!(rw[72..].iter().all(|&x| x == 0xaa));
    assert!(ro.iter().all(|&x| x == 0xbb) && wo.iter().all(|&x| x == 0xcc));
    Ok(())
}

/// Commit completion on a persistent-memory region and on plain RAM, and
/// delivery completion of a write: when the initiator's completion
/// arrives, the data is in place at the target.
pub(crate) fn delivery_and_commit_completion() -> Result {
    let p = pair(6, 16, sys::KFI_CQ_FORMAT_DATA)?;
    let offers = Offers::of(&p.s);
    if !offers.has(sys::KFI_RMA) {
        return skip(c"the provider offers no RMA (KFI_RMA)");
    }
    let wanted = sys::KFI_DELIVERY_COMPLETE | sys::KFI_COMMIT_COMPLETE;
    if offers.op_flags & wanted != wanted {
        return skip(c"the provider offers no delivery or commit completion");
    }
    let mut pmem = zeroed(8192, 0)?;
    let mut ram = zeroed(8192, 0)?;
    let all = sys::KFI_REMOTE_READ | sys::KFI_REMOTE_WRITE;
    // SAFETY: The buffers outlive their regions, dropped first; each is
    // read only once the write into it has completed.
    let (pmr, rmr) = unsafe {
        (
            mr(&p.s, &mut pmem, all, 0, sys::KFI_RMA_PMEM)?,
            mr(&p.s, &mut ram, all, 0, 0)?,
        )
    };
    let src = pattern(8192, 5)?;
    let mut e = sys::kfi_cq_data_entry::default();
    let levels = [
        sys::KFI_COMMIT_COMPLETE,
        sys::KFI_DELIVERY_COMPLETE,
        sys::KFI_COMMIT_COMPLETE,
    ];
    let bases = [
        offers.base(&pmem, 0),
        offers.base(&ram, 0),
        offers.base(&ram, 0),
    ];
    for (i, (&flags, m)) in levels.iter().zip([&pmr, &rmr, &rmr]).enumerate() {
        let len = 1000 * (i + 1) + 1;
        let local = [kvec(&src[..len])];
        let remote = [riov(bases[i] + 7, len, m.key())];
        // SAFETY: `src` outlives the completion, read right below.
        let ret = unsafe { rma(&p.cep, false, &local, &remote, i, flags, 0) };
        assert_eq!(ret, 0);
        assert_eq!(sread(&p.ccq, &mut e), 1);
        let t = if i == 0 { &pmem } else { &ram };
        assert!(t[7..7 + len] == src[..len]);
    }
    drop(pmr);
    drop(rmr);
    drop(p);
    Ok(())
}
