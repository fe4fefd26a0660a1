# SPDX-License-Identifier: GPL-2.0
# Sourced by the kfabric selftests and tests/guest/run-suites.sh: a soft
# RDMA device to test kfi_ibverbs on. rdma_cm does not connect over lo
# (even with siw attached to it: rdma_resolve_addr fails with -ENOENT), so
# the device sits on one end of a veth pair that has RDMA_LINK_ADDR; both
# sides of a test use that address.

RDMA_LINK_ADDR=10.99.0.1

# rdma_link_up TYPE: a veth pair kfi_r0/kfi_r1 and a TYPE (siw, rxe)
# device named TYPE0 on kfi_r0.
rdma_link_up() {
	ip link add kfi_r0 type veth peer name kfi_r1 &&
		ip addr add $RDMA_LINK_ADDR/24 dev kfi_r0 &&
		ip link set kfi_r0 up &&
		ip link set kfi_r1 up &&
		rdma link add "${1}0" type "$1" netdev kfi_r0
}

# rdma_link_down TYPE: removes the device and the pair.
rdma_link_down() {
	rdma link delete "${1}0" 2>/dev/null
	ip link delete kfi_r0 2>/dev/null
	true
}
