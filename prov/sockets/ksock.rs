// SPDX-License-Identifier: GPL-2.0

//! Kernel TCP sockets, safely: the one place where kfi_sockets calls the
//! kernel's socket API (`sock_create_kern`, `kernel_*`, `sock_release`).
//!
//! Every call here may sleep: process context only.

use core::{
    mem::MaybeUninit,
    ptr::NonNull,
    sync::atomic::{AtomicI64, Ordering},
};
use kernel::{bindings, error::to_result, prelude::*};

// sock_setsockopt() is exported by net/core/sock.c but not in the kernel
// crate's bindings: its declaration is generated with the C glue's.
use crate::sock_sys::sock_setsockopt;

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

    /// Whether both addresses name the same IP (ports aside).
    pub(crate) fn same_ip(&self, other: &SockAddr) -> bool {
        self.ip6() == other.ip6()
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

    fn family(&self) -> c_int {
        match self {
            Self::V4(_) => bindings::AF_INET as c_int,
            Self::V6(_) => bindings::AF_INET6 as c_int,
        }
    }

    /// Pointer and length for the `kernel_*` calls, which do not write
    /// through it.
    fn raw(&self) -> (*mut bindings::sockaddr_unsized, c_int) {
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

/// A point in time after which a socket's waits fail with `ETIMEDOUT`:
/// one bound for a whole exchange (a handshake, a frame), however its
/// bytes trickle in, where the socket's own timeouts bound each call.
#[derive(Clone, Copy)]
pub(crate) struct Deadline(i64);

/// Monotonic nanoseconds (`ktime_get()`).
fn now_ns() -> i64 {
    // SAFETY: `ktime_get` has no preconditions and works in any context.
    unsafe { bindings::ktime_get() }
}

impl Deadline {
    /// `ms` milliseconds from now.
    pub(crate) fn after_ms(ms: u64) -> Self {
        Self::after_ms_from(Self(now_ns()), ms)
    }

    /// `ms` milliseconds after `start` (`start` itself as a point).
    pub(crate) fn after_ms_from(start: Self, ms: u64) -> Self {
        let ns = i64::try_from(ms.saturating_mul(1_000_000)).unwrap_or(i64::MAX);
        Self(start.0.saturating_add(ns).max(1))
    }

    /// Now, as a starting point for [`Self::after_ms_from`].
    pub(crate) fn now() -> Self {
        Self(now_ns())
    }

    /// The milliseconds left (at least 1), or `None` once it has passed.
    pub(crate) fn left_ms(self) -> Option<u32> {
        self.left_us()
            .map(|us| u32::try_from(us / 1000 + 1).unwrap_or(u32::MAX))
    }

    /// Whichever of `self` and `other` comes first.
    pub(crate) fn earlier(self, other: Self) -> Self {
        Self(self.0.min(other.0))
    }

    /// The microseconds left (at least 1), or `None` once it has passed.
    fn left_us(self) -> Option<i64> {
        let left = self.0.saturating_sub(now_ns());
        (left > 0).then(|| (left / 1000).saturating_add(1))
    }
}

/// A kernel TCP socket; released when dropped.
///
/// # Invariants
///
/// `sock` came from `sock_create_kern` or `kernel_accept` and is not
/// released. `rx_deadline`/`tx_deadline` hold a [`Deadline`]'s
/// nanoseconds, or 0 for none.
pub(crate) struct Socket {
    sock: NonNull<bindings::socket>,
    rx_deadline: AtomicI64,
    tx_deadline: AtomicI64,
}

/// A send of one buffer by page reference (`MSG_SPLICE_PAGES`) with the
/// given flags, which only a provider with the C glue for it can make
/// (`prov/sockets/splice.rs`): returns what `kernel_sendmsg` would.
pub(crate) type SendPages = fn(&Socket, &[u8], c_uint) -> c_int;

/// Whether a send may wait for room in the socket.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    /// Until the send deadline (`Socket::set_tx_deadline`): process
    /// context that may sleep for the peer.
    Deadline,
    /// Not at all: what the socket does not take now is left for later.
    No,
}

/// The direction a deadline bounds.
#[derive(Clone, Copy)]
enum Dir {
    Rx,
    Tx,
}

// SAFETY: Kernel sockets are used from any thread; the socket layer locks
// what it needs.
unsafe impl Send for Socket {}
// SAFETY: See `Send`; the `kernel_*` calls may run concurrently.
unsafe impl Sync for Socket {}

/// The network namespace sockets are created in.
///
/// # Invariants
///
/// NULL (the initial namespace, which lives forever) or a namespace the
/// ULP keeps alive while objects that use it are open (the contract of
/// `kfi_domain_attr.net`).
#[derive(Clone, Copy)]
pub(crate) struct NetNs(*mut bindings::net);

// SAFETY: Only passed to the socket layer, which may use a namespace from
// any thread.
unsafe impl Send for NetNs {}
// SAFETY: See `Send`.
unsafe impl Sync for NetNs {}

impl NetNs {
    /// The initial namespace.
    pub(crate) fn initial() -> Self {
        Self(core::ptr::null_mut())
    }

    /// The namespace of a `kfi_domain_attr.net` (NULL: the initial one).
    ///
    /// # Safety
    ///
    /// `net` is NULL or a namespace that stays alive while sockets made
    /// in it exist.
    pub(crate) unsafe fn from_raw(net: *mut bindings::net) -> Self {
        // INVARIANT: As required.
        Self(net)
    }

    /// The raw pointer for a `kfi_domain_attr.net` (NULL: initial).
    pub(crate) fn as_raw(&self) -> *mut bindings::net {
        self.0
    }

    fn get(&self) -> *mut bindings::net {
        if self.0.is_null() {
            &raw mut bindings::init_net
        } else {
            self.0
        }
    }
}

impl Socket {
    /// A fresh socket from `sock_create_kern` or `kernel_accept`.
    fn wrap(sock: NonNull<bindings::socket>) -> Self {
        Self {
            sock,
            rx_deadline: AtomicI64::new(0),
            tx_deadline: AtomicI64::new(0),
        }
    }

    /// Bounds the receives (`rx`) and the sends and connects (`tx`) from
    /// now on by a deadline each (`None`: wait as long as it takes). One
    /// waiter per direction sets its own.
    pub(crate) fn set_deadlines(&self, rx: Option<Deadline>, tx: Option<Deadline>) {
        self.set_deadline(Dir::Rx, rx);
        self.set_deadline(Dir::Tx, tx);
    }

    /// Bounds the receives from now on (`None`: unbounded).
    pub(crate) fn set_rx_deadline(&self, d: Option<Deadline>) {
        self.set_deadline(Dir::Rx, d);
    }

    /// Bounds the sends from now on (`None`: unbounded).
    pub(crate) fn set_tx_deadline(&self, d: Option<Deadline>) {
        self.set_deadline(Dir::Tx, d);
    }

    fn set_deadline(&self, dir: Dir, d: Option<Deadline>) {
        let slot = match dir {
            Dir::Rx => &self.rx_deadline,
            Dir::Tx => &self.tx_deadline,
        };
        slot.store(d.map_or(0, |d| d.0), Ordering::Relaxed);
        if d.is_none() {
            // 0: no bound.
            self.set_timeo(dir, 0);
        }
    }

    /// The socket's own timeout for one direction (`SO_RCVTIMEO`,
    /// `SO_SNDTIMEO`, which connect uses too), `us` microseconds (0: none).
    fn set_timeo(&self, dir: Dir, us: i64) {
        let mut tv = bindings::__kernel_sock_timeval {
            tv_sec: us / 1_000_000,
            tv_usec: us % 1_000_000,
        };
        let mut val = bindings::sockptr_t::default();
        val.__bindgen_anon_1.kernel = core::ptr::from_mut(&mut tv).cast();
        val.set_is_kernel(true);
        let name = match dir {
            Dir::Rx => bindings::SO_RCVTIMEO_NEW,
            Dir::Tx => bindings::SO_SNDTIMEO_NEW,
        };
        // SAFETY: A live socket; `val` points to a kernel timeval of the
        // size given, read during the call only. A valid, non-negative
        // timeval cannot fail.
        unsafe {
            sock_setsockopt(
                self.sock.as_ptr(),
                bindings::SOL_SOCKET as c_int,
                name as c_int,
                val,
                size_of::<bindings::__kernel_sock_timeval>() as c_uint,
            )
        };
    }

    /// `SO_RCVBUF`: at most about `bytes` received and not read yet (the
    /// kernel doubles it for its own overhead and keeps a floor), which
    /// bounds the window the peer may fill.
    pub(crate) fn set_rcvbuf(&self, bytes: c_int) -> Result {
        let mut v = bytes;
        let mut val = bindings::sockptr_t::default();
        val.__bindgen_anon_1.kernel = core::ptr::from_mut(&mut v).cast();
        val.set_is_kernel(true);
        // SAFETY: A live socket; `val` points to a kernel int of the size
        // given, read during the call only.
        let r = unsafe {
            sock_setsockopt(
                self.sock.as_ptr(),
                bindings::SOL_SOCKET as c_int,
                bindings::SO_RCVBUF as c_int,
                val,
                size_of::<c_int>() as c_uint,
            )
        };
        to_result(r)
    }

    /// Arms the socket's timeout for a call in direction `dir` with what
    /// is left of its deadline: `Ok(true)` if one is set, `ETIMEDOUT` if
    /// it has passed.
    fn arm(&self, dir: Dir) -> Result<bool> {
        let d = self.deadline(dir);
        if d == 0 {
            return Ok(false);
        }
        let left = Deadline(d).left_us().ok_or(ETIMEDOUT)?;
        self.set_timeo(dir, left);
        Ok(true)
    }

    /// A call's result `n` (bytes or a negative errno); a timed-out wait
    /// (`EAGAIN`, or `EINPROGRESS` for a connect) is `ETIMEDOUT` when a
    /// deadline bounded it.
    fn timed(n: c_int, deadline: bool) -> Result<usize> {
        if deadline && (n == -(bindings::EAGAIN as c_int) || n == -(bindings::EINPROGRESS as c_int))
        {
            return Err(ETIMEDOUT);
        }
        to_result(n.min(0))?;
        Ok(n as usize)
    }

    /// A TCP socket of the family of `like`, in the initial network
    /// namespace.
    pub(crate) fn tcp(like: &SockAddr) -> Result<Self> {
        Self::tcp_in(like, NetNs::initial())
    }

    /// A TCP socket of the family of `like`, in namespace `ns`.
    pub(crate) fn tcp_in(like: &SockAddr, ns: NetNs) -> Result<Self> {
        let mut sock: *mut bindings::socket = core::ptr::null_mut();
        // SAFETY: The namespace is alive (`NetNs` invariant); `sock` is
        // valid for writes.
        to_result(unsafe {
            bindings::sock_create_kern(
                ns.get(),
                like.family(),
                bindings::sock_type_SOCK_STREAM as c_int,
                bindings::IPPROTO_TCP as c_int,
                &mut sock,
            )
        })?;
        // INVARIANT: created just now, no deadline.
        Ok(Self::wrap(NonNull::new(sock).ok_or(ENOMEM)?))
    }

    /// The raw socket, for C helpers.
    pub(crate) fn as_raw(&self) -> *mut bindings::socket {
        self.sock.as_ptr()
    }

    /// `bind`.
    pub(crate) fn bind(&self, addr: &SockAddr) -> Result {
        let (a, n) = addr.raw();
        // SAFETY: A live socket; `a` holds `n` bytes.
        to_result(unsafe { bindings::kernel_bind(self.sock.as_ptr(), a, n) })
    }

    /// `listen`.
    pub(crate) fn listen(&self, backlog: i32) -> Result {
        // SAFETY: A live socket.
        to_result(unsafe { bindings::kernel_listen(self.sock.as_ptr(), backlog) })
    }

    /// `accept`: waits for a connection, or `EAGAIN` with `nonblock`.
    pub(crate) fn accept(&self, nonblock: bool) -> Result<Socket> {
        let mut new: *mut bindings::socket = core::ptr::null_mut();
        let flags = if nonblock {
            bindings::O_NONBLOCK as c_int
        } else {
            0
        };
        // SAFETY: A live listening socket; `new` is valid for writes.
        to_result(unsafe { bindings::kernel_accept(self.sock.as_ptr(), &mut new, flags) })?;
        // INVARIANT: accepted just now, no deadline.
        Ok(Self::wrap(NonNull::new(new).ok_or(ENOMEM)?))
    }

    /// `connect`, waiting for the handshake (until the send deadline).
    pub(crate) fn connect(&self, addr: &SockAddr) -> Result {
        let timed = self.arm(Dir::Tx)?;
        let (a, n) = addr.raw();
        // SAFETY: A live socket; `a` holds `n` bytes.
        let r = unsafe { bindings::kernel_connect(self.sock.as_ptr(), a, n, 0) };
        Self::timed(r, timed).map(|_| ())
    }

    /// Sends all of `bufs`, in order; returns the bytes sent (all of
    /// them), the socket's error if the connection failed on the way,
    /// `ETIMEDOUT` if the send deadline passed before all were sent.
    pub(crate) fn send(&self, bufs: &[&[u8]]) -> Result<usize> {
        self.send_from(bufs, 0, Wait::Deadline)
    }

    /// Sends `bufs` but their first `skip` bytes (sent before), in order;
    /// returns the bytes of this call. [`Wait::Deadline`]: all of them
    /// (the socket's error if the connection failed on the way,
    /// `ETIMEDOUT` if the send deadline passed first). [`Wait::No`]: what
    /// the socket takes now, maybe nothing (0), never waiting for the peer
    /// to read (it may wait for the socket's lock, which only this host's
    /// threads hold).
    pub(crate) fn send_from(&self, bufs: &[&[u8]], skip: usize, wait: Wait) -> Result<usize> {
        self.send_split(bufs, None, skip, wait)
    }

    /// [`Self::send_from`], but the buffers from index `by_ref.0` on go
    /// through `by_ref.1` (the provider's send by page reference); the
    /// ones before are copied, with `MSG_MORE` when more follow.
    pub(crate) fn send_split(
        &self,
        bufs: &[&[u8]],
        by_ref: Option<(usize, SendPages)>,
        skip: usize,
        wait: Wait,
    ) -> Result<usize> {
        let total = bufs
            .iter()
            .try_fold(0usize, |t, b| t.checked_add(b.len()))
            .ok_or(EINVAL)?;
        let mut sent = 0usize;
        loop {
            let at = skip.checked_add(sent).ok_or(EINVAL)?;
            if at >= total {
                return Ok(sent);
            }
            let (n, left) = self.send_next(bufs, by_ref, at, total, wait)?;
            sent += n;
            // A waiting call that took part of the bytes was cut short: by
            // its timeout, which may run out a jiffy before the deadline
            // (the next call then waits out the rest, or finds the
            // deadline passed: `ETIMEDOUT`), or by a failure that the next
            // call returns.
            if n == 0 || (wait == Wait::No && n < left) {
                return Ok(sent);
            }
        }
    }

    /// One send call from byte `at` of `bufs` (`total` bytes): the copied
    /// buffers up to the first one sent by reference, or the rest of the
    /// one by reference that holds byte `at`. Returns the bytes it took
    /// and the bytes there were to take.
    fn send_next(
        &self,
        bufs: &[&[u8]],
        by_ref: Option<(usize, SendPages)>,
        at: usize,
        total: usize,
        wait: Wait,
    ) -> Result<(usize, usize)> {
        let Some((first, pages)) = by_ref.filter(|(i, _)| *i < bufs.len()) else {
            return self.send_once(bufs, at, wait, false);
        };
        let (copied, refs) = bufs.split_at(first);
        let head: usize = copied.iter().map(|b| b.len()).sum();
        if at < head {
            return self.send_once(copied, at, wait, true);
        }
        let mut skip = at - head;
        let mut end = head;
        for b in refs {
            end += b.len();
            let Some(rest) = b.get(skip..).filter(|r| !r.is_empty()) else {
                skip -= b.len().min(skip);
                continue;
            };
            let more = if end < total { bindings::MSG_MORE } else { 0 };
            let timed = self.arm_for(wait)?;
            let n = pages(self, rest, Self::flags(wait) | more);
            return self.took(n, rest.len(), timed, wait);
        }
        Ok((0, 0))
    }

    /// The flags of a send that waits as `wait` says.
    fn flags(wait: Wait) -> c_uint {
        match wait {
            Wait::No => bindings::MSG_NOSIGNAL | bindings::MSG_DONTWAIT,
            Wait::Deadline => bindings::MSG_NOSIGNAL,
        }
    }

    /// Before a send that waits as `wait` says: its timeout armed (true if
    /// a deadline bounds it).
    fn arm_for(&self, wait: Wait) -> Result<bool> {
        match wait {
            Wait::Deadline => self.arm(Dir::Tx),
            Wait::No => Ok(false),
        }
    }

    /// A send call's result `n` for `total` bytes offered: the bytes taken
    /// and `total`.
    fn took(&self, n: c_int, total: usize, timed: bool, wait: Wait) -> Result<(usize, usize)> {
        if matches!(wait, Wait::No) && n == -(bindings::EAGAIN as c_int) {
            // The socket is full: nothing taken.
            return Ok((0, total));
        }
        let sent = Self::timed(n, timed)?;
        if sent < total && timed && self.deadline_passed(Dir::Tx) {
            return Err(ETIMEDOUT);
        }
        Ok((sent, total))
    }

    /// One `kernel_sendmsg` of `bufs` but their first `skip` bytes, as
    /// [`Self::send_from`] waits, with `MSG_MORE` if `more` bytes follow:
    /// the bytes it took and the bytes there were to take.
    fn send_once(
        &self,
        bufs: &[&[u8]],
        mut skip: usize,
        wait: Wait,
        more: bool,
    ) -> Result<(usize, usize)> {
        /// Buffers of one send described on the stack.
        const IOV_ON_STACK: usize = 9;
        let timed = self.arm_for(wait)?;
        // On the stack unless there are many buffers: no allocation per
        // send for the usual frames. Only the entries used are written (a
        // send's every byte written counts on a small message's path).
        let mut short = [const { MaybeUninit::<bindings::kvec>::uninit() }; IOV_ON_STACK];
        let mut long = KVec::new();
        let iov: &mut [MaybeUninit<bindings::kvec>] = if bufs.len() <= IOV_ON_STACK {
            &mut short
        } else {
            long.resize(bufs.len(), MaybeUninit::uninit(), GFP_KERNEL)?;
            &mut long
        };
        // The first `count` entries of `iov` are written.
        let mut count = 0;
        let mut total = 0;
        for b in bufs {
            let Some(rest) = b.get(skip..) else {
                skip -= b.len();
                continue;
            };
            skip = 0;
            if rest.is_empty() {
                continue;
            }
            let Some(v) = iov.get_mut(count) else {
                return Err(EINVAL);
            };
            v.write(bindings::kvec {
                iov_base: rest.as_ptr().cast_mut().cast(),
                iov_len: rest.len(),
            });
            count += 1;
            total += rest.len();
        }
        if total == 0 {
            return Ok((0, 0));
        }
        let more = if more { bindings::MSG_MORE } else { 0 };
        let mut msg = bindings::msghdr {
            msg_flags: Self::flags(wait) | more,
            ..Default::default()
        };
        // A `MaybeUninit<kvec>` is laid out as a kvec.
        // SAFETY: A live socket; the first `count` kvecs of `iov` are written and
        // describe the borrowed `total` bytes, which the call only reads (no other entry).
        let n = unsafe {
            bindings::kernel_sendmsg(
                self.sock.as_ptr(),
                &mut msg,
                iov.as_mut_ptr().cast::<bindings::kvec>(),
                count,
                total,
            )
        };
        self.took(n, total, timed, wait)
    }

    /// Receives into `buf` what is there now, without waiting: `Ok(None)`
    /// when nothing is, `Ok(Some(0))` at the end of the stream.
    pub(crate) fn recv_now(&self, buf: &mut [u8]) -> Result<Option<usize>> {
        let mut iov = bindings::kvec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let mut msg = bindings::msghdr::default();
        // SAFETY: A live socket; `iov` describes `buf`, borrowed mutably.
        let n = unsafe {
            bindings::kernel_recvmsg(
                self.sock.as_ptr(),
                &mut msg,
                &mut iov,
                1,
                buf.len(),
                bindings::MSG_DONTWAIT as c_int,
            )
        };
        if n == -(bindings::EAGAIN as c_int) {
            return Ok(None);
        }
        to_result(n.min(0))?;
        Ok(Some(n as usize))
    }

    /// The deadline set for `dir`, in `Deadline` nanoseconds (0: none).
    fn deadline(&self, dir: Dir) -> i64 {
        match dir {
            Dir::Rx => self.rx_deadline.load(Ordering::Relaxed),
            Dir::Tx => self.tx_deadline.load(Ordering::Relaxed),
        }
    }

    /// Whether the deadline set for `dir` has passed.
    fn deadline_passed(&self, dir: Dir) -> bool {
        let d = self.deadline(dir);
        d != 0 && Deadline(d).left_us().is_none()
    }

    /// Receives into `buf`: all of it with `wait_all` (fewer bytes only at
    /// the end of the stream or when the receive deadline passes), else
    /// what is there (waiting for some).
    pub(crate) fn recv(&self, buf: &mut [u8], wait_all: bool) -> Result<usize> {
        let timed = self.arm(Dir::Rx)?;
        let mut iov = bindings::kvec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let mut msg = bindings::msghdr::default();
        let flags = if wait_all {
            bindings::MSG_WAITALL as c_int
        } else {
            0
        };
        // SAFETY: A live socket; `iov` describes `buf`, borrowed mutably.
        let n = unsafe {
            bindings::kernel_recvmsg(self.sock.as_ptr(), &mut msg, &mut iov, 1, buf.len(), flags)
        };
        Self::timed(n, timed)
    }

    /// Whether a receive would not block: bytes are queued or the stream
    /// ended (or failed). Never sleeps.
    pub(crate) fn readable(&self) -> bool {
        let mut b = [0u8; 1];
        let mut iov = bindings::kvec {
            iov_base: b.as_mut_ptr().cast(),
            iov_len: 1,
        };
        let mut msg = bindings::msghdr::default();
        let flags = (bindings::MSG_PEEK | bindings::MSG_DONTWAIT) as c_int;
        // SAFETY: A live socket; `iov` describes `b`.
        let n = unsafe {
            bindings::kernel_recvmsg(self.sock.as_ptr(), &mut msg, &mut iov, 1, 1, flags)
        };
        n != -(bindings::EAGAIN as c_int)
    }

    /// The local address.
    pub(crate) fn local_addr(&self) -> Result<SockAddr> {
        let mut a = [0u8; size_of::<bindings::sockaddr_in6>()];
        let to = a.as_mut_ptr().cast();
        // SAFETY: A live socket; `to` is `a`, large enough for IPv4 and
        // IPv6.
        let ret = unsafe { bindings::kernel_getsockname(self.sock.as_ptr(), to) };
        to_result(ret.min(0))?;
        SockAddr::from_bytes(&a)
    }

    /// The peer's address (connected sockets).
    pub(crate) fn peer_addr(&self) -> Result<SockAddr> {
        let mut a = [0u8; size_of::<bindings::sockaddr_in6>()];
        let to = a.as_mut_ptr().cast();
        // SAFETY: A live socket; `to` is `a`, large enough for IPv4 and
        // IPv6.
        let ret = unsafe { bindings::kernel_getpeername(self.sock.as_ptr(), to) };
        to_result(ret.min(0))?;
        SockAddr::from_bytes(&a)
    }

    /// Ends both directions; a peer's receive sees the end of the stream
    /// and our blocked receives return.
    pub(crate) fn shutdown(&self) {
        // SAFETY: A live socket.
        unsafe {
            bindings::kernel_sock_shutdown(
                self.sock.as_ptr(),
                bindings::sock_shutdown_cmd_SHUT_RDWR,
            )
        };
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        // SAFETY: Live (type invariant), released once here.
        unsafe { bindings::sock_release(self.sock.as_ptr()) };
    }
}
