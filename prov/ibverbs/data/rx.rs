// SPDX-License-Identifier: GPL-2.0

//! The receive side of a connection's message path: the ULP's receives
//! and tagged receives, frames placed into them (or held until one is
//! posted), the peer's acknowledgements, and the reposting of receive
//! slots.

use core::sync::atomic::{AtomicU32, Ordering};
use kernel::prelude::*;

use super::{DataPath, Filling, Posted, Ring, State, MSG_MAX, SLOTS};
use crate::{
    frame::{
        read_header, Acks, Buffers, Header, FRAME_MAX, F_ACKED, F_ACK_REQ, F_CQ_DATA, F_DATA,
        F_KNOWN, F_MORE, F_RMA_DATA, F_TAGGED, HDR, SLOT,
    },
    ib::dma,
    ib_sys as sys,
    kfi::{
        kfi_sys as ksys,
        toolkit::completion::{report, report_recv, CqEntry},
    },
    tagged::TRecv,
};

impl DataPath {
    /// `kfi_recvmsg`: takes held frames, or queues the receive. Any
    /// context but hard interrupt.
    ///
    /// # Safety
    ///
    /// `msg` was passed by kfabric.ko to `recvmsg` (checked list).
    pub(crate) unsafe fn recv(&self, msg: &ksys::kfi_msg, flags: u64) -> Result {
        // SAFETY: The caller's contract.
        let bufs = unsafe { Buffers::of(msg) }?;
        let p = Posted {
            entry: CqEntry::posted_recv(msg, ksys::KFI_MSG, bufs.first(), flags),
            bufs,
        };
        let mut st = self.lock();
        if st.closed || st.broken {
            return Err(ENOTCONN);
        }
        st.posted.push_within_capacity(p).map_err(|_| EAGAIN)?;
        if !st.qp.is_null() {
            // SAFETY: Held slots belong to the live ring (`detach` clears
            // them).
            let ring = unsafe { &*st.ring };
            while !st.held.is_empty() && (st.filling.is_some() || !st.posted.is_empty()) {
                let Ok((index, h)) = st.held.remove(0) else {
                    break;
                };
                Self::place(&mut st, ring, index, &h);
            }
        }
        Self::return_credits(&mut st);
        Ok(())
    }

    /// `kfi_trecvmsg`: the oldest matching held tagged message completes
    /// it at once, else it waits (`tagged.rs`). Any context but hard
    /// interrupt.
    ///
    /// # Safety
    ///
    /// `t` was passed by kfabric.ko to `trecvmsg` (checked list).
    pub(crate) unsafe fn trecv(&self, t: &ksys::kfi_msg_tagged, flags: u64) -> Result {
        // SAFETY: The caller's contract.
        let r = unsafe { TRecv::of(&t.msg, flags) }?;
        let mut st = self.lock();
        if st.closed || st.broken {
            return Err(ENOTCONN);
        }
        let cq = st.rx_cq;
        st.tagged.post(t.tag, t.ignore, r, cq)
    }

    /// Copies the frame in receive slot `index` into the receive being
    /// filled (or the oldest posted one), completes that receive at the
    /// message's last frame, and reposts the slot. The caller checked
    /// that there is such a receive.
    fn place(st: &mut State, ring: &Ring, index: usize, h: &Header) {
        let f = st.filling.take().or_else(|| {
            st.posted.remove(0).ok().map(|p| Filling {
                p,
                placed: 0,
                total: 0,
            })
        });
        let Some(mut f) = f else {
            return;
        };
        let src = ring.bufs[index].addr().wrapping_add(HDR);
        let room = f.p.bufs.total.saturating_sub(f.placed);
        // SAFETY: The slot holds `h.len` bytes after the header (checked
        // at receipt); the ULP's buffers are valid until this receive
        // completes.
        let n = unsafe { f.p.bufs.scatter(f.placed, src, h.len.min(room)) };
        f.placed += n;
        f.total = f.total.saturating_add(h.len);
        if f.total > MSG_MAX {
            // Longer than any message may be: the receive ends with what
            // it holds (EMSGSIZE, olen the bytes beyond it so far), and so
            // does the connection.
            f.p.entry.len = f.placed;
            report_recv(st.rx_cq, &f.p.entry, f.total - f.placed);
            Self::protocol_error(st, "message longer than 16 MiB");
            return;
        }
        Self::repost(st, ring, index);
        if h.flags & F_MORE != 0 {
            st.filling = Some(f);
            return;
        }
        f.p.entry.len = f.placed;
        if h.flags & F_CQ_DATA != 0 {
            f.p.entry.flags |= ksys::KFI_REMOTE_CQ_DATA;
            f.p.entry.data = h.data;
        }
        report_recv(st.rx_cq, &f.p.entry, f.total - f.placed);
        if h.flags & F_ACK_REQ != 0 {
            // Placed: the sender's delivery completion may go.
            st.acks_due.count(false);
        }
    }

    /// The peer acknowledged the placement of `n` of our messages, the
    /// oldest of each kind first; more than wait for it is a protocol
    /// error.
    fn acked(st: &mut State, n: Acks) {
        let mut left = n;
        for a in st.awaiting.iter_mut().filter(|a| !a.acked) {
            let kind = if a.tagged {
                &mut left.tagged
            } else {
                &mut left.msg
            };
            if *kind > 0 {
                a.acked = true;
                *kind -= 1;
            }
        }
        if left.any() || !n.any() {
            Self::protocol_error(st, "acknowledgement of no message");
            return;
        }
        Self::complete_delivered(st);
    }

    /// Completes the sends for delivery that are sent and acknowledged,
    /// oldest first.
    pub(super) fn complete_delivered(st: &mut State) {
        while let Some(a) = st.awaiting.first().copied() {
            if !(a.sent && a.acked) {
                return;
            }
            let _ = st.awaiting.remove(0);
            report(st.tx_cq, &a.entry);
        }
    }

    /// Gives receive slot `index` back to the device and counts the credit.
    fn repost(st: &mut State, ring: &Ring, index: usize) {
        if st.qp.is_null() {
            return;
        }
        if skip_repost() {
            st.to_return += 1;
            return;
        }
        // SAFETY: `qp` is live and the ring is its (attach's contract).
        if unsafe { post_recv_slot(st.qp, ring, index) }.is_ok() {
            st.to_return += 1;
        }
    }

    /// A receive slot's work request completed.
    pub(super) fn received(&self, index: usize, d: &dma::Done) {
        let mut st = self.lock();
        if !d.ok && !d.flushed && !st.qp.is_null() {
            // Not a flush: the device failed the receive (a peer frame
            // longer than its slot, ...) and put the QP in the error
            // state, so nothing arrives any more and no event would say
            // so: the connection ends as for any broken frame.
            Self::protocol_error(&mut st, "a receive failed");
        }
        if d.flushed && st.up && !st.broken && !st.qp.is_null() && st.flushed_since.is_none() {
            // The QP is in the error state with the connection up: a
            // disconnection normally follows at once, else the watchdog
            // ends the connection (`QP_FAILED_MS`).
            st.flushed_since = Some(st.tick);
        }
        if let Some(key) = d.invalidated.filter(|_| d.ok) {
            // A send with invalidate: the device invalidated the key it
            // named (if it was one of the PD's) before this completion,
            // whatever state the connection is in. The protocol-error
            // worker registers that region again (Documentation/
            // ibverbs.rst, "A peer's invalidation"): queued below for a
            // connection still up, here for one that is ending already
            // (broken, or disconnected: `ended`).
            st.invalidated.note(key);
            if st.broken || st.ended {
                if let Some(c) = st.owner.clone() {
                    c.queue_protocol_error();
                }
            }
        }
        if !d.ok || st.qp.is_null() || st.broken || st.ended {
            // A broken peer's frames are dropped, their slots not
            // reposted: it cannot make this side work for ever. So are
            // those polled after the connection ended (`State::ended`).
            return;
        }
        if !d.plain {
            // Nothing this protocol sends (a send with invalidate's key is
            // noted above).
            Self::protocol_error(&mut st, "a receive that took no plain send");
            return;
        }
        // SAFETY: A completion for a slot of the attached ring.
        let ring = unsafe { &*st.ring };
        ring.bufs[index].sync_for_cpu(0, d.len);
        let Some(h) = read_header(ring.bufs[index].bytes(), d.len) else {
            Self::protocol_error(&mut st, "malformed frame");
            return;
        };
        if h.flags & !F_KNOWN != 0 {
            Self::protocol_error(&mut st, "unknown frame flags");
            return;
        }
        if h.flags & F_TAGGED != 0 && h.flags & (F_DATA | F_RMA_DATA) != F_DATA {
            Self::protocol_error(&mut st, "tag on a frame that is no message");
            return;
        }
        // An acknowledgement is a header only; a request for one is on
        // the last frame of a message.
        let bad_ack = h.flags & F_ACKED != 0 && (h.flags != F_ACKED || h.len != 0);
        let bad_req =
            h.flags & F_ACK_REQ != 0 && h.flags & (F_DATA | F_MORE | F_RMA_DATA) != F_DATA;
        if bad_ack || bad_req {
            Self::protocol_error(&mut st, "bad acknowledgement flags");
            return;
        }
        st.credits = st.credits.saturating_add(h.credits).min(SLOTS);
        if h.flags & F_RMA_DATA != 0 {
            // Only the header of a write's remote CQ data, between
            // messages. Its completion is the peer's to decide, so a CQ
            // with no room for it ends the connection: a flood must not
            // go on crowding out the endpoint's own completions.
            if h.len != 0
                || h.flags & (F_MORE | F_CQ_DATA) != F_CQ_DATA
                || st.filling.is_some()
                || st.tagged.mid_message()
            {
                Self::protocol_error(&mut st, "bad remote CQ data frame");
                return;
            }
            let e = CqEntry {
                flags: ksys::KFI_RMA | ksys::KFI_REMOTE_WRITE | ksys::KFI_REMOTE_CQ_DATA,
                data: h.data,
                // Not the ULP's to ask for: a selective CQ reports it too.
                asked: true,
                ..Default::default()
            };
            if st.rx_cq.try_report(&e).is_err() {
                Self::protocol_error(&mut st, "remote CQ data flood");
                return;
            }
            Self::repost(&mut st, ring, index);
        } else if h.flags & F_DATA == 0 {
            if h.len != 0 || (h.flags != 0 && h.flags != F_ACKED) {
                Self::protocol_error(&mut st, "bad credit frame");
                return;
            }
            if h.flags == F_ACKED {
                Self::acked(&mut st, Acks::of(h.data));
                if st.broken {
                    return;
                }
            }
            Self::repost(&mut st, ring, index);
        } else if h.flags & F_MORE != 0 && h.len != FRAME_MAX {
            // Every frame of a message but its last is full, so a message
            // of MSG_MAX has a bounded number of frames.
            Self::protocol_error(&mut st, "short frame inside a message");
            return;
        } else {
            match st.tagged.is_tagged(&h) {
                Err(b) => {
                    Self::broken(&mut st, b);
                    return;
                }
                Ok(true) => {
                    if !Self::tagged_frame(&mut st, ring, index, &h) {
                        return;
                    }
                }
                Ok(false)
                    if !st.held.is_empty() || (st.filling.is_none() && st.posted.is_empty()) =>
                {
                    // Cannot overflow: at most SLOTS slots exist.
                    let _ = st.held.push_within_capacity((index, h));
                }
                Ok(false) => Self::place(&mut st, ring, index, &h),
            }
        }
        Self::pump(&mut st);
        Self::return_credits(&mut st);
    }

    /// Takes the frame of a tagged message in receive slot `index` (see
    /// `tagged.rs`) and reposts the slot; `false` when the frame ended the
    /// connection.
    fn tagged_frame(st: &mut State, ring: &Ring, index: usize, h: &Header) -> bool {
        // The header was checked at receipt: `HDR + h.len` bytes arrived.
        let end = HDR.saturating_add(h.len);
        let payload = ring.bufs[index].bytes().get(HDR..end).unwrap_or(&[]);
        let (cq, max) = (st.rx_cq, MSG_MAX);
        match st.tagged.frame(h, payload, cq, max) {
            Ok(done) => {
                if done && h.flags & F_ACK_REQ != 0 {
                    // Placed or held: the sender's delivery completion may
                    // go.
                    st.acks_due.count(true);
                }
                Self::repost(st, ring, index);
                true
            }
            Err(b) => {
                Self::broken(st, b);
                false
            }
        }
    }
}

/// Posts receive slot `index` of `ring` on `qp`.
///
/// # Safety
///
/// `qp` is live; the ring stays valid until the request completes.
pub(super) unsafe fn post_recv_slot(qp: *mut sys::ib_qp, ring: &Ring, index: usize) -> Result {
    ring.bufs[index].sync_for_device(0, SLOT);
    let sge = ring.bufs[index].sge(SLOT, ring.lkey);
    let cqe = (&raw const ring.slots[index].cqe).cast_mut();
    // SAFETY: The caller's contract.
    unsafe { dma::post_recv(qp, sge, cqe) }
}

/// Test-only: receive-slot reposts still to skip (see
/// [`kfi_ibverbs_test_skip_reposts`]).
static SKIP_REPOSTS: AtomicU32 = AtomicU32::new(0);

/// Test-only path (exported for `kfi_test_ibverbs`, which plays a peer
/// that returns credits for receives it never posts): the next `n`
/// receive slots any endpoint of this provider gives back are not posted
/// again, but their credits are returned all the same. `n == 0` stops
/// it. `-EPERM` without the `test_hooks` parameter.
#[no_mangle]
pub(crate) extern "C" fn kfi_ibverbs_test_skip_reposts(n: u32) -> c_int {
    if let Err(e) = crate::test_hooks() {
        return e.to_errno();
    }
    SKIP_REPOSTS.store(n, Ordering::SeqCst);
    0
}

/// Whether a test asked for this repost to be skipped (and counts it).
fn skip_repost() -> bool {
    SKIP_REPOSTS
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
}
