#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# kfabric's debugfs views: 'providers', 'objects' and 'getinfo' (hints
# written as words, matching entries read back; bad hints refused).
. "$(dirname "$0")/lib.sh"

# ktap_test_result splits its arguments at blanks: the expected text of
# has/lacks is a grep pattern without blanks ([[:space:]] stands for one).
getinfo() { printf '%s\n' "$*" > "$DBG/getinfo" && cat "$DBG/getinfo"; }
has() { getinfo "${@:2}" | grep -q -- "$1"; }
lacks() { ! getinfo "${@:2}" | grep -q -- "$1"; }
refused() { ! printf '%s\n' "$*" > "$DBG/getinfo" 2>/dev/null; }
objects_listed() {
	local c
	for c in fabric domain ep pep eq cq; do
		[ -n "$(objects $c)" ] || return 1
	done
}
version_listed() { grep -qE '^sockets [0-9]+\.[0-9]+ objects=0$' "$DBG/providers"; }
info_tool() { "$KFABRIC_TOP/scripts/kfi_info" provider=sockets node=127.0.0.1 service=7531 | grep -q '^provider: sockets'; }

unload_all
insmod "$KO_CORE" && insmod "$KO_SOCKETS" || ktap_exit_fail_msg "modules did not load"
ktap_print_header
ktap_set_plan 12

ktap_test_result "providers: name, version, open objects" version_listed
ktap_test_result "objects: a count per class" objects_listed
ktap_test_result "getinfo: sockets entry for an IPv4 node" \
	has "provider:[[:space:]]sockets" provider=sockets node=127.0.0.1 service=7531
ktap_test_result "getinfo: destination address printed" \
	has "dest_addr:[[:space:]]127.0.0.1:7531" provider=sockets node=127.0.0.1 service=7531
ktap_test_result "getinfo: source flag gives the source address" \
	has "src_addr:[[:space:]]127.0.0.1:7531" provider=sockets node=127.0.0.1 service=7531 source
ktap_test_result "getinfo: IPv6" \
	has "dest_addr:[[:space:]]\[0:0:0:0:0:0:0:1\]:7531" provider=sockets node=::1 service=7531
ktap_test_result "getinfo: endpoint type filter" \
	has "type:[[:space:]]KFI_EP_RDM" provider=sockets node=127.0.0.1 service=7531 ep=rdm
ktap_test_result "getinfo: unknown provider matches nothing" \
	lacks "provider:" provider=nosuch node=127.0.0.1 service=7531
ktap_test_result "getinfo: domain attributes shown" \
	has "threading:[[:space:]]safe[[:space:]]control_progress:[[:space:]]auto[[:space:]]data_progress:[[:space:]]auto" provider=sockets node=127.0.0.1 service=7531
ktap_test_result "getinfo: unknown key refused" refused provider=sockets colour=blue
ktap_test_result "getinfo: unknown capability refused" refused caps=msg,teleport
ktap_test_result "scripts/kfi_info prints the entries" info_tool

unload_all
ktap_finished
