// SPDX-License-Identifier: GPL-2.0

//! RMA of a connection: RDMA reads and writes of the ULP's buffers into
//! the peer's fast-registered regions.
//!
//! An operation is cut into work requests: each covers one piece of one
//! remote buffer and up to the device's scatter/gather limit of local
//! pieces, a piece never crossing a page (each is mapped for DMA on its
//! own, with the PD's local key). At most [`RMA_WRS`] requests are in
//! flight; the rest of an operation, and the operations behind it, wait
//! and go on from the completion handler. An operation completes when
//! its last request does, with the first error any of them had; a
//! remote access error puts the QP in the error state (the RDMA
//! transports end a connection there), so the requests after it flush.
//!
//! An atomic is an operation of one request per 64-bit element (fetch-add
//! or compare-swap, which the device does); each old value lands in the
//! ring's result slot of its request and is copied to the ULP's result
//! buffer when the request completes. A write for delivery or commit
//! completion is followed by an RDMA read on the same QP, of the peer's
//! flush region (`flush.rs`) or, without one, of nothing: the target
//! answers it only after the writes before it are placed, so the
//! operation completes with that read.
//!
//! Reads, atomics and flushing reads are read-type requests: at most the
//! connection's negotiated initiator depth of them are outstanding (see
//! [`Rma::set_depth`]). One that would go beyond waits, with everything
//! behind it, until a read-type request completes; with a depth of 0 (a
//! peer that answers no reads) an operation that needs one fails with
//! `EOPNOTSUPP`.
//! Runs under the data path's lock: any context but hard interrupt.

use kernel::prelude::*;

use crate::{
    flush::{FlushAt, FLUSH_LEN},
    frame::Buffers,
    ib::dma::{self, AtomicOp, DmaBuf},
    ib_sys as sys,
    kfi::{
        kfi_sys as ksys,
        toolkit::completion::{report, report_err, CqEntry, Reports},
    },
};

/// RMA work requests a connection has in flight at most.
pub(crate) const RMA_WRS: usize = 64;
/// RMA operations a connection holds (in flight or waiting) at most.
pub(crate) const RMA_OPS: usize = 32;
/// Most remote buffers of one operation.
pub(crate) const RMA_IOV_MAX: usize = 4;
/// Most local pieces of one work request this provider builds.
pub(crate) const SGE_MAX: usize = 8;
/// Most bytes of one local piece (a physically contiguous run).
const SGE_BYTES_MAX: usize = 1 << 30;
/// Most bytes of one RDMA request: a request that takes longer than the
/// connection's deadline on work requests (`data::WR_WAIT_MS`) ends it, so
/// a slow but healthy link must finish one in time (1 MiB in 10 s is
/// 100 KB/s).
const WR_BYTES_MAX: usize = 1 << 20;
/// Most elements of one atomic (a request each).
pub(crate) const ATOMIC_MAX: usize = 8;
/// Bytes of an atomic's element.
pub(crate) const ELEM: usize = 8;
/// Bytes of the ring's result slots: one element per request.
pub(crate) const RESULTS_LEN: usize = RMA_WRS * ELEM;
// A flushing read lands in its request's result slot.
const _: () = assert!(FLUSH_LEN <= ELEM);

/// The operands of an atomic: one 64-bit value (native endian) per
/// element.
#[derive(Clone, Copy)]
pub(crate) struct Atomic {
    /// Compare-swap (`src` swapped in where the target equals `cmp`);
    /// else fetch-add of `src`.
    pub(crate) cswap: bool,
    pub(crate) src: [u64; ATOMIC_MAX],
    pub(crate) cmp: [u64; ATOMIC_MAX],
    /// Where the old values go (`None` for `kfi_atomic`).
    pub(crate) result: Option<Buffers>,
}

/// One remote buffer: address, length and the region's key.
#[derive(Clone, Copy, Default)]
pub(crate) struct Remote {
    pub(crate) addr: u64,
    pub(crate) len: usize,
    pub(crate) key: u32,
}

/// An RMA operation.
#[derive(Clone, Copy)]
pub(crate) struct RmaOp {
    pub(crate) entry: CqEntry,
    pub(crate) read: bool,
    pub(crate) local: Buffers,
    pub(crate) remote: [Remote; RMA_IOV_MAX],
    pub(crate) nremote: usize,
    /// Remote CQ data for the peer (a write), sent after the write.
    pub(crate) data: Option<u64>,
    /// The operands of an atomic (`None`: RMA).
    atomic: Option<Atomic>,
    /// Bytes the operation moves.
    len: usize,
    /// A flushing read follows the writes (delivery or commit
    /// completion); whether it is posted.
    flush: bool,
    flush_posted: bool,
    /// Bytes in posted requests.
    posted: usize,
    /// Posted requests not yet completed.
    outstanding: usize,
    /// The first error of the operation.
    err: Option<Error>,
}

impl RmaOp {
    /// An operation of `local` against `remote` (whose total is the
    /// local one, checked by the caller).
    pub(crate) fn new(
        entry: CqEntry,
        read: bool,
        local: Buffers,
        remote: [Remote; RMA_IOV_MAX],
        nremote: usize,
        data: Option<u64>,
    ) -> Self {
        Self {
            entry,
            read,
            local,
            remote,
            nremote,
            data,
            atomic: None,
            len: local.total,
            flush: false,
            flush_posted: false,
            posted: 0,
            outstanding: 0,
            err: None,
        }
    }

    /// An atomic of `count` elements (at most [`ATOMIC_MAX`], checked by
    /// the caller) at `remote`.
    pub(crate) fn atomic(entry: CqEntry, remote: Remote, a: Atomic, count: usize) -> Self {
        let mut r = [Remote::default(); RMA_IOV_MAX];
        r[0] = remote;
        let mut op = Self::new(entry, false, Buffers::default(), r, 1, None);
        op.atomic = Some(a);
        op.len = count.min(ATOMIC_MAX) * ELEM;
        op
    }

    /// A write that completes only once the target placed it (delivery
    /// or commit completion): a flushing read follows it.
    pub(crate) fn flushed(mut self) -> Self {
        self.flush = !self.read && self.atomic.is_none();
        self
    }

    fn total(&self) -> usize {
        self.len
    }

    /// The operation moves no byte (it completes at once).
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Its next request is a read-type one (a read, an atomic or the
    /// flushing read), which the initiator depth bounds.
    fn next_reads(&self) -> bool {
        self.read || self.atomic.is_some() || self.posted >= self.total()
    }

    /// Everything of the operation is posted (or it failed).
    fn all_posted(&self) -> bool {
        self.err.is_some() || (self.posted >= self.total() && (!self.flush || self.flush_posted))
    }

    /// The remote buffer at byte `at` of the operation: (address, key,
    /// bytes left in that buffer).
    fn remote_at(&self, at: usize) -> Option<(u64, u32, usize)> {
        let mut skip = at;
        for r in &self.remote[..self.nremote] {
            if skip < r.len {
                return Some((r.addr.checked_add(skip as u64)?, r.key, r.len - skip));
            }
            skip -= r.len;
        }
        None
    }
}

/// A posted request: its operation and the pieces to unmap.
struct Wr {
    op: usize,
    read: bool,
    /// A read-type request (counted against the initiator depth).
    rd: bool,
    sges: [sys::ib_sge; SGE_MAX],
    n: usize,
    /// An atomic's element: the byte of the operation's result it fills.
    result_at: Option<usize>,
    /// The watchdog's run count when it was posted (`Link::tick`).
    tick: u64,
}

impl Wr {
    fn new(op: usize, read: bool) -> Self {
        Self {
            op,
            read,
            rd: false,
            sges: core::array::from_fn(|_| sys::ib_sge::default()),
            n: 0,
            result_at: None,
            tick: 0,
        }
    }
}

/// Where requests go: the QP and device, while the connection is up.
pub(crate) struct Link<'a> {
    pub(crate) qp: *mut sys::ib_qp,
    pub(crate) dev: *mut sys::ib_device,
    pub(crate) lkey: u32,
    /// Local pieces per write and per read request.
    pub(crate) write_sges: usize,
    pub(crate) read_sges: usize,
    /// The connection watchdog's run count now, noted in each request
    /// posted (how old it is, in runs).
    pub(crate) tick: u64,
    /// The result slots of atomics ([`RESULTS_LEN`] bytes, one element
    /// per request).
    pub(crate) results: &'a DmaBuf,
}

/// The RMA state of a connection.
pub(crate) struct Rma {
    ops: KVec<Option<RmaOp>>,
    free_ops: KVec<usize>,
    /// Operations with requests still to post, oldest first.
    queue: KVec<usize>,
    wrs: KVec<Option<Wr>>,
    free_wrs: KVec<usize>,
    /// Read-type requests the connection may have outstanding: its
    /// negotiated initiator depth.
    depth: usize,
    /// Read-type requests posted and not yet completed (at most `depth`).
    reads: usize,
    /// Where flushing reads go (`flush.rs`); `None`: they are empty, at
    /// the write's first remote buffer.
    flush_at: Option<FlushAt>,
}

impl Rma {
    pub(crate) fn new() -> Result<Self> {
        let mut r = Self {
            ops: KVec::with_capacity(RMA_OPS, GFP_KERNEL)?,
            free_ops: KVec::with_capacity(RMA_OPS, GFP_KERNEL)?,
            queue: KVec::with_capacity(RMA_OPS, GFP_KERNEL)?,
            wrs: KVec::with_capacity(RMA_WRS, GFP_KERNEL)?,
            free_wrs: KVec::with_capacity(RMA_WRS, GFP_KERNEL)?,
            depth: 0,
            reads: 0,
            flush_at: None,
        };
        for i in 0..RMA_OPS {
            r.ops.push(None, GFP_KERNEL)?;
            r.free_ops.push(RMA_OPS - 1 - i, GFP_KERNEL)?;
        }
        for i in 0..RMA_WRS {
            r.wrs.push(None, GFP_KERNEL)?;
            r.free_wrs.push(RMA_WRS - 1 - i, GFP_KERNEL)?;
        }
        Ok(r)
    }

    /// The watchdog's run count when the oldest request not yet completed
    /// was posted.
    pub(crate) fn oldest_tick(&self) -> Option<u64> {
        self.wrs.iter().flatten().map(|w| w.tick).min()
    }

    /// Sets the connection's negotiated initiator depth (when it comes
    /// up, before any operation).
    pub(crate) fn set_depth(&mut self, depth: u8) {
        self.depth = depth.into();
    }

    /// Sets where flushing reads go (when it comes up, before any
    /// operation).
    pub(crate) fn set_flush(&mut self, at: Option<FlushAt>) {
        self.flush_at = at;
    }

    /// Queues `op`; `EAGAIN` when the connection holds [`RMA_OPS`]
    /// already.
    pub(crate) fn submit(&mut self, op: RmaOp) -> Result {
        let i = self.free_ops.pop().ok_or(EAGAIN)?;
        self.ops[i] = Some(op);
        if self.queue.push_within_capacity(i).is_err() {
            self.ops[i] = None;
            let _ = self.free_ops.push_within_capacity(i);
            return Err(EAGAIN);
        }
        Ok(())
    }

    /// Writes with remote CQ data whose data is still to be queued (their
    /// requests are not all posted yet).
    pub(crate) fn data_to_come(&self) -> usize {
        self.queue
            .iter()
            .filter(|&&oi| matches!(self.ops.get(oi), Some(Some(op)) if op.data.is_some()))
            .count()
    }

    /// Posts what the free requests allow, oldest operation first, with
    /// `cqe(i)` the completion context of request `i`. `wrote(data)` is
    /// called for a write with remote CQ data once all of it is posted.
    pub(crate) fn pump(
        &mut self,
        link: &Link<'_>,
        cq: Reports,
        cqe: impl Fn(usize) -> *mut sys::ib_cqe,
        mut wrote: impl FnMut(u64),
    ) {
        while let Some(&oi) = self.queue.first() {
            let Some(mut op) = self.ops[oi] else {
                let _ = self.queue.remove(0);
                continue;
            };
            while !op.all_posted() {
                let rd = op.next_reads();
                if rd && self.depth == 0 {
                    op.err = Some(EOPNOTSUPP);
                    break;
                }
                if rd && self.reads >= self.depth {
                    break;
                }
                let Some(wi) = self.free_wrs.pop() else {
                    break;
                };
                let posted = if op.posted < op.total() {
                    Self::post_one(&mut op, oi, wi, link, cqe(wi))
                } else {
                    Self::post_flush(&mut op, oi, wi, self.flush_at, link, cqe(wi))
                };
                match posted {
                    Ok(mut wr) => {
                        wr.rd = rd;
                        wr.tick = link.tick;
                        self.reads += usize::from(rd);
                        self.wrs[wi] = Some(wr);
                        op.outstanding += 1;
                    }
                    Err(e) => {
                        let _ = self.free_wrs.push_within_capacity(wi);
                        op.err = Some(e);
                    }
                }
            }
            let all = op.all_posted();
            self.ops[oi] = Some(op);
            if !all {
                return;
            }
            let _ = self.queue.remove(0);
            if let (Some(d), None) = (op.data, op.err) {
                wrote(d);
            }
            self.finish_if_done(oi, cq);
        }
    }

    /// Posts the read that flushes a write's requests, as request `wi`:
    /// the target answers it once they are placed. It reads
    /// [`FLUSH_LEN`] bytes of the peer's flush region `at` into request
    /// `wi`'s result slot, or, without one, nothing at the write's first
    /// remote buffer (its one local entry empty: iWARP reads need one).
    fn post_flush(
        op: &mut RmaOp,
        oi: usize,
        wi: usize,
        at: Option<FlushAt>,
        link: &Link<'_>,
        cqe: *mut sys::ib_cqe,
    ) -> Result<Wr> {
        let (addr, key, len) = match at {
            Some(f) => (f.addr, f.key, FLUSH_LEN),
            None => (op.remote[0].addr, op.remote[0].key, 0),
        };
        link.results.sync_for_device(wi * ELEM, len);
        let mut sge = [link.results.sge_at(wi * ELEM, len, link.lkey)];
        // SAFETY: A live QP (the link exists only while it does); the entry
        // is request `wi`'s own mapped result slot (`wi` came from the free
        // list); `cqe` lives in the ring, which outlives the QP's drain.
        unsafe { dma::post_rdma(link.qp, true, &mut sge, addr, key, cqe) }?;
        let wr = Wr::new(oi, true);
        op.flush_posted = true;
        Ok(wr)
    }

    /// Posts element `posted / ELEM` of atomic `a` of `op` as request
    /// `wi`: its old value lands in result slot `wi`.
    fn post_atomic(
        op: &mut RmaOp,
        a: &Atomic,
        oi: usize,
        wi: usize,
        link: &Link<'_>,
        cqe: *mut sys::ib_cqe,
    ) -> Result<Wr> {
        let (raddr, key, room) = op.remote_at(op.posted).ok_or(EINVAL)?;
        // The device works on aligned 64-bit words only.
        if room < ELEM || raddr % ELEM as u64 != 0 {
            return Err(EINVAL);
        }
        let i = op.posted / ELEM;
        let (src, cmp) = (*a.src.get(i).ok_or(EINVAL)?, *a.cmp.get(i).ok_or(EINVAL)?);
        let what = if a.cswap {
            AtomicOp::CompareSwap {
                compare: cmp,
                swap: src,
            }
        } else {
            AtomicOp::FetchAdd(src)
        };
        link.results.sync_for_device(wi * ELEM, ELEM);
        let sge = link.results.sge_at(wi * ELEM, ELEM, link.lkey);
        // SAFETY: A live QP (the link exists only while it does); the result slot is the
        // ring's, mapped while it lives, and this request's only (`wi` came from the free
        // list); `cqe` lives in the ring, which outlives the QP's drain.
        unsafe { dma::post_atomic(link.qp, sge, raddr, key, what, cqe) }?;
        let mut wr = Wr::new(oi, false);
        wr.result_at = Some(op.posted);
        op.posted += ELEM;
        Ok(wr)
    }

    /// Builds and posts the next request of `op` (index `oi`) as request
    /// `wi`.
    fn post_one(
        op: &mut RmaOp,
        oi: usize,
        wi: usize,
        link: &Link<'_>,
        cqe: *mut sys::ib_cqe,
    ) -> Result<Wr> {
        if let Some(a) = op.atomic {
            return Self::post_atomic(op, &a, oi, wi, link, cqe);
        }
        let (raddr, key, room) = op.remote_at(op.posted).ok_or(EINVAL)?;
        let room = room.min(WR_BYTES_MAX);
        let max = if op.read {
            link.read_sges
        } else {
            link.write_sges
        }
        .clamp(1, SGE_MAX);
        let mut wr = Wr::new(oi, op.read);
        let mut len = 0usize;
        let mut err = None;
        while wr.n < max && len < room && op.posted + len < op.total() {
            let Some((addr, seg)) = op.local.piece_at(op.posted + len) else {
                err = Some(EINVAL);
                break;
            };
            // One entry per physically contiguous run: siw takes one entry
            // per RDMA read, so a run cut per page would be a request per
            // page.
            let n = dma::contiguous(addr, seg.min(room - len).min(SGE_BYTES_MAX));
            if n == 0 {
                err = Some(EFAULT);
                break;
            }
            // SAFETY: The ULP's buffer is valid until the operation
            // completes, after this request; unmapped at its completion.
            match unsafe { dma::map_kernel(link.dev, addr, n, !op.read, link.lkey) } {
                Ok(sge) => {
                    wr.sges[wr.n] = sge;
                    wr.n += 1;
                    len += n;
                }
                Err(e) => {
                    err = Some(e);
                    break;
                }
            }
        }
        let posted = match err {
            Some(e) => Err(e),
            // SAFETY: A live QP (the link exists only while it does); the
            // entries are mapped and `cqe` lives in the ring, which
            // outlives the QP's drain.
            None => unsafe {
                dma::post_rdma(link.qp, op.read, &mut wr.sges[..wr.n], raddr, key, cqe)
            },
        };
        if let Err(e) = posted {
            Self::unmap(link.dev, &wr);
            return Err(e);
        }
        op.posted += len;
        Ok(wr)
    }

    fn unmap(dev: *mut sys::ib_device, wr: &Wr) {
        for sge in &wr.sges[..wr.n] {
            // SAFETY: Mapped by `post_one` on `dev`; its request is done
            // or was never posted.
            unsafe { dma::unmap_kernel(dev, sge, !wr.read) };
        }
    }

    /// Request `wi` completed (`d`); `dev` is the device it was mapped
    /// for, `results` the ring's result slots (`None` once detached).
    pub(crate) fn done(
        &mut self,
        wi: usize,
        d: &dma::Done,
        dev: *mut sys::ib_device,
        results: Option<&DmaBuf>,
        cq: Reports,
    ) {
        let Some(wr) = self.wrs.get_mut(wi).and_then(Option::take) else {
            return;
        };
        if wr.rd {
            self.reads = self.reads.saturating_sub(1);
        }
        Self::unmap(dev, &wr);
        if let Some(op) = self.ops.get_mut(wr.op).and_then(Option::as_mut) {
            op.outstanding = op.outstanding.saturating_sub(1);
            if !d.ok && op.err.is_none() {
                op.err = Some(d.err);
            }
            let res = op.atomic.and_then(|a| a.result);
            if let (true, Some(at), Some(res), Some(slots)) = (d.ok, wr.result_at, res, results) {
                slots.sync_for_cpu(wi * ELEM, ELEM);
                match slots.bytes().get(wi * ELEM..(wi + 1) * ELEM) {
                    Some(old) => {
                        // SAFETY: The result buffers are valid until the
                        // operation completes, after this request; the
                        // slot is this request's, which the device wrote.
                        unsafe { res.scatter(at, old.as_ptr(), ELEM) };
                    }
                    None => {
                        op.err.get_or_insert(EIO);
                    }
                }
            }
        }
        let _ = self.free_wrs.push_within_capacity(wi);
        if !self.queue.contains(&wr.op) {
            self.finish_if_done(wr.op, cq);
        }
    }

    /// Completes operation `oi` if nothing of it is left in flight.
    fn finish_if_done(&mut self, oi: usize, cq: Reports) {
        let Some(op) = self.ops.get(oi).copied().flatten() else {
            return;
        };
        if op.outstanding > 0 {
            return;
        }
        self.ops[oi] = None;
        let _ = self.free_ops.push_within_capacity(oi);
        match op.err {
            None => report(cq, &op.entry),
            Some(e) => report_err(cq, &op.entry, e),
        }
    }

    /// The connection ended: operations with requests still to post
    /// complete as canceled once their posted requests have flushed.
    pub(crate) fn cancel(&mut self, cq: Reports) {
        while let Some(&oi) = self.queue.first() {
            let _ = self.queue.remove(0);
            if let Some(op) = self.ops.get_mut(oi).and_then(Option::as_mut) {
                op.err.get_or_insert(ECANCELED);
            }
            self.finish_if_done(oi, cq);
        }
    }
}

/// The completion flags of an initiator's RMA operation.
pub(crate) fn flags(read: bool) -> u64 {
    ksys::KFI_RMA
        | if read {
            ksys::KFI_READ
        } else {
            ksys::KFI_WRITE
        }
}

/// Reads the remote buffers of an RMA request.
///
/// # Safety
///
/// `m` was passed by kfabric.ko to `readmsg`/`writemsg` (checked lists).
pub(crate) unsafe fn remotes(
    m: &ksys::kfi_msg_rma,
) -> Result<([Remote; RMA_IOV_MAX], usize, usize)> {
    let mut r = [Remote::default(); RMA_IOV_MAX];
    if m.rma_iov_count > RMA_IOV_MAX || (m.rma_iov_count > 0 && m.rma_iov.is_null()) {
        return Err(EINVAL);
    }
    let mut total = 0usize;
    for (i, slot) in r.iter_mut().enumerate().take(m.rma_iov_count) {
        // SAFETY: The caller's contract: `rma_iov_count` entries.
        let v = unsafe { &*m.rma_iov.add(i) };
        // A key is a 32-bit rkey on this provider.
        let key = u32::try_from(v.key).map_err(|_| ENOKEY)?;
        *slot = Remote {
            addr: v.addr,
            len: v.len,
            key,
        };
        total = total.checked_add(v.len).ok_or(EMSGSIZE)?;
    }
    Ok((r, m.rma_iov_count, total))
}
