// SPDX-License-Identifier: GPL-2.0

//! The arithmetic of kfi_sockets atomics: which datatypes and operations
//! work and what each does to one element. Pure functions, any context;
//! the target serializes their use (mr.rs).
//!
//! Elements are 32 or 64 bits. In memory they are native endian; on the
//! wire little endian ([`to_wire`] converts a buffer either way).

use kernel::prelude::*;

use crate::kfi::kfi_sys as sys;

/// Most bytes of target operands in one atomic operation.
pub(crate) const ATOMIC_MAX: usize = 256;

/// The size of an element of `datatype`, if supported.
pub(crate) fn elem_size(datatype: u32) -> Option<usize> {
    match datatype {
        sys::KFI_INT32 | sys::KFI_UINT32 => Some(4),
        sys::KFI_INT64 | sys::KFI_UINT64 => Some(8),
        _ => None,
    }
}

fn signed(datatype: u32) -> bool {
    matches!(datatype, sys::KFI_INT32 | sys::KFI_INT64)
}

/// Whether `op` takes a compare operand.
pub(crate) fn has_compare(op: u32) -> bool {
    (sys::KFI_CSWAP..sys::KFI_ATOMIC_OP_LAST).contains(&op)
}

/// Whether `op` is one this provider does.
pub(crate) fn supported(op: u32) -> bool {
    op < sys::KFI_ATOMIC_OP_LAST
}

/// Converts each `size`-byte element of `b` between native and little
/// endian (the same swap both ways; nothing on little-endian machines).
pub(crate) fn to_wire(b: &mut [u8], size: usize) {
    if cfg!(target_endian = "little") {
        return;
    }
    for e in b.chunks_exact_mut(size) {
        e.reverse();
    }
}

fn load(b: &[u8], little: bool) -> u64 {
    let mut v = [0u8; 8];
    v[..b.len()].copy_from_slice(b);
    if b.len() == 4 {
        let mut w = [0u8; 4];
        w.copy_from_slice(b);
        return u64::from(if little {
            u32::from_le_bytes(w)
        } else {
            u32::from_ne_bytes(w)
        });
    }
    if little {
        u64::from_le_bytes(v)
    } else {
        u64::from_ne_bytes(v)
    }
}

fn store(b: &mut [u8], v: u64, little: bool) {
    if b.len() == 4 {
        let w = v as u32;
        b.copy_from_slice(&if little {
            w.to_le_bytes()
        } else {
            w.to_ne_bytes()
        });
    } else {
        b.copy_from_slice(&if little {
            v.to_le_bytes()
        } else {
            v.to_ne_bytes()
        });
    }
}

/// `a` and `b` as ordered by the datatype (signed or unsigned, 32 or 64
/// bits).
fn order(a: u64, b: u64, size: usize, signed: bool) -> core::cmp::Ordering {
    match (signed, size) {
        (true, 4) => (a as u32 as i32).cmp(&(b as u32 as i32)),
        (true, _) => (a as i64).cmp(&(b as i64)),
        _ => a.cmp(&b),
    }
}

/// The new target value for `op` given target `t`, source `s` and compare
/// value `c`.
fn combine(op: u32, t: u64, s: u64, c: u64, size: usize, signed: bool) -> u64 {
    use core::cmp::Ordering::*;
    let ord = |a, b| order(a, b, size, signed);
    let swap_if = |cond: bool| if cond { s } else { t };
    match op {
        sys::KFI_MIN => swap_if(ord(s, t) == Less),
        sys::KFI_MAX => swap_if(ord(s, t) == Greater),
        sys::KFI_SUM => t.wrapping_add(s),
        sys::KFI_PROD => t.wrapping_mul(s),
        sys::KFI_LOR => u64::from((t != 0) || (s != 0)),
        sys::KFI_LAND => u64::from((t != 0) && (s != 0)),
        sys::KFI_BOR => t | s,
        sys::KFI_BAND => t & s,
        sys::KFI_LXOR => u64::from((t != 0) ^ (s != 0)),
        sys::KFI_BXOR => t ^ s,
        sys::KFI_ATOMIC_WRITE => s,
        sys::KFI_CSWAP => swap_if(c == t),
        sys::KFI_CSWAP_NE => swap_if(c != t),
        sys::KFI_CSWAP_LE => swap_if(ord(c, t) != Greater),
        sys::KFI_CSWAP_LT => swap_if(ord(c, t) == Less),
        sys::KFI_CSWAP_GE => swap_if(ord(c, t) != Less),
        sys::KFI_CSWAP_GT => swap_if(ord(c, t) == Greater),
        sys::KFI_MSWAP => (s & c) | (t & !c),
        // KFI_ATOMIC_READ and anything else leave the target alone.
        _ => t,
    }
}

/// Applies `op` on `datatype` elementwise: `target` (native endian) is
/// updated from `src` and `cmp` (wire order; `cmp` empty unless the op has
/// a compare operand) and its old values go to `old` (wire order). All
/// slices hold the same whole number of elements (`EINVAL` otherwise).
pub(crate) fn apply(
    datatype: u32,
    op: u32,
    target: &mut [u8],
    src: &[u8],
    cmp: &[u8],
    old: &mut [u8],
) -> Result {
    let size = elem_size(datatype).ok_or(EINVAL)?;
    let n = target.len();
    let cmp_ok = if has_compare(op) {
        cmp.len() == n
    } else {
        cmp.is_empty()
    };
    if !supported(op)
        || n.checked_rem(size) != Some(0)
        || src.len() != n
        || old.len() != n
        || !cmp_ok
    {
        return Err(EINVAL);
    }
    let sig = signed(datatype);
    for (i, t) in target.chunks_exact_mut(size).enumerate() {
        let at = i * size;
        let tv = load(t, false);
        let sv = load(&src[at..at + size], true);
        let cv = if cmp.is_empty() {
            0
        } else {
            load(&cmp[at..at + size], true)
        };
        store(&mut old[at..at + size], tv, true);
        store(t, combine(op, tv, sv, cv, size, sig), false);
    }
    Ok(())
}
