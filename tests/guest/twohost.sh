#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# One guest of the two-host topology (scripts/twohost.sh), from the top of
# the source tree: gives the virtual NIC this side's address, waits until
# the other guest answers on it, loads kfabric.ko and kfi_sockets.ko and
# runs JOB as ROLE (server or client):
#   check: kfi_twohost.ko's suite kfi_2host, results in
#          OUTDIR/kunit-kfi_2host-ROLE.ktap, plus the topology's own checks
#          in OUTDIR/twohost-ROLE.ktap; then the kernel log and kmemleak
#          report, and a line KFABRIC_GUEST_DONE.
#   bench: tests/guest/bench.sh with kfi_twohost_bench.ko (the client's
#          samples in OUTDIR/samples.txt, as 'make bench' has them).
#
# usage: twohost.sh ROLE OUTDIR KDIR JOB [module parameters...]

role=$1 out=$2 kdir=$3 job=$4
shift 4
top=$(pwd)
mkdir -p "$out"
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
. "$top/tests/guest/tap.sh"

SERVER=10.98.0.1
CLIENT=10.98.0.2
case $role in
server) mine=$SERVER peer=$CLIENT mac=52:54:00:98:00:01 ;;
client) mine=$CLIENT peer=$SERVER mac=52:54:00:98:00:02 ;;
*) echo "KFABRIC_GUEST_ERROR: unknown role $role"; exit 1 ;;
esac
# Seconds a side waits for the other guest (they boot at the same time,
# but under TCG one may be much slower).
PEER_WAIT=120

[ -e /sys/kernel/debug/kmemleak ] && echo clear > /sys/kernel/debug/kmemleak
echo "KFABRIC_2HOST $role: up $(cut -d' ' -f1 /proc/uptime)s after boot"

# nic_of MAC: the interface with that address.
nic_of() {
	for d in /sys/class/net/*; do
		[ "$(cat "$d/address" 2>/dev/null)" = "$1" ] && basename "$d" && return 0
	done
	return 1
}

# peer_answers: the other guest answers over TCP on the NIC within
# PEER_WAIT (a port none of the cases uses).
peer_answers() {
	/usr/bin/python3 "$top/tests/guest/rendezvous.py" "$role" $SERVER 7599 "$PEER_WAIT"
}

tap_begin "$out/twohost-$role.ktap" "kfi_2host_topology_$role"
nic=$(nic_of $mac)
if [ -n "$nic" ] && ip addr add "$mine/24" dev "$nic" && ip link set "$nic" up; then
	tap_ok nic_up
else
	tap_fail nic_up "no interface with MAC $mac, or it would not come up"
fi
tap_check peer_answers "no answer from $peer in ${PEER_WAIT}s" peer_answers
echo "KFABRIC_2HOST $role: peer answered $(cut -d' ' -f1 /proc/uptime)s after boot"

# nic_bytes: bytes this side sent and received on the NIC.
nic_bytes() {
	echo $(($(cat "/sys/class/net/$nic/statistics/tx_bytes" 2>/dev/null || echo 0) + \
		$(cat "/sys/class/net/$nic/statistics/rx_bytes" 2>/dev/null || echo 0)))
}

case $job in
check)
	insmod "$top/kfi/kfabric.ko" || echo "KFABRIC_GUEST_ERROR: kfabric.ko did not load"
	insmod "$top/prov/sockets/kfi_sockets.ko" ||
		echo "KFABRIC_GUEST_ERROR: kfi_sockets.ko did not load"
	before=$(nic_bytes)
	ko=$top/tests/twohost/kfi_twohost.ko
	if insmod "$ko" role="$role" server_node=$SERVER "$@"; then
		r=/sys/kernel/debug/kunit/kfi_2host/results
		if [ -e $r ]; then
			sed "s/\bkfi_2host\b/kfi_2host_$role/" $r > "$out/kunit-kfi_2host-$role.ktap"
		else
			echo "KFABRIC_GUEST_ERROR: kfi_twohost ran no KUnit suite"
		fi
		rmmod kfi_twohost || echo "KFABRIC_GUEST_ERROR: kfi_twohost did not unload"
	else
		echo "KFABRIC_GUEST_ERROR: kfi_twohost did not load"
	fi
	# The suite moves 2 x 17 MiB of messages and 3 MiB of RMA: that must
	# have gone through the NIC, not some loopback.
	moved=$(( $(nic_bytes) - before ))
	tap_check traffic_crossed_nic "only $moved bytes crossed $nic" test "$moved" -gt $((34 << 20))
	rmmod kfi_sockets || echo "KFABRIC_GUEST_ERROR: kfi_sockets did not unload"
	rmmod kfabric || echo "KFABRIC_GUEST_ERROR: kfabric did not unload"
	;;
bench)
	KFABRIC_BENCH_MODULE=tests/twohost/kfi_twohost_bench.ko \
		sh "$top/tests/guest/bench.sh" "$out" role="$role" server_node=$SERVER "$@"
	;;
*)
	echo "KFABRIC_GUEST_ERROR: unknown job $job"
	;;
esac
tap_end

if [ -e /sys/kernel/debug/kmemleak ]; then
	echo scan > /sys/kernel/debug/kmemleak
	sleep 5
	echo scan > /sys/kernel/debug/kmemleak
	cat /sys/kernel/debug/kmemleak > "$out/kmemleak.txt"
fi
dmesg > "$out/dmesg.log"
echo KFABRIC_GUEST_DONE
