// SPDX-License-Identifier: GPL-2.0

//! Connection events, read from an [`Eq`].

use core::ptr::NonNull;
use kernel::prelude::*;

use super::{
    super::{kfabric::Info, kfi_sys as sys},
    Eq,
};

const CM: usize = size_of::<sys::kfi_eq_cm_entry>();
const DATA_MAX: usize = sys::KFI_EQ_DATA_MAX as usize;

/// The private data that came with an event (at most `KFI_EQ_DATA_MAX`
/// bytes).
#[derive(Clone, Copy)]
pub(crate) struct PrivateData {
    bytes: [u8; DATA_MAX],
    len: usize,
}

impl PrivateData {
    fn new(src: &[u8]) -> Self {
        let len = src.len().min(DATA_MAX);
        let mut bytes = [0; DATA_MAX];
        bytes[..len].copy_from_slice(&src[..len]);
        Self { bytes, len }
    }

    /// The bytes.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// A connection request; owns its `kfi_info` (freed when dropped).
///
/// # Invariants
///
/// `info` is a request's entry, owned by this value.
pub(crate) struct ConnReq {
    info: NonNull<sys::kfi_info>,
}

impl ConnReq {
    /// Takes ownership of a request's entry read from an EQ by hand
    /// ([`Owned::read_event`](super::super::kfabric::Owned)); `None` if
    /// `info` is NULL.
    ///
    /// # Safety
    ///
    /// `info` is NULL or the entry of a `KFI_CONNREQ` event that a
    /// provider posted (one a ULP wrote with `kfi_eq_write` keeps its
    /// entry: the queue never frees it), read without `KFI_PEEK`, not
    /// freed and not adopted before.
    pub(crate) unsafe fn adopt(info: *mut sys::kfi_info) -> Option<Self> {
        // INVARIANT: the caller hands its entry over.
        NonNull::new(info).map(|info| Self { info })
    }

    /// The request's entry: open the accepting endpoint with it.
    pub(crate) fn info(&self) -> Info<'_> {
        // SAFETY: Owned and valid (type invariant): the provider's entry,
        // unchanged (no mutable access is given out).
        unsafe { Info::new(self.info.as_ref()) }
    }
}

impl Drop for ConnReq {
    fn drop(&mut self) {
        // SAFETY: Owned (type invariant); freed once.
        unsafe { sys::kfi_freeinfo(self.info.as_ptr()) };
    }
}

/// A connection event.
pub(crate) enum CmEvent {
    /// A peer asks to connect (on a passive endpoint's EQ).
    ConnReq { req: ConnReq, data: PrivateData },
    /// An endpoint's connection is up.
    Connected {
        fid: *mut sys::kfid,
        data: PrivateData,
    },
    /// An endpoint's connection ended.
    Shutdown { fid: *mut sys::kfid },
    /// Something failed asynchronously (a refused or unreachable connect,
    /// a protocol error): the object, the error and the peer's data.
    Failed {
        fid: *mut sys::kfid,
        err: Error,
        data: PrivateData,
    },
    /// The EQ was full when its provider had events for it: they are
    /// lost (a connection up or ended, an error). What was queued before
    /// them was read first; what came after follows. A ULP that sees this
    /// no longer knows its endpoints' states from events.
    Overflow,
    /// Any other event, by number.
    Other(u32),
}

impl Eq<'_> {
    /// Waits up to `timeout_ms` for the next event. Process context.
    pub(crate) fn sread(&self, timeout_ms: i32) -> Result<CmEvent> {
        let mut buf = [0u8; CM + DATA_MAX];
        let mut ev = 0u32;
        // SAFETY: An open EQ; `buf` holds the largest event.
        let n = unsafe {
            sys::kfi_eq_sread(
                self.obj.as_ptr(),
                &mut ev,
                buf.as_mut_ptr().cast(),
                buf.len(),
                timeout_ms,
                0,
            )
        };
        if n == -(sys::KFI_EAVAIL as isize) {
            return self.failed();
        }
        let n = usize::try_from(n).map_err(|_| Error::from_errno(n as i32))?;
        if n < CM {
            return Ok(CmEvent::Other(ev));
        }
        // SAFETY: A connection event starts with a `kfi_eq_cm_entry`.
        let e = unsafe { buf.as_ptr().cast::<sys::kfi_eq_cm_entry>().read_unaligned() };
        let data = PrivateData::new(buf.get(CM..n).unwrap_or(&[]));
        Ok(match ev {
            sys::KFI_CONNREQ => match NonNull::new(e.info) {
                // INVARIANT: a provider's, read without KFI_PEEK: the
                // entry is ours. (A ULP must not write a CONNREQ with
                // `kfi_eq_write`, whose entry stays its own, to a queue
                // read here: Documentation/api.rst.)
                Some(info) => CmEvent::ConnReq {
                    req: ConnReq { info },
                    data,
                },
                None => CmEvent::Other(ev),
            },
            sys::KFI_CONNECTED => CmEvent::Connected { fid: e.fid, data },
            sys::KFI_SHUTDOWN => CmEvent::Shutdown { fid: e.fid },
            other => CmEvent::Other(other),
        })
    }

    /// The error entry at the head.
    fn failed(&self) -> Result<CmEvent> {
        let mut err = sys::kfi_eq_err_entry::default();
        // SAFETY: An open EQ; `err` is writable.
        let r = unsafe { sys::kfi_eq_readerr(self.obj.as_ptr(), &mut err, 0) };
        if r != 1 {
            return Err(Error::from_errno(r as i32));
        }
        if err.fid.is_null() && err.context.is_null() && err.err == EOVERFLOW.to_errno().abs() {
            // The queue's notice (a provider's entry names its object).
            return Ok(CmEvent::Overflow);
        }
        let data = if err.err_data.is_null() {
            PrivateData::new(&[])
        } else {
            // SAFETY: The EQ's copy of the error data, valid until the next
            // error read; copied out here.
            PrivateData::new(unsafe {
                core::slice::from_raw_parts(err.err_data.cast::<u8>(), err.err_data_size)
            })
        };
        Ok(CmEvent::Failed {
            fid: err.fid,
            err: Error::from_errno(-err.err.checked_abs().unwrap_or(EIO.to_errno().abs())),
            data,
        })
    }
}
