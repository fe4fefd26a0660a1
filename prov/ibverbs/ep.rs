// SPDX-License-Identifier: GPL-2.0

//! Connected (MSG) endpoints: the ULP's face of one connection
//! (`conn.rs`: an rdma_cm identifier and its RC QP).
//!
//! The active side resolves the peer's address and route, then creates
//! its QP and connects; the passive side takes the identifier of a
//! request and creates its QP when enabled, then accepts. rdma_cm's
//! events become `KFI_CONNECTED`, `KFI_SHUTDOWN` and error entries on the
//! bound EQ. Messages move through the connection's data path
//! (`data.rs`).

use core::sync::atomic::Ordering;
use kernel::{prelude::*, sync::Arc};

use crate::{
    conn::{Conn, Phase, State},
    data::{self, DataPath},
    domain::DomShared,
    flush::FlushRegion,
    frame::{self, Buffers},
    ib::{
        addr::Addr,
        cm::{self, CmId},
        device::{Device, Limits, Link},
    },
    kfi::{
        kfabric::kfi_error,
        kfi_sys as ksys,
        provider::{AtomicKind, Bound, EndpointAttr, FidRef},
        toolkit::completion::{bind_reports, CqEntry},
    },
    pep,
    rma::{self, Atomic, RmaOp, ATOMIC_MAX, ELEM},
};

/// What endpoints can do: messages and tagged messages both ways, and RMA
/// both ways.
pub(crate) const CAPS: u64 = ksys::KFI_MSG
    | ksys::KFI_TAGGED
    | ksys::KFI_SEND
    | ksys::KFI_RECV
    | ksys::KFI_RMA
    | ksys::KFI_READ
    | ksys::KFI_WRITE
    | ksys::KFI_REMOTE_READ
    | ksys::KFI_REMOTE_WRITE;
/// What endpoints on `dev` can do: [`CAPS`], and atomics where the
/// device has them; no reads nor atomics where the provider may not issue
/// them (`crate::may_read`).
pub(crate) fn caps(dev: &Device) -> u64 {
    let caps = CAPS
        | if dev.limits.atomics {
            ksys::KFI_ATOMIC
        } else {
            0
        };
    if crate::may_read(dev) {
        caps
    } else {
        caps & !(ksys::KFI_READ | ksys::KFI_ATOMIC)
    }
}

/// Whether an atomic of `kind` on (`datatype`, `op`) works on a device
/// with limits `l`: the most elements of one. The device adds and
/// compares-and-swaps 64-bit words (which is the same for signed and
/// unsigned ones): `kfi_atomic` and `kfi_fetch_atomic` of `KFI_SUM`,
/// `kfi_compare_atomic` of `KFI_CSWAP`, on `KFI_INT64` and `KFI_UINT64`.
/// Anything else is `EOPNOTSUPP`.
pub(crate) fn atomic_valid(l: &Limits, kind: AtomicKind, datatype: u32, op: u32) -> Result<usize> {
    let wide = matches!(datatype, ksys::KFI_INT64 | ksys::KFI_UINT64);
    let op_ok = match kind {
        AtomicKind::Write | AtomicKind::Fetch => op == ksys::KFI_SUM,
        AtomicKind::Compare => op == ksys::KFI_CSWAP,
    };
    if !l.atomics || !wide || !op_ok {
        return Err(EOPNOTSUPP);
    }
    Ok(ATOMIC_MAX)
}

/// Operation flags they support (messages are copied, so any send may be
/// an inject; its completion is the transmit's). Delivery and commit
/// completion: a send's once the peer acknowledged its placement, a
/// write's once a flushing read after it returned (see `rma.rs`).
pub(crate) const OP_FLAGS: u64 = ksys::KFI_INJECT
    | ksys::KFI_REMOTE_CQ_DATA
    | ksys::KFI_TRANSMIT_COMPLETE
    | ksys::KFI_DELIVERY_COMPLETE
    | ksys::KFI_COMMIT_COMPLETE;

/// An endpoint.
pub(crate) struct IbEndpoint {
    conn: Arc<Conn>,
    /// The domain, which tracks the connection for the device's removal.
    dom: Arc<DomShared>,
    /// The region the peer's flushing reads take (iWARP devices only,
    /// see `flush.rs`); freed after the QP is gone, under the domain's
    /// teardown lock (`drop`).
    flush: Option<FlushRegion>,
}

impl IbEndpoint {
    /// An endpoint for `info`: a request's (its handle) or one that
    /// connects to `info`'s destination. Process context.
    pub(crate) fn new(dom: Arc<DomShared>, info: &ksys::kfi_info) -> Result<Self> {
        // SAFETY: An entry's endpoint attributes are NULL or valid.
        let ep_type = unsafe { info.ep_attr.as_ref() }.map_or(ksys::KFI_EP_MSG, |e| e.type_);
        if ep_type != ksys::KFI_EP_MSG && ep_type != ksys::KFI_EP_UNSPEC {
            return Err(EOPNOTSUPP);
        }
        // Registered before a request is taken out of the table (this may
        // wait up to 5 s), where a device removal still finds it.
        // Without one, the peer's flushing reads are empty (as an older
        // provider's are): the endpoint still works, but siw may end its
        // connection at a write for delivery.
        let flush = if dom.dd.dev.link == Link::Iwarp {
            FlushRegion::new(&dom)
                .inspect_err(|e| {
                    kernel::pr_warn_once!(
                        "kfi_ibverbs: an endpoint without a flush region ({e:?})\n"
                    )
                })
                .ok()
        } else {
            None
        };
        let (request, dest) = if !info.handle.is_null() {
            (Some(pep::take_request(info.handle)?), None)
        } else if !info.dest_addr.is_null() {
            // SAFETY: An entry's destination holds `dest_addrlen` bytes.
            let b = unsafe {
                core::slice::from_raw_parts(info.dest_addr.cast::<u8>(), info.dest_addrlen)
            };
            (None, Some(Addr::from_bytes(b)?))
        } else {
            (None, None)
        };
        if let Some((id, ..)) = request.as_ref() {
            // Its QP would be refused at `kfi_enable`; said now.
            if !dom.dd.dev.is(id.device()) {
                return Err(EINVAL);
            }
        }
        let passive = request.is_some();
        let dp = DataPath::new()?;
        let own = flush.as_ref().map(FlushRegion::at);
        let conn = Conn::new(dom.dd.clone(), dp, request, dest, own)?;
        if passive {
            // Tracked from now: the device's removal destroys the request
            // it holds (rdma_cm's removal waits for it). A removal that
            // took the domain's list before this sees the PD gone.
            dom.add_conn(conn.clone())?;
            if !dom.dd.present() {
                dom.remove_conn(&conn);
                return Err(ENODEV);
            }
        }
        Ok(Self { conn, dom, flush })
    }

    pub(crate) fn attr(&self) -> EndpointAttr {
        EndpointAttr {
            caps: caps(&self.conn.dom.dev),
            op_flags: OP_FLAGS,
            tx_iov_limit: frame::IOV_MAX,
            rx_iov_limit: frame::IOV_MAX,
            rma_iov_limit: rma::RMA_IOV_MAX,
            inject_size: frame::INJECT_MAX,
            max_msg_size: data::max_msg(&self.conn.dom.dev.limits),
        }
    }

    /// The limits of the endpoint's device.
    pub(crate) fn limits(&self) -> &Limits {
        &self.conn.dom.dev.limits
    }

    pub(crate) fn opened(&self, fid: FidRef) {
        self.conn.state.lock().fid = Some(fid);
    }

    pub(crate) fn bind(&self, what: Bound) -> Result {
        let mut s = self.conn.state.lock();
        match what {
            Bound::Eq(eq) => s.eq = Some(eq),
            // A peer's RDMA into our regions never reaches the provider
            // (only a write's remote CQ data does): not countable here.
            other => {
                let State { tx_cq, rx_cq, .. } = &mut *s;
                let uncounted = ksys::KFI_REMOTE_READ | ksys::KFI_REMOTE_WRITE;
                bind_reports(&other, tx_cq, rx_cq, uncounted)?;
            }
        }
        Ok(())
    }

    /// `kfi_enable`: a request's endpoint gets its QP now; an active one
    /// its identifier. Process context.
    pub(crate) fn enable(&self) -> Result {
        let req = {
            let mut s = self.conn.state.lock();
            if s.tx_cq.cq.is_none() || s.rx_cq.cq.is_none() {
                return Err(kfi_error(ksys::KFI_ENOCQ));
            }
            if s.eq.is_none() {
                return Err(kfi_error(ksys::KFI_ENOEQ));
            }
            if s.enabled {
                return Err(EINVAL);
            }
            // A request's endpoint whose request the device's removal
            // destroyed.
            if s.phase == Phase::Closed || (s.offer.is_some() && s.request.is_none()) {
                return Err(ENODEV);
            }
            s.enabled = true;
            self.conn.dp.set_cqs(s.tx_cq, s.rx_cq);
            s.request.take()
        };
        // Giving a request its handler takes the identifier's handler
        // lock, under which handlers take the state lock: not under it.
        let accepting = req.is_some();
        let id = match req {
            Some(r) => r.set_handler(self.conn.clone()),
            None => CmId::new(self.conn.dom.net.0, self.conn.clone())?,
        };
        // Tracked before its QP exists, so a device removal cannot miss it
        // (a request's endpoint is, since it was opened).
        if !accepting {
            self.dom.add_conn(self.conn.clone())?;
        }
        // A protocol error of the peer ends the connection (until the close).
        drop(self.conn.dp.set_owner(Some(self.conn.clone())));
        let mut s = self.conn.state.lock();
        if s.phase == Phase::Closed {
            // The device's removal came while the identifier was out (it
            // found none to destroy): it is destroyed here, unlocked (that
            // waits for its handler, which takes the state lock), so that
            // the removal does not wait for the close.
            drop(s);
            drop(id);
            return Err(ENODEV);
        }
        s.id = Some(id);
        if accepting {
            if let Err(e) = self.conn.make_qp(&mut s) {
                self.conn.drop_qp(&mut s);
                return Err(e);
            }
        }
        Ok(())
    }

    /// `kfi_connect` to `addr` (a `sockaddr_in`/`sockaddr_in6`), or to
    /// the entry's destination when NULL, with private `data`.
    pub(crate) fn connect(&self, addr: *const c_void, data: &[u8]) -> Result {
        self.data_fits(data)?;
        let explicit = if addr.is_null() {
            None
        } else {
            // SAFETY: The C contract of kfi_connect: an address in the
            // domain's format; its family says how long it is, and the
            // longest is read only for IPv6.
            Some(unsafe { Addr::from_sockaddr(addr.cast()) }?)
        };
        let mut s = self.conn.state.lock();
        if s.phase != Phase::Idle {
            return Err(EISCONN);
        }
        let dest = explicit.or(s.dest).ok_or(EINVAL)?;
        let mut param = KVec::with_capacity(data.len(), GFP_KERNEL)?;
        param.extend_from_slice(data, GFP_KERNEL)?;
        s.param = param;
        s.id.as_ref()
            .ok_or(kfi_error(ksys::KFI_ENOEQ))?
            .resolve_addr(&dest)?;
        s.phase = Phase::Resolving;
        Ok(())
    }

    /// `EINVAL` unless private `data` fits what the endpoint's link
    /// takes (see `cm::ulp_data_fits`): said at once, not by the peer's
    /// refusal.
    fn data_fits(&self, data: &[u8]) -> Result {
        let iwarp = self.conn.dom.dev.link == Link::Iwarp;
        if cm::ulp_data_fits(data.len(), iwarp) {
            Ok(())
        } else {
            Err(EINVAL)
        }
    }

    /// `kfi_accept`, with private `data`.
    pub(crate) fn accept(&self, data: &[u8]) -> Result {
        self.data_fits(data)?;
        // rdma_accept takes the identifier's handler lock, which an event
        // callback waiting for our state lock may hold: the identifier is
        // taken out for the call and put back, with `accepting` set
        // meanwhile so that the device's removal waits for it before it
        // tears the QP down. Its events only need the state meanwhile.
        let (id, answer, trailer) = {
            let mut s = self.conn.state.lock();
            if s.phase != Phase::Idle || s.queues.is_none() || s.accepting {
                return Err(EINVAL);
            }
            let offer = s.offer.ok_or(EINVAL)?;
            let own = s.id.as_ref().ok_or(EINVAL)?.rd_limits()?;
            let answer = own
                .reads_if(crate::may_read(&self.conn.dom.dev))
                .answer(offer);
            let id = s.id.take().ok_or(EINVAL)?;
            // Set before the answer goes: Established may come before the
            // lock is taken again.
            s.rd = answer;
            s.phase = Phase::Connecting;
            s.accepting = true;
            // Before the answer goes, so that Established stops it.
            self.conn.start_watch(&mut s);
            (id, answer, s.trailer())
        };
        let extra = trailer.as_ref().map_or(&[][..], |t| t.bytes());
        let res = id.accept(data, extra, answer);
        if res.is_ok() && self.conn.state.lock().phase == Phase::Closed {
            // Ended while the identifier was out (a protocol error, a
            // shutdown, the handshake's deadline), with no disconnection
            // sent: the QP would stay connected until the close. Not
            // under the state lock: on iWARP the call waits for the
            // Established event, whose handler takes it.
            id.disconnect();
        }
        let mut s = self.conn.state.lock();
        s.id = Some(id);
        s.accepting = false;
        self.conn.accepted.notify_all();
        if res.is_err() {
            s.phase = Phase::Closed;
        } else {
            // Established may have come while the identifier was out.
            self.conn.dp.set_wr_wait(self.conn.wr_wait_ms(&s));
        }
        res
    }

    /// `kfi_shutdown`: SHUTDOWN here at once, and at the peer when its
    /// side learns of the disconnect (the IB CM tells the side that
    /// disconnects nothing, iWARP does: the event is ours to post).
    pub(crate) fn shutdown(&self) -> Result {
        let mut s = self.conn.state.lock();
        if s.phase != Phase::Connected {
            return Err(ENOTCONN);
        }
        s.phase = Phase::Closed;
        self.conn.dp.set_up(false);
        if let Some(id) = s.id.as_ref() {
            id.disconnect();
        }
        self.conn.dp.cancel(false);
        if let (Some(eq), Some(fid)) = (s.eq, s.fid) {
            let _ = eq.post_shutdown(fid);
        }
        Ok(())
    }

    /// `kfi_cancel`: takes back the receive or tagged receive posted with
    /// `context` (it completes with `ECANCELED`); `ENOENT` if none waits. Sends are on
    /// the wire once posted and cannot be taken back. Any context but
    /// hard interrupt.
    pub(crate) fn cancel(&self, context: *mut c_void) -> Result {
        self.conn.dp.cancel_recv(context as usize)
    }

    /// `kfi_sendmsg`.
    ///
    /// # Safety
    ///
    /// `msg` was passed by kfabric.ko to the provider's `sendmsg`.
    pub(crate) unsafe fn sendmsg(&self, msg: &ksys::kfi_msg, flags: u64) -> Result {
        // SAFETY: The caller's contract.
        unsafe { self.conn.dp.send(msg, flags, None) }
    }

    /// `kfi_tsendmsg`.
    ///
    /// # Safety
    ///
    /// `t` was passed by kfabric.ko to the provider's `tsendmsg`.
    pub(crate) unsafe fn tsendmsg(&self, t: &ksys::kfi_msg_tagged, flags: u64) -> Result {
        // SAFETY: The caller's contract.
        unsafe { self.conn.dp.send(&t.msg, flags, Some(t.tag)) }
    }

    /// `kfi_trecvmsg`.
    ///
    /// # Safety
    ///
    /// `t` was passed by kfabric.ko to the provider's `trecvmsg`.
    pub(crate) unsafe fn trecvmsg(&self, t: &ksys::kfi_msg_tagged, flags: u64) -> Result {
        // SAFETY: The caller's contract.
        unsafe { self.conn.dp.trecv(t, flags) }
    }

    /// `kfi_recvmsg`.
    ///
    /// # Safety
    ///
    /// `msg` was passed by kfabric.ko to the provider's `recvmsg`.
    pub(crate) unsafe fn recvmsg(&self, msg: &ksys::kfi_msg, flags: u64) -> Result {
        // SAFETY: The caller's contract.
        unsafe { self.conn.dp.recv(msg, flags) }
    }

    /// `kfi_readmsg` (`read`) or `kfi_writemsg`: RDMA requests into the
    /// peer's region; with `KFI_REMOTE_CQ_DATA`, a write's data follows it
    /// and completes at the peer. Any context but hard interrupt.
    ///
    /// # Safety
    ///
    /// `m` was passed by kfabric.ko to the provider's `readmsg` or
    /// `writemsg`.
    pub(crate) unsafe fn rma(&self, m: &ksys::kfi_msg_rma, flags: u64, read: bool) -> Result {
        // SAFETY: The caller's contract.
        let local = unsafe { Buffers::of(&m.msg) }?;
        // SAFETY: The caller's contract.
        let (remote, nremote, total) = unsafe { rma::remotes(m) }?;
        if total != local.total {
            return Err(EINVAL);
        }
        let data = (!read && flags & ksys::KFI_REMOTE_CQ_DATA != 0).then_some(m.msg.data);
        let entry = CqEntry {
            context: m.msg.context as usize,
            flags: rma::flags(read),
            len: total,
            asked: flags & ksys::KFI_COMPLETION != 0,
            ..Default::default()
        };
        let op = RmaOp::new(entry, read, local, remote, nremote, data);
        let placed = ksys::KFI_DELIVERY_COMPLETE | ksys::KFI_COMMIT_COMPLETE;
        self.conn.dp.rma(if flags & placed != 0 {
            op.flushed()
        } else {
            op
        })
    }

    /// `kfi_atomicmsg` and its fetch (`result`) and compare (`compare`
    /// and `result`) forms: one request per element, see
    /// [`atomic_valid`]. Any context but hard interrupt.
    ///
    /// # Safety
    ///
    /// `m` and the lists were passed by kfabric.ko to an atomic call
    /// (checked lists).
    pub(crate) unsafe fn atomic(
        &self,
        m: &ksys::kfi_msg_atomic,
        compare: &[ksys::kfi_ioc],
        result: &[ksys::kfi_ioc],
        flags: u64,
    ) -> Result {
        let kind = if !compare.is_empty() {
            AtomicKind::Compare
        } else if !result.is_empty() {
            AtomicKind::Fetch
        } else {
            AtomicKind::Write
        };
        atomic_valid(&self.conn.dom.dev.limits, kind, m.datatype, m.op)?;
        if m.rma_iov_count != 1 || m.rma_iov.is_null() || flags & ksys::KFI_INJECT != 0 {
            return Err(EINVAL);
        }
        // SAFETY: The caller's contract: one remote entry.
        let target = unsafe { *m.rma_iov };
        let count = target.count;
        // The device works on aligned 64-bit words only.
        if count == 0 || count > ATOMIC_MAX || target.addr % ELEM as u64 != 0 {
            return Err(EINVAL);
        }
        let len = count * ELEM;
        let key = u32::try_from(target.key).map_err(|_| ENOKEY)?;
        let operands = |iocs: &[ksys::kfi_ioc]| -> Result<[u64; ATOMIC_MAX]> {
            let b = Buffers::of_iocs(iocs, ELEM)?;
            if b.total != len {
                return Err(EINVAL);
            }
            let mut bytes = [0u8; ATOMIC_MAX * ELEM];
            // SAFETY: The caller's contract: the operands are valid for
            // `len` bytes during the call; `bytes` holds them.
            unsafe { b.gather(0, len, bytes.as_mut_ptr()) };
            let mut v = [0u64; ATOMIC_MAX];
            for (i, x) in v.iter_mut().enumerate() {
                let mut w = [0u8; ELEM];
                w.copy_from_slice(bytes.get(i * ELEM..(i + 1) * ELEM).ok_or(EINVAL)?);
                *x = u64::from_ne_bytes(w);
            }
            Ok(v)
        };
        let src = if m.iov_count == 0 || m.msg_iov.is_null() {
            return Err(EINVAL);
        } else {
            // SAFETY: The caller's contract: `iov_count` entries.
            operands(unsafe { core::slice::from_raw_parts(m.msg_iov, m.iov_count) })?
        };
        let cmp = if kind == AtomicKind::Compare {
            operands(compare)?
        } else {
            [0; ATOMIC_MAX]
        };
        let res = if result.is_empty() {
            None
        } else {
            let b = Buffers::of_iocs(result, ELEM)?;
            if b.total != len {
                return Err(EINVAL);
            }
            Some(b)
        };
        let entry = CqEntry {
            context: m.context as usize,
            flags: ksys::KFI_ATOMIC
                | if res.is_some() {
                    ksys::KFI_READ
                } else {
                    ksys::KFI_WRITE
                },
            len,
            asked: flags & ksys::KFI_COMPLETION != 0,
            ..Default::default()
        };
        let a = Atomic {
            cswap: kind == AtomicKind::Compare,
            src,
            cmp,
            result: res,
        };
        let remote = rma::Remote {
            addr: target.addr,
            len,
            key,
        };
        self.conn.dp.rma(RmaOp::atomic(entry, remote, a, count))
    }

    fn name(&self, peer: bool, out: &mut [u8]) -> Result<usize> {
        let s = self.conn.state.lock();
        let id = s.id.as_ref().ok_or(ENOTCONN)?;
        let mut buf = [0u8; 28];
        let n = id.addr(peer, &mut buf);
        let m = n.min(out.len());
        out[..m].copy_from_slice(&buf[..m]);
        Ok(n)
    }

    pub(crate) fn getname(&self, out: &mut [u8]) -> Result<usize> {
        self.name(false, out)
    }

    pub(crate) fn getpeer(&self, out: &mut [u8]) -> Result<usize> {
        self.name(true, out)
    }
}

impl Drop for IbEndpoint {
    fn drop(&mut self) {
        // No new protocol-error worker; those queued end in bounded time
        // (they take the state lock, and register regions a peer
        // invalidated again: each within `region::REVALIDATE_MS`, after
        // the registration link's setup, or without a link after the
        // domain's registrations on connections queued before it), and
        // must not outlive the close.
        drop(self.conn.dp.set_owner(None));
        while self.conn.err_work.load(Ordering::SeqCst) > 0 {
            kernel::time::delay::fsleep(kernel::time::Delta::from_millis(1));
        }
        // Handlers that run from here on see the connection closed. Taken
        // before the teardown lock: a handler may hold the state lock a
        // long time (siw's connect blocks in it while the peer does not
        // answer), and the rest of the domain needs the teardown lock.
        self.conn.state.lock().phase = Phase::Closed;
        let id = {
            // Under the domain's teardown lock, so a device removal keeps
            // the PD until the QP is gone. rdma_cm calls that may wait for
            // the identifier's event handler (which takes the state lock)
            // run with the state lock released; the handler ignores a
            // closed connection meanwhile.
            let _t = self.conn.dom.teardown();
            self.dom.remove_conn(&self.conn);
            let (id, queues) = {
                let mut s = self.conn.state.lock();
                s.phase = Phase::Closed;
                (s.id.take(), s.queues.take())
            };
            self.conn.dp.detach();
            if let Some(id) = id.as_ref() {
                id.disconnect();
                id.destroy_qp();
            }
            // The ring and CQs after the QP, and the flush region's MR,
            // which a removal of the device that came meanwhile (it waits
            // for this lock) must see gone before it lets the device go.
            drop(queues);
            drop(self.flush.take());
            id
        };
        // Destroying the identifier waits for its event handler, which
        // may wait for the teardown lock: released above.
        drop(id);
        self.conn.dp.cancel(true);
    }
}
