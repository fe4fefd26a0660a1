// SPDX-License-Identifier: GPL-2.0

//! A registered region's MR as its domain tracks it: what a device's
//! removal frees before the region is closed (`domain.rs`), and what a
//! connection registers again after its peer invalidated it (`conn.rs`),
//! apart from the registration (`mr.rs`) so that neither depends on it.

use kernel::{new_mutex, prelude::*, sync::Mutex};

use crate::ib::frmr::FastReg;

/// How long a region's registration made again after a peer invalidated
/// it may take ([`IbRegion::revalidate`]): it waits behind what the
/// connection's send queue holds, which a peer that reads nothing keeps
/// there.
const REVALIDATE_MS: u32 = 1000;

/// The MR of an open region.
#[pin_data]
pub(crate) struct IbRegion {
    /// The MR; `None` once the device is gone or the region closed.
    #[pin]
    fr: Mutex<Option<FastReg>>,
    /// Its remote key and the access rights it was registered with.
    key: u32,
    rights: u32,
}

impl IbRegion {
    /// A region holding `fr`, registered with `rights`.
    pub(crate) fn new(fr: FastReg, rights: u32) -> impl PinInit<Self> {
        let key = fr.rkey();
        pin_init!(Self {
            fr <- new_mutex!(Some(fr)),
            key,
            rights,
        })
    }

    /// Its remote key.
    pub(crate) fn key(&self) -> u32 {
        self.key
    }

    /// Frees the MR now (the device is going, or the region closes),
    /// which invalidates its key. Process context.
    pub(crate) fn device_gone(&self) {
        drop(self.fr.lock().take());
    }

    /// Registers the MR again, as it was, through `post` (which posts the
    /// registration on a QP of the domain's PD), after a peer's send with
    /// invalidate made its key invalid for every peer. Waits for the
    /// registration [`REVALIDATE_MS`] at most: `ETIMEDOUT` then, and the
    /// caller ends the QP it posted on, which flushes it (a close of the
    /// region waits for that). A registration of a key that is still
    /// valid fails on the device, with the QP it went on. Process
    /// context.
    pub(crate) fn revalidate(&self, post: impl FnOnce(&mut FastReg, u32) -> Result) -> Result {
        let mut g = self.fr.lock();
        let fr = (*g).as_mut().ok_or(ENODEV)?;
        post(fr, self.rights)?;
        fr.wait(REVALIDATE_MS)
    }
}
