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

use kernel::prelude::*;

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

/// A buffer of `len` bytes, zeroed (or filled with the pattern of
/// `size`-byte operations when `size` is given).
pub(crate) fn buffer(len: usize, size: Option<usize>) -> Result<KVVec<u8>> {
    let mut v = KVVec::with_capacity(len, GFP_KERNEL)?;
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
    if good && swapped && flipped && cleared {
        Ok(())
    } else {
        Err(EINVAL)
    }
}
