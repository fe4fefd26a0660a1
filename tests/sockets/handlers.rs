// SPDX-License-Identifier: GPL-2.0

//! `kfi_sockets_handlers`: CQ completion handlers that post again from
//! within the handler, as `Documentation/api.rst` allows.

use kernel::prelude::*;

#[kunit_tests(kfi_sockets_handlers)]
mod handler_tests {
    use core::{
        ffi::c_void,
        sync::atomic::{AtomicUsize, Ordering::Relaxed},
    };
    use kernel::{
        bindings,
        prelude::*,
        time::{delay::fsleep, Delta},
    };

    use crate::{
        kfi::{kfi_sys as sys, ulp::msg},
        net::*,
    };

    /// Messages held before the first receive: fewer than the
    /// endpoint's 64 held messages, and few enough that nested calls
    /// (what the case looks for) stay within the stack.
    const HELD: usize = 16;
    /// Bytes of each message.
    const LEN: usize = 8;

    /// The handler's state: the server endpoint it posts on, the base of
    /// its receive buffers, the receives it has posted (the test posts
    /// the first), the calls under way and the most ever at once.
    static EP: AtomicUsize = AtomicUsize::new(0);
    static BUFS: AtomicUsize = AtomicUsize::new(0);
    static POSTED: AtomicUsize = AtomicUsize::new(0);
    static DEPTH: AtomicUsize = AtomicUsize::new(0);
    static MAX_DEPTH: AtomicUsize = AtomicUsize::new(0);

    /// Posts the next receive while receives are left to post.
    ///
    /// # Safety
    ///
    /// Called by the server's CQ while `EP` and `BUFS` are set to its open
    /// endpoint and to `HELD` buffers of `LEN` bytes that outlive it.
    unsafe extern "C" fn repost(_cq: *mut sys::kfid_cq, _context: *mut c_void) {
        let depth = DEPTH.fetch_add(1, Relaxed) + 1;
        MAX_DEPTH.fetch_max(depth, Relaxed);
        let i = POSTED.fetch_add(1, Relaxed);
        if i < HELD {
            let iov = bindings::kvec {
                iov_base: (BUFS.load(Relaxed) + i * LEN) as *mut c_void,
                iov_len: LEN,
            };
            let m = msg(&iov, i, 0);
            // SAFETY: The open endpoint and a buffer of its own (safety
            // requirement); `m` and `iov` are read during the call only.
            let r = unsafe { sys::kfi_recvmsg(EP.load(Relaxed) as *mut sys::kfid_ep, &m, 0) };
            if r != 0 {
                pr_err!("repost {} failed: {}\n", i, r);
            }
        }
        DEPTH.fetch_sub(1, Relaxed);
    }

    /// A handler that reposts the receive that completed, on an endpoint
    /// holding many messages that came before any receive: each repost
    /// takes the next held message at once. The handler must not run
    /// nested inside its own repost, once per held message (each level a
    /// post and a handler call deep on the stack): it runs one call at a
    /// time, and every message completes, in order, whole.
    #[test]
    fn reposting_handler_does_not_nest_over_held_messages() -> Result {
        // Before the endpoints: freed after them.
        let mut rbufs = KVec::from_elem(0u8, HELD * LEN, GFP_KERNEL)?;
        let mut sbufs = KVec::with_capacity(HELD * LEN, GFP_KERNEL)?;
        for i in 0..HELD {
            sbufs.extend_from_slice(&[i as u8; LEN], GFP_KERNEL)?;
        }
        let n = net(c"7660")?;
        let _pep = listen(&n)?;
        let ccq = cq_sized(&n, 2 * HELD)?;
        let attr = sys::kfi_cq_attr {
            size: 2 * HELD,
            format: sys::KFI_CQ_FORMAT_DATA,
            comp_handler: Some(repost),
            ..Default::default()
        };
        // SAFETY: No pointer in the attributes; the handler is this
        // module's, and the CQ is closed before the test returns.
        let scq = unsafe { n.domain.open_cq(&attr) }?;
        let (cep, sep) = connected_pair(&n, &ccq, &scq)?;
        BUFS.store(rbufs.as_mut_ptr() as usize, Relaxed);
        EP.store(sep.as_ptr() as usize, Relaxed);
        POSTED.store(1, Relaxed);
        DEPTH.store(0, Relaxed);
        MAX_DEPTH.store(0, Relaxed);

        for i in 0..HELD {
            let t = kvec(&sbufs[i * LEN..(i + 1) * LEN]);
            // SAFETY: An open endpoint; the buffer outlives the send's
            // completion, read below.
            assert_eq!(rc(unsafe { cep.sendmsg(&msg(&t, i, 0), 0) }), 0);
        }
        let mut e = sys::kfi_cq_data_entry::default();
        for _ in 0..HELD {
            assert_eq!(sread(&ccq, &mut e), 1);
        }
        // All sent; give them time to be held.
        fsleep(Delta::from_millis(200));

        let first = bindings::kvec {
            iov_base: rbufs.as_mut_ptr().cast(),
            iov_len: LEN,
        };
        // SAFETY: An open endpoint; `rbufs` outlives every receive, all
        // read below.
        assert_eq!(rc(unsafe { sep.recvmsg(&msg(&first, 0, 0), 0) }), 0);
        for i in 0..HELD {
            assert_eq!(sread(&scq, &mut e), 1);
            assert_eq!((e.op_context as usize, e.len), (i, LEN));
        }
        for (i, b) in rbufs.chunks(LEN).enumerate() {
            assert!(b.iter().all(|&x| x == i as u8));
        }
        // One call at a time (nested, it would be `HELD` deep).
        assert_eq!(MAX_DEPTH.load(Relaxed), 1);
        drop((cep, sep));
        EP.store(0, Relaxed);
        Ok(())
    }
}
