// SPDX-License-Identifier: GPL-2.0

//! The C ops tables of a provider's objects, built from its traits: one
//! `unsafe extern "C"` trampoline per slot, which turns kfabric.ko's checked
//! C arguments into Rust ones and the `Result` back into an errno.

use core::{marker::PhantomData, ptr::NonNull};
use kernel::{error::from_result, prelude::*};

use super::{
    super::kfi_sys as sys,
    object::{addr_buf, bytes, data, fid_ops, hand_out, header, opt_str},
    refs::{AvRef, Bound, CntrRef, CqRef, EqRef, FidRef},
    traits::{AtomicKind, Domain, Endpoint, Fabric, PassiveEndpoint, Provider, Region},
};

/// The ops tables of the objects of provider `P`.
pub(super) struct Tables<P: Provider>(PhantomData<P>);

type FabricOf<P> = <P as Provider>::Fabric;
type DomainOf<P> = <FabricOf<P> as Fabric>::Domain;
type EndpointOf<P> = <DomainOf<P> as Domain>::Endpoint;
type PepOf<P> = <FabricOf<P> as Fabric>::PassiveEndpoint;
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
    const EP_FID: sys::kfi_ops =
        fid_ops::<sys::kfid_ep, EndpointOf<P>>(Some(Self::ep_bind), Some(Self::ep_control));
    const EP: sys::kfi_ops_ep = sys::kfi_ops_ep {
        size: size_of::<sys::kfi_ops_ep>(),
        cancel: if <EndpointOf<P>>::HAS_CANCEL {
            Some(Self::cancel)
        } else {
            None
        },
        getopt: None,
        setopt: None,
    };
    const CM: sys::kfi_ops_cm = sys::kfi_ops_cm {
        size: size_of::<sys::kfi_ops_cm>(),
        getname: if <EndpointOf<P>>::HAS_GETNAME {
            Some(Self::getname)
        } else {
            None
        },
        getpeer: if <EndpointOf<P>>::HAS_GETPEER {
            Some(Self::getpeer)
        } else {
            None
        },
        connect: if <EndpointOf<P>>::HAS_CONNECT {
            Some(Self::connect)
        } else {
            None
        },
        listen: None,
        accept: if <EndpointOf<P>>::HAS_ACCEPT {
            Some(Self::accept)
        } else {
            None
        },
        reject: None,
        shutdown: if <EndpointOf<P>>::HAS_SHUTDOWN {
            Some(Self::shutdown)
        } else {
            None
        },
    };
    const MSG: sys::kfi_ops_msg = sys::kfi_ops_msg {
        size: size_of::<sys::kfi_ops_msg>(),
        recvmsg: if <EndpointOf<P>>::HAS_RECVMSG {
            Some(Self::recvmsg)
        } else {
            None
        },
        sendmsg: if <EndpointOf<P>>::HAS_SENDMSG {
            Some(Self::sendmsg)
        } else {
            None
        },
    };
    const RMA: sys::kfi_ops_rma = sys::kfi_ops_rma {
        size: size_of::<sys::kfi_ops_rma>(),
        readmsg: if <EndpointOf<P>>::HAS_READMSG {
            Some(Self::readmsg)
        } else {
            None
        },
        writemsg: if <EndpointOf<P>>::HAS_WRITEMSG {
            Some(Self::writemsg)
        } else {
            None
        },
    };
    const TAGGED: sys::kfi_ops_tagged = sys::kfi_ops_tagged {
        size: size_of::<sys::kfi_ops_tagged>(),
        recvmsg: if <EndpointOf<P>>::HAS_TRECVMSG {
            Some(Self::trecvmsg)
        } else {
            None
        },
        sendmsg: if <EndpointOf<P>>::HAS_TSENDMSG {
            Some(Self::tsendmsg)
        } else {
            None
        },
    };
    const ATOMIC: sys::kfi_ops_atomic = sys::kfi_ops_atomic {
        size: size_of::<sys::kfi_ops_atomic>(),
        writemsg: if <EndpointOf<P>>::HAS_ATOMIC {
            Some(Self::atomic_write)
        } else {
            None
        },
        readwritemsg: if <EndpointOf<P>>::HAS_ATOMIC {
            Some(Self::atomic_fetch)
        } else {
            None
        },
        compwritemsg: if <EndpointOf<P>>::HAS_ATOMIC {
            Some(Self::atomic_compare)
        } else {
            None
        },
        writevalid: if <EndpointOf<P>>::HAS_ATOMIC_VALID {
            Some(Self::valid_write)
        } else {
            None
        },
        readwritevalid: if <EndpointOf<P>>::HAS_ATOMIC_VALID {
            Some(Self::valid_fetch)
        } else {
            None
        },
        compwritevalid: if <EndpointOf<P>>::HAS_ATOMIC_VALID {
            Some(Self::valid_compare)
        } else {
            None
        },
    };
    const PEP_FID: sys::kfi_ops = fid_ops::<sys::kfid_pep, PepOf<P>>(Some(Self::pep_bind), None);
    const PEP_EP: sys::kfi_ops_ep = sys::kfi_ops_ep {
        size: size_of::<sys::kfi_ops_ep>(),
        cancel: None,
        getopt: None,
        setopt: None,
    };
    const PEP_CM: sys::kfi_ops_cm = sys::kfi_ops_cm {
        size: size_of::<sys::kfi_ops_cm>(),
        getname: if <PepOf<P>>::HAS_GETNAME {
            Some(Self::pep_getname)
        } else {
            None
        },
        getpeer: None,
        connect: None,
        listen: if <PepOf<P>>::HAS_LISTEN {
            Some(Self::listen)
        } else {
            None
        },
        accept: None,
        reject: if <PepOf<P>>::HAS_REJECT {
            Some(Self::reject)
        } else {
            None
        },
        shutdown: None,
    };

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
            // SAFETY: As above; the dead key is not shown any more.
            unsafe { (*mr).key = 0 };
            Ok(0)
        })
    }

    /// The endpoint of `P` behind `ep`.
    ///
    /// # Safety
    ///
    /// `ep` is an open endpoint of `P`.
    unsafe fn ep<'a>(ep: *mut sys::kfid_ep) -> &'a EndpointOf<P> {
        // SAFETY: As required.
        unsafe { data::<_, EndpointOf<P>>(ep) }
    }

    /// What `bfid`, an open object, is to a provider.
    ///
    /// # Safety
    ///
    /// `bfid` is an open object.
    unsafe fn bound(bfid: *mut sys::kfid, flags: u64) -> Bound {
        // SAFETY: An open object (requirement).
        let class = unsafe { (*bfid).fclass };
        match (class, NonNull::new(bfid)) {
            // INVARIANT: open and bound; kfabric.ko keeps it open.
            (sys::KFI_CLASS_CQ, Some(p)) => Bound::Cq(CqRef(p.cast()), flags),
            (sys::KFI_CLASS_EQ, Some(p)) => Bound::Eq(EqRef(p.cast())),
            (sys::KFI_CLASS_CNTR, Some(p)) => Bound::Cntr(CntrRef(p.cast()), flags),
            (sys::KFI_CLASS_AV, Some(p)) => Bound::Av(AvRef(p.cast())),
            _ => Bound::Other(bfid),
        }
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open endpoint of `P`, an open object.
    unsafe extern "C" fn ep_bind(fid: *mut sys::kfid, bfid: *mut sys::kfid, flags: u64) -> c_int {
        if !<EndpointOf<P>>::HAS_BIND {
            return ENOSYS.to_errno();
        }
        // SAFETY: As required.
        from_result(|| unsafe { Self::ep(fid.cast()).bind(Self::bound(bfid, flags)) }.map(|()| 0))
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open endpoint of `P`.
    unsafe extern "C" fn ep_control(
        fid: *mut sys::kfid,
        command: c_int,
        _arg: *mut c_void,
    ) -> c_int {
        if command != sys::KFI_ENABLE as c_int || !<EndpointOf<P>>::HAS_ENABLE {
            return ENOSYS.to_errno();
        }
        // SAFETY: As required.
        from_result(|| unsafe { Self::ep(fid.cast()).enable() }.map(|()| 0))
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open endpoint of `P`.
    unsafe extern "C" fn cancel(fid: *mut sys::kfid, context: *mut c_void) -> c_int {
        // SAFETY: As required.
        from_result(|| unsafe { Self::ep(fid.cast()).cancel(context) }.map(|()| 0))
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open endpoint of `P`, a length pointer.
    unsafe extern "C" fn getname(
        fid: *mut sys::kfid,
        addr: *mut c_void,
        addrlen: *mut usize,
    ) -> c_int {
        from_result(|| {
            // SAFETY: As required.
            let n = unsafe { Self::ep(fid.cast()).getname(addr_buf(addr, addrlen)) }?;
            // SAFETY: Checked non-NULL by kfabric.ko.
            unsafe { *addrlen = n };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open endpoint of `P`, a length pointer.
    unsafe extern "C" fn getpeer(
        ep: *mut sys::kfid_ep,
        addr: *mut c_void,
        addrlen: *mut usize,
    ) -> c_int {
        from_result(|| {
            // SAFETY: As required.
            let n = unsafe { Self::ep(ep).getpeer(addr_buf(addr, addrlen)) }?;
            // SAFETY: Checked non-NULL by kfabric.ko.
            unsafe { *addrlen = n };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open endpoint of `P`.
    unsafe extern "C" fn connect(
        ep: *mut sys::kfid_ep,
        addr: *const c_void,
        param: *const c_void,
        len: usize,
    ) -> c_int {
        // SAFETY: As required; `param` holds `len` bytes.
        from_result(|| unsafe { Self::ep(ep).connect(addr, bytes(param, len)) }.map(|()| 0))
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open endpoint of `P`.
    unsafe extern "C" fn accept(ep: *mut sys::kfid_ep, param: *const c_void, len: usize) -> c_int {
        // SAFETY: As required; `param` holds `len` bytes.
        from_result(|| unsafe { Self::ep(ep).accept(bytes(param, len)) }.map(|()| 0))
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open endpoint of `P`.
    unsafe extern "C" fn shutdown(ep: *mut sys::kfid_ep, flags: u64) -> c_int {
        // SAFETY: As required.
        from_result(|| unsafe { Self::ep(ep).shutdown(flags) }.map(|()| 0))
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open endpoint of `P`, a checked message.
    unsafe extern "C" fn sendmsg(
        ep: *mut sys::kfid_ep,
        msg: *const sys::kfi_msg,
        flags: u64,
    ) -> c_int {
        // SAFETY: As required.
        from_result(|| unsafe { Self::ep(ep).sendmsg(&*msg, flags) }.map(|()| 0))
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open endpoint of `P`, a checked message.
    unsafe extern "C" fn recvmsg(
        ep: *mut sys::kfid_ep,
        msg: *const sys::kfi_msg,
        flags: u64,
    ) -> c_int {
        // SAFETY: As required.
        from_result(|| unsafe { Self::ep(ep).recvmsg(&*msg, flags) }.map(|()| 0))
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open endpoint of `P`, a checked message.
    unsafe extern "C" fn readmsg(
        ep: *mut sys::kfid_ep,
        msg: *const sys::kfi_msg_rma,
        flags: u64,
    ) -> c_int {
        // SAFETY: As required.
        from_result(|| unsafe { Self::ep(ep).readmsg(&*msg, flags) }.map(|()| 0))
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open endpoint of `P`, a checked message.
    unsafe extern "C" fn writemsg(
        ep: *mut sys::kfid_ep,
        msg: *const sys::kfi_msg_rma,
        flags: u64,
    ) -> c_int {
        // SAFETY: As required.
        from_result(|| unsafe { Self::ep(ep).writemsg(&*msg, flags) }.map(|()| 0))
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open endpoint of `P`, a checked message.
    unsafe extern "C" fn tsendmsg(
        ep: *mut sys::kfid_ep,
        msg: *const sys::kfi_msg_tagged,
        flags: u64,
    ) -> c_int {
        // SAFETY: As required.
        from_result(|| unsafe { Self::ep(ep).tsendmsg(&*msg, flags) }.map(|()| 0))
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open endpoint of `P`, a checked message.
    unsafe extern "C" fn trecvmsg(
        ep: *mut sys::kfid_ep,
        msg: *const sys::kfi_msg_tagged,
        flags: u64,
    ) -> c_int {
        // SAFETY: As required.
        from_result(|| unsafe { Self::ep(ep).trecvmsg(&*msg, flags) }.map(|()| 0))
    }

    /// An operand array from C (empty for NULL).
    ///
    /// # Safety
    ///
    /// `p` is NULL or holds `n` entries.
    unsafe fn iocs<'a>(p: *const sys::kfi_ioc, n: usize) -> &'a [sys::kfi_ioc] {
        if p.is_null() {
            &[]
        } else {
            // SAFETY: As required.
            unsafe { core::slice::from_raw_parts(p, n) }
        }
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open endpoint of `P`, a checked message.
    unsafe extern "C" fn atomic_write(
        ep: *mut sys::kfid_ep,
        msg: *const sys::kfi_msg_atomic,
        flags: u64,
    ) -> c_int {
        // SAFETY: As required.
        from_result(|| unsafe { Self::ep(ep).atomic(&*msg, &[], &[], flags) }.map(|()| 0))
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open endpoint of `P`, checked arguments.
    unsafe extern "C" fn atomic_fetch(
        ep: *mut sys::kfid_ep,
        msg: *const sys::kfi_msg_atomic,
        resultv: *mut sys::kfi_ioc,
        _result_desc: *mut *mut c_void,
        result_count: usize,
        flags: u64,
    ) -> c_int {
        from_result(|| {
            // SAFETY: As required.
            unsafe { Self::ep(ep).atomic(&*msg, &[], Self::iocs(resultv, result_count), flags) }
                .map(|()| 0)
        })
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open endpoint of `P`, checked arguments.
    #[allow(clippy::too_many_arguments)]
    unsafe extern "C" fn atomic_compare(
        ep: *mut sys::kfid_ep,
        msg: *const sys::kfi_msg_atomic,
        comparev: *const sys::kfi_ioc,
        _compare_desc: *mut *mut c_void,
        compare_count: usize,
        resultv: *mut sys::kfi_ioc,
        _result_desc: *mut *mut c_void,
        result_count: usize,
        flags: u64,
    ) -> c_int {
        from_result(|| {
            // SAFETY: As required.
            unsafe {
                Self::ep(ep).atomic(
                    &*msg,
                    Self::iocs(comparev, compare_count),
                    Self::iocs(resultv, result_count),
                    flags,
                )
            }
            .map(|()| 0)
        })
    }

    /// # Safety
    ///
    /// An open endpoint of `P`; `count` valid for writes.
    unsafe fn valid(
        ep: *mut sys::kfid_ep,
        kind: AtomicKind,
        datatype: u32,
        op: u32,
        count: *mut usize,
    ) -> c_int {
        from_result(|| {
            // SAFETY: As required.
            let n = unsafe { Self::ep(ep).atomic_valid(kind, datatype, op) }?;
            // SAFETY: Checked non-NULL by kfabric.ko.
            unsafe { *count = n };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// kfabric.ko's contract.
    unsafe extern "C" fn valid_write(
        ep: *mut sys::kfid_ep,
        datatype: u32,
        op: u32,
        count: *mut usize,
    ) -> c_int {
        // SAFETY: As required.
        unsafe { Self::valid(ep, AtomicKind::Write, datatype, op, count) }
    }

    /// # Safety
    ///
    /// kfabric.ko's contract.
    unsafe extern "C" fn valid_fetch(
        ep: *mut sys::kfid_ep,
        datatype: u32,
        op: u32,
        count: *mut usize,
    ) -> c_int {
        // SAFETY: As required.
        unsafe { Self::valid(ep, AtomicKind::Fetch, datatype, op, count) }
    }

    /// # Safety
    ///
    /// kfabric.ko's contract.
    unsafe extern "C" fn valid_compare(
        ep: *mut sys::kfid_ep,
        datatype: u32,
        op: u32,
        count: *mut usize,
    ) -> c_int {
        // SAFETY: As required.
        unsafe { Self::valid(ep, AtomicKind::Compare, datatype, op, count) }
    }

    /// The passive endpoint of `P` behind `pep`.
    ///
    /// # Safety
    ///
    /// `pep` is an open passive endpoint of `P`.
    unsafe fn pep<'a>(pep: *mut sys::kfid_pep) -> &'a PepOf<P> {
        // SAFETY: As required.
        unsafe { data::<_, PepOf<P>>(pep) }
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open passive endpoint of `P`, an open object.
    unsafe extern "C" fn pep_bind(fid: *mut sys::kfid, bfid: *mut sys::kfid, flags: u64) -> c_int {
        // SAFETY: As required.
        match unsafe { Self::bound(bfid, flags) } {
            Bound::Eq(eq) if <PepOf<P>>::HAS_BIND_EQ => {
                // SAFETY: As required.
                from_result(|| unsafe { Self::pep(fid.cast()).bind_eq(eq) }.map(|()| 0))
            }
            Bound::Eq(_) => ENOSYS.to_errno(),
            _ => EINVAL.to_errno(),
        }
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open passive endpoint of `P`.
    unsafe extern "C" fn listen(pep: *mut sys::kfid_pep) -> c_int {
        // SAFETY: As required.
        from_result(|| unsafe { Self::pep(pep).listen() }.map(|()| 0))
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open passive endpoint of `P`.
    unsafe extern "C" fn reject(
        pep: *mut sys::kfid_pep,
        handle: *mut sys::kfid,
        param: *const c_void,
        len: usize,
    ) -> c_int {
        // SAFETY: As required; `param` holds `len` bytes.
        from_result(|| unsafe { Self::pep(pep).reject(handle, bytes(param, len)) }.map(|()| 0))
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open passive endpoint of `P`.
    unsafe extern "C" fn pep_getname(
        fid: *mut sys::kfid,
        addr: *mut c_void,
        addrlen: *mut usize,
    ) -> c_int {
        from_result(|| {
            // SAFETY: As required.
            let n = unsafe { Self::pep(fid.cast()).getname(addr_buf(addr, addrlen)) }?;
            // SAFETY: Checked non-NULL by kfabric.ko.
            unsafe { *addrlen = n };
            Ok(0)
        })
    }
}
