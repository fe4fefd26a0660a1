#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The demo of 'make run', inside the VM: load kfabric.ko and every provider,
# show what registered, run kfi_demo.ko (two kfi_sockets endpoints over
# loopback: connection, ping-pong, stream), unload again.
top=$(pwd)
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
echo KFABRIC_DEMO_BEGIN
echo "kernel: $(uname -r)"
ok=ok
insmod "$top/kfi/kfabric.ko" || ok=failed
for ko in "$top"/prov/*/kfi_*.ko; do
	insmod "$ko" || ok=failed
done
echo "registered providers (name version open-objects):"
sed 's/^/  /' /sys/kernel/debug/kfabric/providers
echo "live objects per class:"
sed 's/^/  /' /sys/kernel/debug/kfabric/objects
echo "scripts/kfi_info provider=sockets node=127.0.0.1 service=7471 caps=msg,rma ep=msg:"
"$top/scripts/kfi_info" provider=sockets node=127.0.0.1 service=7471 caps=msg,rma ep=msg |
	sed 's/^/  /' || ok=failed
echo "kfi_demo.ko: two kfi_sockets endpoints over loopback:"
insmod "$top/tests/demo/kfi_demo.ko" || ok=failed
dmesg | sed -n 's/.*kfi_demo: demo: /  /p'
dmesg | grep -q 'kfi_demo: demo: done' || ok=failed
echo "live objects per class after the demo:"
sed 's/^/  /' /sys/kernel/debug/kfabric/objects
rmmod kfi_demo || ok=failed
for ko in "$top"/prov/*/kfi_*.ko; do
	rmmod "$(basename "$ko" .ko)" || ok=failed
done
rmmod kfabric || ok=failed
echo "KFABRIC_DEMO_END $ok"
