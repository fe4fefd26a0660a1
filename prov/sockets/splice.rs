// SPDX-License-Identifier: GPL-2.0

//! Payload sent by page reference (`kfi_sockets_splice.c`): the skbs take
//! references to the ULP's pages instead of a copy of its bytes
//! (`MSG_SPLICE_PAGES`, as nvme-tcp sends data). Only for an operation
//! that completes on the peer's response (a write that is answered, a
//! message with delivery or commit completion), with at least
//! `splice_min_bytes` of payload, all in pages that count references
//! (vmalloc, the page cache, `alloc_pages`; not slab memory or a large
//! kmalloc, whose pages count none).
//!
//! The page references keep the memory alive if the ULP frees a buffer
//! once its operation has completed; what keeps its bytes from being read
//! again is that the operation completes only after the peer has
//! acknowledged them at the TCP level ([`acked`], checked with the
//! response against the frame's end, noted when the operation is entered
//! in `tx.rs`): a peer that answers before it has taken the bytes breaks
//! the protocol. A peer on this host (loopback, veth) receives the skbs
//! themselves, with the references: one that answers without reading can
//! still read the buffer later; `splice_min_bytes=0` sends copies only.

use kernel::prelude::*;

use crate::{
    bufs::{self, Buf},
    ksock::Socket,
    sock_sys::{
        kfi_sockets_abort, kfi_sockets_acked, kfi_sockets_can_splice, kfi_sockets_send_pages,
        kfi_sockets_write_seq,
    },
};

/// The largest payload sent by page reference.
const MAX_BY_REF: usize = 1 << 30;

/// Whether the payload `bufs` goes by page reference.
pub(crate) fn payload_by_ref(bufs: &[Buf]) -> bool {
    let min = crate::splice_min_bytes();
    let len = bufs::total(bufs);
    // TCP compares sequence numbers within half their space.
    min != 0
        && len >= min
        && len <= MAX_BY_REF
        && bufs.iter().all(|b| {
            // SAFETY: The operation's buffer, valid until it completes.
            let s = unsafe { bufs::slice(b) };
            // SAFETY: `s` is memory the call only looks up.
            unsafe { kfi_sockets_can_splice(s.as_ptr().cast(), s.len()) }
        })
}

/// Sends `buf` on `sock` by page reference with `flags`: what
/// `kernel_sendmsg` would return. For a payload [`payload_by_ref`]
/// accepted (anything else is `EFAULT`). Process context; sleeps unless
/// `MSG_DONTWAIT`.
pub(crate) fn send_pages(sock: &Socket, buf: &[u8], flags: c_uint) -> c_int {
    // SAFETY: A live socket; `buf` stays valid while the call reads it, and
    // the skbs hold references of their own to its pages after.
    unsafe { kfi_sockets_send_pages(sock.as_raw(), buf.as_ptr().cast(), buf.len(), flags) }
}

/// The TCP sequence number after the last byte sent on `sock`: read by the
/// transmitter, the only writer, right after a frame. Any context.
pub(crate) fn write_seq(sock: &Socket) -> u32 {
    // SAFETY: A live TCP socket.
    unsafe { kfi_sockets_write_seq(sock.as_raw()) }
}

/// Whether the peer has acknowledged every byte of `sock` before `seq`
/// (no retransmission can read them again). Any context.
pub(crate) fn acked(sock: &Socket, seq: u32) -> bool {
    // SAFETY: A live TCP socket.
    unsafe { kfi_sockets_acked(sock.as_raw(), seq) }
}

/// Whether the socket may still read the pages of a frame sent by
/// reference that ends at `end` (`None`: a copied frame). Any context.
pub(crate) fn in_flight(sock: &Socket, end: Option<u32>) -> bool {
    end.is_some_and(|end| !acked(sock, end))
}

/// Ends `sock`'s connection at once, dropping the bytes the peer has not
/// acknowledged: before an operation whose frame went by reference fails
/// while the socket may still read its pages ([`in_flight`]), so that
/// nothing sends them after the ULP got its buffer back. Process context.
pub(crate) fn abort(sock: &Socket) {
    // SAFETY: A live TCP socket; process context.
    unsafe { kfi_sockets_abort(sock.as_raw()) }
}
