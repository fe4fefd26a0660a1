// SPDX-License-Identifier: GPL-2.0

//! Tagged messages of a connection (`KFI_TAGGED`), matched by the
//! provider with the toolkit's tag matcher (`kfi/api/toolkit/tags.rs`).
//!
//! A tagged message goes as the frames of any message, the first flagged
//! [`F_TAGGED`] with the tag extension (tag and message length, see
//! [`crate::frame`]) in front of its payload. When its first frame
//! arrives, the oldest posted tagged receive whose tag matches takes the
//! message, frame by frame; if none does, the message is copied, frame by
//! frame, into a held copy, within the connection's bounds ([`UNEXP_MAX`]
//! messages and the module parameter `unexpected_bytes_max` bytes, room
//! reserved at the first frame from the length it declares), and the
//! next matching receive takes it. Either way the slot is reposted at
//! once, so a tagged message never holds slots or credits, and the
//! connection's other messages go on. A message that finds no room ends
//! the connection with an `ENOSPC` error entry on the EQ (`EPROTO` when it
//! is larger than all the bound may hold, as in kfi_sockets); a length
//! that its frames do not match is a protocol error.
//!
//! Everything here runs under the data path's lock, in the completion
//! handlers (softirq) or at posting (any context but hard interrupt): it
//! never sleeps, and allocates only with `GFP_ATOMIC` (a held copy, one
//! chunk of at most one frame at a time; an allocation that fails ends
//! the connection with `ENOMEM`).

use kernel::prelude::*;

use crate::{
    data::RECV_MAX,
    frame::{read_tag_ext, Buffers, Header, FRAME_MAX, F_CQ_DATA, F_MORE, F_TAGGED, TAG_EXT},
    kfi::{
        kfi_sys as ksys,
        toolkit::{
            completion::{report_err, report_recv, CqEntry, Reports},
            tags::{Limits, Matched, Reservation, Room, TagMatcher},
        },
    },
};

/// Most tagged messages a connection holds for receives not posted yet
/// (as kfi_sockets' endpoints).
pub(crate) const UNEXP_MAX: usize = 64;

/// A tagged receive the ULP posted: its buffers as kernel addresses.
#[derive(Clone, Copy)]
pub(crate) struct TRecv {
    entry: CqEntry,
    bufs: Buffers,
}

impl TRecv {
    /// The receive of `msg`.
    ///
    /// # Safety
    ///
    /// `msg` was passed by kfabric.ko to `trecvmsg` (checked list).
    pub(crate) unsafe fn of(msg: &ksys::kfi_msg, flags: u64) -> Result<Self> {
        // SAFETY: The caller's contract.
        let bufs = unsafe { Buffers::of(msg) }?;
        Ok(Self {
            entry: CqEntry::posted_recv(msg, ksys::KFI_TAGGED, bufs.first(), flags),
            bufs,
        })
    }
}

/// A held tagged message: its payload, one chunk per frame, and its
/// remote CQ data.
pub(crate) struct Unexp {
    chunks: KVec<KVec<u8>>,
    data: Option<u64>,
}

/// Where the tagged message in arrival goes.
enum Dest {
    /// Into a posted receive, of which `placed` bytes are written.
    Recv { r: TRecv, placed: usize },
    /// Into a held copy, in the room reserved for it.
    Store {
        room: Reservation,
        chunks: KVec<KVec<u8>>,
    },
}

/// The tagged message whose frames are arriving.
struct Arriving {
    tag: u64,
    /// The length its first frame declared.
    total: usize,
    /// Payload bytes arrived so far.
    got: usize,
    dest: Dest,
}

/// Why a frame ends the connection.
pub(crate) enum Broken {
    /// The peer broke the protocol (`EPROTO`).
    Proto(&'static str),
    /// No room or no memory for what it sent: the connection ends with
    /// this error.
    End(Error, &'static str),
}

/// The tagged receives and held tagged messages of a connection.
pub(crate) struct Tagged {
    m: TagMatcher<TRecv, Unexp>,
    arriving: Option<Arriving>,
    /// The last untagged data frame that arrived was flagged [`F_MORE`]:
    /// the next frame continues its message.
    untagged_more: bool,
}

/// Completes tagged receive `r` of a message tagged `tag` with remote CQ
/// data `data`, of which `placed` bytes are in its buffers and `cut` did
/// not fit.
fn complete(cq: Reports, r: &TRecv, tag: u64, data: Option<u64>, placed: usize, cut: usize) {
    let mut e = r.entry;
    e.len = placed;
    e.tag = tag;
    if let Some(d) = data {
        e.flags |= ksys::KFI_REMOTE_CQ_DATA;
        e.data = d;
    }
    report_recv(cq, &e, cut);
}

/// Copies the held message of `m` into its receive and completes it.
fn deliver(cq: Reports, m: &Matched<TRecv, Unexp>) {
    let (mut placed, mut total) = (0usize, 0usize);
    for c in m.msg.chunks.iter() {
        // SAFETY: A posted receive's buffers are valid for writes until
        // it completes (the ULP's contract); the chunk is ours, not
        // theirs. `scatter` keeps within the buffers.
        placed += unsafe { m.recv.bufs.scatter(placed, c.as_ptr(), c.len()) };
        total = total.saturating_add(c.len());
    }
    complete(
        cq,
        &m.recv,
        m.tag,
        m.msg.data,
        placed,
        total.saturating_sub(placed),
    );
}

/// The chunks of a held message of `total` bytes: one per frame with
/// payload (the first carries the tag extension too).
fn chunks_of(total: usize) -> usize {
    let first = FRAME_MAX - TAG_EXT;
    1 + total.saturating_sub(first).div_ceil(FRAME_MAX)
}

impl Tagged {
    /// No receives, nothing held; at most `bytes` payload bytes held.
    /// Process context.
    pub(crate) fn new(bytes: usize) -> Result<Self> {
        Ok(Self {
            m: TagMatcher::new(Limits {
                posted: RECV_MAX,
                held: UNEXP_MAX,
                held_bytes: bytes,
                // One source: the connection's peer.
                source_held: UNEXP_MAX,
                source_bytes: bytes,
            })?,
            arriving: None,
            untagged_more: false,
        })
    }

    /// Whether the data frame `h` that arrived belongs to a tagged
    /// message (its first frame or a later one); follows where the
    /// connection's messages begin. A tag inside a message is a protocol
    /// error.
    pub(crate) fn is_tagged(&mut self, h: &Header) -> Result<bool, Broken> {
        let first = h.flags & F_TAGGED != 0;
        if self.arriving.is_some() || self.untagged_more {
            if first {
                return Err(Broken::Proto("tagged frame inside a message"));
            }
            if self.arriving.is_some() {
                return Ok(true);
            }
        }
        if !first {
            self.untagged_more = h.flags & F_MORE != 0;
        }
        Ok(first)
    }

    /// Whether frames of a message (tagged or not) are arriving.
    pub(crate) fn mid_message(&self) -> bool {
        self.arriving.is_some() || self.untagged_more
    }

    /// Takes frame `h` of a tagged message, with payload `p` (copied out:
    /// the slot may be reposted); messages longer than `max_msg` are a
    /// protocol error. Whether it was the message's last frame (its
    /// receive completed, or it is held).
    pub(crate) fn frame(
        &mut self,
        h: &Header,
        p: &[u8],
        cq: Reports,
        max_msg: usize,
    ) -> Result<bool, Broken> {
        let mut p = p;
        if h.flags & F_TAGGED != 0 {
            let (tag, len) =
                read_tag_ext(p).ok_or(Broken::Proto("tagged frame shorter than its tag"))?;
            let total = usize::try_from(len)
                .ok()
                .filter(|&l| l <= max_msg)
                .ok_or(Broken::Proto("tagged message longer than 16 MiB"))?;
            p = p.get(TAG_EXT..).unwrap_or(&[]);
            let dest = match self.m.take_posted(tag) {
                Some(r) => Dest::Recv { r, placed: 0 },
                None => match self.m.reserve(total) {
                    Room::Reserved(room) => match KVec::with_capacity(chunks_of(total), GFP_ATOMIC)
                    {
                        Ok(chunks) => Dest::Store { room, chunks },
                        Err(_) => {
                            self.m.release(room);
                            return Err(Broken::End(ENOMEM, "no memory for a tagged message"));
                        }
                    },
                    Room::Full => {
                        return Err(Broken::End(
                            ENOSPC,
                            "unexpected tagged messages beyond the bound",
                        ))
                    }
                    Room::Never => {
                        return Err(Broken::Proto(
                            "tagged message larger than unexpected_bytes_max",
                        ))
                    }
                },
            };
            self.arriving = Some(Arriving {
                tag,
                total,
                got: 0,
                dest,
            });
        }
        let Some(a) = self.arriving.as_mut() else {
            return Err(Broken::Proto("tagged frame outside a tagged message"));
        };
        let last = h.flags & F_MORE == 0;
        let got = a
            .got
            .checked_add(p.len())
            .filter(|&g| g <= a.total && (!last || g == a.total))
            .ok_or(Broken::Proto("tagged message not of its length"))?;
        match &mut a.dest {
            Dest::Recv { r, placed } => {
                // SAFETY: A posted receive's buffers are valid for writes
                // until it completes (the ULP's contract); `p` is the
                // slot's, not theirs. `scatter` keeps within the buffers.
                *placed += unsafe { r.bufs.scatter(*placed, p.as_ptr(), p.len()) };
            }
            Dest::Store { chunks, .. } if !p.is_empty() => {
                let mut c = KVec::with_capacity(p.len(), GFP_ATOMIC)
                    .map_err(|_| Broken::End(ENOMEM, "no memory for a tagged message"))?;
                // Within the capacity: does not allocate.
                c.extend_from_slice(p, GFP_ATOMIC)
                    .map_err(|_| Broken::End(ENOMEM, "no memory for a tagged message"))?;
                chunks
                    .push_within_capacity(c)
                    .map_err(|_| Broken::Proto("tagged message of too many frames"))?;
            }
            Dest::Store { .. } => {}
        }
        a.got = got;
        if !last {
            return Ok(false);
        }
        let Some(a) = self.arriving.take() else {
            return Ok(true);
        };
        let data = (h.flags & F_CQ_DATA != 0).then_some(h.data);
        match a.dest {
            Dest::Recv { r, placed } => {
                complete(cq, &r, a.tag, data, placed, a.total.saturating_sub(placed));
            }
            Dest::Store { room, chunks } => {
                // A receive posted meanwhile may take it at once.
                match self.m.hold(room, a.tag, Unexp { chunks, data }) {
                    Ok(Some(m)) => deliver(cq, &m),
                    Ok(None) => {}
                    Err(_) => return Err(Broken::End(ENOMEM, "no memory for a tagged message")),
                }
            }
        }
        Ok(true)
    }

    /// `kfi_trecvmsg` of `r` for tags matching `tag` outside `ignore`: the
    /// oldest matching held message completes it at once, else it waits
    /// (`EAGAIN` when [`RECV_MAX`] wait).
    pub(crate) fn post(&mut self, tag: u64, ignore: u64, r: TRecv, cq: Reports) -> Result {
        if let Some(m) = self.m.post(tag, ignore, r)? {
            deliver(cq, &m);
        }
        Ok(())
    }

    /// `kfi_cancel` of the waiting tagged receive with `context`: it
    /// completes with `ECANCELED`; `ENOENT` if none waits.
    pub(crate) fn cancel_recv(&mut self, context: usize, cq: Reports) -> Result {
        let r = self
            .m
            .cancel_where(|r| r.entry.context == context)
            .ok_or(ENOENT)?;
        report_err(cq, &r.entry, ECANCELED);
        Ok(())
    }

    /// The connection ended: waiting receives and the one a message was
    /// arriving into complete with `ECANCELED`; held messages stay for
    /// receives still posted, unless `closing` (the endpoint closes).
    pub(crate) fn cancel(&mut self, cq: Reports, closing: bool) {
        if let Some(a) = self.arriving.take() {
            match a.dest {
                Dest::Recv { r, .. } => report_err(cq, &r.entry, ECANCELED),
                Dest::Store { room, .. } => self.m.release(room),
            }
        }
        self.untagged_more = false;
        while let Some(r) = self.m.cancel_where(|_| true) {
            report_err(cq, &r.entry, ECANCELED);
        }
        if closing {
            // Nothing is posted any more: the held copies go (kfree, any
            // context).
            drop(self.m.take_all());
        }
    }
}
