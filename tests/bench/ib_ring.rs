// SPDX-License-Identifier: GPL-2.0

//! The memory of one raw verbs bandwidth run (`raw_ib.rs`): the run's
//! source and destination slots (`Shape::slots`) in kmalloc memory mapped
//! for DMA, in chunks of as many slots as one region holds, each chunk
//! registered as a fast-registration region for the peer's RDMA reads
//! (source) or writes (destination), its remote addresses the kernel
//! virtual addresses of its bytes (as kfi_ibverbs' regions).
//! Made for every run, before its timed part, as the kfi run registers
//! its target's buffer; local access is through the PD's local DMA key.

use kernel::{prelude::*, sync::Arc};

use crate::{
    ib::{
        dma::DmaBuf,
        frmr::{pages_of, FastReg},
        verbs::Pd,
    },
    ib_sys as sys,
    run::{Bufs, Shape},
};

/// How long a registration may take.
const REG_MS: u32 = 20000;

/// One side's slots (source or destination).
struct Side {
    /// Dropped before the memory they cover.
    regions: KVec<FastReg>,
    chunks: KVec<DmaBuf>,
}

/// A run's slots. Nothing uses them once the run's requests are done;
/// its owner keeps them (or leaks them) while some may still be in
/// flight.
pub(crate) struct Ring {
    src: Side,
    dst: Side,
    sh: Shape,
    /// Slots of a chunk.
    per: usize,
    lkey: u32,
}

/// Registers `len` bytes at `at` of `mem` as a region (remote addresses:
/// the bytes' kernel virtual addresses) for the peer's `access`, posted on
/// `qp` and waited for. Process context.
///
/// # Safety
///
/// `qp` is a live QP of `pd` whose teardown drains it; `mem` outlives the
/// region.
pub(crate) unsafe fn region(
    pd: &Arc<Pd>,
    mem: &DmaBuf,
    at: usize,
    len: usize,
    qp: *mut sys::ib_qp,
    access: u32,
) -> Result<FastReg> {
    let addr = (mem.addr() as usize).checked_add(at).ok_or(EINVAL)?;
    if at.checked_add(len).ok_or(EINVAL)? > mem.bytes().len() {
        return Err(EINVAL);
    }
    let mut r = FastReg::new(pd.clone(), pages_of(addr, len).ok_or(EINVAL)?)?;
    // SAFETY: The bytes lie in `mem`, which outlives the region (the
    // caller's contract).
    unsafe { r.add_kernel(addr, len) }?;
    r.map(addr as u64)?;
    // SAFETY: The caller's contract.
    unsafe { r.post(qp, sys::IB_ACCESS_LOCAL_WRITE | access) }?;
    r.wait(REG_MS)?;
    Ok(r)
}

impl Ring {
    /// The slots of `sh` on `dev`, chunks of at most `cap` bytes
    /// registered on `qp`. Process context.
    ///
    /// # Safety
    ///
    /// `dev` is `pd`'s device and stays registered while the ring lives;
    /// `qp` is a live QP of `pd` whose teardown drains it.
    pub(crate) unsafe fn new(
        dev: *mut sys::ib_device,
        pd: &Arc<Pd>,
        qp: *mut sys::ib_qp,
        sh: Shape,
        cap: usize,
    ) -> Result<Self> {
        let slots = sh.slots();
        if sh.size == 0 || sh.size > cap || slots == 0 {
            return Err(EINVAL);
        }
        let per = (cap / sh.size).min(slots);
        let side = |access: u32| -> Result<Side> {
            let mut s = Side {
                regions: KVec::new(),
                chunks: KVec::new(),
            };
            for first in (0..slots).step_by(per) {
                let len = (slots - first).min(per) * sh.size;
                // SAFETY: The caller's contract.
                let mem = unsafe { DmaBuf::new(dev, len) }?;
                // SAFETY: The caller's contract; `mem` is kept beside the
                // region and dropped after it (`Side`'s field order).
                let r = unsafe { region(pd, &mem, 0, len, qp, access) }?;
                s.chunks.push(mem, GFP_KERNEL)?;
                s.regions.push(r, GFP_KERNEL)?;
            }
            Ok(s)
        };
        Ok(Self {
            src: side(sys::IB_ACCESS_REMOTE_READ)?,
            dst: side(sys::IB_ACCESS_REMOTE_WRITE)?,
            sh,
            per,
            lkey: pd.local_key(),
        })
    }

    /// The chunk of operation `i` and the slot's offset in it.
    fn at(&self, src: bool, i: usize) -> Result<(&DmaBuf, usize, usize)> {
        let s = self.sh.slot(i);
        let (side, c) = (if src { &self.src } else { &self.dst }, s / self.per);
        let mem = side.chunks.get(c).ok_or(EINVAL)?;
        let off = (s % self.per) * self.sh.size;
        if off + self.sh.size > mem.bytes().len() {
            return Err(EINVAL);
        }
        Ok((mem, c, off))
    }

    /// The local entry of operation `i`'s slot of the source (`src`) or
    /// the destination.
    pub(crate) fn sge(&self, src: bool, i: usize) -> Result<sys::ib_sge> {
        let (mem, _, off) = self.at(src, i)?;
        Ok(mem.sge_at(off, self.sh.size, self.lkey))
    }

    /// The first byte of operation `i`'s slot, for the CPU.
    pub(crate) fn ptr(&self, src: bool, i: usize) -> Result<*mut u8> {
        let (mem, _, off) = self.at(src, i)?;
        // SAFETY: The slot lies in the chunk (checked in `at`).
        Ok(unsafe { mem.addr().add(off) })
    }

    /// The remote address and key of operation `i`'s slot.
    pub(crate) fn remote(&self, src: bool, i: usize) -> Result<(u64, u32)> {
        let (mem, c, off) = self.at(src, i)?;
        let side = if src { &self.src } else { &self.dst };
        let r = side.regions.get(c).ok_or(EINVAL)?;
        let at = (mem.addr() as usize).checked_add(off).ok_or(EINVAL)?;
        Ok((at as u64, r.rkey()))
    }

    /// The bench's source slots copied in (the destination is zeroed at
    /// creation). Before the run: nothing uses the memory.
    pub(crate) fn load(&self, bufs: &Bufs) -> Result {
        for i in 0..self.sh.slots() {
            let from = self.sh.op(&bufs.src, i)?;
            // SAFETY: The slot's `size` bytes lie in its chunk; no work
            // request uses them before the run, and the bench's buffer is
            // other memory.
            unsafe {
                core::ptr::copy_nonoverlapping(from.as_ptr(), self.ptr(true, i)?, from.len())
            };
        }
        Ok(())
    }

    /// The destination slots copied out into the bench's buffer. After
    /// the run: nothing writes the memory.
    pub(crate) fn unload(&self, bufs: &mut Bufs) -> Result {
        for i in 0..self.sh.slots() {
            let (mem, _, off) = self.at(false, i)?;
            let from = mem.bytes().get(off..off + self.sh.size).ok_or(EINVAL)?;
            self.sh.op_mut(&mut bufs.dst, i)?.copy_from_slice(from);
        }
        Ok(())
    }
}
