// SPDX-License-Identifier: GPL-2.0

//! Callback-driven progress of a kfi_sockets connection.
//!
//! No thread waits on an idle connection. The socket's callbacks
//! (`sk_data_ready`, `sk_write_space`, `sk_state_change`, installed by
//! `kfi_sockets_sock.c`) and the posting paths queue the connection's two
//! work items on the provider's own workqueue (`wq.rs`; unbound by
//! default: a callback runs on the sender's CPU, and a bound work item
//! would copy there too, measured 2-3x slower for 1 MiB RMA writes in the
//! VM, at some cost in ping-pong latency): the receive work
//! (`rx::run`) handles every frame that has arrived and returns when the
//! socket has no more bytes or a message waits for a receive to be posted
//! with no room to be held (posting one queues the work again); the transmit work (`tx::run`)
//! sends queued responses and operations and returns when there is
//! nothing it may send. A run of either ends early at its budget (frames,
//! payload bytes) and queues its work again, behind the other work items.
//! A work item may still sleep inside one frame (the
//! rest of a payload, room in the socket), never between frames; the
//! receive work only until the frame's deadline (`frame_timeout_ms`).
//!
//! The connection's response timer (in the hook, `arm_timer`) queues the
//! receive work too, when a response to one of our operations is due
//! (`rx/resp.rs`, `response_timeout_ms`).
//!
//! A thread that posts, and the receive work when it queues a response,
//! may send inline instead of queueing the transmit work ([`push_tx`]):
//! one wakeup less per frame. A poster that finds nothing queued before
//! its operation sends it without queueing it at all ([`post`]). A
//! thread that posts the receive a message waits for receives that
//! message itself, when it may sleep and the message is whole in the
//! socket (`rx::run_inline`): the receive work is not woken for it.
//!
//! Every queued or running work item, and every inline sender, is counted
//! in `State::active`, so closing can wait until none touches the
//! connection any more.

use core::ffi::c_void;
use kernel::{
    prelude::*,
    sync::Arc,
    workqueue::{impl_has_work, WorkItem},
};

use crate::{
    conn::{Shared, State},
    ksock::Socket,
    op::TxOp,
    rx,
    sock_sys::{
        self, c_callback, kfi_sockets_arm_timer, kfi_sockets_hook, kfi_sockets_may_send_inline,
        kfi_sockets_unhook,
    },
    splice, tx, wq,
};

impl_has_work! {
    impl HasWork<Self, 0> for Shared { self.rx_work }
    impl HasWork<Self, 1> for Shared { self.tx_work }
}

impl WorkItem<0> for Shared {
    type Pointer = Arc<Shared>;

    fn run(this: Arc<Shared>) {
        let noio = wq::NoIo::begin();
        rx::run(&this);
        drop(noio);
        done(&this);
    }
}

impl WorkItem<1> for Shared {
    type Pointer = Arc<Shared>;

    fn run(this: Arc<Shared>) {
        let noio = wq::NoIo::begin();
        tx::run(&this);
        drop(noio);
        done(&this);
    }
}

/// A work item or inline sender of the connection has finished.
pub(crate) fn done(sh: &Shared) {
    let mut s = sh.state.lock();
    if end_use(&mut s) {
        // Before the unlock: once it is released, the close may go on and
        // free `sh` (an inline sender holds no reference of its own).
        sh.idle.notify_all();
    }
}

/// [`done`] with the connection's state `s` locked: true when the caller
/// must wake `Shared::idle` before it unlocks. Only a close waits for the
/// last user (`wait_idle`, after `closing` was set under the same lock).
pub(crate) fn end_use(s: &mut State) -> bool {
    s.active -= 1;
    s.active == 0 && s.closing
}

/// Counts a work item about to be queued; false once the connection
/// closes.
fn begin(sh: &Shared) -> bool {
    let mut s = sh.state.lock();
    if s.closing {
        return false;
    }
    s.active += 1;
    true
}

/// Queues the receive work (any context but hard interrupt).
pub(crate) fn kick_rx(sh: &Arc<Shared>) {
    if begin(sh) && wq::queue().enqueue::<_, 0>(sh.clone()).is_err() {
        // Already queued: that run will see what we were called for.
        done(sh);
    }
}

/// Whether a thread that posts a receive may receive from its own context
/// (`rx::run_inline`): as for sending inline ([`push_tx`]), when the
/// `inline_rx` parameter allows it and the kernel can tell the caller may
/// sleep. Any context but hard interrupt.
pub(crate) fn may_receive_inline() -> bool {
    crate::inline_rx() && may_sleep()
}

/// Whether the caller may sleep, as far as the kernel can tell (see
/// [`push_tx`]): false in atomic context, and on a kernel that cannot
/// tell. Any context but hard interrupt.
pub(crate) fn may_sleep() -> bool {
    // SAFETY: No preconditions: it only looks at the caller's context.
    unsafe { kfi_sockets_may_send_inline() }
}

/// Counts a poster about to receive inline (`rx::run_inline`), as
/// [`kick_rx`] counts the work it queues: false once the connection
/// closes. Any context but hard interrupt.
pub(crate) fn begin_rx_inline(sh: &Shared) -> bool {
    begin(sh)
}

/// Gets the transmit work to look at the connection: queues it, unless a
/// transmitter has the socket, which then looks again before it lets go
/// (`State::tx_again`). Any context but hard interrupt.
pub(crate) fn kick_tx(sh: &Arc<Shared>) {
    if begin_tx(sh) && wq::queue().enqueue::<_, 1>(sh.clone()).is_err() {
        done(sh);
    }
}

/// Counts a work item or inline sender about to transmit: false once the
/// connection closes, or while a transmitter has the socket, which then
/// looks again before it lets go (`State::tx_again`).
fn begin_tx(sh: &Shared) -> bool {
    let mut s = sh.state.lock();
    if s.closing {
        return false;
    }
    if s.tx_busy {
        s.tx_again = true;
        return false;
    }
    s.active += 1;
    true
}

/// The socket has room to send again. The transmitter that has the
/// socket waits for room itself (the transmit work) or has queued that
/// work for what the socket did not take (an inline sender, see
/// `tx::inline`), so only a free transmitter with frames to send is
/// queued: the callback comes for many acknowledgements while a large
/// frame waits. Softirq context.
fn tx_room(sh: &Arc<Shared>) {
    let waiting = {
        let s = sh.state.lock();
        !s.tx_busy && (s.tx_begun.is_some() || !s.resp.is_empty() || s.tx.front().is_some())
    };
    if waiting {
        kick_tx(sh);
    }
}

/// Who has made work for the transmitter (`progress::push_tx`).
#[derive(Clone, Copy)]
pub(crate) enum Caller {
    /// A thread that posted an operation: any context but hard interrupt.
    Poster,
    /// The receive work, which queued a response: process context.
    Receiver,
}

/// Gets what was just queued for the transmitter sent: inline from the
/// caller's own context (`tx::inline`, which never waits for the peer)
/// when the `inline_tx` parameter allows it and the caller may sleep, else
/// by the transmit work. A poster may sleep when the kernel can tell that
/// it holds no spinlock, no RCU read lock and runs in task context, with
/// enough stack left for the socket layer (`kfi_sockets_sock.c`); the
/// receive work always may. An inline sender counts as a user of the
/// connection, so closing waits for it as for a work item (until
/// `tx::inline` returns). Nothing while a transmitter has the socket: it
/// looks again before it lets go. Any context but hard interrupt.
pub(crate) fn push_tx(sh: &Arc<Shared>, by: Caller) {
    if begin_tx(sh) {
        push_tx_counted(sh, by);
    }
}

/// [`push_tx`] for a caller that counted itself as a user of the
/// connection already (`State::active`, under the lock it queued under,
/// so that a close cannot finish in between): the count goes to the
/// inline sender or the transmit work.
fn push_tx_counted(sh: &Arc<Shared>, by: Caller) {
    if may_send_inline(by) {
        tx::inline(sh);
    } else {
        // Our count ends only once the work is queued (or told to look
        // again): until then a close waits for us.
        kick_tx(sh);
        done(sh);
    }
}

/// Whether `by` may send from its own context (see [`push_tx`]).
fn may_send_inline(by: Caller) -> bool {
    crate::inline_tx()
        && match by {
            // SAFETY: No preconditions: it only looks at the caller's
            // context.
            Caller::Poster => unsafe { kfi_sockets_may_send_inline() },
            Caller::Receiver => true,
        }
}

/// Hands our operation `op` to the transmitter of `sh`: `ENOTCONN` when
/// the connection is not up, `EAGAIN` when its transmit queue is full,
/// and then `op` stays with the caller. When the transmitter is free and
/// nothing waits before `op` (`tx::may_send_direct`), a poster that may
/// send from its own context ([`may_send_inline`]) does so at once
/// (`tx::direct`), from where the operation lies: it is never moved (a
/// `TxOp` is several hundred bytes, and every copy counts on a small
/// message's path). Else it is moved into the transmit queue (a default
/// left in its place) and [`push_tx`] gets it sent. Any context but hard
/// interrupt.
pub(crate) fn post(sh: &Arc<Shared>, op: &mut TxOp) -> Result {
    op.by_ref = op.by_ref_allowed() && splice::payload_by_ref(op.bufs.as_slice());
    let inline = may_send_inline(Caller::Poster);
    let mut s = sh.state.lock();
    // An ended connection (`dead`: its `KFI_SHUTDOWN` may be on the EQ
    // already) takes nothing more, though the transmit work may not have
    // flushed it yet.
    if !s.connected || s.closing || s.dead {
        return Err(ENOTCONN);
    }
    if inline && tx::may_send_direct(&mut s, op) {
        if let Some(sock) = s.sock.clone() {
            // The socket is ours, and we count as a user of the
            // connection (a close waits for us) until `tx::direct`
            // returns.
            s.tx_busy = true;
            s.active += 1;
            let (id, cq) = tx::enter_in_place(&mut s, op);
            drop(s);
            tx::direct(sh, &sock, op, id, cq);
            return Ok(());
        }
    }
    if !s.tx.push_swap(op) {
        return Err(EAGAIN);
    }
    if s.tx_busy {
        // The transmitter looks again before it lets go (`kick_tx`): one
        // lock on the poster's path instead of four.
        s.tx_again = true;
        return Ok(());
    }
    // Counted before the unlock: a close then waits for this poster,
    // which holds no reference to the connection of its own.
    s.active += 1;
    drop(s);
    push_tx_counted(sh, Caller::Poster);
    Ok(())
}

/// Waits until no work item of the connection is queued or running; the
/// connection is closing, so none is queued any more (and the last one
/// wakes us, see [`done`]). Process context.
pub(crate) fn wait_idle(sh: &Shared) {
    let mut s = sh.state.lock();
    while s.active > 0 {
        sh.idle.wait(&mut s);
    }
}

/// Installs the socket callbacks of a connection that starts. Process
/// context.
pub(crate) fn hook(sh: &Arc<Shared>, sock: &Socket) -> Result {
    let owner = KBox::into_raw(KBox::new(sh.clone(), GFP_KERNEL)?);
    // SAFETY: A live socket; `owner` stays valid until `unhook` returns it.
    let ret = unsafe { kfi_sockets_hook(sock.as_raw(), owner.cast()) };
    if ret != 0 {
        // SAFETY: Not handed over: made by `KBox::into_raw` just above.
        drop(unsafe { KBox::from_raw(owner) });
        return Err(Error::from_errno(ret));
    }
    Ok(())
}

/// Queues the receive work of the connection `sock` is hooked to within
/// `ms` milliseconds, or when it was due already if that is earlier (a
/// timer of the hook, so nothing is allocated); nothing once unhooked.
/// Any context but hard interrupt.
pub(crate) fn arm_timer(sock: &Socket, ms: u32) {
    // SAFETY: A live socket; the C side checks that it is still hooked,
    // under the socket's callback lock.
    unsafe { kfi_sockets_arm_timer(sock.as_raw(), ms) };
}

/// Removes the callbacks of a connection or listener (if installed) and
/// returns the owner they were installed with (NULL if none): no callback
/// or timer uses it any more. Process context.
pub(crate) fn unhook_raw(sock: &Socket) -> *mut c_void {
    // SAFETY: A live socket.
    unsafe { kfi_sockets_unhook(sock.as_raw()) }
}

/// Removes the callbacks (if installed) and drops their reference on the
/// connection. Process context.
pub(crate) fn unhook(sock: &Socket) {
    let owner = unhook_raw(sock);
    if !owner.is_null() {
        // SAFETY: The pointer `hook` made by `KBox::into_raw`; no callback
        // uses it any more.
        drop(unsafe { KBox::from_raw(owner.cast::<Arc<Shared>>()) });
    }
}

/// `kfi_sockets_sock.c`: bytes arrived or the connection changed state
/// (softirq context).
///
/// # Safety
///
/// `owner` is a pointer `hook` installed and `unhook` has not returned.
#[no_mangle]
unsafe extern "C" fn kfi_sockets_rx_ready(owner: *mut c_void) {
    // SAFETY: As required: a live `KBox<Arc<Shared>>`.
    kick_rx(unsafe { &*owner.cast::<Arc<Shared>>() });
}

/// `kfi_sockets_sock.c`: bytes arrived on `sk` (its data callback, with
/// the socket locked: softirq, or the thread that releases its lock).
///
/// # Safety
///
/// As for [`kfi_sockets_rx_ready`]; `sk` is the hooked socket, locked.
#[no_mangle]
unsafe extern "C" fn kfi_sockets_rx_data(owner: *mut c_void, sk: *mut kernel::bindings::sock) {
    // SAFETY: As required: a live `KBox<Arc<Shared>>`.
    let sh = unsafe { &*owner.cast::<Arc<Shared>>() };
    rx::receive_in_callback(sh, sk);
}

/// `kfi_sockets_sock.c`: the socket has room to send again (softirq
/// context).
///
/// # Safety
///
/// As for [`kfi_sockets_rx_ready`].
#[no_mangle]
unsafe extern "C" fn kfi_sockets_tx_ready(owner: *mut c_void) {
    // SAFETY: As required.
    tx_room(unsafe { &*owner.cast::<Arc<Shared>>() });
}

// kfi_sockets_sock.c calls these three by their declarations in
// kfi_sockets_glue.h: the build fails unless they have the same signatures.
c_callback!(sock_sys::kfi_sockets_rx_ready, kfi_sockets_rx_ready);
c_callback!(sock_sys::kfi_sockets_rx_data, kfi_sockets_rx_data);
c_callback!(sock_sys::kfi_sockets_tx_ready, kfi_sockets_tx_ready);
