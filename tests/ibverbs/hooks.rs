// SPDX-License-Identifier: GPL-2.0

//! kfi_ibverbs' test-only exports act only when the provider was loaded
//! with `test_hooks=1`. The guest loads it so for the suite, and once
//! without, for this case alone with `hooks_off=1`
//! (tests/guest/run-suites.sh).

use crate::common::*;
use crate::{skip_reposts, tamper, tamper_flush_key};
use kernel::prelude::*;

/// Each export refuses with `EPERM` without `test_hooks`, and changes
/// nothing: a message sent after the refused calls (one would have given
/// its frame a bad magic) arrives whole, and the connection stays up for
/// a second one. With `test_hooks`, each takes its values (returns 0),
/// and all are stopped again before anything is checked, so that a
/// failure leaves none armed for the next case.
pub(crate) fn exports_act_only_with_test_hooks() -> Result {
    let off = crate::hooks_off();
    let got = [tamper(0, 0x55, 1), skip_reposts(1), tamper_flush_key(0xff)];
    let stopped = [tamper(0, 0, 0), skip_reposts(0), tamper_flush_key(0)];
    let want = if off { Err(EPERM) } else { Ok(()) };
    assert_eq!(got, [want; 3]);
    assert_eq!(stopped, [want; 3]);
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
