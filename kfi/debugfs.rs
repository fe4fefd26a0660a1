// SPDX-License-Identifier: GPL-2.0

//! `/sys/kernel/debug/kfabric/`: the registered providers and live objects.

use core::fmt;
use kernel::{
    debugfs::{Dir, File},
    prelude::*,
};

use crate::{object, registry};

/// The debugfs files; removed when dropped.
pub(crate) struct Debugfs {
    _providers: Pin<KBox<File<()>>>,
    _objects: Pin<KBox<File<()>>>,
    _dir: Dir,
}

/// `providers`: one line per provider: name, version, open objects.
fn show_providers(_: &(), f: &mut fmt::Formatter<'_>) -> fmt::Result {
    registry::for_each(|e| {
        let p = e.provider();
        writeln!(
            f,
            "{} {}.{} objects={}",
            e.name().to_str().unwrap_or("?"),
            p.version >> 16,
            p.version & 0xffff,
            e.objects()
        )
    })
}

/// `objects`: one line per object class: name, live count.
fn show_objects(_: &(), f: &mut fmt::Formatter<'_>) -> fmt::Result {
    (1..object::classes())
        .try_for_each(|c| writeln!(f, "{} {}", object::class_name(c), object::live(c)))
}

impl Debugfs {
    pub(crate) fn new() -> Result<Self> {
        let dir = Dir::new(c"kfabric");
        let providers = KBox::pin_init(
            dir.read_callback_file(c"providers", (), &show_providers),
            GFP_KERNEL,
        )?;
        let objects = KBox::pin_init(
            dir.read_callback_file(c"objects", (), &show_objects),
            GFP_KERNEL,
        )?;
        Ok(Self {
            _providers: providers,
            _objects: objects,
            _dir: dir,
        })
    }
}
