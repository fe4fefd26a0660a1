// SPDX-License-Identifier: GPL-2.0

//! Memory regions: the ULP's buffers registered for peers' RDMA with a
//! fast-registration MR of the domain's PD.
//!
//! The registration is a work request: `kfi_mr_reg` posts it on the
//! domain's registration link (`reglink.rs`), or, when the device has no
//! link, on a connected QP of the domain (`ENOTCONN` when there is
//! none), and waits for it (process context). A peer that stalls such a
//! QP (the request waits behind data the peer does not take) gets
//! [`REG_WAIT_MS`]; then that connection is ended, which flushes the
//! request. Remote addresses are the target's kernel virtual
//! addresses (`KFI_MR_VIRT_ADDR`); the key is the MR's rkey, chosen by
//! the device (`KFI_MR_PROV_KEY`). Closing the region frees the MR, which
//! invalidates the key; so does the device's removal.

use kernel::{prelude::*, sync::Arc};

use crate::{
    conn::Conn,
    domain::DomShared,
    ib::frmr::{pages_of, FastReg},
    ib_sys as sys,
    kfi::{kfi_sys as ksys, toolkit::segments::Segment, toolkit::segments::Segments},
    region::IbRegion,
    reglink::RegLink,
};

/// How long a registration may wait for its QP.
const REG_WAIT_MS: u32 = 5000;

/// The provider's data of an open region: it leaves the domain's list
/// (and frees its MR) when kfabric.ko closes the region.
pub(crate) struct MrHandle {
    dom: Arc<DomShared>,
    region: Arc<IbRegion>,
}

impl Drop for MrHandle {
    fn drop(&mut self) {
        // The MR first, while the domain still lists the region: a
        // removal of the device that comes meanwhile frees the listed
        // regions' MRs, and so waits for this one (`IbRegion`'s lock)
        // before it lets the device go.
        self.region.device_gone();
        self.dom.dd.remove_region(&self.region);
    }
}

/// The device access rights of kfi access bits, on a device that does
/// atomics (`atomics`) or not. Every atomic of the device returns the old
/// value, so a region takes peers' atomics only with both remote rights
/// (as a fetching atomic needs on kfi_sockets).
fn access(kfi: u64, atomics: bool) -> u32 {
    // Remote writes need local write access too (IB and iWARP rules);
    // the device writes RDMA read responses through it as well.
    let mut a = sys::IB_ACCESS_LOCAL_WRITE;
    if kfi & ksys::KFI_REMOTE_READ != 0 {
        a |= sys::IB_ACCESS_REMOTE_READ;
    }
    if kfi & ksys::KFI_REMOTE_WRITE != 0 {
        a |= sys::IB_ACCESS_REMOTE_WRITE;
    }
    let both = ksys::KFI_REMOTE_READ | ksys::KFI_REMOTE_WRITE;
    if atomics && kfi & both == both {
        a |= sys::IB_ACCESS_REMOTE_ATOMIC;
    }
    a
}

/// Where a registration's request was posted.
enum PostedOn<'a> {
    /// The domain's registration link.
    Link(&'a RegLink),
    /// A connection of the domain (when the link cannot be built).
    Conn(Arc<Conn>),
}

impl PostedOn<'_> {
    /// Ends the QP that holds the request, which flushes it. Process
    /// context.
    fn abort(&self) {
        match self {
            Self::Link(k) => k.shutdown(),
            Self::Conn(c) => c.abort(),
        }
    }
}

/// Counts a registration in flight in the domain while it lives.
struct Busy<'a>(&'a DomShared);

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.reg_busy(false);
    }
}

/// Registers the buffers of `attr` on `dom`: the region and its key.
/// Process context.
pub(crate) fn register(dom: &Arc<DomShared>, attr: &ksys::kfi_mr_attr) -> Result<(MrHandle, u64)> {
    // SAFETY: Every member of the union is a pointer; which one it is,
    // `iov_type` says, and `Segments` reads it as that.
    let list = unsafe { attr.__bindgen_anon_1.mr_iov }.cast::<c_void>();
    let segs = || {
        // SAFETY: kfabric.ko checked the list type and count; the ULP
        // keeps the list valid during the call.
        unsafe { Segments::new(attr.iov_type, list, attr.iov_count) }
    };
    // SAFETY: The ULP keeps registered memory valid until it closes the
    // region (kfi_mr_reg's contract), which frees the MR first.
    unsafe { register_segments(dom, segs, attr.access, None, false) }
}

/// Registers `len` bytes of kernel memory at `addr` on `dom` for the
/// provider's own use, with kfi access bits `access`; peers name its
/// first byte by its offset in its page (see [`kernel_iova`]), not by
/// its kernel address. Only over the domain's registration link
/// (`ENOTCONN` without one): a registration the ULP did not ask for
/// never waits behind, or ends, one of its connections. Process context.
///
/// # Safety
///
/// The memory stays valid until the returned region is dropped.
pub(crate) unsafe fn register_kernel(
    dom: &Arc<DomShared>,
    addr: usize,
    len: usize,
    access: u64,
) -> Result<(MrHandle, u64)> {
    let segs = || Ok(core::iter::once(Ok(Segment::Addr { addr, len })));
    // SAFETY: The caller's contract.
    unsafe { register_segments(dom, segs, access, Some(kernel_iova(addr)), true) }
}

/// The address peers name the first byte of [`register_kernel`]'s memory
/// at `addr` by: its offset in its page (a region's first byte keeps its
/// offset).
pub(crate) fn kernel_iova(addr: usize) -> u64 {
    (addr % kernel::page::PAGE_SIZE) as u64
}

/// Registers the segments `segs` gives (each time it is called, the
/// same) on `dom`, with kfi access bits `access`, peers naming the first
/// byte `iova` (`None`: its kernel address): the region and its key.
/// Over the registration link, or, unless `link_only`, a connection of
/// the domain. Process context. The domain's teardown lock is held while the MR is
/// built and posted, not while the request is waited for (a stalled QP
/// must not hold up the closes and the device removal that would flush
/// it); the registration is counted meanwhile, and a device removal
/// waits for it after destroying the QPs.
///
/// # Safety
///
/// The segments' memory stays valid until the region is dropped.
unsafe fn register_segments<I: Iterator<Item = Result<Segment>>>(
    dom: &Arc<DomShared>,
    segs: impl Fn() -> Result<I>,
    access_bits: u64,
    iova: Option<u64>,
    link_only: bool,
) -> Result<(MrHandle, u64)> {
    // Built (if need be) before the teardown lock: that takes a while.
    let link = dom.dd.reg_link()?;
    if link_only && link.is_none() {
        return Err(ENOTCONN);
    }
    // One registration at a time on the connections, whose send queues
    // have room for one (a link that fails the post sends it there too;
    // `link_only` ones never go there), then on the link, post to
    // completion. In that order, so that a `link_only` one waits on the
    // link only; both before the teardown lock, which a registration
    // takes again after its wait.
    let _conn_serial = (!link_only).then(|| dom.dd.conn_regs());
    let _serial = link.as_ref().map(|k| k.serial());
    let t = dom.dd.teardown();
    let (mut pages, mut first) = (0usize, None);
    for s in segs()? {
        let s = s?;
        if s.is_empty() {
            continue;
        }
        first.get_or_insert(s.kernel_addr());
        let n = pages_of(s.kernel_addr(), s.len()).ok_or(EINVAL)?;
        pages = pages.checked_add(n).ok_or(E2BIG)?;
    }
    let first = first.ok_or(EINVAL)?;
    if pages > dom.dd.dev.limits.max_frmr_pages as usize {
        return Err(E2BIG);
    }
    let mut fr = FastReg::new(dom.dd.pd()?, pages)?;
    for s in segs()? {
        match s? {
            Segment::Addr { addr, len } if len > 0 => {
                // SAFETY: Valid while the region lives (the caller's
                // contract), and the MR is freed with it.
                unsafe { fr.add_kernel(addr, len) }?
            }
            Segment::Page { page, offset, len } if len > 0 => {
                // SAFETY: As above.
                unsafe { fr.add_page(page, offset, len) }?
            }
            _ => {}
        }
    }
    fr.map(iova.unwrap_or(first as u64))?;
    let rights = access(access_bits, dom.dd.dev.limits.atomics);
    let on = match link.as_ref() {
        Some(k) if k.post(&mut fr, rights).is_ok() => PostedOn::Link(k),
        _ if link_only => return Err(ENOTCONN),
        _ => PostedOn::Conn(dom.post_reg(&mut fr, rights)?),
    };
    dom.reg_busy(true);
    // Declared before `fr`, so dropped after it: the removal waits until
    // the MR (and its PD reference) is gone.
    let busy = Busy(dom);
    let mut fr = fr;
    drop(t);
    if let Err(e) = fr.wait(REG_WAIT_MS) {
        if e == ETIMEDOUT {
            on.abort();
            // Flushed now (or by the QP's destruction at a close or the
            // device's removal): the device completes it without the peer.
            let _ = fr.wait(0);
        } else if let PostedOn::Link(k) = on {
            // A failed request leaves the link's QP in the error state,
            // with no rdma_cm event on rxe: it is built again next time.
            k.shutdown();
        }
        drop(fr);
        drop(busy);
        return Err(e);
    }
    drop(on);
    let _t = dom.dd.teardown();
    if !dom.dd.present() {
        // The device went meanwhile: its regions' MRs are freed.
        drop(fr);
        drop(busy);
        return Err(ENODEV);
    }
    let key = u64::from(fr.rkey());
    let region = Arc::pin_init(IbRegion::new(fr, rights), GFP_KERNEL)?;
    dom.dd.add_region(region.clone())?;
    drop(busy);
    let handle = MrHandle {
        dom: dom.clone(),
        region,
    };
    Ok((handle, key))
}
