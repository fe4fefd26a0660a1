#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# vm.sh KDIR OUTDIR TIMEOUT_S CMD...: boots KDIR's bzImage under virtme-ng
# and runs CMD inside the guest (the host's root file system, read-only,
# with OUTDIR writable). The console log lands in OUTDIR/console.log. A guest
# that does not finish in TIMEOUT_S seconds is killed; exit status 124 then.
#
# KVM is used when a short probe boot succeeds with it (cached per machine
# in $KFABRIC_CACHE/accel); on this machine kind a KVM guest hangs at boot,
# so TCG is the usual result. KFABRIC_ACCEL=kvm|tcg overrides the probe.
# KFABRIC_VM_MEMORY and KFABRIC_VM_CPUS size the guest (2G, 2 CPUs);
# KFABRIC_VM_QEMU_OPTS adds QEMU arguments (the NIC of scripts/twohost.sh).
set -uo pipefail
. "$(dirname "$0")/lib.sh"

kdir=$1 outdir=$2 limit=$3
shift 3
bz=$kdir/arch/x86/boot/bzImage
[ -f "$bz" ] || die "no kernel image at $bz"
mkdir -p "$outdir"
# vng starts its helpers (virtme-run, ...) by name.
export PATH=$KFABRIC_CACHE/venv/bin:$PATH

probe_accel() {
	local log
	[ -w /dev/kvm ] || { echo tcg; return; }
	log=$(mktemp)
	timeout --kill-after=5 40 "$VNG" --run "$bz" --memory 512M --cpus 1 \
		--exec 'echo KFABRIC_KVM_PROBE_OK' > "$log" 2>&1 < /dev/null
	if grep -q KFABRIC_KVM_PROBE_OK "$log"; then echo kvm; else echo tcg; fi
	rm -f "$log"
}

accel=${KFABRIC_ACCEL:-}
if [ -z "$accel" ]; then
	accel=$(cat "$KFABRIC_CACHE/accel" 2>/dev/null || true)
	if [ -z "$accel" ]; then
		accel=$(probe_accel)
		echo "$accel" > "$KFABRIC_CACHE/accel"
		log "KVM probe: using $accel"
	fi
fi
accel_opts=()
[ "$accel" = tcg ] && accel_opts=(--disable-kvm)

extra_opts=()
[ -n "${KFABRIC_VM_QEMU_OPTS:-}" ] && extra_opts=("--qemu-opts=$KFABRIC_VM_QEMU_OPTS")

# vng runs the guest command through a shell: quote each word.
cmd=$(printf '%q ' "$@")
t0=$(date +%s)
timeout --kill-after=20 "$limit" "$VNG" --run "$bz" "${accel_opts[@]}" "${extra_opts[@]}" \
	--memory "${KFABRIC_VM_MEMORY:-2G}" --cpus "${KFABRIC_VM_CPUS:-2}" --verbose --rwdir "$outdir" --cwd "$KFABRIC_TOP" \
	--append "panic_on_warn=0 kmemleak=on" \
	--exec "$cmd" > "$outdir/console.log" 2>&1 < /dev/null
rc=$?
log "guest ($accel) ran $(( $(date +%s) - t0 ))s, vng exit $rc"
# vng reports 255 even when the guest command succeeded; the verdict comes
# from the guest's own output. Only a timeout is reported as such.
[ $rc -eq 124 ] || [ $rc -eq 137 ] && exit 124
exit 0
