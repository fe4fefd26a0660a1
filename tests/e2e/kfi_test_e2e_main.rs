// SPDX-License-Identifier: GPL-2.0

//! kfi_test_e2e.ko: the provider-agnostic end-to-end suite `kfi_e2e`.
//!
//! Every case drives a provider only through kfabric.ko's API, the way a
//! ULP does: a server side (its own fabric, domain, EQ and registered
//! memory) and a client side connect, then exchange messages, tagged
//! messages, RMA and atomics with every byte checked, and go through the
//! error paths. The provider and the server's address are module
//! parameters (kfi_test_e2e_param.c), so the next provider runs the very
//! same cases: `insmod kfi_test_e2e.ko provider=NAME server_node=ADDR`.
//! With `server_netns_pid=PID` the server side lives in that task's
//! network namespace (the veth topology of tests/guest/run-suites.sh), and
//! `client_node` is the address the client's RDM endpoints listen on.

use core::ffi::CStr;
use kernel::prelude::*;

#[path = "../../kfi/api/mod.rs"]
mod kfi;
// Shared by source inclusion; each module uses a part.
#[allow(dead_code)]
#[path = "../common/net.rs"]
mod net;
#[path = "../common/pattern.rs"]
mod pattern;

// The cases of `kfi_e2e`, one concept a file; `sides` is what they share.
mod atomics;
mod cm;
mod iov;
mod msg;
mod per_io;
mod rdm;
mod rma;
mod sides;
mod tagged;

// The suite `kfi_e2e_ops`.
mod ops;

module! {
    type: KfiTestE2e,
    name: "kfi_test_e2e",
    authors: ["kfabric developers"],
    description: "Provider-agnostic end-to-end tests of kfabric",
    license: "GPL",
}

struct KfiTestE2e;

impl kernel::Module for KfiTestE2e {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        // The suite runs after init, so the namespace is held throughout.
        // SAFETY: No arguments; released in `drop`.
        kernel::error::to_result(unsafe { kfi_test_e2e_netns_get() })?;
        Ok(Self)
    }
}

impl Drop for KfiTestE2e {
    fn drop(&mut self) {
        // SAFETY: Taken in `init`; the suite's objects are all closed.
        unsafe { kfi_test_e2e_netns_put() };
    }
}

// Only a pointer to `struct net` crosses; its opaque layout trips the lint.
#[allow(improper_ctypes)]
extern "C" {
    fn kfi_test_e2e_provider() -> *const u8;
    fn kfi_test_e2e_server_node() -> *const u8;
    fn kfi_test_e2e_client_node() -> *const u8;
    fn kfi_test_e2e_port_base() -> c_int;
    fn kfi_test_e2e_netns_get() -> c_int;
    fn kfi_test_e2e_server_net() -> *mut kernel::bindings::net;
    fn kfi_test_e2e_netns_put();
    fn kfi_test_e2e_skip(reason: *const u8);
}

/// Marks the running case skipped with `reason` (what the provider under
/// test does not offer), so a case it cannot run is reported, never
/// silently passed.
fn skip(reason: &CStr) -> Result {
    // SAFETY: A NUL-terminated string, read during the call.
    unsafe { kfi_test_e2e_skip(reason.as_char_ptr().cast()) };
    Ok(())
}

/// The provider under test.
fn provider() -> &'static CStr {
    // SAFETY: A NUL-terminated module parameter that lives as long as the
    // module and is read-only after load.
    unsafe { CStr::from_char_ptr(kfi_test_e2e_provider()) }
}

/// The address the server side listens on.
fn server_node() -> &'static CStr {
    // SAFETY: As for `provider`.
    unsafe { CStr::from_char_ptr(kfi_test_e2e_server_node()) }
}

/// The address the client side's RDM endpoints listen on.
fn client_node() -> &'static CStr {
    // SAFETY: As for `provider`.
    unsafe { CStr::from_char_ptr(kfi_test_e2e_client_node()) }
}

/// The server side's namespace (NULL: the initial one), held by the
/// module while the suite runs.
fn server_net() -> *mut kernel::bindings::net {
    // SAFETY: No arguments.
    unsafe { kfi_test_e2e_server_net() }
}

/// The port of case `n`, as a string.
fn port(n: i32, buf: &mut [u8; 8]) -> Result<&CStr> {
    // SAFETY: Reads an int parameter.
    let p = unsafe { kfi_test_e2e_port_base() }
        .checked_add(n)
        .filter(|p| (1..65536).contains(p))
        .ok_or(EINVAL)?;
    let mut digits = [0u8; 5];
    let mut v = p as u32;
    let mut len = 0;
    while v > 0 {
        digits[len] = b'0' + (v % 10) as u8;
        v /= 10;
        len += 1;
    }
    for i in 0..len {
        buf[i] = digits[len - 1 - i];
    }
    buf[len] = 0;
    CStr::from_bytes_with_nul(&buf[..=len]).map_err(|_| EINVAL)
}

/// The suite: each case is written in the file of its concept.
#[kunit_tests(kfi_e2e)]
mod e2e {
    use super::{atomics, cm, iov, msg, per_io, rdm, rma, tagged};
    use kernel::prelude::*;

    #[test]
    fn connect_to_an_explicit_address() -> Result {
        cm::connect_to_an_explicit_address()
    }

    #[test]
    fn cancel_posted_receives() -> Result {
        msg::cancel_posted_receives()
    }

    #[test]
    fn messages_of_every_size() -> Result {
        msg::messages_of_every_size()
    }

    #[test]
    fn tagged_matching_and_unexpected() -> Result {
        tagged::tagged_matching_and_unexpected()
    }

    #[test]
    fn rma_write_read() -> Result {
        rma::rma_write_read()
    }

    #[test]
    fn rma_errors() -> Result {
        rma::rma_errors()
    }

    #[test]
    fn long_buffer_lists() -> Result {
        iov::long_buffer_lists()
    }

    #[test]
    fn per_io_mapping() -> Result {
        per_io::per_io_mapping()
    }

    #[test]
    fn atomics_on_every_type() -> Result {
        atomics::atomics_on_every_type()
    }

    #[test]
    fn many_endpoints_many_operations() -> Result {
        atomics::many_endpoints_many_operations()
    }

    #[test]
    fn delivery_and_commit_completion() -> Result {
        rma::delivery_and_commit_completion()
    }

    #[test]
    fn reject_nobody_and_peer_loss() -> Result {
        cm::reject_nobody_and_peer_loss()
    }

    #[test]
    fn names_of_both_ends() -> Result {
        cm::names_of_both_ends()
    }

    #[test]
    fn rdm_through_address_vectors() -> Result {
        rdm::rdm_through_address_vectors()
    }
}
