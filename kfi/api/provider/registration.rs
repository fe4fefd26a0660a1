// SPDX-License-Identifier: GPL-2.0

//! Registering a provider with kfabric.ko, and deregistering it.

use core::marker::PhantomData;
use kernel::{error::to_result, prelude::*, str::CStrExt, ThisModule};

use super::{super::kfi_sys as sys, glue::Tables, traits::Provider};

/// Provider `P` registered with kfabric.ko; deregistered when dropped.
///
/// # Invariants
///
/// `desc` was registered by a successful `kfi_provider_register` and stays
/// at this address (boxed) until deregistered.
pub(crate) struct Registration<P: Provider> {
    desc: KBox<sys::kfi_provider>,
    _p: PhantomData<P>,
}

// SAFETY: The descriptor is only read after registration (by kfabric.ko,
// from any thread).
unsafe impl<P: Provider> Send for Registration<P> {}
// SAFETY: See `Send`.
unsafe impl<P: Provider> Sync for Registration<P> {}

impl<P: Provider> Registration<P> {
    /// Registers `P`, implemented by `module`. Process context.
    pub(crate) fn register(module: &'static ThisModule) -> Result<Self> {
        let mut desc = KBox::new(
            sys::kfi_provider {
                name: P::NAME.as_char_ptr(),
                version: P::VERSION,
                owner: module.as_ptr(),
                getinfo: if P::HAS_GETINFO {
                    Some(Tables::<P>::getinfo)
                } else {
                    None
                },
                fabric: if P::HAS_FABRIC {
                    Some(Tables::<P>::fabric)
                } else {
                    None
                },
            },
            GFP_KERNEL,
        )?;
        // SAFETY: The descriptor is valid and boxed: it keeps its address
        // until `drop` deregisters it.
        to_result(unsafe {
            sys::kfi_provider_register(super::super::kfabric::API_VERSION, &mut *desc)
        })?;
        // INVARIANT: registered just now.
        Ok(Self {
            desc,
            _p: PhantomData,
        })
    }
}

impl<P: Provider> Drop for Registration<P> {
    fn drop(&mut self) {
        // SAFETY: Registered (type invariant). Objects of the provider pin
        // its module, so none is open when the module goes.
        let ret = unsafe { sys::kfi_provider_deregister(&mut *self.desc) };
        if ret != 0 {
            pr_err!("provider deregistration failed: {}\n", ret);
        }
    }
}
