#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The benchmark of 'make bench', inside the VM: load kfabric.ko and
# kfi_sockets.ko, run kfi_bench.ko (plain kernel TCP as the baseline, then
# kfi_sockets) and print its results.
top=$(pwd)
echo KFABRIC_DEMO_BEGIN
echo "kernel: $(uname -r), $(nproc) CPUs"
ok=ok
insmod "$top/kfi/kfabric.ko" || ok=failed
insmod "$top/prov/sockets/kfi_sockets.ko" || ok=failed
insmod "$top/tests/bench/kfi_bench.ko" || ok=failed
dmesg | sed -n 's/.*kfi_bench: bench: /  /p'
dmesg | grep -q 'kfi_bench: bench: done' || ok=failed
rmmod kfi_bench || ok=failed
rmmod kfi_sockets || ok=failed
rmmod kfabric || ok=failed
echo "KFABRIC_DEMO_END $ok"
