// SPDX-License-Identifier: GPL-2.0

//! A domain's own connection for registrations: an RC QP connected
//! through rdma_cm to a second QP of the same PD on the device's own
//! address, on which `kfi_mr_reg` posts its `IB_WR_REG_MR` requests. No
//! peer sits behind it, so a domain registers before its first
//! connection and a registration never waits behind a peer's data.
//!
//! Built on first use, in process context, within [`SETUP_MS`]: a
//! listener on the device's IPv4 address at an ephemeral port, an
//! identifier that connects to it, and that request's identifier,
//! accepted. The listener takes one request: the one that carries the
//! link's random cookie as private data and comes from the connecting
//! identifier's own address and port; every other is refused. It goes
//! once both sides are connected. A peer that learns the port (and
//! could claim our address) still lacks the cookie: it can delay the
//! setup, not take the link.

use kernel::{
    new_condvar, new_mutex,
    prelude::*,
    sync::{Arc, CondVar, CondVarTimeoutResult, Mutex},
    time::{msecs_to_jiffies, Jiffies},
};

use crate::{
    ib::{
        addr::Addr,
        cm::{self, CmId, RdDepth},
        device::Device,
        frmr::FastReg,
        verbs::{Cq, Pd},
    },
    ib_sys as sys,
    net::NetPtr,
};

/// How long building the link may take, all its steps together.
const SETUP_MS: u32 = 5000;

/// Registrations the link's send queue holds at once (they are posted one
/// at a time, see [`RegLink::serial`]; the rest is room for the drain).
const SEND_DEPTH: u32 = 4;

/// Bytes of the cookie a link's request carries.
const COOKIE: usize = 16;

/// What the identifiers' events reported.
#[derive(Default)]
struct Progress {
    /// The connecting identifier, to tell its events from the other's.
    active: usize,
    /// Where the request must come from: the connecting identifier's own
    /// address, once it has one.
    from: Option<Addr>,
    /// What the request must carry.
    cookie: [u8; COOKIE],
    addr_resolved: bool,
    route_resolved: bool,
    /// The request, until it is accepted.
    request: Option<CmId<()>>,
    /// A request was taken: no other is.
    taken: bool,
    active_up: bool,
    passive_up: bool,
    failed: Option<Error>,
    /// The connection ended (or the device is going).
    down: bool,
}

/// The handler of the link's identifiers.
#[pin_data]
struct Events {
    #[pin]
    p: Mutex<Progress>,
    #[pin]
    changed: CondVar,
}

impl Events {
    /// Waits until `ready` holds, within the `left` jiffies of the setup
    /// (what remains is written back). Process context.
    fn wait(&self, left: &mut Jiffies, ready: impl Fn(&Progress) -> bool) -> Result {
        let mut p = self.p.lock();
        loop {
            if let Some(e) = p.failed {
                return Err(e);
            }
            if p.down {
                return Err(ECONNRESET);
            }
            if ready(&p) {
                return Ok(());
            }
            match self.changed.wait_interruptible_timeout(&mut p, *left) {
                CondVarTimeoutResult::Timeout => return Err(ETIMEDOUT),
                // The caller's registration fails with it.
                CondVarTimeoutResult::Signal { .. } => return Err(EINTR),
                CondVarTimeoutResult::Woken { jiffies } => *left = jiffies,
            }
        }
    }
}

impl cm::Handler for Events {
    fn event(&self, id: *mut sys::rdma_cm_id, ev: cm::Event<'_>) -> Result {
        let mut p = self.p.lock();
        let active = p.active == id as usize;
        let r = match ev {
            cm::Event::AddrResolved => {
                p.addr_resolved = true;
                Ok(())
            }
            cm::Event::RouteResolved => {
                p.route_resolved = true;
                Ok(())
            }
            cm::Event::Established(..) => {
                if active {
                    p.active_up = true;
                } else {
                    p.passive_up = true;
                }
                Ok(())
            }
            cm::Event::Rejected(_) => {
                p.failed.get_or_insert(ECONNREFUSED);
                Ok(())
            }
            cm::Event::Failed(e) => {
                p.failed.get_or_insert(e);
                Ok(())
            }
            cm::Event::Disconnected => {
                p.down = true;
                Ok(())
            }
            // The link's owner destroys the identifiers (the provider's
            // client sees the removal before rdma_cm does).
            cm::Event::DeviceRemoval => {
                p.down = true;
                Err(EBUSY)
            }
            cm::Event::Other => Ok(()),
        };
        self.changed.notify_all();
        r
    }

    fn request(
        &self,
        child: CmId<()>,
        data: cm::Private<'_>,
        _offer: RdDepth,
    ) -> core::result::Result<(), CmId<()>> {
        let mut peer = [0u8; 128];
        let n = child.addr(true, &mut peer);
        let peer = peer.get(..n).and_then(|b| Addr::from_bytes(b).ok());
        let mut p = self.p.lock();
        let ours = match (p.from.as_ref(), peer) {
            (Some(f), Some(a)) => f.host() == a.host() && f.port() == a.port(),
            _ => false,
        };
        if !ours || data.data != &p.cookie[..] || p.taken {
            return Err(child);
        }
        p.taken = true;
        p.request = Some(child);
        self.changed.notify_all();
        Ok(())
    }
}

/// A random cookie. Any context.
fn new_cookie() -> [u8; COOKIE] {
    let mut c = [0u8; COOKIE];
    for half in c.chunks_exact_mut(8) {
        // SAFETY: `get_random_u64` has no preconditions and may be called
        // in any context.
        half.copy_from_slice(&unsafe { kernel::bindings::get_random_u64() }.to_ne_bytes());
    }
    c
}

/// The link's identifiers and what their QPs use.
///
/// # Invariants
///
/// The identifiers' QPs (if made) complete to `cq` and are on `_pd`; they
/// are destroyed (drained) before `cq` and `_pd` go.
struct Parts {
    ev: Arc<Events>,
    listener: Option<CmId<Events>>,
    active: Option<CmId<Events>>,
    passive: Option<CmId<Events>>,
    cq: Option<Cq>,
    _pd: Arc<Pd>,
}

impl Drop for Parts {
    fn drop(&mut self) {
        for id in [&self.active, &self.passive].into_iter().flatten() {
            id.destroy_qp();
        }
        drop(self.listener.take());
        drop(self.active.take());
        drop(self.passive.take());
        // A request not yet accepted is destroyed here, not in the
        // handler (destroying an identifier waits for its handlers).
        let r = self.ev.p.lock().request.take();
        drop(r);
    }
}

/// A domain's connection for registrations (see the module's text).
#[pin_data]
pub(crate) struct RegLink {
    ev: Arc<Events>,
    /// `None` once shut down.
    #[pin]
    parts: Mutex<Option<Parts>>,
    /// Held by a registration from its post to its completion, so the
    /// send queue never overflows.
    #[pin]
    serial: Mutex<()>,
}

impl RegLink {
    /// Builds the link of a domain on `dev` in `net`, its QPs on `pd`.
    /// Process context; takes at most [`SETUP_MS`]. `EADDRNOTAVAIL` when
    /// the device has no IPv4 address there, or when rdma_cm binds its
    /// address to another device.
    pub(crate) fn new(dev: &Device, net: NetPtr, pd: &Arc<Pd>) -> Result<Arc<Self>> {
        let local = dev.ipv4_addr(net.0)?;
        let ev = Arc::pin_init(
            pin_init!(Events {
                p <- new_mutex!(Progress::default()),
                changed <- new_condvar!(),
            }),
            GFP_KERNEL,
        )?;
        let mut parts = Parts {
            ev: ev.clone(),
            listener: None,
            active: None,
            passive: None,
            cq: None,
            _pd: pd.clone(),
        };
        let mut left = msecs_to_jiffies(SETUP_MS);
        let listener = parts.listener.insert(CmId::new(net.0, ev.clone())?);
        listener.listen(&local, 1)?;
        let mut raw = [0u8; 128];
        let n = listener.addr(false, &mut raw);
        let bound = Addr::from_bytes(raw.get(..n).ok_or(EINVAL)?)?;
        let active = parts.active.insert(CmId::new(net.0, ev.clone())?);
        ev.p.lock().active = active.ident();
        active.resolve_addr(&bound)?;
        ev.wait(&mut left, |p| p.addr_resolved)?;
        if !dev.is(active.device()) {
            return Err(EADDRNOTAVAIL);
        }
        active.resolve_route()?;
        ev.wait(&mut left, |p| p.route_resolved)?;
        // SAFETY: The device is registered while the domain has its PD
        // (the caller's); the link is shut down before the device's
        // removal ends, and `Parts` destroys the QPs before the CQ.
        let new_cq = unsafe { Cq::new(dev.as_ptr(), 2 * SEND_DEPTH + 4) }?;
        let cq = parts.cq.insert(new_cq);
        active.create_qp(pd, cq, cq, (SEND_DEPTH, 1), 1)?;
        let n = active.addr(false, &mut raw);
        let mine = Addr::from_bytes(raw.get(..n).ok_or(EINVAL)?)?;
        let cookie = new_cookie();
        {
            let mut p = ev.p.lock();
            p.from = Some(mine);
            p.cookie = cookie;
        }
        active.connect(&cookie, RdDepth::default())?;
        ev.wait(&mut left, |p| p.request.is_some())?;
        let request = ev.p.lock().request.take().ok_or(EPROTO)?;
        if !dev.is(request.device()) {
            return Err(EPROTO);
        }
        request.create_qp(pd, cq, cq, (SEND_DEPTH, 1), 1)?;
        let passive = parts.passive.insert(request.set_handler(ev.clone()));
        passive.accept(&[], &[], RdDepth::default())?;
        ev.wait(&mut left, |p| p.active_up && p.passive_up)?;
        // Connected: nothing more to take.
        drop(parts.listener.take());
        Arc::pin_init(
            pin_init!(Self {
                ev,
                parts <- new_mutex!(Some(parts)),
                serial <- new_mutex!(()),
            }),
            GFP_KERNEL,
        )
    }

    /// Whether registrations can be posted on the link.
    pub(crate) fn usable(&self) -> bool {
        !self.ev.p.lock().down && self.parts.lock().is_some()
    }

    /// Serializes registrations on the link: hold it from the post to the
    /// completion. Process context.
    pub(crate) fn serial(&self) -> kernel::sync::MutexGuard<'_, ()> {
        self.serial.lock()
    }

    /// Posts the registration of `fr` with access `access`; `ENOTCONN`
    /// once the link is down. Process context.
    pub(crate) fn post(&self, fr: &mut FastReg, access: u32) -> Result {
        let parts = self.parts.lock();
        let qp = parts
            .as_ref()
            .and_then(|p| p.active.as_ref())
            .map(|id| id.qp())
            .filter(|qp| !qp.is_null())
            .ok_or(ENOTCONN)?;
        if self.ev.p.lock().down {
            return Err(ENOTCONN);
        }
        // SAFETY: The link's live QP, on the PD of the domain whose regions
        // it registers; `Parts` drains it before it goes, and it cannot
        // go while `parts` is locked.
        unsafe { fr.post(qp, access) }
    }

    /// Ends the link: its QPs are drained (what was posted completes,
    /// flushed) and destroyed. Process context.
    pub(crate) fn shutdown(&self) {
        let parts = self.parts.lock().take();
        drop(parts);
    }
}
