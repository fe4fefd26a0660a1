#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Runs inside the test VM (see scripts/check.sh): the module end-to-end
# checks, then every KUnit test module. Writes KTAP files, the kernel log
# and the kmemleak report to OUTDIR, then a line KFABRIC_GUEST_DONE.
#
# usage: run-suites.sh OUTDIR KDIR   (from the top of the source tree; KDIR
# is the kernel build, whose source has the kselftest helpers)

out=$1
kdir=$2
top=$(pwd)
mkdir -p "$out"
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug

. "$top/tests/guest/tap.sh"
. "$top/tests/guest/veth.sh"
. "$top/tests/selftests/kfabric/rdma_link.sh"

# Leaks from before the tests (boot) are not ours.
[ -e /sys/kernel/debug/kmemleak ] && echo clear > /sys/kernel/debug/kmemleak

# 1. The kselftest target (tests/selftests/kfabric): loading and unloading
# every module in the orders a user would, unloading under a ULP that holds
# objects, the debugfs views. Written as kselftest TAP (*.tap).
for prog in $(sed -n 's/^TEST_PROGS := //p' "$top/tests/selftests/kfabric/Makefile"); do
	KFABRIC_TOP=$top KSRC=$kdir/source KSFT_HELPERS=$kdir/source/tools/testing/selftests/kselftest/ktap_helpers.sh \
		bash "$top/tests/selftests/kfabric/$prog" > "$out/kselftest-${prog%.sh}.tap" 2>&1 ||
		echo "kselftest $prog exited $?"
done

# 2. The KUnit suites: each test module runs its suites at insmod; their
# results are copied from debugfs before the module goes away again.
insmod "$top/kfi/kfabric.ko" || echo "KFABRIC_GUEST_ERROR: kfabric.ko did not load"
# The providers, for the suites that run over them; kfi_test_ibverbs plays
# a hostile peer through kfi_ibverbs' test-only exports, and tests reads
# on siw, which kfi_ibverbs refuses there by default; its unanswered
# delivery case waits for response_timeout_ms (RESPONSE_TIMEOUT_MS of
# tests/ibverbs/common.rs), shorter than the default 30 s.
IBVERBS_PARAMS="test_hooks=1 global_key_devices=1 global_key_reads=1 response_timeout_ms=5000"
for ko in "$top"/prov/*/kfi_*.ko; do
	params=
	[ "$(basename "$ko")" = kfi_ibverbs.ko ] && params=$IBVERBS_PARAMS
	# shellcheck disable=SC2086
	insmod "$ko" $params || echo "KFABRIC_GUEST_ERROR: $(basename "$ko") did not load"
done
# run_module KO TAG [PARAMS...]: loads a test module with PARAMS, copies
# the results of the suites it ran (as kunit-SUITE[-TAG].ktap, the suite
# renamed SUITE_TAG), unloads it.
run_module() {
	ko=$1 tag=$2
	shift 2
	name=$(basename "$ko" .ko)
	before=$(ls /sys/kernel/debug/kunit 2>/dev/null)
	if ! insmod "$ko" "$@"; then
		echo "KFABRIC_GUEST_ERROR: $name did not load"
		return
	fi
	found=0
	for suite in $(ls /sys/kernel/debug/kunit); do
		echo "$before" | grep -qx "$suite" && continue
		if [ -n "$tag" ]; then
			sed "s/\b$suite\b/${suite}_$tag/" "/sys/kernel/debug/kunit/$suite/results" \
				> "$out/kunit-$suite-$tag.ktap"
		else
			cp "/sys/kernel/debug/kunit/$suite/results" "$out/kunit-$suite.ktap"
		fi
		found=$((found + 1))
	done
	[ $found -gt 0 ] || echo "KFABRIC_GUEST_ERROR: $name ran no KUnit suite"
	rmmod "$name" || echo "KFABRIC_GUEST_ERROR: $name did not unload"
}

# ibverbs_defaults KO: kfi_test_ibverbs' params_* cases alone, with
# kfi_ibverbs reloaded with its defaults but global_key_devices=1, so
# that siw is offered (what test_hooks=1 and global_key_reads=1 allow must
# be refused; the kselftest kfabric_ibverbs.sh checks that siw is not
# offered without it), then reloaded as for the suite, whatever happened.
ibverbs_defaults() {
	ibv=$top/prov/ibverbs/kfi_ibverbs.ko
	glob=/sys/module/kunit/parameters/filter_glob
	if ! rmmod kfi_ibverbs; then
		echo "KFABRIC_GUEST_ERROR: kfi_ibverbs did not unload for the run with its defaults"
		return
	fi
	if ! insmod "$ibv" global_key_devices=1; then
		echo "KFABRIC_GUEST_ERROR: kfi_ibverbs did not load with its defaults"
	elif ! printf '%s' 'kfi_ibverbs.params_*' > "$glob"; then
		# The whole suite would fail, and delete the device.
		echo "KFABRIC_GUEST_ERROR: could not set KUnit's filter_glob"
	else
		run_module "$1" defaults defaults=1
		# KUnit's default: every suite, every case.
		printf '%s' '*.*' > "$glob" ||
			echo "KFABRIC_GUEST_ERROR: could not reset KUnit's filter_glob"
	fi
	rmmod kfi_ibverbs 2>/dev/null
	# shellcheck disable=SC2086
	insmod "$ibv" $IBVERBS_PARAMS ||
		echo "KFABRIC_GUEST_ERROR: kfi_ibverbs did not load with $IBVERBS_PARAMS"
}

for ko in "$top"/tests/*/kfi_test_*.ko; do
	[ -f "$ko" ] || continue
	case $(basename "$ko") in
	kfi_test_sockets.ko)
		# The user-space garbage peer of user_space_garbage_sender: it
		# keeps trying to connect for 10 minutes (the suites before that
		# case take a few), and is done once the case is, give or take a
		# moment; one still running 30 s after the module is stopped.
		/usr/bin/python3 "$top/tests/guest/garbage.py" 7479 > "$out/garbage.log" 2>&1 &
		peer=$!
		run_module "$ko" ""
		i=0
		while kill -0 $peer 2>/dev/null && [ $i -lt 30 ]; do
			sleep 1
			i=$((i + 1))
		done
		kill $peer 2>/dev/null
		wait $peer || echo "KFABRIC_GUEST_ERROR: garbage.py failed (see garbage.log)"
		;;
	kfi_test_ibverbs.ko)
		# kfi_ibverbs over a soft-iWARP, then a soft-RoCE device, each
		# there only for its run.
		for t in siw rxe; do
			if rdma_link_up $t; then
				if [ $t = siw ]; then
					ibverbs_defaults "$ko"
					run_module "$ko" ""
				else
					run_module "$ko" rxe roce=1
				fi
			else
				echo "KFABRIC_GUEST_ERROR: could not add a $t device"
			fi
			rdma_link_down $t
		done
		;;
	kfi_test_e2e.ko)
		# The provider-agnostic suite over kfi_sockets on loopback, then
		# over kfi_ibverbs on a soft-iWARP and a soft-RoCE device (both
		# sides on the device's address: rdma_cm does not connect over lo).
		run_module "$ko" ""
		for t in siw rxe; do
			if rdma_link_up $t; then
				run_module "$ko" "ibverbs_$t" provider=ibverbs \
					server_node=$RDMA_LINK_ADDR client_node=$RDMA_LINK_ADDR
			else
				echo "KFABRIC_GUEST_ERROR: could not add a $t device"
			fi
			rdma_link_down $t
		done
		;;
	*)
		run_module "$ko" ""
		;;
	esac
done

# The provider-agnostic suite again, its server side behind a veth pair in
# another network namespace; the client end must have carried its bytes.
tap_begin "$out/e2e-veth.ktap" kfi_e2e_veth_topology
if veth_up; then
	tap_ok veth_pair_up
	sent=$(veth_bytes)
	run_module "$top/tests/e2e/kfi_test_e2e.ko" veth server_node=$VETH_SERVER \
		client_node=$VETH_CLIENT server_netns_pid="$VETH_PID"
	moved=$(( $(veth_bytes) - sent ))
	tap_check traffic_crossed_veth "only $moved bytes left kfi_v0" test "$moved" -gt $((24 << 20))
else
	tap_fail veth_pair_up "could not set up the veth pair"
fi
veth_down "$VETH_PID"
tap_end
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
