#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# run-demo.sh [VARIANT] [demo|bench]: the main job ('make run'): builds
# everything, boots the VM, loads kfabric.ko and every provider and runs the
# demo in it. With 'bench' ('make bench'), runs the benchmark instead.
set -uo pipefail
. "$(dirname "$0")/lib.sh"

variant=${1:-normal}
job=${2:-demo}
case $job in demo|bench) ;; *) die "unknown job $job" ;; esac
kdir=$(step "modules ($variant kernel)" "$KFABRIC_TOP/scripts/modules.sh" "$variant" | tail -n 1) ||
	die "module build failed"
out=$KFABRIC_TOP/test-output/$job
rm -rf "$out"
mkdir -p "$out"
step "$job VM" "$KFABRIC_TOP/scripts/vm.sh" "$kdir" "$out" 900 "tests/guest/$job.sh"
# The demo's own lines, without the kernel's console chatter.
sed -n '/^KFABRIC_DEMO_BEGIN/,/^KFABRIC_DEMO_END/p' "$out/console.log" | tr -d '\r' |
	grep -v '^KFABRIC_DEMO_' || true
grep -q '^KFABRIC_DEMO_END ok' "$out/console.log" || die "the $job failed; log: $out/console.log"
