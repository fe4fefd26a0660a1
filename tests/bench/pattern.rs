// SPDX-License-Identifier: GPL-2.0

//! The data the benchmark moves: operation `i` of a run (`size` bytes, a
//! multiple of 8) holds in its 8-byte word at byte offset `j` the value
//! `(i + 1) << 24 | j`, so every operation carries its own bytes, no word
//! is zero (the value a destination is cleared to before a run) and data
//! that landed at the wrong operation or offset is caught.
//!
//! A run's operations are laid out one after the other: operation `i` is
//! bytes `i * size .. (i + 1) * size` of both the source and the
//! destination buffer, so nothing is reused within a run and the whole
//! destination is checked after it, outside the timed part.
//!
//! A ring run (`Shape::ring`, the kfi_ibverbs rows) reuses `slots`
//! operation slots round-robin: operation `i` uses slot `i % slots`. Its
//! first `slots` operations carry the pattern above; a later one, in
//! slot `s`, carries the value of operation `i` only in the words at
//! multiples of [`STAMP`] bytes (its *stamps*) and slot `s`'s first
//! operation's everywhere else. Before operation `i` takes a slot, the
//! run restamps the source slot for `i` and checks the stamps of the
//! destination slot against the operation that used it last
//! ([`stamp`], [`wait_stamped`]): a few words per operation, the same
//! work in the raw and the kfi run. After the run every byte of every
//! destination slot is checked against the last operation that used it
//! ([`first_bad_in`]).

use kernel::{
    prelude::*,
    time::{delay::fsleep, Delta},
};

use crate::run::{span_ns, Shape, Time};

const WORD: usize = 8;

/// Largest operation: the offset must fit below bit 24.
pub(crate) const MAX_SIZE: usize = 1 << 24;

fn word(op: usize, off: usize) -> u64 {
    (((op as u64) + 1) << 24) | off as u64
}

fn valid(size: usize) -> Result {
    if size == 0 || size % WORD != 0 || size > MAX_SIZE {
        return Err(EINVAL);
    }
    Ok(())
}

/// Fills `buf` with the pattern of consecutive `size`-byte operations.
pub(crate) fn fill(buf: &mut [u8], size: usize) -> Result {
    valid(size)?;
    for (op, o) in buf.chunks_exact_mut(size).enumerate() {
        for (w, c) in o.chunks_exact_mut(WORD).enumerate() {
            c.copy_from_slice(&word(op, w * WORD).to_ne_bytes());
        }
    }
    Ok(())
}

/// Where `buf` first differs from the pattern of `size`-byte operations
/// (`None`: it matches; a partial last operation never matches).
pub(crate) fn first_bad(buf: &[u8], size: usize) -> Option<usize> {
    if valid(size).is_err() || buf.len() % size != 0 {
        return Some(0);
    }
    for (op, o) in buf.chunks_exact(size).enumerate() {
        for (w, c) in o.chunks_exact(WORD).enumerate() {
            let mut a = [0u8; WORD];
            a.copy_from_slice(c);
            if u64::from_ne_bytes(a) != word(op, w * WORD) {
                return Some(op * size + w * WORD);
            }
        }
    }
    None
}

/// Bytes between the stamps of a slot: less than the smallest packet of
/// a soft RDMA device, so an operation that misses one is caught.
pub(crate) const STAMP: usize = 256;

/// The word at byte `off` of operation `op` in slot `slot` of a ring run.
fn ring_word(op: usize, slot: usize, off: usize) -> u64 {
    if off % STAMP == 0 {
        word(op, off)
    } else {
        word(slot, off)
    }
}

/// Where the bytes of `buf` (a run's destination, `sh.total()` bytes)
/// first differ from what its run left there: in each slot, the pattern
/// of the last operation that used it (`None`: they match).
pub(crate) fn first_bad_in(buf: &[u8], sh: Shape) -> Option<usize> {
    let slots = sh.slots();
    if valid(sh.size).is_err() || slots == 0 || Some(buf.len()) != sh.total().ok() {
        return Some(0);
    }
    for (s, o) in buf.chunks_exact(sh.size).enumerate() {
        // The last of `s, s + slots, ...` below `iters`.
        let Some(after) = sh.iters.checked_sub(s + 1) else {
            return Some(s * sh.size);
        };
        let last = after / slots * slots + s;
        for (w, c) in o.chunks_exact(WORD).enumerate() {
            let mut a = [0u8; WORD];
            a.copy_from_slice(c);
            if u64::from_ne_bytes(a) != ring_word(last, s, w * WORD) {
                return Some(s * sh.size + w * WORD);
            }
        }
    }
    None
}

/// The stamps of `size` bytes at `slot`, as a word pointer and the number
/// of stamps.
fn stamps(slot: *const u8, size: usize) -> Result<(*const u64, usize)> {
    valid(size)?;
    if slot as usize % WORD != 0 {
        return Err(EINVAL);
    }
    Ok((slot.cast(), size.div_ceil(STAMP)))
}

/// Writes the stamps of operation `op` into the `size`-byte slot at
/// `slot`. Process context.
///
/// # Safety
///
/// `slot` is `size` bytes of writable memory that no operation in flight
/// reads or writes.
unsafe fn stamp(slot: *mut u8, size: usize, op: usize) -> Result {
    let (w, n) = stamps(slot, size)?;
    for k in 0..n {
        let off = k * STAMP;
        // SAFETY: `off` lies in the slot (`n` stamps of `size` bytes) and
        // is a multiple of the word size from an aligned start; nothing
        // else uses the slot (the caller's contract).
        unsafe { w.cast_mut().add(off / WORD).write_volatile(word(op, off)) };
    }
    Ok(())
}

/// Waits until the stamps of the `size`-byte slot at `slot` are
/// operation `op`'s: at once for data a completion says has landed; an
/// RDMA write's completion may come before its data is placed at the
/// target (iWARP), so its data gets `ms` milliseconds. `EBADMSG` if they
/// never are. Process context.
///
/// # Safety
///
/// `slot` is `size` bytes of readable memory, written meanwhile at most
/// by the operation `op` (by the device).
unsafe fn wait_stamped(slot: *const u8, size: usize, op: usize, ms: i64) -> Result {
    let (w, n) = stamps(slot, size)?;
    let t0 = Time::now();
    let mut k = 0;
    while k < n {
        let off = k * STAMP;
        // SAFETY: As in `stamp`; volatile: the device may write it.
        if unsafe { w.add(off / WORD).read_volatile() } == word(op, off) {
            k += 1;
            continue;
        }
        if span_ns(t0, &[Time::now()]) > ms.saturating_mul(1_000_000) {
            return Err(EBADMSG);
        }
        fsleep(Delta::from_micros(50));
    }
    Ok(())
}

/// How long an RDMA write's data may take to land after its completion.
const WRITE_LAND_MS: i64 = 2000;

/// Before send `i` of `sh` goes out of its slot `src` of the source (or
/// RDMA read `i` reads it at the target): the slot restamped for it when
/// it held another operation. Process context.
///
/// # Safety
///
/// `src` is the slot's `sh.size` bytes; the operation that used it last
/// has completed, and nothing else uses it.
pub(crate) unsafe fn before_send(sh: Shape, i: usize, src: *mut u8) -> Result {
    match sh.before(i) {
        // SAFETY: The caller's contract.
        Some(_) => unsafe { stamp(src, sh.size, i) },
        None => Ok(()),
    }
}

/// Before receive (or RDMA read, `placed`; else RDMA write) `i` of `sh`
/// takes its slot `dst` of the destination: the stamps of the operation
/// that used it last checked there. Process context.
///
/// # Safety
///
/// `dst` is the slot's `sh.size` bytes; the operation that used it last
/// has completed, and nothing else uses it (a write's data may still be
/// landing).
pub(crate) unsafe fn before_recv(sh: Shape, i: usize, dst: *const u8, placed: bool) -> Result {
    let ms = if placed { 0 } else { WRITE_LAND_MS };
    match sh.before(i) {
        // SAFETY: The caller's contract.
        Some(last) => unsafe { wait_stamped(dst, sh.size, last, ms) }.inspect_err(|_| {
            pr_err!(
                "bench: operation {} of {} B not in its slot before the slot's reuse\n",
                last,
                sh.size
            )
        }),
        None => Ok(()),
    }
}

/// A buffer of `len` bytes, zeroed (or filled with the pattern of
/// `size`-byte operations when `size` is given). vmalloc'd, for the raw
/// and the kfabric rows alike: pages that count references, as a storage
/// ULP's page-cache or bio pages do, so a provider may send them by
/// reference (a large kmalloc's pages count none).
pub(crate) fn buffer(len: usize, size: Option<usize>) -> Result<VVec<u8>> {
    let mut v = VVec::with_capacity(len, GFP_KERNEL)?;
    v.resize(len, 0, GFP_KERNEL)?;
    if let Some(s) = size {
        fill(&mut v, s)?;
    }
    Ok(v)
}

/// Shows that [`first_bad`] catches what it must: right bytes at the wrong
/// operation, one flipped bit, a destination nothing was written to.
pub(crate) fn self_check() -> Result {
    let size = 64;
    let mut b = buffer(4 * size, Some(size))?;
    let good = first_bad(&b, size).is_none();
    let (head, tail) = b.split_at_mut(2 * size);
    head[size..].swap_with_slice(&mut tail[..size]);
    let swapped = first_bad(&b, size) == Some(size);
    fill(&mut b, size)?;
    b[3 * size + 13] ^= 1;
    let flipped = first_bad(&b, size) == Some(3 * size + 8);
    b.fill(0);
    let cleared = first_bad(&b, size) == Some(0);
    if !(good && swapped && flipped && cleared) {
        return Err(EINVAL);
    }
    ring_self_check()
}

/// Shows that the ring checks catch what they must: a slot whose last
/// operation did not land (an older one's stamps), a stamp never written,
/// and accept the slots as a run leaves them.
fn ring_self_check() -> Result {
    let size = 2 * STAMP;
    let sh = Shape {
        size,
        iters: 5,
        win: 1,
        ring: true,
    };
    // Two slots: operations 0, 2, 4 in slot 0, 1 and 3 in slot 1.
    let mut b = buffer(2 * size, Some(size))?;
    let p = b.as_mut_ptr();
    // SAFETY: Both slots lie in `b`, which nothing else uses.
    let (ok_old, bad_old) = unsafe {
        stamp(p, size, 2)?;
        let ok = wait_stamped(p, size, 2, 0).is_ok();
        (ok, wait_stamped(p, size, 4, 0).is_err())
    };
    // SAFETY: As above.
    unsafe {
        stamp(p, size, 4)?;
        stamp(p.add(size), size, 3)?;
    }
    let whole = first_bad_in(&b, sh).is_none();
    b[STAMP] ^= 1;
    let lost = first_bad_in(&b, sh) == Some(STAMP);
    b[STAMP] ^= 1;
    // SAFETY: As above.
    unsafe { stamp(p.add(size), size, 1)? };
    let stale = first_bad_in(&b, sh) == Some(size);
    if ok_old && bad_old && whole && lost && stale {
        Ok(())
    } else {
        Err(EINVAL)
    }
}
