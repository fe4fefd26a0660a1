// SPDX-License-Identifier: GPL-2.0

//! rdma_cm identifiers: connection management of one reliable connected
//! QP (address and route resolution, listen, connect, accept, reject,
//! disconnect), with events delivered to a [`Handler`].

use core::{ffi::c_int, marker::PhantomData, ptr::NonNull};
use kernel::{bindings, error::to_result, prelude::*, sync::Arc};

use super::{addr::Addr, verbs::Cq, verbs::Pd};
use crate::ib_sys as sys;

/// How long address and route resolution may take.
pub(crate) const RESOLVE_MS: kernel::ffi::c_ulong = 5000;

/// Most RDMA reads and atomics outstanding on a connection each way that
/// the provider offers or accepts, whatever the device takes.
pub(crate) const RD_DEPTH_MAX: u8 = 16;

/// The RDMA read and atomic depths of one side of a connection, as
/// rdma_cm negotiates them (`rdma_conn_param`), seen from that side.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub(crate) struct RdDepth {
    /// Responder resources: the peer's reads and atomics this side
    /// answers at once (its QP's `max_dest_rd_atomic`, iWARP's IRD).
    pub(crate) responder: u8,
    /// Initiator depth: this side's reads and atomics outstanding at once
    /// (its QP's `max_rd_atomic`, iWARP's ORD).
    pub(crate) initiator: u8,
}

impl RdDepth {
    /// What a device takes (`max_qp_rd_atom` as responder,
    /// `max_qp_init_rd_atom` as initiator), capped at [`RD_DEPTH_MAX`]:
    /// the active side's offer, and the passive side's bound.
    pub(crate) fn of_device(max_qp_rd_atom: u32, max_qp_init_rd_atom: u32) -> Self {
        let cap = |v: u32| u8::try_from(v.min(RD_DEPTH_MAX.into())).unwrap_or(RD_DEPTH_MAX);
        Self {
            responder: cap(max_qp_rd_atom),
            initiator: cap(max_qp_init_rd_atom),
        }
    }

    /// The passive side's answer to a request that offered `peer` (as
    /// [`Handler::request`] reports it, from our side: `peer.responder`
    /// is the peer's initiator depth, `peer.initiator` its responder
    /// resources), with `self` its own bound: we answer no more of the
    /// peer's reads than it will send, and send no more than it answers.
    pub(crate) fn answer(self, peer: RdDepth) -> Self {
        Self {
            responder: self.responder.min(peer.responder),
            initiator: self.initiator.min(peer.initiator),
        }
    }

    /// `self`, or, unless `reads`, with no reads of ours (initiator
    /// depth 0): the peer then keeps no resources for them, and the data
    /// path refuses them.
    pub(crate) fn reads_if(self, reads: bool) -> Self {
        if reads {
            self
        } else {
            Self {
                initiator: 0,
                ..self
            }
        }
    }

    /// The active side's depths once connected, having offered `self`,
    /// with `reported` what Established says (from our side, see
    /// [`Event::Established`]): never more than either.
    pub(crate) fn settle(self, reported: RdDepth) -> Self {
        self.answer(reported)
    }
}

/// What an identifier reports.
pub(crate) enum Event<'a> {
    /// The destination's address is resolved: resolve the route next.
    AddrResolved,
    /// The route is resolved: create the QP and connect next.
    RouteResolved,
    /// Connected; the peer's private data (an accept's), and the depths
    /// rdma_cm reports, from our side (`initiator`: how many reads and
    /// atomics of ours the peer answers). rdma_cm's IB CM path gives them
    /// so; its iWARP path gives the driver's own pair, which siw fills
    /// from the other side, so they are swapped back here (as smbdirect
    /// does). Meaningful on the active side only.
    Established(Private<'a>, RdDepth),
    /// The peer refused, with its private data.
    Rejected(&'a [u8]),
    /// Resolution or connection failed.
    Failed(Error),
    /// The connection ended.
    Disconnected,
    /// The device is going away: the QP must be destroyed now, and the
    /// identifier is destroyed by rdma_cm after the handler returns.
    DeviceRemoval,
    /// Anything else (time-wait exit, address change, ...).
    Other,
}

/// Who handles an identifier's events: process context (rdma_cm's work
/// queue), may sleep, serialized per identifier. Must not destroy the
/// identifier it is called for.
pub(crate) trait Handler: Send + Sync + Sized + 'static {
    /// Handles `ev` of the identifier `id` (the raw pointer, to match it
    /// with the handler's own). Returning an error refuses a request
    /// (its identifier is then destroyed by rdma_cm).
    fn event(&self, id: *mut sys::rdma_cm_id, ev: Event<'_>) -> Result;

    /// A peer asks to connect (listeners only): the request's own
    /// identifier, the peer's private data and its offer, from our side
    /// (`responder`: the peer's initiator depth, `initiator`: its
    /// responder resources; rdma_cm turns both the IB CM's and iWARP's
    /// around so). Giving the identifier back refuses the request
    /// (rdma_cm then destroys it).
    fn request(
        &self,
        _child: CmId<()>,
        _data: Private<'_>,
        _offer: RdDepth,
    ) -> core::result::Result<(), CmId<()>> {
        Err(_child)
    }
}

/// An rdma_cm identifier whose events go to an `Arc<H>` (`H = ()`: a
/// request's identifier not yet given a handler).
///
/// # Invariants
///
/// `ptr` is a live identifier owned by this value (destroyed at drop,
/// unless rdma_cm destroys it itself, see [`CmId::forget`]); its context
/// is NULL (for `H = ()`) or a reference on an `Arc<H>` made by
/// `Arc::into_raw`, released when the identifier is destroyed.
pub(crate) struct CmId<H> {
    ptr: NonNull<sys::rdma_cm_id>,
    /// Releases the context's reference (nothing for `H = ()`).
    release: unsafe fn(*mut c_void),
    _h: PhantomData<Arc<H>>,
}

/// Releases a context reference on an `Arc<H>`.
///
/// # Safety
///
/// `ctx` is NULL or a reference made by `Arc::<H>::into_raw`, given up.
unsafe fn release_arc<H>(ctx: *mut c_void) {
    if !ctx.is_null() {
        // SAFETY: The caller's contract.
        drop(unsafe { Arc::from_raw(ctx.cast::<H>()) });
    }
}

/// Releases nothing (the context of `CmId<()>` is NULL).
///
/// # Safety
///
/// Always safe; `unsafe` only to have the type of `release_arc`.
unsafe fn release_none(_ctx: *mut c_void) {}

// SAFETY: rdma_cm may be called for an identifier from any thread; the
// handler reference is `Send + Sync` (`Handler` bound, or `()`).
unsafe impl<H> Send for CmId<H> {}
// SAFETY: See `Send`; calls through `&self` are serialized by rdma_cm.
unsafe impl<H> Sync for CmId<H> {}

/// The depths of a connection event, as rdma_cm put them.
fn depths(ev: &sys::rdma_cm_event) -> RdDepth {
    // SAFETY: For the connection events this is read for, `param.conn` is
    // the active member.
    let c = unsafe { ev.param.conn.as_ref() };
    RdDepth {
        responder: c.responder_resources,
        initiator: c.initiator_depth,
    }
}

/// Whether identifier `id` is on an iWARP port.
///
/// # Safety
///
/// `id` is live (in its event callback).
unsafe fn on_iwarp(id: *mut sys::rdma_cm_id) -> bool {
    // SAFETY: A live identifier (the caller's contract).
    let (dev, port) = unsafe { (sys::kfi_rdma_id_device(id), sys::kfi_rdma_id_port(id)) };
    // SAFETY: An identifier's device is registered while it is bound to
    // it, and the port is one of its ports.
    !dev.is_null() && unsafe { sys::kfi_ib_port_link(dev, port) } == sys::KFI_IB_LINK_IWARP
}

/// The peer's private data of a connection event: the ULP's bytes, and
/// what the provider sent after them.
#[derive(Clone, Copy)]
pub(crate) struct Private<'a> {
    pub(crate) data: &'a [u8],
    pub(crate) extra: &'a [u8],
}

/// The peer's private data of a connection event.
fn private<'a>(ev: &'a sys::rdma_cm_event) -> Private<'a> {
    // SAFETY: For the connection events this is read for, `param.conn` is
    // the active member; its data is NULL or `private_data_len` bytes that
    // live as long as the event.
    let raw = unsafe {
        let c = ev.param.conn.as_ref();
        if c.private_data.is_null() {
            &[]
        } else {
            core::slice::from_raw_parts(c.private_data.cast(), c.private_data_len.into())
        }
    };
    unframe(raw)
}

/// Most bytes of private data, framing included, over iWARP: what siw
/// takes. An MPA v2 request, reply or reject, siw's default, has 4 bytes
/// of its own in front of them, and siw puts the sum in 8 bits
/// (`siw_send_mpareqrep`): 252 bytes would wrap. The provider's extra
/// bytes are only sent over iWARP, so they stay within it too.
const IWARP_TOTAL_MAX: usize = 251;

/// Whether `n` bytes of the ULP's private data fit a connect, accept or
/// reject over iWARP (`iwarp`) or the IB CM (where rdma_cm checks the
/// limit of each message).
pub(crate) fn ulp_data_fits(n: usize, iwarp: bool) -> bool {
    let max = if iwarp {
        IWARP_TOTAL_MAX
    } else {
        usize::from(u8::MAX)
    };
    // Framed: one byte of length in front.
    n < max
}

/// Private data as the provider sends it: a length byte, the ULP's
/// bytes, then the provider's `extra` bytes if the total stays within
/// [`IWARP_TOTAL_MAX`] (a peer that knows none ignores them). The IB CM
/// (InfiniBand, RoCE) pads private data to a fixed size, so the length
/// has to travel with it; iWARP sends it as is.
struct Framed {
    buf: [u8; 256],
    len: u8,
}

impl Framed {
    fn new(data: &[u8], extra: &[u8]) -> Result<Self> {
        let n = u8::try_from(data.len())
            .ok()
            .filter(|&n| n < u8::MAX)
            .ok_or(EINVAL)?;
        let mut buf = [0u8; 256];
        buf[0] = n;
        buf[1..=data.len()].copy_from_slice(data);
        let mut len = usize::from(n) + 1;
        let end = len + extra.len();
        if let Some(to) = buf.get_mut(len..end).filter(|_| end <= IWARP_TOTAL_MAX) {
            to.copy_from_slice(extra);
            len = end;
        }
        let len = u8::try_from(len).map_err(|_| EINVAL)?;
        Ok(Self { buf, len })
    }

    fn bytes(&self) -> &[u8] {
        &self.buf[..usize::from(self.len)]
    }
}

/// The peer's bytes in received private data, and what follows them
/// (both empty if it is not framed as [`Framed`] sends it: a length
/// beyond what arrived).
fn unframe(raw: &[u8]) -> Private<'_> {
    let none = Private {
        data: &[],
        extra: &[],
    };
    match raw.split_first() {
        Some((&n, rest)) if usize::from(n) <= rest.len() => {
            let (data, extra) = rest.split_at(usize::from(n));
            Private { data, extra }
        }
        _ => none,
    }
}

/// rdma_cm's event callback of identifiers with handler `H`.
///
/// # Safety
///
/// Called by rdma_cm only, for an identifier made by `CmId::<H>::new` or
/// given a handler by `CmId::set_handler::<H>` (or a request of a listener
/// whose context is of `H`), with a valid event.
unsafe extern "C" fn on_event<H: Handler>(
    id: *mut sys::rdma_cm_id,
    ev: *mut sys::rdma_cm_event,
) -> c_int {
    // SAFETY: rdma_cm passes a live identifier and event.
    let (ctx, ev) = unsafe { (sys::kfi_rdma_id_context(id).cast::<H>(), &*ev) };
    if ctx.is_null() {
        // A request that reached a listener being destroyed (its context
        // is cleared before rdma_destroy_id marks it so): no one owns the
        // new identifier, so rdma_cm destroys it (non-zero), or a device
        // removal would wait for it for ever.
        if ev.event == sys::RDMA_CM_EVENT_CONNECT_REQUEST {
            return 1;
        }
        // A request's identifier between its event and its endpoint: only
        // rdma_cm's own teardown can reach it; it is destroyed with its
        // `CmId`.
        return 0;
    }
    // SAFETY: The context holds a reference on an `Arc<H>` (the type
    // invariant) for as long as the identifier lives, which outlasts this
    // call.
    let h = unsafe { &*ctx };
    let e = match ev.event {
        sys::RDMA_CM_EVENT_CONNECT_REQUEST => {
            // The request's identifier inherits the listener's context;
            // it gets its own handler only when an endpoint takes it.
            // SAFETY: A fresh identifier rdma_cm hands over; its context
            // is cleared before it is wrapped (the invariant of `()`).
            unsafe { sys::kfi_rdma_id_set_context(id, core::ptr::null_mut()) };
            let Some(child) = NonNull::new(id) else {
                return 1;
            };
            // SAFETY: Live and handed to us with its NULL context.
            let child = unsafe { CmId::<()>::from_raw(child, release_none) };
            return match h.request(child, private(ev), depths(ev)) {
                Ok(()) => 0,
                Err(child) => {
                    // Refused: rdma_cm destroys it when we return non-zero.
                    child.forget();
                    1
                }
            };
        }
        sys::RDMA_CM_EVENT_ADDR_RESOLVED => Event::AddrResolved,
        sys::RDMA_CM_EVENT_ROUTE_RESOLVED => Event::RouteResolved,
        sys::RDMA_CM_EVENT_ESTABLISHED => {
            let d = depths(ev);
            // SAFETY: The live identifier of this callback.
            let d = if unsafe { on_iwarp(id) } {
                RdDepth {
                    responder: d.initiator,
                    initiator: d.responder,
                }
            } else {
                d
            };
            Event::Established(private(ev), d)
        }
        sys::RDMA_CM_EVENT_REJECTED => Event::Rejected(private(ev).data),
        sys::RDMA_CM_EVENT_ADDR_ERROR
        | sys::RDMA_CM_EVENT_ROUTE_ERROR
        | sys::RDMA_CM_EVENT_CONNECT_ERROR
        | sys::RDMA_CM_EVENT_UNREACHABLE => {
            let st = if ev.status < 0 {
                ev.status
            } else {
                -(bindings::EHOSTUNREACH as i32)
            };
            Event::Failed(Error::from_errno(st))
        }
        sys::RDMA_CM_EVENT_DISCONNECTED => Event::Disconnected,
        sys::RDMA_CM_EVENT_DEVICE_REMOVAL => {
            // Ok: the handler forgot its `CmId` (no one else destroys the
            // identifier), so rdma_cm destroys it after we return non-zero
            // and its handler reference goes now. Err: its owner is
            // destroying it already.
            if h.event(id, Event::DeviceRemoval).is_err() {
                return 0;
            }
            // SAFETY: The context's reference (invariant); nothing uses
            // the context of this identifier after this callback.
            unsafe {
                sys::kfi_rdma_id_set_context(id, core::ptr::null_mut());
                drop(Arc::from_raw(ctx));
            }
            return 1;
        }
        _ => Event::Other,
    };
    let _ = h.event(id, e);
    0
}

impl<H> CmId<H> {
    /// Wraps a live identifier whose context is NULL or a reference on an
    /// `Arc<H>`.
    ///
    /// # Safety
    ///
    /// `ptr` is live and owned by the caller, with such a context.
    unsafe fn from_raw(ptr: NonNull<sys::rdma_cm_id>, release: unsafe fn(*mut c_void)) -> Self {
        // INVARIANT: The caller's contract.
        Self {
            ptr,
            release,
            _h: PhantomData,
        }
    }

    /// The identifier's address, only to compare with the `id` a handler
    /// gets.
    pub(crate) fn ident(&self) -> usize {
        self.ptr.as_ptr() as usize
    }

    /// The device the identifier is bound to (NULL before resolution).
    pub(crate) fn device(&self) -> *mut sys::ib_device {
        // SAFETY: A live identifier (invariant).
        unsafe { sys::kfi_rdma_id_device(self.ptr.as_ptr()) }
    }

    /// The identifier's own (`peer == false`) or its peer's address,
    /// written into `out`; returns its length.
    pub(crate) fn addr(&self, peer: bool, out: &mut [u8]) -> usize {
        // SAFETY: A live identifier; `out` is valid for `out.len()` bytes.
        unsafe {
            sys::kfi_rdma_id_addr(
                self.ptr.as_ptr(),
                peer.into(),
                out.as_mut_ptr().cast(),
                out.len(),
            )
        }
    }

    /// Creates the identifier's QP on `pd`, completing to `send` and
    /// `recv`, with room for `depth` (send, receive) work requests, those
    /// sent of up to `sge` entries. Process context.
    pub(crate) fn create_qp(
        &self,
        pd: &Pd,
        send: &Cq,
        recv: &Cq,
        depth: (u32, u32),
        sge: u32,
    ) -> Result {
        let mut attr = sys::ib_qp_init_attr {
            send_cq: send.as_ptr(),
            recv_cq: recv.as_ptr(),
            sq_sig_type: sys::IB_SIGNAL_REQ_WR,
            qp_type: sys::IB_QPT_RC,
            ..Default::default()
        };
        attr.cap.max_send_wr = depth.0;
        attr.cap.max_recv_wr = depth.1;
        attr.cap.max_send_sge = sge;
        attr.cap.max_recv_sge = 1;
        // SAFETY: A live identifier bound to `pd`'s device (checked by
        // the caller against the domain), valid attributes.
        to_result(unsafe { sys::rdma_create_qp(self.ptr.as_ptr(), pd.as_ptr(), &mut attr) })
    }

    /// The identifier's QP (NULL before `create_qp`).
    pub(crate) fn qp(&self) -> *mut sys::ib_qp {
        // SAFETY: A live identifier.
        unsafe { sys::kfi_rdma_id_qp(self.ptr.as_ptr()) }
    }

    /// How long the QP's transport retries a request the peer does not
    /// acknowledge before it fails it, in ms; 0 without a QP, or when it
    /// has no such bound (iWARP: TCP's). Process context.
    pub(crate) fn qp_retry_ms(&self) -> u32 {
        let qp = self.qp();
        if qp.is_null() {
            return 0;
        }
        // SAFETY: The identifier's live QP.
        unsafe { sys::kfi_ib_qp_retry_ms(qp) }
    }

    /// Flushes and destroys the QP, if any: outstanding work requests
    /// complete (flushed) before this returns. Process context.
    pub(crate) fn destroy_qp(&self) {
        let qp = self.qp();
        if !qp.is_null() {
            // SAFETY: The identifier's live QP; draining waits for the
            // device's flush of its own queues, not for the peer.
            unsafe {
                sys::ib_drain_qp(qp);
                sys::rdma_destroy_qp(self.ptr.as_ptr());
            }
        }
    }

    /// Listens on `addr` (after binding to it). Process context.
    pub(crate) fn listen(&self, addr: &Addr, backlog: i32) -> Result {
        // SAFETY: A live identifier and a valid address (which rdma_cm
        // copies).
        unsafe {
            to_result(sys::rdma_set_reuseaddr(self.ptr.as_ptr(), 1))?;
            to_result(sys::rdma_bind_addr(
                self.ptr.as_ptr(),
                addr.as_ptr().cast_mut(),
            ))?;
            to_result(sys::rdma_listen(self.ptr.as_ptr(), backlog))
        }
    }

    /// Starts resolving `dst` (AddrResolved or Failed follows). Any
    /// context that may sleep.
    pub(crate) fn resolve_addr(&self, dst: &Addr) -> Result {
        // SAFETY: A live identifier, a valid address (copied).
        to_result(unsafe {
            sys::rdma_resolve_addr(
                self.ptr.as_ptr(),
                core::ptr::null_mut(),
                dst.as_ptr(),
                RESOLVE_MS,
            )
        })
    }

    /// Starts resolving the route (RouteResolved or Failed follows).
    pub(crate) fn resolve_route(&self) -> Result {
        // SAFETY: A live identifier with a resolved address.
        to_result(unsafe { sys::rdma_resolve_route(self.ptr.as_ptr(), RESOLVE_MS) })
    }

    /// The depths the identifier's device takes, capped (see
    /// [`RdDepth::of_device`]); `ENODEV` before it is bound to one. Any
    /// context.
    pub(crate) fn rd_limits(&self) -> Result<RdDepth> {
        let dev = self.device();
        if dev.is_null() {
            return Err(ENODEV);
        }
        // SAFETY: The identifier's device is registered while it is bound
        // to it; its attributes live as long as it.
        let a = unsafe { &*sys::kfi_ib_device_attrs(dev) };
        Ok(RdDepth::of_device(a.max_qp_rd_atom, a.max_qp_init_rd_atom))
    }

    fn conn_param(data: &Framed, depth: RdDepth) -> Result<sys::rdma_conn_param> {
        Ok(sys::rdma_conn_param {
            private_data: data.bytes().as_ptr().cast(),
            private_data_len: data.len,
            responder_resources: depth.responder,
            initiator_depth: depth.initiator,
            retry_count: 7,
            rnr_retry_count: 7,
            ..Default::default()
        })
    }

    /// Connects, with private `data` (and the provider's `extra` bytes
    /// after it, see [`Framed`]), offering `depth` (Established or
    /// Rejected follows; rdma_cm sets the QP's read and atomic limits from
    /// the answer). Only from the identifier's own event handler
    /// (RouteResolved), which holds its handler lock.
    pub(crate) fn connect_in_handler(&self, data: &[u8], extra: &[u8], depth: RdDepth) -> Result {
        let f = Framed::new(data, extra)?;
        let mut p = Self::conn_param(&f, depth)?;
        // SAFETY: A live identifier with a QP, called under its handler
        // lock (the caller's context); rdma_cm copies the data.
        to_result(unsafe { sys::rdma_connect_locked(self.ptr.as_ptr(), &mut p) })
    }

    /// Connects, as [`CmId::connect_in_handler`] does, from process
    /// context outside the identifier's event handler (the handler lock
    /// is taken here).
    pub(crate) fn connect(&self, data: &[u8], depth: RdDepth) -> Result {
        let f = Framed::new(data, &[])?;
        let mut p = Self::conn_param(&f, depth)?;
        // SAFETY: A live identifier with a QP, not in its own handler
        // (the caller's context: rdma_connect takes the handler lock);
        // rdma_cm copies the data.
        to_result(unsafe { sys::rdma_connect(self.ptr.as_ptr(), &mut p) })
    }

    /// Accepts a request, with private `data` (and `extra`, as for
    /// [`CmId::connect_in_handler`]), answering `depth` (at most what the
    /// request offered, see [`RdDepth::answer`]; rdma_cm sets the QP's
    /// read and atomic limits from it). Process context, not from the
    /// identifier's own event handler.
    pub(crate) fn accept(&self, data: &[u8], extra: &[u8], depth: RdDepth) -> Result {
        let f = Framed::new(data, extra)?;
        let mut p = Self::conn_param(&f, depth)?;
        let id = self.ptr.as_ptr();
        // SAFETY: A live request identifier with a QP; rdma_accept wants
        // the handler lock, taken here; the data is copied.
        unsafe {
            sys::rdma_lock_handler(id);
            let r = sys::rdma_accept(id, &mut p);
            sys::rdma_unlock_handler(id);
            to_result(r)
        }
    }

    /// Refuses a request, with private `data`. Process context.
    pub(crate) fn reject(&self, data: &[u8]) -> Result {
        let f = Framed::new(data, &[])?;
        let b = f.bytes();
        // The IB CM's reason for a refusal with the ULP's data (iWARP has
        // none): a peer's rdma_cm hands the data over only with it.
        let reason = sys::IB_CM_REJ_CONSUMER_DEFINED as u8;
        // SAFETY: A live request identifier; the data is copied.
        to_result(unsafe { sys::rdma_reject(self.ptr.as_ptr(), b.as_ptr().cast(), f.len, reason) })
    }

    /// Ends the connection (Disconnected follows on both sides).
    pub(crate) fn disconnect(&self) {
        // SAFETY: A live identifier; harmless when not connected.
        let _ = unsafe { sys::rdma_disconnect(self.ptr.as_ptr()) };
    }

    /// Leaves the identifier to rdma_cm, which destroys it itself (after a
    /// handler returned non-zero for it).
    pub(crate) fn forget(self) {
        core::mem::forget(self);
    }
}

impl<H: Handler> CmId<H> {
    /// A new identifier in namespace `net` (NULL: the initial one) whose
    /// events go to `handler`. Process context.
    pub(crate) fn new(net: *mut bindings::net, handler: Arc<H>) -> Result<Self> {
        let net = if net.is_null() {
            &raw mut bindings::init_net
        } else {
            net
        };
        let ctx = Arc::into_raw(handler);
        // SAFETY: `net` is alive (the `kfi_domain_attr.net` contract); the
        // context is a reference the identifier owns from now on.
        let id =
            unsafe { sys::kfi_rdma_create_id(net, Some(on_event::<H>), ctx.cast_mut().cast()) };
        let id = match kernel::error::from_err_ptr(id).map(NonNull::new) {
            Ok(Some(id)) => id,
            Ok(None) | Err(_) => {
                // SAFETY: The reference made above, not handed over.
                drop(unsafe { Arc::from_raw(ctx) });
                return Err(kernel::error::from_err_ptr(id).err().unwrap_or(ENOMEM));
            }
        };
        // SAFETY: A live identifier we own, its context such a reference.
        Ok(unsafe { Self::from_raw(id, release_arc::<H>) })
    }
}

impl CmId<()> {
    /// Gives a request's identifier its handler. Process context.
    pub(crate) fn set_handler<H: Handler>(self, handler: Arc<H>) -> CmId<H> {
        let ctx = Arc::into_raw(handler);
        let id = self.ptr;
        core::mem::forget(self);
        // SAFETY: A live identifier; under its handler lock no event runs
        // while its callback and context change together.
        unsafe {
            sys::rdma_lock_handler(id.as_ptr());
            sys::kfi_rdma_id_set_handler(id.as_ptr(), Some(on_event::<H>), ctx.cast_mut().cast());
            sys::rdma_unlock_handler(id.as_ptr());
        }
        // SAFETY: Ours, with a context holding a reference on an `Arc<H>`.
        unsafe { CmId::from_raw(id, release_arc::<H>) }
    }
}

impl<H> Drop for CmId<H> {
    fn drop(&mut self) {
        let id = self.ptr.as_ptr();
        // Its context is taken under the handler lock, so a later event
        // callback sees NULL; destroying the identifier waits for a
        // running callback; only then is the context's reference released.
        // SAFETY: A live identifier we own, used in that order.
        unsafe {
            sys::rdma_lock_handler(id);
            let ctx = sys::kfi_rdma_id_context(id);
            sys::kfi_rdma_id_set_context(id, core::ptr::null_mut());
            sys::rdma_unlock_handler(id);
            sys::rdma_destroy_id(id);
            (self.release)(ctx);
        }
    }
}
