# Sourced by tests/guest/run-suites.sh; not run on its own.
# SPDX-License-Identifier: GPL-2.0
#
# End-to-end module checks, run in the test VM by tests/guest/run-suites.sh
# (which provides the tap_* helpers): every module loads and unloads, the
# providers appear in and leave debugfs, and kfabric.ko cannot be removed
# while a provider uses it.

top=$(pwd)
dbg=/sys/kernel/debug/kfabric
providers() { cat "$dbg/providers" 2>/dev/null; }
has_provider() { providers | grep -q "^$1 "; }
lacks_provider() { ! has_provider "$1"; }
not() { ! "$@"; }

tap_check load_kfabric "insmod kfabric.ko failed" insmod "$top/kfi/kfabric.ko"
tap_check debugfs_present "no $dbg/providers" test -r "$dbg/providers"
tap_check no_provider_at_start "providers listed before any loaded" test -z "$(providers)"
tap_check load_sockets "insmod kfi_sockets.ko failed" insmod "$top/prov/sockets/kfi_sockets.ko"
tap_check sockets_registered "sockets not in $dbg/providers" has_provider sockets
tap_check load_ibverbs "insmod kfi_ibverbs.ko failed" insmod "$top/prov/ibverbs/kfi_ibverbs.ko"
tap_check ibverbs_registered "ibverbs not in $dbg/providers" has_provider ibverbs
tap_check core_pinned_by_providers "rmmod kfabric succeeded under loaded providers" not rmmod kfabric
tap_check unload_sockets "rmmod kfi_sockets failed" rmmod kfi_sockets
tap_check sockets_deregistered "sockets still listed after rmmod" lacks_provider sockets
tap_check unload_ibverbs "rmmod kfi_ibverbs failed" rmmod kfi_ibverbs
tap_check ibverbs_deregistered "ibverbs still listed after rmmod" lacks_provider ibverbs
tap_check unload_kfabric "rmmod kfabric failed" rmmod kfabric
tap_check debugfs_removed "$dbg still present after rmmod" not test -e "$dbg"

cycles_ok=1
for i in 1 2 3; do
	insmod "$top/kfi/kfabric.ko" && insmod "$top/prov/sockets/kfi_sockets.ko" &&
		insmod "$top/prov/ibverbs/kfi_ibverbs.ko" && rmmod kfi_ibverbs &&
		rmmod kfi_sockets && rmmod kfabric || cycles_ok=0
done
tap_check load_unload_cycles "a load/unload cycle failed" test $cycles_ok = 1
# Leave nothing loaded for the next part of the run.
rmmod kfi_ibverbs kfi_sockets kfabric 2>/dev/null
true
