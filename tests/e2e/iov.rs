// SPDX-License-Identifier: GPL-2.0

//! Long buffer lists: a message, an RMA write and an RMA read, each naming
//! as many local buffers as the provider takes (its `iov_limit`s, at most
//! a bio's 256), of odd sizes, every byte checked; one buffer more than
//! the limit is refused.

use kernel::{bindings, prelude::*};

use crate::{
    kfi::kfi_sys as sys,
    net::*,
    pattern::pattern,
    provider,
    rma::{riov, rma},
    sides::*,
};

/// Most buffers tried: `BIO_MAX_VECS`.
const LIST_MAX: usize = 256;

/// `buf` cut into `n` pieces of uneven sizes (`seed` picks them; the last
/// piece takes the rest): the kvecs of a list.
fn pieces(buf: &mut [u8], n: usize, seed: usize) -> Result<KVec<bindings::kvec>> {
    let mut v = KVec::with_capacity(n, GFP_KERNEL)?;
    let mut at = 0;
    for i in 0..n {
        let left = buf.len() - at;
        let len = if i + 1 == n {
            left
        } else {
            (1 + (i * seed) % 23).min(left)
        };
        v.push(kvec_mut(&mut buf[at..at + len]), GFP_KERNEL)?;
        at += len;
    }
    Ok(v)
}

/// A kvec message of the list `iov` with context `ctx`.
fn msg_of(iov: &[bindings::kvec], ctx: usize) -> sys::kfi_msg {
    let mut m = sys::kfi_msg {
        iov_type: sys::KFI_KVEC,
        iov_count: iov.len(),
        context: ctx as *mut c_void,
        ..Default::default()
    };
    m.__bindgen_anon_1.msg_iov = iov.as_ptr();
    m
}

pub(crate) fn long_buffer_lists() -> Result {
    const OFF: u64 = 0x2000_0000;
    let p = pair(46, 16, sys::KFI_CQ_FORMAT_DATA)?;
    let offers = Offers::of(&p.s);
    let (ntx, nrx) = (offers.tx_iov.min(LIST_MAX), offers.rx_iov.min(LIST_MAX));
    assert!(ntx >= 1 && nrx >= 1);
    if provider() == c"sockets" {
        // kfi_sockets takes a whole bio in one operation.
        assert_eq!((offers.tx_iov, offers.rx_iov), (LIST_MAX, LIST_MAX));
    }
    // About 16 bytes a buffer on average, so every buffer gets some.
    let len = 16 * ntx.max(nrx) + 5;
    let mut src = pattern(len, 46)?;
    let mut dst = zeroed(len, 0)?;
    let send = pieces(&mut src, ntx, 7)?;
    let recv = pieces(&mut dst, nrx, 11)?;
    let mut e = sys::kfi_cq_data_entry::default();
    // SAFETY: Both lists' buffers outlive the completions, read right
    // after the posts; `dst` is read only after its receive completed.
    unsafe {
        assert_eq!(rc(p.sep.recvmsg(&msg_of(&recv, 1), 0)), 0);
        assert_eq!(rc(p.cep.sendmsg(&msg_of(&send, 2), 0)), 0);
    }
    assert_eq!(sread(&p.scq, &mut e), 1);
    assert_eq!((e.op_context as usize, e.len), (1, len));
    assert_eq!(sread(&p.ccq, &mut e), 1);
    assert_eq!(e.op_context as usize, 2);
    assert!(dst[..] == src[..]);
    // One buffer more than the limit.
    if offers.tx_iov <= LIST_MAX {
        let over = pieces(&mut src, ntx + 1, 5)?;
        // SAFETY: Refused at once, so nothing is read after the call.
        let r = unsafe { rc(p.cep.sendmsg(&msg_of(&over, 3), 0)) };
        assert_eq!(r, EINVAL.to_errno());
    }
    if !offers.has(sys::KFI_RMA) {
        return Ok(());
    }
    let mut target = zeroed(len, 0)?;
    let access = sys::KFI_REMOTE_READ | sys::KFI_REMOTE_WRITE;
    // SAFETY: `target` outlives the region, dropped first; it is read only
    // once each transfer has completed.
    let region = unsafe { mr(&p.s, &mut target, access, OFF, 0) }?;
    let whole = [riov(offers.base(&target, OFF), len, region.key())];
    // SAFETY: `send`'s buffers outlive the write's completion.
    assert_eq!(unsafe { rma(&p.cep, false, &send, &whole, 4, 0, 0) }, 0);
    assert_eq!(sread(&p.ccq, &mut e), 1);
    assert_eq!(e.op_context as usize, 4);
    assert!(target[..] == src[..]);
    let mut back = zeroed(len, 0)?;
    let into = pieces(&mut back, ntx, 3)?;
    // SAFETY: `back` is read only after the read completed.
    assert_eq!(unsafe { rma(&p.cep, true, &into, &whole, 5, 0, 0) }, 0);
    assert_eq!(sread(&p.ccq, &mut e), 1);
    assert_eq!(e.op_context as usize, 5);
    assert!(back[..] == src[..]);
    drop(region);
    Ok(())
}
