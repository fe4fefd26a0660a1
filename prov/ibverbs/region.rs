// SPDX-License-Identifier: GPL-2.0

//! A registered region's MR as its domain tracks it: what a device's
//! removal frees before the region is closed (`domain.rs`), apart from
//! the registration (`mr.rs`) so that the domain does not depend on it.

use kernel::{new_mutex, prelude::*, sync::Mutex};

use crate::ib::frmr::FastReg;

/// The MR of an open region.
#[pin_data]
pub(crate) struct IbRegion {
    /// The MR; `None` once the device is gone or the region closed.
    #[pin]
    fr: Mutex<Option<FastReg>>,
}

impl IbRegion {
    /// A region holding the registered MR `fr`.
    pub(crate) fn new(fr: FastReg) -> impl PinInit<Self> {
        pin_init!(Self {
            fr <- new_mutex!(Some(fr)),
        })
    }

    /// Frees the MR now (the device is going, or the region closes),
    /// which invalidates its key. Process context.
    pub(crate) fn device_gone(&self) {
        drop(self.fr.lock().take());
    }
}
