// SPDX-License-Identifier: GPL-2.0

//! The receive side of an endpoint: posted receives, posted tagged
//! receives and tagged messages held until their receive is posted, with
//! the CQ receives complete to. A MSG endpoint's one connection takes from
//! them; an RDM endpoint's connections to all its peers share them.
//!
//! Posting works in any context but hard interrupt (the lists are
//! allocated when the endpoint is opened); the receivers of the
//! connections wait on `wake` for a receive to be posted.

use kernel::{
    new_condvar, new_spinlock_irq,
    prelude::*,
    sync::{Arc, CondVar, SpinLockIrq},
};

use crate::{
    bufs,
    ep::{fail, RxOp, Unexpected, QUEUE, UNEXP_MAX},
    kfi::{kfi_sys as sys, provider::CqRef},
    rx,
};

pub(crate) struct RxState {
    pub(crate) cq: Option<CqRef>,
    /// No more receives: the endpoint closed or its connection ended.
    pub(crate) closing: bool,
    /// Posted receives, oldest first.
    pub(crate) rx: KVec<RxOp>,
    /// Posted tagged receives, oldest first.
    pub(crate) trx: KVec<RxOp>,
    pub(crate) unexp: KVec<Unexpected>,
    pub(crate) unexp_bytes: usize,
}

/// The receive queues of one endpoint.
#[pin_data]
pub(crate) struct RxQueues {
    #[pin]
    pub(crate) state: SpinLockIrq<RxState>,
    /// Woken when a receive is posted or taken, or the queues close.
    #[pin]
    pub(crate) wake: CondVar,
}

impl RxQueues {
    /// Empty queues with room for `QUEUE` receives of each kind. Process
    /// context.
    pub(crate) fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            try_pin_init!(Self {
                state <- new_spinlock_irq!(RxState {
                    cq: None,
                    closing: false,
                    rx: KVec::with_capacity(QUEUE, GFP_KERNEL)?,
                    trx: KVec::with_capacity(QUEUE, GFP_KERNEL)?,
                    unexp: KVec::with_capacity(UNEXP_MAX, GFP_KERNEL)?,
                    unexp_bytes: 0,
                }),
                wake <- new_condvar!(),
            }),
            GFP_KERNEL,
        )
    }

    pub(crate) fn set_cq(&self, cq: CqRef) {
        self.state.lock().cq = Some(cq);
    }

    pub(crate) fn cq(&self) -> Option<CqRef> {
        self.state.lock().cq
    }

    /// `kfi_recvmsg`: queues a receive (`EAGAIN` when `QUEUE` wait).
    pub(crate) fn post(&self, m: &sys::kfi_msg) -> Result {
        let mut op = RxOp {
            context: m.context as usize,
            ..Default::default()
        };
        op.n = bufs::of_msg(m, &mut op.bufs)?;
        let mut s = self.state.lock();
        if s.closing {
            return Err(ENOTCONN);
        }
        if s.rx.len() >= QUEUE {
            return Err(EAGAIN);
        }
        s.rx.push(op, GFP_ATOMIC)?;
        drop(s);
        self.wake.notify_all();
        Ok(())
    }

    /// `kfi_trecvmsg`: takes the oldest matching held message, else
    /// queues the receive.
    pub(crate) fn post_tagged(&self, t: &sys::kfi_msg_tagged) -> Result {
        let mut op = RxOp {
            context: t.msg.context as usize,
            tag: t.tag,
            ignore: t.ignore,
            ..Default::default()
        };
        op.n = bufs::of_msg(&t.msg, &mut op.bufs)?;
        let (held, cq) = {
            let mut s = self.state.lock();
            if s.closing {
                return Err(ENOTCONN);
            }
            match s.unexp.iter().position(|u| op.matches(u.tag)) {
                Some(i) => {
                    let u = s.unexp.remove(i).map_err(|_| EINVAL)?;
                    s.unexp_bytes -= u.payload.len();
                    (Some(u), s.cq)
                }
                None => {
                    if s.trx.len() >= QUEUE {
                        return Err(EAGAIN);
                    }
                    s.trx.push(op, GFP_ATOMIC)?;
                    (None, s.cq)
                }
            }
        };
        self.wake.notify_all();
        if let Some(u) = held {
            rx::complete_tagged(cq, &op, u.tag, u.data, &u.payload);
        }
        Ok(())
    }

    /// Closes the queues: posted receives fail with `ECANCELED`, held
    /// messages are dropped, waiting receivers return.
    pub(crate) fn close(&self) {
        let (rx, trx, unexp, cq) = {
            let mut s = self.state.lock();
            s.closing = true;
            s.unexp_bytes = 0;
            (
                core::mem::take(&mut s.rx),
                core::mem::take(&mut s.trx),
                core::mem::take(&mut s.unexp),
                s.cq,
            )
        };
        self.wake.notify_all();
        drop(unexp);
        let canceled = -ECANCELED.to_errno();
        for r in rx.iter() {
            fail(cq, r.context, sys::KFI_RECV | sys::KFI_MSG, canceled, 0, 0);
        }
        for r in trx.iter() {
            fail(
                cq,
                r.context,
                sys::KFI_RECV | sys::KFI_TAGGED,
                canceled,
                0,
                0,
            );
        }
    }
}
