// SPDX-License-Identifier: GPL-2.0

//! The Rust side of kfabric's API, shared by source inclusion:
//! `#[path = ".../kfi/api/mod.rs"] mod kfi;` in a crate root.
//!
//! Each including crate uses a part of it, hence `dead_code` is allowed
//! in each copy; what no module uses at all is an error of
//! `scripts/api-dead-code.sh` (run by `make clippy` and `make check`).

#[allow(dead_code)]
pub(crate) mod kfabric;
pub(crate) mod kfi_sys;
#[allow(dead_code)]
pub(crate) mod provider;
#[allow(dead_code)]
pub(crate) mod ring;
#[allow(dead_code)]
pub(crate) mod toolkit;
#[allow(dead_code)]
pub(crate) mod ulp;
