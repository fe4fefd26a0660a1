// SPDX-License-Identifier: GPL-2.0

//! A closure run once as a work item of the calling module, in place of
//! the kernel crate's `Queue::try_spawn`: that one's work items share a
//! single lockdep class key among every module that uses it, which the
//! debug kernel's lockdep refuses once two modules do. Here the key is
//! this file's, and each module that includes `kfi/api` compiles its own
//! copy of it.

use kernel::{
    prelude::*,
    workqueue::{impl_has_work, new_work, Queue, Work, WorkItem},
};

/// The work item that carries one closure.
#[pin_data]
struct Task<F> {
    #[pin]
    work: Work<Task<F>>,
    func: Option<F>,
}

impl_has_work! {
    impl{F} HasWork<Self> for Task<F> { self.work }
}

impl<F: FnOnce()> WorkItem for Task<F> {
    type Pointer = Pin<KBox<Self>>;

    fn run(mut this: Pin<KBox<Self>>) {
        if let Some(func) = this.as_mut().project().func.take() {
            func();
        }
    }
}

/// Runs `func` once on `queue`; `ENOMEM` if it cannot be allocated (then
/// `func` is dropped unrun). A fresh item is always queued. Process
/// context with `GFP_KERNEL`.
pub(crate) fn spawn<F: FnOnce() + Send + 'static>(queue: &Queue, func: F) -> Result {
    let task = KBox::pin_init(
        pin_init!(Task {
            work <- new_work!("kfi::toolkit::task"),
            func: Some(func),
        }),
        GFP_KERNEL,
    )
    .map_err(|_| ENOMEM)?;
    queue.enqueue(task);
    Ok(())
}
