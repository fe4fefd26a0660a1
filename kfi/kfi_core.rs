// SPDX-License-Identifier: GPL-2.0

//! kfabric.ko: the kernel fabric interface core.
//!
//! Providers register here at module load; ULPs reach them through the
//! exported `kfi_*` calls, which check their arguments and dispatch to the
//! provider that created the object. Each open object holds a
//! [`registry::ProviderRef`], which pins its provider (registration and
//! module) until the object is closed.

use kernel::prelude::*;

#[path = "api/kfi_sys.rs"]
mod kfi_sys;

#[macro_use]
mod slot;

mod buffers;
mod control;
mod data;
mod debugfs;
mod debugfs_getinfo;
mod exports;
mod info;
mod live;
mod mr_io;
mod object;
mod overflow;
mod queues;
mod registry;
mod strerror;
mod util_av;
mod util_cntr;
mod util_cq;
mod util_eq;
// Shared with kfi/api; scripts/api-dead-code.sh checks that some module
// uses each of its items.
#[allow(dead_code)]
#[path = "api/ring.rs"]
mod util_ring;
mod util_wait;

module! {
    type: Kfabric,
    name: "kfabric",
    authors: ["kfabric developers"],
    description: "Kernel fabric interface: provider registry and kfi_* dispatch",
    license: "GPL",
}

struct Kfabric {
    _debugfs: debugfs::Debugfs,
}

impl kernel::Module for Kfabric {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        // SAFETY: Called exactly once, before any export can be reached.
        unsafe {
            registry::init();
            object::init();
            live::init();
        }
        let debugfs = debugfs::Debugfs::new()?;
        pr_info!(
            "API {}.{} ready\n",
            kfi_sys::KFI_MAJOR_VERSION,
            kfi_sys::KFI_MINOR_VERSION
        );
        Ok(Self { _debugfs: debugfs })
    }
}

impl Drop for Kfabric {
    fn drop(&mut self) {
        registry::release();
        live::release();
    }
}
