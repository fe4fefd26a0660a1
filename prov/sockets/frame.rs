// SPDX-License-Identifier: GPL-2.0

//! Framed messages and the connection handshake of kfi_sockets, over a
//! [`Socket`]: the header of `wire.rs`, then descriptors and payload.
//!
//! Handshake: the client connects and sends `ConnReq` with its private
//! data; the server answers `Accept` or `Reject`, each with private data,
//! and closes after a reject. Process context: everything here sleeps.

use core::mem::MaybeUninit;
use kernel::prelude::*;

use super::{
    ksock::{SendPages, SockAddr, Socket, Wait},
    wire::{Hdr, Op, RmaDesc, RmaDescs, CM_DATA_MAX, HDR_LEN, RMA_DESC_LEN, RMA_IOV_MAX},
};

/// Receives exactly `buf.len()` bytes; the end of the stream before that
/// is `ECONNRESET`.
pub(crate) fn recv_exact(sock: &Socket, buf: &mut [u8]) -> Result {
    let mut got = 0;
    while got < buf.len() {
        let n = sock.recv(&mut buf[got..], true)?;
        if n == 0 {
            return Err(ECONNRESET);
        }
        got += n;
    }
    Ok(())
}

/// Receives and checks the next header (`EPROTO` for garbage).
pub(crate) fn recv_hdr(sock: &Socket) -> Result<Hdr> {
    let mut b = [0u8; HDR_LEN];
    recv_exact(sock, &mut b)?;
    Hdr::decode(&b)
}

/// Receives and checks the next header if its first bytes are there
/// (`None`: no byte is), without a call to find out first. `begun` runs
/// once some are, before the rest is waited for (it sets their deadline).
pub(crate) fn recv_hdr_begun(sock: &Socket, begun: impl FnOnce()) -> Result<Option<Hdr>> {
    let mut b = [0u8; HDR_LEN];
    let got = match sock.recv_now(&mut b)? {
        None => return Ok(None),
        Some(0) => return Err(ECONNRESET),
        Some(n) => n,
    };
    begun();
    recv_exact(sock, &mut b[got..])?;
    Hdr::decode(&b).map(Some)
}

/// Receives the descriptors a checked header announces.
pub(crate) fn recv_rma(sock: &Socket, hdr: &Hdr) -> Result<RmaDescs> {
    let mut b = [0u8; RMA_IOV_MAX * RMA_DESC_LEN];
    recv_exact(sock, b.get_mut(..hdr.rma_bytes()).ok_or(EPROTO)?)?;
    RmaDescs::decode(&b, usize::from(hdr.rma_count))
}

/// Pieces of a frame gathered on the stack: the header, the most
/// descriptors and a few payload buffers.
const PARTS_ON_STACK: usize = 1 + RMA_IOV_MAX + 4;

/// Up to `N` byte slices gathered on the stack. Only the slots pushed are
/// ever written: made on every frame, and under TCG writing memory costs
/// about a nanosecond a byte.
///
/// # Invariants
///
/// `n <= N`, and the first `n` slots of `v` are initialized.
pub(crate) struct Parts<'a, const N: usize> {
    v: [MaybeUninit<&'a [u8]>; N],
    n: usize,
}

impl<'a, const N: usize> Parts<'a, N> {
    pub(crate) fn new() -> Self {
        // INVARIANT: nothing initialized, none counted.
        Self {
            v: [const { MaybeUninit::uninit() }; N],
            n: 0,
        }
    }

    /// Adds `p` after the others; `EINVAL` when all `N` slots are taken.
    pub(crate) fn push(&mut self, p: &'a [u8]) -> Result {
        let slot = self.v.get_mut(self.n).ok_or(EINVAL)?;
        slot.write(p);
        // INVARIANT: slot `n` was written just now.
        self.n += 1;
        Ok(())
    }

    pub(crate) fn as_slice(&self) -> &[&'a [u8]] {
        // SAFETY: The first `n` slots are initialized, and `MaybeUninit<T>`
        // has the layout of `T` (type invariant).
        unsafe { core::slice::from_raw_parts(self.v.as_ptr().cast::<&'a [u8]>(), self.n) }
    }
}

/// Bytes of a frame with `rma` descriptors and `payload` bytes of
/// payload (`None` past `usize`).
pub(crate) fn frame_len(rma: usize, payload: usize) -> Option<usize> {
    rma.checked_mul(RMA_DESC_LEN)?
        .checked_add(HDR_LEN)?
        .checked_add(payload)
}

/// Sends one frame: `hdr` (its `rma_count` and `len` are set from `rma`
/// and `payload`), the descriptors, then the payload pieces.
pub(crate) fn send_frame(sock: &Socket, hdr: &Hdr, rma: &[RmaDesc], payload: &[&[u8]]) -> Result {
    match send_frame_from(sock, hdr, rma, payload, 0, Wait::Deadline)? {
        Sent::Whole => Ok(()),
        Sent::Upto(_) => Err(EPIPE),
    }
}

/// How far a frame got.
pub(crate) enum Sent {
    /// All of it.
    Whole,
    /// Its first bytes only, this many in all: the socket is full.
    Upto(usize),
}

/// Sends the frame of [`send_frame`] from byte `at` on (the bytes before
/// were sent by an earlier call with the same frame), waiting or not as
/// `wait` says.
pub(crate) fn send_frame_from(
    sock: &Socket,
    hdr: &Hdr,
    rma: &[RmaDesc],
    payload: &[&[u8]],
    at: usize,
    wait: Wait,
) -> Result<Sent> {
    send_frame_split(sock, hdr, rma, payload, None, at, wait)
}

/// [`send_frame_from`], the payload sent through `by_ref` (by page
/// reference) if given, the header and descriptors copied.
pub(crate) fn send_frame_split(
    sock: &Socket,
    hdr: &Hdr,
    rma: &[RmaDesc],
    payload: &[&[u8]],
    by_ref: Option<SendPages>,
    at: usize,
    wait: Wait,
) -> Result<Sent> {
    if rma.len() > RMA_IOV_MAX {
        return Err(EINVAL);
    }
    let mut h = *hdr;
    h.rma_count = rma.len() as u8;
    h.len = payload.iter().map(|p| p.len() as u64).sum();
    let head = h.encode();
    if rma.is_empty() {
        return send_parts(sock, &head, &[], payload, by_ref, at, wait);
    }
    let mut descs = [[0u8; RMA_DESC_LEN]; RMA_IOV_MAX];
    for (d, r) in descs.iter_mut().zip(rma) {
        *d = r.encode();
    }
    send_parts(sock, &head, &descs[..rma.len()], payload, by_ref, at, wait)
}

/// [`send_frame_from`] of the encoded header `head` and descriptors
/// `descs`.
fn send_parts(
    sock: &Socket,
    head: &[u8],
    descs: &[[u8; RMA_DESC_LEN]],
    payload: &[&[u8]],
    by_ref: Option<SendPages>,
    at: usize,
    wait: Wait,
) -> Result<Sent> {
    // On the stack unless the payload has many pieces: no allocation per
    // frame for the usual ones.
    let mut short = Parts::<PARTS_ON_STACK>::new();
    let mut long: KVec<&[u8]> = KVec::new();
    let count = 1 + descs.len() + payload.len();
    let parts: &[&[u8]] = if count <= PARTS_ON_STACK {
        short.push(head)?;
        for d in descs {
            short.push(d)?;
        }
        for p in payload {
            short.push(p)?;
        }
        short.as_slice()
    } else {
        long.reserve(count, GFP_KERNEL)?;
        long.push(head, GFP_KERNEL)?;
        for d in descs {
            long.push(d, GFP_KERNEL)?;
        }
        for p in payload {
            long.push(p, GFP_KERNEL)?;
        }
        &long
    };
    let total: usize = parts.iter().map(|p| p.len()).sum();
    let left = total.checked_sub(at).ok_or(EINVAL)?;
    let by_ref = by_ref.map(|f| (1 + descs.len(), f));
    let n = sock.send_split(parts, by_ref, at, wait, false)?;
    how_far(n, left, at, wait)
}

/// How far a frame got whose send call from byte `at` took `n` of the
/// `left` bytes there were, as `wait` says.
fn how_far(n: usize, left: usize, at: usize, wait: Wait) -> Result<Sent> {
    if n == left {
        return Ok(Sent::Whole);
    }
    if wait == Wait::Deadline {
        // The connection failed on the way.
        return Err(EPIPE);
    }
    Ok(Sent::Upto(at + n))
}

/// Sends a frame that is `hdr` alone (no descriptors, no payload) from
/// byte `at` on, as [`send_frame_from`]; with `more`, the caller sends
/// another frame at once, and TCP holds this one for it (`MSG_MORE`):
/// several acknowledgements leave in one segment.
pub(crate) fn send_hdr_from(
    sock: &Socket,
    hdr: &Hdr,
    at: usize,
    wait: Wait,
    more: bool,
) -> Result<Sent> {
    let mut h = *hdr;
    h.rma_count = 0;
    h.len = 0;
    let head = h.encode();
    let left = head.len().checked_sub(at).ok_or(EINVAL)?;
    let n = sock.send_split(&[&head], None, at, wait, more)?;
    how_far(n, left, at, wait)
}

/// Receives the private data of a connection message.
fn recv_cm_data(sock: &Socket, hdr: &Hdr) -> Result<KVec<u8>> {
    let n = hdr.len as usize;
    let mut data = KVec::with_capacity(n, GFP_KERNEL)?;
    data.resize(n, 0, GFP_KERNEL)?;
    recv_exact(sock, &mut data)?;
    Ok(data)
}

fn check_cm_data(param: &[u8]) -> Result {
    if param.len() as u64 > CM_DATA_MAX {
        return Err(EINVAL);
    }
    Ok(())
}

/// Client, first half: connects `sock` to `addr` and sends the request.
pub(crate) fn connect_start(sock: &Socket, addr: &SockAddr, param: &[u8]) -> Result {
    check_cm_data(param)?;
    sock.connect(addr)?;
    send_connreq(sock, param)
}

/// Sends the request on `sock`, connected or connecting (the send waits
/// for the handshake).
pub(crate) fn send_connreq(sock: &Socket, param: &[u8]) -> Result {
    check_cm_data(param)?;
    send_frame(sock, &Hdr::new(Op::ConnReq, 0, 0), &[], &[param])
}

/// The server's answer to a connection request.
pub(crate) enum Answer {
    /// Accepted, with the server's private data.
    Accepted(KVec<u8>),
    /// Rejected, with the server's private data.
    Rejected(KVec<u8>),
}

/// Client, second half: waits for the server's answer.
pub(crate) fn connect_finish(sock: &Socket) -> Result<Answer> {
    let h = recv_hdr(sock)?;
    // The op first: only connection messages have a small length bound.
    let accepted = match h.op {
        Op::Accept => true,
        Op::Reject => false,
        _ => return Err(EPROTO),
    };
    let data = recv_cm_data(sock, &h)?;
    Ok(if accepted {
        Answer::Accepted(data)
    } else {
        Answer::Rejected(data)
    })
}

/// Server: reads the request of a freshly accepted connection.
pub(crate) fn read_connreq(sock: &Socket) -> Result<KVec<u8>> {
    let h = recv_hdr(sock)?;
    if h.op != Op::ConnReq {
        return Err(EPROTO);
    }
    recv_cm_data(sock, &h)
}

/// Server: accepts, with private data.
pub(crate) fn accept(sock: &Socket, param: &[u8]) -> Result {
    check_cm_data(param)?;
    send_frame(sock, &Hdr::new(Op::Accept, 0, 0), &[], &[param])
}

/// Server: rejects, with private data, and closes.
pub(crate) fn reject(sock: &Socket, param: &[u8]) -> Result {
    check_cm_data(param)?;
    let r = send_frame(sock, &Hdr::new(Op::Reject, 0, 0), &[], &[param]);
    sock.shutdown();
    r
}
