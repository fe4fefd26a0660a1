// SPDX-License-Identifier: GPL-2.0

//! The benchmark's threads: a closure run as a work item (of this module,
//! [`task`]) on the unbound system workqueue, whose result the caller
//! waits for.
//!
//! Every side of every run (raw and kfi alike) is such a work item, so both
//! get the scheduler placement of kfi_sockets' own progress work, which is
//! queued on the same workqueue (`prov/sockets/progress.rs`): any CPU,
//! woken by the same paths. Each closure bounds its own waits (socket
//! timeouts, CQ read timeouts), so [`Join::join`] returns.

use kernel::{
    new_condvar, new_mutex,
    prelude::*,
    sync::{Arc, CondVar, Mutex},
    workqueue,
};

use crate::kfi::toolkit::task;

/// Where a work item leaves its result.
#[pin_data]
struct Slot<T> {
    #[pin]
    value: Mutex<Option<T>>,
    #[pin]
    cv: CondVar,
}

/// A running work item; [`Join::join`] waits for its result.
pub(crate) struct Join<T: Send + Unpin>(Arc<Slot<T>>);

/// Runs `f` as a work item on the unbound system workqueue.
pub(crate) fn spawn<T, F>(f: F) -> Result<Join<T>>
where
    T: Send + Unpin + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let slot = Arc::pin_init(
        pin_init!(Slot {
            value <- new_mutex!(None),
            cv <- new_condvar!(),
        }),
        GFP_KERNEL,
    )?;
    let theirs = slot.clone();
    task::spawn(workqueue::system_unbound(), move || {
        let v = f();
        *theirs.value.lock() = Some(v);
        theirs.cv.notify_all();
    })?;
    Ok(Join(slot))
}

/// Both sides of a run, joined, once the second, `active`, could start;
/// if it could not, `alone` deals with the first (it stops it, or lets it
/// reach its deadline, and joins it) and the error is returned.
pub(crate) fn join_both<A, P>(
    active: Result<Join<A>>,
    passive: Join<P>,
    alone: impl FnOnce(Join<P>),
) -> Result<(A, P)>
where
    A: Send + Unpin,
    P: Send + Unpin,
{
    match active {
        Ok(a) => Ok((a.join(), passive.join())),
        Err(e) => {
            alone(passive);
            Err(e)
        }
    }
}

impl<T: Send + Unpin> Join<T> {
    /// Waits for the work item to finish: its result.
    pub(crate) fn join(self) -> T {
        let mut g = self.0.value.lock();
        loop {
            if let Some(v) = g.take() {
                return v;
            }
            self.0.cv.wait(&mut g);
        }
    }
}
