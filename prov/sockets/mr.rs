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
//! its connection aborted. Keys the table picks are random.
//!
//! Regions of `kfi_mr_alloc` are mapped and unmapped per I/O: their buffer
//! slots are allocated once, so [`MrTable::map`] and [`MrTable::unmap`]
//! only fill slots and swap keys under the table's lock, allocating
//! nothing; each mapping gets a fresh random key, and an unmapped region
//! has key 0, which never matches. An access refers to the region's
//! buffers in place, so it may cross any number of them. Lookups scan the
//! list under a spinlock (interrupts off): any context but hard interrupt.

use core::ffi::c_void;
use kernel::{
    new_condvar, new_spinlock, new_spinlock_irq,
    prelude::*,
    sync::{Arc, CondVar, CondVarTimeoutResult, SpinLock, SpinLockIrq},
    time::msecs_to_jiffies,
};

use crate::{
    bufs::{self, Buf},
    kfi::{kfi_sys as sys, provider::Region},
    ksock::Socket,
    sock_sys::{kfi_sockets_barrier, kfi_sockets_persist},
};

/// Most buffers of one registration: a bio's worth, as for mappings.
pub(crate) const MR_IOV_MAX: usize = sys::KFI_MR_MAP_SEGS_MAX as usize;

/// One registration.
struct Entry {
    /// Names the region for its handle; never changes.
    id: u64,
    /// What peers present: random, never 0; 0 while a per-I/O region is
    /// unmapped.
    key: u64,
    /// The remote address of the region's first byte.
    offset: u64,
    len: u64,
    access: u64,
    pmem: bool,
    /// The region's buffers are `pieces[..n]`. A per-I/O region keeps all
    /// its slots, so mapping allocates nothing. Not changed while `busy`
    /// (accesses point into it).
    pieces: KVec<Buf>,
    n: usize,
    /// Made by `kfi_mr_alloc`: mapped and unmapped per I/O.
    per_io: bool,
    /// Accesses in progress.
    busy: usize,
    /// The sockets of the connections that hold them, each with its count
    /// of accesses (one entry per connection, not per access, so the list
    /// and its scans are bounded by the connections): shut down if the
    /// region is closed and they outlast the grace.
    holders: KVec<(Arc<Socket>, usize)>,
    /// Closed: no new access; removed when `busy` drops to zero.
    dead: bool,
}

struct Inner {
    entries: KVec<Entry>,
    next_id: u64,
}

impl Inner {
    /// A random key no region has (never 0, so that a zeroed or unmapped
    /// key never hits).
    fn fresh_key(&self) -> Result<u64> {
        (0..KEY_TRIES)
            .map(|_| random_key())
            .find(|&k| k != 0 && !self.entries.iter().any(|e| e.key == k))
            .ok_or(EBUSY)
    }

    fn entry(&mut self, id: u64) -> Option<&mut Entry> {
        self.entries.iter_mut().find(|e| e.id == id)
    }

    /// Adds `e` under a new id; returns the id.
    fn add(&mut self, mut e: Entry) -> Result<u64> {
        e.id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        let id = e.id;
        self.entries.push(e, GFP_ATOMIC)?;
        Ok(id)
    }
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
    inner: SpinLockIrq<Inner>,
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
    id: u64,
}

impl MrTable {
    /// An empty table. Process context.
    pub(crate) fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            try_pin_init!(Self {
                inner <- new_spinlock_irq!(Inner {
                    entries: KVec::new(),
                    next_id: 1,
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
        // SAFETY: `list` is `iov_count` entries of the type `iov_type` names
        // (checked by kfabric.ko); all pages are lowmem on 64-bit kernels.
        unsafe { bufs::fill(attr.iov_type, list.cast(), attr.iov_count, &mut pieces) }?;
        let len = bufs::total(&pieces) as u64;
        attr.offset.checked_add(len).ok_or(EINVAL)?;
        let n = pieces.len();
        let mut inner = self.inner.lock();
        inner.entries.reserve(1, GFP_ATOMIC)?;
        let key = if attr.requested_key != 0 {
            if inner.entries.iter().any(|e| e.key == attr.requested_key) {
                return Err(ENOKEY);
            }
            attr.requested_key
        } else {
            inner.fresh_key()?
        };
        let id = inner.add(Entry {
            id: 0,
            key,
            offset: attr.offset,
            len,
            access: attr.access,
            pmem: flags & sys::KFI_RMA_PMEM != 0,
            pieces,
            n,
            per_io: false,
            busy: 0,
            holders: KVec::new(),
            dead: false,
        })?;
        Ok(Region {
            data: MrHandle {
                table: self.clone(),
                id,
            },
            key,
            desc: core::ptr::null_mut(),
        })
    }

    /// `kfi_mr_alloc`: a per-I/O region with `max_segs` buffer slots and
    /// the rights `access` (`KFI_RMA_PMEM` in `flags` for persistent
    /// memory), unmapped. Process context.
    pub(crate) fn alloc(
        self: &Arc<Self>,
        max_segs: usize,
        access: u64,
        flags: u64,
    ) -> Result<Region<MrHandle>> {
        let mut pieces = KVec::with_capacity(max_segs, GFP_KERNEL)?;
        pieces.resize(max_segs, Buf::default(), GFP_KERNEL)?;
        let mut inner = self.inner.lock();
        inner.entries.reserve(1, GFP_ATOMIC)?;
        let id = inner.add(Entry {
            id: 0,
            key: 0,
            offset: 0,
            len: 0,
            access,
            pmem: flags & sys::KFI_RMA_PMEM != 0,
            pieces,
            n: 0,
            per_io: true,
            busy: 0,
            holders: KVec::new(),
            dead: false,
        })?;
        Ok(Region {
            data: MrHandle {
                table: self.clone(),
                id,
            },
            key: 0,
            desc: core::ptr::null_mut(),
        })
    }

    /// `kfi_mr_map`: gives the unmapped per-I/O region of `h` the buffers
    /// of `m` (checked by kfabric.ko) and a fresh key, which it returns.
    /// `EINVAL`: not a per-I/O region, or more buffers than its slots;
    /// `EBUSY`: mapped, or its last mapping still drains. Any context but
    /// hard interrupt; allocates nothing.
    pub(crate) fn map(&self, h: &MrHandle, m: &sys::kfi_mr_map) -> Result<u64> {
        let mut inner = self.inner.lock();
        let key = inner.fresh_key()?;
        let e = inner.entry(h.id).ok_or(EINVAL)?;
        if !e.per_io {
            return Err(EINVAL);
        }
        if e.key != 0 || e.dead || e.busy != 0 {
            return Err(EBUSY);
        }
        // SAFETY: All union members are pointers to a list of `iov_count`
        // entries of the type `iov_type` names (checked by kfabric.ko).
        let list = unsafe { m.__bindgen_anon_1.mr_iov };
        // SAFETY: `list` is `iov_count` entries of the type `iov_type` names
        // (checked by kfabric.ko; pages are lowmem on 64-bit kernels). No
        // access uses `pieces` (`busy` is 0).
        let n = unsafe { bufs::fill(m.iov_type, list.cast(), m.iov_count, &mut e.pieces) }?;
        let len = bufs::total(&e.pieces[..n]) as u64;
        m.offset.checked_add(len).ok_or(EINVAL)?;
        e.n = n;
        e.len = len;
        e.offset = m.offset;
        e.key = key;
        Ok(key)
    }

    /// `kfi_mr_unmap`: the mapping's key stops working now; `Ok` if no
    /// access is in progress (the region is unmapped, its buffers the
    /// ULP's), else `EBUSY` (call again: accesses end within their frame
    /// deadline). `EINVAL`: not a mapped per-I/O region. Any context but
    /// hard interrupt.
    pub(crate) fn unmap(&self, h: &MrHandle) -> Result {
        let mut inner = self.inner.lock();
        let e = inner.entry(h.id).ok_or(EINVAL)?;
        if !e.per_io || e.key == 0 {
            return Err(EINVAL);
        }
        e.dead = true;
        if e.busy != 0 {
            return Err(EBUSY);
        }
        e.key = 0;
        e.dead = false;
        e.n = 0;
        e.len = 0;
        Ok(())
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
        if key == 0 {
            return Err(ENOKEY);
        }
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
        let pieces = e.pieces.get(..e.n).ok_or(EINVAL)?;
        let (from, skip) = first_piece(pieces, start as usize);
        match e.holders.iter_mut().find(|(h, _)| Arc::ptr_eq(h, holder)) {
            // At most one per access in progress: bounded by `busy`.
            Some((_, n)) => *n += 1,
            None => e.holders.push((holder.clone(), 1), GFP_ATOMIC)?,
        }
        e.busy += 1;
        // INVARIANT: `pieces[from..]` is the region's from the range's
        // first byte on; `busy` now counts this access, so the region
        // keeps its buffers unchanged until it is dropped.
        Ok(Access {
            table: self.clone(),
            id: e.id,
            holder: holder.clone(),
            pmem: e.pmem,
            // SAFETY: `from <= pieces.len()` (`first_piece`).
            first: unsafe { pieces.as_ptr().add(from) },
            count: pieces.len() - from,
            skip,
            len: len as usize,
        })
    }

    /// Unregisters region `id`: no new access from now on; the accesses
    /// in progress get `mr_close_grace_ms` to end, then the connections
    /// that hold them are aborted (their sockets shut down, so their work
    /// items stop waiting on the peer and let go). Process context.
    fn unregister(&self, id: u64) {
        let busy = |inner: &Inner| inner.entries.iter().any(|e| e.id == id && e.busy > 0);
        let mut inner = self.inner.lock();
        let Some(e) = inner.entry(id) else {
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
            let holders = inner.entry(id).map(|e| core::mem::take(&mut e.holders));
            drop(inner);
            for (s, _) in holders.iter().flatten() {
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
        let gone = match inner.entries.iter().position(|e| e.id == id) {
            Some(i) => inner.entries.remove(i).ok(),
            None => None,
        };
        drop(inner);
        drop(gone);
    }

    fn release(&self, id: u64, holder: &Arc<Socket>) {
        let mut inner = self.inner.lock();
        let gone = inner.entry(id).and_then(|e| {
            e.busy = e.busy.saturating_sub(1);
            let i = e.holders.iter().position(|(h, _)| Arc::ptr_eq(h, holder))?;
            let n = &mut e.holders.get_mut(i)?.1;
            *n = n.saturating_sub(1);
            if *n > 0 {
                return None;
            }
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

impl MrHandle {
    /// `kfi_mr_map` of this region ([`MrTable::map`]).
    pub(crate) fn map(&self, m: &sys::kfi_mr_map) -> Result<u64> {
        self.table.map(self, m)
    }

    /// `kfi_mr_unmap` of this region ([`MrTable::unmap`]).
    pub(crate) fn unmap(&self) -> Result {
        self.table.unmap(self)
    }
}

impl Drop for MrHandle {
    fn drop(&mut self) {
        self.table.unregister(self.id);
    }
}

/// The index of the buffer of `pieces` that holds byte `start` of the
/// region, and the offset of that byte in it (`(pieces.len(), 0)` at the
/// end).
fn first_piece(pieces: &[Buf], start: usize) -> (usize, usize) {
    let mut skip = start;
    for (i, p) in pieces.iter().enumerate() {
        if skip < p.len {
            return (i, skip);
        }
        skip -= p.len;
    }
    (pieces.len(), 0)
}

/// A checked range of a region, in use: the region cannot be unregistered
/// or remapped until this is dropped.
///
/// # Invariants
///
/// `first` points to `count` buffers of region `id` of `table`, the first
/// of which holds the range's first byte at offset `skip`; the range's
/// `len` bytes lie inside them. This access holds one of the region's
/// `busy` counts and one of the counts of `holder` (the socket of the
/// connection that uses it) in the region's `holders`, so the buffers stay allocated and
/// unchanged while it lives.
pub(crate) struct Access {
    table: Arc<MrTable>,
    id: u64,
    holder: Arc<Socket>,
    pmem: bool,
    first: *const Buf,
    count: usize,
    skip: usize,
    len: usize,
}

// SAFETY: `first` is only read, and the buffers it points to stay valid and
// unchanged while the access lives (type invariant), from any thread.
unsafe impl Send for Access {}
// SAFETY: As for `Send`: shared use only reads.
unsafe impl Sync for Access {}

impl Access {
    /// The range's buffers, in order, trimmed to the range.
    pub(crate) fn bufs(&self) -> impl Iterator<Item = Buf> + '_ {
        // SAFETY: `count` buffers at `first`, valid and unchanged while
        // `self` lives (type invariant).
        let pieces = unsafe { core::slice::from_raw_parts(self.first, self.count) };
        let (mut skip, mut left) = (self.skip, self.len);
        pieces.iter().map_while(move |p| {
            if left == 0 {
                return None;
            }
            let take = p.len.saturating_sub(skip).min(left);
            let b = Buf {
                base: p.base.wrapping_add(skip),
                len: take,
            };
            left -= take;
            skip = 0;
            Some(b)
        })
    }

    /// The range's length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The persistence step of commit completion: persistent-memory
    /// regions are written back to the persistence domain; plain RAM gets
    /// a full barrier (it has no persistence domain to reach).
    pub(crate) fn commit(&self) {
        if self.pmem {
            for b in self.bufs() {
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
        self.table.release(self.id, &self.holder);
    }
}
