// SPDX-License-Identifier: GPL-2.0

//! Reading completions: each entry is `Ok(Completion)` or, for a failed
//! operation, `Err(CqError::Failed)`.

use kernel::prelude::*;

use super::{super::kfi_sys as sys, Cq};

/// A completed operation.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Completion {
    /// The context the operation was posted with.
    pub(crate) context: usize,
    /// What it was (`KFI_SEND`, `KFI_RECV`, `KFI_RMA | KFI_WRITE`, ...).
    pub(crate) flags: u64,
    /// Bytes received (receives).
    pub(crate) len: usize,
    /// Remote CQ data, with `KFI_REMOTE_CQ_DATA` in `flags`.
    pub(crate) data: u64,
    /// The tag of a tagged receive.
    pub(crate) tag: u64,
}

/// Why no completion was read.
#[derive(Clone, Copy, Debug)]
pub(crate) enum CqError {
    /// An operation failed: its context, what it was, the error and, for a
    /// truncated receive, the bytes that did not fit.
    Failed {
        context: usize,
        flags: u64,
        err: Error,
        olen: usize,
    },
    /// The queue itself: `EAGAIN` (empty), `ETIMEDOUT`, `EINTR`,
    /// `ECANCELED` (signalled), `EOVERFLOW` (completions were lost: the
    /// buffers of operations whose completion was not read are the
    /// ULP's again only once their endpoint is closed).
    Queue(Error),
}

impl CqError {
    /// The errno this stands for.
    pub(crate) fn errno(&self) -> Error {
        match self {
            Self::Failed { err, .. } => *err,
            Self::Queue(e) => *e,
        }
    }
}

impl From<CqError> for Error {
    fn from(e: CqError) -> Self {
        e.errno()
    }
}

impl Cq<'_> {
    /// Turns a read's return value into the entry or the error.
    fn entry(&self, n: isize, e: &sys::kfi_cq_tagged_entry) -> Result<Completion, CqError> {
        if n == 1 {
            return Ok(Completion {
                context: e.op_context as usize,
                flags: e.flags,
                len: e.len,
                data: e.data,
                tag: e.tag,
            });
        }
        if n != -(sys::KFI_EAVAIL as isize) {
            let errno = i32::try_from(n).unwrap_or(EIO.to_errno());
            return Err(CqError::Queue(Error::from_errno(errno)));
        }
        let mut err = sys::kfi_cq_err_entry::default();
        // SAFETY: An open CQ; `err` is writable.
        let r = unsafe { sys::kfi_cq_readerr(self.obj.as_ptr(), &mut err, 0) };
        if r != 1 {
            let errno = i32::try_from(r).unwrap_or(EIO.to_errno());
            return Err(CqError::Queue(Error::from_errno(errno)));
        }
        if err.flags == 0 && err.op_context.is_null() && err.err == EOVERFLOW.to_errno().abs() {
            // The queue's notice of lost completions (no operation's: a
            // provider's error entry always says what the operation was),
            // not a failure of the operation with context 0, whose buffer
            // would then look free.
            return Err(CqError::Queue(EOVERFLOW));
        }
        Err(CqError::Failed {
            context: err.op_context as usize,
            flags: err.flags,
            err: Error::from_errno(-err.err.checked_abs().unwrap_or(EIO.to_errno().abs())),
            olen: err.olen,
        })
    }

    /// The next entry, `Err(CqError::Queue(EAGAIN))` when there is none.
    /// Any context but hard interrupt.
    pub(crate) fn read(&self) -> Result<Completion, CqError> {
        let mut e = sys::kfi_cq_tagged_entry::default();
        // SAFETY: An open CQ of the tagged format; one entry of room.
        let n = unsafe { sys::kfi_cq_read(self.obj.as_ptr(), (&raw mut e).cast(), 1) };
        self.entry(n, &e)
    }

    /// Waits up to `timeout_ms` (negative: forever) for the next entry.
    /// Process context.
    pub(crate) fn sread(&self, timeout_ms: i32) -> Result<Completion, CqError> {
        let mut e = sys::kfi_cq_tagged_entry::default();
        // SAFETY: An open CQ of the tagged format; one entry of room.
        let n = unsafe {
            sys::kfi_cq_sread(
                self.obj.as_ptr(),
                (&raw mut e).cast(),
                1,
                core::ptr::null(),
                timeout_ms,
            )
        };
        self.entry(n, &e)
    }
}
