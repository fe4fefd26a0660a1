// SPDX-License-Identifier: GPL-2.0

//! The safe Rust API for kfabric's users (ULPs): typed objects whose
//! lifetimes keep the close order the core requires, completions read as
//! `Result<Completion, CqError>`, connection events as [`CmEvent`].
//!
//! ```ignore
//! let info = Hints::provider(c"sockets")?.getinfo(c"127.0.0.1", c"7000", 0)?;
//! let fabric = Fabric::open(info.entry())?;
//! let domain = fabric.domain(info.entry())?;
//! let (eq, cq) = (fabric.eq(16)?, domain.cq(16)?);
//! let ep = domain.endpoint(info.entry())?;
//! ep.bind_cq(&cq, sys::KFI_TRANSMIT | sys::KFI_RECV)?;
//! ep.bind_eq(&eq)?;
//! ep.enable()?;
//! ep.connect(b"hello")?;
//! let CmEvent::Connected { .. } = eq.sread(5000)? else { return Err(EPROTO) };
//! // SAFETY: `buf` lives, untouched, until its completion is read below.
//! unsafe { ep.send(&buf, 1, 0) }?;
//! let done = cq.sread(5000)?; // Ok(Completion { context: 1, .. })
//! ```
//!
//! Opening, binding and connection management are process context (they
//! may sleep); posting ([`Endpoint::send`] and friends) and [`Cq::read`]
//! work in any context but hard interrupt; the `sread` calls sleep.
//!
//! Posting is `unsafe`: a provider reads or writes the buffers after the
//! call returns, until the operation's completion is reported, which the
//! type system cannot follow through the C ABI. The contract is written on
//! each call.

mod cntr;
mod completion;
mod events;
mod handle;
mod handle_post;
mod hints;
mod mr_io;
mod objects;
mod post;
mod sockaddr;
mod unsignaled;

// Each crate that includes kfi/api uses a part of this API, if any.
/// The entries the calls take (a getinfo list's, a request's).
#[allow(unused_imports)]
pub(crate) use super::kfabric::Info;
#[allow(unused_imports)]
pub(crate) use cntr::Cntr;
#[allow(unused_imports)]
pub(crate) use completion::{Completion, CqError};
#[allow(unused_imports)]
pub(crate) use events::{CmEvent, ConnReq, PrivateData};
#[allow(unused_imports)]
pub(crate) use handle::open_fabric;
#[allow(unused_imports)]
pub(crate) use hints::Hints;
#[allow(unused_imports)]
pub(crate) use objects::{Cq, Domain, Endpoint, Eq, Fabric, Mr, PassiveEndpoint};
#[allow(unused_imports)]
pub(crate) use post::msg;
