// SPDX-License-Identifier: GPL-2.0

//! Completions a provider reports on the completion queue and the
//! counters bound to an endpoint ([`Reports`]): successes, failures and
//! receives that did not fit.
//!
//! Every function here may be called in any context but hard interrupt
//! and never sleeps. A full CQ loses the completion and reports an
//! `-EOVERFLOW` error entry next (kfabric.ko's util CQ), so the ULP learns
//! of it; the `report*` methods return that `ENOSPC` for a provider that
//! must act on it (e.g. end a connection a peer floods), the free
//! functions, for operations the ULP posted, ignore it.

use kernel::prelude::*;

use super::super::{
    kfi_sys as sys,
    provider::{Bound, CntrRef, CqRef},
};

/// The fields of a completion entry a provider fills for one operation
/// (the util CQ keeps what its format holds).
#[derive(Clone, Copy, Default)]
pub(crate) struct CqEntry {
    /// The operation's context, as the ULP posted it (`op_context`).
    pub(crate) context: usize,
    /// `KFI_SEND | KFI_MSG`, `KFI_RECV | KFI_TAGGED`, `KFI_RMA |
    /// KFI_READ`, ..., with `KFI_REMOTE_CQ_DATA` when `data` is the peer's.
    pub(crate) flags: u64,
    /// Bytes transferred (placed, for a receive).
    pub(crate) len: usize,
    /// A receive's first buffer (0 when not reported).
    pub(crate) buf: usize,
    /// Remote CQ data.
    pub(crate) data: u64,
    /// A tagged receive's tag.
    pub(crate) tag: u64,
    /// The ULP asked for this completion (`KFI_COMPLETION` among the
    /// operation's flags): a CQ bound with `KFI_SELECTIVE_COMPLETION`
    /// reports a success only then. Also set for what the ULP did not post
    /// (remote CQ data), which a selective CQ reports as well.
    pub(crate) asked: bool,
}

impl CqEntry {
    /// The completion of operation `context` with `flags`, nothing else
    /// reported.
    pub(crate) fn of(context: usize, flags: u64) -> Self {
        Self {
            context,
            flags,
            ..Default::default()
        }
    }

    /// The completion of a receive the ULP posted with `op_flags`:
    /// `KFI_RECV | kind` (`KFI_MSG`, `KFI_TAGGED`), its first buffer
    /// `buf`, asked for if `op_flags` has `KFI_COMPLETION`.
    pub(crate) fn posted_recv(msg: &sys::kfi_msg, kind: u64, buf: usize, op_flags: u64) -> Self {
        Self {
            context: msg.context as usize,
            flags: sys::KFI_RECV | kind,
            buf,
            asked: op_flags & sys::KFI_COMPLETION != 0,
            ..Default::default()
        }
    }

    fn entry(&self) -> sys::kfi_cq_tagged_entry {
        sys::kfi_cq_tagged_entry {
            op_context: self.context as *mut c_void,
            flags: self.flags,
            len: self.len,
            buf: self.buf as *mut c_void,
            data: self.data,
            tag: self.tag,
        }
    }

    /// The error entry: the same fields, with the error and `olen`.
    fn err_entry(&self, err: Error, olen: usize) -> sys::kfi_cq_err_entry {
        let t = self.entry();
        let mut e = sys::kfi_cq_err_entry {
            olen,
            err: -err.to_errno(),
            ..Default::default()
        };
        (e.op_context, e.flags, e.len, e.buf) = (t.op_context, t.flags, t.len, t.buf);
        (e.data, e.tag) = (t.data, t.tag);
        e
    }
}

/// What a counter bound with [`Reports::bind_cntr`] counts: the flag of
/// the completions it counts, in `kfi_ep_bind`'s terms.
const COUNTED: [u64; 6] = [
    sys::KFI_SEND,
    sys::KFI_RECV,
    sys::KFI_READ,
    sys::KFI_WRITE,
    sys::KFI_REMOTE_READ,
    sys::KFI_REMOTE_WRITE,
];

/// Where one side of an endpoint (its transmit or its receive half)
/// reports its operations: the CQ bound for that side, whether it was
/// bound with `KFI_SELECTIVE_COMPLETION`, and the counters bound for the
/// kinds of operation the side completes.
///
/// A completion is counted on the counter of its kind, success or error,
/// whether or not the CQ reports it; a counter bound for none of a
/// completion's kinds is untouched. Kinds, from the completion's flags:
/// `KFI_RECV` receives; `KFI_REMOTE_READ`/`KFI_REMOTE_WRITE` a peer's
/// access to our regions; otherwise `KFI_SEND` messages, `KFI_READ` RMA
/// reads and fetching atomics, `KFI_WRITE` RMA writes and other atomics.
#[derive(Clone, Copy, Default)]
pub(crate) struct Reports {
    /// The bound CQ, if any.
    pub(crate) cq: Option<CqRef>,
    /// Successes are reported only for operations that asked.
    pub(crate) selective: bool,
    /// Counters, by the index of their kind in `COUNTED`.
    cntrs: [Option<CntrRef>; COUNTED.len()],
}

impl From<Option<CqRef>> for Reports {
    fn from(cq: Option<CqRef>) -> Self {
        Self {
            cq,
            ..Default::default()
        }
    }
}

impl Reports {
    /// Binds `cq` with the bind `flags` (only `KFI_SELECTIVE_COMPLETION`
    /// matters here).
    pub(crate) fn bind_cq(&mut self, cq: CqRef, flags: u64) {
        self.cq = Some(cq);
        self.selective = flags & sys::KFI_SELECTIVE_COMPLETION != 0;
    }

    /// Binds `cntr` for the kinds in `flags` (`KFI_SEND`, `KFI_RECV`,
    /// `KFI_READ`, `KFI_WRITE`, `KFI_REMOTE_READ`, `KFI_REMOTE_WRITE`);
    /// kinds this side does not complete are ignored by it.
    pub(crate) fn bind_cntr(&mut self, cntr: CntrRef, flags: u64) {
        for (slot, kind) in self.cntrs.iter_mut().zip(COUNTED) {
            if flags & kind != 0 {
                *slot = Some(cntr);
            }
        }
    }

    /// The counter that counts a completion with `flags`.
    fn cntr(&self, flags: u64) -> Option<CntrRef> {
        let kind = if flags & sys::KFI_RECV != 0 {
            sys::KFI_RECV
        } else if flags & sys::KFI_REMOTE_WRITE != 0 {
            sys::KFI_REMOTE_WRITE
        } else if flags & sys::KFI_REMOTE_READ != 0 {
            sys::KFI_REMOTE_READ
        } else if flags & sys::KFI_SEND != 0 {
            sys::KFI_SEND
        } else if flags & sys::KFI_READ != 0 {
            sys::KFI_READ
        } else {
            sys::KFI_WRITE
        };
        let i = COUNTED.iter().position(|&k| k == kind)?;
        self.cntrs.get(i).copied().flatten()
    }

    fn count(&self, flags: u64, err: bool) {
        if let Some(c) = self.cntr(flags) {
            // A counter cannot refuse an increment of one.
            let _ = c.add(1, err);
        }
    }

    /// Reports the operation `c` as done: counted, and on the CQ unless
    /// it is selective and `c` did not ask. `ENOSPC` if the CQ was full
    /// (it reports `-EOVERFLOW` next).
    pub(crate) fn try_report(&self, c: &CqEntry) -> Result {
        self.count(c.flags, false);
        match self.cq {
            Some(cq) if c.asked || !self.selective => cq.report(c),
            _ => Ok(()),
        }
    }

    /// Reports the operation `c` as failed with `err`: counted as an
    /// error, and on the CQ (errors are reported on a selective CQ too).
    pub(crate) fn try_report_err(&self, c: &CqEntry, err: Error) -> Result {
        self.count(c.flags, true);
        self.cq.map_or(Ok(()), |cq| cq.report_err(c, err))
    }

    /// Counts a success that the CQ does not see: an inject's, or a
    /// peer's access to our regions without remote CQ data.
    pub(crate) fn count_only(&self, flags: u64) {
        self.count(flags, false);
    }

    /// Reports a receive that placed `c.len` bytes and could not place
    /// `truncated` more (see [`CqRef::report_recv`]).
    fn try_report_recv(&self, c: &CqEntry, truncated: usize) -> Result {
        if truncated == 0 {
            self.try_report(c)
        } else {
            self.count(c.flags, true);
            self.cq.map_or(Ok(()), |cq| cq.report_recv(c, truncated))
        }
    }
}

/// The counter kinds the transmit side of an endpoint completes.
const TX_COUNTED: u64 = sys::KFI_SEND | sys::KFI_READ | sys::KFI_WRITE;
/// The counter kinds its receive side completes (a peer's accesses to our
/// regions are received).
const RX_COUNTED: u64 = sys::KFI_RECV | sys::KFI_REMOTE_READ | sys::KFI_REMOTE_WRITE;

/// `kfi_ep_bind` of a CQ or a counter to the transmit side `tx` and the
/// receive side `rx` of an endpoint: a CQ for `KFI_TRANSMIT` and/or
/// `KFI_RECV` (with `KFI_SELECTIVE_COMPLETION`), a counter for the kinds
/// it names (`EINVAL` for none or an unknown one, `EOPNOTSUPP` for a kind
/// among `uncounted`: what the provider cannot see, such as a peer's
/// one-sided RDMA). `EOPNOTSUPP` for anything else. Any context but hard
/// interrupt.
pub(crate) fn bind_reports(
    what: &Bound,
    tx: &mut Reports,
    rx: &mut Reports,
    uncounted: u64,
) -> Result {
    match *what {
        Bound::Cq(cq, flags) => {
            if flags & sys::KFI_TRANSMIT != 0 {
                tx.bind_cq(cq, flags);
            }
            if flags & sys::KFI_RECV != 0 {
                rx.bind_cq(cq, flags);
            }
        }
        Bound::Cntr(cntr, flags) => {
            if flags == 0 || flags & !(TX_COUNTED | RX_COUNTED) != 0 {
                return Err(EINVAL);
            }
            if flags & uncounted != 0 {
                return Err(EOPNOTSUPP);
            }
            tx.bind_cntr(cntr, flags & TX_COUNTED);
            rx.bind_cntr(cntr, flags & RX_COUNTED);
        }
        _ => return Err(EOPNOTSUPP),
    }
    Ok(())
}

impl CqRef {
    /// Reports the operation `c` as done.
    pub(crate) fn report(&self, c: &CqEntry) -> Result {
        self.complete(&c.entry())
    }

    /// Reports the operation `c` as failed with `err` (`ECANCELED` for
    /// one the endpoint's close or its connection's end took back).
    pub(crate) fn report_err(&self, c: &CqEntry, err: Error) -> Result {
        self.complete_err(&c.err_entry(err, 0))
    }

    /// Reports a receive that placed `c.len` bytes and could not place
    /// `truncated` more: done if nothing was cut, else an `EMSGSIZE` error
    /// entry whose `olen` is what was cut.
    pub(crate) fn report_recv(&self, c: &CqEntry, truncated: usize) -> Result {
        if truncated == 0 {
            self.report(c)
        } else {
            self.complete_err(&c.err_entry(EMSGSIZE, truncated))
        }
    }
}

/// Reports `c` as done to `to` (a bare `Option<CqRef>` or [`Reports`]);
/// a full CQ loses it, as said above.
pub(crate) fn report(to: impl Into<Reports>, c: &CqEntry) {
    let _ = to.into().try_report(c);
}

/// Reports `c` as failed with `err` to `to`.
pub(crate) fn report_err(to: impl Into<Reports>, c: &CqEntry, err: Error) {
    let _ = to.into().try_report_err(c, err);
}

/// Reports the receive `c` to `to`, cut by `truncated` bytes (see
/// [`CqRef::report_recv`]).
pub(crate) fn report_recv(to: impl Into<Reports>, c: &CqEntry, truncated: usize) {
    let _ = to.into().try_report_recv(c, truncated);
}
