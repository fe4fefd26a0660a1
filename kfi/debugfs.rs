// SPDX-License-Identifier: GPL-2.0

//! `/sys/kernel/debug/kfabric/`: the registered providers, live objects,
//! and `getinfo` (see `debugfs_getinfo.rs`).

use core::fmt;
use kernel::{
    debugfs::{Dir, File},
    prelude::*,
};

use crate::{debugfs_getinfo as getinfo, object, registry};

/// The debugfs files; removed when dropped.
pub(crate) struct Debugfs {
    _providers: Pin<KBox<File<()>>>,
    _objects: Pin<KBox<File<()>>>,
    _getinfo: Pin<KBox<GetinfoFile>>,
    _dir: Dir,
}

/// The `getinfo` file with the hints last written to it.
#[pin_data]
struct GetinfoFile {
    #[pin]
    file: File<getinfo::State>,
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
        let d = &dir;
        let getinfo = KBox::pin_init(
            try_pin_init!(GetinfoFile {
                file <- d.read_write_callback_file(
                    c"getinfo",
                    getinfo::state(),
                    &getinfo::show,
                    &getinfo::write,
                ),
            }),
            GFP_KERNEL,
        )?;
        Ok(Self {
            _providers: providers,
            _objects: objects,
            _getinfo: getinfo,
            _dir: dir,
        })
    }
}
