// SPDX-License-Identifier: GPL-2.0

//! Passive endpoints: an rdma_cm listener whose connection requests go to
//! the ULP as `KFI_CONNREQ` events, each named by a handle until an
//! endpoint takes it (accept) or `kfi_reject` answers it. A listener holds
//! at most [`BACKLOG`] unanswered requests, and its EQ takes requests only
//! while it is less than half full (kfabric.ko's rule); others are
//! refused.

use kernel::{
    new_mutex, new_spinlock,
    prelude::*,
    sync::{Arc, Mutex, SpinLock},
};

use crate::{
    devices, entry,
    flush::{FlushAt, Trailer},
    ib::{
        addr::Addr,
        cm::{self, CmId, RdDepth},
        device::Link,
    },
    ib_sys as sys,
    kfi::{
        kfi_sys as ksys,
        provider::{EqRef, FidRef},
        toolkit::handles::HandleTable,
    },
    net::NetPtr,
};

/// Connection requests rdma_cm queues for a listener before its handler
/// takes them, and the most a listener holds unanswered (reported, not
/// yet accepted or rejected): more are refused, so a peer's flood of
/// requests costs a bounded amount of memory.
const BACKLOG: usize = 64;

/// A request's identifier, shared between the table and the listener's
/// handler so that a failed filing can still give it back to rdma_cm.
#[pin_data]
pub(crate) struct Request {
    #[pin]
    id: SpinLock<Option<CmId<()>>>,
    /// The peer's offer of read and atomic depths, from our side.
    offer: RdDepth,
    /// Where the peer's flush region is, if it named one (`flush.rs`).
    flush: Option<FlushAt>,
}

impl Request {
    /// Takes the identifier (once).
    pub(crate) fn take(&self) -> Option<CmId<()>> {
        self.id.lock().take()
    }

    /// Whether the request arrived on device `dev`.
    fn on(&self, dev: *mut sys::ib_device) -> bool {
        self.id.lock().as_ref().is_some_and(|i| i.device() == dev)
    }
}

kernel::sync::global_lock! {
    // SAFETY: Initialized in the module initializer before the provider
    // is registered.
    unsafe(uninit) static REQUESTS: Mutex<HandleTable<Arc<Request>>> = HandleTable::new();
}

/// Prepares the request table. Once, from the module initializer.
pub(crate) fn init() {
    // SAFETY: Called once, before any other use.
    unsafe { REQUESTS.init() };
}

/// Takes the request `handle` names (for the endpoint that accepts it),
/// with the peer's offer of read and atomic depths and its flush region;
/// EINVAL for a handle that names no waiting request. Process context.
pub(crate) fn take_request(
    handle: *mut ksys::kfid,
) -> Result<(CmId<()>, RdDepth, Option<FlushAt>)> {
    let r = REQUESTS.lock().take(handle)?;
    Ok((r.take().ok_or(EINVAL)?, r.offer, r.flush))
}

/// Destroys the requests that arrived on `dev`, which is going away (their
/// handles become stale). Process context (the device's removal).
pub(crate) fn device_removed(dev: *mut sys::ib_device) {
    loop {
        let r = REQUESTS.lock().take_where(|r| r.on(dev));
        match r {
            Some(r) => drop(r.take()),
            None => break,
        }
    }
}

/// Destroys every request never answered, and the table's memory (at
/// module unload).
pub(crate) fn release() {
    loop {
        let r = REQUESTS.lock().take_any();
        match r {
            Some(r) => drop(r.take()),
            None => break,
        }
    }
}

/// What the listener's event handler needs once the ULP bound it.
#[derive(Default)]
struct Bindings {
    fid: Option<FidRef>,
    eq: Option<EqRef>,
}

/// The listener's shared part: the handler of its rdma_cm identifier.
#[pin_data]
pub(crate) struct Listener {
    addr: Addr,
    net: NetPtr,
    #[pin]
    bound: Mutex<Bindings>,
    /// The listening identifier (its context holds a reference on this
    /// listener: the cycle ends when the passive endpoint closes).
    #[pin]
    id: Mutex<Option<CmId<Listener>>>,
}

impl Listener {
    /// The owner value of this listener's requests in the table.
    fn owner(&self) -> usize {
        core::ptr::from_ref(self) as usize
    }

    /// Files `req` and tells the ULP; on failure the request is left in
    /// `req` for the caller to refuse.
    fn file(&self, req: &Arc<Request>, data: &[u8]) -> Result {
        let b = self.bound.lock();
        let (Some(fid), Some(eq)) = (b.fid, b.eq) else {
            return Err(ENOTCONN);
        };
        drop(b);
        let dev = {
            let id = req.id.lock();
            id.as_ref().map(|i| i.device())
        };
        let dev = devices::by_ptr(dev.ok_or(EINVAL)?)
            .filter(|d| crate::offered(d))
            .ok_or(ENODEV)?;
        let mut info = entry(&dev, Some(&self.addr), true, self.net.0)?;
        let handle = {
            // Under the table's lock, which the device's removal takes to
            // find its requests: one it would miss sees the device gone.
            let mut requests = REQUESTS.lock();
            if dev.gone() {
                return Err(ENODEV);
            }
            if requests.owned_by(self.owner()) >= BACKLOG {
                return Err(ECONNREFUSED);
            }
            requests.insert(req.clone(), self.owner())?
        };
        info.get().handle = handle;
        if let Err(e) = eq.post_connreq(fid, info, data) {
            // The ULP never sees the handle.
            let _ = REQUESTS.lock().take(handle);
            return Err(e);
        }
        Ok(())
    }
}

impl Listener {
    /// Posts an error entry `err` for the passive endpoint on its EQ, if
    /// both are bound. Under the bindings' lock, which the passive
    /// endpoint's close clears first: nothing is posted once it has.
    /// Process context.
    fn report(&self, err: Error) {
        let b = self.bound.lock();
        if let (Some(fid), Some(eq)) = (b.fid, b.eq) {
            let _ = eq.post_err(fid, err, &[]);
        }
    }
}

impl cm::Handler for Listener {
    fn event(&self, _id: *mut sys::rdma_cm_id, ev: cm::Event<'_>) -> Result {
        match ev {
            // The device goes: rdma_cm destroys the identifier, unless
            // the passive endpoint's close is doing so already.
            cm::Event::DeviceRemoval => {
                let taken = self.id.lock().take();
                match taken {
                    Some(id) => {
                        id.forget();
                        // Its ULP would wait for requests that cannot
                        // come.
                        self.report(ENODEV);
                        Ok(())
                    }
                    None => Err(EBUSY),
                }
            }
            _ => Ok(()),
        }
    }

    fn request(
        &self,
        child: CmId<()>,
        data: cm::Private<'_>,
        offer: RdDepth,
    ) -> core::result::Result<(), CmId<()>> {
        let req = match Arc::pin_init(
            pin_init!(Request {
                id <- new_spinlock!(None),
                offer,
                flush: Trailer::parse(data.extra),
            }),
            GFP_KERNEL,
        ) {
            Ok(r) => r,
            Err(_) => return Err(child),
        };
        *req.id.lock() = Some(child);
        match self.file(&req, data.data) {
            Ok(()) => Ok(()),
            // Refused: rdma_cm destroys it (not us, inside its callback).
            Err(_) => req.take().map_or(Ok(()), Err),
        }
    }
}

/// A passive endpoint.
pub(crate) struct IbPep {
    shared: Arc<Listener>,
}

impl IbPep {
    /// A passive endpoint for the source address of `info`. Process
    /// context.
    pub(crate) fn new(info: &ksys::kfi_info) -> Result<Self> {
        let net = NetPtr::of(info);
        if info.src_addr.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: An entry's source address holds `src_addrlen` bytes.
        let bytes =
            unsafe { core::slice::from_raw_parts(info.src_addr.cast::<u8>(), info.src_addrlen) };
        let addr = Addr::from_bytes(bytes)?;
        let shared = Arc::pin_init(
            pin_init!(Listener {
                addr,
                net,
                bound <- new_mutex!(Bindings::default()),
                id <- new_mutex!(None),
            }),
            GFP_KERNEL,
        )?;
        Ok(Self { shared })
    }

    pub(crate) fn opened(&self, fid: FidRef) {
        self.shared.bound.lock().fid = Some(fid);
    }

    pub(crate) fn bind_eq(&self, eq: EqRef) -> Result {
        self.shared.bound.lock().eq = Some(eq);
        Ok(())
    }

    /// Starts listening. Process context.
    pub(crate) fn listen(&self) -> Result {
        if self.shared.bound.lock().eq.is_none() {
            return Err(crate::kfi::kfabric::kfi_error(ksys::KFI_ENOEQ));
        }
        let mut slot = self.shared.id.lock();
        if slot.is_some() {
            return Err(EBUSY);
        }
        let id = CmId::new(self.shared.net.0, self.shared.clone())?;
        if let Err(e) = id.listen(&self.shared.addr, BACKLOG as i32) {
            // Unlocked first: destroying `id` waits for its handler, and a
            // device removal's handler waits for this lock.
            drop(slot);
            drop(id);
            return Err(e);
        }
        *slot = Some(id);
        Ok(())
    }

    /// Refuses the request `handle` names, with private `data`.
    pub(crate) fn reject(&self, handle: *mut ksys::kfid, data: &[u8]) -> Result {
        let (id, ..) = take_request(handle)?;
        let iwarp = devices::by_ptr(id.device()).is_some_and(|d| d.link == Link::Iwarp);
        if !cm::ulp_data_fits(data.len(), iwarp) {
            // The request is refused all the same, without the data.
            let _ = id.reject(&[]);
            return Err(EINVAL);
        }
        id.reject(data)
    }

    pub(crate) fn getname(&self, out: &mut [u8]) -> Result<usize> {
        let a = self.shared.addr.as_bytes();
        let n = a.len().min(out.len());
        out[..n].copy_from_slice(&a[..n]);
        Ok(a.len())
    }
}

impl Drop for IbPep {
    fn drop(&mut self) {
        // No error entry posted from here on: a device removal's handler
        // may still run (it took the identifier, so destroying ours does
        // not wait for it), and the ULP's objects go once this returns. A
        // request handler under way may still post its request until the
        // identifier is destroyed below (which waits for it); that
        // request is dropped with the others, and kfabric.ko's close
        // takes its event out of the EQ.
        *self.shared.bound.lock() = Bindings::default();
        // No new requests (the identifier is destroyed outside the lock
        // its handler takes), then the ones never answered.
        let id = self.shared.id.lock().take();
        drop(id);
        let owner = self.shared.owner();
        loop {
            let r = REQUESTS.lock().take_owned_by(owner);
            match r {
                Some(r) => drop(r.take()),
                None => break,
            }
        }
    }
}
