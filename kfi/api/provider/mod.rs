// SPDX-License-Identifier: GPL-2.0

//! Writing a kfabric provider in Rust.
//!
//! A provider implements [`Provider`] and the object traits ([`Fabric`],
//! [`Domain`], [`Endpoint`], [`PassiveEndpoint`]); [`Registration`] builds
//! the C descriptor and ops tables from them (`#[vtable]`: a method the
//! provider leaves out becomes a NULL slot, which kfabric.ko answers with
//! `-ENOSYS`) and registers the provider. Every object is an `Object`: the
//! C header kfabric.ko sees, followed by the provider's Rust value, dropped
//! when kfabric.ko closes the object. Completion queues, event queues and
//! counters are kfabric.ko's util ones; the provider reaches the ones bound
//! to its endpoints through [`Bound`].
//!
//! Contexts: the open, bind and connection-management methods run in
//! process context and may sleep; the data transfer methods (`sendmsg`,
//! `readmsg`, ...) and `cancel` may be called from any context but hard
//! interrupt and must not sleep.
//!
//! By concept: [`traits`] (what a provider implements), [`refs`] (what it
//! holds of kfabric.ko's objects), [`info`] (entries it lists), [`object`]
//! and [`glue`] with [`glue_ep`] (how its objects and ops tables look to
//! C), and
//! [`registration`].

mod glue;
mod glue_ep;
mod info;
mod object;
mod refs;
mod registration;
mod traits;

// Each crate that includes kfi/api uses a part of this API, if any.
#[allow(unused_imports)]
pub(crate) use info::Info;
#[allow(unused_imports)]
pub(crate) use refs::{AvRef, Bound, CntrRef, CqRef, EqRef, FidRef};
#[allow(unused_imports)]
pub(crate) use registration::Registration;
#[allow(unused_imports)]
pub(crate) use traits::{
    AtomicKind, Domain, Endpoint, EndpointAttr, Fabric, NoPassiveEndpoint, PassiveEndpoint,
    Provider, Region,
};
