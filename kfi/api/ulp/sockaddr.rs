// SPDX-License-Identifier: GPL-2.0

//! Socket addresses ULPs hand the C ABI (connect, AV insert): the C side
//! reads as many bytes as the family names, so the slice must hold them.

use kernel::{
    bindings::{sockaddr_in, sockaddr_in6, AF_INET, AF_INET6},
    prelude::*,
};

/// Checks that `addr` holds a whole IPv4 or IPv6 socket address: its
/// length by family, `EINVAL` if it is short or of another family.
pub(crate) fn checked_len(addr: &[u8]) -> Result<usize> {
    let family = addr
        .get(..2)
        .map(|f| u32::from(u16::from_ne_bytes([f[0], f[1]])))
        .ok_or(EINVAL)?;
    let need = match family {
        AF_INET => size_of::<sockaddr_in>(),
        AF_INET6 => size_of::<sockaddr_in6>(),
        _ => return Err(EINVAL),
    };
    if addr.len() < need {
        return Err(EINVAL);
    }
    Ok(need)
}
