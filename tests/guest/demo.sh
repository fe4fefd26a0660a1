#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The demo of 'make run', inside the VM: load kfabric.ko and every provider,
# show what registered, add a soft-iWARP device, run kfi_demo.ko (the same
# ULP over kfi_sockets on loopback and over kfi_ibverbs on siw: connection,
# ping-pong, stream, RMA where offered), unload again.
top=$(pwd)
. "$top/tests/selftests/kfabric/rdma_link.sh"
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
echo KFABRIC_DEMO_BEGIN
echo "kernel: $(uname -r)"
ok=ok
insmod "$top/kfi/kfabric.ko" || ok=failed
for ko in "$top"/prov/*/kfi_*.ko; do
	params=
	# siw lets any peer read any region (and all memory, through a key a
	# read shows), so kfi_ibverbs offers it only when told that every peer
	# is trusted, and issues reads on it only when told so too
	# (Documentation/ibverbs.rst); the demo's peer is itself.
	if [ "$(basename "$ko")" = kfi_ibverbs.ko ]; then
		params="global_key_devices=1 global_key_reads=1"
		echo "kfi_ibverbs.ko $params: siw, and RMA reads on it (refused by default)"
	fi
	# shellcheck disable=SC2086
	insmod "$ko" $params || ok=failed
done
echo "registered providers (name version open-objects):"
sed 's/^/  /' /sys/kernel/debug/kfabric/providers
echo "live objects per class:"
sed 's/^/  /' /sys/kernel/debug/kfabric/objects
echo "scripts/kfi_info provider=sockets node=127.0.0.1 service=7471 caps=msg,rma ep=msg:"
"$top/scripts/kfi_info" provider=sockets node=127.0.0.1 service=7471 caps=msg,rma ep=msg |
	sed 's/^/  /' || ok=failed
echo "rdma link add siw0 type siw netdev kfi_r0 ($RDMA_LINK_ADDR, a veth end):"
rdma_link_up siw || ok=failed
echo "scripts/kfi_info provider=ibverbs node=$RDMA_LINK_ADDR service=7491:"
"$top/scripts/kfi_info" provider=ibverbs node=$RDMA_LINK_ADDR service=7491 |
	sed 's/^/  /' || ok=failed
echo "kfi_demo.ko: one ULP, over kfi_sockets and over kfi_ibverbs:"
insmod "$top/tests/demo/kfi_demo.ko" || ok=failed
dmesg | sed -n 's/.*kfi_demo: demo: /  /p'
dmesg | grep -q 'kfi_demo: demo: done' || ok=failed
echo "live objects per class after the demo:"
sed 's/^/  /' /sys/kernel/debug/kfabric/objects
rmmod kfi_demo || ok=failed
rdma_link_down siw
for ko in "$top"/prov/*/kfi_*.ko; do
	rmmod "$(basename "$ko" .ko)" || ok=failed
done
rmmod kfabric || ok=failed
echo "KFABRIC_DEMO_END $ok"
