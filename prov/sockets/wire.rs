// SPDX-License-Identifier: GPL-2.0

//! The kfi_sockets wire protocol, version 3 (Documentation/sockets-wire.rst):
//! the header every message on a connection starts with, its encoding and
//! the checks a received header must pass before anything acts on it.
//!
//! Everything on the wire is little endian. Pure functions: any context.

use kernel::prelude::*;

/// The first two bytes of every header: "kf".
pub(crate) const MAGIC: u16 = 0x666b;
/// The protocol version this code speaks.
pub(crate) const VERSION: u8 = 3;
/// Size of the fixed header.
pub(crate) const HDR_LEN: usize = 40;
/// Size of one remote buffer descriptor after the header.
pub(crate) const RMA_DESC_LEN: usize = 24;
/// Most remote buffer descriptors of one operation.
pub(crate) const RMA_IOV_MAX: usize = 4;
/// Largest payload of one message (larger transfers are split by the
/// sender).
pub(crate) const PAYLOAD_MAX: u64 = 64 << 20;
/// Most private data of a connection message.
pub(crate) const CM_DATA_MAX: u64 = 256;

/// Operation codes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub(crate) enum Op {
    /// Client to server: connection request with private data.
    ConnReq = 1,
    /// Server to client: accepted, with private data.
    Accept = 2,
    /// Server to client: rejected, with private data; the server closes.
    Reject = 3,
    /// A message for the next posted receive.
    Msg = 4,
    /// A tagged message (`tag` set).
    Tagged = 5,
    /// RMA write: descriptors, then the payload to place.
    Write = 6,
    /// RMA read request: descriptors; the answer is `ReadResp`.
    ReadReq = 7,
    /// RMA read response: the payload for request `id`.
    ReadResp = 8,
    /// Atomic request: descriptor, then operands.
    Atomic = 9,
    /// Atomic response: the old values for request `id`.
    AtomicResp = 10,
    /// Acknowledgement of operation `id`; `data` holds its status (0 or a
    /// positive errno).
    Ack = 11,
    /// Orderly end of the connection.
    Shutdown = 12,
}

impl Op {
    fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            1 => Self::ConnReq,
            2 => Self::Accept,
            3 => Self::Reject,
            4 => Self::Msg,
            5 => Self::Tagged,
            6 => Self::Write,
            7 => Self::ReadReq,
            8 => Self::ReadResp,
            9 => Self::Atomic,
            10 => Self::AtomicResp,
            11 => Self::Ack,
            12 => Self::Shutdown,
            _ => return None,
        })
    }

    /// Whether the operation carries remote buffer descriptors.
    fn has_rma(self) -> bool {
        matches!(self, Self::Write | Self::ReadReq | Self::Atomic)
    }
}

/// Header flags.
pub(crate) mod flags {
    /// `data` is remote CQ data for the target's completion.
    pub(crate) const REMOTE_CQ_DATA: u16 = 1 << 0;
    /// Acknowledge after the data is placed (delivery complete).
    pub(crate) const DELIVERY_COMPLETE: u16 = 1 << 1;
    /// Acknowledge after the data is placed and made persistent.
    pub(crate) const COMMIT_COMPLETE: u16 = 1 << 2;
    /// Atomics only: the initiator wants the old values (a fetch or
    /// compare form), which needs read access too (version 2).
    pub(crate) const FETCH: u16 = 1 << 3;
    /// Writes only: no answer (the initiator completed the write once its
    /// socket took it); a target that refuses the access ends the
    /// connection instead (version 3).
    pub(crate) const UNANSWERED: u16 = 1 << 4;
    /// Every flag of version 3.
    pub(crate) const ALL: u16 =
        REMOTE_CQ_DATA | DELIVERY_COMPLETE | COMMIT_COMPLETE | FETCH | UNANSWERED;
}

/// A decoded, checked header.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Hdr {
    /// The operation.
    pub(crate) op: Op,
    /// `flags::*`.
    pub(crate) flags: u16,
    /// Remote buffer descriptors that follow the header.
    pub(crate) rma_count: u8,
    /// The sender's operation id, echoed by responses and acks.
    pub(crate) id: u64,
    /// Payload bytes after the header and descriptors.
    pub(crate) len: u64,
    /// Remote CQ data, or an ack's status.
    pub(crate) data: u64,
    /// Tag (tagged messages), or atomic datatype and op (atomics).
    pub(crate) tag: u64,
}

/// A remote buffer descriptor.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub(crate) struct RmaDesc {
    /// Remote address (the region's offset plus the distance into it).
    pub(crate) addr: u64,
    /// Length.
    pub(crate) len: u64,
    /// The region's key.
    pub(crate) key: u64,
}

/// The descriptors of one frame (at most [`RMA_IOV_MAX`]), kept without
/// an allocation.
#[derive(Clone, Copy, Default)]
pub(crate) struct RmaDescs {
    d: [RmaDesc; RMA_IOV_MAX],
    /// Descriptors in `d`.
    n: usize,
}

impl RmaDescs {
    /// Decodes the `n` descriptors of `b` (`n * RMA_DESC_LEN` bytes);
    /// `EPROTO` for more than [`RMA_IOV_MAX`] or too few bytes.
    pub(crate) fn decode(b: &[u8], n: usize) -> Result<Self> {
        let mut out = Self::default();
        let to = out.d.get_mut(..n).ok_or(EPROTO)?;
        for (i, d) in to.iter_mut().enumerate() {
            let at = i * RMA_DESC_LEN;
            let raw = b.get(at..at + RMA_DESC_LEN).ok_or(EPROTO)?;
            *d = RmaDesc::decode(raw.try_into().map_err(|_| EPROTO)?);
        }
        out.n = n;
        Ok(out)
    }

    pub(crate) fn as_slice(&self) -> &[RmaDesc] {
        // `n <= RMA_IOV_MAX` (set by `decode` only).
        self.d.get(..self.n).unwrap_or(&[])
    }
}

fn get_u64(b: &[u8], at: usize) -> u64 {
    let mut v = [0u8; 8];
    v.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(v)
}

impl Hdr {
    /// A header for `op` with nothing else set.
    pub(crate) fn new(op: Op, id: u64, len: u64) -> Self {
        Self {
            op,
            flags: 0,
            rma_count: 0,
            id,
            len,
            data: 0,
            tag: 0,
        }
    }

    /// The wire form.
    pub(crate) fn encode(&self) -> [u8; HDR_LEN] {
        let mut b = [0u8; HDR_LEN];
        b[0..2].copy_from_slice(&MAGIC.to_le_bytes());
        b[2] = VERSION;
        b[3] = self.op as u8;
        b[4..6].copy_from_slice(&self.flags.to_le_bytes());
        b[6] = self.rma_count;
        b[8..16].copy_from_slice(&self.id.to_le_bytes());
        b[16..24].copy_from_slice(&self.len.to_le_bytes());
        b[24..32].copy_from_slice(&self.data.to_le_bytes());
        b[32..40].copy_from_slice(&self.tag.to_le_bytes());
        b
    }

    /// The payload length of the message whose header `b` looks like one
    /// (magic, version and kind only): a hint for the data callback's early
    /// wakeup, not a check ([`Self::decode`] checks).
    pub(crate) fn msg_len_hint(b: &[u8; HDR_LEN]) -> Option<u64> {
        let magic = u16::from_le_bytes([b[0], b[1]]);
        (magic == MAGIC && b[2] == VERSION && b[3] == Op::Msg as u8).then(|| get_u64(b, 16))
    }

    /// Decodes and checks a received header. Anything it refuses
    /// (`EPROTO`) ends the connection: the stream cannot be trusted after.
    pub(crate) fn decode(b: &[u8; HDR_LEN]) -> Result<Self> {
        if u16::from_le_bytes([b[0], b[1]]) != MAGIC || b[2] != VERSION || b[7] != 0 {
            return Err(EPROTO);
        }
        let op = Op::from_u8(b[3]).ok_or(EPROTO)?;
        let h = Self {
            op,
            flags: u16::from_le_bytes([b[4], b[5]]),
            rma_count: b[6],
            id: get_u64(b, 8),
            len: get_u64(b, 16),
            data: get_u64(b, 24),
            tag: get_u64(b, 32),
        };
        if h.flags & !flags::ALL != 0 || (h.flags & flags::FETCH != 0 && op != Op::Atomic) {
            return Err(EPROTO);
        }
        let answered = flags::DELIVERY_COMPLETE | flags::COMMIT_COMPLETE;
        if h.flags & flags::UNANSWERED != 0 && (op != Op::Write || h.flags & answered != 0) {
            return Err(EPROTO);
        }
        let rma_ok = if op.has_rma() {
            (1..=RMA_IOV_MAX).contains(&(h.rma_count as usize))
        } else {
            h.rma_count == 0
        };
        let len_max = match op {
            Op::ConnReq | Op::Accept | Op::Reject => CM_DATA_MAX,
            Op::ReadReq | Op::Ack | Op::Shutdown => 0,
            _ => PAYLOAD_MAX,
        };
        if !rma_ok || h.len > len_max {
            return Err(EPROTO);
        }
        Ok(h)
    }

    /// Bytes of descriptors that follow the header.
    pub(crate) fn rma_bytes(&self) -> usize {
        self.rma_count as usize * RMA_DESC_LEN
    }
}

impl RmaDesc {
    /// The wire form.
    pub(crate) fn encode(&self) -> [u8; RMA_DESC_LEN] {
        let mut b = [0u8; RMA_DESC_LEN];
        b[0..8].copy_from_slice(&self.addr.to_le_bytes());
        b[8..16].copy_from_slice(&self.len.to_le_bytes());
        b[16..24].copy_from_slice(&self.key.to_le_bytes());
        b
    }

    /// Decodes one descriptor; its bounds are checked against the region
    /// it names by whoever uses it.
    pub(crate) fn decode(b: &[u8; RMA_DESC_LEN]) -> Self {
        Self {
            addr: get_u64(b, 0),
            len: get_u64(b, 8),
            key: get_u64(b, 16),
        }
    }
}
