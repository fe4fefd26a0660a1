#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# kfi_ibverbs and the RDMA devices of ib_core: getinfo answers from the
# devices present now (a soft-iWARP, then a soft-RoCE device on a veth end,
# added and deleted with the rdma tool), names their fabric by link type,
# and follows them as they come and go, also across a reload of the
# provider. siw is offered only with global_key_devices=1 (any peer can
# read through it what it was not granted): the provider is loaded with
# it, and once without, to check that siw is not offered then.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rdma_link.sh"

PORT=7601
NODE=$RDMA_LINK_ADDR
getinfo() { printf '%s\n' "$*" > "$DBG/getinfo" && cat "$DBG/getinfo"; }
has() { getinfo "${@:2}" | grep -q -- "$1"; }
lacks() { ! getinfo "${@:2}" | grep -q -- "$1"; }
siw_on_lo() { rdma link add siw9 type siw netdev lo; }
reload() { rmmod kfi_ibverbs && insmod "$KO_IBVERBS" global_key_devices=1; }
# With its defaults the provider offers no siw device (while getinfo
# still answers, with the other providers' entries); reloaded as before
# whatever happened.
defaults_hide_siw() {
	local r=1
	if rmmod kfi_ibverbs && insmod "$KO_IBVERBS"; then
		has "provider:[[:space:]]sockets" node=$NODE service=$PORT &&
			lacks "provider:[[:space:]]ibverbs" node=$NODE service=$PORT &&
			lacks "domain:[[:space:]]siw0" provider=ibverbs
		r=$?
	fi
	rmmod kfi_ibverbs 2>/dev/null
	insmod "$KO_IBVERBS" global_key_devices=1 && return $r
}

if ! command -v rdma > /dev/null; then
	ktap_print_header
	ktap_skip_all "no rdma tool (iproute2)"
	exit "$KSFT_SKIP"
fi
unload_all
rdma_link_down siw
rdma link delete siw9 2>/dev/null
insmod "$KO_CORE" && insmod "$KO_SOCKETS" && insmod "$KO_IBVERBS" global_key_devices=1 ||
	ktap_exit_fail_msg "modules did not load"
ktap_print_header
ktap_set_plan 18

ktap_test_result "no RDMA device: no ibverbs entry" \
	lacks "provider:" provider=ibverbs node=127.0.0.1 service=$PORT
ktap_test_result "rdma link add siw9 on lo" siw_on_lo
ktap_test_result "lo is not offered (rdma_cm does not connect over it)" \
	lacks "provider:" provider=ibverbs node=127.0.0.1 service=$PORT
ktap_test_result "rdma link add siw0 on a veth end" rdma_link_up siw
ktap_test_result "the siw device is a domain of the iWARP fabric" \
	has "domain:[[:space:]]siw0" provider=ibverbs fabric=iWARP node=$NODE service=$PORT
ktap_test_result "source address served by siw0" \
	has "src_addr:[[:space:]]$NODE:$PORT" provider=ibverbs node=$NODE service=$PORT source
ktap_test_result "no node: every device is listed" \
	has "domain:[[:space:]]siw0" provider=ibverbs
ktap_test_result "entries advertise messages" \
	has "caps:[[:space:]]msg" provider=ibverbs node=$NODE service=$PORT
ktap_test_result "with its defaults the provider offers no siw device" defaults_hide_siw
ktap_test_result "a node no RDMA device serves leaves the other providers' entries" \
	has "provider:[[:space:]]sockets" node=192.0.2.1 service=$PORT
ktap_test_result "provider reloaded while the device exists" reload
ktap_test_result "a reloaded provider finds the existing device" \
	has "domain:[[:space:]]siw0" provider=ibverbs node=$NODE service=$PORT
ktap_test_result "rdma link delete siw0" rdma link delete siw0
ktap_test_result "the deleted device's entry is gone" \
	lacks "provider:[[:space:]]ibverbs" node=$NODE service=$PORT
rdma_link_down siw
rdma link delete siw9 2>/dev/null
ktap_test_result "rdma link add rxe0 on a veth end" rdma_link_up rxe
ktap_test_result "the rxe device is a domain of the RoCE fabric" \
	has "domain:[[:space:]]rxe0" provider=ibverbs fabric=RoCE node=$NODE service=$PORT
ktap_test_result "an iWARP hint does not match a RoCE device" \
	lacks "provider:[[:space:]]ibverbs" provider=ibverbs fabric=iWARP node=$NODE service=$PORT
rdma_link_down rxe
ktap_test_result "no device left: no ibverbs entry" \
	lacks "provider:[[:space:]]ibverbs" provider=ibverbs

unload_all
ktap_finished
