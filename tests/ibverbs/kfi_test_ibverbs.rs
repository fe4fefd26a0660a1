// SPDX-License-Identifier: GPL-2.0

//! kfi_test_ibverbs.ko: KUnit suite `kfi_ibverbs`, kfi_ibverbs over a real
//! RDMA device. The guest script adds a soft-iWARP (`siw0`) or, with
//! `roce=1`, a soft-RoCE (`rxe0`) device on a veth end with address
//! `NODE` (tests/selftests/kfabric/rdma_link.sh) before loading this
//! module and deletes it afterwards. Written only with the safe ULP API of
//! `kfi/api/ulp`, as a Rust ULP would be.
//!
//! Covered: connection management through rdma_cm (connect with private
//! data, accept, reject, shutdown, refused connects, closes in every
//! state) and messages (every size up to the limit with every byte
//! checked, remote CQ data, truncation, inject, credit flow control with
//! messages held until their receive is posted, receives canceled at
//! close), a hostile peer (played by the client endpoint through the
//! provider's test-only `kfi_ibverbs_test_tamper`: a message that never
//! ends, a short frame inside a message, a flood of remote CQ data, a
//! bad magic, unknown flags, an acknowledgement on a data frame, tagged
//! frames of a bad length; each ends the connection with `EPROTO`),
//! tagged messages of every size, expected and unexpected, and a flood of
//! unexpected ones beyond the bound (`ENOSPC`), counters (failures counted,
//! a peer's kinds refused), atomics as the device has them
//! (rxe) or refused (siw), delivery completion of sends and writes, more
//! reads and atomics outstanding than the negotiated read depth, the
//! deadline on credits a peer does not return and on work requests it
//! never lets complete, what the provider's safety parameters refuse by
//! default (`defaults=1`, the `params_*` cases alone: the test-only
//! exports, reads that would show siw's global key), and
//! the device's removal in the middle of traffic (the last case: it
//! deletes the device with the rdma tool).

use kernel::{error::to_result, prelude::*};

#[path = "../../kfi/api/mod.rs"]
mod kfi;

mod cm;
mod common;
mod handler;
mod hostile;
mod msg;
mod params;
mod removal;
mod rma;
mod tagged;

module! {
    type: KfiTestIbverbs,
    name: "kfi_test_ibverbs",
    authors: ["kfabric developers"],
    description: "KUnit tests of kfi_ibverbs over a soft-iWARP or soft-RoCE device",
    license: "GPL",
    params: {
        roce: u32 {
            default: 0,
            description: "The device is rxe0 (RoCE), not siw0 (iWARP)",
        },
        defaults: u32 {
            default: 0,
            description: "kfi_ibverbs was loaded with its defaults but global_key_devices=1 (no test_hooks, no global_key_reads): the params_* cases check what they refuse (run them alone)",
        },
    },
}

/// The device under test: (name, fabric).
fn device() -> (&'static core::ffi::CStr, &'static core::ffi::CStr) {
    if module_parameters::roce.value() != 0 {
        (c"rxe0", c"RoCE")
    } else {
        (c"siw0", c"iWARP")
    }
}

/// Whether kfi_ibverbs was loaded with its defaults (`params.rs`).
fn defaults() -> bool {
    module_parameters::defaults.value() != 0
}

struct KfiTestIbverbs;

extern "C" {
    /// kfi_ibverbs' test-only path (prov/ibverbs/frame.rs): the next
    /// `frames` data frames its endpoints send get header flags `set`
    /// added and `clear` removed, and magic `magic` unless 0.
    fn kfi_ibverbs_test_tamper(set: u32, clear: u32, magic: u32, frames: u32) -> c_int;
    /// flush.rs' test-only path: the key of the next flush-region trailer
    /// an endpoint sends gets the bits of `xor` flipped (0: none).
    fn kfi_ibverbs_test_flush_key(xor: u32) -> c_int;
    /// data/rx.rs' test-only path: the next `n` receive slots an endpoint
    /// gives back are not posted again, their credits returned all the
    /// same (0: stop).
    fn kfi_ibverbs_test_skip_reposts(n: u32) -> c_int;
    /// kfi_ibverbs_main.rs' test-only path: connections that start from
    /// now on get `ms` milliseconds to be established (0: the
    /// `connect_timeout_ms` parameter's).
    fn kfi_ibverbs_test_connect_timeout(ms: u32) -> c_int;
    /// frame.rs' test-only path: with `arm`, the next data frame an
    /// endpoint sends is a send with invalidate naming `key`.
    fn kfi_ibverbs_test_send_invalidate(key: u32, arm: u32) -> c_int;
}

/// Makes the next `frames` data frames of kfi_ibverbs' endpoints a
/// hostile peer's (see [`kfi_ibverbs_test_tamper`]); 0 stops it.
/// `EPERM` unless kfi_ibverbs was loaded with `test_hooks=1`.
fn tamper(set: u32, magic: u32, frames: u32) -> Result {
    // SAFETY: Only stores the values; any values are valid.
    to_result(unsafe { kfi_ibverbs_test_tamper(set, 0, magic, frames) })
}

/// As [`tamper`], with header flags `clear` removed instead of added.
fn tamper_clear(clear: u32, frames: u32) -> Result {
    // SAFETY: Only stores the values; any values are valid.
    to_result(unsafe { kfi_ibverbs_test_tamper(0, clear, 0, frames) })
}

/// Makes kfi_ibverbs' endpoints a peer that returns credits for the next
/// `n` receive slots without posting them again (see
/// [`kfi_ibverbs_test_skip_reposts`]); 0 stops it. `EPERM` as for
/// [`tamper`].
fn skip_reposts(n: u32) -> Result {
    // SAFETY: Only stores the value; any value is valid.
    to_result(unsafe { kfi_ibverbs_test_skip_reposts(n) })
}

/// Gives connections that start from now on `ms` milliseconds to be
/// established (see [`kfi_ibverbs_test_connect_timeout`]); 0: the
/// parameter's again. `EPERM` as for [`tamper`].
fn set_connect_timeout(ms: u32) -> Result {
    // SAFETY: Only stores the value; any value is valid.
    to_result(unsafe { kfi_ibverbs_test_connect_timeout(ms) })
}

/// Makes the next flush-region trailer a peer's that names a wrong key
/// (see [`kfi_ibverbs_test_flush_key`]); 0 stops it. `EPERM` as for
/// [`tamper`].
fn tamper_flush_key(xor: u32) -> Result {
    // SAFETY: Only stores the value; any value is valid.
    to_result(unsafe { kfi_ibverbs_test_flush_key(xor) })
}

/// Makes the next data frame of kfi_ibverbs' endpoints a hostile peer's
/// send with invalidate naming `key` (see
/// [`kfi_ibverbs_test_send_invalidate`]), or, without `arm`, none.
/// `EPERM` as for [`tamper`].
fn send_invalidate(key: u32, arm: bool) -> Result {
    // SAFETY: Only stores the values; any values are valid.
    to_result(unsafe { kfi_ibverbs_test_send_invalidate(key, u32::from(arm)) })
}

impl kernel::Module for KfiTestIbverbs {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        Ok(Self)
    }
}

#[kunit_tests(kfi_ibverbs)]
mod tests {
    use kernel::prelude::*;

    #[test]
    fn getinfo_names_the_device() -> Result {
        super::cm::getinfo_names_the_device()
    }

    #[test]
    fn connect_accept_with_private_data() -> Result {
        super::cm::connect_accept_with_private_data()
    }

    #[test]
    fn connreqs_are_bounded() -> Result {
        super::cm::connreqs_are_bounded()
    }

    #[test]
    fn unanswered_connect_ends_in_time() -> Result {
        super::cm::unanswered_connect_ends_in_time()
    }

    #[test]
    fn unacknowledged_delivery_ends_the_connection_in_time() -> Result {
        super::hostile::unacknowledged_delivery_ends_the_connection_in_time()
    }

    #[test]
    fn long_private_data_arrives_exactly() -> Result {
        super::cm::long_private_data_arrives_exactly()
    }

    #[test]
    fn reject_carries_private_data() -> Result {
        super::cm::reject_carries_private_data()
    }

    #[test]
    fn connect_to_nobody_fails_in_time() -> Result {
        super::cm::connect_to_nobody_fails_in_time()
    }

    #[test]
    fn closes_in_every_state() -> Result {
        super::cm::closes_in_every_state()
    }

    #[test]
    fn messages_of_every_size_with_cq_data() -> Result {
        super::msg::messages_of_every_size_with_cq_data()
    }

    #[test]
    fn truncation_and_inject() -> Result {
        super::msg::truncation_and_inject()
    }

    #[test]
    fn flow_control_holds_messages_until_received() -> Result {
        super::msg::flow_control_holds_messages_until_received()
    }

    #[test]
    fn receives_canceled_at_close_and_shutdown() -> Result {
        super::msg::receives_canceled_at_close_and_shutdown()
    }

    #[test]
    fn cancel_takes_back_a_receive() -> Result {
        super::msg::cancel_takes_back_a_receive()
    }

    #[test]
    fn handler_reposts_its_receive() -> Result {
        super::handler::handler_reposts_its_receive()
    }

    #[test]
    fn connect_to_an_explicit_address() -> Result {
        super::cm::connect_to_an_explicit_address()
    }

    #[test]
    fn regions_take_rdma_before_and_after_connecting() -> Result {
        super::rma::regions_take_rdma_before_and_after_connecting()
    }

    #[test]
    fn rma_access_error_ends_the_connection() -> Result {
        super::rma::rma_access_error_ends_the_connection()
    }

    #[test]
    fn counters_count_failures_and_refuse_a_peers_kinds() -> Result {
        super::rma::counters_count_failures_and_refuse_a_peers_kinds()
    }

    #[test]
    fn atomics_as_the_device_has_them() -> Result {
        super::rma::atomics_as_the_device_has_them()
    }

    #[test]
    fn delivery_completion_waits_for_placement() -> Result {
        super::rma::delivery_completion_waits_for_placement()
    }

    #[test]
    fn flushed_writes_while_the_target_sends() -> Result {
        super::rma::flushed_writes_while_the_target_sends()
    }

    #[test]
    fn many_reads_and_atomics_in_flight() -> Result {
        super::rma::many_reads_and_atomics_in_flight()
    }

    #[test]
    fn acknowledgement_on_a_data_frame_ends_the_connection() -> Result {
        super::hostile::acknowledgement_on_a_data_frame_ends_the_connection()
    }

    #[test]
    fn credits_never_returned_end_the_connection_in_time() -> Result {
        super::hostile::credits_never_returned_end_the_connection_in_time()
    }

    #[test]
    fn receives_never_posted_end_the_connection_in_time() -> Result {
        super::hostile::receives_never_posted_end_the_connection_in_time()
    }

    #[test]
    fn endless_message_ends_the_connection() -> Result {
        super::hostile::endless_message_ends_the_connection()
    }

    #[test]
    fn short_frame_inside_a_message_ends_the_connection() -> Result {
        super::hostile::short_frame_inside_a_message_ends_the_connection()
    }

    #[test]
    fn remote_cq_data_flood_ends_the_connection() -> Result {
        super::hostile::remote_cq_data_flood_ends_the_connection()
    }

    #[test]
    fn send_with_invalidate_ends_the_connection() -> Result {
        super::hostile::send_with_invalidate_ends_the_connection()
    }

    #[test]
    fn malformed_frame_ends_the_connection() -> Result {
        super::hostile::malformed_frame_ends_the_connection()
    }

    #[test]
    fn wrong_flush_key_fails_only_its_writes() -> Result {
        super::hostile::wrong_flush_key_fails_only_its_writes()
    }

    #[test]
    fn unknown_frame_flags_end_the_connection() -> Result {
        super::hostile::unknown_frame_flags_end_the_connection()
    }

    #[test]
    fn tagged_messages_of_every_size() -> Result {
        super::tagged::tagged_messages_of_every_size()
    }

    #[test]
    fn tagged_and_untagged_acknowledgements_are_counted_apart() -> Result {
        super::tagged::tagged_and_untagged_acknowledgements_are_counted_apart()
    }

    #[test]
    fn tagged_unexpected_flood_ends_the_connection() -> Result {
        super::tagged::tagged_unexpected_flood_ends_the_connection()
    }

    #[test]
    fn tagged_frame_with_a_bad_length_ends_the_connection() -> Result {
        super::tagged::tagged_frame_with_a_bad_length_ends_the_connection()
    }

    #[test]
    fn params_test_hooks_gate_the_test_exports() -> Result {
        super::params::params_test_hooks_gate_the_test_exports()
    }

    #[test]
    fn params_global_key_reads_gate_reads_on_iwarp() -> Result {
        super::params::params_global_key_reads_gate_reads_on_iwarp()
    }

    // Must stay the last case: the device is gone afterwards.
    #[test]
    fn device_removal_mid_traffic() -> Result {
        super::removal::device_removal_mid_traffic()
    }
}
