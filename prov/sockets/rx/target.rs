// SPDX-License-Identifier: GPL-2.0

//! The receive work as the target of a peer's RMA and atomics (`Write`,
//! `ReadReq`, `Atomic`): every descriptor is checked against the domain's
//! registered memory before a byte is placed or read; a refused access is
//! answered with its errno and changes nothing. The answers go to the
//! transmitter (`Rx::respond`). Most writes never come here: the data
//! callback places those it can (`rx/soft/write.rs`).

use kernel::prelude::*;

use super::Rx;
use crate::{
    atomics::{self, ATOMIC_MAX},
    bufs,
    conn::{self, Shared},
    frame,
    kfi::{kfi_sys as sys, toolkit::completion::CqEntry},
    mr::Access,
    op::{OldValues, Resp},
    wire::{flags, Hdr, RmaDesc, PAYLOAD_MAX, RMA_IOV_MAX},
};

/// The rights a peer's atomic `op` needs on the target region, and
/// whether it writes it: a read needs `KFI_REMOTE_READ` and writes
/// nothing; the others need `KFI_REMOTE_WRITE`, and `KFI_REMOTE_READ` too
/// when they return the old values (`fetch`) or compare with them.
fn atomic_rights(op: u32, fetch: bool) -> (u64, bool) {
    if op == sys::KFI_ATOMIC_READ {
        (sys::KFI_REMOTE_READ, false)
    } else if fetch || atomics::has_compare(op) {
        (sys::KFI_REMOTE_READ | sys::KFI_REMOTE_WRITE, true)
    } else {
        (sys::KFI_REMOTE_WRITE, true)
    }
}

/// A peer's RMA write `h` is placed (and its regions let go): counted, and
/// reported if it carries remote CQ data. Any context but hard interrupt.
pub(super) fn written(sh: &Shared, h: &Hdr) -> Result {
    let to = sh.rxq.cq();
    match Rx::cq_data(h) {
        // The peer decides how many of these there are: one the CQ has
        // no room for ends the connection rather than let a flood
        // crowd out the endpoint's own completions for ever.
        Some(data) if to.cq.is_some() => to
            .try_report(&CqEntry {
                len: h.len as usize,
                data,
                // Remote CQ data is reported on a selective CQ too.
                asked: true,
                ..CqEntry::of(
                    0,
                    sys::KFI_RMA | sys::KFI_REMOTE_WRITE | sys::KFI_REMOTE_CQ_DATA,
                )
            })
            .map_err(|_| EPROTO),
        _ => {
            to.count_only(sys::KFI_RMA | sys::KFI_REMOTE_WRITE);
            Ok(())
        }
    }
}

/// The checked ranges of a peer's access, in the frame's order (held on
/// the stack: a write allocates nothing).
type Ranges = [Option<Access>; RMA_IOV_MAX];

impl Rx<'_> {
    /// Checks every descriptor of a peer's access; all or nothing.
    fn check(&mut self, h: &Hdr, need: u64) -> Result<(Result<Ranges>, u64)> {
        let descs = self.descs(h)?;
        let descs = descs.as_slice();
        let mut total = 0u64;
        for d in descs {
            total = total.checked_add(d.len).ok_or(EPROTO)?;
        }
        // A frame has at most `RMA_IOV_MAX` descriptors (`RmaDescs`).
        let mut acc: Ranges = [const { None }; RMA_IOV_MAX];
        for (slot, d) in acc.iter_mut().zip(descs) {
            match self.sh.mrs.access(d.key, d.addr, d.len, need, self.sock) {
                Ok(a) => *slot = Some(a),
                Err(e) => return Ok((Err(e), total)),
            }
        }
        Ok((Ok(acc), total))
    }

    /// A peer's RMA write: placed only if every descriptor checks out.
    /// Answered unless the initiator asked for no answer
    /// (`flags::UNANSWERED`): then a refused access ends the connection.
    pub(super) fn write(&mut self, h: &Hdr) -> Result {
        let (acc, total) = self.check(h, sys::KFI_REMOTE_WRITE)?;
        if total != h.len {
            return Err(EPROTO);
        }
        let answered = h.flags & flags::UNANSWERED == 0;
        let acc = match acc {
            Ok(acc) => acc,
            // Nobody to tell but the connection, which ends: nothing is
            // written.
            Err(e) if !answered => {
                conn::report_refused(self.sh, e);
                return Err(e);
            }
            Err(e) => {
                self.discard(h.len as usize)?;
                return self.respond(Resp::ack(h.id, Err(e)));
            }
        };
        let count = acc.iter().flatten().count();
        for (i, a) in acc.iter().flatten().enumerate() {
            // SAFETY: Checked ranges of registered regions, held by `a`.
            unsafe { self.place(a.bufs(), a.len(), i + 1 == count) }?;
        }
        if h.flags & flags::COMMIT_COMPLETE != 0 {
            for a in acc.iter().flatten() {
                a.commit();
            }
        }
        drop(acc);
        written(self.sh, h)?;
        if !answered {
            return Ok(());
        }
        self.respond(Resp::ack(h.id, Ok(())))
    }

    /// A peer's RMA read: the transmitter sends the checked ranges.
    pub(super) fn read_req(&mut self, h: &Hdr) -> Result {
        let (acc, total) = self.check(h, sys::KFI_REMOTE_READ)?;
        let reads = match acc {
            Ok(_) if total > PAYLOAD_MAX => Err(EMSGSIZE),
            Ok(acc) => {
                // The transmitter sends from them after we return.
                let mut reads = KVec::with_capacity(RMA_IOV_MAX, GFP_KERNEL)?;
                for a in acc.into_iter().flatten() {
                    reads.push(a, GFP_KERNEL)?;
                }
                Ok(reads)
            }
            Err(e) => Err(e),
        };
        self.respond(Resp::read(h.id, reads))
    }

    /// A peer's atomic: one descriptor, operands (and compare values) in
    /// the payload; applied under the domain's atomic lock.
    pub(super) fn atomic(&mut self, h: &Hdr) -> Result {
        let descs = self.descs(h)?;
        let descs = descs.as_slice();
        let d: RmaDesc = match descs.first() {
            Some(d) if descs.len() == 1 => *d,
            _ => return Err(EPROTO),
        };
        let datatype = h.tag as u32;
        let op = (h.tag >> 32) as u32;
        // Bounded before any arithmetic: these lengths come from the peer.
        if d.len > ATOMIC_MAX as u64 {
            return Err(EPROTO);
        }
        let len = d.len as usize;
        let want = if atomics::has_compare(op) {
            2 * len
        } else {
            len
        };
        if h.len != want as u64 {
            return Err(EPROTO);
        }
        let mut operands = [0u8; 2 * ATOMIC_MAX];
        frame::recv_exact(self.sock, &mut operands[..want])?;
        let (src, cmp) = operands[..want].split_at(len);
        let mut old = [0u8; ATOMIC_MAX];
        let fetch = h.flags & flags::FETCH != 0;
        let (need, writes) = atomic_rights(op, fetch);
        let outcome = (|| -> Result<OldValues> {
            let es = atomics::elem_size(datatype).ok_or(EOPNOTSUPP)?;
            let a = self.sh.mrs.access(d.key, d.addr, d.len, need, self.sock)?;
            // Old values only to whom may read them; their room is made
            // before the atomic changes anything.
            let mut back = OldValues::zeroed(if fetch { len } else { 0 })?;
            let mut target = [0u8; ATOMIC_MAX];
            self.sh.mrs.atomically(|| {
                // SAFETY: A checked range of a registered region, held by
                // `a`; atomics on it are serialized by the lock we hold.
                unsafe { bufs::gather(a.bufs(), &mut target[..len]) };
                let before = target;
                atomics::apply(datatype, op, &mut target[..len], src, cmp, &mut old[..len])?;
                // Only the elements that changed are written back: a
                // compare that fails (or a minimum that keeps the target)
                // writes nothing, and an element an RMA write changed
                // meanwhile keeps it unless this atomic changed that
                // element too (RMA writes do not take the atomic lock).
                if writes {
                    let pairs = target[..len].chunks(es).zip(before[..len].chunks(es));
                    for (i, (new, was)) in pairs.enumerate() {
                        // Within the range: `i * es` is below its `len`.
                        let at = i.saturating_mul(es);
                        if new != was {
                            // SAFETY: As for `gather`, whose slice has ended.
                            unsafe { bufs::scatter_at(a.bufs(), at, new) };
                        }
                    }
                }
                Ok::<(), Error>(())
            })?;
            if writes && h.flags & flags::COMMIT_COMPLETE != 0 {
                a.commit();
            }
            let to = back.as_mut_slice();
            to.copy_from_slice(old.get(..to.len()).ok_or(EINVAL)?);
            Ok(back)
        })();
        if outcome.is_ok() {
            // Done with our region: counted as a write if it wrote.
            self.sh.rxq.cq().count_only(if writes {
                sys::KFI_ATOMIC | sys::KFI_REMOTE_WRITE
            } else {
                sys::KFI_ATOMIC | sys::KFI_REMOTE_READ
            });
        }
        self.respond(Resp::atomic(h.id, outcome))
    }
}
