#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# check.sh VARIANT...: every test of kfabric (what 'make check' runs).
#  - static checks: rustfmt, a clippy build with warnings as errors, and
#    kfi/api code that no module uses (scripts/api-dead-code.sh);
#  - per kernel VARIANT (normal, debug): build the modules (warnings are
#    errors), boot the VM, run the module end-to-end checks and the KUnit
#    suites, scan the guest log (and kmemleak on the debug kernel);
#  - on the normal kernel, once more across two guests joined by a virtual
#    NIC (scripts/twohost.sh): the two-host suite kfi_2host, server in
#    one guest, client in the other.
# Logs of the last run: test-output/<variant>/ (console.log, dmesg.log,
# *.ktap). Ends with 'N passed, N failed, N skipped'; exit 1 on failure.
set -uo pipefail
. "$(dirname "$0")/lib.sh"

variants=("$@")
[ ${#variants[@]} -gt 0 ] || variants=(normal debug)
logroot=$KFABRIC_TOP/test-output
rm -rf "$logroot"
mkdir -p "$logroot/static"
results=("static=$logroot/static")
t_all=$(date +%s)

static_ktap=$logroot/static/static.ktap
printf 'KTAP version 1\n# Subtest: static\n' > "$static_ktap"
n=0
static_case() {
	local name=$1 logf=$logroot/static/$1.log
	shift
	n=$((n + 1))
	if step "static check: $name" "$@" > "$logf" 2>&1; then
		echo "    ok $n $name" >> "$static_ktap"
	else
		sed 's/^/    # /' "$logf" | tail -n 30 >> "$static_ktap"
		echo "    not ok $n $name" >> "$static_ktap"
	fi
}

# Building the first variant also sets up the toolchain and the kernel;
# done before the static checks so that its progress shows on the terminal.
step "modules (${variants[0]} kernel)" "$KFABRIC_TOP/scripts/modules.sh" "${variants[0]}" \
	KRUSTFLAGS=-Dwarnings KCFLAGS=-Werror >/dev/null || die "module build failed"
static_case rustfmt "$KFABRIC_TOP/scripts/rustfmt.sh" --check
static_case clippy "$KFABRIC_TOP/scripts/modules.sh" "${variants[0]}" CLIPPY=1 \
	KRUSTFLAGS=-Dwarnings KCFLAGS=-Werror
static_case api-dead-code "$KFABRIC_TOP/scripts/api-dead-code.sh" "${variants[0]}"
echo "    1..$n" >> "$static_ktap"

for v in "${variants[@]}"; do
	out=$logroot/$v
	mkdir -p "$out"
	kdir=$(step "modules ($v kernel)" "$KFABRIC_TOP/scripts/modules.sh" "$v" \
		KRUSTFLAGS=-Dwarnings KCFLAGS=-Werror | tail -n 1) || die "module build for $v failed"
	# The debug kernel runs everything several times slower under TCG.
	limit=600
	[ "$v" = debug ] && limit=1500
	step "test VM ($v kernel)" "$KFABRIC_TOP/scripts/vm.sh" "$kdir" "$out" "$limit" \
		tests/guest/run-suites.sh "$out" "$kdir"
	[ $? -eq 124 ] && log "the $v guest timed out after ${limit}s; its log: $out/console.log"
	results+=("$v=$out")
	[ "$v" = normal ] || continue
	out2=$logroot/normal-2host
	step "two-host VMs (normal kernel)" "$KFABRIC_TOP/scripts/twohost.sh" "$kdir" "$out2" 400 check
	[ $? -eq 124 ] && log "a two-host guest timed out after 400s; logs: $out2/{server,client}/console.log"
	results+=("normal-2host-server=$out2/server" "normal-2host-client=$out2/client")
done

log "all checks ran in $(( $(date +%s) - t_all ))s; logs in $logroot"
python3 "$KFABRIC_TOP/scripts/results.py" "${results[@]}"
