// SPDX-License-Identifier: GPL-2.0

//! The message path of a connection: eager messages through slots of
//! DMA-mapped memory, with credits.
//!
//! Each side posts [`SLOTS`] receive slots before the connection is up.
//! A message is copied into a free send slot behind a [`HDR`]-byte header
//! and sent; the peer copies it out of its receive slot into the ULP's
//! receive (or holds the slot until one is posted) and reposts the slot.
//! A sender may only use as many slots as the peer has posted: it starts
//! with [`SLOTS`] credits, spends one per message, and gets them back in
//! the header of the peer's messages, or in a header-only message once
//! half of them are due. One credit is kept for those updates, so two
//! sides that both wait for credits always have a way to return them.
//!
//! Header (little endian): magic u8, flags u8, credits u16, length u32,
//! remote CQ data u64.
//!
//! The ULP's buffers are only read or written during its call (sends) or
//! the receive's completion, so an operation completes when its work
//! request does and the buffer is free at once. Completion callbacks run
//! in softirq context; posting works in any context but hard interrupt.

use kernel::{
    new_spinlock_irq,
    prelude::*,
    sync::{Arc, SpinLockIrq},
};

use crate::{
    ib::dma::{self, DmaBuf},
    ib_sys as sys,
    kfi::{
        kfi_sys as ksys,
        provider::CqRef,
        toolkit::{
            completion::{report, report_err, report_recv, CqEntry},
            segments::Segments,
        },
    },
};

/// Bytes of a slot.
pub(crate) const SLOT: usize = 4096;
/// Slots each way.
pub(crate) const SLOTS: usize = 32;
/// Bytes of the header in front of each message.
pub(crate) const HDR: usize = 16;
/// The longest message.
pub(crate) const MSG_MAX: usize = SLOT - HDR;
/// Most buffers of one send or receive.
pub(crate) const IOV_MAX: usize = 4;
/// Most receives the ULP may have posted.
pub(crate) const RECV_MAX: usize = 64;

const MAGIC: u8 = 0x6b;
/// The message has a payload (else it only returns credits).
const F_DATA: u8 = 1;
/// The header carries remote CQ data.
const F_CQ_DATA: u8 = 2;

/// One slot's completion context. `cqe` is first: ib_core hands its
/// address back, which is the slot's.
#[repr(C)]
struct Slot {
    cqe: sys::ib_cqe,
    path: *const DataPath,
    index: usize,
}

/// The device memory of a connection's message path: receive slots
/// `0..SLOTS`, send slots `SLOTS..2 * SLOTS`.
///
/// # Invariants
///
/// `slots` and `bufs` have `2 * SLOTS` entries and never grow (the
/// device holds their addresses); every slot's `path` is the data path
/// that owns the ring, which outlives it.
pub(crate) struct Ring {
    slots: KVec<Slot>,
    bufs: KVec<DmaBuf>,
    lkey: u32,
}

// SAFETY: The slots' pointers are only followed by the completion
// callbacks, under the owner's rules; the buffers are `Send`.
unsafe impl Send for Ring {}
// SAFETY: See `Send`; shared access only reads the addresses.
unsafe impl Sync for Ring {}

/// A send in a slot, to complete when its work request does.
#[derive(Clone, Copy)]
struct Op {
    entry: CqEntry,
    /// Report its completion (not for injects and credit updates).
    report: bool,
}

/// A receive the ULP posted: its buffers as kernel addresses.
#[derive(Clone, Copy)]
struct Posted {
    entry: CqEntry,
    segs: [(usize, usize); IOV_MAX],
    n: usize,
}

struct State {
    /// The QP and ring while the connection can move messages.
    qp: *mut sys::ib_qp,
    ring: *const Ring,
    tx_cq: Option<CqRef>,
    rx_cq: Option<CqRef>,
    /// Messages the peer has room for.
    credits: usize,
    /// Slots reposted since the peer was last told.
    to_return: usize,
    /// Free send slots (indices into the send half).
    free: KVec<usize>,
    /// The send in each send slot.
    ops: KVec<Option<Op>>,
    /// The ULP's receives, oldest first.
    posted: KVec<Posted>,
    /// Receive slots holding a message no receive was posted for, oldest
    /// first, with the message's length.
    held: KVec<(usize, usize, u64, bool)>,
    /// The connection is up: sends may go.
    up: bool,
    /// No more operations: the endpoint closes.
    closed: bool,
}

/// A connection's message path (shared by the endpoint and its
/// completion callbacks).
#[pin_data]
pub(crate) struct DataPath {
    #[pin]
    st: SpinLockIrq<State>,
}

// SAFETY: The raw pointers in the state are only used under its lock,
// with the lifetimes the ring's owner guarantees (see `attach`).
unsafe impl Send for DataPath {}
// SAFETY: See `Send`.
unsafe impl Sync for DataPath {}

/// A message's non-empty buffers as (kernel address, length), their
/// number and their total length.
type Buffers = ([(usize, usize); IOV_MAX], usize, usize);

/// The segments of a message's buffers as (kernel address, length).
///
/// # Safety
///
/// `msg` was passed by kfabric.ko to a data-path method (checked list).
unsafe fn segments(msg: &ksys::kfi_msg) -> Result<Buffers> {
    let mut segs = [(0usize, 0usize); IOV_MAX];
    let (mut n, mut total) = (0usize, 0usize);
    // SAFETY: The caller's contract.
    for s in unsafe { Segments::of_msg(msg) }? {
        let s = s?;
        if s.is_empty() {
            continue;
        }
        let slot = segs.get_mut(n).ok_or(EINVAL)?;
        *slot = (s.kernel_addr(), s.len());
        if slot.0 == 0 {
            return Err(EFAULT);
        }
        n += 1;
        total = total.checked_add(s.len()).ok_or(EMSGSIZE)?;
    }
    Ok((segs, n, total))
}

/// Copies `len` bytes of the slot at `src` into `segs`; returns what fit.
///
/// # Safety
///
/// `src` is valid for `len` bytes; the segments are the ULP's buffers of
/// a posted receive (valid until it completes, the ULP's contract).
unsafe fn scatter(src: *const u8, len: usize, segs: &[(usize, usize)]) -> usize {
    let mut done = 0usize;
    for &(addr, seg_len) in segs {
        if done >= len {
            break;
        }
        let n = seg_len.min(len - done);
        // SAFETY: Both ranges are valid (the caller's contract) and do
        // not overlap (provider memory against the ULP's).
        unsafe { core::ptr::copy_nonoverlapping(src.add(done), addr as *mut u8, n) };
        done += n;
    }
    done
}

/// The completion callback of every slot.
///
/// # Safety
///
/// Called by ib_core only, for a work request posted with a slot's cqe.
unsafe extern "C" fn slot_done(_cq: *mut sys::ib_cq, wc: *mut sys::ib_wc) {
    // SAFETY: ib_core's valid completion.
    let d = unsafe { dma::done(wc) };
    let slot = d.cqe.cast::<Slot>().cast_const();
    // SAFETY: Requests are only posted with a slot's cqe (the first field
    // of the `repr(C)` slot), whose ring and data path outlive the QP's
    // drain, the last time this runs for them (type invariant of `Ring`).
    let (path, index) = unsafe { (&*(*slot).path, (*slot).index) };
    if index < SLOTS {
        path.received(index, &d);
    } else {
        path.sent(index - SLOTS, &d);
    }
}

impl DataPath {
    pub(crate) fn new() -> Result<Arc<Self>> {
        let mut free = KVec::with_capacity(SLOTS, GFP_KERNEL)?;
        let mut ops = KVec::with_capacity(SLOTS, GFP_KERNEL)?;
        for i in 0..SLOTS {
            free.push(i, GFP_KERNEL)?;
            ops.push(None, GFP_KERNEL)?;
        }
        let posted = KVec::with_capacity(RECV_MAX, GFP_KERNEL)?;
        let held = KVec::with_capacity(SLOTS, GFP_KERNEL)?;
        Arc::pin_init(
            pin_init!(Self {
                st <- new_spinlock_irq!(State {
                    qp: core::ptr::null_mut(),
                    ring: core::ptr::null(),
                    tx_cq: None,
                    rx_cq: None,
                    credits: 0,
                    to_return: 0,
                    free,
                    ops,
                    posted,
                    held,
                    up: false,
                    closed: false,
                }),
            }),
            GFP_KERNEL,
        )
    }

    /// Sets the CQs operations complete to (at `kfi_enable`).
    pub(crate) fn set_cqs(&self, tx: Option<CqRef>, rx: Option<CqRef>) {
        let mut st = self.st.lock();
        st.tx_cq = tx;
        st.rx_cq = rx;
    }

    /// Makes the ring of a new QP on `dev` with local key `lkey`. Process
    /// context.
    ///
    /// # Safety
    ///
    /// `dev` is registered until the ring is dropped.
    pub(crate) unsafe fn ring(
        self: &Arc<Self>,
        dev: *mut sys::ib_device,
        lkey: u32,
    ) -> Result<KBox<Ring>> {
        let mut slots = KVec::with_capacity(2 * SLOTS, GFP_KERNEL)?;
        let mut bufs = KVec::with_capacity(2 * SLOTS, GFP_KERNEL)?;
        for index in 0..2 * SLOTS {
            slots.push(
                Slot {
                    cqe: sys::ib_cqe {
                        done: Some(slot_done),
                    },
                    path: Arc::as_ptr(self),
                    index,
                },
                GFP_KERNEL,
            )?;
            // SAFETY: The caller's contract, passed on.
            bufs.push(unsafe { DmaBuf::new(dev, SLOT) }?, GFP_KERNEL)?;
        }
        // INVARIANT: Both have 2 * SLOTS entries and are never changed;
        // `path` is `self`, which the ring's owner keeps alive.
        Ok(KBox::new(Ring { slots, bufs, lkey }, GFP_KERNEL)?)
    }

    /// Starts moving messages over `qp` with `ring`: posts every receive
    /// slot. Process context.
    ///
    /// # Safety
    ///
    /// `qp` is live and `ring` is this path's, both until `detach`
    /// returns and the QP is drained; the ring does not move meanwhile.
    pub(crate) unsafe fn attach(&self, qp: *mut sys::ib_qp, ring: &Ring) -> Result {
        for i in 0..SLOTS {
            // SAFETY: The caller's contract: the slot and its buffer stay
            // valid until the drain completes the request.
            unsafe { post_recv_slot(qp, ring, i) }?;
        }
        let mut st = self.st.lock();
        st.qp = qp;
        st.ring = ring;
        st.credits = SLOTS;
        st.to_return = 0;
        Ok(())
    }

    /// The connection came up (sends may go) or ended.
    pub(crate) fn set_up(&self, up: bool) {
        self.st.lock().up = up;
    }

    /// Stops using the QP (before it is drained and destroyed): no more
    /// posting. Any context but hard interrupt.
    pub(crate) fn detach(&self) {
        let mut st = self.st.lock();
        st.qp = core::ptr::null_mut();
        st.held.clear();
    }

    /// Completes every posted receive as canceled (the endpoint closes or
    /// its connection ended), and refuses new operations once `closing`.
    pub(crate) fn cancel(&self, closing: bool) {
        let mut st = self.st.lock();
        st.closed |= closing;
        let cq = st.rx_cq;
        for p in st.posted.iter() {
            report_err(cq, &p.entry, ECANCELED);
        }
        st.posted.clear();
    }

    /// Takes back the posted receive with `context`: it completes with
    /// `ECANCELED`. `ENOENT` if no such receive waits.
    pub(crate) fn cancel_recv(&self, context: usize) -> Result {
        let mut st = self.st.lock();
        let i = st
            .posted
            .iter()
            .position(|p| p.entry.context == context)
            .ok_or(ENOENT)?;
        let p = st.posted.remove(i).map_err(|_| ENOENT)?;
        report_err(st.rx_cq, &p.entry, ECANCELED);
        Ok(())
    }

    /// `kfi_sendmsg`: copies the message into a slot and sends it. Any
    /// context but hard interrupt.
    ///
    /// # Safety
    ///
    /// `msg` was passed by kfabric.ko to `sendmsg` (checked list).
    pub(crate) unsafe fn send(&self, msg: &ksys::kfi_msg, flags: u64) -> Result {
        // SAFETY: The caller's contract.
        let (segs, n, total) = unsafe { segments(msg) }?;
        if total > MSG_MAX {
            return Err(EMSGSIZE);
        }
        let mut st = self.st.lock();
        if st.closed || !st.up || st.qp.is_null() {
            return Err(ENOTCONN);
        }
        // One credit stays for credit updates.
        if st.credits < 2 {
            return Err(EAGAIN);
        }
        let Some(slot) = st.free.pop() else {
            return Err(EAGAIN);
        };
        let mut f = F_DATA;
        if flags & ksys::KFI_REMOTE_CQ_DATA != 0 {
            f |= F_CQ_DATA;
        }
        let credits = st.to_return.min(u16::MAX as usize);
        // SAFETY: The ring is live while `qp` is set (attach's contract).
        let ring = unsafe { &*st.ring };
        let buf = &ring.bufs[SLOTS + slot];
        // SAFETY: A free send slot is used by no work request and by no
        // other CPU (taken from `free` under the lock); the ULP's buffers
        // are valid for the call.
        unsafe {
            let dst = buf.addr();
            write_header(dst, f, credits as u16, total as u32, msg.data);
            let mut off = HDR;
            for &(addr, len) in &segs[..n] {
                core::ptr::copy_nonoverlapping(addr as *const u8, dst.add(off), len);
                off += len;
            }
        }
        let report = flags & ksys::KFI_INJECT == 0;
        let entry = CqEntry {
            context: msg.context as usize,
            flags: ksys::KFI_SEND | ksys::KFI_MSG,
            len: total,
            ..Default::default()
        };
        st.ops[slot] = Some(Op { entry, report });
        let sge = buf.sge(HDR + total, ring.lkey);
        let cqe = (&raw const ring.slots[SLOTS + slot].cqe).cast_mut();
        // SAFETY: `qp` is live (attach's contract); the slot and its
        // buffer stay valid until the request completes.
        match unsafe { dma::post_send(st.qp, sge, cqe) } {
            Ok(()) => {
                st.credits -= 1;
                st.to_return -= credits;
                Ok(())
            }
            Err(e) => {
                st.ops[slot] = None;
                st.free.push_within_capacity(slot).map_err(|_| EINVAL)?;
                Err(e)
            }
        }
    }

    /// `kfi_recvmsg`: takes a held message, or queues the receive. Any
    /// context but hard interrupt.
    ///
    /// # Safety
    ///
    /// `msg` was passed by kfabric.ko to `recvmsg` (checked list).
    pub(crate) unsafe fn recv(&self, msg: &ksys::kfi_msg) -> Result {
        // SAFETY: The caller's contract.
        let (segs, n, _) = unsafe { segments(msg) }?;
        let p = Posted {
            entry: CqEntry {
                context: msg.context as usize,
                flags: ksys::KFI_RECV | ksys::KFI_MSG,
                buf: segs[0].0,
                ..Default::default()
            },
            segs,
            n,
        };
        let mut st = self.st.lock();
        if st.closed {
            return Err(ENOTCONN);
        }
        if st.held.is_empty() {
            return st.posted.push_within_capacity(p).map_err(|_| EAGAIN);
        }
        let (index, len, data, cq_data) = st.held.remove(0).map_err(|_| EINVAL)?;
        // SAFETY: Held slots belong to a live ring (`detach` clears them).
        let ring = unsafe { &*st.ring };
        Self::deliver(&mut st, ring, index, p, len, data, cq_data);
        Self::return_credits(&mut st);
        Ok(())
    }

    /// Copies the message in receive slot `index` into `p`, completes it
    /// and reposts the slot.
    fn deliver(
        st: &mut State,
        ring: &Ring,
        index: usize,
        mut p: Posted,
        len: usize,
        data: u64,
        cq_data: bool,
    ) {
        let src = ring.bufs[index].addr().wrapping_add(HDR);
        // SAFETY: The slot holds `len` bytes after the header (checked at
        // receipt); the ULP's buffers are valid until this completion.
        let placed = unsafe { scatter(src, len, &p.segs[..p.n]) };
        p.entry.len = placed;
        if cq_data {
            p.entry.flags |= ksys::KFI_REMOTE_CQ_DATA;
            p.entry.data = data;
        }
        report_recv(st.rx_cq, &p.entry, len - placed);
        Self::repost(st, ring, index);
    }

    /// Gives receive slot `index` back to the device and counts the credit.
    fn repost(st: &mut State, ring: &Ring, index: usize) {
        if st.qp.is_null() {
            return;
        }
        // SAFETY: `qp` is live and the ring is its (attach's contract).
        if unsafe { post_recv_slot(st.qp, ring, index) }.is_ok() {
            st.to_return += 1;
        }
    }

    /// A receive slot's work request completed.
    fn received(&self, index: usize, d: &dma::Done) {
        let mut st = self.st.lock();
        if !d.ok || st.qp.is_null() {
            return;
        }
        // SAFETY: A completion for a slot of the attached ring.
        let ring = unsafe { &*st.ring };
        let b = ring.bufs[index].bytes();
        let Some((f, credits, len, data)) = read_header(b, d.len) else {
            // A malformed message: the peer is broken or hostile; its
            // slot is not reposted, so it cannot repeat this forever.
            pr_warn!("kfi_ibverbs: malformed message dropped\n");
            return;
        };
        st.credits = st.credits.saturating_add(credits).min(SLOTS);
        if f & F_DATA == 0 {
            Self::repost(&mut st, ring, index);
        } else if st.posted.is_empty() {
            // Cannot overflow: at most SLOTS slots exist.
            let _ = st
                .held
                .push_within_capacity((index, len, data, f & F_CQ_DATA != 0));
        } else if let Ok(p) = st.posted.remove(0) {
            Self::deliver(&mut st, ring, index, p, len, data, f & F_CQ_DATA != 0);
        }
        Self::return_credits(&mut st);
    }

    /// A send slot's work request completed.
    fn sent(&self, slot: usize, d: &dma::Done) {
        let mut st = self.st.lock();
        let op = st.ops.get_mut(slot).and_then(Option::take);
        let _ = st.free.push_within_capacity(slot);
        if let Some(op) = op.filter(|o| o.report) {
            if d.ok {
                report(st.tx_cq, &op.entry);
            } else {
                report_err(st.tx_cq, &op.entry, if d.flushed { ECANCELED } else { EIO });
            }
        }
        Self::return_credits(&mut st);
    }

    /// Sends a header-only message when half the peer's credits are due.
    fn return_credits(st: &mut State) {
        if st.qp.is_null() || st.to_return < SLOTS / 2 || st.credits == 0 {
            return;
        }
        let Some(slot) = st.free.pop() else {
            return;
        };
        // SAFETY: Attached ring (qp is set).
        let ring = unsafe { &*st.ring };
        let credits = st.to_return.min(u16::MAX as usize);
        let buf = &ring.bufs[SLOTS + slot];
        // SAFETY: A free send slot, ours under the lock.
        unsafe { write_header(buf.addr(), 0, credits as u16, 0, 0) };
        let sge = buf.sge(HDR, ring.lkey);
        let cqe = (&raw const ring.slots[SLOTS + slot].cqe).cast_mut();
        // SAFETY: As in `send`.
        if unsafe { dma::post_send(st.qp, sge, cqe) }.is_ok() {
            st.credits -= 1;
            st.to_return -= credits;
        } else {
            let _ = st.free.push_within_capacity(slot);
        }
    }
}

/// Posts receive slot `index` of `ring` on `qp`.
///
/// # Safety
///
/// `qp` is live; the ring stays valid until the request completes.
unsafe fn post_recv_slot(qp: *mut sys::ib_qp, ring: &Ring, index: usize) -> Result {
    let sge = ring.bufs[index].sge(SLOT, ring.lkey);
    let cqe = (&raw const ring.slots[index].cqe).cast_mut();
    // SAFETY: The caller's contract.
    unsafe { dma::post_recv(qp, sge, cqe) }
}

/// Writes a header at `dst`.
///
/// # Safety
///
/// `dst` is valid for [`HDR`] bytes of writes.
unsafe fn write_header(dst: *mut u8, flags: u8, credits: u16, len: u32, data: u64) {
    let mut h = [0u8; HDR];
    h[0] = MAGIC;
    h[1] = flags;
    h[2..4].copy_from_slice(&credits.to_le_bytes());
    h[4..8].copy_from_slice(&len.to_le_bytes());
    h[8..16].copy_from_slice(&data.to_le_bytes());
    // SAFETY: The caller's contract.
    unsafe { core::ptr::copy_nonoverlapping(h.as_ptr(), dst, HDR) };
}

/// Reads the header of a received slot `b` of which `got` bytes arrived:
/// (flags, credits, payload length, CQ data), or `None` when the peer
/// sent something else.
fn read_header(b: &[u8], got: usize) -> Option<(u8, usize, usize, u64)> {
    let h = b.get(..HDR)?;
    if h[0] != MAGIC {
        return None;
    }
    let credits = u16::from_le_bytes([h[2], h[3]]) as usize;
    let len = u32::from_le_bytes([h[4], h[5], h[6], h[7]]) as usize;
    let data = u64::from_le_bytes(h[8..16].try_into().ok()?);
    // The length must be what arrived, and fit the slot.
    if got != HDR.checked_add(len)? || got > b.len() {
        return None;
    }
    Some((h[1], credits, len, data))
}
