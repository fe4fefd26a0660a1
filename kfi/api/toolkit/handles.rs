// SPDX-License-Identifier: GPL-2.0

//! Connection requests waiting for the ULP's accept or reject, by handle.
//!
//! A `KFI_CONNREQ` event's `info->handle` names a request; `kfi_endpoint`
//! with that info takes it (to accept), `kfi_reject` takes it to answer
//! no. The ULP hands the handle back as a raw pointer, so a provider must
//! not trust it: [`HandleTable::take`] checks it against the table, so a
//! stale or made-up handle is `EINVAL`, never a wild pointer. Handles are
//! never reused (a count, not an address: a freed request's address comes
//! back with the next allocation, and a ULP's stale handle would then take
//! another ULP's request), and never point to memory: they are odd, so
//! no `kfid` can sit there.
//!
//! What a request is belongs to the provider (`T`: a socket, an
//! `rdma_cm_id`, ...). Each request is owned by the passive endpoint that
//! received it, which takes back what the ULP never answered when it
//! closes ([`HandleTable::take_owned_by`]).
//!
//! A provider keeps one table for all its passive endpoints, e.g. in a
//! `kernel::sync::global_lock!` static of its crate (a static here in
//! `kfi/api` would also be one per including crate, but the provider
//! decides its lock and its lifetime):
//!
//! ```ignore
//! kernel::sync::global_lock! {
//!     // SAFETY: Initialized in the module initializer before first use.
//!     unsafe(uninit) static REQUESTS: Mutex<HandleTable<Arc<Socket>>> =
//!         HandleTable::new();
//! }
//! ```
//!
//! The table does no locking of its own; every method is cheap and does
//! not sleep, but `insert` allocates (`GFP_KERNEL`: process context).

use kernel::prelude::*;

use super::super::kfi_sys as sys;

/// Who filed a request: the address of the passive endpoint's state (any
/// value that is unique among the provider's live passive endpoints).
pub(crate) type Owner = usize;

/// A waiting request.
struct Entry<T> {
    handle: usize,
    value: T,
    owner: Owner,
}

/// Requests by handle.
///
/// # Invariants
///
/// No two entries ever handed out, live or gone, share a handle: each is
/// `2 * n + 1` for the `n`-th insert (`next` counts them; 2^63 inserts
/// would wrap it).
pub(crate) struct HandleTable<T> {
    entries: KVec<Entry<T>>,
    next: usize,
}

impl<T> HandleTable<T> {
    /// An empty table (no memory until the first request).
    pub(crate) const fn new() -> Self {
        Self {
            entries: KVec::new(),
            next: 0,
        }
    }

    /// Files `value` for passive endpoint `owner`; returns its handle (for
    /// `kfi_info.handle`: never dereferenced, only compared). `ENOMEM` if
    /// it cannot. Process context.
    pub(crate) fn insert(&mut self, value: T, owner: Owner) -> Result<*mut sys::kfid> {
        let handle = self.next.wrapping_mul(2) | 1;
        self.entries.push(
            Entry {
                handle,
                value,
                owner,
            },
            GFP_KERNEL,
        )?;
        // INVARIANT: a new count for the next one.
        self.next = self.next.wrapping_add(1);
        Ok(core::ptr::without_provenance_mut(handle))
    }

    /// Takes the request `handle` names out of the table; `EINVAL` if no
    /// waiting request has that handle (stale, answered or made up). Any
    /// context.
    pub(crate) fn take(&mut self, handle: *mut sys::kfid) -> Result<T> {
        let i = self
            .entries
            .iter()
            .position(|e| e.handle == handle.addr())
            .ok_or(EINVAL)?;
        let e = self.entries.remove(i).map_err(|_| EINVAL)?;
        Ok(e.value)
    }

    /// Takes one request of passive endpoint `owner` out of the table
    /// (`None`: it has no more). A closing passive endpoint calls this
    /// until `None`, releasing each request outside its lock. Any context.
    pub(crate) fn take_owned_by(&mut self, owner: Owner) -> Option<T> {
        let i = self.entries.iter().position(|e| e.owner == owner)?;
        self.entries.remove(i).ok().map(|e| e.value)
    }

    /// Takes one request for which `f` holds out of the table (`None`: no
    /// more), e.g. those on a device that goes away. Like
    /// [`HandleTable::take_owned_by`], called until `None`. Any context.
    pub(crate) fn take_where(&mut self, f: impl Fn(&T) -> bool) -> Option<T> {
        let i = self.entries.iter().position(|e| f(&e.value))?;
        self.entries.remove(i).ok().map(|e| e.value)
    }

    /// Takes any request out of the table; once it is empty, frees the
    /// table's memory and returns `None` (at module unload a static table
    /// is never dropped, so the provider calls this until `None`). Any
    /// context.
    pub(crate) fn take_any(&mut self) -> Option<T> {
        match self.entries.pop() {
            Some(e) => Some(e.value),
            None => {
                self.entries = KVec::new();
                None
            }
        }
    }

    /// How many requests of passive endpoint `owner` wait (for a bound on
    /// what one listener may hold). Any context.
    pub(crate) fn owned_by(&self, owner: Owner) -> usize {
        self.entries.iter().filter(|e| e.owner == owner).count()
    }

    /// How many requests wait.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no request waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl<T> Default for HandleTable<T> {
    fn default() -> Self {
        Self::new()
    }
}
