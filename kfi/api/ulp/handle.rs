// SPDX-License-Identifier: GPL-2.0

//! The C ABI's object calls on [`Owned`] handles, for ULPs (and tests)
//! that keep objects in one struct, where the borrowing types of
//! `objects.rs` cannot go. Every call is checked by the core: a closed or
//! foreign object is refused, and a queue bound to an endpoint (or a
//! parent with children) cannot close under it, so no order the caller
//! gets wrong here is unsound; it fails with `EBUSY` instead.
//! Opening, binding and connection management are process context.

use core::ffi::c_int;
use kernel::{error::to_result, prelude::*};

use super::super::{
    kfabric::{Info, KfiObject, Owned},
    kfi_sys as sys,
};

/// The `(pointer, length)` a call takes for optional bytes.
fn bytes(data: &[u8]) -> (*const c_void, usize) {
    if data.is_empty() {
        (core::ptr::null(), 0)
    } else {
        (data.as_ptr().cast(), data.len())
    }
}

/// Opens the fabric of `info`.
pub(crate) fn open_fabric(info: Info<'_>) -> Result<Owned<sys::kfid_fabric>> {
    // SAFETY: An entry kfabric.ko made (invariant of `Info`); its
    // attributes are only read.
    Owned::open(|o| unsafe { sys::kfi_fabric(info.fabric_attr, o, core::ptr::null_mut()) })
}

impl Owned<sys::kfid_fabric> {
    /// A domain for `info`.
    pub(crate) fn open_domain(&self, info: Info<'_>) -> Result<Owned<sys::kfid_domain>> {
        let info = info.as_ptr();
        // SAFETY: An open fabric; `info` is an entry kfabric.ko made
        // (invariant of `Info`), only read.
        Owned::open(|o| unsafe { sys::kfi_domain(self.as_ptr(), info, o, core::ptr::null_mut()) })
    }

    /// An event queue with attributes `attr`.
    ///
    /// # Safety
    ///
    /// The pointers of `attr` are NULL or valid as kfabric.h says for the
    /// call, and a handler it names stays callable until the queue is
    /// closed: its module is not unloaded before (a queue leaked, or kept
    /// by a leaked endpoint, would break that). The handler never sleeps
    /// and takes no lock the ULP holds around its calls on the queue's
    /// objects: it runs in the provider's context (softirq, or within
    /// such a call), possibly on several CPUs at once.
    pub(crate) unsafe fn open_eq(&self, attr: &sys::kfi_eq_attr) -> Result<Owned<sys::kfid_eq>> {
        let mut a = *attr;
        // SAFETY: An open fabric; valid attributes (the caller's promise),
        // in a copy the call may write.
        Owned::open(|o| unsafe {
            sys::kfi_eq_open(self.as_ptr(), &mut a, o, core::ptr::null_mut())
        })
    }

    /// An event queue of `size` events, without a handler.
    pub(crate) fn open_eq_sized(&self, size: usize) -> Result<Owned<sys::kfid_eq>> {
        let a = sys::kfi_eq_attr {
            size,
            ..Default::default()
        };
        // SAFETY: No pointer and no handler in the attributes.
        unsafe { self.open_eq(&a) }
    }

    /// A passive endpoint for `info` (not bound, not listening).
    pub(crate) fn open_pep(&self, info: Info<'_>) -> Result<Owned<sys::kfid_pep>> {
        let info = info.as_ptr();
        // SAFETY: An open fabric; `info` is an entry kfabric.ko made
        // (invariant of `Info`), only read.
        Owned::open(|o| unsafe {
            sys::kfi_passive_ep(self.as_ptr(), info, o, core::ptr::null_mut())
        })
    }
}

impl Owned<sys::kfid_domain> {
    /// A completion queue with attributes `attr`.
    ///
    /// # Safety
    ///
    /// The pointers of `attr` are NULL or valid as kfabric.h says for the
    /// call, and a handler it names stays callable until the queue is
    /// closed: its module is not unloaded before (a queue leaked, or kept
    /// by a leaked endpoint, would break that). The handler never sleeps
    /// and takes no lock the ULP holds around its calls on the queue's
    /// objects: it runs in the provider's context (softirq, or within
    /// such a call), possibly on several CPUs at once.
    pub(crate) unsafe fn open_cq(&self, attr: &sys::kfi_cq_attr) -> Result<Owned<sys::kfid_cq>> {
        let mut a = *attr;
        // SAFETY: An open domain; valid attributes (the caller's promise),
        // in a copy the call may write.
        Owned::open(|o| unsafe {
            sys::kfi_cq_open(self.as_ptr(), &mut a, o, core::ptr::null_mut())
        })
    }

    /// A completion queue of `size` entries in `format`, without a
    /// handler.
    pub(crate) fn open_cq_sized(&self, size: usize, format: u32) -> Result<Owned<sys::kfid_cq>> {
        let a = sys::kfi_cq_attr {
            size,
            format,
            ..Default::default()
        };
        // SAFETY: No pointer and no handler in the attributes.
        unsafe { self.open_cq(&a) }
    }

    /// An endpoint for `info` (a getinfo entry or a connection request's).
    pub(crate) fn open_ep(&self, info: Info<'_>) -> Result<Owned<sys::kfid_ep>> {
        let info = info.as_ptr();
        // SAFETY: An open domain; `info` is an entry kfabric.ko made
        // (invariant of `Info`), only read.
        Owned::open(|o| unsafe { sys::kfi_endpoint(self.as_ptr(), info, o, core::ptr::null_mut()) })
    }

    /// An address vector with attributes `attr`.
    ///
    /// # Safety
    ///
    /// The pointers of `attr` are NULL or valid as kfabric.h says for the
    /// call.
    pub(crate) unsafe fn open_av(&self, attr: &sys::kfi_av_attr) -> Result<Owned<sys::kfid_av>> {
        let mut a = *attr;
        // SAFETY: An open domain; valid attributes (the caller's promise),
        // in a copy the call may write.
        Owned::open(|o| unsafe {
            sys::kfi_av_open(self.as_ptr(), &mut a, o, core::ptr::null_mut())
        })
    }

    /// A table address vector of `count` addresses.
    pub(crate) fn open_av_table(&self, count: usize) -> Result<Owned<sys::kfid_av>> {
        let a = sys::kfi_av_attr {
            type_: sys::KFI_AV_TABLE,
            count,
            ..Default::default()
        };
        // SAFETY: No pointer in the attributes.
        unsafe { self.open_av(&a) }
    }

    /// Registers `len` bytes at `buf` with `access`, peers naming its
    /// first byte `offset` (with `KFI_MR_VIRT_ADDR`: its address), requested
    /// key `key` and `flags` (`KFI_RMA_PMEM`).
    ///
    /// # Safety
    ///
    /// `buf..buf + len` stays valid memory until the region is closed; the
    /// provider reads and (per `access`) writes it for peers meanwhile, so
    /// no Rust reference to those bytes lives meanwhile either (peers
    /// writing under a `&[u8]` or `&mut [u8]` would break its aliasing
    /// rules): the ULP reaches them through raw pointers only.
    pub(crate) unsafe fn register_raw(
        &self,
        buf: *mut u8,
        len: usize,
        access: u64,
        offset: u64,
        key: u64,
        flags: u64,
    ) -> Result<Owned<sys::kfid_mr>> {
        // SAFETY: An open domain; `buf` lives as long as the region
        // (safety requirement).
        Owned::open(|o| unsafe {
            sys::kfi_mr_reg(
                self.as_ptr(),
                buf.cast(),
                len,
                access,
                offset,
                key,
                flags,
                o,
                core::ptr::null_mut(),
            )
        })
    }
}

impl Owned<sys::kfid_ep> {
    /// Binds `obj` (a CQ with `KFI_TRANSMIT`/`KFI_RECV`, an EQ or an AV
    /// with 0).
    pub(crate) fn bind<T: KfiObject>(&self, obj: &Owned<T>, flags: u64) -> Result {
        // SAFETY: Open objects; the core pins `obj` while it is bound.
        to_result(unsafe { sys::kfi_ep_bind(self.as_ptr(), obj.fid(), flags) })
    }

    /// Enables the endpoint.
    pub(crate) fn enable(&self) -> Result {
        // SAFETY: An open endpoint.
        to_result(unsafe { sys::kfi_enable(self.as_ptr()) })
    }

    /// Connects to the info's destination with private `data`.
    pub(crate) fn connect(&self, data: &[u8]) -> Result {
        let (p, n) = bytes(data);
        // SAFETY: An open endpoint; `data` is read during the call.
        to_result(unsafe { sys::kfi_connect(self.as_ptr(), core::ptr::null(), p, n) })
    }

    /// Connects to `addr` (a socket address in the domain's format) rather
    /// than the info's destination, with private `data`.
    pub(crate) fn connect_to(&self, addr: &[u8], data: &[u8]) -> Result {
        super::sockaddr::checked_len(addr)?;
        let (p, n) = bytes(data);
        // SAFETY: An open endpoint; `addr` holds the whole socket address
        // its family names (checked above); `data` is read during the call.
        to_result(unsafe { sys::kfi_connect(self.as_ptr(), addr.as_ptr().cast(), p, n) })
    }

    /// Takes back the operation posted with `ctx` (a receive not filled
    /// yet): it completes with `ECANCELED`; `ENOENT` if nothing waits.
    pub(crate) fn cancel(&self, ctx: usize) -> Result {
        // SAFETY: An open endpoint; the context is only compared.
        to_result(unsafe { sys::kfi_cancel(self.fid(), ctx as *mut c_void) })
    }

    /// The local address, written to `buf`: its length.
    pub(crate) fn getname(&self, buf: &mut [u8]) -> Result<usize> {
        name_of(self.fid(), buf)
    }

    /// The peer's address, written to `buf`: its length.
    pub(crate) fn getpeer(&self, buf: &mut [u8]) -> Result<usize> {
        let mut len = buf.len();
        // SAFETY: An open endpoint; `buf` is writable for `len` bytes.
        to_result(unsafe { sys::kfi_getpeer(self.as_ptr(), buf.as_mut_ptr().cast(), &mut len) })?;
        fitted(len, buf)
    }

    /// How many elements of `datatype` one atomic `op` may carry;
    /// `EOPNOTSUPP` if the endpoint cannot apply it.
    pub(crate) fn atomicvalid(&self, datatype: u32, op: u32) -> Result<usize> {
        let mut count = 0;
        // SAFETY: An open endpoint; a query that writes `count`.
        to_result(unsafe { sys::kfi_atomicvalid(self.as_ptr(), datatype, op, &mut count) })?;
        Ok(count)
    }

    /// As [`Self::atomicvalid`], for the fetching form (`kfi_fetch_atomic`).
    pub(crate) fn fetch_atomicvalid(&self, datatype: u32, op: u32) -> Result<usize> {
        let mut count = 0;
        // SAFETY: An open endpoint; a query that writes `count`.
        to_result(unsafe { sys::kfi_fetch_atomicvalid(self.as_ptr(), datatype, op, &mut count) })?;
        Ok(count)
    }

    /// As [`Self::atomicvalid`], for the compare form
    /// (`kfi_compare_atomic`).
    pub(crate) fn compare_atomicvalid(&self, datatype: u32, op: u32) -> Result<usize> {
        let mut count = 0;
        // SAFETY: An open endpoint; a query that writes `count`.
        to_result(unsafe {
            sys::kfi_compare_atomicvalid(self.as_ptr(), datatype, op, &mut count)
        })?;
        Ok(count)
    }

    /// Accepts the request the endpoint was opened for, with `data`.
    pub(crate) fn accept(&self, data: &[u8]) -> Result {
        let (p, n) = bytes(data);
        // SAFETY: An open endpoint; `data` is read during the call.
        to_result(unsafe { sys::kfi_accept(self.as_ptr(), p, n) })
    }

    /// Shuts the connection down.
    pub(crate) fn shutdown(&self) -> Result {
        // SAFETY: An open endpoint.
        to_result(unsafe { sys::kfi_shutdown(self.as_ptr(), 0) })
    }
}

/// The address of the endpoint or passive endpoint `fid`, written to
/// `buf`: its length.
fn name_of(fid: *mut sys::kfid, buf: &mut [u8]) -> Result<usize> {
    let mut len = buf.len();
    // SAFETY: `fid` is an open object's (the callers'); `buf` is writable
    // for `len` bytes.
    to_result(unsafe { sys::kfi_getname(fid, buf.as_mut_ptr().cast(), &mut len) })?;
    fitted(len, buf)
}

/// An address length a call reported for `buf`: `ENOSPC` if it did not
/// fit.
fn fitted(len: usize, buf: &[u8]) -> Result<usize> {
    if len > buf.len() {
        return Err(ENOSPC);
    }
    Ok(len)
}

impl Owned<sys::kfid_pep> {
    /// The address the passive endpoint listens on, written to `buf`: its
    /// length.
    pub(crate) fn getname(&self, buf: &mut [u8]) -> Result<usize> {
        name_of(self.fid(), buf)
    }

    /// Binds `eq` and listens.
    pub(crate) fn listen_on(&self, eq: &Owned<sys::kfid_eq>) -> Result {
        // SAFETY: Open objects; the core pins `eq` while it is bound.
        unsafe {
            to_result(sys::kfi_pep_bind(self.as_ptr(), eq.fid(), 0))?;
            to_result(sys::kfi_listen(self.as_ptr()))
        }
    }

    /// Refuses the request `req` (a connection request's entry), with
    /// `data` for the peer.
    pub(crate) fn reject(&self, req: Info<'_>, data: &[u8]) -> Result {
        let (p, n) = bytes(data);
        // SAFETY: An open passive endpoint; the handle is only looked up
        // by the core; `data` is read during the call.
        to_result(unsafe { sys::kfi_reject(self.as_ptr(), req.handle, p, n) })
    }
}

impl Owned<sys::kfid_cq> {
    /// The tagged entry a read of any format fits in, copied out as a
    /// DATA entry.
    fn data_of(e: &sys::kfi_cq_tagged_entry) -> sys::kfi_cq_data_entry {
        sys::kfi_cq_data_entry {
            op_context: e.op_context,
            flags: e.flags,
            len: e.len,
            buf: e.buf,
            data: e.data,
        }
    }

    /// Reads one entry into `out` if there is one: the C return value (1,
    /// `-EAGAIN`, `-KFI_EAVAIL`, ...). Any context but hard interrupt.
    pub(crate) fn read_data(&self, out: &mut sys::kfi_cq_data_entry) -> isize {
        let mut e = sys::kfi_cq_tagged_entry::default();
        // SAFETY: An open CQ; room for one entry of the largest format.
        let n = unsafe { sys::kfi_cq_read(self.as_ptr(), (&raw mut e).cast(), 1) };
        if n == 1 {
            *out = Self::data_of(&e);
        }
        n
    }

    /// As [`Self::read_data`], waiting up to `timeout_ms`. Process context.
    pub(crate) fn sread_data(&self, out: &mut sys::kfi_cq_data_entry, timeout_ms: i32) -> isize {
        let mut e = sys::kfi_cq_tagged_entry::default();
        let n = self.sread_tagged(&mut e, timeout_ms);
        if n == 1 {
            *out = Self::data_of(&e);
        }
        n
    }

    /// As [`Self::sread_data`], with the entry's tag (a CQ of any format).
    pub(crate) fn sread_tagged(
        &self,
        out: &mut sys::kfi_cq_tagged_entry,
        timeout_ms: i32,
    ) -> isize {
        // SAFETY: An open CQ; room for one entry of the largest format.
        unsafe {
            sys::kfi_cq_sread(
                self.as_ptr(),
                core::ptr::from_mut(out).cast(),
                1,
                core::ptr::null(),
                timeout_ms,
            )
        }
    }

    /// Reads the error entry at the head into `err`: 1, or a negative
    /// errno (`-EAGAIN`: none).
    pub(crate) fn readerr(&self, err: &mut sys::kfi_cq_err_entry) -> isize {
        // SAFETY: An open CQ; `err` is writable.
        unsafe { sys::kfi_cq_readerr(self.as_ptr(), err, 0) }
    }
}

impl Owned<sys::kfid_eq> {
    /// Reads the next event into `ev` and `buf` (waiting up to
    /// `timeout_ms` if `wait`): bytes read or a negative errno
    /// (`-KFI_EAVAIL`: an error entry is next). A connection request's
    /// entry read here is the caller's to free ([`super::ConnReq::adopt`]).
    pub(crate) fn read_event(&self, ev: &mut u32, buf: &mut [u8], wait: Option<i32>) -> isize {
        let (p, n) = (buf.as_mut_ptr().cast(), buf.len());
        // SAFETY: An open EQ; `buf` is writable for its length.
        unsafe {
            match wait {
                Some(ms) => sys::kfi_eq_sread(self.as_ptr(), ev, p, n, ms, 0),
                None => sys::kfi_eq_read(self.as_ptr(), ev, p, n, 0),
            }
        }
    }

    /// Reads the error entry at the head into `err`: 1 or a negative errno.
    pub(crate) fn readerr(&self, err: &mut sys::kfi_eq_err_entry) -> isize {
        // SAFETY: An open EQ; `err` is writable.
        unsafe { sys::kfi_eq_readerr(self.as_ptr(), err, 0) }
    }
}

impl Owned<sys::kfid_mr> {
    /// The key peers name the region by.
    pub(crate) fn key(&self) -> u64 {
        // SAFETY: An open region.
        unsafe { (*self.as_ptr()).key }
    }
}

impl Owned<sys::kfid_av> {
    /// Inserts one address `addr` (in the domain's format: a socket
    /// address): its `kfi_addr_t`, or the C return value as the error.
    pub(crate) fn insert(&self, addr: &[u8]) -> core::result::Result<u64, c_int> {
        if super::sockaddr::checked_len(addr).is_err() {
            return Err(EINVAL.to_errno());
        }
        let mut fi_addr = u64::MAX;
        // SAFETY: An open AV; `addr` holds the whole address its family
        // names (checked above), and `fi_addr` has room for the one result.
        let n = unsafe {
            sys::kfi_av_insert(
                self.as_ptr(),
                addr.as_ptr().cast(),
                1,
                &mut fi_addr,
                0,
                core::ptr::null_mut(),
            )
        };
        if n == 1 {
            Ok(fi_addr)
        } else {
            Err(n)
        }
    }
}
