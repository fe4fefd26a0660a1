// SPDX-License-Identifier: GPL-2.0

//! The provider's own workqueue (`kfi_sockets_sock.c` makes it): the
//! connections' receive and transmit work runs there, so a few hundred
//! connections whose peers stall inside a frame cannot take the system's
//! shared workers from other kernel users. The listeners' accept work
//! (`accept.rs`) and the RDM endpoints' dispatch work (`rdm.rs`), which
//! never wait, run here too. (The workers that read a request or open a
//! connection, which wait by nature until the handshake deadline, stay on
//! the system's long-running queue, so they never take the connections'
//! workers.)
//! Made at module load, destroyed at unload (after every object of the
//! provider is gone, so nothing is queued any more; destroying drains what
//! still runs).

use core::{
    ptr::null_mut,
    sync::atomic::{AtomicPtr, Ordering},
};
use kernel::{bindings, prelude::*, workqueue::Queue};

use crate::sock_sys::kfi_sockets_alloc_wq;

/// The queue while the module is loaded, else NULL.
static QUEUE: AtomicPtr<bindings::workqueue_struct> = AtomicPtr::new(null_mut());

/// The provider's queue, owned by the module: destroyed when dropped.
pub(crate) struct OwnQueue(());

impl OwnQueue {
    /// Makes the queue (`unbound`: not tied to the queuing CPU). Process
    /// context, once, at module load.
    pub(crate) fn new(unbound: bool) -> Result<Self> {
        // SAFETY: No preconditions; process context (module load).
        let wq = unsafe { kfi_sockets_alloc_wq(c_int::from(unbound)) };
        if wq.is_null() {
            return Err(ENOMEM);
        }
        QUEUE.store(wq, Ordering::Release);
        Ok(Self(()))
    }
}

impl Drop for OwnQueue {
    fn drop(&mut self) {
        let wq = QUEUE.swap(null_mut(), Ordering::AcqRel);
        if !wq.is_null() {
            // SAFETY: Made by `kfi_sockets_alloc_wq`, destroyed once; the
            // module's objects are gone, so nothing queues on it any more.
            unsafe { bindings::destroy_workqueue(wq) };
        }
    }
}

/// The provider's queue.
pub(crate) fn queue() -> &'static Queue {
    let wq = QUEUE.load(Ordering::Acquire);
    if wq.is_null() {
        // Not reached while the provider is registered (the queue is made
        // first and destroyed last); the system's queue keeps it safe.
        return kernel::workqueue::system_unbound();
    }
    // SAFETY: A live workqueue until `OwnQueue` is dropped, after the last
    // object of the module that could queue on it.
    unsafe { Queue::from_raw(wq) }
}
