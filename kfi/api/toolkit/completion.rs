// SPDX-License-Identifier: GPL-2.0

//! Completions a provider reports on the completion queue bound to an
//! endpoint ([`CqRef`]): successes, failures and receives that did not
//! fit.
//!
//! Every function here may be called in any context but hard interrupt
//! and never sleeps. A full CQ loses the completion and reports an
//! `-EOVERFLOW` error entry next (kfabric.ko's util CQ), so the ULP learns
//! of it; the `report*` methods return that `ENOSPC` for a provider that
//! must act on it (e.g. end a connection a peer floods), the free
//! functions, for operations the ULP posted, ignore it.

use kernel::prelude::*;

use super::super::{kfi_sys as sys, provider::CqRef};

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

/// Reports `c` as done on `cq` (nothing if no CQ is bound for the
/// operation's direction); a full CQ loses it, as said above.
pub(crate) fn report(cq: Option<CqRef>, c: &CqEntry) {
    if let Some(cq) = cq {
        let _ = cq.report(c);
    }
}

/// Reports `c` as failed with `err` on `cq` (nothing if none is bound).
pub(crate) fn report_err(cq: Option<CqRef>, c: &CqEntry, err: Error) {
    if let Some(cq) = cq {
        let _ = cq.report_err(c, err);
    }
}

/// Reports the receive `c` on `cq` (nothing if none is bound), cut by
/// `truncated` bytes (see [`CqRef::report_recv`]).
pub(crate) fn report_recv(cq: Option<CqRef>, c: &CqEntry, truncated: usize) {
    if let Some(cq) = cq {
        let _ = cq.report_recv(c, truncated);
    }
}
