// SPDX-License-Identifier: GPL-2.0

//! Passive endpoints of kfi_sockets: a listening socket whose connections
//! are accepted by work queued from its callback (`accept.rs`, no thread
//! waits on it). Each accepted connection's request is read on a worker of
//! its own (a silent peer holds up nobody else) and becomes a
//! `KFI_CONNREQ` event whose info names the request's handle. A passive
//! endpoint holds at most `listen_backlog_max` requests (being read, or
//! waiting for the ULP's accept or reject), and reads at most
//! `handshake_max` at once, `handshake_max_per_host` of them from one host,
//! a crowded host's oldest giving way to another host's (`readers.rs`);
//! more are refused at once.

use kernel::{
    new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
};

use crate::{
    accept::Listening,
    frame, info_ns,
    kfi::{
        kfi_sys as sys,
        provider::{EqRef, FidRef},
        toolkit::{handles::HandleTable, workers::Workers},
    },
    ksock::{Deadline, NetNs, SockAddr, Socket},
    readers::Readers,
    request_info,
    sock_sys::kfi_sockets_reuseaddr,
};

kernel::sync::global_lock! {
    // SAFETY: Initialized in the module initializer before first use.
    unsafe(uninit) static REQUESTS: Mutex<HandleTable<Arc<Socket>>> = HandleTable::new();
}

/// Sets up the table of connection requests of all passive endpoints.
///
/// # Safety
///
/// Called once, in the module initializer, before anything else here.
pub(crate) unsafe fn init_requests() {
    // SAFETY: Once, before use.
    unsafe { REQUESTS.init() };
}

/// Shuts down every request still waiting and frees the table (at module
/// unload: a static is never dropped).
pub(crate) fn release_requests() {
    while let Some(s) = REQUESTS.lock().take_any() {
        s.shutdown();
    }
}

/// Takes the socket of the connection request `handle` (`EINVAL` for a
/// handle that names no waiting request).
pub(crate) fn take_request(handle: *mut sys::kfid) -> Result<Arc<Socket>> {
    REQUESTS.lock().take(handle)
}

struct State {
    fid: Option<FidRef>,
    eq: Option<EqRef>,
    listener: Option<Listening>,
    /// Sockets whose request is being read: shut down at close, so no
    /// worker waits on a silent peer.
    busy: KVec<Arc<Socket>>,
    /// The requests being read (those of `busy`), by host.
    readers: Readers,
    closing: bool,
}

#[pin_data]
pub(crate) struct Shared {
    #[pin]
    state: Mutex<State>,
    #[pin]
    workers: Workers,
    src: SockAddr,
    ns: NetNs,
}

/// Runs the handshake `f` on `sock` within the module's handshake
/// timeout, one deadline for all of it (a peer that drips a byte now and
/// then does not restart the clock), then lifts it: a silent or slow peer
/// ends in `ETIMEDOUT` instead of holding a worker. Process context.
pub(crate) fn with_timeout<T>(sock: &Socket, f: impl FnOnce() -> Result<T>) -> Result<T> {
    let ms = crate::handshake_timeout_ms();
    let d = (ms != 0).then(|| Deadline::after_ms(u64::from(ms)));
    sock.set_deadlines(d, d);
    let r = f().map_err(|e| {
        if e == EAGAIN || e == EINPROGRESS {
            ETIMEDOUT
        } else {
            e
        }
    });
    sock.set_deadlines(None, None);
    r
}

/// A socket listening on `src` in namespace `ns` (passive and RDM
/// endpoints). Process context.
pub(crate) fn listen_socket(src: &SockAddr, ns: NetNs) -> Result<Socket> {
    let l = Socket::tcp_in(src, ns)?;
    // SAFETY: A live socket.
    unsafe { kfi_sockets_reuseaddr(l.as_raw()) };
    l.bind(src)?;
    l.listen(64)?;
    Ok(l)
}

/// A passive endpoint.
pub(crate) struct SockPep(Arc<Shared>);

/// Runs `f` on a worker that close waits for.
fn spawn(sh: &Arc<Shared>, f: impl FnOnce(&Arc<Shared>) + Send + 'static) -> Result {
    crate::wq::spawn_long(sh, |sh| &sh.workers, f)
}

/// Takes an accepted connection: its request is read on a worker of its
/// own, within the bounds.
fn take(sh: &Arc<Shared>, s: &Arc<Socket>) -> Result {
    let key = Arc::as_ptr(sh) as usize;
    // A socket reset since its accept has no peer: nothing to read.
    let peer = s.peer_addr()?;
    // Only the accept work adds requests (one run at a time), so the
    // count cannot grow between the check and the push.
    let waiting = REQUESTS.lock().owned_by(key);
    {
        let mut st = sh.state.lock();
        if st.closing {
            return Err(ECANCELED);
        }
        if st.busy.len().saturating_add(waiting) >= crate::listen_backlog_max() {
            drop(st);
            return Err(refuse(s, ENOSPC));
        }
        // Requests being read hold a worker each (until the handshake
        // deadline, for a silent peer): a few at once, fewer per host.
        // Room first: a request that takes another's slot must not fail
        // after that one was shut down.
        st.busy.reserve(1, GFP_KERNEL)?;
        let evicted = match st.readers.begin(&peer, s) {
            Ok(v) => v,
            Err(e) => {
                drop(st);
                return Err(if e == EBUSY { refuse(s, e) } else { e });
            }
        };
        // Within the room reserved: cannot fail.
        let _ = st.busy.push_within_capacity(s.clone());
        drop(st);
        // Its worker sees the end of the stream and lets go of it.
        if let Some(v) = evicted {
            v.shutdown();
        }
    }
    let s2 = s.clone();
    spawn(sh, move |sh| handshake(sh, s2)).inspect_err(|_| untrack(sh, s))
}

/// Refuses a connection that would exceed a bound (`e`): the peer reads a
/// `Reject` (a fresh socket has room for it) and the end of the stream;
/// nothing is allocated for it. Returns `e`.
pub(crate) fn refuse(s: &Socket, e: Error) -> Error {
    let _ = with_timeout(s, || frame::reject(s, &[]));
    e
}

fn untrack(sh: &Shared, s: &Arc<Socket>) {
    let mut st = sh.state.lock();
    st.busy.retain(|b| !Arc::ptr_eq(b, s));
    st.readers.end(s);
}

/// Reads a request and reports it; the socket is no longer busy after.
fn handshake(sh: &Arc<Shared>, s: Arc<Socket>) {
    read_request(sh, &s);
    untrack(sh, &s);
}

/// Reads a request and reports it.
fn read_request(sh: &Arc<Shared>, s: &Arc<Socket>) {
    let Ok(data) = with_timeout(s, || frame::read_connreq(s)) else {
        s.shutdown();
        return;
    };
    let (eq, fid) = {
        let mut st = sh.state.lock();
        // Read: its slot is free for the next request, unless it gave the
        // slot away while it was read (its socket was shut down).
        let evicted = st.readers.end(s);
        if evicted || st.closing {
            s.shutdown();
            return;
        }
        (st.eq, st.fid)
    };
    let (Some(eq), Some(fid)) = (eq, fid) else {
        s.shutdown();
        return;
    };
    let key = Arc::as_ptr(sh) as usize;
    let Ok(handle) = REQUESTS.lock().insert(s.clone(), key) else {
        s.shutdown();
        return;
    };
    if sh.state.lock().closing {
        // Close may have dropped our handles before this one went in.
        if let Ok(s) = take_request(handle) {
            s.shutdown();
        }
        return;
    }
    let posted =
        request_info(&sh.src, sh.ns, handle).and_then(|info| eq.post_connreq(fid, info, &data));
    if let Err(e) = posted {
        // The EQ is half full (kfabric.ko keeps the rest for connected
        // endpoints' events), or no memory: the peer reads a refusal.
        if let Ok(s) = take_request(handle) {
            refuse(&s, e);
            s.shutdown();
        }
    }
}

impl SockPep {
    /// A passive endpoint for the source address of `info`.
    pub(crate) fn new(info: &sys::kfi_info) -> Result<Self> {
        if info.src_addr.is_null() {
            return Err(EINVAL);
        }
        let (addr, len) = (info.src_addr.cast::<u8>(), info.src_addrlen);
        // SAFETY: An entry's address holds `src_addrlen` bytes.
        let b = unsafe { core::slice::from_raw_parts(addr, len) };
        let src = SockAddr::from_bytes(b)?;
        let sh = Arc::pin_init(
            try_pin_init!(Shared {
                state <- new_mutex!(State {
                    fid: None,
                    eq: None,
                    listener: None,
                    busy: KVec::new(),
                    readers: Readers::new(),
                    closing: false,
                }),
                workers <- Workers::new(),
                src,
                ns: info_ns(info),
            }),
            GFP_KERNEL,
        )?;
        Ok(Self(sh))
    }

    pub(crate) fn opened(&self, fid: FidRef) {
        self.0.state.lock().fid = Some(fid);
    }

    pub(crate) fn bind_eq(&self, eq: EqRef) -> Result {
        self.0.state.lock().eq = Some(eq);
        Ok(())
    }

    /// `kfi_listen`.
    pub(crate) fn listen(&self) -> Result {
        let l = Arc::new(listen_socket(&self.0.src, self.0.ns)?, GFP_KERNEL)?;
        {
            let s = self.0.state.lock();
            if s.eq.is_none() || s.listener.is_some() {
                return Err(EINVAL);
            }
        }
        let sh = self.0.clone();
        let take = KBox::new(move |s: &Arc<Socket>| take(&sh, s), GFP_KERNEL)?;
        Listening::start_into(l, take, |listening| {
            listening.file_in(&mut self.0.state.lock().listener)
        })
    }

    /// `kfi_getname`: the listening address (the bound port once
    /// listening).
    pub(crate) fn getname(&self, addr: &mut [u8]) -> Result<usize> {
        let l = self
            .0
            .state
            .lock()
            .listener
            .as_ref()
            .map(|l| l.sock().clone());
        let a = match l {
            Some(l) => l.local_addr()?,
            None => self.0.src,
        };
        Ok(crate::ep::put_addr(&a, addr))
    }

    /// `kfi_reject`.
    pub(crate) fn reject(&self, handle: *mut sys::kfid, param: &[u8]) -> Result {
        let s = take_request(handle)?;
        frame::reject(&s, param)
    }
}

impl Drop for SockPep {
    fn drop(&mut self) {
        let (l, busy) = {
            let mut s = self.0.state.lock();
            s.closing = true;
            (s.listener.take(), core::mem::take(&mut s.busy))
        };
        // Stops accepting, and drops the handler's reference to us.
        drop(l);
        for b in busy.iter() {
            b.shutdown();
        }
        let key = Arc::as_ptr(&self.0) as usize;
        while let Some(s) = REQUESTS.lock().take_owned_by(key) {
            s.shutdown();
        }
        self.0.workers.wait_idle();
    }
}
