#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The benchmark of 'make bench', inside the VM: records the guest's facts
# and CPU times, loads kfabric.ko, kfi_sockets.ko and kfi_ibverbs.ko, runs
# kfi_bench.ko once per fabric (its parameters: the arguments after
# OUTDIR) and keeps the lines it prints for the host
# (scripts/bench-report.py): OUTDIR/samples.txt and OUTDIR/guest.txt; on
# a kernel with kmemleak (the debug kernel), its report after the modules
# are unloaded: OUTDIR/kmemleak.txt.
#
# Fabrics: 'sockets' (kfi_sockets against kernel TCP over loopback), then
# 'siw' and 'rxe' (kfi_ibverbs against raw verbs over a soft RDMA device on
# a veth end, tests/selftests/kfabric/rdma_link.sh, there only for its
# pass). The argument fabrics=LIST (comma-separated) picks some.
#
# Arguments kfi_sockets.NAME=VALUE are kfi_sockets.ko's parameters (for
# example kfi_sockets.inline_tx=0 kfi_sockets.rx_in_callback=0: the
# datapath without its fast paths, to compare).
#
# usage: bench.sh OUTDIR [fabrics=LIST] [kfi_sockets.PARAM=V...] [kfi_bench parameters...]
# (from the top of the tree)
# KFABRIC_BENCH_MODULE: another bench module to run instead, once, with
# the parameters (a path from the top of the tree; tests/guest/twohost.sh
# runs kfi_twohost_bench.ko).
out=${1:?usage: bench.sh OUTDIR [params...]}
shift
top=$(pwd)
. "$top/tests/selftests/kfabric/rdma_link.sh"
fabrics="sockets siw rxe"
[ -n "${KFABRIC_BENCH_MODULE:-}" ] && fabrics=sockets
params=
sockets_params=
for a in "$@"; do
	case $a in
	fabrics=*) fabrics=$(echo "${a#fabrics=}" | tr , ' ') ;;
	kfi_sockets.*) sockets_params="$sockets_params ${a#kfi_sockets.}" ;;
	*) params="$params $a" ;;
	esac
done
mkdir -p "$out"
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug 2>/dev/null
# Leaks from before the bench (boot) are not ours (kmemleak: debug kernel).
[ -e /sys/kernel/debug/kmemleak ] && echo clear > /sys/kernel/debug/kmemleak
echo KFABRIC_DEMO_BEGIN
echo "kernel: $(uname -r), $(nproc) CPUs"

facts=$out/guest.txt
{
	echo "kernel=$(uname -r)"
	echo "version=$(uname -v)"
	echo "vcpus=$(nproc)"
	echo "clocksource=$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)"
	echo "cpu_model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
	echo "hypervisor=$(dmesg | sed -n 's/.*Hypervisor detected: //p' | head -n 1)"
	echo "preempt_dynamic=$(cat /sys/kernel/debug/sched/preempt 2>/dev/null)"
	echo "mem_kb=$(sed -n 's/^MemTotal: *\([0-9]*\).*/\1/p' /proc/meminfo)"
	echo "params=$params"
	echo "sockets_params=$sockets_params"
	echo "fabrics=$fabrics"
	echo "stat_before=$(head -n 1 /proc/stat)"
} > "$facts"

# The module's lines go to the log buffer only (a console write under TCG
# is slow and may run beside the next timed run); a reader keeps them all
# (the buffer is small).
echo 4 > /proc/sys/kernel/printk
kmsg=/tmp/kfi-bench-kmsg.txt
cat /dev/kmsg > "$kmsg" &
reader=$!

ok=ok
insmod "$top/kfi/kfabric.ko" || ok=failed
# The fan-out rows' hub has a connection to each of up to 4096 peers
# (kfi_bench's fan_peers; kfi_sockets' default rdm_max_peers is 128); the
# kfi_sockets.PARAM=V arguments come after, and may say otherwise.
# shellcheck disable=SC2086 # module parameters, split on blanks
insmod "$top/prov/sockets/kfi_sockets.ko" rdm_max_peers=4096 $sockets_params || ok=failed
# siw lets any peer read any region (and all memory, through a key a read
# shows), so kfi_ibverbs offers it, and reads on it, only when told that
# every peer is trusted (Documentation/ibverbs.rst); both sides of the
# bench are this host.
insmod "$top/prov/ibverbs/kfi_ibverbs.ko" global_key_devices=1 global_key_reads=1 || ok=failed
t0=$(date +%s)
ko=${KFABRIC_BENCH_MODULE:-tests/bench/kfi_bench.ko}
name=$(basename "$ko" .ko)
passes=0
for f in $fabrics; do
	case $f in
	sockets)
		# shellcheck disable=SC2086 # module parameters, split on blanks
		insmod "$top/$ko" $params || ok=failed
		;;
	siw | rxe)
		if ! rdma_link_up "$f"; then
			echo "  $f: could not add the device"
			ok=failed
			rdma_link_down "$f"
			continue
		fi
		# shellcheck disable=SC2086
		insmod "$top/$ko" ib_node=$RDMA_LINK_ADDR $params || ok=failed
		;;
	*)
		echo "  unknown fabric $f"
		ok=failed
		continue
		;;
	esac
	passes=$((passes + 1))
	rmmod "$name" || ok=failed
	case $f in siw | rxe) rdma_link_down "$f" ;; esac
done
echo "bench_seconds=$(( $(date +%s) - t0 ))" >> "$facts"
echo "stat_after=$(head -n 1 /proc/stat)" >> "$facts"

# The reader may lag behind the module's last line.
i=0
while [ $i -lt 20 ] &&
	[ "$(grep -c "$name: bench: \\(done\\|failed\\)" "$kmsg")" -lt $passes ]; do
	sleep 0.5
	i=$((i + 1))
done
kill "$reader"
sed -n "s/^[^;]*;$name: bench: /bench: /p" "$kmsg" > "$out/samples.txt"
grep -v '^bench: sample ' "$out/samples.txt" | sed 's/^bench: /  /'
echo "  $(grep -c '^bench: sample ' "$out/samples.txt") samples in $out/samples.txt"
[ "$(grep -c '^bench: done' "$out/samples.txt")" -eq $passes ] || ok=failed
grep -q '^bench: failed' "$out/samples.txt" && ok=failed

rmmod kfi_ibverbs || ok=failed
rmmod kfi_sockets || ok=failed
rmmod kfabric || ok=failed
# Two scans: kmemleak reports an object only after it stayed unreferenced
# across scans. The report is kept; its objects are counted here.
if [ -e /sys/kernel/debug/kmemleak ]; then
	echo scan > /sys/kernel/debug/kmemleak
	sleep 5
	echo scan > /sys/kernel/debug/kmemleak
	cat /sys/kernel/debug/kmemleak > "$out/kmemleak.txt"
	echo "  kmemleak: $(grep -c 'unreferenced object' "$out/kmemleak.txt") unreferenced objects ($out/kmemleak.txt)"
fi
echo "KFABRIC_DEMO_END $ok"
