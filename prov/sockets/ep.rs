// SPDX-License-Identifier: GPL-2.0

//! Connected (MSG) endpoints of kfi_sockets: the ULP's face of one
//! connection (`conn.rs`): connection management (`kfi_connect` and its
//! connector, `kfi_accept`, `kfi_shutdown`, names), binding, posting and
//! cancel; and what RDM endpoints share with them (capabilities,
//! attributes, binding CQs and counters).

use core::ffi::c_void;
use kernel::{prelude::*, sync::Arc};

use crate::{
    buflist::LIST_MAX,
    conn::{self, Shared},
    frame::{self, Answer},
    info_ns,
    kfi::{
        kfabric::kfi_error,
        kfi_sys as sys,
        provider::{Bound, EndpointAttr, FidRef},
        toolkit::completion::bind_reports,
    },
    ksock::{SockAddr, Socket},
    mr::MrTable,
    op::{TxOp, INJECT_MAX},
    pep::{take_request, with_timeout},
    rxq::RxQueues,
    wire::RMA_IOV_MAX,
};

/// Capabilities of every endpoint (and of the provider's infos).
pub(crate) const CAPS: u64 = sys::KFI_MSG
    | sys::KFI_TAGGED
    | sys::KFI_RMA
    | sys::KFI_ATOMIC
    | sys::KFI_SEND
    | sys::KFI_RECV
    | sys::KFI_READ
    | sys::KFI_WRITE
    | sys::KFI_REMOTE_READ
    | sys::KFI_REMOTE_WRITE;
/// Operation flags the endpoints honour.
pub(crate) const OP_FLAGS: u64 = sys::KFI_INJECT
    | sys::KFI_REMOTE_CQ_DATA
    | sys::KFI_INJECT_COMPLETE
    | sys::KFI_TRANSMIT_COMPLETE
    | sys::KFI_DELIVERY_COMPLETE
    | sys::KFI_COMMIT_COMPLETE
    | sys::KFI_FENCE;

/// An endpoint: the ULP's handle on [`Shared`].
pub(crate) struct SockEp(Arc<Shared>);

/// The attributes of every endpoint, MSG or RDM.
pub(crate) fn attr() -> EndpointAttr {
    EndpointAttr {
        caps: CAPS,
        op_flags: OP_FLAGS,
        tx_iov_limit: LIST_MAX,
        rx_iov_limit: LIST_MAX,
        rma_iov_limit: RMA_IOV_MAX,
        inject_size: INJECT_MAX,
        max_msg_size: crate::wire::PAYLOAD_MAX as usize,
    }
}

/// Writes `a` into `out` (as much as fits); returns its full length.
pub(crate) fn put_addr(a: &SockAddr, out: &mut [u8]) -> usize {
    let b = a.as_bytes();
    let n = b.len().min(out.len());
    out[..n].copy_from_slice(&b[..n]);
    b.len()
}

impl SockEp {
    /// A new endpoint for `info`: connected later by `connect`, or, for the
    /// info of a connection request, by `accept`.
    pub(crate) fn new(info: &sys::kfi_info, mrs: Arc<MrTable>) -> Result<Self> {
        let sock = if info.handle.is_null() {
            None
        } else {
            Some(take_request(info.handle)?)
        };
        let dest = if info.dest_addr.is_null() {
            None
        } else {
            // SAFETY: An entry's address holds `dest_addrlen` bytes.
            let b = unsafe {
                core::slice::from_raw_parts(info.dest_addr.cast::<u8>(), info.dest_addrlen)
            };
            Some(SockAddr::from_bytes(b)?)
        };
        let rxq = RxQueues::new()?;
        Ok(Self(Shared::new(
            sock,
            dest,
            info_ns(info),
            mrs,
            rxq,
            true,
            None,
        )?))
    }
}

/// Runs `f` on a worker that close waits for (the connector).
fn spawn(sh: &Arc<Shared>, f: fn(&Arc<Shared>)) -> Result {
    crate::wq::spawn_long(sh, |sh| &sh.workers, f)
}

/// Connects: the client's half of the handshake, on a worker.
fn connector(sh: &Arc<Shared>) {
    let (param, eq, fid, addr) = {
        let mut s = sh.state.lock();
        (core::mem::take(&mut s.cm_param), s.eq, s.fid, s.cm_dest)
    };
    let (Some(eq), Some(fid), Some(addr)) = (eq, fid, addr) else {
        return;
    };
    let outcome = (|| -> Result<Answer> {
        let sock = Arc::new(Socket::tcp_in(&addr, sh.ns)?, GFP_KERNEL)?;
        {
            let mut s = sh.state.lock();
            if s.closing {
                return Err(ECANCELED);
            }
            s.sock = Some(sock.clone());
        }
        with_timeout(&sock, || {
            frame::connect_start(&sock, &addr, &param)?;
            frame::connect_finish(&sock)
        })
    })();
    if sh.state.lock().closing {
        return;
    }
    match outcome {
        Ok(Answer::Accepted(data)) => {
            if conn::start(sh).is_ok() {
                conn::report_connected(sh, eq, fid, &data);
            }
        }
        Ok(Answer::Rejected(data)) => {
            let _ = eq.post_err(fid, ECONNREFUSED, &data);
        }
        Err(e) => {
            let _ = eq.post_err(fid, e, &[]);
        }
    }
}

impl SockEp {
    /// `kfi_connect`: starts the handshake; the outcome is an EQ event.
    pub(crate) fn connect(&self, addr: *const c_void, param: &[u8]) -> Result {
        // An explicit address, else the destination of the endpoint's info.
        let dest = if addr.is_null() {
            self.0.dest.ok_or(EINVAL)?
        } else {
            // SAFETY: kfi_connect's contract: an address in the domain's
            // format (a socket address), as long as its family says.
            unsafe { SockAddr::from_raw(addr.cast()) }?
        };
        let mut p = KVec::new();
        p.extend_from_slice(param, GFP_KERNEL)?;
        {
            let mut s = self.0.state.lock();
            if s.sock.is_some() || s.connected || s.eq.is_none() || s.fid.is_none() {
                return Err(EINVAL);
            }
            s.cm_param = p;
            s.cm_dest = Some(dest);
        }
        spawn(&self.0, connector)
    }

    /// `kfi_accept`: the server's half of the handshake. Once, on an
    /// endpoint made for a connection request (`EINVAL` on any other, or
    /// again): its answer goes into the stream before the connection's
    /// transmitter starts, and could only cut into frames after that.
    pub(crate) fn accept(&self, param: &[u8]) -> Result {
        let (sock, eq, fid) = {
            let mut s = self.0.state.lock();
            if !s.cm_request || s.eq.is_none() || s.fid.is_none() || s.closing {
                return Err(EINVAL);
            }
            s.cm_request = false;
            (s.sock.clone(), s.eq, s.fid)
        };
        let (Some(sock), Some(eq), Some(fid)) = (sock, eq, fid) else {
            return Err(EINVAL);
        };
        frame::accept(&sock, param)?;
        conn::start(&self.0)?;
        conn::report_connected(&self.0, eq, fid, &[]);
        Ok(())
    }

    /// `kfi_shutdown`: ends the connection; the peer gets `KFI_SHUTDOWN`
    /// (the end of the stream tells it: a Shutdown frame written here
    /// could cut into a frame the transmit work is sending). Everything
    /// posted and not completed fails with `ECANCELED`. Process context.
    pub(crate) fn shutdown(&self) -> Result {
        if !self.0.state.lock().connected {
            return Err(ENOTCONN);
        }
        self.0.close();
        Ok(())
    }

    /// `kfi_getname`: the local address of the connection.
    pub(crate) fn getname(&self, out: &mut [u8]) -> Result<usize> {
        let sock = self.0.state.lock().sock.clone().ok_or(ENOTCONN)?;
        Ok(put_addr(&sock.local_addr()?, out))
    }

    /// `kfi_getpeer`: the peer's address.
    pub(crate) fn getpeer(&self, out: &mut [u8]) -> Result<usize> {
        let sock = self.0.state.lock().sock.clone().ok_or(ENOTCONN)?;
        Ok(put_addr(&sock.peer_addr()?, out))
    }

    pub(crate) fn attr(&self) -> EndpointAttr {
        attr()
    }

    pub(crate) fn opened(&self, fid: FidRef) {
        self.0.state.lock().fid = Some(fid);
    }

    pub(crate) fn bind(&self, what: Bound) -> Result {
        match what {
            Bound::Eq(eq) => self.0.state.lock().eq = Some(eq),
            _ => {
                // One lock at a time: a guard in a tuple would live to the
                // end of the statement (see the lock order at `Shared`).
                let mut rx = self.0.rxq.cq();
                let mut tx = self.0.state.lock().tx_cq;
                bind_reports(&what, &mut tx, &mut rx, 0)?;
                self.0.state.lock().tx_cq = tx;
                self.0.rxq.set_reports(rx);
            }
        }
        Ok(())
    }

    pub(crate) fn enable(&self) -> Result {
        // Not under the connection's lock: see the lock order at `Shared`.
        let rx_cq = self.0.rxq.cq().cq;
        let s = self.0.state.lock();
        if s.tx_cq.cq.is_none() || rx_cq.is_none() {
            return Err(kfi_error(sys::KFI_ENOCQ));
        }
        if s.eq.is_none() {
            return Err(kfi_error(sys::KFI_ENOEQ));
        }
        Ok(())
    }

    /// Posts a send, write, read or atomic, sent from where it lies or
    /// queued (see `Shared::queue`; any context but hard interrupt).
    pub(crate) fn post(&self, op: &mut TxOp) -> Result {
        self.0.queue(op)
    }

    /// `kfi_recvmsg` (any context but hard interrupt).
    pub(crate) fn recvmsg(&self, m: &sys::kfi_msg, flags: u64) -> Result {
        self.0.rxq.post(m, flags)
    }

    /// `kfi_cancel` of a posted receive (any context but hard interrupt).
    pub(crate) fn cancel(&self, context: usize) -> Result {
        match self.0.rxq.cancel(context) {
            Err(e) if e == ENOENT => self.0.cancel_queued(context),
            r => r,
        }
    }

    /// `kfi_trecvmsg` (any context but hard interrupt).
    pub(crate) fn trecvmsg(&self, t: &sys::kfi_msg_tagged, flags: u64) -> Result {
        self.0.rxq.post_tagged(t, flags)
    }
}

impl Drop for SockEp {
    fn drop(&mut self) {
        self.0.close();
    }
}
