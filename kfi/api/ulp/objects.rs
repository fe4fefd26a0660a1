// SPDX-License-Identifier: GPL-2.0

//! Typed kfabric objects. Each child borrows its parent (and an endpoint
//! the queues bound to it), so the compiler keeps the close order the core
//! demands: children and bound endpoints close before what they depend on.
//! Opening, binding and closing are process context.

use core::marker::PhantomData;
use kernel::{error::to_result, prelude::*};

use super::super::{
    kfabric::{Info, Owned},
    kfi_sys as sys,
};

/// Keeps a borrow of `'a` alive until the object holding it is dropped.
///
/// A `PhantomData<&'a T>` alone does not: the compiler lets the borrow end
/// at the object's last use, so the parent could close first (and fail
/// with `EBUSY`, leaking both). A field with a `Drop` impl makes the
/// object's drop a use of `'a`.
pub(super) struct Borrow<'a, T: ?Sized>(PhantomData<&'a T>);

impl<T: ?Sized> Borrow<'_, T> {
    pub(super) const fn new() -> Self {
        Self(PhantomData)
    }
}

impl<T: ?Sized> Drop for Borrow<'_, T> {
    fn drop(&mut self) {}
}

/// An open fabric.
pub(crate) struct Fabric {
    obj: Owned<sys::kfid_fabric>,
}

/// An open domain of a fabric.
pub(crate) struct Domain<'f> {
    pub(super) obj: Owned<sys::kfid_domain>,
    _fabric: Borrow<'f, Fabric>,
}

/// An event queue (connection events).
pub(crate) struct Eq<'f> {
    pub(super) obj: Owned<sys::kfid_eq>,
    _fabric: Borrow<'f, Fabric>,
}

/// A completion queue (`KFI_CQ_FORMAT_TAGGED` entries).
pub(crate) struct Cq<'d> {
    pub(super) obj: Owned<sys::kfid_cq>,
    _domain: Borrow<'d, ()>,
}

/// A listening (passive) endpoint.
pub(crate) struct PassiveEndpoint<'f> {
    obj: Owned<sys::kfid_pep>,
    _fabric: Borrow<'f, Fabric>,
}

/// An active endpoint; `'a` covers its domain and the queues bound to it.
pub(crate) struct Endpoint<'a> {
    pub(super) obj: Owned<sys::kfid_ep>,
    // Invariant in `'a`: a shorter borrow must not satisfy `bind_cq`.
    _bound: PhantomData<fn(&'a ()) -> &'a ()>,
    _keep: Borrow<'a, ()>,
}

/// A registered memory region over a buffer it borrows.
pub(crate) struct Mr<'a> {
    obj: Owned<sys::kfid_mr>,
    _buf: Borrow<'a, [u8]>,
}

impl Fabric {
    /// Opens the fabric `info` names.
    pub(crate) fn open(info: Info<'_>) -> Result<Self> {
        // SAFETY: An entry kfabric.ko made (invariant of `Info`).
        let obj = Owned::open(|o| unsafe {
            sys::kfi_fabric(info.fabric_attr, o, core::ptr::null_mut())
        })?;
        Ok(Self { obj })
    }

    /// A domain for `info`.
    pub(crate) fn domain<'f>(&'f self, info: Info<'_>) -> Result<Domain<'f>> {
        let info = info.as_ptr();
        // SAFETY: An open fabric; `info` is an entry kfabric.ko made
        // (invariant of `Info`), only read.
        let obj = Owned::open(|o| unsafe {
            sys::kfi_domain(self.obj.as_ptr(), info, o, core::ptr::null_mut())
        })?;
        Ok(Domain {
            obj,
            _fabric: Borrow::new(),
        })
    }

    /// An event queue of `size` events.
    pub(crate) fn eq<'f>(&'f self, size: usize) -> Result<Eq<'f>> {
        let mut a = sys::kfi_eq_attr {
            size,
            ..Default::default()
        };
        // SAFETY: An open fabric; valid attributes.
        let obj = Owned::open(|o| unsafe {
            sys::kfi_eq_open(self.obj.as_ptr(), &mut a, o, core::ptr::null_mut())
        })?;
        Ok(Eq {
            obj,
            _fabric: Borrow::new(),
        })
    }

    /// A passive endpoint for `info` (a source address), reporting to `eq`
    /// and listening.
    pub(crate) fn listen<'f>(
        &'f self,
        info: Info<'_>,
        eq: &'f Eq<'_>,
    ) -> Result<PassiveEndpoint<'f>> {
        let info = info.as_ptr();
        // SAFETY: An open fabric; `info` is an entry kfabric.ko made
        // (invariant of `Info`), only read.
        let obj = Owned::open(|o| unsafe {
            sys::kfi_passive_ep(self.obj.as_ptr(), info, o, core::ptr::null_mut())
        })?;
        // SAFETY: Open objects.
        unsafe {
            to_result(sys::kfi_pep_bind(obj.as_ptr(), eq.obj.fid(), 0))?;
            to_result(sys::kfi_listen(obj.as_ptr()))?;
        }
        Ok(PassiveEndpoint {
            obj,
            _fabric: Borrow::new(),
        })
    }
}

impl<'f> Domain<'f> {
    /// A completion queue of `size` entries.
    pub(crate) fn cq<'d>(&'d self, size: usize) -> Result<Cq<'d>> {
        // SAFETY: No handler.
        unsafe { self.cq_notifying(size, None) }
    }

    /// A completion queue of `size` entries that calls `handler` (with a
    /// NULL context) after new entries, in the provider's completion
    /// context: it must not sleep (see the API's documentation).
    ///
    /// # Safety
    ///
    /// `handler` stays callable until the queue is closed: its module is
    /// not unloaded before (the queue may outlive its `Cq` if that, or an
    /// endpoint bound to it, is leaked). It never sleeps: it runs in the
    /// provider's completion context (softirq, or within a post, a cancel
    /// or a close of the caller's), on any CPU, possibly on several at
    /// once; and it takes no lock that the ULP holds around those calls.
    pub(crate) unsafe fn cq_notifying<'d>(
        &'d self,
        size: usize,
        handler: sys::kfi_comp_handler,
    ) -> Result<Cq<'d>> {
        let mut a = sys::kfi_cq_attr {
            size,
            format: sys::KFI_CQ_FORMAT_TAGGED,
            comp_handler: handler,
            ..Default::default()
        };
        // SAFETY: An open domain; valid attributes (the handler is the
        // caller's promise).
        let obj = Owned::open(|o| unsafe {
            sys::kfi_cq_open(self.obj.as_ptr(), &mut a, o, core::ptr::null_mut())
        })?;
        Ok(Cq {
            obj,
            _domain: Borrow::new(),
        })
    }

    /// An endpoint for `info` (an entry of getinfo or a connection
    /// request), not yet bound or enabled.
    pub(crate) fn endpoint<'a>(&'a self, info: Info<'_>) -> Result<Endpoint<'a>> {
        let info = info.as_ptr();
        // SAFETY: An open domain; `info` is an entry kfabric.ko made
        // (invariant of `Info`), only read.
        let obj = Owned::open(|o| unsafe {
            sys::kfi_endpoint(self.obj.as_ptr(), info, o, core::ptr::null_mut())
        })?;
        Ok(Endpoint {
            obj,
            _bound: PhantomData,
            _keep: Borrow::new(),
        })
    }

    /// Registers `buf` with `access` (`KFI_REMOTE_READ`, ...) and `flags`
    /// (`KFI_RMA_PMEM`); the region borrows `buf` until it is dropped.
    ///
    /// # Safety
    ///
    /// The region is dropped, not leaked: peers read and write `buf`
    /// until the region is closed, and a `mem::forget` of it would end the
    /// borrow with the region still open.
    pub(crate) unsafe fn register<'a>(
        &'a self,
        buf: &'a mut [u8],
        access: u64,
        flags: u64,
    ) -> Result<Mr<'a>> {
        // SAFETY: The caller's promise.
        unsafe { self.obj.register(buf, access, 0, flags) }
    }
}

impl Owned<sys::kfid_domain> {
    /// Registers `buf` with `access` and `flags`, peers naming its first
    /// byte `offset`; the region borrows `buf` until it is dropped.
    ///
    /// # Safety
    ///
    /// As for [`Domain::register`]: the region is not leaked.
    pub(crate) unsafe fn register<'a>(
        &self,
        buf: &'a mut [u8],
        access: u64,
        offset: u64,
        flags: u64,
    ) -> Result<Mr<'a>> {
        // SAFETY: `buf` is borrowed for as long as the region lives, which
        // ends with its close (it is not leaked: the caller's promise).
        let obj =
            unsafe { self.register_raw(buf.as_mut_ptr(), buf.len(), access, offset, 0, flags) }?;
        Ok(Mr {
            obj,
            _buf: Borrow::new(),
        })
    }
}

impl PassiveEndpoint<'_> {
    /// Refuses a connection request, with `data` for the peer.
    pub(crate) fn reject(&self, req: &super::ConnReq, data: &[u8]) -> Result {
        // SAFETY: An open passive endpoint; the request's handle came with
        // it; `data` is read during the call.
        to_result(unsafe {
            sys::kfi_reject(
                self.obj.as_ptr(),
                req.info().handle,
                data.as_ptr().cast(),
                data.len(),
            )
        })
    }
}

impl<'a> Endpoint<'a> {
    /// Binds `cq` for `flags` (`KFI_TRANSMIT`, `KFI_RECV`).
    pub(crate) fn bind_cq(&self, cq: &'a Cq<'_>, flags: u64) -> Result {
        // SAFETY: Open objects; `cq` outlives the endpoint (`'a`).
        to_result(unsafe { sys::kfi_ep_bind(self.obj.as_ptr(), cq.obj.fid(), flags) })
    }

    /// Binds `eq` for connection events.
    pub(crate) fn bind_eq(&self, eq: &'a Eq<'_>) -> Result {
        // SAFETY: Open objects; `eq` outlives the endpoint (`'a`).
        to_result(unsafe { sys::kfi_ep_bind(self.obj.as_ptr(), eq.obj.fid(), 0) })
    }

    /// Enables the endpoint (its queues bound).
    pub(crate) fn enable(&self) -> Result {
        // SAFETY: An open endpoint.
        to_result(unsafe { sys::kfi_enable(self.obj.as_ptr()) })
    }

    /// Connects to the address of the endpoint's info, with `data`.
    pub(crate) fn connect(&self, data: &[u8]) -> Result {
        // SAFETY: An open endpoint; `data` is read during the call.
        to_result(unsafe {
            sys::kfi_connect(
                self.obj.as_ptr(),
                core::ptr::null(),
                data.as_ptr().cast(),
                data.len(),
            )
        })
    }

    /// Connects to `addr` (a socket address in the domain's format) rather
    /// than the info's destination, with `data`.
    pub(crate) fn connect_to(&self, addr: &[u8], data: &[u8]) -> Result {
        super::sockaddr::checked_len(addr)?;
        // SAFETY: An open endpoint; `addr` holds the whole socket address
        // its family names (checked above), and `data` is read during the
        // call.
        to_result(unsafe {
            sys::kfi_connect(
                self.obj.as_ptr(),
                addr.as_ptr().cast(),
                data.as_ptr().cast(),
                data.len(),
            )
        })
    }

    /// Takes back the operation posted with `ctx` (a receive not filled
    /// yet): it completes with `ECANCELED`; `ENOENT` if nothing waits.
    pub(crate) fn cancel(&self, ctx: usize) -> Result {
        // SAFETY: An open endpoint; the context is only compared.
        to_result(unsafe { sys::kfi_cancel(self.obj.fid(), ctx as *mut c_void) })
    }

    /// Accepts the connection request the endpoint was opened for.
    pub(crate) fn accept(&self, data: &[u8]) -> Result {
        // SAFETY: An open endpoint; `data` is read during the call.
        to_result(unsafe { sys::kfi_accept(self.obj.as_ptr(), data.as_ptr().cast(), data.len()) })
    }

    /// Shuts the connection down.
    pub(crate) fn shutdown(&self) -> Result {
        // SAFETY: An open endpoint.
        to_result(unsafe { sys::kfi_shutdown(self.obj.as_ptr(), 0) })
    }

    /// Whether an event is about this endpoint. An endpoint's close
    /// drops its unread events from the util EQs it was bound to, so an
    /// event read after that never names it, and one with its address is
    /// about this endpoint, not an earlier one that had the address.
    pub(crate) fn is(&self, fid: *mut sys::kfid) -> bool {
        core::ptr::eq(self.obj.fid(), fid)
    }
}

impl PassiveEndpoint<'_> {
    /// Whether an event is about this passive endpoint (see
    /// [`Endpoint::is`]).
    pub(crate) fn is(&self, fid: *mut sys::kfid) -> bool {
        core::ptr::eq(self.obj.fid(), fid)
    }
}

impl Mr<'_> {
    /// The key peers name the region by.
    pub(crate) fn key(&self) -> u64 {
        // SAFETY: An open region.
        unsafe { (*self.obj.as_ptr()).key }
    }
}
