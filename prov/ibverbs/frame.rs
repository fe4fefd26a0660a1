// SPDX-License-Identifier: GPL-2.0

//! The frames of the message path: a [`HDR`]-byte header in front of up
//! to [`FRAME_MAX`] bytes of payload, one frame per slot, and the copies
//! between the ULP's buffers and the slots.
//!
//! Header (little endian): magic u8, flags u8, credits u16, payload
//! length u32, remote CQ data u64. A message longer than one frame goes
//! as consecutive frames, each but the last flagged [`F_MORE`]; a
//! connection never interleaves the frames of two messages.
//!
//! The first frame of a tagged message is flagged [`F_TAGGED`] (its
//! other frames are not) and its payload starts with a [`TAG_EXT`]-byte
//! extension: the tag u64 and the message's length u64 (the payload
//! bytes of all its frames after the extension), little endian.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use kernel::prelude::*;

use crate::kfi::{kfi_sys as ksys, toolkit::segments::Segments};

/// Bytes of a slot.
pub(crate) const SLOT: usize = 4096;
/// Bytes of the header in front of each frame.
pub(crate) const HDR: usize = 16;
/// The most payload one frame carries.
pub(crate) const FRAME_MAX: usize = SLOT - HDR;
/// Most buffers of one send or receive.
pub(crate) const IOV_MAX: usize = 4;

/// Also the frame format's version: 0x6b counted acknowledgements of both
/// kinds of message together.
const MAGIC: u8 = 0x6c;
/// The frame has a payload (else it only returns credits).
pub(crate) const F_DATA: u8 = 1;
/// The header carries remote CQ data.
pub(crate) const F_CQ_DATA: u8 = 2;
/// More frames of the same message follow.
pub(crate) const F_MORE: u8 = 4;
/// Not a message: the remote CQ data of an RDMA write that came before.
pub(crate) const F_RMA_DATA: u8 = 8;

/// The last frame of a message whose sender waits until it is placed
/// (delivery completion): the receiver acknowledges it once its receive
/// completed.
pub(crate) const F_ACK_REQ: u8 = 16;
/// A header-only frame acknowledging messages flagged [`F_ACK_REQ`],
/// oldest first, counted in `data` by kind ([`Acks`]).
pub(crate) const F_ACKED: u8 = 32;

/// The messages an acknowledgement ([`F_ACKED`]) is for, in its `data`:
/// untagged ones in the low 32 bits, tagged ones in the high 32. Each
/// kind is placed in the order it was sent, but a tagged message may be
/// placed while an earlier untagged one waits for its receive: counted
/// together, its acknowledgement would complete the untagged send.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Acks {
    pub(crate) msg: u32,
    pub(crate) tagged: u32,
}

impl Acks {
    /// The counts in an acknowledgement's `data`.
    pub(crate) fn of(data: u64) -> Self {
        Self {
            msg: (data & u64::from(u32::MAX)) as u32,
            tagged: (data >> 32) as u32,
        }
    }

    /// The `data` of an acknowledgement of these counts.
    pub(crate) fn data(self) -> u64 {
        (u64::from(self.tagged) << 32) | u64::from(self.msg)
    }

    /// Whether any message is acknowledged.
    pub(crate) fn any(self) -> bool {
        self.msg != 0 || self.tagged != 0
    }

    /// Counts one more placed message of the kind `tagged` says.
    pub(crate) fn count(&mut self, tagged: bool) {
        let n = if tagged {
            &mut self.tagged
        } else {
            &mut self.msg
        };
        *n = n.saturating_add(1);
    }
}

/// The first frame of a tagged message: its payload starts with the
/// tag extension ([`TAG_EXT`]).
pub(crate) const F_TAGGED: u8 = 64;
/// Bytes of the tag extension: tag u64, message length u64.
pub(crate) const TAG_EXT: usize = 16;
/// The longest inject: one frame, with room for the tag extension.
pub(crate) const INJECT_MAX: usize = FRAME_MAX - TAG_EXT;

/// Every flag a frame may carry; any other bit is a protocol error.
pub(crate) const F_KNOWN: u8 =
    F_DATA | F_CQ_DATA | F_MORE | F_RMA_DATA | F_ACK_REQ | F_ACKED | F_TAGGED;

/// The tag extension of a tagged message of `len` bytes tagged `tag`.
pub(crate) fn tag_ext(tag: u64, len: usize) -> [u8; TAG_EXT] {
    let mut b = [0u8; TAG_EXT];
    b[..8].copy_from_slice(&tag.to_le_bytes());
    b[8..].copy_from_slice(&(len as u64).to_le_bytes());
    b
}

/// The (tag, message length) of a tag extension at the start of
/// `payload`, or `None` when the payload is shorter than one.
pub(crate) fn read_tag_ext(payload: &[u8]) -> Option<(u64, u64)> {
    let tag = u64::from_le_bytes(payload.get(..8)?.try_into().ok()?);
    let len = u64::from_le_bytes(payload.get(8..TAG_EXT)?.try_into().ok()?);
    Some((tag, len))
}

/// Test-only tampering (`kfi_ibverbs_test_tamper`): flags set and
/// cleared, a replacement magic (0: none), and how many data frames
/// still get it.
static TAMPER_SET: AtomicU32 = AtomicU32::new(0);
static TAMPER_CLEAR: AtomicU32 = AtomicU32::new(0);
static TAMPER_MAGIC: AtomicU32 = AtomicU32::new(0);
static TAMPER_FRAMES: AtomicU32 = AtomicU32::new(0);

/// Test-only path (exported for `kfi_test_ibverbs`, which plays a hostile
/// peer with it): the next `frames` data frames any endpoint of this
/// provider sends get the header flags `set` added and `clear` removed,
/// and the magic `magic` when it is not 0. `frames == 0` stops it.
/// `-EPERM` without the `test_hooks` parameter.
#[no_mangle]
pub(crate) extern "C" fn kfi_ibverbs_test_tamper(
    set: u32,
    clear: u32,
    magic: u32,
    frames: u32,
) -> c_int {
    if let Err(e) = crate::test_hooks() {
        return e.to_errno();
    }
    TAMPER_FRAMES.store(0, Ordering::SeqCst);
    TAMPER_SET.store(set, Ordering::SeqCst);
    TAMPER_CLEAR.store(clear, Ordering::SeqCst);
    TAMPER_MAGIC.store(magic, Ordering::SeqCst);
    TAMPER_FRAMES.store(frames, Ordering::SeqCst);
    0
}

/// Test-only: the key the next data frame's send asks the peer to
/// invalidate, with bit 32 set; 0: none.
static TAMPER_INVALIDATE: AtomicU64 = AtomicU64::new(0);

/// Test-only path (exported for `kfi_test_ibverbs`): with `arm`, the next
/// data frame any endpoint of this provider sends is a send with
/// invalidate naming `key` (`IB_WR_SEND_WITH_INV`), as a hostile peer's
/// may be; without, none is. `-EPERM` without the `test_hooks` parameter.
#[no_mangle]
pub(crate) extern "C" fn kfi_ibverbs_test_send_invalidate(key: u32, arm: u32) -> c_int {
    if let Err(e) = crate::test_hooks() {
        return e.to_errno();
    }
    let t = if arm != 0 {
        (1 << 32) | u64::from(key)
    } else {
        0
    };
    TAMPER_INVALIDATE.store(t, Ordering::SeqCst);
    0
}

/// The key the next data frame's send asks the peer to invalidate: none,
/// unless a test tampers with it.
pub(crate) fn tampered_invalidate() -> Option<u32> {
    // A load first: the swap's exclusive access is not for every frame.
    if TAMPER_INVALIDATE.load(Ordering::Relaxed) == 0 {
        return None;
    }
    let t = TAMPER_INVALIDATE.swap(0, Ordering::SeqCst);
    (t != 0).then_some(t as u32)
}

/// The flags and magic of the next data frame: `flags` and [`MAGIC`],
/// unless a test tampers with them.
pub(crate) fn tampered(flags: u8) -> (u8, u8) {
    let take = TAMPER_FRAMES.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
    if take.is_err() {
        return (flags, MAGIC);
    }
    let set = TAMPER_SET.load(Ordering::SeqCst) as u8;
    let clear = TAMPER_CLEAR.load(Ordering::SeqCst) as u8;
    let magic = match TAMPER_MAGIC.load(Ordering::SeqCst) as u8 {
        0 => MAGIC,
        m => m,
    };
    ((flags | set) & !clear, magic)
}

/// A frame's header, as read from a slot.
#[derive(Clone, Copy)]
pub(crate) struct Header {
    pub(crate) flags: u8,
    pub(crate) credits: usize,
    pub(crate) len: usize,
    pub(crate) data: u64,
}

/// Up to [`IOV_MAX`] non-empty buffers as (kernel address, length).
#[derive(Clone, Copy, Default)]
pub(crate) struct Buffers {
    segs: [(usize, usize); IOV_MAX],
    n: usize,
    /// Their total length.
    pub(crate) total: usize,
}

impl Buffers {
    /// The buffers of `msg`.
    ///
    /// # Safety
    ///
    /// `msg` was passed by kfabric.ko to a data-path method (checked list).
    pub(crate) unsafe fn of(msg: &ksys::kfi_msg) -> Result<Self> {
        let mut b = Self::default();
        // SAFETY: The caller's contract.
        for s in unsafe { Segments::of_msg(msg) }? {
            let s = s?;
            if s.is_empty() {
                continue;
            }
            let slot = b.segs.get_mut(b.n).ok_or(EINVAL)?;
            *slot = (s.kernel_addr(), s.len());
            if slot.0 == 0 {
                return Err(EFAULT);
            }
            b.n += 1;
            b.total = b.total.checked_add(s.len()).ok_or(EMSGSIZE)?;
        }
        Ok(b)
    }

    /// The buffers of an atomic's operand list: `size`-byte elements.
    pub(crate) fn of_iocs(iocs: &[ksys::kfi_ioc], size: usize) -> Result<Self> {
        let mut b = Self::default();
        for v in iocs {
            let len = v.count.checked_mul(size).ok_or(EINVAL)?;
            if len == 0 {
                continue;
            }
            let slot = b.segs.get_mut(b.n).ok_or(EINVAL)?;
            *slot = (v.addr as usize, len);
            if slot.0 == 0 {
                return Err(EFAULT);
            }
            b.n += 1;
            b.total = b.total.checked_add(len).ok_or(EMSGSIZE)?;
        }
        Ok(b)
    }

    /// The address of the first buffer (0 if none).
    pub(crate) fn first(&self) -> usize {
        self.segs[0].0
    }

    /// Calls `f(address, length)` for the bytes `at..at + len` of the
    /// buffers (clipped to their total); returns the bytes visited.
    fn walk(&self, at: usize, len: usize, mut f: impl FnMut(usize, usize, usize)) -> usize {
        let (mut skip, mut done) = (at, 0usize);
        for &(addr, seg) in &self.segs[..self.n] {
            if done >= len {
                break;
            }
            if skip >= seg {
                skip -= seg;
                continue;
            }
            let n = (seg - skip).min(len - done);
            f(addr + skip, n, done);
            done += n;
            skip = 0;
        }
        done
    }

    /// The kernel address of byte `at` of the buffers and the bytes of
    /// its buffer from there on.
    pub(crate) fn piece_at(&self, at: usize) -> Option<(usize, usize)> {
        let mut skip = at;
        for &(addr, seg) in &self.segs[..self.n] {
            if skip < seg {
                return Some((addr.checked_add(skip)?, seg - skip));
            }
            skip -= seg;
        }
        None
    }

    /// Copies bytes `at..at + len` of the buffers to `dst`; returns how
    /// many.
    ///
    /// # Safety
    ///
    /// The buffers are valid for reads (the ULP's contract until the
    /// operation completes); `dst` is valid for `len` bytes of writes and
    /// overlaps none of them.
    pub(crate) unsafe fn gather(&self, at: usize, len: usize, dst: *mut u8) -> usize {
        self.walk(at, len, |addr, n, done| {
            // SAFETY: The caller's contract; `done + n <= len`.
            unsafe { core::ptr::copy_nonoverlapping(addr as *const u8, dst.add(done), n) }
        })
    }

    /// Copies `len` bytes from `src` into the buffers at `at`; returns
    /// what fit.
    ///
    /// # Safety
    ///
    /// The buffers are valid for writes (the ULP's contract until the
    /// receive completes); `src` is valid for `len` bytes and overlaps
    /// none of them.
    pub(crate) unsafe fn scatter(&self, at: usize, src: *const u8, len: usize) -> usize {
        self.walk(at, len, |addr, n, done| {
            // SAFETY: The caller's contract; `done + n <= len`.
            unsafe { core::ptr::copy_nonoverlapping(src.add(done), addr as *mut u8, n) }
        })
    }
}

/// Writes a header at `dst`.
///
/// # Safety
///
/// `dst` is valid for [`HDR`] bytes of writes.
pub(crate) unsafe fn write_header(dst: *mut u8, h: &Header) {
    // SAFETY: The caller's contract, passed on.
    unsafe { write_header_magic(dst, h, MAGIC) }
}

/// [`write_header`] with magic `magic` (a tampered data frame).
///
/// # Safety
///
/// `dst` is valid for [`HDR`] bytes of writes.
pub(crate) unsafe fn write_header_magic(dst: *mut u8, h: &Header, magic: u8) {
    let mut b = [0u8; HDR];
    b[0] = magic;
    b[1] = h.flags;
    b[2..4].copy_from_slice(&(h.credits.min(u16::MAX.into()) as u16).to_le_bytes());
    b[4..8].copy_from_slice(&(h.len.min(FRAME_MAX) as u32).to_le_bytes());
    b[8..16].copy_from_slice(&h.data.to_le_bytes());
    // SAFETY: The caller's contract.
    unsafe { core::ptr::copy_nonoverlapping(b.as_ptr(), dst, HDR) };
}

/// Reads the header of a received slot `b` of which `got` bytes arrived,
/// or `None` when the peer sent something else.
pub(crate) fn read_header(b: &[u8], got: usize) -> Option<Header> {
    let h = b.get(..HDR)?;
    if h[0] != MAGIC {
        return None;
    }
    let len = u32::from_le_bytes([h[4], h[5], h[6], h[7]]) as usize;
    // The length must be what arrived, and fit the slot.
    if got != HDR.checked_add(len)? || got > b.len() {
        return None;
    }
    Some(Header {
        flags: h[1],
        credits: u16::from_le_bytes([h[2], h[3]]).into(),
        len,
        data: u64::from_le_bytes(h[8..16].try_into().ok()?),
    })
}
