// SPDX-License-Identifier: GPL-2.0

//! A domain's device side: its RDMA device and namespace, the protection
//! domain while the device is there, its open regions, its registration
//! link, and the lock that orders teardowns of resources on it. Shared by the domain
//! (`domain.rs`) and its connections (`conn.rs`), which need only this of
//! each other's.

use kernel::{
    new_mutex,
    prelude::*,
    sync::{Arc, Mutex, MutexGuard},
    time::{Instant, Monotonic},
};

use crate::{
    ib::{device::Device, verbs::Pd},
    net::NetPtr,
    region::IbRegion,
    reglink::RegLink,
};

/// How long a domain whose registration link could not be built posts
/// its registrations on its connections before it tries again.
const LINK_RETRY_MS: i64 = 10_000;

/// A domain's registration link, or when building one last failed.
#[derive(Default)]
struct LinkSlot {
    link: Option<Arc<RegLink>>,
    failed: Option<Instant<Monotonic>>,
}

/// A domain's device, PD and teardown lock.
#[pin_data]
pub(crate) struct DomDev {
    pub(crate) dev: Arc<Device>,
    pub(crate) net: NetPtr,
    /// The PD; `None` once the device is gone.
    #[pin]
    pd: Mutex<Option<Arc<Pd>>>,
    /// Held while an endpoint's QP, ring and CQs are torn down (its close
    /// or the device's removal), so the PD outlives every teardown. Lock
    /// order: this, then an endpoint's state lock; rdma_cm's handler lock
    /// is never taken under it.
    #[pin]
    teardown: Mutex<()>,
    /// Open regions, whose MRs the device's removal frees.
    #[pin]
    regions: Mutex<KVec<Arc<IbRegion>>>,
    /// The domain's own connection for registrations, once built; held
    /// while it is built, so a device's removal waits for that. Here, not
    /// in the domain, as connections register regions a peer invalidated
    /// again on it.
    #[pin]
    link: Mutex<LinkSlot>,
    /// Held by every registration that may go on a connection (before
    /// the link's `serial` and the teardown lock) from the post to the
    /// completion: one at a time on the connections, whose send queues
    /// have room for one (`conn::SEND_DEPTH`), a region's registration
    /// again after a peer invalidated it included.
    #[pin]
    conn_regs: Mutex<()>,
}

impl DomDev {
    /// The device side of a domain on `dev` in `net` with `pd`. Process
    /// context.
    pub(crate) fn new(dev: Arc<Device>, net: NetPtr, pd: Arc<Pd>) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(DomDev {
                dev,
                net,
                pd <- new_mutex!(Some(pd)),
                teardown <- new_mutex!(()),
                regions <- new_mutex!(KVec::new()),
                link <- new_mutex!(LinkSlot::default()),
                conn_regs <- new_mutex!(()),
            }),
            GFP_KERNEL,
        )
    }

    /// The PD, while the device is there (ENODEV after its removal).
    pub(crate) fn pd(&self) -> Result<Arc<Pd>> {
        self.pd.lock().clone().ok_or(ENODEV)
    }

    /// Takes the PD out (the device is going): `pd` is ENODEV from here.
    pub(crate) fn take_pd(&self) -> Option<Arc<Pd>> {
        self.pd.lock().take()
    }

    /// Whether the device is still there (the PD not yet taken).
    pub(crate) fn present(&self) -> bool {
        self.pd.lock().is_some()
    }

    /// Serializes teardowns of device resources (see `teardown`).
    pub(crate) fn teardown(&self) -> MutexGuard<'_, ()> {
        self.teardown.lock()
    }

    /// Tracks region `r` for the device's removal.
    pub(crate) fn add_region(&self, r: Arc<IbRegion>) -> Result {
        self.regions.lock().push(r, GFP_KERNEL)?;
        Ok(())
    }

    /// Stops tracking region `r` (at its close).
    pub(crate) fn remove_region(&self, r: &IbRegion) {
        let mut l = self.regions.lock();
        if let Some(i) = l.iter().position(|x| core::ptr::eq(&**x, r)) {
            let _ = l.remove(i);
        }
    }

    /// Every region, no longer tracked (the device is going).
    pub(crate) fn take_regions(&self) -> KVec<Arc<IbRegion>> {
        core::mem::take(&mut *self.regions.lock())
    }

    /// The open region whose remote key is `key`, if there is one.
    pub(crate) fn region_of(&self, key: u32) -> Option<Arc<IbRegion>> {
        self.regions.lock().iter().find(|r| r.key() == key).cloned()
    }

    /// The domain's connection for registrations, built now if it is not
    /// up; `None` when it cannot be (no IPv4 address on the device, the
    /// device gone, a setup that failed less than [`LINK_RETRY_MS`] ago,
    /// ...: the reason is logged at debug level), and the registration
    /// goes on a connection. `EINTR` when a signal cut the setup short.
    /// Process context; waits at most for the link's setup.
    pub(crate) fn reg_link(&self) -> Result<Option<Arc<RegLink>>> {
        let mut l = self.link.lock();
        if let Some(k) = l.link.as_ref().filter(|k| k.usable()) {
            return Ok(Some(k.clone()));
        }
        // A link that went down is built again (the old one's QPs go).
        if let Some(old) = l.link.take() {
            old.shutdown();
        }
        if l.failed
            .is_some_and(|t| t.elapsed().as_millis() < LINK_RETRY_MS)
        {
            return Ok(None);
        }
        // The device stays registered while the PD is there: its removal
        // takes the PD first, then this lock, then shuts the link down.
        let Ok(pd) = self.pd() else {
            return Ok(None);
        };
        match RegLink::new(&self.dev, self.net, &pd) {
            Ok(k) => {
                l.failed = None;
                Ok(Some(l.link.insert(k).clone()))
            }
            Err(e) if e == EINTR => Err(e),
            Err(e) => {
                l.failed = Some(Instant::now());
                pr_debug!(
                    "kfi_ibverbs: {:?}: no registration link ({})\n",
                    &*self.dev.name,
                    e.to_errno()
                );
                Ok(None)
            }
        }
    }

    /// Shuts the registration link down, if there is one. Process context.
    pub(crate) fn end_link(&self) {
        let link = self.link.lock().link.take();
        if let Some(k) = link {
            k.shutdown();
        }
    }

    /// Serializes registrations posted on connections: hold it from the
    /// post to the completion. Process context.
    pub(crate) fn conn_regs(&self) -> MutexGuard<'_, ()> {
        self.conn_regs.lock()
    }
}
