// SPDX-License-Identifier: GPL-2.0

//! Completion handlers that post again: a storage ULP reposts a receive
//! from its completion's handler, which kfi_ibverbs calls from its CQ's
//! softirq. Its completions are written under the data path's lock; the
//! handler must run after that lock is released (the CQ's handler is held
//! back meanwhile, `kfi_util_cq_hold`), or its repost spins on the lock
//! its own caller holds, with interrupts off.

use core::{
    ffi::c_void,
    sync::atomic::{AtomicPtr, AtomicUsize, Ordering::SeqCst},
};
use kernel::prelude::*;

use crate::common::*;
use crate::kfi::{kfi_sys as sys, ulp::Endpoint};

/// Messages of the case, each into the receive the handler reposted.
const MSGS: usize = 8;
/// Bytes of each.
const LEN: usize = 64;

/// The server endpoint (an `Endpoint`) and its receive buffer, while the
/// case runs; NULL before and after.
static EP: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());
static BUF: AtomicPtr<u8> = AtomicPtr::new(core::ptr::null_mut());
/// Receives posted so far, and handlers running now.
static POSTED: AtomicUsize = AtomicUsize::new(0);
static RUNNING: AtomicUsize = AtomicUsize::new(0);

/// The server CQ's handler: posts the next receive, as long as there is
/// one to post.
///
/// # Safety
///
/// Called by kfabric for the CQ it was given to.
unsafe extern "C" fn repost(_cq: *mut sys::kfid_cq, _ctx: *mut c_void) {
    RUNNING.fetch_add(1, SeqCst);
    let ep = EP.load(SeqCst);
    let buf = BUF.load(SeqCst);
    let i = POSTED.load(SeqCst);
    if !ep.is_null() && !buf.is_null() && i < MSGS {
        POSTED.store(i + 1, SeqCst);
        // The case keeps the endpoint and the `MSGS * LEN` bytes alive
        // while `EP` and `BUF` are set, and waits for `RUNNING` to drop
        // after clearing them.
        // SAFETY: Both live (above); receive `i` has bytes of its own.
        let r = unsafe {
            let ep = &*ep.cast::<Endpoint<'_>>();
            let b = core::slice::from_raw_parts_mut(buf.add(i * LEN), LEN);
            ep.recv(b, i)
        };
        if r.is_err() {
            pr_err!("kfi_ibverbs test: repost {i} from the handler: {r:?}\n");
        }
    }
    RUNNING.fetch_sub(1, SeqCst);
}

/// Each message lands in the receive the previous one's handler posted;
/// nothing hangs.
pub(crate) fn handler_reposts_its_receive() -> Result {
    let s = step("side", side(c"7645"))?;
    let d = s.fabric.domain(s.src.entry())?;
    let eq = s.fabric.eq(16)?;
    let _pep = s.fabric.listen(s.src.entry(), &eq)?;
    let ccq = d.cq(16)?;
    // SAFETY: `repost` is this module's, and the CQ closes at the end of
    // the case, before the module can be unloaded.
    let scq = unsafe { d.cq_notifying(16, Some(repost)) }?;
    let cep = endpoint(&d, s.dst.entry(), &ccq, &eq)?;
    cep.connect(&[])?;
    let sep = serve(&d, &eq, &scq, &[])?;
    let mut buf = zeroed(MSGS * LEN)?;
    POSTED.store(1, SeqCst);
    BUF.store(buf.as_mut_ptr(), SeqCst);
    EP.store(core::ptr::from_ref(&sep).cast_mut().cast(), SeqCst);
    let outcome = (|| -> Result {
        // SAFETY: `buf` outlives the receive (the endpoint is closed
        // first on failure).
        unsafe { sep.recv(&mut buf[..LEN], 0)? };
        for i in 0..MSGS {
            let m = pattern(LEN, i as u32)?;
            // SAFETY: `m` outlives the send's completion, read below.
            unsafe { cep.send(&m, 100 + i, 0)? };
            let r = scq.sread(WAIT_MS).map_err(|e| e.errno())?;
            ensure_eq(r.context, i, "receive")?;
            ensure_eq(r.len, LEN, "length")?;
            let c = ccq.sread(WAIT_MS).map_err(|e| e.errno())?;
            ensure_eq(c.context, 100 + i, "send")?;
            let got = buf.get(i * LEN..(i + 1) * LEN).ok_or(EINVAL)?;
            if got != &m[..] {
                pr_err!("kfi_ibverbs test: message {i} differs\n");
                return Err(EBADE);
            }
        }
        Ok(())
    })();
    EP.store(core::ptr::null_mut(), SeqCst);
    BUF.store(core::ptr::null_mut(), SeqCst);
    while RUNNING.load(SeqCst) != 0 {
        core::hint::spin_loop();
    }
    drop(sep);
    drop(cep);
    outcome
}

/// `got` must be `want`; the log says which `what` was not.
fn ensure_eq(got: usize, want: usize, what: &str) -> Result {
    if got != want {
        pr_err!("kfi_ibverbs test: {what}: {got}, not {want}\n");
        return Err(EBADE);
    }
    Ok(())
}
