#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# run-demo.sh [VARIANT] [demo|bench]: the main job ('make run'): builds
# everything, boots the VM, loads kfabric.ko and every provider and runs the
# demo in it. With 'bench' ('make bench'), runs the benchmark instead
# (kfi_bench parameters in $KFABRIC_BENCH_ARGS), records the host's load
# around it and summarises it with scripts/bench-report.py. With
# KFABRIC_HOSTS=2 ('make bench HOSTS=2') the bench runs across the two-host
# topology of scripts/twohost.sh: server in one guest, client in the other;
# the client's directory holds the samples the report reads.
set -uo pipefail
. "$(dirname "$0")/lib.sh"

variant=${1:-normal}
job=${2:-demo}
case $job in demo|bench) ;; *) die "unknown job $job" ;; esac
hosts=${KFABRIC_HOSTS:-1}
case $hosts in 1) ;; 2) [ "$job" = bench ] || die "HOSTS=2 is for the bench" ;; *) die "HOSTS is 1 or 2" ;; esac

# host_load NAME: the host's load as NAME_* lines: load averages, the busy
# ticks of all CPUs, the CPU seconds of this script's finished children (the
# VM: 'times' in this shell, not in a subshell) and the time; the report
# subtracts the VM's share to see what else ran.
host_load() {
	echo "$1_loadavg=$(cat /proc/loadavg)"
	echo "$1_stat=$(head -n 1 /proc/stat)"
	times > "$out/.times"
	echo "$1_times=$(tail -n 1 "$out/.times")"
	echo "$1_time=$(date +%s.%N)"
}
kdir=$(step "modules ($variant kernel)" "$KFABRIC_TOP/scripts/modules.sh" "$variant" | tail -n 1) ||
	die "module build failed"
out=$KFABRIC_TOP/test-output/$job
[ "$hosts" = 2 ] && out=$KFABRIC_TOP/test-output/bench-2host
rm -rf "$out"
mkdir -p "$out"
top_out=$out
# The two-host bench: the client's samples, where the report reads them.
[ "$hosts" = 2 ] && out=$top_out/client && mkdir -p "$out"
args=()
if [ "$job" = bench ]; then
	# shellcheck disable=SC2206 # module parameters, split on blanks
	args=("$out" ${KFABRIC_BENCH_ARGS:-})
	host_load before > "$out/host.txt"
fi
if [ "$hosts" = 2 ]; then
	step "bench VMs (two hosts)" "$KFABRIC_TOP/scripts/twohost.sh" "$kdir" "$top_out" 900 bench \
		${KFABRIC_BENCH_ARGS:-}
else
	# The bench's three passes (sockets, siw, rxe) take about 10 minutes.
	limit=900
	[ "$job" = bench ] && limit=1800
	step "$job VM" "$KFABRIC_TOP/scripts/vm.sh" "$kdir" "$out" $limit "tests/guest/$job.sh" "${args[@]}"
fi
[ "$job" = bench ] && host_load after >> "$out/host.txt"
# The demo's own lines, without the kernel's console chatter.
sed -n '/^KFABRIC_DEMO_BEGIN/,/^KFABRIC_DEMO_END/p' "$out/console.log" | tr -d '\r' |
	grep -v '^KFABRIC_DEMO_' || true
if [ "$job" = bench ] && [ -s "$out/samples.txt" ]; then
	{
		echo "accel=${KFABRIC_ACCEL:-$(cat "$KFABRIC_CACHE/accel" 2>/dev/null)}"
		echo "host_cpus=$(nproc)"
		echo "host_cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
		echo "user_hz=$(getconf CLK_TCK)"
		echo "kconfig=$kdir/.config"
	} >> "$out/host.txt"
	rm -f "$out/.times"
	# Debian's python3, where the python3-matplotlib package is installed.
	py=/usr/bin/python3
	[ -x "$py" ] || py=python3
	"$py" "$KFABRIC_TOP/scripts/bench-report.py" "$out" || die "bench report failed"
fi
grep -q '^KFABRIC_DEMO_END ok' "$out/console.log" || die "the $job failed; log: $out/console.log"
if [ "$hosts" = 2 ]; then
	grep -q '^KFABRIC_DEMO_END ok' "$top_out/server/console.log" ||
		die "the bench server failed; log: $top_out/server/console.log"
fi
