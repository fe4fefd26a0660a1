// SPDX-License-Identifier: GPL-2.0

//! Payload sent by page reference (`kfi_sockets_splice.c`): the skbs take
//! references to the ULP's pages instead of a copy of its bytes
//! (`MSG_SPLICE_PAGES`, as nvme-tcp sends data). Only for an operation
//! that completes on the peer's response (a write that is answered, a
//! message with delivery or commit completion), with at least
//! `splice_min_bytes` of payload; its pages that count no references
//! (slab memory, a large kmalloc's) are copied in their place.
//!
//! The page references keep the memory alive if the ULP frees a buffer
//! once its operation has completed; what keeps its bytes from being read
//! again is that the operation completes only after the peer has
//! acknowledged them at the TCP level ([`acked`], checked with the
//! response against the frame's end, noted when the operation is entered
//! in `tx.rs`): a peer that answers before it has taken the bytes breaks
//! the protocol. Residual: a peer on this host (loopback, veth) receives
//! the skbs themselves, with the references, and one that answers without
//! reading can still read the buffer later; a clone of a retransmitted skb
//! may still wait in a qdisc or driver after the acknowledgement. A ULP
//! that cannot allow that sets `splice_min_bytes=0` (copies only).

use core::num::NonZeroU32;
use kernel::prelude::*;

use crate::{
    bufs::{self, Buf},
    ksock::Socket,
    sock_sys::{
        kfi_sockets_abort, kfi_sockets_acked, kfi_sockets_mark, kfi_sockets_mark_frame,
        kfi_sockets_send_pages,
    },
};

/// Where a frame sent by page reference ends in its socket's sequence
/// space (`struct kfi_sockets_mark` of `kfi_sockets_glue.h`, kept here as
/// a plain value).
#[derive(Clone, Copy)]
pub(crate) struct Mark {
    end: u32,
    /// The count of acknowledged bytes with its lowest bit set, rounded
    /// down: a niche, so that an `Option<Mark>` in every pending operation
    /// takes 8 bytes (one byte off does not matter to a check in units of
    /// 1 GiB, but it must be below: rounded up, a count that has not
    /// moved reads as 4 GiB acknowledged since the mark).
    acked: NonZeroU32,
}

/// Whether the payload `bufs` goes by page reference (its pages that
/// count none are copied in their place, [`send_pages`]).
pub(crate) fn payload_by_ref(bufs: &[Buf]) -> bool {
    let min = crate::splice_min_bytes();
    min != 0 && bufs::total(bufs) >= min
}

/// Sends `buf` on `sock` with `flags`, its pages that count references by
/// reference and the others copied: what `kernel_sendmsg` would return
/// (waiting, one sendmsg per call). Process context; sleeps unless
/// `MSG_DONTWAIT`.
pub(crate) fn send_pages(sock: &Socket, buf: &[u8], flags: c_uint) -> c_int {
    // SAFETY: A live socket; `buf` stays valid while the call reads it, and
    // the skbs hold references of their own to its pages after.
    unsafe { kfi_sockets_send_pages(sock.as_raw(), buf.as_ptr().cast(), buf.len(), flags) }
}

/// Marks where a frame of `len` bytes sent next on `sock` ends; `None` if
/// it must be copied instead (too far ahead of what the peer has
/// acknowledged to tell). Called by the transmitter, the socket's only
/// writer, before the frame's first byte. Any context.
pub(crate) fn mark(sock: &Socket, len: usize) -> Option<Mark> {
    let mut m = kfi_sockets_mark::default();
    // SAFETY: A live TCP socket; `m` is written during the call only.
    if !unsafe { kfi_sockets_mark_frame(sock.as_raw(), len, &mut m) } {
        return None;
    }
    Some(Mark {
        end: m.end,
        acked: NonZeroU32::new(m.acked.wrapping_sub(1) | 1)?,
    })
}

/// Whether the peer has acknowledged every byte of the frame `m` marks (no
/// retransmission reads its pages again). Any context.
pub(crate) fn acked(sock: &Socket, m: &Mark) -> bool {
    let m = kfi_sockets_mark {
        end: m.end,
        acked: m.acked.get(),
    };
    // SAFETY: A live TCP socket; `m` is read during the call only.
    unsafe { kfi_sockets_acked(sock.as_raw(), &m) }
}

/// Whether the socket may still read the pages of a frame sent by
/// reference that `m` marks (`None`: a copied frame). Any context.
pub(crate) fn in_flight(sock: &Socket, m: Option<Mark>) -> bool {
    m.is_some_and(|m| !acked(sock, &m))
}

/// Ends `sock`'s connection at once, dropping the bytes the peer has not
/// acknowledged: before an operation whose frame went by reference fails
/// while the socket may still read its pages ([`in_flight`]), so that TCP
/// sends none of them after the ULP got its buffer back. Process context.
pub(crate) fn abort(sock: &Socket) {
    // SAFETY: A live TCP socket; process context.
    unsafe { kfi_sockets_abort(sock.as_raw()) }
}
