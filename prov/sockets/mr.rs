// SPDX-License-Identifier: GPL-2.0

//! Registered memory of a kfi_sockets domain: the key table peers' RMA and
//! atomics are checked against, and the persistence step of commit
//! completion.
//!
//! Every remote access takes an [`Access`] for one range of one region
//! after checking key, bounds and access rights; closing a region removes
//! its key at once (new accesses fail) and then waits until the accesses in
//! progress end, so no peer writes into memory the ULP got back; a peer
//! that holds an access longer than the grace (`mr_close_grace_ms`) has
//! its connection aborted. Keys the table picks are random. Lookups scan a
//! short list under a spinlock: any context but hard interrupt.

use core::ffi::c_void;
use kernel::{
    new_condvar, new_spinlock,
    prelude::*,
    sync::{Arc, CondVar, CondVarTimeoutResult, SpinLock},
    time::msecs_to_jiffies,
};

use crate::{
    bufs::{self, Buf},
    kfi::{kfi_sys as sys, provider::Region},
    ksock::Socket,
};

/// Most buffers of one registration.
pub(crate) const MR_IOV_MAX: usize = 64;

extern "C" {
    /// `kfi_sockets_mem.c`: writes `len` bytes at `addr` back to the
    /// persistence domain (`arch_wb_cache_pmem`) and orders them.
    fn kfi_sockets_persist(addr: *mut c_void, len: usize);
    /// `kfi_sockets_mem.c`: a full memory barrier (commit of plain RAM).
    fn kfi_sockets_barrier();
}

/// One registration.
struct Entry {
    key: u64,
    /// The remote address of the region's first byte.
    offset: u64,
    len: u64,
    access: u64,
    pmem: bool,
    pieces: KVec<Buf>,
    /// Accesses in progress.
    busy: usize,
    /// The sockets of the connections that hold them (one per access):
    /// shut down if the region is closed and they outlast the grace.
    holders: KVec<Arc<Socket>>,
    /// Closed: no new access; removed when `busy` drops to zero.
    dead: bool,
}

struct Inner {
    entries: KVec<Entry>,
}

/// Tries at finding a free random key before giving up (a collision of
/// 64-bit random keys is already a one in 2^58 event for 64 regions).
const KEY_TRIES: usize = 8;

/// A random 64-bit key: what a peer must present to reach a region, so it
/// must not be guessable from other keys. Any context.
fn random_key() -> u64 {
    // SAFETY: `get_random_u64` has no preconditions and may be called in
    // any context.
    unsafe { kernel::bindings::get_random_u64() }
}

/// The regions of one domain.
#[pin_data]
pub(crate) struct MrTable {
    #[pin]
    inner: SpinLock<Inner>,
    /// Woken when an access ends.
    #[pin]
    idle: CondVar,
    /// Serializes atomics at this target.
    #[pin]
    atomics: SpinLock<()>,
}

/// The provider's data of a registered region: closing it unregisters.
pub(crate) struct MrHandle {
    table: Arc<MrTable>,
    key: u64,
}

impl MrTable {
    /// An empty table. Process context.
    pub(crate) fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            try_pin_init!(Self {
                inner <- new_spinlock!(Inner {
                    entries: KVec::new(),
                }),
                idle <- new_condvar!(),
                atomics <- new_spinlock!(()),
            }),
            GFP_KERNEL,
        )
    }

    /// `kfi_mr_regattr`: registers `attr`'s buffers (`KFI_RMA_PMEM` in
    /// `flags` for persistent memory). A non-zero `requested_key` is used
    /// as the key (`ENOKEY` if taken), else the table picks an unused
    /// random one. Process context.
    pub(crate) fn register(
        self: &Arc<Self>,
        attr: &sys::kfi_mr_attr,
        flags: u64,
    ) -> Result<Region<MrHandle>> {
        if attr.iov_count == 0 || attr.iov_count > MR_IOV_MAX {
            return Err(EINVAL);
        }
        let mut pieces = KVec::with_capacity(attr.iov_count, GFP_KERNEL)?;
        pieces.resize(attr.iov_count, Buf::default(), GFP_KERNEL)?;
        // SAFETY: All union members are pointers to a list of `iov_count`
        // entries of the type `iov_type` names (checked by kfabric.ko).
        let list = unsafe { attr.__bindgen_anon_1.mr_iov };
        // SAFETY: As above.
        unsafe { bufs::fill(attr.iov_type, list.cast(), attr.iov_count, &mut pieces) }?;
        let len = bufs::total(&pieces) as u64;
        attr.offset.checked_add(len).ok_or(EINVAL)?;
        let mut inner = self.inner.lock();
        inner.entries.reserve(1, GFP_ATOMIC)?;
        let key = if attr.requested_key != 0 {
            if inner.entries.iter().any(|e| e.key == attr.requested_key) {
                return Err(ENOKEY);
            }
            attr.requested_key
        } else {
            // Never 0, so that a zeroed key never hits.
            (0..KEY_TRIES)
                .map(|_| random_key())
                .find(|&k| k != 0 && !inner.entries.iter().any(|e| e.key == k))
                .ok_or(EBUSY)?
        };
        inner.entries.push(
            Entry {
                key,
                offset: attr.offset,
                len,
                access: attr.access,
                pmem: flags & sys::KFI_RMA_PMEM != 0,
                pieces,
                busy: 0,
                holders: KVec::new(),
                dead: false,
            },
            GFP_ATOMIC,
        )?;
        Ok(Region {
            data: MrHandle {
                table: self.clone(),
                key,
            },
            key,
            desc: core::ptr::null_mut(),
        })
    }

    /// Checks a peer's access of `len` bytes at remote address `addr` of
    /// region `key` with the rights `need` (`KFI_REMOTE_READ`/`_WRITE`),
    /// for the connection on socket `holder`. `ENOKEY`: no such region;
    /// `ERANGE`: outside it; `EACCES`: not allowed.
    pub(crate) fn access(
        self: &Arc<Self>,
        key: u64,
        addr: u64,
        len: u64,
        need: u64,
        holder: &Arc<Socket>,
    ) -> Result<Access> {
        let mut inner = self.inner.lock();
        let e = inner
            .entries
            .iter_mut()
            .find(|e| e.key == key && !e.dead)
            .ok_or(ENOKEY)?;
        let start = addr.checked_sub(e.offset).ok_or(ERANGE)?;
        match start.checked_add(len) {
            Some(end) if end <= e.len => {}
            _ => return Err(ERANGE),
        }
        if e.access & need != need {
            return Err(EACCES);
        }
        let mut pieces = [Buf::default(); MR_RANGE_MAX];
        let n = range(&e.pieces, start as usize, len as usize, &mut pieces)?;
        e.holders.push(holder.clone(), GFP_ATOMIC)?;
        e.busy += 1;
        Ok(Access {
            table: self.clone(),
            key,
            holder: holder.clone(),
            pmem: e.pmem,
            pieces,
            n,
        })
    }

    /// Unregisters `key`: no new access from now on; the accesses in
    /// progress get `mr_close_grace_ms` to end, then the connections that
    /// hold them are aborted (their sockets shut down, so their work items
    /// stop waiting on the peer and let go). Process context.
    fn unregister(&self, key: u64) {
        let busy = |inner: &Inner| inner.entries.iter().any(|e| e.key == key && e.busy > 0);
        let mut inner = self.inner.lock();
        let Some(e) = inner.entries.iter_mut().find(|e| e.key == key) else {
            return;
        };
        e.dead = true;
        // Found again after every wait: other regions may leave meanwhile.
        let mut left = msecs_to_jiffies(crate::mr_close_grace_ms());
        while busy(&inner) && left > 0 {
            left = match self.idle.wait_interruptible_timeout(&mut inner, left) {
                CondVarTimeoutResult::Woken { jiffies } => jiffies,
                // Out of time, or the closer is being killed: abort now.
                _ => 0,
            };
        }
        if busy(&inner) {
            let holders = inner
                .entries
                .iter_mut()
                .find(|e| e.key == key)
                .map(|e| core::mem::take(&mut e.holders));
            drop(inner);
            for s in holders.iter().flatten() {
                s.shutdown();
            }
            drop(holders);
            inner = self.inner.lock();
            // Only on our own work items now, which see their sockets
            // shut down.
            while busy(&inner) {
                self.idle.wait(&mut inner);
            }
        }
        let gone = match inner.entries.iter().position(|e| e.key == key) {
            Some(i) => inner.entries.remove(i).ok(),
            None => None,
        };
        drop(inner);
        drop(gone);
    }

    fn release(&self, key: u64, holder: &Arc<Socket>) {
        let mut inner = self.inner.lock();
        let gone = inner
            .entries
            .iter_mut()
            .find(|e| e.key == key)
            .and_then(|e| {
                e.busy = e.busy.saturating_sub(1);
                let i = e.holders.iter().position(|h| Arc::ptr_eq(h, holder))?;
                e.holders.remove(i).ok()
            });
        drop(inner);
        // Not the last reference (the access holds one): no release here.
        drop(gone);
        self.idle.notify_all();
    }

    /// Runs `f` with this target's atomics serialized.
    pub(crate) fn atomically<R>(&self, f: impl FnOnce() -> R) -> R {
        let _g = self.atomics.lock();
        f()
    }
}

impl Drop for MrHandle {
    fn drop(&mut self) {
        self.table.unregister(self.key);
    }
}

/// Most region buffers one checked range may cross.
pub(crate) const MR_RANGE_MAX: usize = 8;

/// The buffers of `pieces` that cover `len` bytes from `start`, trimmed.
/// `E2BIG` if more than `out` holds.
fn range(pieces: &[Buf], start: usize, len: usize, out: &mut [Buf]) -> Result<usize> {
    let (mut skip, mut left, mut n) = (start, len, 0);
    for p in pieces {
        if left == 0 {
            break;
        }
        if skip >= p.len {
            skip -= p.len;
            continue;
        }
        let take = (p.len - skip).min(left);
        *out.get_mut(n).ok_or(E2BIG)? = Buf {
            base: p.base + skip,
            len: take,
        };
        n += 1;
        left -= take;
        skip = 0;
    }
    Ok(n)
}

/// A checked range of a region, in use: the region cannot be unregistered
/// until this is dropped.
///
/// # Invariants
///
/// `pieces[..n]` lie inside region `key` of `table`, whose `busy` count
/// this access holds, with `holder` (the socket of the connection that
/// uses it) in the region's `holders`.
pub(crate) struct Access {
    table: Arc<MrTable>,
    key: u64,
    holder: Arc<Socket>,
    pmem: bool,
    pieces: [Buf; MR_RANGE_MAX],
    n: usize,
}

impl Access {
    /// The range's buffers, in order.
    pub(crate) fn bufs(&self) -> &[Buf] {
        &self.pieces[..self.n]
    }

    /// The persistence step of commit completion: persistent-memory
    /// regions are written back to the persistence domain; plain RAM gets
    /// a full barrier (it has no persistence domain to reach).
    pub(crate) fn commit(&self) {
        for b in self.bufs() {
            if self.pmem {
                // SAFETY: A range of a registered region (type invariant).
                unsafe { kfi_sockets_persist(b.base as *mut c_void, b.len) };
            }
        }
        // SAFETY: No arguments.
        unsafe { kfi_sockets_barrier() };
    }
}

impl Drop for Access {
    fn drop(&mut self) {
        self.table.release(self.key, &self.holder);
    }
}
