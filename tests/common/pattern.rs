// SPDX-License-Identifier: GPL-2.0

//! Test data for the end-to-end suites: a byte pattern that differs per
//! seed, so data that lands in the wrong place or from the wrong
//! operation is caught. Included with `#[path]`.

use kernel::prelude::*;

/// `len` bytes of a pattern that differs per `seed`, in vmalloc memory.
pub(crate) fn pattern(len: usize, seed: u8) -> Result<KVVec<u8>> {
    let mut v = KVVec::with_capacity(len, GFP_KERNEL)?;
    let mut x = u32::from(seed) | 1;
    for _ in 0..len {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        v.push((x >> 16) as u8, GFP_KERNEL)?;
    }
    Ok(v)
}
