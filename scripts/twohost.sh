#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# twohost.sh KDIR OUTDIR TIMEOUT_S JOB [ARGS...]: the two-host topology.
# Boots two guests of KDIR side by side (scripts/vm.sh, 1 CPU and 1 GiB
# each), joined by a virtual NIC: a virtio-net device per guest whose
# QEMU back end sends its frames as UDP datagrams to the other QEMU on
# 127.0.0.1, a point-to-point Ethernet. The server guest gets 10.98.0.1/24,
# the client 10.98.0.2/24. Each runs tests/guest/twohost.sh ROLE OUTDIR/ROLE
# KDIR JOB ARGS... and writes its logs to OUTDIR/server and OUTDIR/client.
# The caller holds the heavy lock: two guests are one heavy job.
# Exit status 124 when a guest timed out.
set -uo pipefail
. "$(dirname "$0")/lib.sh"

kdir=$1 outdir=$2 limit=$3
shift 3

# free_udp_ports: two UDP ports of 127.0.0.1 nobody uses now.
free_udp_ports() {
	python3 -c '
import socket
s = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(2)]
for x in s:
    x.bind(("127.0.0.1", 0))
print(" ".join(str(x.getsockname()[1]) for x in s))'
}

read -r port_server port_client < <(free_udp_ports) || die "no free UDP port"
mkdir -p "$outdir/server" "$outdir/client"
pids=()
for role in server client; do
	if [ $role = server ]; then
		mine=$port_server peer=$port_client mac=52:54:00:98:00:01
	else
		mine=$port_client peer=$port_server mac=52:54:00:98:00:02
	fi
	nic="-netdev dgram,id=kfi2h,local.type=inet,local.host=127.0.0.1,local.port=$mine"
	nic+=",remote.type=inet,remote.host=127.0.0.1,remote.port=$peer"
	nic+=" -device virtio-net-pci,netdev=kfi2h,mac=$mac"
	KFABRIC_VM_MEMORY=1G KFABRIC_VM_CPUS=1 KFABRIC_VM_QEMU_OPTS=$nic \
		"$KFABRIC_TOP/scripts/vm.sh" "$kdir" "$outdir/$role" "$limit" \
		tests/guest/twohost.sh "$role" "$outdir/$role" "$kdir" "$@" &
	pids+=($!)
done
rc=0
for p in "${pids[@]}"; do
	wait "$p"
	r=$?
	[ $r -eq 0 ] || rc=$r
done
exit $rc
