// SPDX-License-Identifier: GPL-2.0

//! The C ops tables of a provider's objects, built from its traits: one
//! `unsafe extern "C"` trampoline per slot, which turns kfabric.ko's checked
//! C arguments into Rust ones and the `Result` back into an errno. This
//! file has the provider, fabric, domain and region slots; the endpoints'
//! are in [`super::glue_ep`].

use core::{marker::PhantomData, ptr::NonNull};
use kernel::{error::from_result, prelude::*};

use super::{
    super::kfi_sys as sys,
    object::{data, fid_ops, hand_out, header, opt_str},
    refs::FidRef,
    traits::{Domain, Endpoint, Fabric, PassiveEndpoint, Provider, Region},
};

/// The ops tables of the objects of provider `P`.
pub(super) struct Tables<P: Provider>(PhantomData<P>);

type FabricOf<P> = <P as Provider>::Fabric;
type DomainOf<P> = <FabricOf<P> as Fabric>::Domain;
pub(super) type EndpointOf<P> = <DomainOf<P> as Domain>::Endpoint;
pub(super) type PepOf<P> = <FabricOf<P> as Fabric>::PassiveEndpoint;
type RegionOf<P> = <DomainOf<P> as Domain>::Region;

impl<P: Provider> Tables<P> {
    const FABRIC_FID: sys::kfi_ops = fid_ops::<sys::kfid_fabric, FabricOf<P>>(None, None);
    const FABRIC: sys::kfi_ops_fabric = sys::kfi_ops_fabric {
        size: size_of::<sys::kfi_ops_fabric>(),
        domain: if <FabricOf<P>>::HAS_DOMAIN {
            Some(Self::domain)
        } else {
            None
        },
        passive_ep: if <FabricOf<P>>::HAS_PASSIVE_EP {
            Some(Self::passive_ep)
        } else {
            None
        },
        eq_open: Some(sys::kfi_util_eq_open),
    };
    const DOMAIN_FID: sys::kfi_ops = fid_ops::<sys::kfid_domain, DomainOf<P>>(None, None);
    const DOMAIN: sys::kfi_ops_domain = sys::kfi_ops_domain {
        size: size_of::<sys::kfi_ops_domain>(),
        av_open: if <DomainOf<P>>::SOCKADDR_AV {
            Some(sys::kfi_util_av_open)
        } else {
            None
        },
        cq_open: Some(sys::kfi_util_cq_open),
        endpoint: if <DomainOf<P>>::HAS_ENDPOINT {
            Some(Self::endpoint)
        } else {
            None
        },
        cntr_open: Some(sys::kfi_util_cntr_open),
    };
    const MR: sys::kfi_ops_mr = sys::kfi_ops_mr {
        size: size_of::<sys::kfi_ops_mr>(),
        regattr: if <DomainOf<P>>::HAS_MR_REG {
            Some(Self::mr_reg)
        } else {
            None
        },
        alloc: if <DomainOf<P>>::HAS_MR_ALLOC {
            Some(Self::mr_alloc)
        } else {
            None
        },
        map: if <DomainOf<P>>::HAS_MR_MAP {
            Some(Self::mr_map)
        } else {
            None
        },
        unmap: if <DomainOf<P>>::HAS_MR_UNMAP {
            Some(Self::mr_unmap)
        } else {
            None
        },
    };
    const MR_FID: sys::kfi_ops = fid_ops::<sys::kfid_mr, RegionOf<P>>(None, None);

    /// # Safety
    ///
    /// kfabric.ko's contract: valid arguments, `info` valid for writes.
    pub(super) unsafe extern "C" fn getinfo(
        _version: u32,
        node: *const c_char,
        service: *const c_char,
        flags: u64,
        hints: *const sys::kfi_info,
        info: *mut *mut sys::kfi_info,
    ) -> c_int {
        from_result(|| {
            // SAFETY: Valid arguments (kfabric.ko's contract).
            let list =
                unsafe { P::getinfo(opt_str(node), opt_str(service), flags, hints.as_ref()) }?;
            let mut head: *mut sys::kfi_info = core::ptr::null_mut();
            let mut tail: *mut *mut sys::kfi_info = &mut head;
            for e in list {
                let p = e.into_raw();
                // SAFETY: `tail` is `head` or the `next` of the last entry,
                // which the list owns now.
                unsafe {
                    *tail = p;
                    tail = &raw mut (*p).next;
                }
            }
            if head.is_null() {
                return Err(ENODATA);
            }
            // SAFETY: Valid for writes.
            unsafe { *info = head };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// kfabric.ko's contract.
    pub(super) unsafe extern "C" fn fabric(
        attr: *const sys::kfi_fabric_attr,
        out: *mut *mut sys::kfid_fabric,
        _context: *mut c_void,
    ) -> c_int {
        from_result(|| {
            // SAFETY: Valid attributes (kfabric.ko's contract).
            let f = P::fabric(unsafe { &*attr })?;
            let hdr = sys::kfid_fabric {
                fid: header(&Self::FABRIC_FID),
                ops: &Self::FABRIC,
                api_version: 0,
            };
            // SAFETY: `out` is valid for writes.
            unsafe { hand_out(hdr, f, out) }
        })
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open fabric of `P`.
    unsafe extern "C" fn domain(
        fabric: *mut sys::kfid_fabric,
        info: *mut sys::kfi_info,
        out: *mut *mut sys::kfid_domain,
        _context: *mut c_void,
    ) -> c_int {
        from_result(|| {
            // SAFETY: An open fabric of `P`; a valid entry.
            let d = unsafe { data::<_, FabricOf<P>>(fabric).domain(&*info) }?;
            let hdr = sys::kfid_domain {
                fid: header(&Self::DOMAIN_FID),
                ops: &Self::DOMAIN,
                mr: &Self::MR,
            };
            // SAFETY: `out` is valid for writes.
            unsafe { hand_out(hdr, d, out) }
        })
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open fabric of `P`.
    unsafe extern "C" fn passive_ep(
        fabric: *mut sys::kfid_fabric,
        info: *mut sys::kfi_info,
        out: *mut *mut sys::kfid_pep,
        _context: *mut c_void,
    ) -> c_int {
        from_result(|| {
            // SAFETY: An open fabric of `P`; a valid entry.
            let p = unsafe { data::<_, FabricOf<P>>(fabric).passive_ep(&*info) }?;
            let hdr = sys::kfid_pep {
                fid: header(&Self::PEP_FID),
                ops: &Self::PEP_EP,
                cm: &Self::PEP_CM,
            };
            // SAFETY: `out` is valid for writes.
            unsafe { hand_out(hdr, p, out) }?;
            // SAFETY: Just handed out: a live object of `P`.
            unsafe {
                if let Some(f) = NonNull::new((*out).cast::<sys::kfid>()) {
                    Self::pep(*out).opened(FidRef(f));
                }
            }
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open domain of `P`.
    unsafe extern "C" fn endpoint(
        domain: *mut sys::kfid_domain,
        info: *mut sys::kfi_info,
        out: *mut *mut sys::kfid_ep,
        _context: *mut c_void,
    ) -> c_int {
        from_result(|| {
            // SAFETY: An open domain of `P`; a valid entry.
            let e = unsafe { data::<_, DomainOf<P>>(domain).endpoint(&*info) }?;
            let a = e.attr();
            let hdr = sys::kfid_ep {
                fid: header(&Self::EP_FID),
                ops: &Self::EP,
                cm: &Self::CM,
                msg: &Self::MSG,
                rma: &Self::RMA,
                tagged: &Self::TAGGED,
                atomic: &Self::ATOMIC,
                caps: a.caps,
                op_flags: a.op_flags,
                tx_iov_limit: a.tx_iov_limit,
                rx_iov_limit: a.rx_iov_limit,
                rma_iov_limit: a.rma_iov_limit,
                inject_size: a.inject_size,
                max_msg_size: a.max_msg_size,
            };
            // SAFETY: `out` is valid for writes.
            unsafe { hand_out(hdr, e, out) }?;
            // SAFETY: Just handed out: a live object of `P`.
            unsafe {
                if let Some(f) = NonNull::new((*out).cast::<sys::kfid>()) {
                    Self::ep(*out).opened(FidRef(f));
                }
            }
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open domain of `P`, checked attributes.
    unsafe extern "C" fn mr_reg(
        domain: *mut sys::kfid_domain,
        attr: *const sys::kfi_mr_attr,
        flags: u64,
        out: *mut *mut sys::kfid_mr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: An open domain of `P`; valid attributes.
            let r = unsafe { data::<_, DomainOf<P>>(domain).mr_reg(&*attr, flags) }?;
            // SAFETY: `out` is valid for writes.
            unsafe { Self::hand_out_region(r, out) }
        })
    }

    /// Hands out a region of `P` with its header.
    ///
    /// # Safety
    ///
    /// `out` is valid for writes.
    unsafe fn hand_out_region(
        r: Region<RegionOf<P>>,
        out: *mut *mut sys::kfid_mr,
    ) -> Result<c_int> {
        let hdr = sys::kfid_mr {
            fid: header(&Self::MR_FID),
            mem_desc: r.desc,
            key: r.key,
            ops: &Self::MR,
        };
        // SAFETY: `out` is valid for writes (requirement).
        unsafe { hand_out(hdr, r.data, out) }
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open domain of `P`, checked arguments.
    unsafe extern "C" fn mr_alloc(
        domain: *mut sys::kfid_domain,
        max_segs: usize,
        access: u64,
        flags: u64,
        out: *mut *mut sys::kfid_mr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: An open domain of `P`.
            let r = unsafe { data::<_, DomainOf<P>>(domain).mr_alloc(max_segs, access, flags) }?;
            // SAFETY: `out` is valid for writes.
            unsafe { Self::hand_out_region(r, out) }
        })
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open region of `P`, a checked list; calls
    /// on one region do not race (the ULP's contract).
    unsafe extern "C" fn mr_map(mr: *mut sys::kfid_mr, map: *const sys::kfi_mr_map) -> c_int {
        from_result(|| {
            // SAFETY: An open region of `P`; a valid, checked list.
            let key = unsafe { <DomainOf<P>>::mr_map(data::<_, RegionOf<P>>(mr), &*map) }?;
            // SAFETY: An open region; its owner does not race this call.
            unsafe { (*mr).key = key };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open region of `P`; calls on one region
    /// do not race (the ULP's contract).
    unsafe extern "C" fn mr_unmap(mr: *mut sys::kfid_mr) -> c_int {
        from_result(|| {
            // SAFETY: An open region of `P`.
            unsafe { <DomainOf<P>>::mr_unmap(data::<_, RegionOf<P>>(mr)) }?;
            // SAFETY: `mr` is an open region, not raced (the contract): its header is ours to
            // write; the dead key is not shown any more.
            unsafe { (*mr).key = 0 };
            Ok(0)
        })
    }
}
