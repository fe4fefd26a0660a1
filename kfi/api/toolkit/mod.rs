// SPDX-License-Identifier: GPL-2.0

//! The provider toolkit: the pieces every provider needs besides the
//! contract in [`super::provider`], written once and shared by source
//! like the rest of `kfi/api` (each including crate compiles its own
//! copy, so nothing here is shared state between two providers).
//!
//! - [`workers`]: blocking work on a workqueue of the provider's,
//!   counted so that an object's close can wait for all of it;
//! - [`own_queue`]: a workqueue of the module's own, destroyed (and so
//!   drained) at unload;
//! - [`task`]: a closure run once as a work item of the calling module
//!   (the workers' and the benchmark's threads);
//! - [`handles`]: the handle table behind `KFI_CONNREQ` handles, checked
//!   and owned by the passive endpoint that received the request;
//! - [`cm`]: connection events and error entries on an [`EqRef`];
//! - [`completion`]: completions and error completions on a [`CqRef`];
//! - [`segments`]: a ULP's kvec / bio_vec / scatterlist as segments
//!   (pages or kernel addresses) for a provider to map;
//! - [`tags`]: tagged receives matched with a bounded unexpected queue.
//!
//! The ring of slots the util queues and providers' operation queues use
//! is [`super::ring`].
//!
//! [`EqRef`]: super::provider::EqRef
//! [`CqRef`]: super::provider::CqRef

pub(crate) mod cm;
pub(crate) mod completion;
pub(crate) mod handles;
pub(crate) mod own_queue;
pub(crate) mod segments;
pub(crate) mod tags;
pub(crate) mod task;
pub(crate) mod workers;
