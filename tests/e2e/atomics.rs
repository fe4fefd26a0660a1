// SPDX-License-Identifier: GPL-2.0

//! Atomics: every operation on every integer type, with and without
//! fetching, compare-and-swap, and many endpoints adding to one counter.

use kernel::prelude::*;

use crate::{
    kfi::{kfabric::Owned, kfi_sys as sys},
    net::*,
    pattern::pattern,
    rma::{riov, rma},
    sides::*,
    skip,
};

/// The expected new value of an atomic, computed independently.
fn expect(op: u32, signed: bool, wide: bool, t: u64, s: u64, c: u64) -> u64 {
    let (ts, ss) = if wide {
        (t as i64, s as i64)
    } else {
        (i64::from(t as u32 as i32), i64::from(s as u32 as i32))
    };
    let less = if signed { ss < ts } else { s < t };
    let more = if signed { ss > ts } else { s > t };
    let mask = if wide { u64::MAX } else { u64::from(u32::MAX) };
    let v = match op {
        sys::KFI_SUM => t.wrapping_add(s),
        sys::KFI_MIN => {
            if less {
                s
            } else {
                t
            }
        }
        sys::KFI_MAX => {
            if more {
                s
            } else {
                t
            }
        }
        sys::KFI_BOR => t | s,
        sys::KFI_BAND => t & s,
        sys::KFI_BXOR => t ^ s,
        sys::KFI_ATOMIC_WRITE => s,
        sys::KFI_ATOMIC_READ => t,
        sys::KFI_CSWAP => {
            if c == t {
                s
            } else {
                t
            }
        }
        _ => t,
    };
    v & mask
}

/// One atomic: operands, target and what to do.
struct Atom {
    src: *const c_void,
    /// Compare operands (compare-and-swap), or NULL.
    cmp: *const c_void,
    /// Where the old values go (fetch and compare forms), or NULL.
    res: *mut c_void,
    count: usize,
    addr: u64,
    key: u64,
    datatype: u32,
    op: u32,
}

/// Posts the atomic `a`, in the form its operands call for: the C return
/// value.
///
/// # Safety
///
/// The operands `a` points to (`count` elements each) stay valid, and are
/// not touched, until the operation's completion is read.
unsafe fn atomic(ep: &Owned<sys::kfid_ep>, a: &Atom, ctx: usize) -> c_int {
    let ioc = sys::kfi_ioc {
        addr: a.src.cast_mut(),
        count: a.count,
    };
    let rioc = sys::kfi_rma_ioc {
        addr: a.addr,
        count: a.count,
        key: a.key,
    };
    let m = sys::kfi_msg_atomic {
        msg_iov: &ioc,
        iov_count: 1,
        rma_iov: &rioc,
        rma_iov_count: 1,
        datatype: a.datatype,
        op: a.op,
        context: ctx as *mut c_void,
        ..Default::default()
    };
    let c = sys::kfi_ioc {
        addr: a.cmp.cast_mut(),
        count: a.count,
    };
    let mut r = sys::kfi_ioc {
        addr: a.res,
        count: a.count,
    };
    // SAFETY: The descriptors live across the call; the operands as the
    // caller guarantees.
    rc(unsafe {
        if !a.cmp.is_null() {
            ep.compare_atomicmsg(&m, &c, &mut r, 0)
        } else if !a.res.is_null() {
            ep.fetch_atomicmsg(&m, &mut r, 0)
        } else {
            ep.atomicmsg(&m, 0)
        }
    })
}

/// Whether the provider says it does `op` on `dt` in the form of
/// `kfi_atomic` (neither `fetch` nor `compare`), `kfi_fetch_atomic` or
/// `kfi_compare_atomic`: the most elements of one, or the error.
fn valid(ep: &Owned<sys::kfid_ep>, dt: u32, op: u32, fetch: bool, compare: bool) -> Result<usize> {
    if compare {
        ep.compare_atomicvalid(dt, op)
    } else if fetch {
        ep.fetch_atomicvalid(dt, op)
    } else {
        ep.atomicvalid(dt, op)
    }
}

/// Every op on u32, i32, u64 and i64 targets, with and without fetching,
/// two elements at a time; compare-and-swap that hits and misses. What the
/// provider says it does (`kfi_*atomicvalid`) must work and be right; what
/// it says it does not must be refused with `EOPNOTSUPP` by the call as
/// well, leaving the target alone. The 64-bit sum and compare-and-swap
/// (what RDMA devices do) must be among what it does.
pub(crate) fn atomics_on_every_type() -> Result {
    let p = pair(4, 16, sys::KFI_CQ_FORMAT_DATA)?;
    if !Offers::of(&p.s).has(sys::KFI_ATOMIC) {
        return skip(c"the provider offers no atomics (KFI_ATOMIC)");
    }
    let mut target = [0u64; 2];
    // SAFETY: `target` is plain memory of 16 bytes.
    let bytes = unsafe { core::slice::from_raw_parts_mut(target.as_mut_ptr().cast::<u8>(), 16) };
    let base = Offers::of(&p.s).base(bytes, 0);
    let access = sys::KFI_REMOTE_READ | sys::KFI_REMOTE_WRITE;
    // SAFETY: `target` outlives the region, dropped first; it is written
    // and read below only between atomics, none in flight.
    let region = unsafe { mr(&p.s, bytes, access, 0, 0) }?;
    let k = region.key();
    let tp = target.as_mut_ptr();
    let types = [
        (sys::KFI_UINT32, false, false),
        (sys::KFI_INT32, true, false),
        (sys::KFI_UINT64, false, true),
        (sys::KFI_INT64, true, true),
    ];
    let ops = [
        sys::KFI_SUM,
        sys::KFI_MIN,
        sys::KFI_MAX,
        sys::KFI_BOR,
        sys::KFI_BAND,
        sys::KFI_BXOR,
        sys::KFI_ATOMIC_WRITE,
        sys::KFI_ATOMIC_READ,
        sys::KFI_CSWAP,
    ];
    let starts: [u64; 2] = [0xffff_fff0_8000_0005, 0x0000_0007_0000_0009];
    let srcs: [u64; 2] = [0x0000_0003_ffff_fff0, 0x8000_0000_0000_0002];
    let mut ctx = 0;
    let (mut done, mut refused) = (0, 0);
    let mut e = sys::kfi_cq_data_entry::default();
    // RDMA devices' atomics: 64-bit fetch-add and compare-and-swap.
    for (op, fetch, compare) in [
        (sys::KFI_SUM, false, false),
        (sys::KFI_SUM, true, false),
        (sys::KFI_CSWAP, true, true),
    ] {
        for dt in [sys::KFI_UINT64, sys::KFI_INT64] {
            assert!(matches!(valid(&p.cep, dt, op, fetch, compare), Ok(n) if n >= 2));
        }
    }
    for &(dt, signed, wide) in &types {
        let size = if wide { 8 } else { 4 };
        let mask = if wide { u64::MAX } else { u64::from(u32::MAX) };
        for &op in &ops {
            for fetch in [false, true] {
                for hit in [false, true] {
                    if op != sys::KFI_CSWAP && hit {
                        continue;
                    }
                    ctx += 1;
                    // Element values of this type, two of them.
                    let t0 = [starts[0] & mask, starts[1] & mask];
                    let s0 = [srcs[0] & mask, srcs[1] & mask];
                    let c0 = if hit { t0 } else { [t0[0] ^ 1, t0[1]] };
                    let mut src = [0u8; 16];
                    let mut cmp = [0u8; 16];
                    let mut old = [0u8; 16];
                    for i in 0..2 {
                        let at = i * size;
                        // SAFETY: `tp` is the registered target, of 16
                        // bytes; no transfer is in flight.
                        let tb = unsafe { core::slice::from_raw_parts_mut(tp.cast::<u8>(), 16) };
                        tb[at..at + size].copy_from_slice(&t0[i].to_ne_bytes()[..size]);
                        src[at..at + size].copy_from_slice(&s0[i].to_ne_bytes()[..size]);
                        cmp[at..at + size].copy_from_slice(&c0[i].to_ne_bytes()[..size]);
                    }
                    let cmp_p = if op == sys::KFI_CSWAP {
                        cmp.as_ptr().cast()
                    } else {
                        core::ptr::null()
                    };
                    let res_p = if fetch || op == sys::KFI_CSWAP {
                        old.as_mut_ptr().cast()
                    } else {
                        core::ptr::null_mut()
                    };
                    let a = Atom {
                        src: src.as_ptr().cast(),
                        cmp: cmp_p,
                        res: res_p,
                        count: 2,
                        addr: base,
                        key: k,
                        datatype: dt,
                        op,
                    };
                    let v = valid(&p.cep, dt, op, !res_p.is_null(), !cmp_p.is_null());
                    // SAFETY: The operands live until the completion,
                    // read right below (a refused call has none).
                    let ret = unsafe { atomic(&p.cep, &a, ctx) };
                    let supported = match v {
                        Err(e) => {
                            assert_eq!((ctx, e), (ctx, EOPNOTSUPP));
                            assert_eq!((ctx, ret), (ctx, EOPNOTSUPP.to_errno()));
                            refused += 1;
                            false
                        }
                        Ok(n) => {
                            assert!(n >= 2);
                            assert_eq!((ctx, ret), (ctx, 0));
                            assert_eq!(sread(&p.ccq, &mut e), 1);
                            assert_eq!(e.op_context as usize, ctx);
                            done += 1;
                            true
                        }
                    };
                    // SAFETY: `tp` is the registered target, of 16 bytes; the atomic
                    // completed (or was refused), so no transfer is in flight.
                    let tb = unsafe { core::slice::from_raw_parts(tp.cast::<u8>(), 16) };
                    for i in 0..2 {
                        let at = i * size;
                        let mut v8 = [0u8; 8];
                        v8[..size].copy_from_slice(&tb[at..at + size]);
                        let got = u64::from_ne_bytes(v8) & mask;
                        let want = if supported {
                            expect(op, signed, wide, t0[i], s0[i], c0[i])
                        } else {
                            t0[i]
                        };
                        assert_eq!((ctx, got), (ctx, want));
                        if !res_p.is_null() && supported {
                            let mut o = [0u8; 8];
                            o[..size].copy_from_slice(&old[at..at + size]);
                            assert_eq!(u64::from_ne_bytes(o) & mask, t0[i]);
                        }
                    }
                }
            }
        }
    }
    // 4 types x (8 ops x 2 + compare-and-swap x 2 x 2).
    assert_eq!(done + refused, 4 * (8 * 2 + 4));
    assert!(done >= 12);
    // Unsupported types say so.
    let unsupported = p.cep.atomicvalid(sys::KFI_UINT8, sys::KFI_SUM);
    assert_eq!(rc(unsupported.map(|_| ())), EOPNOTSUPP.to_errno());
    drop(region);
    drop(p);
    Ok(())
}

/// Several connections to one target, each with many fetch-adds in flight
/// on the same counter, plus RMA writes to their own slots: every old
/// value is seen exactly once and every slot is right.
pub(crate) fn many_endpoints_many_operations() -> Result {
    const CONNS: usize = 3;
    const ADDS: usize = 24;
    const SLOT: usize = 1024;
    let (s, c) = sides(5)?;
    if !Offers::of(&s).has(sys::KFI_ATOMIC | sys::KFI_RMA) {
        return skip(c"the provider offers no RMA and atomics (KFI_RMA, KFI_ATOMIC)");
    }
    let pep = listen(&s)?;
    let ccq = cq_sized(&c, 256)?;
    let scq = cq_sized(&s, 16)?;
    // Connected first: an RDMA provider registers regions with a work
    // request on a connection of the domain.
    let mut eps = KVec::new();
    for _ in 0..CONNS {
        eps.push(connect_to(&c, &s, &ccq, &scq)?, GFP_KERNEL)?;
    }
    let mut counter = [0u64; 1];
    // SAFETY: Plain memory of 8 bytes.
    let cbytes = unsafe { core::slice::from_raw_parts_mut(counter.as_mut_ptr().cast::<u8>(), 8) };
    let mut slots = zeroed(CONNS * ADDS * SLOT, 0)?;
    let offers = Offers::of(&s);
    let (cbase, sbase) = (offers.base(cbytes, 0), offers.base(&slots, 0x10_0000));
    let all = sys::KFI_REMOTE_READ | sys::KFI_REMOTE_WRITE;
    // SAFETY: `counter` and `slots` outlive their regions, dropped before
    // `slots` is read; `counter` is read once every operation completed.
    let (cmr, smr) = unsafe {
        (
            mr(&s, cbytes, all, 0, 0)?,
            mr(&s, &mut slots, sys::KFI_REMOTE_WRITE, 0x10_0000, 0)?,
        )
    };
    let (ck, sk) = (cmr.key(), smr.key());
    let one = 1u64;
    let mut olds = KVec::new();
    olds.resize(CONNS * ADDS, u64::MAX, GFP_KERNEL)?;
    let src = pattern(CONNS * ADDS * SLOT, 3)?;
    let mut e = sys::kfi_cq_data_entry::default();
    // Completions read while posting: a provider that holds fewer
    // operations than are posted says EAGAIN (within its tx size).
    let mut reaped = 0;
    let mut post = |f: &mut dyn FnMut() -> c_int| loop {
        let ret = f();
        if ret != EAGAIN.to_errno() {
            assert_eq!(ret, 0);
            return;
        }
        assert_eq!(sread(&ccq, &mut e), 1);
        reaped += 1;
    };
    for j in 0..ADDS {
        for (i, (cep, _)) in eps.iter().enumerate() {
            let n = i * ADDS + j;
            let res: *mut u64 = &mut olds[n];
            let a = Atom {
                src: (&raw const one).cast(),
                cmp: core::ptr::null(),
                res: res.cast(),
                count: 1,
                addr: cbase,
                key: ck,
                datatype: sys::KFI_UINT64,
                op: sys::KFI_SUM,
            };
            // SAFETY: `one` and `olds` (never resized) outlive every
            // completion, all read below before `olds` is.
            post(&mut || unsafe { atomic(cep, &a, n) });
            let piece = &src[n * SLOT..(n + 1) * SLOT];
            let local = [kvec(piece)];
            let remote = [riov(sbase + (n * SLOT) as u64, SLOT, sk)];
            // SAFETY: `src` outlives every completion, all read below.
            post(&mut || unsafe { rma(cep, false, &local, &remote, 10_000 + n, 0, 0) });
        }
    }
    for _ in reaped..2 * CONNS * ADDS {
        assert_eq!(sread(&ccq, &mut e), 1);
    }
    // Not all of them came back while posting.
    assert!(reaped < 2 * CONNS * ADDS);
    assert_eq!(counter[0], (CONNS * ADDS) as u64);
    let mut seen = KVec::new();
    seen.resize(CONNS * ADDS, false, GFP_KERNEL)?;
    for &o in olds.iter() {
        let o = o as usize;
        assert!(o < CONNS * ADDS && !seen[o]);
        seen[o] = true;
    }
    drop(eps);
    drop(pep);
    drop(cmr);
    drop(smr);
    assert!(slots[..] == src[..]);
    Ok(())
}
