// SPDX-License-Identifier: GPL-2.0

//! The transmit side of a connection's message path: sends copied into
//! send slots frame by frame as the credits allow, their completions,
//! the return of credits and acknowledgements to the peer, and the
//! posting of RMA requests.

use kernel::prelude::*;

use super::{Awaiting, DataPath, Op, Pending, State, MSG_MAX, SLOTS, TX_MAX};
use crate::{
    frame::{
        tag_ext, tampered, tampered_invalidate, write_header, write_header_magic, Acks, Buffers,
        Header, FRAME_MAX, F_ACKED, F_ACK_REQ, F_CQ_DATA, F_DATA, F_MORE, F_RMA_DATA, F_TAGGED,
        HDR, INJECT_MAX, TAG_EXT,
    },
    ib::dma,
    kfi::{
        kfi_sys as ksys,
        toolkit::completion::{report, report_err, CqEntry},
    },
    rma::{Link, RmaOp, RMA_OPS},
};

impl DataPath {
    /// `kfi_sendmsg`, or `kfi_tsendmsg` with `tag`: queues the message
    /// and sends what the credits allow at once. An inject goes whole at
    /// once or not at all (`EAGAIN`). Any context but hard interrupt.
    ///
    /// # Safety
    ///
    /// `msg` was passed by kfabric.ko to `sendmsg` or `tsendmsg` (checked
    /// list).
    pub(crate) unsafe fn send(&self, msg: &ksys::kfi_msg, flags: u64, tag: Option<u64>) -> Result {
        // SAFETY: The caller's contract.
        let bufs = unsafe { Buffers::of(msg) }?;
        let inject = flags & ksys::KFI_INJECT != 0;
        let one_frame = if tag.is_some() { INJECT_MAX } else { FRAME_MAX };
        if bufs.total > if inject { one_frame } else { MSG_MAX } {
            return Err(EMSGSIZE);
        }
        let (kind, tag_flag) = match tag {
            Some(_) => (ksys::KFI_TAGGED, F_TAGGED),
            None => (ksys::KFI_MSG, 0),
        };
        let mut p = Pending {
            op: Op {
                entry: CqEntry {
                    context: msg.context as usize,
                    flags: ksys::KFI_SEND | kind,
                    len: bufs.total,
                    asked: flags & ksys::KFI_COMPLETION != 0,
                    ..Default::default()
                },
                report: !inject,
                delivery: !inject
                    && flags & (ksys::KFI_DELIVERY_COMPLETE | ksys::KFI_COMMIT_COMPLETE) != 0,
                seq: 0,
            },
            bufs,
            sent: 0,
            flags: tag_flag
                | if flags & ksys::KFI_REMOTE_CQ_DATA != 0 {
                    F_CQ_DATA
                } else {
                    0
                },
            data: msg.data,
            tag: tag.unwrap_or(0),
        };
        let mut st = self.lock();
        if st.closed || !st.up || st.qp.is_null() {
            return Err(ENOTCONN);
        }
        // The room above TX_MAX is for the remote CQ data of writes.
        if st.pending.len() >= TX_MAX {
            return Err(EAGAIN);
        }
        // At most TX_MAX sends wait for the peer's acknowledgement.
        if p.op.delivery
            && st.awaiting.len() + st.pending.iter().filter(|q| q.op.delivery).count() >= TX_MAX
        {
            return Err(EAGAIN);
        }
        if inject {
            // Its buffer is only valid during this call.
            if !st.pending.is_empty() || !Self::can_post(&st) {
                return Err(EAGAIN);
            }
            Self::post_frame(&mut st, &mut p)?;
            // Its buffer is free again: done, for the counter.
            st.tx_cq.count_only(p.op.entry.flags);
            return Ok(());
        }
        st.pending.push_within_capacity(p).map_err(|_| EAGAIN)?;
        Self::pump(&mut st);
        Ok(())
    }

    /// A frame may be posted now: a free slot and a credit to spare.
    fn can_post(st: &State) -> bool {
        st.up && !st.qp.is_null() && st.credits >= 2 && !st.free.is_empty()
    }

    /// Posts the frames of waiting sends that the credits allow, oldest
    /// first. A send that cannot be posted fails. Notes since when the
    /// oldest one waits for credits.
    pub(super) fn pump(st: &mut State) {
        let mut moved = false;
        while Self::can_post(st) {
            let Some(mut p) = st.pending.first().copied() else {
                break;
            };
            moved = true;
            let done = match Self::post_frame(st, &mut p) {
                Ok(last) => last,
                Err(e) => {
                    if p.op.report {
                        report_err(st.tx_cq, &p.op.entry, e);
                    }
                    if p.sent > 0 {
                        // The peer holds the message's first frames: it
                        // would read the next message as their rest.
                        pr_warn!("a frame could not be posted mid-message: connection ended\n");
                        Self::end(st, e);
                    }
                    true
                }
            };
            if done {
                let _ = st.pending.remove(0);
            } else if let Some(head) = st.pending.first_mut() {
                *head = p;
            }
        }
        if st.pending.is_empty() {
            st.stalled_since = None;
        } else if moved || st.stalled_since.is_none() {
            st.stalled_since = Some(st.tick);
        }
    }

    /// Posts the next frame of `p`; whether it was the last. The caller
    /// checked [`Self::can_post`].
    fn post_frame(st: &mut State, p: &mut Pending) -> Result<bool> {
        // The first frame of a tagged message carries its tag (every
        // frame but the last has payload, so it is the one at 0).
        let tagged = p.flags & F_TAGGED != 0 && p.sent == 0;
        let ext = if tagged { TAG_EXT } else { 0 };
        let len = (p.bufs.total - p.sent).min(FRAME_MAX - ext);
        let last = p.sent + len == p.bufs.total;
        let slot = st.free.pop().ok_or(EAGAIN)?;
        let credits = st.to_return.min(u16::MAX.into());
        // SAFETY: The ring is live while `qp` is set (attach's contract).
        let ring = unsafe { &*st.ring };
        let buf = &ring.bufs[SLOTS + slot];
        let ack = if last && p.op.delivery { F_ACK_REQ } else { 0 };
        let more = if last { 0 } else { F_MORE };
        let first = if tagged { F_TAGGED } else { 0 };
        let (flags, magic) = tampered(F_DATA | (p.flags & !F_TAGGED) | first | ack | more);
        let h = Header {
            flags,
            credits,
            len: ext + len,
            data: p.data,
        };
        let tag = tag_ext(p.tag, p.bufs.total);
        // SAFETY: A free send slot is no work request's and no other CPU's (taken from `free`
        // under the lock); the ULP's buffers are valid until the send completes, after this
        // frame; `HDR + ext + len <= SLOT`.
        unsafe {
            write_header_magic(buf.addr(), &h, magic);
            core::ptr::copy_nonoverlapping(tag.as_ptr(), buf.addr().add(HDR), ext);
            p.bufs.gather(p.sent, len, buf.addr().add(HDR + ext));
        }
        let mut op = p.op;
        op.seq = st.next_seq;
        st.ops[slot] = if last { Some(op) } else { None };
        buf.sync_for_device(0, HDR + ext + len);
        let sge = buf.sge(HDR + ext + len, ring.lkey);
        let cqe = (&raw const ring.slots[SLOTS + slot].cqe).cast_mut();
        // SAFETY: `qp` is live (attach's contract); the slot and its
        // buffer stay valid until the request completes.
        match unsafe { dma::post_send_with(st.qp, sge, cqe, tampered_invalidate()) } {
            Ok(()) => {
                st.slot_tick[slot] = Some(st.tick);
                st.credits -= 1;
                st.to_return -= credits;
                p.sent += len;
                if ack != 0 {
                    let a = Awaiting {
                        seq: op.seq,
                        entry: op.entry,
                        tagged: p.flags & F_TAGGED != 0,
                        sent: false,
                        acked: false,
                        since: st.tick,
                    };
                    // Cannot fail: `send` keeps TX_MAX sends for delivery
                    // at most.
                    let _ = st.awaiting.push_within_capacity(a);
                    st.next_seq = st.next_seq.wrapping_add(1);
                }
                Ok(last)
            }
            Err(e) => {
                st.ops[slot] = None;
                let _ = st.free.push_within_capacity(slot);
                Err(e)
            }
        }
    }

    /// A send slot's work request completed.
    pub(super) fn sent(&self, slot: usize, d: &dma::Done) {
        let mut st = self.lock();
        if let Some(t) = st.slot_tick.get_mut(slot) {
            *t = None;
        }
        let op = st.ops.get_mut(slot).and_then(Option::take);
        let _ = st.free.push_within_capacity(slot);
        if let Some(op) = op.filter(|o| o.report && o.delivery) {
            // Gone already when the connection ended meanwhile.
            if let Some(i) = st.awaiting.iter().position(|a| a.seq == op.seq) {
                if d.ok {
                    let now = st.tick;
                    st.awaiting[i].sent = true;
                    st.awaiting[i].since = now;
                    Self::complete_delivered(&mut st);
                } else {
                    let _ = st.awaiting.remove(i);
                    report_err(st.tx_cq, &op.entry, if d.flushed { ECANCELED } else { EIO });
                }
            }
        } else if let Some(op) = op.filter(|o| o.report) {
            if d.ok {
                report(st.tx_cq, &op.entry);
            } else {
                report_err(st.tx_cq, &op.entry, if d.flushed { ECANCELED } else { EIO });
            }
        }
        Self::pump(&mut st);
        Self::return_credits(&mut st);
    }

    /// `kfi_readmsg`/`kfi_writemsg`: queues `op` and posts what the free
    /// requests allow. Any context but hard interrupt.
    pub(crate) fn rma(&self, op: RmaOp) -> Result {
        let mut st = self.lock();
        if st.closed || !st.up || st.qp.is_null() {
            return Err(ENOTCONN);
        }
        if op.is_empty() {
            report(st.tx_cq, &op.entry);
            return Ok(());
        }
        // A write's operation is freed when its requests complete, which
        // may be before its data frame goes (credits): the data frames
        // queued and to come stay within the room kept for them.
        if op.data.is_some() {
            let queued = st
                .pending
                .iter()
                .filter(|p| p.flags & F_RMA_DATA != 0)
                .count();
            if queued + st.rma.data_to_come() >= RMA_OPS {
                return Err(EAGAIN);
            }
        }
        st.rma.submit(op)?;
        Self::pump_rma(&mut st);
        Ok(())
    }

    /// Posts waiting RMA requests; queues the remote CQ data of writes
    /// that are all posted (it follows them on the QP, so the peer
    /// reports it after the data is placed).
    pub(super) fn pump_rma(st: &mut State) {
        if !st.up || st.qp.is_null() {
            return;
        }
        // SAFETY: The ring is live while `qp` is set (attach's contract).
        let ring = unsafe { &*st.ring };
        let link = Link {
            qp: st.qp,
            dev: ring.dev,
            lkey: ring.lkey,
            write_sges: ring.sges.0,
            read_sges: ring.sges.1,
            results: &ring.results,
            tick: st.tick,
        };
        let State {
            rma,
            pending,
            tx_cq,
            ..
        } = st;
        rma.pump(
            &link,
            *tx_cq,
            |i| (&raw const ring.slots[2 * SLOTS + i].cqe).cast_mut(),
            |data| {
                let p = Pending {
                    op: Op {
                        entry: CqEntry::default(),
                        report: false,
                        delivery: false,
                        seq: 0,
                    },
                    bufs: Buffers::default(),
                    sent: 0,
                    flags: F_CQ_DATA | F_RMA_DATA,
                    data,
                    tag: 0,
                };
                // Cannot fail: `rma` keeps the writes' data frames,
                // queued and to come, within the room kept for them.
                let _ = pending.push_within_capacity(p);
            },
        );
        Self::pump(st);
    }

    /// An RMA request completed.
    pub(super) fn rma_done(&self, index: usize, d: &dma::Done) {
        let mut st = self.lock();
        // The request's pieces were mapped for the ring's device, which
        // outlives the drain that completes the last request.
        // SAFETY: Set at attach, live until the drain is done.
        let ring = unsafe { st.ring.as_ref() };
        let dev = ring.map_or(core::ptr::null_mut(), |r| r.dev);
        let cq = st.tx_cq;
        st.rma.done(index, d, dev, ring.map(|r| &r.results), cq);
        Self::pump_rma(&mut st);
    }

    /// Sends a header-only frame when half the peer's credits are due
    /// (on the credit kept for that), or acknowledgements (on a credit to
    /// spare, as a message frame); it carries both.
    pub(super) fn return_credits(st: &mut State) {
        let credits_due = st.to_return >= SLOTS / 2 && st.credits >= 1;
        let acks_due = st.acks_due.any() && st.credits >= 2;
        if st.qp.is_null() || st.broken || !(credits_due || acks_due) {
            return;
        }
        let Some(slot) = st.free.pop() else {
            return;
        };
        // SAFETY: Attached ring (qp is set).
        let ring = unsafe { &*st.ring };
        let credits = st.to_return.min(u16::MAX.into());
        let buf = &ring.bufs[SLOTS + slot];
        let acks = st.acks_due;
        let h = Header {
            flags: if acks.any() { F_ACKED } else { 0 },
            credits,
            len: 0,
            data: acks.data(),
        };
        // SAFETY: A free send slot, ours under the lock.
        unsafe { write_header(buf.addr(), &h) };
        buf.sync_for_device(0, HDR);
        let sge = buf.sge(HDR, ring.lkey);
        let cqe = (&raw const ring.slots[SLOTS + slot].cqe).cast_mut();
        // SAFETY: As in `post_frame`.
        if unsafe { dma::post_send(st.qp, sge, cqe) }.is_ok() {
            st.slot_tick[slot] = Some(st.tick);
            st.credits -= 1;
            st.to_return -= credits;
            st.acks_due = Acks::default();
        } else {
            let _ = st.free.push_within_capacity(slot);
        }
    }
}
