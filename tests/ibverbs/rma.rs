// SPDX-License-Identifier: GPL-2.0

//! Regions, RMA, counters, atomics, delivery completion and the read depth.

use crate::common::*;
use crate::device;
use crate::kfi::{
    kfi_sys as sys,
    ulp::{CmEvent, Cq, CqError, Domain, Endpoint},
};
use kernel::prelude::*;

/// A domain registers before its first connection (over its own
/// registration link) and after it; RDMA reads and writes go through
/// either region with the device checking rights, and a write with
/// remote CQ data completes at the target after the data is placed. A
/// domain that only registered closes cleanly.
pub(crate) fn regions_take_rdma_before_and_after_connecting() -> Result {
    let s = side(c"7621")?;
    {
        let lone = s.fabric.domain(s.src.entry())?;
        let (mut b0, mut b1) = (zeroed(4096)?, zeroed(8192)?);
        // SAFETY: The region is dropped by the end of the case, not leaked.
        let a = unsafe { lone.register(&mut b0, sys::KFI_REMOTE_WRITE, 0) }?;
        // SAFETY: The region is dropped by the end of the case, not leaked.
        let c = unsafe { lone.register(&mut b1[100..], sys::KFI_REMOTE_READ, 0) }?;
        assert_ne!(a.key(), c.key());
    }
    let d = s.fabric.domain(s.src.entry())?;
    let mut early = zeroed(4096)?;
    let early_at = addr_of(&early, 0);
    // SAFETY: The region is dropped by the end of the case, not leaked.
    let early_mr = unsafe { d.register(&mut early, sys::KFI_REMOTE_WRITE, 0) }?;
    let eq = s.fabric.eq(16)?;
    let _pep = s.fabric.listen(s.src.entry(), &eq)?;
    let (ccq, scq) = (d.cq(64)?, d.cq(64)?);
    let cep = endpoint(&d, s.dst.entry(), &ccq, &eq)?;
    cep.connect(&[])?;
    let sep = serve(&d, &eq, &scq, &[])?;
    // 10 pages, not page-aligned: the region covers 11.
    let mut target = zeroed(10 * 4096 + 100)?;
    let base = addr_of(&target, 100);
    let t = &mut target[100..];
    // SAFETY: The region is dropped by the end of the case, not leaked.
    let mr = unsafe { d.register(t, sys::KFI_REMOTE_READ | sys::KFI_REMOTE_WRITE, 0) }?;
    let src = pattern(10 * 4096, 11)?;
    // SAFETY: The buffers outlive the completions read below.
    unsafe { cep.write(&src[..5000], base + 3, mr.key(), 1, 0)? };
    assert_eq!(ccq.sread(WAIT_MS).map_err(|e| e.errno())?.context, 1);
    let mut back = zeroed(5000)?;
    // SAFETY: `back` outlives the read's completion, read just below.
    unsafe { cep.read(&mut back, base + 3, mr.key(), 2)? };
    let c = ccq.sread(WAIT_MS).map_err(|e| e.errno())?;
    assert_eq!((c.context, c.len), (2, 5000));
    assert!(back[..] == src[..5000]);
    // Remote CQ data: the target's completion, after the bytes.
    // SAFETY: `src` outlives the write's completion, read below.
    unsafe {
        cep.write(
            &src[..64],
            base + 40_000,
            mr.key(),
            3,
            sys::KFI_REMOTE_CQ_DATA,
        )?
    };
    assert_eq!(ccq.sread(WAIT_MS).map_err(|e| e.errno())?.context, 3);
    let r = scq.sread(WAIT_MS).map_err(|e| e.errno())?;
    assert!(r.flags & sys::KFI_REMOTE_WRITE != 0);
    // The region registered before any connection takes a write.
    // SAFETY: `src` outlives the write's completion, read below.
    unsafe { cep.write(&src[..4096], early_at, early_mr.key(), 4, 0)? };
    assert_eq!(ccq.sread(WAIT_MS).map_err(|e| e.errno())?.context, 4);
    // Read back through the later region's connection: the write was
    // placed (iWARP acknowledges writes only by what follows them).
    let mut probe = zeroed(8)?;
    // SAFETY: `probe` outlives the read's completion, read below.
    unsafe { cep.read(&mut probe, base + 3, mr.key(), 5)? };
    assert_eq!(ccq.sread(WAIT_MS).map_err(|e| e.errno())?.context, 5);
    drop(sep);
    drop(mr);
    drop(early_mr);
    assert!(early[..] == src[..4096]);
    assert!(target[103..5103] == src[..5000]);
    assert!(target[40_100..40_164] == src[..64]);
    assert!(target[..103].iter().all(|&b| b == 0xee));
    Ok(())
}

/// A write into a read-only region fails at the device: nothing is
/// written, and (RDMA semantics) the connection is over: what follows
/// flushes or is refused, and both endpoints hear of the end on their EQ
/// (on RoCE no disconnection comes by itself: both QPs are in the error
/// state, and each side ends its connection when its receives flushed).
pub(crate) fn rma_access_error_ends_the_connection() -> Result {
    with_pair_eq(c"7622", |d, cep, sep, ccq, _scq, eq| {
        let mut ro = zeroed(4096)?;
        let at = addr_of(&ro, 0);
        // SAFETY: The region is dropped by the end of the case, not leaked.
        let mr = unsafe { d.register(&mut ro, sys::KFI_REMOTE_READ, 0) }?;
        let data = pattern(64, 3)?;
        // SAFETY: The buffers outlive the completions read below.
        unsafe { cep.write(&data, at, mr.key(), 1, 0)? };
        // RoCE and InfiniBand report the write failed (the target's
        // NAK); iWARP acknowledges no write, so its write completes
        // once sent and the error shows as the end of the connection.
        match ccq.sread(WAIT_MS) {
            Err(CqError::Failed { context, err, .. }) => {
                assert_eq!(context, 1);
                assert!(err == EACCES || err == EIO);
            }
            Ok(c) if c.context == 1 => {}
            _ => return Err(EPROTO),
        }
        let mut back = [0u8; 8];
        // SAFETY: `back` outlives the read's completion, read below if posted.
        if unsafe { cep.read(&mut back, at, mr.key(), 2) }.is_ok() {
            assert!(matches!(ccq.sread(WAIT_MS), Err(CqError::Failed { .. })));
        }
        drop(mr);
        assert!(ro.iter().all(|&b| b == 0xee));
        let (mut client_ended, mut server_ended) = (false, false);
        for _ in 0..6 {
            if client_ended && server_ended {
                break;
            }
            match eq.sread(WAIT_MS) {
                Ok(CmEvent::Shutdown { fid } | CmEvent::Failed { fid, .. }) => {
                    client_ended |= cep.is(fid);
                    server_ended |= sep.is(fid);
                }
                Ok(_) => {}
                Err(e) => {
                    pr_err!("kfi_ibverbs test: the end of the connection: {e:?}\n");
                    break;
                }
            }
        }
        assert!(client_ended && server_ended);
        Ok(())
    })
}

/// A counter counts what the endpoint completes, errors included: a
/// write into a read-only region counts as an error where the device
/// reports it (RoCE), as a success where it cannot (iWARP writes are
/// not acknowledged). A peer's one-sided accesses never reach the
/// provider, so counters for them are refused (`EOPNOTSUPP`), and a
/// counter for no kind is `EINVAL`.
pub(crate) fn counters_count_failures_and_refuse_a_peers_kinds() -> Result {
    let s = step("side", side(c"7637"))?;
    let d = s.fabric.domain(s.src.entry())?;
    let eq = s.fabric.eq(16)?;
    let _pep = s.fabric.listen(s.src.entry(), &eq)?;
    let (ccq, scq) = (d.cq(16)?, d.cq(16)?);
    let writes = d.cntr()?;
    let cep = d.endpoint(s.dst.entry())?;
    cep.bind_cq(&ccq, sys::KFI_TRANSMIT | sys::KFI_RECV)?;
    cep.bind_eq(&eq)?;
    assert_eq!(
        cep.bind_cntr(&writes, sys::KFI_REMOTE_WRITE),
        Err(EOPNOTSUPP)
    );
    assert_eq!(
        cep.bind_cntr(&writes, sys::KFI_REMOTE_READ),
        Err(EOPNOTSUPP)
    );
    assert_eq!(cep.bind_cntr(&writes, 0), Err(EINVAL));
    step("bind", cep.bind_cntr(&writes, sys::KFI_WRITE))?;
    cep.enable()?;
    cep.connect(&[])?;
    let _sep = serve(&d, &eq, &scq, &[])?;
    let mut ro = zeroed(4096)?;
    let at = addr_of(&ro, 0);
    // SAFETY: The region is dropped by the end of the case, not leaked.
    let mr = step("register", unsafe {
        d.register(&mut ro, sys::KFI_REMOTE_READ, 0)
    })?;
    let data = pattern(64, 5)?;
    // SAFETY: `data` outlives the completion read below.
    step("write", unsafe { cep.write(&data, at, mr.key(), 1, 0) })?;
    let failed = match ccq.sread(WAIT_MS) {
        Err(CqError::Failed { context: 1, .. }) => true,
        Ok(c) if c.context == 1 => false,
        _ => return Err(EPROTO),
    };
    assert_eq!(
        (writes.read(), writes.errors()),
        (u64::from(!failed), u64::from(failed))
    );
    drop(mr);
    assert!(ro.iter().all(|&b| b == 0xee));
    Ok(())
}

/// Whether the device under test has atomics: rxe does, siw not.
pub(crate) fn device_has_atomics() -> bool {
    device().0 == c"rxe0"
}

/// Atomics as the device has them: advertised (`KFI_ATOMIC`) and
/// working on rxe, with the device's rights and alignment; refused
/// with `EOPNOTSUPP` and not advertised on siw.
pub(crate) fn atomics_as_the_device_has_them() -> Result {
    let s = side(c"7628")?;
    let offered = s.src.entry().caps & sys::KFI_ATOMIC != 0;
    assert_eq!(offered, device_has_atomics());
    drop(s);
    with_pair_domain(c"7629", |d, cep, _sep, ccq, _scq| {
        let mut words = zeroed(16)?;
        words[..8].copy_from_slice(&40u64.to_ne_bytes());
        let at = addr_of(&words, 0);
        let mr =
            // SAFETY: The region is dropped by the end of the case, not leaked.
            unsafe { d.register(&mut words, sys::KFI_REMOTE_READ | sys::KFI_REMOTE_WRITE, 0) }?;
        let mut old = 0u64;
        // SAFETY: The operand and result outlive the completion.
        let r = unsafe { cep.fetch_atomic_u64(sys::KFI_SUM, &2, &mut old, at, mr.key(), 1) };
        if !device_has_atomics() {
            assert_eq!(r, Err(EOPNOTSUPP));
            drop(mr);
            assert_eq!(words[..8], 40u64.to_ne_bytes());
            return Ok(());
        }
        r?;
        let c = ccq.sread(WAIT_MS).map_err(|e| e.errno())?;
        assert_eq!(c.context, 1);
        assert_eq!(
            c.flags & (sys::KFI_ATOMIC | sys::KFI_READ),
            sys::KFI_ATOMIC | sys::KFI_READ
        );
        assert_eq!(old, 40);
        // What the device cannot do is refused at the call.
        // SAFETY: Refused, so nothing is used after the calls.
        unsafe {
            assert_eq!(
                cep.fetch_atomic_u64(sys::KFI_MIN, &1, &mut old, at, mr.key(), 2),
                Err(EOPNOTSUPP)
            );
            assert_eq!(
                cep.fetch_atomic_u64(sys::KFI_SUM, &1, &mut old, at + 4, mr.key(), 3),
                Err(EINVAL)
            );
        }
        // A region without the read right takes no atomic (every
        // device atomic returns the old value): the device refuses
        // it, which ends the connection.
        let mut wo = zeroed(8)?;
        let wat = addr_of(&wo, 0);
        // SAFETY: The region is dropped by the end of the case, not leaked.
        let wmr = unsafe { d.register(&mut wo, sys::KFI_REMOTE_WRITE, 0) }?;
        // SAFETY: `old` outlives the atomic's completion, read just below.
        unsafe { cep.fetch_atomic_u64(sys::KFI_SUM, &1, &mut old, wat, wmr.key(), 4)? };
        match ccq.sread(WAIT_MS) {
            Err(CqError::Failed { context, err, .. }) => {
                assert_eq!(context, 4);
                assert!(err == EACCES || err == EIO);
            }
            _ => return Err(EPROTO),
        }
        drop(wmr);
        drop(mr);
        assert_eq!(words[..8], 42u64.to_ne_bytes());
        assert!(words[8..].iter().all(|&b| b == 0xee));
        assert!(wo.iter().all(|&b| b == 0xee));
        Ok(())
    })
}

/// Delivery completion: a send completes only once the peer placed it
/// in a receive (a plain one as soon as it is sent), and a write once
/// the flushing read after it returned, into a region without the
/// read right too (the read moves no byte).
pub(crate) fn delivery_completion_waits_for_placement() -> Result {
    with_pair_domain(c"7630", |d, cep, sep, ccq, scq| {
        // The context of the next completion; what came instead is printed.
        let done = |cq: &Cq<'_>, what: &str, want: usize| {
            let c = cq.sread(WAIT_MS).map_err(|e| {
                pr_err!("kfi_ibverbs test: {what}: {e:?}\n");
                e.errno()
            })?;
            if c.context != want {
                pr_err!("kfi_ibverbs test: {what}: {c:?}\n");
            }
            Ok::<usize, Error>(c.context)
        };
        // SAFETY: The buffers are static.
        step("send early", unsafe { cep.send(b"early", 1, 0) })?;
        assert_eq!(done(ccq, "early sent", 1)?, 1);
        // SAFETY: The buffer is static.
        step("send for delivery", unsafe {
            cep.send(b"placed?", 2, sys::KFI_DELIVERY_COMPLETE)
        })?;
        // Nothing may complete while no receive is posted: not the
        // delivery, and no error either.
        let before = ccq.sread(500);
        if !matches!(before, Err(CqError::Queue(e)) if e == ETIMEDOUT) {
            pr_err!("kfi_ibverbs test: before any receive: {before:?}\n");
        }
        assert!(matches!(before, Err(CqError::Queue(e)) if e == ETIMEDOUT));
        let (mut a, mut b) = ([0u8; 8], [0u8; 8]);
        // SAFETY: The buffers outlive the completions read below.
        step("post receives", unsafe {
            sep.recv(&mut a, 3).and_then(|()| sep.recv(&mut b, 4))
        })?;
        assert_eq!(done(scq, "receive 3", 3)?, 3);
        assert_eq!(done(scq, "receive 4", 4)?, 4);
        assert_eq!(done(ccq, "delivery completion", 2)?, 2);
        assert_eq!((&a[..5], &b[..7]), (&b"early"[..], &b"placed?"[..]));
        // Writes for delivery and commit into a write-only region.
        let mut wo = zeroed(8192)?;
        let at = addr_of(&wo, 0);
        // SAFETY: The region is dropped by the end of the case, not leaked.
        let mr = step("register", unsafe {
            d.register(&mut wo, sys::KFI_REMOTE_WRITE, 0)
        })?;
        let src = pattern(6000, 4)?;
        for (i, flags) in [sys::KFI_DELIVERY_COMPLETE, sys::KFI_COMMIT_COMPLETE]
            .into_iter()
            .enumerate()
        {
            // SAFETY: `src` outlives the completion.
            step("write", unsafe {
                cep.write(&src, at + i as u64 * 100, mr.key(), 10 + i, flags)
            })?;
            assert_eq!(done(ccq, "write completion", 10 + i)?, 10 + i);
            // SAFETY: Read while the region is still registered: the
            // completion says the bytes are in place.
            let placed =
                unsafe { core::slice::from_raw_parts((at as usize + i * 100) as *const u8, 6000) };
            if placed != &src[..] {
                pr_err!("kfi_ibverbs test: write {i} completed before its bytes were placed\n");
            }
            assert!(placed == &src[..]);
        }
        drop(mr);
        Ok(())
    })
}

/// Writes for delivery completion while the target is busy sending: the
/// flushing read after each arrives while the target's transmitter has
/// frames of a long message to send, so the device queues it before
/// answering (siw answers an empty read so with stale bytes, see
/// ibverbs.rst). Every write completes without error with its bytes in
/// place, and the message arrives whole. The active side writes, then
/// the passive one: each reads the flush region the other named in its
/// private data.
pub(crate) fn flushed_writes_while_the_target_sends() -> Result {
    // Frames for all the writes' time: as long a message as the device
    // takes, up to 1 MiB.
    let len = max_msg()?.min(1 << 20);
    with_pair_domain(c"7639", |d, cep, sep, ccq, scq| {
        writes_while_receiving(d, (cep, ccq), (sep, scq), len)?;
        writes_while_receiving(d, (sep, scq), (cep, ccq), len)
    })
}

/// [`flushed_writes_while_the_target_sends`] one way: `(w, wcq)` writes
/// into a region of the domain `d` while it receives a `len`-byte
/// message that `(t, tcq)` sends.
fn writes_while_receiving(
    d: &Domain<'_>,
    (w, wcq): (&Endpoint<'_>, &Cq<'_>),
    (t, tcq): (&Endpoint<'_>, &Cq<'_>),
    len: usize,
) -> Result {
    const WRITES: usize = 32;
    const LEN: usize = 4096;
    let msg = pattern(len, 7)?;
    let mut got = zeroed(len)?;
    let mut wo = zeroed(WRITES * LEN)?;
    let at = addr_of(&wo, 0);
    // SAFETY: The region is dropped by the end of the case, not leaked.
    let mr = step("register", unsafe {
        d.register(&mut wo, sys::KFI_REMOTE_WRITE, 0)
    })?;
    let src = pattern(WRITES * LEN, 8)?;
    // SAFETY: `got` and `msg` outlive the completions read below.
    step("message", unsafe {
        w.recv(&mut got, 1).and_then(|()| t.send(&msg, 2, 0))
    })?;
    let mut received = false;
    for (i, piece) in src.chunks(LEN).enumerate() {
        // SAFETY: `src` outlives the completion.
        step("write", unsafe {
            w.write(
                piece,
                at + (i * LEN) as u64,
                mr.key(),
                10 + i,
                sys::KFI_DELIVERY_COMPLETE,
            )
        })?;
        loop {
            let c = wcq.sread(WAIT_MS).map_err(|e| {
                pr_err!("kfi_ibverbs test: write {i}: {e:?}\n");
                e.errno()
            })?;
            if c.context == 1 && !received {
                received = true;
                continue;
            }
            if c.context != 10 + i {
                pr_err!("kfi_ibverbs test: write {i}: {c:?}\n");
                return Err(EPROTO);
            }
            break;
        }
    }
    if !received {
        let c = step(
            "message received",
            wcq.sread(WAIT_MS).map_err(|e| e.errno()),
        )?;
        assert_eq!(c.context, 1);
    }
    let c = step("message sent", tcq.sread(WAIT_MS).map_err(|e| e.errno()))?;
    assert_eq!(c.context, 2);
    drop(mr);
    assert!(got[..] == msg[..]);
    assert!(wo[..] == src[..]);
    Ok(())
}

/// Many reads (and, where the device has them, atomics) outstanding
/// at once: 24 reads of 16 KiB (4 requests each on siw, whose reads
/// take one local piece; 1 on rxe) and on rxe 8 fetch-adds among
/// them, all posted before any completion is read. That is more
/// read-type requests than the connection's negotiated depth (at
/// most 16): the provider holds the rest back and posts them as
/// earlier ones complete. Every operation completes exactly once,
/// with its own context, its length and flags; every byte read is the
/// region's, and each fetch-add returns the word as the ones before
/// it left it (RC executes them in order).
pub(crate) fn many_reads_and_atomics_in_flight() -> Result {
    const N: usize = 24;
    const LEN: usize = 16 * 1024;
    const ADDS: usize = 8;
    const READ_CTX: usize = 100;
    const ADD_CTX: usize = 200;
    with_pair_domain(c"7638", |d, cep, _sep, ccq, _scq| {
        let want = pattern(N * LEN, 38)?;
        let mut src = pattern(N * LEN, 38)?;
        let at = addr_of(&src, 0);
        // SAFETY: The region is dropped by the end of the case, not leaked.
        let mr = step("register", unsafe {
            d.register(&mut src, sys::KFI_REMOTE_READ, 0)
        })?;
        let mut words = zeroed(8)?;
        words.copy_from_slice(&40u64.to_ne_bytes());
        let wat = addr_of(&words, 0);
        // SAFETY: The region is dropped by the end of the case, not leaked.
        let wmr = step("register words", unsafe {
            d.register(&mut words, sys::KFI_REMOTE_READ | sys::KFI_REMOTE_WRITE, 0)
        })?;
        let adds = if device_has_atomics() { ADDS } else { 0 };
        let mut dst = zeroed(N * LEN)?;
        let mut olds = [0u64; ADDS];
        let mut added = 0;
        for (i, chunk) in dst.chunks_mut(LEN).enumerate() {
            let from = at + (i * LEN) as u64;
            // SAFETY: `dst` outlives every completion, all read below.
            step("read", unsafe {
                cep.read(chunk, from, mr.key(), READ_CTX + i)
            })?;
            if added < adds && i % 3 == 1 {
                // SAFETY: `olds` outlives the completion, read below.
                step("fetch-add", unsafe {
                    cep.fetch_atomic_u64(
                        sys::KFI_SUM,
                        &1,
                        &mut olds[added],
                        wat,
                        wmr.key(),
                        ADD_CTX + added,
                    )
                })?;
                added += 1;
            }
        }
        assert_eq!(added, adds);
        let (mut reads_seen, mut adds_seen) = ([false; N], [false; ADDS]);
        for _ in 0..N + adds {
            let c = ccq.sread(WAIT_MS).map_err(|e| {
                pr_err!("kfi_ibverbs test: read or atomic completion: {e:?}\n");
                e.errno()
            })?;
            if let Some(i) = c.context.checked_sub(READ_CTX).filter(|&i| i < N) {
                assert!(!reads_seen[i]);
                reads_seen[i] = true;
                assert_eq!(c.len, LEN);
                assert_eq!(
                    c.flags & (sys::KFI_RMA | sys::KFI_READ | sys::KFI_ATOMIC),
                    sys::KFI_RMA | sys::KFI_READ
                );
            } else if let Some(k) = c.context.checked_sub(ADD_CTX).filter(|&k| k < adds) {
                assert!(!adds_seen[k]);
                adds_seen[k] = true;
                assert_eq!(
                    c.flags & (sys::KFI_ATOMIC | sys::KFI_READ),
                    sys::KFI_ATOMIC | sys::KFI_READ
                );
            } else {
                pr_err!("kfi_ibverbs test: unknown context {}\n", c.context);
                return Err(EPROTO);
            }
        }
        // Nothing completes twice.
        assert!(matches!(ccq.sread(200), Err(CqError::Queue(e)) if e == ETIMEDOUT));
        drop(wmr);
        drop(mr);
        for (i, (got, exp)) in dst.chunks(LEN).zip(want.chunks(LEN)).enumerate() {
            if got != exp {
                pr_err!("kfi_ibverbs test: read {i} brought other bytes\n");
                return Err(EIO);
            }
        }
        for (k, &old) in olds[..adds].iter().enumerate() {
            assert_eq!(old, 40 + k as u64);
        }
        assert_eq!(words[..8], (40 + adds as u64).to_ne_bytes());
        Ok(())
    })
}
