#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Runs inside the test VM (see scripts/check.sh): the module end-to-end
# checks, then every KUnit test module. Writes KTAP files, the kernel log
# and the kmemleak report to OUTDIR, then a line KFABRIC_GUEST_DONE.
#
# usage: run-suites.sh OUTDIR   (from the top of the source tree)

out=$1
top=$(pwd)
mkdir -p "$out"
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug

. "$top/tests/guest/tap.sh"

# Leaks from before the tests (boot) are not ours.
[ -e /sys/kernel/debug/kmemleak ] && echo clear > /sys/kernel/debug/kmemleak

# 1. Loading and unloading every module, in the orders a user would.
tap_begin "$out/e2e-modules.ktap" kfi_e2e_modules
. "$top/tests/e2e/modules.sh"
tap_end

# 2. The KUnit suites: each test module runs its suites at insmod; their
# results are copied from debugfs before the module goes away again.
insmod "$top/kfi/kfabric.ko" || echo "KFABRIC_GUEST_ERROR: kfabric.ko did not load"
# The providers, for the suites that run over them.
for ko in "$top"/prov/*/kfi_*.ko; do
	insmod "$ko" || echo "KFABRIC_GUEST_ERROR: $(basename "$ko") did not load"
done
for ko in "$top"/tests/*/kfi_test_*.ko; do
	[ -f "$ko" ] || continue
	name=$(basename "$ko" .ko)
	before=$(ls /sys/kernel/debug/kunit 2>/dev/null)
	if ! insmod "$ko"; then
		echo "KFABRIC_GUEST_ERROR: $name did not load"
		continue
	fi
	found=0
	for suite in $(ls /sys/kernel/debug/kunit); do
		echo "$before" | grep -qx "$suite" && continue
		cp "/sys/kernel/debug/kunit/$suite/results" "$out/kunit-$suite.ktap"
		found=$((found + 1))
	done
	[ $found -gt 0 ] || echo "KFABRIC_GUEST_ERROR: $name ran no KUnit suite"
	rmmod "$name" || echo "KFABRIC_GUEST_ERROR: $name did not unload"
done
for ko in "$top"/prov/*/kfi_*.ko; do
	rmmod "$(basename "$ko" .ko)" || echo "KFABRIC_GUEST_ERROR: $(basename "$ko") did not unload"
done
rmmod kfabric || echo "KFABRIC_GUEST_ERROR: kfabric did not unload"

# 3. Leaks: two scans, as kmemleak reports an object only after it stayed
# unreferenced across scans.
if [ -e /sys/kernel/debug/kmemleak ]; then
	echo scan > /sys/kernel/debug/kmemleak
	sleep 5
	echo scan > /sys/kernel/debug/kmemleak
	cat /sys/kernel/debug/kmemleak > "$out/kmemleak.txt"
fi

dmesg > "$out/dmesg.log"
echo KFABRIC_GUEST_DONE
