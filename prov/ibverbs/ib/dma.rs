// SPDX-License-Identifier: GPL-2.0

//! Kernel buffers mapped for a device's DMA, and the work requests that
//! move them (one scatter/gather entry each).

use core::ptr::NonNull;
use kernel::{error::to_result, prelude::*};

use crate::ib_sys as sys;

/// A buffer of kmalloc memory mapped for DMA both ways (a message slot:
/// the CPU fills or reads it while no work request uses it).
///
/// # Invariants
///
/// `dma` maps all of `buf` for `dev`, which stays registered while the
/// buffer lives (its owner drops it before the device's removal ends).
pub(crate) struct DmaBuf {
    buf: KVec<u8>,
    dma: u64,
    dev: NonNull<sys::ib_device>,
}

// SAFETY: The buffer is owned; the device pointer is only passed to
// ib_core, which may be called from any thread.
unsafe impl Send for DmaBuf {}
// SAFETY: See `Send`.
unsafe impl Sync for DmaBuf {}

impl DmaBuf {
    /// `len` zeroed bytes mapped for `dev`. Process context.
    ///
    /// # Safety
    ///
    /// `dev` is registered, and stays so until the buffer is dropped.
    pub(crate) unsafe fn new(dev: *mut sys::ib_device, len: usize) -> Result<Self> {
        let dev = NonNull::new(dev).ok_or(EINVAL)?;
        let mut buf = KVec::with_capacity(len, GFP_KERNEL)?;
        buf.resize(len, 0, GFP_KERNEL)?;
        let mut dma = 0u64;
        // SAFETY: `dev` is registered (the caller's contract); `buf` is
        // kmalloc memory of `len` bytes that lives until the unmap.
        to_result(unsafe {
            sys::kfi_ib_dma_map(dev.as_ptr(), buf.as_mut_ptr().cast(), len, &mut dma)
        })?;
        // INVARIANT: Mapped above.
        Ok(Self { buf, dma, dev })
    }

    /// The bytes, for the CPU (while no work request uses them; what the
    /// device wrote, once [`Self::sync_for_cpu`]).
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// Makes what the device wrote into `len` bytes at `at` visible to the
    /// CPU, before it reads them (a no-op where DMA is coherent and not
    /// bounced). Any context.
    pub(crate) fn sync_for_cpu(&self, at: usize, len: usize) {
        self.sync(at, len, true);
    }

    /// Hands `len` bytes at `at` to the device before a work request uses
    /// them (to read what the CPU wrote, or to write them). Any context.
    pub(crate) fn sync_for_device(&self, at: usize, len: usize) {
        self.sync(at, len, false);
    }

    fn sync(&self, at: usize, len: usize, for_cpu: bool) {
        let at = at.min(self.buf.len());
        let len = len.min(self.buf.len() - at);
        if len == 0 {
            return;
        }
        // SAFETY: `dev` is registered while the buffer lives (the
        // creator's contract) and the range lies in the mapping made at
        // creation (invariant), clipped above.
        unsafe {
            sys::kfi_ib_dma_sync(
                self.dev.as_ptr(),
                self.dma + at as u64,
                len,
                i32::from(for_cpu),
            )
        };
    }

    /// The kernel address of the bytes (for a copy done through a shared
    /// reference while the owner serializes access).
    pub(crate) fn addr(&self) -> *mut u8 {
        self.buf.as_ptr().cast_mut()
    }

    /// The one scatter/gather entry of the first `len` bytes.
    pub(crate) fn sge(&self, len: usize, lkey: u32) -> sys::ib_sge {
        self.sge_at(0, len, lkey)
    }

    /// The scatter/gather entry of `len` bytes at `at` (clipped to the
    /// buffer).
    pub(crate) fn sge_at(&self, at: usize, len: usize, lkey: u32) -> sys::ib_sge {
        let at = at.min(self.buf.len());
        sys::ib_sge {
            addr: self.dma + at as u64,
            length: len.min(self.buf.len() - at) as u32,
            lkey,
        }
    }
}

impl Drop for DmaBuf {
    fn drop(&mut self) {
        // SAFETY: Mapped at creation (invariant), no work request uses it
        // any more (its owner drained the QP first).
        unsafe { sys::kfi_ib_dma_unmap(self.dev.as_ptr(), self.dma, self.buf.len()) };
    }
}

/// Posts a send of `sge` on `qp`, signaled, reporting to `cqe`. Any
/// context.
///
/// # Safety
///
/// `qp` is a live QP; `cqe` stays valid until the work request completes
/// (the QP's drain completes it at the latest), and `sge` names mapped
/// memory that stays so until then.
pub(crate) unsafe fn post_send(
    qp: *mut sys::ib_qp,
    sge: sys::ib_sge,
    cqe: *mut sys::ib_cqe,
) -> Result {
    // SAFETY: The caller's contract.
    unsafe { post_send_with(qp, sge, cqe, None) }
}

/// [`post_send`], or with `invalidate` a send that asks the peer's device
/// to invalidate that key (only a test's hostile peer sends one).
///
/// # Safety
///
/// As for [`post_send`].
pub(crate) unsafe fn post_send_with(
    qp: *mut sys::ib_qp,
    mut sge: sys::ib_sge,
    cqe: *mut sys::ib_cqe,
    invalidate: Option<u32>,
) -> Result {
    let mut wr = sys::ib_send_wr {
        sg_list: &mut sge,
        num_sge: 1,
        opcode: sys::IB_WR_SEND,
        send_flags: sys::IB_SEND_SIGNALED,
        ..Default::default()
    };
    // SAFETY: Writing the union member this provider always uses.
    unsafe { *wr.__bindgen_anon_1.wr_cqe.as_mut() = cqe };
    if let Some(key) = invalidate {
        wr.opcode = sys::IB_WR_SEND_WITH_INV;
        // SAFETY: Writing the union member a send with invalidate reads.
        unsafe { *wr.ex.invalidate_rkey.as_mut() = key };
    }
    // SAFETY: The caller's contract; ib_core copies the request and its
    // scatter/gather list into the queue before returning.
    to_result(unsafe { sys::kfi_ib_post_send(qp, &wr) })
}

/// How many of the `max` bytes of kernel memory at `addr` lie in
/// physically contiguous pages, so that one entry maps them: at least the
/// rest of the first page (capped at `max`), 0 when `addr` is not kernel
/// memory. Any context.
pub(crate) fn contiguous(addr: usize, max: usize) -> usize {
    // SAFETY: Only looks the pages up.
    unsafe { sys::kfi_ib_kaddr_run(addr as *const c_void, max) }
}

/// Maps `len` bytes of kernel memory at `addr`, in physically contiguous
/// pages (see [`contiguous`]), for the device to read (`to_device`) or
/// write: the scatter/gather entry with local key `lkey`. Any context.
///
/// # Safety
///
/// `dev` is registered; the memory stays valid until [`unmap_kernel`].
pub(crate) unsafe fn map_kernel(
    dev: *mut sys::ib_device,
    addr: usize,
    len: usize,
    to_device: bool,
    lkey: u32,
) -> Result<sys::ib_sge> {
    // SAFETY: Only looks the address up.
    let page = unsafe { sys::kfi_ib_kaddr_page(addr as *const c_void) };
    if page.is_null() || contiguous(addr, len) < len {
        return Err(EFAULT);
    }
    let length = u32::try_from(len).map_err(|_| EINVAL)?;
    let mut dma = 0u64;
    // SAFETY: The caller's contract; the range lies in `page` and the
    // pages that follow it in memory (checked above).
    to_result(unsafe {
        sys::kfi_ib_dma_map_page(
            dev,
            page,
            addr % kernel::page::PAGE_SIZE,
            len,
            i32::from(to_device),
            &mut dma,
        )
    })?;
    Ok(sys::ib_sge {
        addr: dma,
        length,
        lkey,
    })
}

/// Undoes [`map_kernel`].
///
/// # Safety
///
/// `sge` came from `map_kernel` on `dev` with the same `to_device`, and no
/// work request uses it any more.
pub(crate) unsafe fn unmap_kernel(dev: *mut sys::ib_device, sge: &sys::ib_sge, to_device: bool) {
    // SAFETY: The caller's contract.
    unsafe { sys::kfi_ib_dma_unmap_page(dev, sge.addr, sge.length as usize, i32::from(to_device)) };
}

/// Posts an RDMA read (`read`) or write of the local entries `sges` at
/// `raddr` of the peer's region `rkey` on `qp`, signaled, reporting to
/// `cqe`. Any context.
///
/// # Safety
///
/// As for [`post_send`], for every entry of `sges`.
pub(crate) unsafe fn post_rdma(
    qp: *mut sys::ib_qp,
    read: bool,
    sges: &mut [sys::ib_sge],
    raddr: u64,
    rkey: u32,
    cqe: *mut sys::ib_cqe,
) -> Result {
    let n = i32::try_from(sges.len()).map_err(|_| EINVAL)?;
    // SAFETY: The caller's contract; ib_core copies the request and its
    // list before returning.
    to_result(unsafe {
        sys::kfi_ib_post_rdma(qp, i32::from(read), sges.as_mut_ptr(), n, raddr, rkey, cqe)
    })
}

/// What an atomic does to the 8 bytes it targets.
#[derive(Clone, Copy)]
pub(crate) enum AtomicOp {
    /// Adds the value.
    FetchAdd(u64),
    /// Replaces them with `swap` if they equal `compare`.
    CompareSwap { compare: u64, swap: u64 },
}

/// Posts an atomic `op` on the 8 bytes at `raddr` of the peer's region
/// `rkey` on `qp`, signaled, reporting to `cqe`; the old value goes to
/// `sge` (8 bytes). Any context.
///
/// # Safety
///
/// As for [`post_send`].
pub(crate) unsafe fn post_atomic(
    qp: *mut sys::ib_qp,
    mut sge: sys::ib_sge,
    raddr: u64,
    rkey: u32,
    op: AtomicOp,
    cqe: *mut sys::ib_cqe,
) -> Result {
    let (cswap, compare_add, swap) = match op {
        AtomicOp::FetchAdd(v) => (0, v, 0),
        AtomicOp::CompareSwap { compare, swap } => (1, compare, swap),
    };
    // SAFETY: The caller's contract; ib_core copies the request and its
    // entry before returning.
    to_result(unsafe {
        sys::kfi_ib_post_atomic(qp, cswap, &mut sge, raddr, rkey, compare_add, swap, cqe)
    })
}

/// Posts a receive into `sge` on `qp`, reporting to `cqe`. Any context.
///
/// # Safety
///
/// As for [`post_send`].
pub(crate) unsafe fn post_recv(
    qp: *mut sys::ib_qp,
    mut sge: sys::ib_sge,
    cqe: *mut sys::ib_cqe,
) -> Result {
    let mut wr = sys::ib_recv_wr {
        sg_list: &mut sge,
        num_sge: 1,
        ..Default::default()
    };
    // SAFETY: Writing the union member this provider always uses.
    unsafe { *wr.__bindgen_anon_1.wr_cqe.as_mut() = cqe };
    // SAFETY: The caller's contract; ib_core copies the request.
    to_result(unsafe { sys::kfi_ib_post_recv(qp, &wr) })
}

/// What a work completion says: the `ib_cqe` of its request, whether it
/// succeeded, and the bytes received.
pub(crate) struct Done {
    pub(crate) cqe: *mut sys::ib_cqe,
    pub(crate) ok: bool,
    /// Flushed: the QP went to the error state (close or connection loss).
    pub(crate) flushed: bool,
    pub(crate) len: usize,
    /// What a failed request means for its operation.
    pub(crate) err: Error,
    /// A successful receive that took a plain send: not one with
    /// immediate data or with invalidate, nor an RDMA write with
    /// immediate data (meaningless for other completions).
    pub(crate) plain: bool,
    /// The key a peer's send with invalidate named (a successful receive
    /// only): the device has invalidated it, if it was one of the PD's.
    pub(crate) invalidated: Option<u32>,
}

/// Reads a work completion ib_core passes to an `ib_cqe`'s `done`.
///
/// # Safety
///
/// `wc` is the valid completion of a done callback.
pub(crate) unsafe fn done(wc: *const sys::ib_wc) -> Done {
    // SAFETY: The caller's contract; requests are posted with `wr_cqe`.
    let wc = unsafe { &*wc };
    Done {
        // SAFETY: Reading the union member this provider always sets.
        cqe: unsafe { *wc.__bindgen_anon_1.wr_cqe.as_ref() },
        ok: wc.status == sys::IB_WC_SUCCESS,
        flushed: wc.status == sys::IB_WC_WR_FLUSH_ERR,
        len: wc.byte_len as usize,
        err: match wc.status {
            sys::IB_WC_WR_FLUSH_ERR => ECANCELED,
            sys::IB_WC_REM_ACCESS_ERR => EACCES,
            sys::IB_WC_REM_INV_REQ_ERR => EINVAL,
            sys::IB_WC_LOC_PROT_ERR => EFAULT,
            _ => EIO,
        },
        plain: wc.opcode == sys::IB_WC_RECV
            && wc.wc_flags as u32 & (sys::IB_WC_WITH_IMM | sys::IB_WC_WITH_INVALIDATE) == 0,
        invalidated: (wc.status == sys::IB_WC_SUCCESS
            && wc.wc_flags as u32 & sys::IB_WC_WITH_INVALIDATE != 0)
            // SAFETY: The union member the flag says is set.
            .then(|| unsafe { *wc.ex.invalidate_rkey.as_ref() }),
    }
}
