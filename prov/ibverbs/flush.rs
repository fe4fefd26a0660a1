// SPDX-License-Identifier: GPL-2.0

//! Where a write's flushing read goes (see `rma.rs`): a few bytes of a
//! region the peer registered for it, named in the connection's private
//! data, rather than nothing at the write's own region.
//!
//! siw answers an empty read that waited in its inbound read queue with
//! the length and bytes of the last entry it sent (ibverbs.rst, *Delivery
//! and commit completion*), which ends the connection. A read of
//! [`FLUSH_LEN`] bytes of such a region takes no such path. So each
//! endpoint on an iWARP device registers [`FLUSH_LEN`] zeroed bytes for
//! remote reads and appends their key and address to the private data of
//! its connect or accept, after the ULP's bytes ([`Trailer`]); a peer
//! that sends none (an older one, or an InfiniBand or RoCE device, whose
//! private data is short and whose empty reads work) gets empty reads.

use core::sync::atomic::{AtomicU32, Ordering};
use kernel::{prelude::*, sync::Arc};

use crate::{
    domain::DomShared,
    kfi::kfi_sys as ksys,
    mr::{self, MrHandle},
};

/// Bytes a flushing read takes from the peer's region.
pub(crate) const FLUSH_LEN: usize = 8;

/// Bytes of the trailer in private data.
pub(crate) const TRAILER_LEN: usize = 16;

/// Bytes of the memory behind an endpoint's flush region: an allocation
/// of its own, of which the device reads the first [`FLUSH_LEN`] (zeros
/// that nothing writes).
const MEM_LEN: usize = 64;

/// What a trailer starts with.
const MAGIC: [u8; 4] = *b"KFFR";

/// A peer's flush region: its address and key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FlushAt {
    pub(crate) addr: u64,
    pub(crate) key: u32,
}

/// What the test-only path flips in the key of the next trailer sent.
static KEY_TAMPER: AtomicU32 = AtomicU32::new(0);

/// Test-only path (exported for `kfi_test_ibverbs`, which plays a peer
/// that names a wrong flush region with it): the key of the next trailer
/// any endpoint of this provider sends has the bits of `xor` flipped; 0
/// stops it. `-EPERM` without the `test_hooks` parameter.
#[no_mangle]
pub(crate) extern "C" fn kfi_ibverbs_test_flush_key(xor: u32) -> c_int {
    if let Err(e) = crate::test_hooks() {
        return e.to_errno();
    }
    KEY_TAMPER.store(xor, Ordering::SeqCst);
    0
}

/// The trailer's bytes: [`MAGIC`], the key and the address, little
/// endian.
pub(crate) struct Trailer([u8; TRAILER_LEN]);

impl Trailer {
    pub(crate) fn of(at: FlushAt) -> Self {
        let key = at.key ^ KEY_TAMPER.swap(0, Ordering::SeqCst);
        let mut b = [0u8; TRAILER_LEN];
        b[..4].copy_from_slice(&MAGIC);
        b[4..8].copy_from_slice(&key.to_le_bytes());
        b[8..].copy_from_slice(&at.addr.to_le_bytes());
        Self(b)
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.0
    }

    /// The flush region that `extra`, the bytes after the ULP's in a
    /// peer's private data, names; `None` when they hold no trailer (the
    /// IB CM pads private data with zeros).
    pub(crate) fn parse(extra: &[u8]) -> Option<FlushAt> {
        let b = extra.get(..TRAILER_LEN)?;
        if b[..4] != MAGIC {
            return None;
        }
        let key = u32::from_le_bytes(b[4..8].try_into().ok()?);
        let addr = u64::from_le_bytes(b[8..].try_into().ok()?);
        Some(FlushAt { addr, key })
    }
}

/// An endpoint's own flush region: [`FLUSH_LEN`] zeroed bytes that peers
/// may read (and nothing else).
///
/// # Invariants
///
/// `_mr` registers `_mem`, and is declared first so that it is dropped
/// (the MR freed) before the memory.
pub(crate) struct FlushRegion {
    _mr: MrHandle,
    _mem: KBox<[u8; MEM_LEN]>,
    at: FlushAt,
}

impl FlushRegion {
    /// Registers one on `dom`. Process context (it waits for the
    /// registration).
    pub(crate) fn new(dom: &Arc<DomShared>) -> Result<Self> {
        let mem = KBox::new([0u8; MEM_LEN], GFP_KERNEL)?;
        let addr = mem.as_ptr() as usize;
        // SAFETY: `mem` is kept with the region and freed after it
        // (invariant); the box's memory does not move.
        let (mr, key) =
            unsafe { mr::register_kernel(dom, addr, FLUSH_LEN, ksys::KFI_REMOTE_READ) }?;
        let at = FlushAt {
            addr: mr::kernel_iova(addr),
            key: u32::try_from(key).map_err(|_| EINVAL)?,
        };
        // INVARIANT: `mr` registers `mem`.
        Ok(Self {
            _mr: mr,
            _mem: mem,
            at,
        })
    }

    /// Where peers read it.
    pub(crate) fn at(&self) -> FlushAt {
        self.at
    }
}
