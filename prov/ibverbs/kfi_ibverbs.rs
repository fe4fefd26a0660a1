// SPDX-License-Identifier: GPL-2.0

//! kfi_ibverbs.ko: the kfabric provider over in-kernel ib_core and rdma_cm.
//!
//! For now the provider only registers itself as `ibverbs`; it opens no
//! fabric yet, so kfabric answers its calls with -ENOSYS.

use kernel::prelude::*;

#[path = "../../kfi/api/mod.rs"]
mod kfi;

use kfi::kfabric::{version, Registration, StaticProvider};

module! {
    type: KfiIbverbs,
    name: "kfi_ibverbs",
    authors: ["kfabric developers"],
    description: "kfabric provider over ib_core and rdma_cm (siw, rxe, HCAs)",
    license: "GPL",
}

static PROVIDER: StaticProvider = StaticProvider::new(c"ibverbs", version(0, 1), None);

struct KfiIbverbs {
    _reg: Registration,
}

impl kernel::Module for KfiIbverbs {
    fn init(module: &'static ThisModule) -> Result<Self> {
        let reg = Registration::register(&PROVIDER, module)?;
        Ok(Self { _reg: reg })
    }
}
