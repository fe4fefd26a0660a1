#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# run-demo.sh [VARIANT]: the main job ('make run'): builds everything, boots
# the VM, loads kfabric.ko and every provider and runs the demo in it.
set -uo pipefail
. "$(dirname "$0")/lib.sh"

variant=${1:-normal}
kdir=$(step "modules ($variant kernel)" "$KFABRIC_TOP/scripts/modules.sh" "$variant" | tail -n 1) ||
	die "module build failed"
out=$KFABRIC_TOP/test-output/demo
rm -rf "$out"
mkdir -p "$out"
step "demo VM" "$KFABRIC_TOP/scripts/vm.sh" "$kdir" "$out" 600 tests/guest/demo.sh
# The demo's own lines, without the kernel's console chatter.
sed -n '/^KFABRIC_DEMO_BEGIN/,/^KFABRIC_DEMO_END/p' "$out/console.log" | tr -d '\r' |
	grep -v '^KFABRIC_DEMO_' || true
grep -q '^KFABRIC_DEMO_END ok' "$out/console.log" || die "the demo failed; log: $out/console.log"
