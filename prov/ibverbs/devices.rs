// SPDX-License-Identifier: GPL-2.0

//! The RDMA devices present now, as ib_core announces them to the
//! provider's client. getinfo answers from this list; a domain holds its
//! device's entry.

use kernel::{prelude::*, sync::Arc};

use crate::{ib::device::Device, ib_sys as sys};

kernel::sync::global_lock! {
    // SAFETY: Initialized in the module initializer before the client is
    // registered, the first user.
    unsafe(uninit) static DEVICES: Mutex<KVec<Arc<Device>>> = KVec::new();
}

/// Prepares the list. Called once, from the module initializer.
pub(crate) fn init() {
    // SAFETY: Called once, before any other use of the lock.
    unsafe { DEVICES.init() };
}

/// Frees the list's memory (at module unload, after the client is
/// unregistered: a static is never dropped).
pub(crate) fn release() {
    drop(core::mem::take(&mut *DEVICES.lock()));
}

/// The devices present now. Process context.
pub(crate) fn snapshot() -> Result<KVec<Arc<Device>>> {
    let list = DEVICES.lock();
    let mut v = KVec::with_capacity(list.len(), GFP_KERNEL)?;
    for d in list.iter() {
        v.push(d.clone(), GFP_KERNEL)?;
    }
    Ok(v)
}

/// The device named `name`, if present. Process context.
pub(crate) fn by_name(name: &CStr) -> Option<Arc<Device>> {
    DEVICES.lock().iter().find(|d| *d.name == *name).cloned()
}

/// The device at `ptr`, if present. Process context.
pub(crate) fn by_ptr(ptr: *const sys::ib_device) -> Option<Arc<Device>> {
    DEVICES.lock().iter().find(|d| d.is(ptr)).cloned()
}

/// Adds a device ib_core announced (if it has an RDMA link the provider
/// uses). Process context.
///
/// # Safety
///
/// `dev` is registered until `remove` is called for it.
pub(crate) unsafe fn add(dev: *mut sys::ib_device) -> Result {
    // SAFETY: `dev` stays registered until `remove`, which takes it out
    // of the list (the caller's contract).
    let Some(d) = (unsafe { Device::new(dev) })? else {
        return Ok(());
    };
    let d = Arc::new(d, GFP_KERNEL)?;
    DEVICES.lock().push(d, GFP_KERNEL)?;
    Ok(())
}

/// Takes a device that is going away out of the list, and marks it gone
/// for those who hold it. Process context.
pub(crate) fn remove(dev: *mut sys::ib_device) {
    let mut list = DEVICES.lock();
    if let Some(i) = list.iter().position(|d| d.is(dev)) {
        if let Ok(d) = list.remove(i) {
            d.mark_gone();
        }
    }
}
