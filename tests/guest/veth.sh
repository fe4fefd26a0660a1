# SPDX-License-Identifier: GPL-2.0
# Sourced by tests/guest/run-suites.sh: the second topology of the
# provider-agnostic suite. A veth pair joins the initial network namespace
# (client side, 10.77.0.1) and a new one (server side, 10.77.0.2), held by
# a sleeping task whose pid names it to kfi_test_e2e.ko.

VETH_CLIENT=10.77.0.1
VETH_SERVER=10.77.0.2

# veth_up: sets the pair up; VETH_PID is the task that holds the
# server's namespace.
veth_up() {
	unshare --net sleep 3600 > /dev/null 2>&1 &
	VETH_PID=$!
	ns_pid=$VETH_PID
	# unshare has to have switched namespaces before the link moves.
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		[ "$(readlink /proc/$ns_pid/ns/net)" != "$(readlink /proc/self/ns/net)" ] && break
		sleep 0.2
	done
	ip link add kfi_v0 type veth peer name kfi_v1 &&
		ip link set kfi_v1 netns "$ns_pid" &&
		ip addr add $VETH_CLIENT/24 dev kfi_v0 &&
		ip link set kfi_v0 up &&
		nsenter -t "$ns_pid" -n ip addr add $VETH_SERVER/24 dev kfi_v1 &&
		nsenter -t "$ns_pid" -n ip link set kfi_v1 up &&
		nsenter -t "$ns_pid" -n ip link set lo up
}

# veth_bytes: bytes the client end has sent.
veth_bytes() {
	cat /sys/class/net/kfi_v0/statistics/tx_bytes 2>/dev/null || echo 0
}

# veth_down PID: removes the pair and ends the namespace.
veth_down() {
	ip link del kfi_v0 2>/dev/null
	kill "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	true
}
