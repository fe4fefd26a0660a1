// SPDX-License-Identifier: GPL-2.0

//! The provider's own workqueues (`kfi_sockets_sock.c` makes them). The
//! connections' receive and transmit work runs on the first, so a few
//! hundred connections whose peers stall inside a frame cannot take the
//! system's shared workers from other kernel users. The listeners' accept
//! work (`accept.rs`) and the RDM endpoints' dispatch work (`rdm.rs`),
//! which never wait, run there too. The workers that read a request or
//! open a connection, which wait by nature until the handshake deadline,
//! run on the second (`long_queue`), so they never take the connections'
//! workers.
//! Made at module load, destroyed at unload (after every object of the
//! provider is gone, so nothing is queued any more; destroying drains what
//! still runs, such as a worker that has told the close it is done but
//! still drops its reference to the endpoint).

use core::{
    marker::PhantomData,
    ptr::null_mut,
    sync::atomic::{AtomicPtr, Ordering},
};
use kernel::{bindings, prelude::*, sync::Arc, workqueue::Queue};

use crate::{
    kfi::toolkit::workers::Workers,
    sock_sys::{
        kfi_sockets_alloc_long_wq, kfi_sockets_alloc_wq, kfi_sockets_noio_begin,
        kfi_sockets_noio_end,
    },
};

/// The queues while the module is loaded, else NULL.
static QUEUE: AtomicPtr<bindings::workqueue_struct> = AtomicPtr::new(null_mut());
static LONG: AtomicPtr<bindings::workqueue_struct> = AtomicPtr::new(null_mut());

/// The provider's queues, owned by the module: destroyed when dropped.
pub(crate) struct OwnQueue(());

impl OwnQueue {
    /// Makes the queues (`unbound`: the first is not tied to the queuing
    /// CPU). Process context, once, at module load.
    pub(crate) fn new(unbound: bool) -> Result<Self> {
        // SAFETY: No preconditions; process context (module load).
        let wq = unsafe { kfi_sockets_alloc_wq(c_int::from(unbound)) };
        if wq.is_null() {
            return Err(ENOMEM);
        }
        QUEUE.store(wq, Ordering::Release);
        // From here on the drop destroys what was made.
        let own = Self(());
        // SAFETY: No preconditions; process context (module load), as
        // for the first queue.
        let long = unsafe { kfi_sockets_alloc_long_wq() };
        if long.is_null() {
            return Err(ENOMEM);
        }
        LONG.store(long, Ordering::Release);
        Ok(own)
    }
}

impl Drop for OwnQueue {
    fn drop(&mut self) {
        for q in [&LONG, &QUEUE] {
            let wq = q.swap(null_mut(), Ordering::AcqRel);
            if !wq.is_null() {
                // Made by `kfi_sockets_alloc_wq` or `..._long_wq`.
                // SAFETY: One of ours, destroyed once; the module's objects
                // are gone, so nothing queues on it any more.
                unsafe { bindings::destroy_workqueue(wq) };
            }
        }
    }
}

/// The queue `q` holds, or `fallback` while it holds none.
fn live(
    q: &AtomicPtr<bindings::workqueue_struct>,
    fallback: fn() -> &'static Queue,
) -> &'static Queue {
    let wq = q.load(Ordering::Acquire);
    if wq.is_null() {
        // Not reached while the provider is registered (the queues are
        // made first and destroyed last); the system's queue keeps it safe.
        return fallback();
    }
    // SAFETY: A live workqueue until `OwnQueue` is dropped, after the last
    // object of the module that could queue on it.
    unsafe { Queue::from_raw(wq) }
}

/// The provider's queue for the connections' work.
pub(crate) fn queue() -> &'static Queue {
    live(&QUEUE, kernel::workqueue::system_unbound)
}

/// The provider's queue for handshake workers, which may wait on a peer
/// until the handshake deadline.
pub(crate) fn long_queue() -> &'static Queue {
    live(&LONG, kernel::workqueue::system_long)
}

/// Runs `f` on a handshake worker of `owner` (`Workers::spawn` on the
/// long queue; `owner`'s close waits for it), whose allocations start no
/// I/O ([`NoIo`]), as the connections' own work's do. Process context.
pub(crate) fn spawn_long<T: Send + Sync + 'static>(
    owner: &Arc<T>,
    of: fn(&T) -> &Workers,
    f: impl FnOnce(&Arc<T>) + Send + 'static,
) -> Result {
    Workers::spawn(long_queue(), owner, of, |o| {
        let _noio = NoIo::begin();
        f(o)
    })
}

/// While it lives, the task's allocations start no I/O (`GFP_KERNEL`
/// acts as `GFP_NOIO`): the connections' work may be what a storage ULP's
/// writeback waits for, so reclaim must not wait for writeback in turn.
/// The sockets allocate with `GFP_NOIO` too (`kfi_sockets_hook`), and so
/// do posters while they send inline (`tx.rs`). Task context; dropped on
/// the task that made it (so not `Send`).
pub(crate) struct NoIo(c_uint, PhantomData<*const ()>);

impl NoIo {
    pub(crate) fn begin() -> Self {
        // SAFETY: No preconditions; task context (a work item or an
        // inline sender).
        Self(unsafe { kfi_sockets_noio_begin() }, PhantomData)
    }
}

impl Drop for NoIo {
    fn drop(&mut self) {
        // SAFETY: Restores what `begin` saved, on the same task: a
        // guard is made and dropped within one call on one task.
        unsafe { kfi_sockets_noio_end(self.0) };
    }
}
