// SPDX-License-Identifier: GPL-2.0

//! A registered region's MR as its domain tracks it: what a device's
//! removal frees before the region is closed (`domain.rs`), and what a
//! connection registers again after its peer invalidated it (`conn.rs`),
//! apart from the registration (`mr.rs`) so that neither depends on it.

use kernel::{new_mutex, prelude::*, sync::Mutex};

use crate::{ib::frmr::FastReg, reglink::RegLink};

/// How long a region's registration made again after a peer invalidated
/// it may take ([`IbRegion::revalidate`]). On the domain's registration
/// link it waits for no peer; on a connection (a device with no link) it
/// waits behind what that send queue holds, which a peer that reads
/// nothing keeps there.
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

    /// Registers the MR again, as it was, after a peer's send with
    /// invalidate made its key invalid for every peer: on the domain's
    /// registration `link` when it has one, which no peer can stall
    /// (`ENOTCONN` if it went down meanwhile), else through `post` (a QP
    /// of the domain's PD: the offending connection's). Waits for the
    /// registration [`REVALIDATE_MS`] at most: `ETIMEDOUT` then; the link
    /// is shut down, which flushes the request (built again on next use);
    /// a connection's QP the caller ends (a close of the region waits for
    /// that flush). A registration of a key that is still valid fails on
    /// the device. Process context.
    pub(crate) fn revalidate(
        &self,
        link: Option<&RegLink>,
        post: impl FnOnce(&mut FastReg, u32) -> Result,
    ) -> Result {
        let _serial = link.map(|k| k.serial());
        let mut g = self.fr.lock();
        let fr = (*g).as_mut().ok_or(ENODEV)?;
        let on_link = match link {
            Some(k) => {
                k.post(fr, self.rights)?;
                Some(k)
            }
            None => {
                post(fr, self.rights)?;
                None
            }
        };
        let r = fr.wait(REVALIDATE_MS);
        if let (Err(e), Some(k)) = (r, on_link) {
            // A failed request leaves the link's QP in the error state; a
            // late one is flushed with it.
            k.shutdown();
            if e == ETIMEDOUT {
                let _ = fr.wait(0);
            }
        }
        r
    }
}
