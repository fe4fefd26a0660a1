// SPDX-License-Identifier: GPL-2.0

//! kfi_sockets.ko: the kfabric provider over kernel TCP.
//!
//! For now the provider only registers itself as `sockets`; it opens no
//! fabric yet, so kfabric answers its calls with -ENOSYS.

use kernel::prelude::*;

#[path = "../../kfi/api/mod.rs"]
mod kfi;

use kfi::kfabric::{version, Registration, StaticProvider};

module! {
    type: KfiSockets,
    name: "kfi_sockets",
    authors: ["kfabric developers"],
    description: "kfabric provider over kernel TCP sockets",
    license: "GPL",
}

static PROVIDER: StaticProvider = StaticProvider::new(c"sockets", version(0, 1), None);

struct KfiSockets {
    _reg: Registration,
}

impl kernel::Module for KfiSockets {
    fn init(module: &'static ThisModule) -> Result<Self> {
        let reg = Registration::register(&PROVIDER, module)?;
        Ok(Self { _reg: reg })
    }
}
