// SPDX-License-Identifier: GPL-2.0

//! The network namespace of a `kfi_info` entry.

use kernel::bindings;

use crate::kfi::kfi_sys as ksys;

/// A namespace pointer from `kfi_domain_attr.net` (NULL: the initial
/// one), kept alive by the ULP while objects opened from it exist (the
/// contract of that field).
#[derive(Clone, Copy)]
pub(crate) struct NetPtr(pub(crate) *mut bindings::net);

// SAFETY: Only passed to rdma_cm and the routing code, which may use a
// namespace from any thread.
unsafe impl Send for NetPtr {}
// SAFETY: See `Send`.
unsafe impl Sync for NetPtr {}

impl NetPtr {
    /// The namespace of `info`.
    pub(crate) fn of(info: &ksys::kfi_info) -> Self {
        // SAFETY: An entry's domain attributes are NULL or valid.
        let d = unsafe { info.domain_attr.as_ref() };
        Self(d.map_or(core::ptr::null_mut(), |d| d.net.cast()))
    }
}
