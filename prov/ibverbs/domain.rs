// SPDX-License-Identifier: GPL-2.0

//! Domains: one RDMA device, its protection domain, and the endpoints
//! opened on it, which the device's removal closes down.

use kernel::{
    new_condvar, new_mutex,
    prelude::*,
    sync::{Arc, CondVar, Mutex},
};

use crate::{
    conn::Conn,
    domdev::DomDev,
    ib::{device::Device, frmr::FastReg, verbs::Pd},
    ib_sys as sys,
    net::NetPtr,
};

/// A domain's shared part.
#[pin_data]
pub(crate) struct DomShared {
    /// The device, PD and teardown lock, which its connections share.
    pub(crate) dd: Arc<DomDev>,
    /// Endpoints with device resources, for the device's removal.
    #[pin]
    conns: Mutex<KVec<Arc<Conn>>>,
    /// Registrations waiting for their work request (without the
    /// teardown lock): a device's removal waits for them after it has
    /// destroyed the QPs, which flushes their requests.
    #[pin]
    regs: Mutex<usize>,
    #[pin]
    regs_idle: CondVar,
}

kernel::sync::global_lock! {
    // SAFETY: Initialized in the module initializer before the provider
    // is registered.
    unsafe(uninit) static DOMAINS: Mutex<KVec<Arc<DomShared>>> = KVec::new();
}

/// Prepares the domain list. Once, from the module initializer.
pub(crate) fn init() {
    // SAFETY: Called once, before any other use.
    unsafe { DOMAINS.init() };
}

/// Frees the list's memory (at module unload, when no domain is left: a
/// static is never dropped).
pub(crate) fn release() {
    drop(core::mem::take(&mut *DOMAINS.lock()));
}

impl DomShared {
    /// Counts a registration in flight in (`true`) or out. Called with
    /// the teardown lock held when counting in.
    pub(crate) fn reg_busy(&self, start: bool) {
        let mut n = self.regs.lock();
        if start {
            *n += 1;
        } else {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.regs_idle.notify_all();
            }
        }
    }

    /// Waits until no registration is in flight. Process context.
    fn wait_regs(&self) {
        let mut n = self.regs.lock();
        while *n > 0 {
            self.regs_idle.wait(&mut n);
        }
    }

    /// Tracks `c` for the device's removal.
    pub(crate) fn add_conn(&self, c: Arc<Conn>) -> Result {
        self.conns.lock().push(c, GFP_KERNEL)?;
        Ok(())
    }

    /// Posts the registration of `fr` on the first connection of the
    /// domain that is up: that connection. `ENOTCONN` if none is.
    pub(crate) fn post_reg(&self, fr: &mut FastReg, access: u32) -> Result<Arc<Conn>> {
        let l = self.conns.lock();
        for c in l.iter() {
            if c.post_reg(fr, access).is_ok() {
                return Ok(c.clone());
            }
        }
        Err(ENOTCONN)
    }

    /// Stops tracking `c` (at its close).
    pub(crate) fn remove_conn(&self, c: &Conn) {
        let mut l = self.conns.lock();
        if let Some(i) = l.iter().position(|x| core::ptr::eq(&**x, c)) {
            let _ = l.remove(i);
        }
    }
}

/// A domain.
pub(crate) struct IbDomain {
    pub(crate) shared: Arc<DomShared>,
}

impl IbDomain {
    /// A domain on `dev` in `net`. Process context.
    pub(crate) fn new(dev: Arc<Device>, net: NetPtr) -> Result<Self> {
        // Made and listed under the list's lock, which the device's
        // removal takes to find its domains: one it would miss sees the
        // device gone here.
        let mut domains = DOMAINS.lock();
        if dev.gone() {
            return Err(ENODEV);
        }
        // SAFETY: `dev` is not gone, so registered; the PD is dropped
        // before the device's removal ends (`device_removed`, which finds
        // this domain in the list).
        let pd = Arc::new(unsafe { Pd::new(dev.as_ptr()) }?, GFP_KERNEL)?;
        let dd = DomDev::new(dev, net, pd)?;
        let shared = Arc::pin_init(
            pin_init!(DomShared {
                dd,
                conns <- new_mutex!(KVec::new()),
                regs <- new_mutex!(0),
                regs_idle <- new_condvar!(),
            }),
            GFP_KERNEL,
        )?;
        domains.push(shared.clone(), GFP_KERNEL)?;
        Ok(Self { shared })
    }
}

impl Drop for IbDomain {
    fn drop(&mut self) {
        // Under the list's lock, which the device's removal takes to find
        // its domains: it finds this one with its link and PD (and frees
        // them itself), or finds it gone only once they are. The removal
        // lets the device go when it returns.
        let mut l = DOMAINS.lock();
        self.shared.dd.end_link();
        if let Some(i) = l.iter().position(|d| Arc::ptr_eq(d, &self.shared)) {
            let _ = l.remove(i);
        }
        drop(self.shared.dd.take_pd());
    }
}

/// The device `dev` is going: every endpoint on it loses its QP (its
/// operations complete flushed, its EQ gets a shutdown), and every PD on
/// it goes. Process context (ib_core's client removal).
pub(crate) fn device_removed(dev: *mut sys::ib_device) {
    // One domain at a time, each taken while it still has its PD: no
    // list to allocate, so no domain can be missed.
    loop {
        let Some(d) = DOMAINS
            .lock()
            .iter()
            .find(|d| d.dd.dev.is(dev) && d.dd.present())
            .cloned()
        else {
            break;
        };
        // No new QP from here on (`pd()` is ENODEV). An endpoint is in the
        // list before it makes its QP, under its state lock, which
        // `device_gone` takes: a QP being made is finished, then
        // destroyed. The PD goes after every QP on it.
        let pd = d.dd.take_pd();
        let conns = core::mem::take(&mut *d.conns.lock());
        for c in conns.iter() {
            c.device_gone(false);
        }
        // Endpoints closing and regions registering meanwhile finish
        // before the MRs and the PD go.
        drop(d.dd.teardown());
        // The registration link's QPs go like the endpoints' (a setup
        // under way finishes first), flushing what it holds.
        d.dd.end_link();
        // Registrations waiting meanwhile saw their QP flushed; they fail
        // and free their MRs now.
        d.wait_regs();
        let regions = d.dd.take_regions();
        for r in regions.iter() {
            r.device_gone();
        }
        drop(regions);
        drop(pd);
    }
}
