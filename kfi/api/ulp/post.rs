// SPDX-License-Identifier: GPL-2.0

//! Posting operations on an [`Endpoint`]. Any context but hard interrupt;
//! nothing here sleeps.
//!
//! Every call is `unsafe` for the same reason, stated once here and
//! referred to by each: **the buffer contract**. The provider reads (sends,
//! RMA writes, atomic operands) or writes (receives, RMA reads, atomic
//! results) the buffers after the call returns, until the operation's
//! completion (or its error entry) is read from the CQ. Until then the
//! caller keeps every buffer alive and does not touch it; a buffer the
//! provider writes is not read meanwhile either. On an error return
//! nothing was posted and the buffers are free at once. After the CQ's
//! overflow notice (`CqError::Queue(EOVERFLOW)`: completions were lost),
//! the buffers of operations whose completion was not read are free only
//! once their endpoint is closed.

use kernel::{bindings, error::to_result, prelude::*};

use super::{super::kfi_sys as sys, Endpoint};

/// A one-buffer kvec message with context `ctx` and remote CQ data `data`;
/// `iov` must outlive it (also the tests' builder of raw messages).
pub(crate) fn msg(iov: &bindings::kvec, ctx: usize, data: u64) -> sys::kfi_msg {
    let mut m = sys::kfi_msg {
        iov_type: sys::KFI_KVEC,
        iov_count: 1,
        context: ctx as *mut c_void,
        data,
        ..Default::default()
    };
    m.__bindgen_anon_1.msg_iov = iov;
    m
}

fn kvec(ptr: *const u8, len: usize) -> bindings::kvec {
    bindings::kvec {
        iov_base: ptr.cast_mut().cast(),
        iov_len: len,
    }
}

impl Endpoint<'_> {
    /// Sends `buf` (`flags`: completion level, `KFI_INJECT`, ...); its
    /// completion carries `ctx`.
    ///
    /// # Safety
    ///
    /// The buffer contract of this module, for `buf`.
    pub(crate) unsafe fn send(&self, buf: &[u8], ctx: usize, flags: u64) -> Result {
        let v = kvec(buf.as_ptr(), buf.len());
        // SAFETY: An open endpoint; `buf` stays valid until the completion
        // (safety requirement).
        to_result(unsafe {
            sys::kfi_sendmsg(
                self.obj.as_ptr(),
                &msg(&v, ctx, 0),
                flags | sys::KFI_COMPLETION,
            )
        })
    }

    /// Sends `buf` with remote CQ data `data` (`KFI_REMOTE_CQ_DATA` is
    /// added to `flags`): the peer's receive completion carries `data`.
    ///
    /// # Safety
    ///
    /// The buffer contract of this module, for `buf`.
    pub(crate) unsafe fn send_data(&self, buf: &[u8], ctx: usize, data: u64, flags: u64) -> Result {
        let v = kvec(buf.as_ptr(), buf.len());
        // SAFETY: An open endpoint; `buf` stays valid until the completion
        // (safety requirement).
        to_result(unsafe {
            sys::kfi_sendmsg(
                self.obj.as_ptr(),
                &msg(&v, ctx, data),
                flags | sys::KFI_COMPLETION | sys::KFI_REMOTE_CQ_DATA,
            )
        })
    }

    /// Sends `buf` tagged `tag` with remote CQ data `data` (`flags`:
    /// completion level, `KFI_INJECT`, `KFI_REMOTE_CQ_DATA`, ...); its
    /// completion carries `ctx`.
    ///
    /// # Safety
    ///
    /// The buffer contract of this module, for `buf`.
    pub(crate) unsafe fn tsend(
        &self,
        buf: &[u8],
        tag: u64,
        ctx: usize,
        data: u64,
        flags: u64,
    ) -> Result {
        let v = kvec(buf.as_ptr(), buf.len());
        let t = sys::kfi_msg_tagged {
            msg: msg(&v, ctx, data),
            tag,
            ignore: 0,
        };
        // SAFETY: As for `send`; `t` and what it points to live across the
        // call.
        to_result(unsafe { sys::kfi_tsendmsg(self.obj.as_ptr(), &t, flags | sys::KFI_COMPLETION) })
    }

    /// Posts a tagged receive into `buf` for the tags that match `tag`
    /// outside `ignore`; its completion carries `ctx` and the message's
    /// tag.
    ///
    /// # Safety
    ///
    /// The buffer contract of this module, for `buf`.
    pub(crate) unsafe fn trecv(&self, buf: &mut [u8], tag: u64, ignore: u64, ctx: usize) -> Result {
        let v = kvec(buf.as_mut_ptr(), buf.len());
        let t = sys::kfi_msg_tagged {
            msg: msg(&v, ctx, 0),
            tag,
            ignore,
        };
        // SAFETY: As for `send`; `t` and what it points to live across the
        // call.
        to_result(unsafe { sys::kfi_trecvmsg(self.obj.as_ptr(), &t, sys::KFI_COMPLETION) })
    }

    /// Posts a receive into `buf`; its completion carries `ctx`.
    ///
    /// # Safety
    ///
    /// The buffer contract of this module, for `buf`.
    pub(crate) unsafe fn recv(&self, buf: &mut [u8], ctx: usize) -> Result {
        let v = kvec(buf.as_mut_ptr(), buf.len());
        // SAFETY: As for `send`.
        to_result(unsafe {
            sys::kfi_recvmsg(self.obj.as_ptr(), &msg(&v, ctx, 0), sys::KFI_COMPLETION)
        })
    }

    /// An RMA of `local` at `addr` in the peer's region `key`: a write
    /// (`read == false`) or a read into `local`, with exactly `flags`.
    ///
    /// # Safety
    ///
    /// The buffer contract of this module, for `local`.
    pub(super) unsafe fn rma(
        &self,
        read: bool,
        local: *mut [u8],
        addr: u64,
        key: u64,
        ctx: usize,
        flags: u64,
    ) -> Result {
        let len = local.len();
        let v = kvec(local.cast(), len);
        let r = sys::kfi_rma_iov { addr, len, key };
        let m = sys::kfi_msg_rma {
            msg: msg(&v, ctx, 0),
            rma_iov: &r,
            rma_iov_count: 1,
        };
        // SAFETY: As for `send`; `m` and what it points to live across the
        // call.
        to_result(unsafe {
            if read {
                sys::kfi_readmsg(self.obj.as_ptr(), &m, flags)
            } else {
                sys::kfi_writemsg(self.obj.as_ptr(), &m, flags)
            }
        })
    }

    /// Writes `local` to `addr` of the peer's region `key` (`flags`:
    /// `KFI_DELIVERY_COMPLETE`, `KFI_COMMIT_COMPLETE`, ...).
    ///
    /// # Safety
    ///
    /// The buffer contract of this module, for `local`.
    pub(crate) unsafe fn write(
        &self,
        local: &[u8],
        addr: u64,
        key: u64,
        ctx: usize,
        flags: u64,
    ) -> Result {
        // SAFETY: The caller's contract; the same write, asking for its
        // completion.
        unsafe { self.write_unsignaled(local, addr, key, ctx, flags | sys::KFI_COMPLETION) }
    }

    /// Reads `local.len()` bytes at `addr` of the peer's region `key` into
    /// `local`.
    ///
    /// # Safety
    ///
    /// The buffer contract of this module, for `local`.
    pub(crate) unsafe fn read(&self, local: &mut [u8], addr: u64, key: u64, ctx: usize) -> Result {
        // SAFETY: The caller's contract.
        unsafe {
            self.rma(
                true,
                core::ptr::from_mut(local),
                addr,
                key,
                ctx,
                sys::KFI_COMPLETION,
            )
        }
    }

    /// Applies `op` (`KFI_SUM`, `KFI_CSWAP` is not this call, ...) with
    /// `operand` to the u64 at `addr` of the peer's region `key` and
    /// returns the old value into `result`.
    ///
    /// # Safety
    ///
    /// The buffer contract of this module, for `operand` and `result`.
    pub(crate) unsafe fn fetch_atomic_u64(
        &self,
        op: u32,
        operand: &u64,
        result: &mut u64,
        addr: u64,
        key: u64,
        ctx: usize,
    ) -> Result {
        let ioc = sys::kfi_ioc {
            addr: core::ptr::from_ref(operand).cast_mut().cast(),
            count: 1,
        };
        let mut res = sys::kfi_ioc {
            addr: core::ptr::from_mut(result).cast(),
            count: 1,
        };
        let rioc = sys::kfi_rma_ioc {
            addr,
            count: 1,
            key,
        };
        let m = sys::kfi_msg_atomic {
            msg_iov: &ioc,
            iov_count: 1,
            rma_iov: &rioc,
            rma_iov_count: 1,
            datatype: sys::KFI_UINT64,
            op,
            context: ctx as *mut c_void,
            ..Default::default()
        };
        // SAFETY: As for `send`; the descriptors live across the call.
        to_result(unsafe {
            sys::kfi_fetch_atomicmsg(
                self.obj.as_ptr(),
                &m,
                &mut res,
                core::ptr::null_mut(),
                1,
                sys::KFI_COMPLETION,
            )
        })
    }
}
