// SPDX-License-Identifier: GPL-2.0

//! Accepting connections with no thread waiting on the listener.
//!
//! A listening socket's data callback (`kfi_sockets_hook_listener` in
//! `kfi_sockets_sock.c`) queues the listener's accept work on the
//! provider's queue (`wq.rs`). The work accepts what the backlog holds
//! without waiting, at most [`ACCEPT_BATCH`] connections per run (then it
//! queues itself again, so a flood of connections leaves room to the
//! others on the queue), hands each to its owner's `take` (a passive or
//! RDM endpoint, which reads the request on a worker of its own) and
//! returns. An accept that fails for lack of memory or file handles is
//! retried from the hook's timer, after 10 ms doubled up to 1 s while the
//! failure lasts; the listener keeps serving.
//!
//! An endpoint holds no worker while it listens, so any number of them
//! may (a worker per listener would take one of the ~1,024 items the
//! provider's long-running queue runs at once, `wq.rs`).

use kernel::{
    new_condvar, new_mutex, new_spinlock_irq,
    prelude::*,
    sync::{Arc, CondVar, Mutex, SpinLockIrq},
    workqueue::{impl_has_work, new_work, Work, WorkItem},
};

use crate::{
    ksock::Socket,
    sock_sys::{self, c_callback, kfi_sockets_accepted, kfi_sockets_hook_listener},
    wq,
};

/// Most connections one run of the accept work takes.
const ACCEPT_BATCH: usize = 16;

/// What the owner does with an accepted connection (starts its handshake
/// on a worker); a connection it refuses (`Err`) is shut down. Process
/// context.
pub(crate) type Take = KBox<dyn Fn(&Arc<Socket>) -> Result + Send + Sync>;

struct State {
    /// Queued or running accept work.
    active: u32,
    closing: bool,
    /// The wait (ms) before the next try after a failed accept.
    pause_ms: u32,
}

/// A listening socket and its accept work.
///
/// # Invariants
///
/// While `sock` is hooked, the hook holds a reference to this listener
/// (`KBox<Arc<Listener>>`), released by [`Listening`]'s drop.
#[pin_data]
pub(crate) struct Listener {
    sock: Arc<Socket>,
    /// Taken in the listener's callback (softirq) too.
    #[pin]
    state: SpinLockIrq<State>,
    /// Signalled when `active` drops.
    #[pin]
    idle: CondVar,
    /// The owner's handler until the listener stops (it refers to the
    /// owner, which refers to the listener: dropped at stop).
    #[pin]
    take: Mutex<Option<Take>>,
    #[pin]
    work: Work<Listener>,
}

impl_has_work! {
    impl HasWork<Self> for Listener { self.work }
}

impl WorkItem for Listener {
    type Pointer = Arc<Listener>;

    fn run(this: Arc<Listener>) {
        let noio = wq::NoIo::begin();
        accept_ready(&this);
        drop(noio);
        done(&this);
    }
}

/// A listener accepting for its owner; stopped when dropped (the owner
/// drops it at its close).
pub(crate) struct Listening(Arc<Listener>);

impl Listening {
    /// Starts accepting on the listening socket `sock`, handing each
    /// connection to `take`. Process context.
    pub(crate) fn start(sock: Arc<Socket>, take: Take) -> Result<Self> {
        let l = Arc::pin_init(
            pin_init!(Listener {
                sock,
                state <- new_spinlock_irq!(State {
                    active: 0,
                    closing: false,
                    pause_ms: PAUSE_FIRST_MS,
                }),
                idle <- new_condvar!(),
                take <- new_mutex!(Some(take)),
                work <- new_work!("kfi_sockets::accept"),
            }),
            GFP_KERNEL,
        )?;
        let owner = KBox::into_raw(KBox::new(l.clone(), GFP_KERNEL)?);
        // SAFETY: A live socket; `owner` stays valid until the hook gives
        // it back (`progress::unhook` in `drop`).
        let ret = unsafe { kfi_sockets_hook_listener(l.sock.as_raw(), owner.cast()) };
        if ret != 0 {
            // SAFETY: Not handed over: made by `KBox::into_raw` just above.
            drop(unsafe { KBox::from_raw(owner) });
            return Err(Error::from_errno(ret));
        }
        // Connections that came before the hook raised no callback.
        kick(&l);
        Ok(Self(l))
    }

    /// Starts accepting as [`Listening::start`] and hands the listener to
    /// `store`, which files it under its owner's lock, or gives it back
    /// when the owner has one already (a racing `kfi_listen` or
    /// `kfi_enable` won): `EINVAL` then, and the listener given back is
    /// stopped here, after `store` has let go of the owner's lock (stopping
    /// waits for its accept work, which takes that lock). Process context.
    pub(crate) fn start_into(
        sock: Arc<Socket>,
        take: Take,
        store: impl FnOnce(Self) -> core::result::Result<(), Self>,
    ) -> Result {
        let listening = Self::start(sock, take)?;
        match store(listening) {
            Ok(()) => Ok(()),
            Err(lost) => {
                drop(lost);
                Err(EINVAL)
            }
        }
    }

    /// Files the listener in its owner's `slot` (with the owner's lock
    /// held), or gives it back if the slot has one already.
    pub(crate) fn file_in(self, slot: &mut Option<Self>) -> core::result::Result<(), Self> {
        if slot.is_some() {
            return Err(self);
        }
        *slot = Some(self);
        Ok(())
    }

    /// The listening socket.
    pub(crate) fn sock(&self) -> &Arc<Socket> {
        &self.0.sock
    }
}

impl Drop for Listening {
    /// Stops accepting: no callback or timer queues the work any more, the
    /// socket is shut down (connections in its backlog are dropped), the
    /// work has finished, and the owner's handler is dropped. Process
    /// context; waits at most for one run of the work.
    fn drop(&mut self) {
        let l = &self.0;
        // Before `take`: a run under way stops at its next accept.
        l.state.lock().closing = true;
        // The accept work holds `take` through its run: with it, no socket
        // is between its accept and the restore of the data callback it
        // inherited from the hook (`kfi_sockets_accepted` needs the hook
        // to find the callback to restore).
        let take = l.take.lock();
        let owner = crate::progress::unhook_raw(&l.sock);
        drop(take);
        if !owner.is_null() {
            // SAFETY: The pointer `start` made by `KBox::into_raw`; no
            // callback or timer uses it any more.
            drop(unsafe { KBox::from_raw(owner.cast::<Arc<Listener>>()) });
        }
        l.sock.shutdown();
        let mut s = l.state.lock();
        while s.active > 0 {
            l.idle.wait(&mut s);
        }
        drop(s);
        drop(l.take.lock().take());
    }
}

/// Queues the accept work unless it is queued already or the listener
/// stops. Any context but hard interrupt.
fn kick(l: &Arc<Listener>) {
    {
        let mut s = l.state.lock();
        if s.closing {
            return;
        }
        s.active += 1;
    }
    if wq::queue().enqueue(l.clone()).is_err() {
        // Already queued: that run accepts what we were called for.
        done(l);
    }
}

/// A run of the accept work has finished, or was not queued.
fn done(l: &Listener) {
    let mut s = l.state.lock();
    s.active = s.active.saturating_sub(1);
    drop(s);
    l.idle.notify_all();
}

/// The first wait after a failed accept, and the longest.
const PAUSE_FIRST_MS: u32 = 10;
const PAUSE_MAX_MS: u32 = 1000;

/// Accepts what the backlog holds (one run of the accept work).
fn accept_ready(l: &Arc<Listener>) {
    let guard = l.take.lock();
    let Some(take) = guard.as_ref() else {
        return;
    };
    for _ in 0..ACCEPT_BATCH {
        if l.state.lock().closing {
            return;
        }
        let s = match l.sock.accept(true) {
            Ok(s) => s,
            Err(e) if e == EAGAIN => return,
            // A connection that ended in the backlog: the next one.
            Err(e) if e == ECONNABORTED => continue,
            Err(_) => {
                // Out of memory or file handles: the connection stays in
                // the backlog, and no callback will say so again.
                let ms = {
                    let mut st = l.state.lock();
                    let ms = st.pause_ms;
                    st.pause_ms = ms.saturating_mul(2).min(PAUSE_MAX_MS);
                    ms
                };
                crate::progress::arm_timer(&l.sock, ms);
                return;
            }
        };
        l.state.lock().pause_ms = PAUSE_FIRST_MS;
        // SAFETY: Both live sockets; `s` was just accepted from `l.sock`.
        unsafe { kfi_sockets_accepted(l.sock.as_raw(), s.as_raw()) };
        // Without memory for it, `s` is dropped: released, the peer sees
        // the connection end.
        let Ok(s) = Arc::new(s, GFP_KERNEL) else {
            continue;
        };
        if take(&s).is_err() {
            s.shutdown();
        }
    }
    // More may wait: after the others on the queue.
    drop(guard);
    kick(l);
}

/// `kfi_sockets_sock.c`: a connection is ready to be accepted on a hooked
/// listener, or its retry timer fired (softirq context).
///
/// # Safety
///
/// `owner` is a pointer `Listening::start` installed and the hook has not
/// given back.
#[no_mangle]
unsafe extern "C" fn kfi_sockets_accept_ready(owner: *mut c_void) {
    // SAFETY: As required: a live `KBox<Arc<Listener>>`.
    kick(unsafe { &*owner.cast::<Arc<Listener>>() });
}

// kfi_sockets_sock.c calls this by its declaration in kfi_sockets_glue.h:
// the build fails unless it has the same signature.
c_callback!(sock_sys::kfi_sockets_accept_ready, kfi_sockets_accept_ready);
