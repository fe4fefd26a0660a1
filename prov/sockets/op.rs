// SPDX-License-Identifier: GPL-2.0

//! The operations of a kfi_sockets connection, as plain values: what the
//! ULP posts for the transmitter ([`TxOp`], built from its `kfi_msg*`
//! here), a posted receive ([`RxOp`]), one of our operations waiting for
//! its response ([`Pending`]), a message held for a receive not posted
//! yet ([`Unexpected`]) and a response the receiver queues for the
//! transmitter ([`Resp`]). Nothing here locks, sleeps or knows about the
//! connection (`conn.rs`) that queues them.

use core::mem::MaybeUninit;
use kernel::prelude::*;

use crate::{
    atomics::{self, ATOMIC_MAX},
    buflist::List,
    kfi::{
        kfi_sys as sys,
        provider::AtomicKind,
        toolkit::completion::{CqEntry, Reports},
    },
    ksock::Deadline,
    mr::Access,
    splice::Mark,
    wire::{Op, RmaDesc, RMA_IOV_MAX},
};

/// Largest inject (copied at post time).
pub(crate) const INJECT_MAX: usize = 256;

/// Flags that ask for the target's acknowledgement.
const ACKED: u64 =
    sys::KFI_TRANSMIT_COMPLETE | sys::KFI_DELIVERY_COMPLETE | sys::KFI_COMMIT_COMPLETE;

/// What a queued operation is.
#[derive(Clone, Copy, PartialEq, Eq, Default, Debug)]
pub(crate) enum Kind {
    #[default]
    Msg,
    Tagged,
    Write,
    Read,
    Atomic,
}

/// An operation queued for the transmitter.
///
/// Every post makes a default one, so what only some kinds use is in
/// parts that a default leaves unwritten (`None`, uninitialized bytes):
/// under TCG clearing memory costs about a nanosecond a byte, as much as
/// the rest of building a small send.
pub(crate) struct TxOp {
    pub(crate) kind: Kind,
    /// Payload (sends, writes, atomic operands) or destination (reads).
    pub(crate) bufs: List,
    /// The payload, copied at post time (`KFI_INJECT`).
    pub(crate) inject: Option<Inject>,
    pub(crate) rma: [RmaDesc; RMA_IOV_MAX],
    pub(crate) nrma: usize,
    pub(crate) atomic: Option<AtomicParts>,
    pub(crate) context: usize,
    pub(crate) flags: u64,
    pub(crate) data: u64,
    pub(crate) tag: u64,
    /// The payload goes by page reference (`splice.rs`), decided when the
    /// operation is posted ([`Self::by_ref_allowed`]).
    pub(crate) by_ref: bool,
}

impl Default for TxOp {
    fn default() -> Self {
        Self {
            kind: Kind::Msg,
            bufs: List::default(),
            inject: None,
            rma: [RmaDesc::default(); RMA_IOV_MAX],
            nrma: 0,
            atomic: None,
            context: 0,
            flags: 0,
            data: 0,
            tag: 0,
            by_ref: false,
        }
    }
}

/// What only an atomic has.
pub(crate) struct AtomicParts {
    /// The compare operands.
    pub(crate) cmp: List,
    /// Where the old values go (until the transmitter hands it to the
    /// operation's pending entry).
    pub(crate) res: List,
    /// The old values come back.
    pub(crate) fetch: bool,
    pub(crate) datatype: u32,
    pub(crate) op: u32,
}

/// The bytes of an inject, copied from the ULP's buffers at post time.
///
/// # Invariants
///
/// `len <= INJECT_MAX`, and the first `len` bytes of `data` are
/// initialized.
pub(crate) struct Inject {
    len: usize,
    // Never cleared: only the bytes copied in are read.
    data: MaybeUninit<[u8; INJECT_MAX]>,
}

impl Inject {
    /// Copies the bytes of `bufs` into `slot` (what it held is dropped);
    /// `EINVAL` if there are more than [`INJECT_MAX`], and then `slot` is
    /// `None`. In place: an `Inject` is never made elsewhere and moved.
    ///
    /// # Safety
    ///
    /// `bufs` are buffers the caller may read, valid for this call.
    unsafe fn copy_into(slot: &mut Option<Inject>, bufs: &List) -> Result {
        // INVARIANT: nothing written, nothing initialized.
        let inj = slot.insert(Inject {
            len: 0,
            data: MaybeUninit::uninit(),
        });
        let to = inj.data.as_mut_ptr().cast::<u8>();
        for b in bufs {
            let Some(end) = inj.len.checked_add(b.len).filter(|&e| e <= INJECT_MAX) else {
                *slot = None;
                return Err(EINVAL);
            };
            if b.len > 0 {
                // SAFETY: `b` is readable for `b.len` bytes (the caller's
                // promise) and is not `data`, a field of ours; bytes
                // `inj.len..end` of `data` exist (`end <= INJECT_MAX`).
                unsafe {
                    core::ptr::copy_nonoverlapping(b.base as *const u8, to.add(inj.len), b.len)
                };
            }
            // INVARIANT: the bytes up to `end` are written now.
            inj.len = end;
        }
        Ok(())
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: The first `len` bytes are initialized, within `data`
        // (type invariant).
        unsafe { core::slice::from_raw_parts(self.data.as_ptr().cast::<u8>(), self.len) }
    }
}

impl TxOp {
    /// Whether the operation completes only on the target's response: for
    /// messages when a completion level beyond inject was asked for; for
    /// reads and atomics always (the data comes back); for writes unless
    /// only `KFI_INJECT_COMPLETE` was asked for (so that a refused access
    /// reaches the initiator as an error completion). A write that asked
    /// for inject completion only completes once the socket has taken its
    /// bytes, as a message does, and the target does not answer it
    /// (`flags::UNANSWERED`): a refused one ends the connection.
    pub(crate) fn wants_reply(&self) -> bool {
        match self.kind {
            Kind::Msg | Kind::Tagged => self.flags & ACKED != 0,
            Kind::Write => self.flags & ACKED != 0 || self.flags & sys::KFI_INJECT_COMPLETE == 0,
            Kind::Read | Kind::Atomic => true,
        }
    }

    /// Makes a write one that is answered whatever level it asked for: an
    /// RDM endpoint's (a refused unanswered write ends its connection, and
    /// an RDM connection has no event queue to say why).
    pub(crate) fn answer_always(&mut self) {
        if self.kind == Kind::Write {
            self.flags &= !sys::KFI_INJECT_COMPLETE;
        }
    }

    /// The flags of the operation's completion.
    /// The completion of the operation (its context, flags and whether
    /// the ULP asked for it), nothing transferred yet.
    pub(crate) fn entry(&self) -> CqEntry {
        CqEntry {
            asked: self.flags & sys::KFI_COMPLETION != 0,
            ..CqEntry::of(self.context, self.completion_flags())
        }
    }

    /// Fenced (`KFI_FENCE`): it waits until every operation posted before
    /// it on its connection has completed.
    pub(crate) fn fenced(&self) -> bool {
        self.flags & sys::KFI_FENCE != 0
    }

    pub(crate) fn completion_flags(&self) -> u64 {
        match self.kind {
            Kind::Msg => sys::KFI_SEND | sys::KFI_MSG,
            Kind::Tagged => sys::KFI_SEND | sys::KFI_TAGGED,
            Kind::Write => sys::KFI_RMA | sys::KFI_WRITE,
            Kind::Read => sys::KFI_RMA | sys::KFI_READ,
            Kind::Atomic if self.atomic.as_ref().is_some_and(|a| a.fetch) => {
                sys::KFI_ATOMIC | sys::KFI_READ
            }
            Kind::Atomic => sys::KFI_ATOMIC | sys::KFI_WRITE,
        }
    }
}

/// A posted receive (the tag matcher keeps a tagged one's tag).
#[derive(Default)]
pub(crate) struct RxOp {
    pub(crate) bufs: List,
    pub(crate) context: usize,
    /// Posted with `KFI_COMPLETION` (see [`CqEntry::asked`]).
    pub(crate) asked: bool,
}

impl RxOp {
    /// The completion of the receive, with `flags` (`KFI_RECV | kind`).
    pub(crate) fn entry(&self, flags: u64) -> CqEntry {
        CqEntry {
            asked: self.asked,
            ..CqEntry::of(self.context, flags)
        }
    }
}

/// An operation that waits for its response, entered before its frame is
/// sent.
pub(crate) struct Pending {
    pub(crate) id: u64,
    pub(crate) kind: Kind,
    pub(crate) context: usize,
    /// The completion's flags and length, and whether the ULP asked for
    /// it.
    pub(crate) flags: u64,
    pub(crate) len: usize,
    pub(crate) asked: bool,
    /// Where a read's data or an atomic's old values go.
    pub(crate) bufs: List,
    /// Bytes the response must carry.
    pub(crate) expect: usize,
    /// Atomics: the element size.
    pub(crate) elem: u8,
    /// Inject: no completion unless it fails.
    pub(crate) silent: bool,
    /// The transmitter has sent the whole frame: its buffers are free.
    pub(crate) sent: bool,
    /// When the response is due (`response_timeout_ms` after `sent`;
    /// `None` before, or without a bound).
    pub(crate) due: Option<Deadline>,
    /// The response's outcome, when it came before `sent`: the
    /// transmitter completes the operation once the frame is out.
    pub(crate) early: Option<Result>,
    /// A response came before `sent` and its handler is filling the
    /// buffers it took ([`Self::take_answer`]): a flush leaves the
    /// completion to that handler, which reports it once it is done with
    /// them (`rx/resp.rs`).
    pub(crate) answering: bool,
    /// The frame's payload goes by page reference (`splice.rs`), and it
    /// ends where this marks: a response counts only once TCP has
    /// acknowledged that far. Set when the operation is entered, right
    /// before its frame is sent.
    pub(crate) by_ref: Option<Mark>,
}

impl Pending {
    /// The entry as a response handler needs it while the frame is still
    /// being sent: it takes over the buffers the response fills, which
    /// nothing else uses (the frame never carries them), and the entry
    /// keeps the rest for the transmitter.
    pub(crate) fn take_answer(&mut self) -> Pending {
        Pending {
            bufs: core::mem::take(&mut self.bufs),
            ..*self
        }
    }

    /// The operation's completion, nothing transferred reported.
    pub(crate) fn entry(&self) -> CqEntry {
        CqEntry {
            asked: self.asked,
            ..CqEntry::of(self.context, self.flags)
        }
    }
}

/// A message that arrived before its receive was posted (held, or kept
/// by the tag matcher with its tag). Up to `unexpected_bytes_max` of
/// payload: from pages (`KVVec`) rather than one high-order kmalloc. It
/// may be dropped in any context but hard interrupt (by a receive's
/// poster, who may hold a spinlock): the payload is freed with
/// `kvfree_atomic`, as `vfree` may sleep.
pub(crate) struct Unexpected {
    pub(crate) data: Option<u64>,
    pub(crate) payload: KVVec<u8>,
}

impl Drop for Unexpected {
    fn drop(&mut self) {
        let (ptr, _, cap) = core::mem::take(&mut self.payload).into_raw_parts();
        if cap != 0 {
            // `kvfree_atomic` frees kmalloc'd or vmalloc'd memory in any
            // context but NMI.
            // SAFETY: A `KVVec`'s allocation (capacity non-zero), now ours.
            unsafe { kernel::bindings::kvfree_atomic(ptr.cast()) };
        }
    }
}

/// Old values of an atomic kept inside its response: one element of any
/// datatype (the largest, a long double complex, has 32 bytes).
const OLD_INLINE: usize = 32;

/// An atomic's old values, as its response carries them (wire order):
/// inside the response up to [`OLD_INLINE`] bytes, so that queueing an
/// answer copies a few words; a longer array of elements gets an
/// allocation of its own, made by the receive work (process context).
pub(crate) enum OldValues {
    Inline { bytes: [u8; OLD_INLINE], len: usize },
    Heap(KVec<u8>),
}

impl OldValues {
    /// None (a refused atomic, or one that does not fetch).
    pub(crate) fn none() -> Self {
        Self::Inline {
            bytes: [0; OLD_INLINE],
            len: 0,
        }
    }

    /// Room for `len` bytes of old values, zeroed. Process context.
    pub(crate) fn zeroed(len: usize) -> Result<Self> {
        if len <= OLD_INLINE {
            return Ok(Self::Inline {
                bytes: [0; OLD_INLINE],
                len,
            });
        }
        let mut v = KVec::with_capacity(len, GFP_KERNEL)?;
        v.resize(len, 0, GFP_KERNEL)?;
        Ok(Self::Heap(v))
    }

    /// The values, to fill in.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        match self {
            Self::Inline { bytes, len } => bytes.get_mut(..*len).unwrap_or(&mut []),
            Self::Heap(v) => v,
        }
    }

    /// The values.
    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            Self::Inline { bytes, len } => bytes.get(..*len).unwrap_or(&[]),
            Self::Heap(v) => v,
        }
    }
}

/// A response for the transmitter to send, per kind (the receiver queues
/// them in `State::resp`): the common one, an `Ack`, is a few words to
/// queue and to take.
pub(crate) enum Resp {
    /// An `Ack` of a message or write.
    Ack { id: u64, status: u64 },
    /// A `ReadResp`, with the checked ranges of registered regions its
    /// data comes from (none if the read was refused).
    Read {
        id: u64,
        status: u64,
        reads: KVec<Access>,
    },
    /// An `AtomicResp`, with the old values for a fetch (else none).
    Atomic {
        id: u64,
        status: u64,
        old: OldValues,
    },
}

/// A result as a response's status word: 0, or a positive errno.
fn status_word<T>(r: &Result<T>) -> u64 {
    match r {
        Ok(_) => 0,
        Err(e) => (-e.to_errno()) as u64,
    }
}

impl Resp {
    /// The `Ack` of the peer's operation `id`, with outcome `r`.
    pub(crate) fn ack(id: u64, r: Result) -> Self {
        Self::Ack {
            id,
            status: status_word(&r),
        }
    }

    /// The `ReadResp` of the peer's read `id`: its data from `r`'s ranges,
    /// or its error.
    pub(crate) fn read(id: u64, r: Result<KVec<Access>>) -> Self {
        let status = status_word(&r);
        Self::Read {
            id,
            status,
            reads: r.unwrap_or_default(),
        }
    }

    /// The `AtomicResp` of the peer's atomic `id`: its old values from
    /// `r`, or its error.
    pub(crate) fn atomic(id: u64, r: Result<OldValues>) -> Self {
        let status = status_word(&r);
        Self::Atomic {
            id,
            status,
            old: r.unwrap_or_else(|_| OldValues::none()),
        }
    }

    /// The frame's opcode.
    pub(crate) fn op(&self) -> Op {
        match self {
            Self::Ack { .. } => Op::Ack,
            Self::Read { .. } => Op::ReadResp,
            Self::Atomic { .. } => Op::AtomicResp,
        }
    }

    /// The peer's operation it answers, and its status word.
    pub(crate) fn id_status(&self) -> (u64, u64) {
        match *self {
            Self::Ack { id, status }
            | Self::Read { id, status, .. }
            | Self::Atomic { id, status, .. } => (id, status),
        }
    }
}

/// What a transmitter sends: a response, or one of our operations with
/// its pending id (0: it waits for no response) and where it completes.
// One lives on the transmitter's stack or in its connection at a time:
// boxing would allocate per operation under the connection's lock.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Job {
    /// A response; true if another was queued behind it when it was taken
    /// (it then goes with `MSG_MORE`, see `frame::send_hdr_from`).
    Resp(Resp, bool),
    Op(TxOp, u64, Reports),
}

impl TxOp {
    /// Bytes of the ULP's the operation sends (or, a read, receives).
    pub(crate) fn sent_len(&self) -> usize {
        match &self.inject {
            Some(i) => i.len(),
            None => self.bufs.total(),
        }
    }

    /// Whether the payload may go by page reference (`splice.rs`): the
    /// ULP's own buffers (not an inject's copy) of a write or a message
    /// that completes only on the peer's response.
    pub(crate) fn by_ref_allowed(&self) -> bool {
        matches!(self.kind, Kind::Write | Kind::Msg | Kind::Tagged)
            && self.inject.is_none()
            && self.wants_reply()
    }

    /// Bytes of payload the operation's frame carries (about: the few
    /// bytes of an atomic's operands do not count).
    pub(crate) fn payload_len(&self) -> u64 {
        let n = match self.kind {
            Kind::Read | Kind::Atomic => 0,
            _ => self.sent_len(),
        };
        n as u64
    }
}

impl Resp {
    /// Bytes of payload the response's frame carries.
    pub(crate) fn payload_len(&self) -> u64 {
        match self {
            Self::Ack { .. } => 0,
            Self::Read { reads, .. } => reads.iter().map(|a| a.len() as u64).sum(),
            Self::Atomic { old, .. } => old.as_slice().len() as u64,
        }
    }
}

/// A frame that a transmitter that may not wait began and the socket did
/// not take whole: the transmit work sends the rest.
pub(crate) struct Begun {
    pub(crate) job: Job,
    /// Bytes of the frame sent.
    pub(crate) at: usize,
    /// When the frame began (its deadline runs from there).
    pub(crate) start: Deadline,
}

/// Remote descriptors of an RMA operation, with their total length.
fn rma_descs(r: &sys::kfi_msg_rma, out: &mut [RmaDesc; RMA_IOV_MAX]) -> Result<(usize, u64)> {
    if r.rma_iov_count > RMA_IOV_MAX {
        return Err(EINVAL);
    }
    // SAFETY: kfabric.ko checked `rma_iov` non-NULL with `rma_iov_count`
    // entries.
    let list = unsafe { core::slice::from_raw_parts(r.rma_iov, r.rma_iov_count) };
    let mut total = 0u64;
    for (o, d) in out.iter_mut().zip(list) {
        *o = RmaDesc {
            addr: d.addr,
            len: d.len as u64,
            key: d.key,
        };
        total = total.checked_add(d.len as u64).ok_or(EINVAL)?;
    }
    Ok((list.len(), total))
}

/// Completes building `op`: copies an inject's payload.
fn built(op: &mut TxOp) -> Result {
    if op.flags & sys::KFI_INJECT != 0 {
        // SAFETY: The ULP's buffers, valid for this call (the post).
        unsafe { Inject::copy_into(&mut op.inject, &op.bufs) }?;
    }
    Ok(())
}

// The builders below fill an operation the caller made (`TxOp::default`)
// where it lies: a `TxOp` is several hundred bytes, and returning one
// copies it (a cost per byte that shows on a small message's path).

/// Builds in `op` (a default one) the operation of `kfi_sendmsg`.
pub(crate) fn send_op(m: &sys::kfi_msg, fl: u64, op: &mut TxOp) -> Result {
    op.context = m.context as usize;
    op.flags = fl;
    op.data = m.data;
    op.bufs = List::of_msg(m)?;
    built(op)
}

/// Builds in `op` (a default one) the operation of `kfi_tsendmsg`.
pub(crate) fn tsend_op(t: &sys::kfi_msg_tagged, fl: u64, op: &mut TxOp) -> Result {
    op.kind = Kind::Tagged;
    op.tag = t.tag;
    send_op(&t.msg, fl, op)
}

/// Builds in `op` (a default one) the operation of `kfi_writemsg` or
/// `kfi_readmsg`. Local and remote buffers must have the same total
/// length.
pub(crate) fn rma_op(kind: Kind, r: &sys::kfi_msg_rma, fl: u64, op: &mut TxOp) -> Result {
    if kind == Kind::Read && fl & sys::KFI_INJECT != 0 {
        return Err(EINVAL);
    }
    op.kind = kind;
    op.context = r.msg.context as usize;
    op.flags = fl;
    op.data = r.msg.data;
    op.bufs = List::of_msg(&r.msg)?;
    let (nrma, remote) = rma_descs(r, &mut op.rma)?;
    op.nrma = nrma;
    if op.bufs.total() as u64 != remote {
        return Err(EINVAL);
    }
    built(op)
}

/// The operation of `kfi_atomicmsg` and its fetch and compare forms: one
/// remote array of at most `ATOMIC_MAX` bytes.
pub(crate) fn atomic_op(
    m: &sys::kfi_msg_atomic,
    compare: &[sys::kfi_ioc],
    result: &[sys::kfi_ioc],
    fl: u64,
) -> Result<TxOp> {
    let size = atomics::elem_size(m.datatype).ok_or(EOPNOTSUPP)?;
    if !atomics::supported(m.op)
        || atomics::has_compare(m.op) == compare.is_empty()
        || m.rma_iov_count != 1
        || fl & sys::KFI_INJECT != 0
    {
        return Err(EINVAL);
    }
    // SAFETY: kfabric.ko checked `rma_iov` non-NULL with one entry.
    let target = unsafe { *m.rma_iov };
    let len = target.count.checked_mul(size).ok_or(EINVAL)?;
    if len == 0 || len > ATOMIC_MAX {
        return Err(EINVAL);
    }
    // SAFETY: kfabric.ko checked `msg_iov` non-NULL with `iov_count`
    // entries.
    let src = unsafe { core::slice::from_raw_parts(m.msg_iov, m.iov_count) };
    let parts = AtomicParts {
        cmp: List::of_iocs(compare, size)?,
        res: List::of_iocs(result, size)?,
        fetch: !result.is_empty(),
        datatype: m.datatype,
        op: m.op,
    };
    let sizes_ok = (parts.cmp.is_empty() || parts.cmp.total() == len)
        && (parts.res.is_empty() || parts.res.total() == len);
    let mut op = TxOp {
        kind: Kind::Atomic,
        context: m.context as usize,
        flags: fl,
        data: m.data,
        nrma: 1,
        bufs: List::of_iocs(src, size)?,
        atomic: Some(parts),
        ..Default::default()
    };
    op.rma[0] = RmaDesc {
        addr: target.addr,
        len: len as u64,
        key: target.key,
    };
    if !sizes_ok || op.bufs.total() != len {
        return Err(EINVAL);
    }
    Ok(op)
}

/// `kfi_atomicvalid` and friends: how many elements one operation may
/// have.
pub(crate) fn atomic_valid(kind: AtomicKind, datatype: u32, op: u32) -> Result<usize> {
    let size = atomics::elem_size(datatype).ok_or(EOPNOTSUPP)?;
    let compare = matches!(kind, AtomicKind::Compare);
    if !atomics::supported(op) || atomics::has_compare(op) != compare {
        return Err(EOPNOTSUPP);
    }
    Ok(ATOMIC_MAX / size)
}
