// SPDX-License-Identifier: GPL-2.0

//! What kfi_ibverbs' safety parameters refuse by default. The guest loads
//! the provider with `test_hooks=1 global_key_devices=1
//! global_key_reads=1` for the suite, and once with its defaults but
//! `global_key_devices=1` (siw is not offered without it: the kselftest
//! kfabric_ibverbs.sh checks that), for the `params_*` cases alone with
//! `defaults=1` (tests/guest/run-suites.sh, on siw).

use crate::common::*;
use crate::kfi::{kfi_sys as sys, ulp::CqError};
use crate::{send_invalidate, skip_reposts, tamper, tamper_flush_key};
use kernel::prelude::*;

/// Each test-only export refuses with `EPERM` without `test_hooks`, and
/// changes nothing: a message sent after the refused calls (one would
/// have given its frame a bad magic) arrives whole, and the connection
/// stays up for a second one. With `test_hooks`, each takes its values
/// (returns 0), and all are stopped again before anything is checked, so
/// that a failure leaves none armed for the next case.
pub(crate) fn params_test_hooks_gate_the_test_exports() -> Result {
    let off = crate::defaults();
    let got = [
        tamper(0, 0x55, 1),
        skip_reposts(1),
        tamper_flush_key(0xff),
        send_invalidate(0x1234, true),
    ];
    let stopped = [
        tamper(0, 0, 0),
        skip_reposts(0),
        tamper_flush_key(0),
        send_invalidate(0, false),
    ];
    let want = if off { Err(EPERM) } else { Ok(()) };
    assert_eq!(got, [want; 4]);
    assert_eq!(stopped, [want; 4]);
    if !off {
        return Ok(());
    }
    with_pair(c"7653", |cep, sep, ccq, scq| {
        for i in 0..2 {
            let src = pattern(100, i)?;
            let mut dst = zeroed(100)?;
            // SAFETY: The buffers outlive the completions read below.
            unsafe {
                sep.recv(&mut dst, 10 + i as usize)?;
                cep.send(&src, 20 + i as usize, 0)?;
            }
            let c = ccq.sread(WAIT_MS).map_err(|e| e.errno())?;
            assert_eq!(c.context, 20 + i as usize);
            let r = scq.sread(WAIT_MS).map_err(|e| e.errno())?;
            assert_eq!((r.context, r.len), (10 + i as usize, 100));
            assert!(dst == src);
        }
        Ok(())
    })
}

/// The completion of operation `ctx`, which must fail with `want`.
fn failed(cq: &crate::kfi::ulp::Cq<'_>, ctx: usize, want: Error) -> Result {
    match cq.sread(WAIT_MS) {
        Err(CqError::Failed { context, err, .. }) if context == ctx && err == want => Ok(()),
        Err(CqError::Failed { context, err, .. }) => {
            pr_err!("kfi_ibverbs test: operation {context} failed with {err:?}\n");
            Err(EBADE)
        }
        Ok(c) => {
            pr_err!("kfi_ibverbs test: operation {} completed\n", c.context);
            Err(EBADE)
        }
        Err(e) => Err(e.errno()),
    }
}

/// An iWARP read names its sink's key on the wire, and on siw that key
/// (the PD's local key) opens all memory, which siw lets a peer read.
/// Without `global_key_reads`, siw's entries offer no reads and a
/// connection issues none: a read and a write for delivery completion
/// (whose flushing read is one) fail with `EOPNOTSUPP`, the sink
/// untouched, while a plain write still lands. RoCE reads show no key:
/// offered whatever the parameter.
pub(crate) fn params_global_key_reads_gate_reads_on_iwarp() -> Result {
    let iwarp = crate::device().1 == c"iWARP";
    let reads = !(iwarp && crate::defaults());
    let s = side(c"7654")?;
    assert_eq!(s.src.entry().caps & sys::KFI_READ != 0, reads);
    drop(s);
    if reads {
        return Ok(());
    }
    with_pair_domain(c"7655", |d, cep, _sep, ccq, _scq| {
        let mut target = pattern(4096, 3)?;
        let at = addr_of(&target, 0);
        // SAFETY: The region is dropped by the end of the case, not leaked.
        let mr =
            unsafe { d.register(&mut target, sys::KFI_REMOTE_READ | sys::KFI_REMOTE_WRITE, 0) }?;
        let mut sink = zeroed(100)?;
        // SAFETY: `sink` outlives the completion read below.
        unsafe { cep.read(&mut sink, at, mr.key(), 1)? };
        failed(ccq, 1, EOPNOTSUPP)?;
        assert!(sink.iter().all(|&b| b == 0xee));
        let src = pattern(100, 9)?;
        // SAFETY: `src` outlives the completions read below.
        unsafe { cep.write(&src, at, mr.key(), 2, sys::KFI_DELIVERY_COMPLETE)? };
        failed(ccq, 2, EOPNOTSUPP)?;
        // SAFETY: As above.
        unsafe { cep.write(&src, at + 200, mr.key(), 3, 0)? };
        assert_eq!(ccq.sread(WAIT_MS).map_err(|e| e.errno())?.context, 3);
        drop(mr);
        assert!(target[200..300] == src[..]);
        Ok(())
    })
}
