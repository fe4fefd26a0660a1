// SPDX-License-Identifier: GPL-2.0

//! The ops tables of a provider's endpoints and passive endpoints, and
//! their trampolines: connection management, the data transfer calls and
//! the atomic validity checks (see [`super::glue`] for the rest).

use core::ptr::NonNull;
use kernel::{error::from_result, prelude::*};

use super::{
    super::kfi_sys as sys,
    glue::{EndpointOf, PepOf, Tables},
    object::{addr_buf, bytes, data, fid_ops},
    refs::{AvRef, Bound, CntrRef, CqRef, EqRef},
    traits::{AtomicKind, Endpoint, PassiveEndpoint, Provider},
};

impl<P: Provider> Tables<P> {
    pub(super) const EP_FID: sys::kfi_ops =
        fid_ops::<sys::kfid_ep, EndpointOf<P>>(Some(Self::ep_bind), Some(Self::ep_control));
    pub(super) const EP: sys::kfi_ops_ep = sys::kfi_ops_ep {
        size: size_of::<sys::kfi_ops_ep>(),
        cancel: if <EndpointOf<P>>::HAS_CANCEL {
            Some(Self::cancel)
        } else {
            None
        },
        getopt: None,
        setopt: None,
    };
    pub(super) const CM: sys::kfi_ops_cm = sys::kfi_ops_cm {
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
    pub(super) const MSG: sys::kfi_ops_msg = sys::kfi_ops_msg {
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
    pub(super) const RMA: sys::kfi_ops_rma = sys::kfi_ops_rma {
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
    pub(super) const TAGGED: sys::kfi_ops_tagged = sys::kfi_ops_tagged {
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
    pub(super) const ATOMIC: sys::kfi_ops_atomic = sys::kfi_ops_atomic {
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
    pub(super) const PEP_FID: sys::kfi_ops =
        fid_ops::<sys::kfid_pep, PepOf<P>>(Some(Self::pep_bind), None);
    pub(super) const PEP_EP: sys::kfi_ops_ep = sys::kfi_ops_ep {
        size: size_of::<sys::kfi_ops_ep>(),
        cancel: None,
        getopt: None,
        setopt: None,
    };
    pub(super) const PEP_CM: sys::kfi_ops_cm = sys::kfi_ops_cm {
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

    /// The endpoint of `P` behind `ep`.
    ///
    /// # Safety
    ///
    /// `ep` is an open endpoint of `P`.
    pub(super) unsafe fn ep<'a>(ep: *mut sys::kfid_ep) -> &'a EndpointOf<P> {
        // SAFETY: `ep` is an open endpoint of `P` (this function's contract).
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
        // SAFETY: kfabric.ko passes an open endpoint of `P`, an open object (this function's
        // contract).
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
        // SAFETY: kfabric.ko passes an open endpoint of `P` (this function's contract).
        from_result(|| unsafe { Self::ep(fid.cast()).enable() }.map(|()| 0))
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open endpoint of `P`.
    unsafe extern "C" fn cancel(fid: *mut sys::kfid, context: *mut c_void) -> c_int {
        // SAFETY: kfabric.ko passes an open endpoint of `P` (this function's contract).
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
            // SAFETY: kfabric.ko passes an open endpoint of `P`, a length pointer (this function's
            // contract).
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
            // SAFETY: kfabric.ko passes an open endpoint of `P`, a length pointer (this function's
            // contract).
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
        // SAFETY: kfabric.ko passes an open endpoint of `P` and `param` holding `len` bytes.
        from_result(|| unsafe { Self::ep(ep).connect(addr, bytes(param, len)) }.map(|()| 0))
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open endpoint of `P`.
    unsafe extern "C" fn accept(ep: *mut sys::kfid_ep, param: *const c_void, len: usize) -> c_int {
        // SAFETY: kfabric.ko passes an open endpoint of `P` and `param` holding `len` bytes.
        from_result(|| unsafe { Self::ep(ep).accept(bytes(param, len)) }.map(|()| 0))
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open endpoint of `P`.
    unsafe extern "C" fn shutdown(ep: *mut sys::kfid_ep, flags: u64) -> c_int {
        // SAFETY: kfabric.ko passes an open endpoint of `P` (this function's contract).
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
        // SAFETY: kfabric.ko passes an open endpoint of `P`, a checked message (this function's
        // contract).
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
        // SAFETY: kfabric.ko passes an open endpoint of `P`, a checked message (this function's
        // contract).
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
        // SAFETY: kfabric.ko passes an open endpoint of `P`, a checked message (this function's
        // contract).
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
        // SAFETY: kfabric.ko passes an open endpoint of `P`, a checked message (this function's
        // contract).
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
        // SAFETY: kfabric.ko passes an open endpoint of `P`, a checked message (this function's
        // contract).
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
        // SAFETY: kfabric.ko passes an open endpoint of `P`, a checked message (this function's
        // contract).
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
            // SAFETY: `p` is NULL or holds `n` entries (this function's contract).
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
        // SAFETY: kfabric.ko passes an open endpoint of `P`, a checked message (this function's
        // contract).
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
            // SAFETY: kfabric.ko passes an open endpoint of `P`, checked arguments (this function's
            // contract).
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
            // SAFETY: kfabric.ko passes an open endpoint of `P`, checked arguments (this function's
            // contract).
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
            // SAFETY: kfabric.ko passes an open endpoint of `P`; `count` valid for writes (this
            // function's contract).
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
        // SAFETY: kfabric.ko passes valid arguments (this function's contract).
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
        // SAFETY: kfabric.ko passes valid arguments (this function's contract).
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
        // SAFETY: kfabric.ko passes valid arguments (this function's contract).
        unsafe { Self::valid(ep, AtomicKind::Compare, datatype, op, count) }
    }

    /// The passive endpoint of `P` behind `pep`.
    ///
    /// # Safety
    ///
    /// `pep` is an open passive endpoint of `P`.
    pub(super) unsafe fn pep<'a>(pep: *mut sys::kfid_pep) -> &'a PepOf<P> {
        // SAFETY: `pep` is an open passive endpoint of `P` (this function's contract).
        unsafe { data::<_, PepOf<P>>(pep) }
    }

    /// # Safety
    ///
    /// kfabric.ko's contract: an open passive endpoint of `P`, an open object.
    unsafe extern "C" fn pep_bind(fid: *mut sys::kfid, bfid: *mut sys::kfid, flags: u64) -> c_int {
        // SAFETY: kfabric.ko passes an open passive endpoint of `P`, an open object (this
        // function's contract).
        match unsafe { Self::bound(bfid, flags) } {
            Bound::Eq(eq) if <PepOf<P>>::HAS_BIND_EQ => {
                // SAFETY: kfabric.ko passes an open passive endpoint of `P`, an open object (this
                // function's contract).
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
        // SAFETY: kfabric.ko passes an open passive endpoint of `P` (this function's contract).
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
        // SAFETY: kfabric.ko passes an open passive endpoint of `P` and `param` holding `len` bytes.
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
            // SAFETY: kfabric.ko passes an open passive endpoint of `P` (this function's contract).
            let n = unsafe { Self::pep(fid.cast()).getname(addr_buf(addr, addrlen)) }?;
            // SAFETY: Checked non-NULL by kfabric.ko.
            unsafe { *addrlen = n };
            Ok(0)
        })
    }
}
