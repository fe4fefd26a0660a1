// SPDX-License-Identifier: GPL-2.0

//! Safe wrappers over ib_core and rdma_cm: every raw call of the provider
//! lives in this directory, each with the reason it is sound.

pub(crate) mod addr;
pub(crate) mod client;
pub(crate) mod cm;
pub(crate) mod device;
pub(crate) mod dma;
pub(crate) mod frmr;
pub(crate) mod verbs;
