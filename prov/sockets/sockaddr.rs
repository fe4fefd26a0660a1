// SPDX-License-Identifier: GPL-2.0

//! Socket addresses of kfi_sockets (`ksock.rs` re-exports [`SockAddr`]):
//! IPv4 and IPv6 as the kernel's `sockaddr_in`/`sockaddr_in6`, parsed from
//! the strings a ULP gives `kfi_getinfo` and checked when they come from
//! a peer. Any context: nothing here sleeps or calls the kernel.

use kernel::{bindings, prelude::*};

/// An IPv4 or IPv6 socket address.
#[derive(Clone, Copy)]
pub(crate) enum SockAddr {
    /// `struct sockaddr_in`.
    V4(bindings::sockaddr_in),
    /// `struct sockaddr_in6`.
    V6(bindings::sockaddr_in6),
}

impl SockAddr {
    /// The IPv4 address `a.b.c.d:port`.
    pub(crate) fn v4(ip: [u8; 4], port: u16) -> Self {
        Self::V4(bindings::sockaddr_in {
            sin_family: bindings::AF_INET as u16,
            sin_port: port.to_be(),
            sin_addr: bindings::in_addr {
                s_addr: u32::from_ne_bytes(ip),
            },
            ..Default::default()
        })
    }

    /// The IPv6 address `[ip]:port`.
    pub(crate) fn v6(ip: [u8; 16], port: u16) -> Self {
        let mut a = bindings::sockaddr_in6 {
            sin6_family: bindings::AF_INET6 as u16,
            sin6_port: port.to_be(),
            ..Default::default()
        };
        // Writing a union field is safe; every member views the same bytes.
        a.sin6_addr.in6_u.u6_addr8 = ip;
        Self::V6(a)
    }

    /// Parses a numeric host (`192.0.2.1`, `::1`, `fe80::1:2`) and a
    /// decimal port, as `kfi_getinfo` gets them (no name lookups in the
    /// kernel). Any context.
    pub(crate) fn parse(host: &[u8], port: &[u8]) -> Result<Self> {
        let port = parse_port(port)?;
        if host.contains(&b':') {
            Ok(Self::v6(parse_ipv6(host)?, port))
        } else {
            Ok(Self::v4(parse_ipv4(host)?, port))
        }
    }

    /// Reads a `sockaddr_in` or `sockaddr_in6` at `addr`, as long as its
    /// family field says.
    ///
    /// # Safety
    ///
    /// `addr` is valid for reads of the length its family names (two
    /// bytes for an unknown family).
    pub(crate) unsafe fn from_raw(addr: *const u8) -> Result<Self> {
        // SAFETY: At least the family field is readable (the contract).
        let family = u16::from_ne_bytes(unsafe { [*addr, *addr.add(1)] });
        let len = match u32::from(family) {
            bindings::AF_INET => size_of::<bindings::sockaddr_in>(),
            bindings::AF_INET6 => size_of::<bindings::sockaddr_in6>(),
            _ => return Err(EINVAL),
        };
        // SAFETY: Readable for the length of its family (the contract).
        Self::from_bytes(unsafe { core::slice::from_raw_parts(addr, len) })
    }

    /// Reads a `sockaddr_in` or `sockaddr_in6` from `bytes` (as kfabric
    /// addresses are passed), by its family field.
    pub(crate) fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let family =
            u16::from_ne_bytes([*bytes.first().ok_or(EINVAL)?, *bytes.get(1).ok_or(EINVAL)?]);
        match u32::from(family) {
            bindings::AF_INET if bytes.len() >= size_of::<bindings::sockaddr_in>() => {
                // SAFETY: Long enough; any bytes are a valid sockaddr_in.
                Ok(Self::V4(unsafe {
                    bytes
                        .as_ptr()
                        .cast::<bindings::sockaddr_in>()
                        .read_unaligned()
                }))
            }
            bindings::AF_INET6 if bytes.len() >= size_of::<bindings::sockaddr_in6>() => {
                // SAFETY: Long enough; any bytes are a valid sockaddr_in6.
                Ok(Self::V6(unsafe {
                    bytes
                        .as_ptr()
                        .cast::<bindings::sockaddr_in6>()
                        .read_unaligned()
                }))
            }
            _ => Err(EAFNOSUPPORT),
        }
    }

    /// The raw bytes of the address.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        let (p, n): (*const u8, usize) = match self {
            Self::V4(a) => (
                core::ptr::from_ref(a).cast(),
                size_of::<bindings::sockaddr_in>(),
            ),
            Self::V6(a) => (
                core::ptr::from_ref(a).cast(),
                size_of::<bindings::sockaddr_in6>(),
            ),
        };
        // SAFETY: `p` points to `n` bytes of `self`, borrowed as long.
        unsafe { core::slice::from_raw_parts(p, n) }
    }

    /// The port, host byte order.
    pub(crate) fn port(&self) -> u16 {
        match self {
            Self::V4(a) => u16::from_be(a.sin_port),
            Self::V6(a) => u16::from_be(a.sin6_port),
        }
    }

    /// The IP address as IPv6 bytes (IPv4 as `::ffff:a.b.c.d`, as a
    /// dual-stack socket sees an IPv4 peer).
    fn ip6(&self) -> [u8; 16] {
        match self {
            Self::V4(a) => {
                let mut b = [0u8; 16];
                b[10] = 0xff;
                b[11] = 0xff;
                b[12..].copy_from_slice(&a.sin_addr.s_addr.to_ne_bytes());
                b
            }
            // SAFETY: Every member of the union views the same 16 bytes.
            Self::V6(a) => unsafe { a.sin6_addr.in6_u.u6_addr8 },
        }
    }

    /// The address with only what names it: family, IP, port and, for
    /// IPv6, the scope. The bytes a peer may fill as it likes
    /// (the padding, `sin_zero`, and the flow label) are zero, so that two spellings of one
    /// address compare equal byte for byte, as RDM peers are filed and
    /// looked up.
    pub(crate) fn canonical(&self) -> Self {
        // An IPv4-mapped address (`::ffff:a.b.c.d`, as a dual-stack socket
        // reports an IPv4 peer) is filed as the IPv4 address it maps: one
        // peer, one form.
        if let Some(ip) = self.v4_mapped() {
            return Self::v4(ip, self.port());
        }
        match self {
            Self::V4(a) => Self::v4(a.sin_addr.s_addr.to_ne_bytes(), self.port()),
            Self::V6(a) => {
                let mut c = bindings::sockaddr_in6 {
                    sin6_family: bindings::AF_INET6 as u16,
                    sin6_port: a.sin6_port,
                    sin6_scope_id: a.sin6_scope_id,
                    ..Default::default()
                };
                c.sin6_addr = a.sin6_addr;
                Self::V6(c)
            }
        }
    }

    /// The IPv4 address an IPv4-mapped IPv6 address maps, if it is one.
    fn v4_mapped(&self) -> Option<[u8; 4]> {
        let b = self.ip6();
        match self {
            Self::V6(_) if b[..10] == [0u8; 10] && b[10] == 0xff && b[11] == 0xff => {
                Some([b[12], b[13], b[14], b[15]])
            }
            _ => None,
        }
    }

    /// Whether both addresses name the same IP (ports aside).
    pub(crate) fn same_ip(&self, other: &SockAddr) -> bool {
        self.ip6() == other.ip6()
    }

    /// Whether both addresses are on one host, as the per-host bounds
    /// count peers: the same [`Self::host`].
    pub(crate) fn same_host(&self, other: &SockAddr, v6_prefix: u32) -> bool {
        self.host(v6_prefix) == other.host(v6_prefix)
    }

    /// What names the host of this address: the same IPv4 address (mapped
    /// or not: both as `::ffff:a.b.c.d`, scope 0); for IPv6, the first
    /// `v6_prefix` bits (at most 128; the rest zero) and, for a link-local
    /// address, the scope (on another interface it is on another link;
    /// other addresses name one host whatever scope a caller wrote). An
    /// IPv6 host often has a whole /64 to pick addresses from, but a
    /// cluster's nodes often share one /64 too: the caller chooses. No
    /// IPv6 address but an IPv4-mapped one has the bytes of an IPv4 host
    /// (zeroing bits cannot make `::ffff:0:0/96` of another address).
    pub(crate) fn host(&self, v6_prefix: u32) -> ([u8; 16], u32) {
        if self.v4_ip().is_some() {
            return (self.ip6(), 0);
        }
        let mut ip = self.ip6();
        // fe80::/10.
        let link_local = ip[0] == 0xfe && ip[1] & 0xc0 == 0x80;
        let scope = if link_local { self.scope() } else { 0 };
        let bits = v6_prefix.min(128) as usize;
        for (i, b) in ip.iter_mut().enumerate() {
            let first = i * 8;
            if first + 8 <= bits {
                continue;
            }
            // The bits of this byte beyond the prefix are zeroed; `keep`
            // is below 8, so the shift does not overflow.
            let keep = bits.saturating_sub(first);
            *b &= !(0xffu8 >> keep);
        }
        (ip, scope)
    }

    /// The IPv4 address, of an IPv4 address or an IPv4-mapped IPv6 one.
    fn v4_ip(&self) -> Option<[u8; 4]> {
        match self {
            Self::V4(a) => Some(a.sin_addr.s_addr.to_ne_bytes()),
            Self::V6(_) => self.v4_mapped(),
        }
    }

    /// The IPv6 scope (interface) id, 0 for IPv4.
    fn scope(&self) -> u32 {
        match self {
            Self::V4(_) => 0,
            Self::V6(a) => a.sin6_scope_id,
        }
    }

    /// Whether the IP is the wildcard (`0.0.0.0`, `::`).
    pub(crate) fn ip_unspecified(&self) -> bool {
        match self {
            Self::V4(a) => a.sin_addr.s_addr == 0,
            Self::V6(_) => self.ip6() == [0u8; 16],
        }
    }

    /// The same address with port `port`.
    pub(crate) fn with_port(&self, port: u16) -> Self {
        let mut a = *self;
        match &mut a {
            Self::V4(v) => v.sin_port = port.to_be(),
            Self::V6(v) => v.sin6_port = port.to_be(),
        }
        a
    }

    pub(super) fn family(&self) -> c_int {
        match self {
            Self::V4(_) => bindings::AF_INET as c_int,
            Self::V6(_) => bindings::AF_INET6 as c_int,
        }
    }

    /// Pointer and length for the `kernel_*` calls, which do not write
    /// through it.
    pub(super) fn raw(&self) -> (*mut bindings::sockaddr_unsized, c_int) {
        let b = self.as_bytes();
        (b.as_ptr().cast_mut().cast(), b.len() as c_int)
    }
}

/// A decimal number below `limit`, without sign or spaces.
fn parse_dec(s: &[u8], limit: u32) -> Result<u32> {
    if s.is_empty() || s.len() > 5 {
        return Err(EINVAL);
    }
    let mut v: u32 = 0;
    for &c in s {
        if !c.is_ascii_digit() {
            return Err(EINVAL);
        }
        v = v * 10 + u32::from(c - b'0');
    }
    if v >= limit {
        return Err(EINVAL);
    }
    Ok(v)
}

fn parse_port(s: &[u8]) -> Result<u16> {
    Ok(parse_dec(s, 1 << 16)? as u16)
}

fn parse_ipv4(s: &[u8]) -> Result<[u8; 4]> {
    let mut out = [0u8; 4];
    let mut parts = s.split(|&c| c == b'.');
    for o in out.iter_mut() {
        *o = parse_dec(parts.next().ok_or(EINVAL)?, 256)? as u8;
    }
    if parts.next().is_some() {
        return Err(EINVAL);
    }
    Ok(out)
}

/// One group of up to four hex digits.
fn parse_hex16(s: &[u8]) -> Result<u16> {
    if s.is_empty() || s.len() > 4 {
        return Err(EINVAL);
    }
    let mut v: u16 = 0;
    for &c in s {
        let d = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            b'A'..=b'F' => c - b'A' + 10,
            _ => return Err(EINVAL),
        };
        v = (v << 4) | u16::from(d);
    }
    Ok(v)
}

/// Eight 16-bit groups, one run of zero groups written `::` at most.
fn parse_ipv6(s: &[u8]) -> Result<[u8; 16]> {
    let (head, tail): (&[u8], Option<&[u8]>) = match s.windows(2).position(|w| w == b"::") {
        Some(i) => (&s[..i], Some(&s[i + 2..])),
        None => (s, None),
    };
    let groups = |part: &[u8]| -> Result<KVec<u16>> {
        let mut v = KVec::new();
        if !part.is_empty() {
            for g in part.split(|&c| c == b':') {
                v.push(parse_hex16(g)?, GFP_ATOMIC)?;
            }
        }
        Ok(v)
    };
    let h = groups(head)?;
    let t = match tail {
        Some(t) => groups(t)?,
        None => KVec::new(),
    };
    let n = h.len() + t.len();
    if (tail.is_none() && n != 8) || (tail.is_some() && n > 7) {
        return Err(EINVAL);
    }
    let mut all = [0u16; 8];
    all[..h.len()].copy_from_slice(&h);
    all[8 - t.len()..].copy_from_slice(&t);
    let mut out = [0u8; 16];
    for (i, g) in all.iter().enumerate() {
        out[2 * i..2 * i + 2].copy_from_slice(&g.to_be_bytes());
    }
    Ok(out)
}
