// SPDX-License-Identifier: GPL-2.0

//! A domain's device side: its RDMA device and namespace, the protection
//! domain while the device is there, its open regions, and the lock that
//! orders teardowns of resources on it. Shared by the domain
//! (`domain.rs`) and its connections (`conn.rs`), which need only this of
//! each other's.

use kernel::{
    new_mutex,
    prelude::*,
    sync::{Arc, Mutex, MutexGuard},
};

use crate::{
    ib::{device::Device, verbs::Pd},
    net::NetPtr,
    region::IbRegion,
};

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
}
