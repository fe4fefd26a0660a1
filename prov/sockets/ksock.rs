// SPDX-License-Identifier: GPL-2.0

//! Kernel TCP sockets, safely: the one place where kfi_sockets calls the
//! kernel's socket API (`sock_create_kern`, `kernel_*`, `sock_release`).
//!
//! Every call here may sleep: process context only.

use core::{
    ptr::NonNull,
    sync::atomic::{AtomicI64, Ordering},
};
use kernel::{bindings, error::to_result, prelude::*};

// sock_setsockopt() is exported by net/core/sock.c but not in the kernel
// crate's bindings: its declaration is generated with the C glue's.
use crate::sock_sys::{kfi_sockets_rx_ended, sock_setsockopt};

// Included by path, so that every crate that includes this file finds it
// beside it.
#[path = "sockaddr.rs"]
mod sockaddr;
pub(crate) use sockaddr::SockAddr;
#[path = "pace.rs"]
mod pace;
use pace::Pace;
#[path = "deadline.rs"]
mod deadline;
pub(crate) use deadline::Deadline;
#[path = "ksock_send.rs"]
mod send;

/// The longest a receive call waits at once (µs): a longer wait is made
/// of such slices, so that each sees its deadline as it is then.
const RX_SLICE_US: i64 = 1_000_000;

/// A kernel TCP socket; released when dropped.
///
/// # Invariants
///
/// `sock` came from `sock_create_kern` or `kernel_accept` and is not
/// released. `rx_deadline`/`tx_deadline` hold a [`Deadline`]'s
/// nanoseconds, or 0 for none; `rx_pace`/`tx_pace` say how they move.
/// `rx_cap` holds a `Deadline`'s nanoseconds, or 0 for none: the
/// receives end by then whatever `rx_deadline` says.
pub(crate) struct Socket {
    sock: NonNull<bindings::socket>,
    rx_deadline: AtomicI64,
    rx_cap: AtomicI64,
    tx_deadline: AtomicI64,
    rx_pace: Pace,
    tx_pace: Pace,
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
            rx_cap: AtomicI64::new(0),
            tx_deadline: AtomicI64::new(0),
            rx_pace: Pace::new(),
            tx_pace: Pace::new(),
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

    /// Bounds the receives from now on by `d`, which moves `step_ms`
    /// later for every [`pace::PACE_BYTES`] they take: a peer earns time with
    /// the bytes it sends, not with a length it claims (`None`:
    /// unbounded).
    pub(crate) fn set_rx_deadline_paced(&self, d: Option<Deadline>, step_ms: u64) {
        self.set_deadline(Dir::Rx, d);
        if d.is_some() {
            self.rx_pace.set(step_ms);
        }
    }

    /// Ends the receives by `cap` (`None`: no cap), however their deadline
    /// moves: a deadline that something other than the frame in hand sets
    /// (a response to one of our operations is due, and it cannot arrive
    /// before this frame ends). The caller serialises the setters.
    pub(crate) fn set_rx_cap(&self, cap: Option<Deadline>) {
        self.rx_cap.store(cap.map_or(0, |d| d.0), Ordering::Relaxed);
    }

    /// Brings the receives' cap forward to `cap` if that is earlier
    /// ([`Self::set_rx_cap`]).
    pub(crate) fn lower_rx_cap(&self, cap: Deadline) {
        let _ = self
            .rx_cap
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| {
                (c == 0 || cap.0 < c).then_some(cap.0)
            });
    }

    /// [`Self::set_rx_deadline_paced`] for the sends: the peer earns time
    /// with the bytes it reads, `taken` of them already (the part of a
    /// frame the socket took before the deadline was set), which move `d`
    /// at once.
    pub(crate) fn set_tx_deadline_paced(&self, d: Option<Deadline>, step_ms: u64, taken: usize) {
        let earned = u64::try_from(taken / pace::PACE_BYTES)
            .unwrap_or(u64::MAX)
            .saturating_mul(step_ms);
        let d = d.map(|d| Deadline::after_ms_from(d, earned));
        self.set_deadline(Dir::Tx, d);
        if d.is_some() {
            self.tx_pace.set(step_ms);
        }
    }

    /// Bounds the sends from now on (`None`: unbounded).
    pub(crate) fn set_tx_deadline(&self, d: Option<Deadline>) {
        self.set_deadline(Dir::Tx, d);
    }

    fn set_deadline(&self, dir: Dir, d: Option<Deadline>) {
        // Fixed, unless the caller paces it next.
        let (slot, pace) = match dir {
            Dir::Rx => (&self.rx_deadline, &self.rx_pace),
            Dir::Tx => (&self.tx_deadline, &self.tx_pace),
        };
        pace.set(0);
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
    /// it has passed. A bounded receive waits [`RX_SLICE_US`] at most
    /// (the caller calls again when that ends), so that a cap brought
    /// forward while it waits ([`Self::lower_rx_cap`]) ends it in time.
    /// An unbounded one costs no socket option call, as before.
    fn arm(&self, dir: Dir) -> Result<bool> {
        let d = self.deadline(dir);
        if d == 0 {
            return Ok(false);
        }
        let left = Deadline(d).left_us().ok_or(ETIMEDOUT)?;
        let left = match dir {
            Dir::Rx => left.min(RX_SLICE_US),
            Dir::Tx => left,
        };
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

    /// `connect` that only starts the handshake: a send waits for it (until
    /// its deadline), and a shutdown from now on ends it.
    pub(crate) fn connect_begin(&self, addr: &SockAddr) -> Result {
        let (a, n) = addr.raw();
        let flags = bindings::O_NONBLOCK as c_int;
        // SAFETY: A live socket; `a` holds `n` bytes.
        let r = unsafe { bindings::kernel_connect(self.sock.as_ptr(), a, n, flags) };
        if r == -(bindings::EINPROGRESS as c_int) {
            return Ok(());
        }
        to_result(r)
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
        self.received(Ok(n as usize)).map(Some)
    }

    /// The deadline set for `dir`, in `Deadline` nanoseconds (0: none);
    /// for the receives, their cap if it is earlier.
    fn deadline(&self, dir: Dir) -> i64 {
        match dir {
            Dir::Rx => {
                let d = self.rx_deadline.load(Ordering::Relaxed);
                let cap = self.rx_cap.load(Ordering::Relaxed);
                if cap != 0 && (d == 0 || cap < d) {
                    cap
                } else {
                    d
                }
            }
            Dir::Tx => self.tx_deadline.load(Ordering::Relaxed),
        }
    }

    /// Whether the deadline set for `dir` has passed.
    fn deadline_passed(&self, dir: Dir) -> bool {
        let d = self.deadline(dir);
        d != 0 && Deadline(d).left_us().is_none()
    }

    /// Receives into `buf`: all of it with `wait_all` (fewer bytes only at
    /// the end of the stream, or, with a receive deadline, when a wait of
    /// [`RX_SLICE_US`] ends with some), else what is there (waiting for
    /// some).
    pub(crate) fn recv(&self, buf: &mut [u8], wait_all: bool) -> Result<usize> {
        let len = self.rx_pace.limit(buf.len());
        let flags = if wait_all {
            bindings::MSG_WAITALL as c_int
        } else {
            0
        };
        loop {
            let timed = self.arm(Dir::Rx)?;
            let mut iov = bindings::kvec {
                iov_base: buf.as_mut_ptr().cast(),
                iov_len: len,
            };
            let mut msg = bindings::msghdr::default();
            // SAFETY: A live socket; `iov` describes the first `len` bytes
            // of `buf`, borrowed mutably.
            let n = unsafe {
                bindings::kernel_recvmsg(self.sock.as_ptr(), &mut msg, &mut iov, 1, len, flags)
            };
            if !Self::slice_ended(n) {
                return self.received(Self::timed(n, timed));
            }
        }
    }

    /// Whether receive call result `n` is a timed wait that ended with
    /// nothing received: its slice ([`RX_SLICE_US`]) or its deadline,
    /// which the next `arm` tells apart (a timeout left from an earlier
    /// deadline, on a receive with none now, only makes it wait again).
    fn slice_ended(n: c_int) -> bool {
        n == -(bindings::EAGAIN as c_int)
    }

    /// Counts a receive's bytes towards a paced deadline (see
    /// [`Self::set_rx_deadline_paced`]); returns `got` as it is.
    fn received(&self, got: Result<usize>) -> Result<usize> {
        if let Ok(n) = got {
            self.rx_pace.went(n, &self.rx_deadline);
        }
        got
    }

    /// Receives into `first`, then `then`, in one call: what is there,
    /// waiting (until the receive deadline) only while nothing is. Returns
    /// the bytes received, `first`'s before `then`'s (0: the stream ended).
    pub(crate) fn recv_pair(&self, first: &mut [u8], then: &mut [u8]) -> Result<usize> {
        let total = first.len().checked_add(then.len()).ok_or(EINVAL)?;
        loop {
            let timed = self.arm(Dir::Rx)?;
            let mut iov = [
                bindings::kvec {
                    iov_base: first.as_mut_ptr().cast(),
                    iov_len: first.len(),
                },
                bindings::kvec {
                    iov_base: then.as_mut_ptr().cast(),
                    iov_len: then.len(),
                },
            ];
            let mut msg = bindings::msghdr::default();
            // SAFETY: A live socket; `iov` describes `first` and `then`,
            // both borrowed mutably, `total` bytes together.
            let n = unsafe {
                bindings::kernel_recvmsg(
                    self.sock.as_ptr(),
                    &mut msg,
                    iov.as_mut_ptr(),
                    2,
                    total,
                    0,
                )
            };
            if !Self::slice_ended(n) {
                return self.received(Self::timed(n, timed));
            }
        }
    }

    /// `Err` when the peer has ended the connection (its FIN, a reset, the
    /// socket's pending error, left pending), read without taking a byte:
    /// for a receiver that leaves the bytes in the socket. Any context.
    pub(crate) fn rx_ended(&self) -> Result {
        // SAFETY: A live socket; the call only reads its state.
        to_result(unsafe { kfi_sockets_rx_ended(self.sock.as_ptr()) })
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
