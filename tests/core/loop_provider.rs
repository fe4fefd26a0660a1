// SPDX-License-Identifier: GPL-2.0

//! Two providers the core tests register for the module's lifetime, written
//! on the Rust provider API (`kfi/api/provider.rs`):
//!
//! - `kfi_test_loop`: fabric, domain, memory regions and endpoints; an
//!   endpoint's send is delivered to the receive posted on the same
//!   endpoint, with real completions in kfabric.ko's util CQs. Its
//!   endpoints claim KFI_TAGGED without implementing tagged messages, so
//!   that the core's -ENOSYS path is reachable.
//! - `kfi_test_tag`: lists other capabilities and opens nothing.

use core::{ffi::CStr, pin::Pin};
use kernel::{new_spinlock_irq, prelude::*, sync::SpinLockIrq};

use crate::kfi::{
    kfabric::version,
    kfi_sys as sys,
    provider::{self, Bound, CqRef, EndpointAttr, Info, NoPassiveEndpoint, Region},
    toolkit::completion::CqEntry,
};

/// Capabilities `kfi_test_loop` lists.
pub(crate) const LOOP_CAPS: u64 = sys::KFI_MSG | sys::KFI_SEND | sys::KFI_RECV;
/// Capabilities `kfi_test_tag` lists.
pub(crate) const TAG_CAPS: u64 = sys::KFI_MSG | sys::KFI_TAGGED | sys::KFI_SEND | sys::KFI_RECV;
/// A mode bit `kfi_test_tag` requires of its users.
pub(crate) const TAG_MODE: u64 = 1 << 59;
/// Limits of loop endpoints.
pub(crate) const LOOP_IOV_LIMIT: usize = 4;
/// Largest inject of loop endpoints.
pub(crate) const LOOP_INJECT: usize = 64;
/// Longest message of loop endpoints.
pub(crate) const LOOP_MAX_MSG: usize = 1 << 20;

/// One listed entry.
fn entry(
    caps: u64,
    mode: u64,
    ep_type: u32,
    format: u32,
    fabric: &CStr,
    domain: &CStr,
) -> Result<KVec<Info>> {
    let mut i = Info::new()?;
    i.set_names(fabric, domain)?;
    let e = i.get();
    e.caps = caps;
    e.mode = mode;
    e.addr_format = format;
    let (tx, rx, ep, dom, _) = i.attrs();
    tx.caps = caps;
    rx.caps = caps;
    ep.type_ = ep_type;
    // The tag provider differs in every domain model that hints can ask.
    if caps & sys::KFI_TAGGED != 0 {
        dom.threading = sys::KFI_THREAD_DOMAIN;
        dom.control_progress = sys::KFI_PROGRESS_MANUAL;
        dom.data_progress = sys::KFI_PROGRESS_MANUAL;
        dom.mr_mode = sys::KFI_MR_LOCAL | sys::KFI_MR_VIRT_ADDR;
    } else {
        dom.threading = sys::KFI_THREAD_SAFE;
        dom.control_progress = sys::KFI_PROGRESS_AUTO;
        dom.data_progress = sys::KFI_PROGRESS_AUTO;
    }
    let mut v = KVec::new();
    v.push(i, GFP_KERNEL)?;
    Ok(v)
}

/// The `kfi_test_loop` provider.
pub(crate) struct Loop;

#[vtable]
impl provider::Provider for Loop {
    const NAME: &'static CStr = c"kfi_test_loop";
    const VERSION: u32 = version(1, 0);
    type Fabric = LoopFabric;

    fn getinfo(
        _node: Option<&CStr>,
        _service: Option<&CStr>,
        _flags: u64,
        _hints: Option<&sys::kfi_info>,
    ) -> Result<KVec<Info>> {
        entry(
            LOOP_CAPS,
            0,
            sys::KFI_EP_RDM,
            sys::KFI_SOCKADDR_IN,
            c"loopfab",
            c"loop0",
        )
    }

    fn fabric(_attr: &sys::kfi_fabric_attr) -> Result<LoopFabric> {
        Ok(LoopFabric)
    }
}

/// The `kfi_test_tag` provider: lists, opens nothing.
pub(crate) struct Tag;

#[vtable]
impl provider::Provider for Tag {
    const NAME: &'static CStr = c"kfi_test_tag";
    const VERSION: u32 = version(1, 2);
    type Fabric = LoopFabric;

    fn getinfo(
        _node: Option<&CStr>,
        _service: Option<&CStr>,
        _flags: u64,
        _hints: Option<&sys::kfi_info>,
    ) -> Result<KVec<Info>> {
        entry(
            TAG_CAPS,
            TAG_MODE,
            sys::KFI_EP_MSG,
            sys::KFI_SOCKADDR_IN6,
            c"tagfab",
            c"tag0",
        )
    }
}

pub(crate) struct LoopFabric;

#[vtable]
impl provider::Fabric for LoopFabric {
    type Domain = LoopDomain;
    type PassiveEndpoint = NoPassiveEndpoint;

    fn domain(&self, _info: &sys::kfi_info) -> Result<LoopDomain> {
        Ok(LoopDomain)
    }
}

pub(crate) struct LoopDomain;

#[vtable]
impl provider::Domain for LoopDomain {
    type Endpoint = Pin<KBox<LoopEp>>;
    type Region = ();

    fn endpoint(&self, _info: &sys::kfi_info) -> Result<Pin<KBox<LoopEp>>> {
        KBox::pin_init(
            try_pin_init!(LoopEp {
                state <- new_spinlock_irq!(EpState {
                    tx: None,
                    rx: None,
                    recv: None,
                    enabled: false,
                }),
            }),
            GFP_KERNEL,
        )
    }

    fn mr_reg(&self, attr: &sys::kfi_mr_attr, _flags: u64) -> Result<Region<()>> {
        Ok(Region {
            data: (),
            key: attr.requested_key,
            desc: core::ptr::null_mut(),
        })
    }
}

/// A posted receive.
#[derive(Clone, Copy)]
struct Recv {
    buf: *mut u8,
    len: usize,
    context: *mut c_void,
}

struct EpState {
    tx: Option<CqRef>,
    rx: Option<CqRef>,
    recv: Option<Recv>,
    enabled: bool,
}

// SAFETY: `recv` is the ULP's buffer, handed to us for this operation; it
// is only used under the lock.
unsafe impl Send for EpState {}

/// A loop endpoint.
#[pin_data]
pub(crate) struct LoopEp {
    #[pin]
    state: SpinLockIrq<EpState>,
}

#[vtable]
impl provider::Endpoint for Pin<KBox<LoopEp>> {
    fn attr(&self) -> EndpointAttr {
        EndpointAttr {
            caps: sys::KFI_MSG | sys::KFI_TAGGED | sys::KFI_SEND | sys::KFI_RECV,
            op_flags: sys::KFI_INJECT | sys::KFI_REMOTE_CQ_DATA | sys::KFI_TRANSMIT_COMPLETE,
            tx_iov_limit: LOOP_IOV_LIMIT,
            rx_iov_limit: LOOP_IOV_LIMIT,
            rma_iov_limit: 1,
            inject_size: LOOP_INJECT,
            max_msg_size: LOOP_MAX_MSG,
        }
    }

    fn bind(&self, what: Bound) -> Result {
        if let Bound::Cq(cq, flags) = what {
            let mut s = self.state.lock();
            if flags & sys::KFI_TRANSMIT != 0 {
                s.tx = Some(cq);
            }
            if flags & sys::KFI_RECV != 0 {
                s.rx = Some(cq);
            }
        }
        Ok(())
    }

    fn enable(&self) -> Result {
        let mut s = self.state.lock();
        if s.tx.is_none() || s.rx.is_none() {
            return Err(EINVAL);
        }
        s.enabled = true;
        Ok(())
    }

    fn recvmsg(&self, m: &sys::kfi_msg, _flags: u64) -> Result {
        if m.iov_type != sys::KFI_KVEC || m.iov_count != 1 {
            return Err(EINVAL);
        }
        // SAFETY: A checked kvec list of one entry.
        let iov = unsafe { *m.__bindgen_anon_1.msg_iov };
        let mut s = self.state.lock();
        if s.recv.is_some() {
            return Err(EAGAIN);
        }
        s.recv = Some(Recv {
            buf: iov.iov_base.cast(),
            len: iov.iov_len,
            context: m.context,
        });
        Ok(())
    }

    fn sendmsg(&self, m: &sys::kfi_msg, flags: u64) -> Result {
        if m.iov_type != sys::KFI_KVEC {
            return Err(EOPNOTSUPP);
        }
        let (r, tx, rx) = {
            let mut s = self.state.lock();
            if !s.enabled {
                return Err(EINVAL);
            }
            let r = s.recv.take().ok_or(EAGAIN)?;
            (r, s.tx.ok_or(EINVAL)?, s.rx.ok_or(EINVAL)?)
        };
        let mut len = 0;
        for i in 0..m.iov_count {
            // SAFETY: `iov_count` kvecs (checked by kfabric.ko).
            let v = unsafe { *m.__bindgen_anon_1.msg_iov.add(i) };
            let n = v.iov_len.min(r.len.saturating_sub(len));
            // SAFETY: Both buffers hold at least `n` bytes at these offsets.
            unsafe {
                core::ptr::copy_nonoverlapping(
                    v.iov_base.cast::<u8>(),
                    r.buf.add(len.min(r.len)),
                    n,
                )
            };
            len += v.iov_len;
        }
        let cq_data = flags & sys::KFI_REMOTE_CQ_DATA;
        let c = CqEntry {
            len: len.min(r.len),
            buf: r.buf as usize,
            data: if cq_data != 0 { m.data } else { 0 },
            ..CqEntry::of(r.context as usize, sys::KFI_RECV | sys::KFI_MSG | cq_data)
        };
        rx.report_recv(&c, len.saturating_sub(r.len))?;
        if flags & sys::KFI_INJECT == 0 {
            let c = CqEntry {
                len,
                ..CqEntry::of(m.context as usize, sys::KFI_SEND | sys::KFI_MSG)
            };
            tx.report(&c)?;
        }
        Ok(())
    }
}
