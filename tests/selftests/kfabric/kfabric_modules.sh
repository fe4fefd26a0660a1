#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# kfabric modules as an administrator meets them: load and unload in the
# orders a user would, repeated; providers appear in and leave debugfs; and
# while a ULP module holds objects, neither its provider nor kfabric.ko can
# be unloaded (refused, never a use-after-free), and both can once it is
# gone.
. "$(dirname "$0")/lib.sh"

not() { ! "$@"; }
cycle() {
	local i
	for i in 1 2 3 4 5; do
		insmod "$KO_CORE" && insmod "$KO_SOCKETS" && insmod "$KO_IBVERBS" &&
			rmmod kfi_ibverbs && rmmod kfi_sockets && rmmod kfabric || return 1
	done
}
reload_provider() {
	local i
	for i in 1 2 3; do
		rmmod kfi_sockets && insmod "$KO_SOCKETS" && has_provider sockets || return 1
	done
}
no_providers() { test -z "$(providers)"; }
unload_in_order() { rmmod kfi_ibverbs && rmmod kfi_sockets && rmmod kfabric && ! test -e "$DBG"; }
holder_counts() { [ "$(objects fabric)" -ge 1 ] && [ "$(objects pep)" -ge 1 ]; }
sockets_objects() { providers | grep -q '^sockets .* objects=[1-9]'; }

unload_all
ktap_print_header
ktap_set_plan 17

ktap_test_result "load kfabric.ko" insmod "$KO_CORE"
ktap_test_result "debugfs providers file present" test -r "$DBG/providers"
ktap_test_result "no provider before any loaded" no_providers
ktap_test_result "load kfi_sockets.ko" insmod "$KO_SOCKETS"
ktap_test_result "sockets registered" has_provider sockets
ktap_test_result "load kfi_ibverbs.ko" insmod "$KO_IBVERBS"
ktap_test_result "ibverbs registered" has_provider ibverbs
ktap_test_result "kfabric.ko pinned by its providers" not rmmod kfabric
ktap_test_result "provider reloads, registered each time" reload_provider
ktap_test_result "ULP module opens and holds objects" insmod "$KO_HOLDER"
ktap_test_result "held objects counted in debugfs" holder_counts
ktap_test_result "provider with open objects refuses rmmod" not rmmod kfi_sockets
ktap_test_result "kfabric.ko refuses rmmod under a ULP" not rmmod kfabric
ktap_test_result "provider still listed with its objects" sockets_objects
ktap_test_result "ULP unloads and closes its objects" rmmod kfi_holder
ktap_test_result "everything unloads after the ULP" unload_in_order
ktap_test_result "load/unload cycles" cycle

unload_all
ktap_finished
