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
        task::Task,
        time::{delay::fsleep, Delta},
    };

    use crate::{
        kfi::{kfi_sys as sys, ulp::msg},
        net::*,
    };

    /// Messages held before the first receive: fewer than the
    /// endpoint's 64 held messages, and few enough that nested calls
    /// (what the first case looks for) stay within the stack.
    const HELD: usize = 16;
    /// Messages held before the first receive in the case that counts
    /// the receives its first post reports: more than [`POST_REPORTS`],
    /// fewer than the endpoint's 64.
    const HELD_MANY: usize = 48;
    /// Receives one post of kfi_sockets reports at most, its own included
    /// (`Documentation/api.rst`).
    const POST_REPORTS: usize = 16;
    /// Bytes of each message.
    const LEN: usize = 8;

    /// The handlers' state (one case at a time): the server endpoint they
    /// post on and the client endpoint the second one sends on, the base
    /// of the receive buffers, the handler calls so far, the calls under
    /// way and the most ever at once, and the receives [`repost`] posts
    /// (the case posts the first).
    static SEP: AtomicUsize = AtomicUsize::new(0);
    static CEP: AtomicUsize = AtomicUsize::new(0);
    static BUFS: AtomicUsize = AtomicUsize::new(0);
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    static DEPTH: AtomicUsize = AtomicUsize::new(0);
    static MAX_DEPTH: AtomicUsize = AtomicUsize::new(0);
    static CHAIN: AtomicUsize = AtomicUsize::new(0);
    /// The task in the case's first post while it posts, and the handler
    /// calls made in that task meanwhile (reported by that post: all
    /// messages are held before it, so no data callback that interrupts
    /// the task reports one).
    static POSTER: AtomicUsize = AtomicUsize::new(0);
    static IN_POST: AtomicUsize = AtomicUsize::new(0);

    /// Posts receive `i` of the case on the server endpoint.
    ///
    /// # Safety
    ///
    /// `SEP` and `BUFS` hold the case's open endpoint and buffers, and
    /// the buffers have room for receive `i`.
    unsafe fn post(i: usize) {
        let iov = bindings::kvec {
            iov_base: (BUFS.load(Relaxed) + i * LEN) as *mut c_void,
            iov_len: LEN,
        };
        let m = msg(&iov, i, 0);
        // SAFETY: The open endpoint and a buffer of its own (safety
        // requirement); `m` and `iov` are read during the call only.
        let r = unsafe { sys::kfi_recvmsg(SEP.load(Relaxed) as *mut sys::kfid_ep, &m, 0) };
        if r != 0 {
            pr_err!("kfi_sockets_handlers: receive {} not posted: {}\n", i, r);
        }
    }

    /// Call `k` (from 0) reposts receive `k + 1`, up to `CHAIN` receives.
    ///
    /// # Safety
    ///
    /// Called by the server's CQ while the statics hold the case's open
    /// endpoints and buffers.
    unsafe extern "C" fn repost(_cq: *mut sys::kfid_cq, _context: *mut c_void) {
        let depth = DEPTH.fetch_add(1, Relaxed) + 1;
        MAX_DEPTH.fetch_max(depth, Relaxed);
        if Task::current_raw() as usize == POSTER.load(Relaxed) {
            IN_POST.fetch_add(1, Relaxed);
        }
        let k = CALLS.fetch_add(1, Relaxed);
        if k + 1 < CHAIN.load(Relaxed) {
            // SAFETY: As required of this call.
            unsafe { post(k + 1) };
        }
        DEPTH.fetch_sub(1, Relaxed);
    }

    /// As [`repost`]; in addition, the call that reposts the receive for
    /// the last held message also posts the next one and has the client
    /// send it its message at once. Sent inline and taken by the data
    /// callback in the same softirq (the defaults, `inline_tx` and
    /// `rx_in_callback`), the message reaches the server while the
    /// receive for the last held one is not reported yet: the case can
    /// only catch a receive that completes ahead of it then.
    ///
    /// # Safety
    ///
    /// As for [`repost`].
    unsafe extern "C" fn top_up(cq: *mut sys::kfid_cq, context: *mut c_void) {
        // SAFETY: As required of this call.
        unsafe { repost(cq, context) };
        // Not once the case has ended (`Reset`).
        if CALLS.load(Relaxed) != HELD - 1 || CHAIN.load(Relaxed) == 0 {
            return;
        }
        // SAFETY: As above.
        unsafe { post(HELD) };
        let mut byte = [HELD as u8; LEN];
        let iov = bindings::kvec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: LEN,
        };
        let m = msg(&iov, HELD, 0);
        // SAFETY: The open client endpoint; an inject send copies `byte`
        // during the call.
        let r = unsafe {
            sys::kfi_sendmsg(CEP.load(Relaxed) as *mut sys::kfid_ep, &m, sys::KFI_INJECT)
        };
        if r != 0 {
            pr_err!("kfi_sockets_handlers: message {} not sent: {}\n", HELD, r);
        }
    }

    /// `EBADE`, with `what` in the log, unless `ok`: a failed check ends
    /// the case cleanly (a panic outside a test's own body would not).
    fn check(ok: bool, what: &str) -> Result {
        if !ok {
            pr_err!("kfi_sockets_handlers: {}\n", what);
            return Err(EBADE);
        }
        Ok(())
    }

    /// What [`held_then_posted`] saw of the handler calls.
    struct Seen {
        /// The most calls ever under way at once.
        depth: usize,
        /// The calls made within the first post, in its task.
        in_post: usize,
    }

    /// Sets up a connection whose server endpoint holds `held` messages
    /// of `LEN` bytes (message `i` all bytes `i`) and whose CQ calls
    /// `handler` ([`repost`] posting up to `chain` receives), posts its
    /// first receive and returns, after checking that `receives` receives
    /// completed in order with their messages, each with one handler
    /// call, what it saw of the calls.
    fn held_then_posted(
        port: &CStr,
        handler: unsafe extern "C" fn(*mut sys::kfid_cq, *mut c_void),
        held: usize,
        chain: usize,
        receives: usize,
    ) -> Result<Seen> {
        // Before the endpoints: freed after them.
        let mut rbufs = KVec::from_elem(0u8, receives * LEN, GFP_KERNEL)?;
        let mut sbufs = KVec::with_capacity(held * LEN, GFP_KERNEL)?;
        for i in 0..held {
            sbufs.extend_from_slice(&[i as u8; LEN], GFP_KERNEL)?;
        }
        let n = net(port)?;
        let _pep = listen(&n)?;
        let ccq = cq_sized(&n, 2 * receives)?;
        let attr = sys::kfi_cq_attr {
            size: 2 * receives,
            format: sys::KFI_CQ_FORMAT_DATA,
            comp_handler: Some(handler),
            ..Default::default()
        };
        // SAFETY: No pointer in the attributes; the handler is this
        // module's, and the CQ is closed before this returns.
        let scq = unsafe { n.domain.open_cq(&attr) }?;
        let (cep, sep) = connected_pair(&n, &ccq, &scq)?;
        // Dropped before the endpoints: a failed check leaves no handler
        // posting on a closing endpoint.
        let _reset = Reset;
        BUFS.store(rbufs.as_mut_ptr() as usize, Relaxed);
        SEP.store(sep.as_ptr() as usize, Relaxed);
        CEP.store(cep.as_ptr() as usize, Relaxed);
        CHAIN.store(chain, Relaxed);
        for a in [&CALLS, &DEPTH, &MAX_DEPTH, &IN_POST] {
            a.store(0, Relaxed);
        }

        for i in 0..held {
            let t = kvec(&sbufs[i * LEN..(i + 1) * LEN]);
            // SAFETY: An open endpoint; the buffer outlives the send's
            // completion, read below.
            let r = unsafe { cep.sendmsg(&msg(&t, i, 0), sys::KFI_DELIVERY_COMPLETE) };
            check(rc(r) == 0, "a send failed")?;
        }
        // Delivered: each one is held once its send completes.
        let mut e = sys::kfi_cq_data_entry::default();
        for _ in 0..held {
            check(sread(&ccq, &mut e) == 1, "a send did not complete")?;
        }
        POSTER.store(Task::current_raw() as usize, Relaxed);
        // SAFETY: As required: the case's endpoint and buffers.
        unsafe { post(0) };
        POSTER.store(0, Relaxed);
        for i in 0..receives {
            check(sread(&scq, &mut e) == 1, "a receive did not complete")?;
            let got = (e.op_context as usize, e.len);
            if got != (i, LEN) {
                pr_err!("kfi_sockets_handlers: completion {} was {:?}\n", i, got);
                return Err(EBADE);
            }
        }
        // SAFETY: An open CQ; `e` has room for one entry.
        let more = unsafe { sys::kfi_cq_read(scq.as_ptr(), (&raw mut e).cast(), 1) };
        check(
            more == -(bindings::EAGAIN as isize),
            "a completion too many",
        )?;
        // The CQ wakes its reader before it calls the handler.
        let mut waited = 0;
        while CALLS.load(Relaxed) < receives && waited < WAIT_MS {
            fsleep(Delta::from_millis(1));
            waited += 1;
        }
        check(CALLS.load(Relaxed) == receives, "not one handler call each")?;
        for (i, b) in rbufs.chunks(LEN).enumerate() {
            check(b.iter().all(|&x| x == i as u8), "a message misplaced")?;
        }
        Ok(Seen {
            depth: MAX_DEPTH.load(Relaxed),
            in_post: IN_POST.load(Relaxed),
        })
    }

    /// Most milliseconds a case waits for the handler's last call.
    const WAIT_MS: i64 = 5000;

    /// Clears the handlers' statics when a case ends.
    struct Reset;

    impl Drop for Reset {
        fn drop(&mut self) {
            for a in [&CHAIN, &SEP, &CEP, &BUFS, &POSTER] {
                a.store(0, Relaxed);
            }
        }
    }

    /// A handler that reposts the receive that completed, on an endpoint
    /// holding many messages that came before any receive: each repost
    /// takes the next held message. The handler must not run nested
    /// inside its own repost, once per held message (each level a post
    /// and a handler call deep on the stack): it runs one call at a time,
    /// and every message completes, in order, whole.
    #[test]
    fn reposting_handler_does_not_nest_over_held_messages() -> Result {
        let seen = held_then_posted(c"7660", repost, HELD, HELD, HELD)?;
        // Nested, it would be `HELD` deep.
        assert_eq!(seen.depth, 1);
        Ok(())
    }

    /// As above, but the handler that reposts the receive for the last
    /// held message also posts one more receive, and has the peer send a
    /// new message at once (received in softirq, maybe before the repost
    /// has reported the held message). The new message still completes
    /// after the held ones.
    #[test]
    fn receives_posted_by_a_handler_complete_in_message_order() -> Result {
        held_then_posted(c"7661", top_up, HELD, HELD, HELD + 1)?;
        Ok(())
    }

    /// As the first case, with more held messages than one post reports:
    /// the post that takes the first one reports [`POST_REPORTS`] and
    /// returns, a work item of the provider reports the rest, and all
    /// complete in order, whole, one handler call at a time. A peer that
    /// keeps sending to a reposting handler cannot keep the poster (maybe
    /// a softirq) for as long as it likes.
    #[test]
    fn a_post_reports_a_bounded_number_of_held_messages() -> Result {
        let seen = held_then_posted(c"7662", repost, HELD_MANY, HELD_MANY, HELD_MANY)?;
        assert_eq!(seen.depth, 1);
        // Without the bound, the post would report all `HELD_MANY`.
        assert_eq!(seen.in_post, POST_REPORTS);
        Ok(())
    }
}
