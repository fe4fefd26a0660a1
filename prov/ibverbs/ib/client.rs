// SPDX-License-Identifier: GPL-2.0

//! The provider's ib_client: ib_core tells it about every RDMA device as
//! it comes (`add`) and goes (`remove`, which must release everything the
//! provider holds on the device before it returns).

use core::ffi::c_int;
use kernel::{prelude::*, types::Opaque};

use crate::ib_sys as sys;

/// What the client does when devices come and go. Both run in process
/// context and may sleep.
pub(crate) trait DeviceWatch {
    /// A device appeared.
    ///
    /// # Safety
    ///
    /// `dev` is registered until `removed` is called for it.
    unsafe fn added(dev: *mut sys::ib_device) -> Result;
    /// A device is going away: nothing may use it once this returns.
    fn removed(dev: *mut sys::ib_device);
}

/// A registered client.
///
/// # Invariants
///
/// `client` is registered with ib_core from `register` until drop, and
/// does not move (it is boxed).
pub(crate) struct Client {
    client: Pin<KBox<Opaque<sys::ib_client>>>,
}

// SAFETY: ib_core may call the client from any thread; the structure is
// only touched by ib_core after registration.
unsafe impl Send for Client {}
// SAFETY: See `Send`.
unsafe impl Sync for Client {}

/// ib_core's `add` callback.
///
/// # Safety
///
/// Called by ib_core only, with a registered device.
unsafe extern "C" fn add<W: DeviceWatch>(dev: *mut sys::ib_device) -> c_int {
    // SAFETY: ib_core calls `add` with a registered device and calls
    // `remove` before it unregisters it.
    match unsafe { W::added(dev) } {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// ib_core's `remove` callback.
///
/// # Safety
///
/// Called by ib_core only, for a device `add` was called with.
unsafe extern "C" fn remove<W: DeviceWatch>(dev: *mut sys::ib_device, _data: *mut c_void) {
    W::removed(dev);
}

impl Client {
    /// Registers a client named `name`; ib_core calls `W::added` for each
    /// device already present before this returns. Process context.
    pub(crate) fn register<W: DeviceWatch>(name: &'static CStr) -> Result<Self> {
        let client = KBox::pin(
            Opaque::new(sys::ib_client {
                name: name.as_char_ptr(),
                add: Some(add::<W>),
                remove: Some(remove::<W>),
                ..Default::default()
            }),
            GFP_KERNEL,
        )?;
        // SAFETY: The client structure is initialized, pinned and outlives
        // its registration (unregistered in drop).
        kernel::error::to_result(unsafe { sys::ib_register_client(client.get()) })?;
        // INVARIANT: Registered above.
        Ok(Self { client })
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        // SAFETY: Registered (invariant); ib_core calls `remove` for every
        // device and waits for running callbacks before returning.
        unsafe { sys::ib_unregister_client(self.client.get()) };
    }
}
