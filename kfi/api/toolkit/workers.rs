// SPDX-License-Identifier: GPL-2.0

//! Counted workers on a workqueue of the provider's: a provider's
//! endpoints and passive endpoints run their blocking work there
//! (connecting, reading a connection request, resolving an address) and
//! wait for all of it to end before they are freed.
//!
//! Teardown: the owner first makes every worker return (shuts its sockets
//! down, marks itself closing, wakes what they wait on), then calls
//! [`Workers::wait_idle`]. A worker holds a reference to its owner, so the
//! owner's memory outlives it either way. A worker still runs (drops that
//! reference, which may free the owner) after it has counted itself out,
//! so the queue must be the provider's own, which its module's unload
//! destroys and so drains, not a system queue.

use kernel::{
    new_condvar, new_spinlock,
    prelude::*,
    sync::{Arc, CondVar, SpinLock},
    workqueue,
};

use super::task;

/// The workers of one object, embedded (pinned) in what they work for.
#[pin_data]
pub(crate) struct Workers {
    #[pin]
    count: SpinLock<u32>,
    #[pin]
    idle: CondVar,
}

impl Workers {
    /// No workers yet.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            count <- new_spinlock!(0),
            idle <- new_condvar!(),
        })
    }

    /// Runs `f(owner)` on a worker of `queue` (the provider's own, see
    /// above), counted in `owner`'s workers (which `of` finds); `ENOMEM`
    /// if it cannot be queued (`f` is dropped unrun). Process context
    /// (allocates with `GFP_KERNEL`).
    pub(crate) fn spawn<T: Send + Sync + 'static>(
        queue: &'static workqueue::Queue,
        owner: &Arc<T>,
        of: fn(&T) -> &Workers,
        f: impl FnOnce(&Arc<T>) + Send + 'static,
    ) -> Result {
        let w = of(owner);
        *w.count.lock() += 1;
        let mine = owner.clone();
        let r = task::spawn(queue, move || {
            f(&mine);
            let w = of(&mine);
            *w.count.lock() -= 1;
            w.idle.notify_all();
        });
        if r.is_err() {
            *w.count.lock() -= 1;
            w.idle.notify_all();
            return Err(ENOMEM);
        }
        Ok(())
    }

    /// Waits until every worker has ended. Process context; may sleep for
    /// as long as the workers run, so the owner first makes them return.
    pub(crate) fn wait_idle(&self) {
        let mut c = self.count.lock();
        while *c > 0 {
            self.idle.wait(&mut c);
        }
    }
}
