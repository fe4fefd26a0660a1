// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `kfi_queues`: the util completion queue, event queue and
//! counter kfabric.ko gives providers, driven as a provider (the
//! `kfi_util_*` calls) and as a ULP (the `kfi_*` calls).

use kernel::prelude::*;

#[kunit_tests(kfi_queues)]
mod tests {
    use crate::{
        kfi::{kfabric::*, kfi_sys as sys, toolkit::task},
        tree::{cq_attr, Tree},
        KfiTestCore,
    };
    use core::sync::atomic::{AtomicUsize, Ordering};
    use kernel::{
        error::code::*,
        prelude::*,
        time::{delay::fsleep, Delta},
        workqueue, ModuleMetadata,
    };

    const THIS_MODULE: &ThisModule = &KfiTestCore::THIS_MODULE;
    const EAVAIL: isize = -(sys::KFI_EAVAIL as isize);

    fn neg(e: Error) -> isize {
        e.to_errno() as isize
    }

    fn open_cq(
        t: &Tree,
        attr: &mut sys::kfi_cq_attr,
        ctx: *mut c_void,
    ) -> Result<Owned<sys::kfid_cq>> {
        // SAFETY: Open domain, valid attributes.
        Owned::open(|o| unsafe { sys::kfi_cq_open(t.domain.as_ptr(), attr, o, ctx) })
    }

    /// A CQ of the DATA format holding `size` entries, with no context.
    fn data_cq(t: &Tree, size: usize) -> Result<Owned<sys::kfid_cq>> {
        open_cq(
            t,
            &mut cq_attr(size, sys::KFI_CQ_FORMAT_DATA),
            core::ptr::null_mut(),
        )
    }

    /// An EQ of `size` entries, with no handler and no context.
    fn eq_of(t: &Tree, size: usize) -> Result<Owned<sys::kfid_eq>> {
        let mut ea = sys::kfi_eq_attr {
            size,
            ..Default::default()
        };
        // SAFETY: Open fabric, valid attributes.
        Owned::open(|o| unsafe {
            sys::kfi_eq_open(t.fabric.as_ptr(), &mut ea, o, core::ptr::null_mut())
        })
    }

    /// Posts a provider's `KFI_CONNREQ` with a fresh info on `eq`, as a
    /// provider does: the result, and the info (the EQ's once posted;
    /// freed here when the post fails).
    fn post_connreq(t: &Tree, eq: &Owned<sys::kfid_eq>) -> (c_int, *mut sys::kfi_info) {
        // SAFETY: No arguments.
        let info = unsafe { sys::kfi_allocinfo() };
        if info.is_null() {
            return (ENOMEM.to_errno(), info);
        }
        let cm = sys::kfi_eq_cm_entry {
            fid: t.fabric.fid(),
            info,
            ..Default::default()
        };
        // SAFETY: Open util EQ; `cm` outlives the call.
        let r = unsafe {
            sys::kfi_util_eq_write_cm(
                eq.as_ptr(),
                sys::KFI_CONNREQ,
                (&raw const cm).cast(),
                size_of::<sys::kfi_eq_cm_entry>(),
            )
        };
        if r != 0 {
            // SAFETY: Not queued: the info is still ours.
            unsafe { sys::kfi_freeinfo(info) };
        }
        (r, info)
    }

    fn entry(ctx: usize, len: usize) -> sys::kfi_cq_tagged_entry {
        sys::kfi_cq_tagged_entry {
            op_context: ctx as *mut c_void,
            flags: sys::KFI_SEND,
            len,
            data: ctx as u64,
            ..Default::default()
        }
    }

    fn write(cq: &Owned<sys::kfid_cq>, e: &sys::kfi_cq_tagged_entry) -> i32 {
        // SAFETY: An open util CQ, a valid entry.
        unsafe { sys::kfi_util_cq_write(cq.as_ptr(), e) }
    }

    fn readerr(cq: &Owned<sys::kfid_cq>, e: &mut sys::kfi_cq_err_entry) -> isize {
        // SAFETY: An open CQ, a writable entry.
        unsafe { sys::kfi_cq_readerr(cq.as_ptr(), e, 0) }
    }

    fn read(cq: &Owned<sys::kfid_cq>, out: &mut [sys::kfi_cq_data_entry]) -> isize {
        // SAFETY: An open CQ of DATA format; `out` holds that many entries.
        unsafe { sys::kfi_cq_read(cq.as_ptr(), out.as_mut_ptr().cast(), out.len()) }
    }

    #[test]
    fn cq_orders_entries_and_errors() -> Result {
        let t = Tree::new(THIS_MODULE)?;
        let cq = data_cq(&t, 8)?;
        let mut out = [sys::kfi_cq_data_entry::default(); 4];
        assert_eq!(read(&cq, &mut out), neg(EAGAIN));
        assert_eq!(write(&cq, &entry(1, 10)), 0);
        let err = sys::kfi_cq_err_entry {
            op_context: 2 as *mut c_void,
            flags: sys::KFI_RECV,
            olen: 5,
            err: 90,
            ..Default::default()
        };
        // SAFETY: An open util CQ, a valid error entry.
        assert_eq!(unsafe { sys::kfi_util_cq_write_err(cq.as_ptr(), &err) }, 0);
        assert_eq!(write(&cq, &entry(3, 30)), 0);
        // The read stops at the error entry.
        assert_eq!(read(&cq, &mut out), 1);
        assert_eq!(
            (out[0].op_context as usize, out[0].len, out[0].data),
            (1, 10, 1)
        );
        assert_eq!(read(&cq, &mut out), EAVAIL);
        let mut e = sys::kfi_cq_err_entry::default();
        assert_eq!(readerr(&cq, &mut e), 1);
        assert_eq!((e.op_context as usize, e.olen, e.err), (2, 5, 90));
        assert_eq!(readerr(&cq, &mut e), neg(EAGAIN));
        assert_eq!(read(&cq, &mut out), 1);
        assert_eq!(out[0].op_context as usize, 3);
        // An error entry with no error is refused.
        // SAFETY: Open CQ, valid entry.
        let bad =
            unsafe { sys::kfi_util_cq_write_err(cq.as_ptr(), &sys::kfi_cq_err_entry::default()) };
        assert_eq!(bad, EINVAL.to_errno());
        Ok(())
    }

    #[test]
    fn cq_overflow_is_reported() -> Result {
        let t = Tree::new(THIS_MODULE)?;
        let cq = data_cq(&t, 2)?;
        assert_eq!(write(&cq, &entry(1, 1)), 0);
        assert_eq!(write(&cq, &entry(2, 2)), 0);
        assert_eq!(write(&cq, &entry(3, 3)), ENOSPC.to_errno());
        let mut out = [sys::kfi_cq_data_entry::default(); 4];
        // One read frees room for a completion that comes after the loss:
        // the notice keeps the lost one's place, before it.
        assert_eq!(read(&cq, &mut out[..1]), 1);
        assert_eq!(write(&cq, &entry(4, 4)), 0);
        assert_eq!(read(&cq, &mut out), 1);
        assert_eq!(out[0].op_context as usize, 2);
        assert_eq!(read(&cq, &mut out), EAVAIL);
        let mut e = sys::kfi_cq_err_entry::default();
        assert_eq!(readerr(&cq, &mut e), 1);
        assert_eq!(e.err, -EOVERFLOW.to_errno());
        assert_eq!(readerr(&cq, &mut e), neg(EAGAIN));
        assert_eq!(read(&cq, &mut out), 1);
        assert_eq!(out[0].op_context as usize, 4);
        assert_eq!(read(&cq, &mut out), neg(EAGAIN));
        Ok(())
    }

    #[test]
    fn cq_formats_and_bad_attributes() -> Result {
        let t = Tree::new(THIS_MODULE)?;
        let cq = open_cq(
            &t,
            &mut cq_attr(4, sys::KFI_CQ_FORMAT_CONTEXT),
            core::ptr::null_mut(),
        )?;
        assert_eq!(write(&cq, &entry(5, 1)), 0);
        assert_eq!(write(&cq, &entry(6, 1)), 0);
        let mut out = [sys::kfi_cq_entry::default(); 3];
        // SAFETY: Open CQ of CONTEXT format, three entries of room.
        let n = unsafe { sys::kfi_cq_read(cq.as_ptr(), out.as_mut_ptr().cast(), 3) };
        assert_eq!(n, 2);
        assert_eq!(
            (out[0].op_context as usize, out[1].op_context as usize),
            (5, 6)
        );
        assert!(out[2].op_context.is_null());
        for mut bad in [cq_attr(0, 0), cq_attr(4, 99), cq_attr(1 << 20, 0)] {
            assert_eq!(
                open_cq(&t, &mut bad, core::ptr::null_mut()).map_or_else(|e| e.to_errno(), |_| 0),
                EINVAL.to_errno()
            );
        }
        // The largest CQ the API takes (more than kmalloc gives: its ring
        // comes from vmalloc) opens, and takes entries.
        let big = open_cq(
            &t,
            &mut cq_attr(1 << 16, sys::KFI_CQ_FORMAT_TAGGED),
            core::ptr::null_mut(),
        )?;
        assert_eq!(write(&big, &entry(7, 1)), 0);
        Ok(())
    }

    #[test]
    fn cq_sread_timeout_signal_and_wakeup() -> Result {
        let t = Tree::new(THIS_MODULE)?;
        let cq = data_cq(&t, 4)?;
        let mut out = [sys::kfi_cq_data_entry::default(); 1];
        let sread = |out: &mut [sys::kfi_cq_data_entry], ms| {
            // SAFETY: Open CQ; `out` holds one entry.
            unsafe {
                sys::kfi_cq_sread(
                    cq.as_ptr(),
                    out.as_mut_ptr().cast(),
                    1,
                    core::ptr::null(),
                    ms,
                )
            }
        };
        assert_eq!(sread(&mut out, 20), neg(ETIMEDOUT));
        // SAFETY: Open CQ.
        assert_eq!(unsafe { sys::kfi_cq_signal(cq.as_ptr()) }, 0);
        assert_eq!(sread(&mut out, 1000), neg(ECANCELED));
        assert_eq!(write(&cq, &entry(9, 9)), 0);
        assert_eq!(sread(&mut out, -1), 1);
        assert_eq!(out[0].op_context as usize, 9);
        Ok(())
    }

    /// Set by the writer of `cq_expect_wakes_waiters_early` when it is
    /// done with the CQ.
    static EXPECT_WRITER_DONE: AtomicUsize = AtomicUsize::new(0);

    /// `kfi_util_cq_expect` loses and invents nothing: a waiter woken
    /// before its completion waits on for it. That the wakeup comes
    /// earlier is a matter of speed, for `make bench`.
    #[test]
    fn cq_expect_wakes_waiters_early() -> Result {
        let t = Tree::new(THIS_MODULE)?;
        let cq = data_cq(&t, 4)?;
        let mut out = [sys::kfi_cq_data_entry::default(); 1];
        // Nobody waits: nothing happens, and no entry or signal is left
        // behind for the next reader.
        // SAFETY: An open util CQ; NULL and an endpoint are ignored.
        unsafe {
            sys::kfi_util_cq_expect(cq.as_ptr());
            sys::kfi_util_cq_expect(core::ptr::null_mut());
            sys::kfi_util_cq_expect(t.tx.as_ptr().cast());
        }
        assert_eq!(read(&cq, &mut out), neg(EAGAIN));
        // A waiter woken before the completion is written waits on for it.
        EXPECT_WRITER_DONE.store(0, Ordering::SeqCst);
        let raw = cq.as_ptr() as usize;
        task::spawn(workqueue::system_unbound(), move || {
            let cq = raw as *mut sys::kfid_cq;
            fsleep(Delta::from_millis(50));
            // SAFETY: The test keeps the CQ open until this task is done.
            unsafe { sys::kfi_util_cq_expect(cq) };
            fsleep(Delta::from_millis(50));
            // SAFETY: As above; a valid entry.
            let r = unsafe { sys::kfi_util_cq_write(cq, &entry(7, 7)) };
            EXPECT_WRITER_DONE.store(if r == 0 { 1 } else { 2 }, Ordering::SeqCst);
        })?;
        // SAFETY: Open CQ; `out` holds one entry.
        let n = unsafe {
            sys::kfi_cq_sread(
                cq.as_ptr(),
                out.as_mut_ptr().cast(),
                1,
                core::ptr::null(),
                5000,
            )
        };
        // The CQ stays open until the writer has left it: its own waits
        // are bounded, so this wait is too.
        while EXPECT_WRITER_DONE.load(Ordering::SeqCst) == 0 {
            fsleep(Delta::from_millis(1));
        }
        assert_eq!(EXPECT_WRITER_DONE.load(Ordering::SeqCst), 1);
        assert_eq!(n, 1);
        assert_eq!(out[0].op_context as usize, 7);
        assert_eq!(read(&cq, &mut out), neg(EAGAIN));
        Ok(())
    }

    /// The result of the waiter of `close_refused_while_a_thread_waits`,
    /// plus one (0: still waiting).
    static WAITER_DONE: AtomicUsize = AtomicUsize::new(0);

    /// A CQ's close while another thread sleeps in its `kfi_cq_sread` is
    /// refused (`-EBUSY`), not a free under the sleeper; once the wait
    /// ended, the CQ closes.
    #[test]
    fn close_refused_while_a_thread_waits() -> Result {
        let t = Tree::new(THIS_MODULE)?;
        let cq = data_cq(&t, 4)?;
        WAITER_DONE.store(0, Ordering::SeqCst);
        let raw = cq.as_ptr() as usize;
        task::spawn(workqueue::system_unbound(), move || {
            let mut out = [sys::kfi_cq_data_entry::default(); 1];
            // SAFETY: The test keeps the CQ open until this task is done;
            // `out` holds one entry.
            let n = unsafe {
                sys::kfi_cq_sread(
                    raw as *mut sys::kfid_cq,
                    out.as_mut_ptr().cast(),
                    1,
                    core::ptr::null(),
                    400,
                )
            };
            WAITER_DONE.store((n + 1000) as usize, Ordering::SeqCst);
        })?;
        fsleep(Delta::from_millis(150));
        assert_eq!(WAITER_DONE.load(Ordering::SeqCst), 0);
        // SAFETY: An open CQ (the refusal leaves it open).
        assert_eq!(unsafe { sys::kfi_close(cq.fid()) }, EBUSY.to_errno());
        while WAITER_DONE.load(Ordering::SeqCst) == 0 {
            fsleep(Delta::from_millis(1));
        }
        assert_eq!(
            WAITER_DONE.load(Ordering::SeqCst),
            (neg(ETIMEDOUT) + 1000) as usize
        );
        assert_eq!(write(&cq, &entry(1, 1)), 0);
        Ok(())
    }

    static HANDLED: AtomicUsize = AtomicUsize::new(0);
    static HANDLED_CTX: AtomicUsize = AtomicUsize::new(0);

    /// # Safety
    ///
    /// Called by a util queue with its own pointer and context.
    unsafe extern "C" fn cq_handler(_cq: *mut sys::kfid_cq, context: *mut c_void) {
        HANDLED.fetch_add(1, Ordering::Relaxed);
        HANDLED_CTX.store(context as usize, Ordering::Relaxed);
    }

    /// # Safety
    ///
    /// Called by a util queue with its own pointer and context.
    unsafe extern "C" fn eq_handler(_eq: *mut sys::kfid_eq, context: *mut c_void) {
        HANDLED.fetch_add(1, Ordering::Relaxed);
        HANDLED_CTX.store(context as usize, Ordering::Relaxed);
    }

    #[test]
    fn handlers_run_on_new_entries() -> Result {
        let t = Tree::new(THIS_MODULE)?;
        let mut a = cq_attr(4, sys::KFI_CQ_FORMAT_MSG);
        a.comp_handler = Some(cq_handler);
        let cq = open_cq(&t, &mut a, 0x77 as *mut c_void)?;
        let before = HANDLED.load(Ordering::Relaxed);
        assert_eq!(write(&cq, &entry(1, 1)), 0);
        assert_eq!(HANDLED.load(Ordering::Relaxed), before + 1);
        assert_eq!(HANDLED_CTX.load(Ordering::Relaxed), 0x77);
        let mut ea = sys::kfi_eq_attr {
            size: 4,
            event_handler: Some(eq_handler),
            ..Default::default()
        };
        // SAFETY: Open fabric, valid attributes.
        let eq = Owned::open(|o| unsafe {
            sys::kfi_eq_open(t.fabric.as_ptr(), &mut ea, o, 0x88 as *mut c_void)
        })?;
        // SAFETY: Open EQ; an event without data.
        let n = unsafe { sys::kfi_eq_write(eq.as_ptr(), sys::KFI_NOTIFY, core::ptr::null(), 0, 0) };
        assert_eq!(n, 0);
        assert_eq!(HANDLED.load(Ordering::Relaxed), before + 2);
        assert_eq!(HANDLED_CTX.load(Ordering::Relaxed), 0x88);
        Ok(())
    }

    /// Holds and releases of a CQ's handler (`kfi_util_cq_hold`), as a
    /// provider takes them around the lock it writes completions under.
    fn hold(cq: &Owned<sys::kfid_cq>, on: bool) {
        // SAFETY: An open util CQ; every release ends a hold of ours.
        unsafe {
            if on {
                sys::kfi_util_cq_hold(cq.as_ptr());
            } else {
                sys::kfi_util_cq_release(cq.as_ptr());
            }
        }
    }

    /// A held handler is not called for the completions written meanwhile,
    /// and the last of nested holds calls it once for all of them; a hold
    /// that saw no completion calls nothing; a release without a hold is
    /// ignored. The entries are all there.
    #[test]
    fn held_handler_runs_once_at_the_last_release() -> Result {
        let t = Tree::new(THIS_MODULE)?;
        let mut a = cq_attr(8, sys::KFI_CQ_FORMAT_DATA);
        a.comp_handler = Some(cq_handler);
        let cq = open_cq(&t, &mut a, 0x99 as *mut c_void)?;
        let before = HANDLED.load(Ordering::Relaxed);
        hold(&cq, true);
        hold(&cq, true);
        for i in 0..3 {
            assert_eq!(write(&cq, &entry(i, 1)), 0);
        }
        assert_eq!(HANDLED.load(Ordering::Relaxed), before);
        hold(&cq, false);
        assert_eq!(HANDLED.load(Ordering::Relaxed), before);
        hold(&cq, false);
        assert_eq!(HANDLED.load(Ordering::Relaxed), before + 1);
        assert_eq!(HANDLED_CTX.load(Ordering::Relaxed), 0x99);
        hold(&cq, true);
        hold(&cq, false);
        assert_eq!(HANDLED.load(Ordering::Relaxed), before + 1);
        assert_eq!(write(&cq, &entry(3, 1)), 0);
        assert_eq!(HANDLED.load(Ordering::Relaxed), before + 2);
        // A release without a hold (a provider's bug) is ignored: the
        // next completion still calls the handler.
        hold(&cq, false);
        assert_eq!(write(&cq, &entry(4, 1)), 0);
        assert_eq!(HANDLED.load(Ordering::Relaxed), before + 3);
        let mut out = [sys::kfi_cq_data_entry::default(); 8];
        assert_eq!(read(&cq, &mut out), 5);
        for (i, e) in out.iter().take(5).enumerate() {
            assert_eq!(e.op_context as usize, i);
        }
        Ok(())
    }

    #[test]
    fn eq_events_and_errors() -> Result {
        let t = Tree::new(THIS_MODULE)?;
        let eq = eq_of(&t, 4)?;
        let ev = sys::kfi_eq_entry {
            fid: t.domain.fid(),
            data: 1234,
            ..Default::default()
        };
        let size = size_of::<sys::kfi_eq_entry>();
        let mut got = sys::kfi_eq_entry::default();
        let mut event = 0u32;
        let err_data = *b"rejected: no";
        let err = sys::kfi_eq_err_entry {
            err: 111,
            err_data: err_data.as_ptr().cast_mut().cast(),
            err_data_size: err_data.len(),
            ..Default::default()
        };
        let mut e = sys::kfi_eq_err_entry::default();
        // SAFETY: An open EQ; every buffer is valid for the length given.
        unsafe {
            let eqp = eq.as_ptr();
            let out: *mut c_void = (&raw mut got).cast();
            assert_eq!(sys::kfi_eq_read(eqp, &mut event, out, size, 0), neg(EAGAIN));
            assert_eq!(
                sys::kfi_eq_write(eqp, sys::KFI_CONNECTED, (&raw const ev).cast(), size, 0),
                size as isize
            );
            assert_eq!(
                sys::kfi_eq_read(eqp, &mut event, out, size - 1, 0),
                neg(EMSGSIZE)
            );
            assert_eq!(
                sys::kfi_eq_read(eqp, &mut event, out, size, sys::KFI_PEEK),
                size as isize
            );
            assert_eq!(
                sys::kfi_eq_read(eqp, &mut event, out, size, 0),
                size as isize
            );
            assert_eq!(
                (event, got.fid, got.data),
                (sys::KFI_CONNECTED, t.domain.fid(), 1234)
            );
            assert_eq!(
                sys::kfi_eq_sread(eqp, &mut event, out, size, 20, 0),
                neg(ETIMEDOUT)
            );
            assert_eq!(sys::kfi_util_eq_write_err(eqp, &err), 0);
            assert_eq!(sys::kfi_eq_read(eqp, &mut event, out, size, 0), EAVAIL);
            assert_eq!(sys::kfi_eq_readerr(eqp, &mut e, 0), 1);
            assert_eq!((e.err, e.err_data_size), (111, err_data.len()));
            let copied = core::slice::from_raw_parts(e.err_data.cast::<u8>(), e.err_data_size);
            assert_eq!(copied, &err_data[..]);
            // Too large an event is refused.
            let big = [0u8; 512];
            assert_eq!(
                sys::kfi_eq_write(eqp, sys::KFI_NOTIFY, big.as_ptr().cast(), big.len(), 0),
                neg(EINVAL)
            );
            // A ULP's write to a full queue just fails; a provider's event
            // that finds it full is reported once the queue is read: an
            // EOVERFLOW error entry, not a silence.
            let cm = sys::kfi_eq_cm_entry {
                fid: t.domain.fid(),
                ..Default::default()
            };
            let cm_size = size_of::<sys::kfi_eq_cm_entry>();
            for _ in 0..4 {
                assert_eq!(
                    sys::kfi_eq_write(eqp, sys::KFI_NOTIFY, (&raw const ev).cast(), size, 0),
                    size as isize
                );
            }
            assert_eq!(
                sys::kfi_eq_write(eqp, sys::KFI_NOTIFY, (&raw const ev).cast(), size, 0),
                neg(ENOSPC)
            );
            assert_eq!(sys::kfi_eq_readerr(eqp, &mut e, 0), neg(EAGAIN));
            let lost =
                sys::kfi_util_eq_write_cm(eqp, sys::KFI_SHUTDOWN, (&raw const cm).cast(), cm_size);
            assert_eq!(lost, ENOSPC.to_errno());
            // An event queued after the loss, once a read made room, comes
            // after the notice, which keeps the lost event's place.
            assert_eq!(
                sys::kfi_eq_read(eqp, &mut event, out, size, 0),
                size as isize
            );
            let later = sys::kfi_eq_entry {
                fid: t.domain.fid(),
                data: 5678,
                ..Default::default()
            };
            assert_eq!(
                sys::kfi_eq_write(eqp, sys::KFI_NOTIFY, (&raw const later).cast(), size, 0),
                size as isize
            );
            for _ in 0..3 {
                assert_eq!(
                    sys::kfi_eq_read(eqp, &mut event, out, size, 0),
                    size as isize
                );
                assert_eq!(got.data, 1234);
            }
            assert_eq!(sys::kfi_eq_read(eqp, &mut event, out, size, 0), EAVAIL);
            assert_eq!(sys::kfi_eq_readerr(eqp, &mut e, 0), 1);
            assert_eq!(e.err, EOVERFLOW.to_errno().abs());
            assert_eq!(sys::kfi_eq_readerr(eqp, &mut e, 0), neg(EAGAIN));
            assert_eq!(
                sys::kfi_eq_read(eqp, &mut event, out, size, 0),
                size as isize
            );
            assert_eq!(got.data, 5678);
            assert_eq!(sys::kfi_eq_read(eqp, &mut event, out, size, 0), neg(EAGAIN));
        }
        Ok(())
    }

    #[test]
    fn eq_close_frees_unread_connreq_info() -> Result {
        let t = Tree::new(THIS_MODULE)?;
        let eq = eq_of(&t, 2)?;
        // As a provider's request, the EQ owns `info` from now on.
        let (r, info) = post_connreq(&t, &eq);
        assert_eq!(r, 0);
        let cm = sys::kfi_eq_cm_entry {
            fid: t.fabric.fid(),
            info,
            ..Default::default()
        };
        // A request too short to hold its entry is refused.
        // SAFETY: Open util EQ; `cm` outlives the call. Too short, the request
        // is refused and queues nothing: `info` stays the first event's.
        let r = unsafe {
            sys::kfi_util_eq_write_cm(eq.as_ptr(), sys::KFI_CONNREQ, (&raw const cm).cast(), 4)
        };
        assert_eq!(r, EINVAL.to_errno());
        // Closing the EQ frees `info`; kmemleak (debug kernel) checks it.
        drop(eq);
        Ok(())
    }

    #[test]
    fn eq_keeps_half_for_connected_endpoints() -> Result {
        let t = Tree::new(THIS_MODULE)?;
        let eq = eq_of(&t, 4)?;
        let cm_size = size_of::<sys::kfi_eq_cm_entry>();
        let connreq = || post_connreq(&t, &eq).0;
        let shutdown = sys::kfi_eq_cm_entry {
            fid: t.domain.fid(),
            ..Default::default()
        };
        // SAFETY: Open util EQ; `shutdown` outlives the call.
        let post_shutdown = || unsafe {
            sys::kfi_util_eq_write_cm(
                eq.as_ptr(),
                sys::KFI_SHUTDOWN,
                (&raw const shutdown).cast(),
                cm_size,
            )
        };
        // Requests take half of the 4 entries; the third is refused.
        assert_eq!(connreq(), 0);
        assert_eq!(connreq(), 0);
        assert_eq!(connreq(), ENOSPC.to_errno());
        // The other half is for the events of connections already made.
        assert_eq!(post_shutdown(), 0);
        assert_eq!(post_shutdown(), 0);
        let mut got = sys::kfi_eq_cm_entry::default();
        let mut event = 0u32;
        let mut seen = KVec::new();
        // SAFETY: Open EQ; `got` is valid for `cm_size` bytes; a request's
        // info read without KFI_PEEK is the reader's to free.
        unsafe {
            let out: *mut c_void = (&raw mut got).cast();
            while sys::kfi_eq_read(eq.as_ptr(), &mut event, out, cm_size, 0) == cm_size as isize {
                if event == sys::KFI_CONNREQ {
                    sys::kfi_freeinfo(got.info);
                }
                seen.push(event, GFP_KERNEL)?;
            }
            // The refused request left no overflow entry: the provider
            // refused its peer, nothing was lost.
            assert_eq!(
                sys::kfi_eq_read(eq.as_ptr(), &mut event, out, cm_size, 0),
                neg(EAGAIN)
            );
        }
        assert_eq!(
            &seen[..],
            &[
                sys::KFI_CONNREQ,
                sys::KFI_CONNREQ,
                sys::KFI_SHUTDOWN,
                sys::KFI_SHUTDOWN
            ]
        );
        // Read, the queue takes requests again.
        assert_eq!(connreq(), 0);
        Ok(())
    }

    #[test]
    fn counters_count_and_wait() -> Result {
        let t = Tree::new(THIS_MODULE)?;
        let mut a = sys::kfi_cntr_attr::default();
        // SAFETY: Open domain, valid attributes.
        let c = Owned::open(|o| unsafe {
            sys::kfi_cntr_open(t.domain.as_ptr(), &mut a, o, core::ptr::null_mut())
        })?;
        // SAFETY: An open counter.
        unsafe {
            let cp = c.as_ptr();
            assert_eq!(sys::kfi_cntr_add(cp, 3), 0);
            assert_eq!(sys::kfi_cntr_read(cp), 3);
            assert_eq!(sys::kfi_cntr_set(cp, 10), 0);
            assert_eq!(sys::kfi_cntr_adderr(cp, 2), 0);
            assert_eq!(sys::kfi_cntr_readerr(cp), 2);
            assert_eq!(sys::kfi_cntr_wait(cp, 10, 0), 0);
            assert_eq!(sys::kfi_cntr_wait(cp, 11, 20), ETIMEDOUT.to_errno());
            assert_eq!(sys::kfi_cntr_seterr(cp, 0), 0);
            assert_eq!(sys::kfi_cntr_readerr(cp), 0);
            // A counter that is not one reads as 0 and refuses changes.
            assert_eq!(sys::kfi_cntr_read(core::ptr::null_mut()), 0);
            assert_eq!(
                sys::kfi_cntr_add(t.tx.as_ptr().cast(), 1),
                EINVAL.to_errno()
            );
        }
        Ok(())
    }
}
