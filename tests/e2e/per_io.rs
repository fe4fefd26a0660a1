// SPDX-License-Identifier: GPL-2.0

//! Per-I/O registration: a region of `kfi_mr_alloc` mapped to a bio's
//! pages, reached by the peer's RMA across all of them, invalidated, and
//! mapped again with a fresh key.

use kernel::{bindings, page::Page, prelude::*};

use crate::{
    kfi::{kfabric::Owned, kfi_sys as sys},
    net::*,
    pattern::pattern,
    rma::riov,
    rma::rma,
    sides::*,
    skip,
};

const PAGES: usize = 16;
const OFF: u64 = 0x7000_0000;

/// The bio_vec list of `pages`, in reverse order: neighbours in the list
/// are not neighbours in memory.
fn bvecs(pages: &[Page]) -> KVec<bindings::bio_vec> {
    let mut v = KVec::new();
    for p in pages.iter().rev() {
        let seg = bindings::bio_vec {
            bv_page: p.as_ptr(),
            bv_len: bindings::PAGE_SIZE as u32,
            bv_offset: 0,
        };
        if v.push(seg, GFP_KERNEL).is_err() {
            break;
        }
    }
    v
}

/// The bytes of the mapping (`pages` in list order) into one buffer.
fn gather(pages: &[Page], out: &mut [u8]) -> Result {
    let ps = bindings::PAGE_SIZE;
    for (chunk, p) in out.chunks_mut(ps).zip(pages.iter().rev()) {
        // SAFETY: `chunk` is valid for writes of its length, at most a
        // page; the page is ours and no transfer runs on it now.
        unsafe { p.read_raw(chunk.as_mut_ptr(), 0, chunk.len()) }?;
    }
    Ok(())
}

/// Unmaps `region` once no peer access uses it: the target may let go of
/// the region a moment after its answer reached us (`EBUSY` meanwhile),
/// within a second at most.
fn unmap_when_idle(region: &Owned<sys::kfid_mr>) -> Result {
    for _ in 0..1000 {
        match region.unmap() {
            Err(e) if e == EBUSY => {
                kernel::time::delay::fsleep(kernel::time::Delta::from_millis(1))
            }
            r => return r,
        }
    }
    Err(ETIMEDOUT)
}

/// A 64 KiB write and read across 16 bio_vec pages of a mapping (one
/// access over 16 region buffers), the dead key refused after unmapping,
/// and a second mapping with a fresh key.
pub(crate) fn per_io_mapping() -> Result {
    let p = pair(45, 16, sys::KFI_CQ_FORMAT_DATA)?;
    if !Offers::of(&p.s).has(sys::KFI_RMA) {
        return skip(c"the provider offers no RMA (KFI_RMA)");
    }
    let access = sys::KFI_REMOTE_READ | sys::KFI_REMOTE_WRITE;
    let region = match p.s.domain.mr_alloc(PAGES, access) {
        Err(e) if e == ENOSYS => {
            return skip(c"the provider has no per-I/O mapping (kfi_mr_alloc)")
        }
        r => r?,
    };
    assert_eq!(region.key(), 0);
    let mut pages = KVec::new();
    for _ in 0..PAGES {
        pages.push(Page::alloc_page(GFP_KERNEL)?, GFP_KERNEL)?;
    }
    let segs = bvecs(&pages);
    assert_eq!(segs.len(), PAGES);
    let len = PAGES * bindings::PAGE_SIZE;
    // SAFETY: `pages` outlive the mapping: unmapped (or the region
    // closed) before they are dropped at the end.
    let k1 = unsafe { region.map_bvec(&segs, OFF) }?;
    assert_ne!(k1, 0);
    // One write over all 16 pieces, then a read back from an odd place.
    let src = pattern(len, 7)?;
    let l = [kvec(&src)];
    // SAFETY: Every buffer posted here outlives its completion, read right
    // after the post.
    let ret = unsafe { rma(&p.cep, false, &l, &[riov(OFF, len, k1)], 1, 0, 0) };
    assert_eq!(ret, 0);
    assert_eq!(wait_ok(&p.ccq)?.op_context as usize, 1);
    let mut got = zeroed(len, 0)?;
    gather(&pages, &mut got)?;
    assert!(got[..] == src[..]);
    let mut back = zeroed(len - 5000, 0)?;
    let lb = [kvec_mut(&mut back)];
    // SAFETY: `back` outlives the read's completion, waited for right after
    // the post; `pages` stay mapped until then.
    let ret = unsafe {
        rma(
            &p.cep,
            true,
            &lb,
            &[riov(OFF + 3000, len - 5000, k1)],
            2,
            0,
            0,
        )
    };
    assert_eq!(ret, 0);
    assert_eq!(wait_ok(&p.ccq)?.op_context as usize, 2);
    assert!(back[..] == src[3000..len - 2000]);
    // Unmapped: the key is dead, nothing more is written.
    unmap_when_idle(&region)?;
    assert_eq!(region.key(), 0);
    assert_eq!(region.unmap(), Err(EINVAL));
    let z = zeroed(64, 0x33)?;
    let lz = [kvec(&z)];
    // SAFETY: `z` outlives the (error) completion, waited for right after
    // the post.
    let ret = unsafe { rma(&p.cep, false, &lz, &[riov(OFF, 64, k1)], 3, 0, 0) };
    assert_eq!(ret, 0);
    assert_eq!(wait_err(&p.ccq)?.err, -ENOKEY.to_errno());
    gather(&pages, &mut got)?;
    assert!(got[..] == src[..]);
    // Mapped again, on half the pages: a new key, which works.
    // SAFETY: As for the first mapping.
    let k2 = unsafe { region.map_bvec(&segs[..PAGES / 2], OFF) }?;
    assert!(k2 != 0 && k2 != k1);
    // SAFETY: `z` outlives the write's completion, waited for right after
    // the post; `pages` stay mapped until then.
    let ret = unsafe { rma(&p.cep, false, &lz, &[riov(OFF + 10, 64, k2)], 4, 0, 0) };
    assert_eq!(ret, 0);
    assert_eq!(wait_ok(&p.ccq)?.op_context as usize, 4);
    // Beyond the shorter mapping is out of bounds.
    let far = riov(OFF + (len / 2) as u64, 64, k2);
    // SAFETY: `z` outlives the (error) completion, waited for right after
    // the post.
    let ret = unsafe { rma(&p.cep, false, &lz, &[far], 5, 0, 0) };
    assert_eq!(ret, 0);
    assert_eq!(wait_err(&p.ccq)?.err, -ERANGE.to_errno());
    unmap_when_idle(&region)?;
    gather(&pages, &mut got)?;
    assert!(got[..10] == src[..10] && got[10..74].iter().all(|&x| x == 0x33));
    assert!(got[74..] == src[74..]);
    drop(region);
    drop(p);
    Ok(())
}
