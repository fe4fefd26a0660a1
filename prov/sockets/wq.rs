// SPDX-License-Identifier: GPL-2.0

//! The provider's own workqueues (`own_queue::QueueSlot`). The
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

use core::{ffi::c_uint, marker::PhantomData};
use kernel::{bindings, prelude::*, sync::Arc, workqueue::Queue};

use crate::{
    kfi::toolkit::{own_queue::QueueSlot, workers::Workers},
    sock_sys::{kfi_sockets_noio_begin, kfi_sockets_noio_end},
};

/// The queues while the module is loaded.
static QUEUE: QueueSlot = QueueSlot::new();
static LONG: QueueSlot = QueueSlot::new();

/// The provider's queues, owned by the module: destroyed when dropped.
pub(crate) struct OwnQueue(());

impl OwnQueue {
    /// Makes the queues. The first is high priority (a frame waits on
    /// it), with a rescuer (storage ULPs run over it under memory
    /// pressure), and `unbound` (not tied to the queuing CPU) or per-CPU;
    /// the second is unbound. Process context, once, at module load.
    pub(crate) fn new(unbound: bool) -> Result<Self> {
        // One of the two the workqueue code asks for.
        let cpus = if unbound {
            bindings::wq_flags_WQ_UNBOUND
        } else {
            bindings::wq_flags_WQ_PERCPU
        };
        let flags = bindings::wq_flags_WQ_HIGHPRI | bindings::wq_flags_WQ_MEM_RECLAIM | cpus;
        QUEUE.make(c"kfi_sockets", flags as c_uint)?;
        // From here on the drop destroys what was made.
        let own = Self(());
        LONG.make(c"kfi_sockets_long", bindings::wq_flags_WQ_UNBOUND as c_uint)?;
        Ok(own)
    }
}

impl Drop for OwnQueue {
    fn drop(&mut self) {
        // The module's objects are gone, so nothing queues on them any
        // more.
        LONG.destroy();
        QUEUE.destroy();
    }
}

/// The provider's queue for the connections' work (the system's unbound
/// queue is not reached while the provider is registered: the queues are
/// made first and destroyed last).
pub(crate) fn queue() -> &'static Queue {
    QUEUE.get(kernel::workqueue::system_unbound)
}

/// The provider's queue for handshake workers, which may wait on a peer
/// until the handshake deadline.
pub(crate) fn long_queue() -> &'static Queue {
    LONG.get(kernel::workqueue::system_long)
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
