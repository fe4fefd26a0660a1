#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# modules.sh VARIANT [make args...]: builds every kfabric module out of tree
# against the kernel of VARIANT (normal | debug), or against $KDIR when set.
# Prints the KDIR used as its last line on stdout.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

variant=${1:-normal}
shift || true

if [ -n "${KDIR:-}" ]; then
	kdir=$(cd "$KDIR" && pwd)
	[ -f "$kdir/Module.symvers" ] || die "KDIR=$kdir is not a built kernel tree"
	grep -q '^CONFIG_RUST=y' "$kdir/.config" || die "KDIR=$kdir is not built with CONFIG_RUST"
	# A foreign tree still needs bindgen; the tools step is cheap when done.
	"$KFABRIC_TOP/scripts/kernel.sh" tools
else
	kdir=$("$KFABRIC_TOP/scripts/kernel.sh" build "$variant")
fi

cd "$KFABRIC_TOP"
# The objects live beside the sources; a different kernel means a clean.
stamp=.kfabric-kdir
if [ "$(cat "$stamp" 2>/dev/null)" != "$kdir" ]; then
	# shellcheck disable=SC2046
	make -s -C "$kdir" M="$KFABRIC_TOP" $(kmake_args) clean >/dev/null 2>&1 || true
	echo "$kdir" > "$stamp"
fi

# Rust declarations of the C headers, made again when the kernel or a
# header changed: kfabric's C ABI, kfi_ibverbs' shim over ib_core, and
# kfi_sockets' C glue.
generate() {
	local gen=$1 header=$2 kind=$3
	if [ ! -f "$gen" ] || [ "$(cat "$gen.kdir" 2>/dev/null)" != "$kdir" ] ||
	   [ -n "$(find include "$(dirname "$header")" scripts/bindgen.sh -newer "$gen" \( -name '*.h' -o -name bindgen.sh \))" ]; then
		"$KFABRIC_TOP/scripts/bindgen.sh" "$kdir" "$KFABRIC_TOP/$gen" "$KFABRIC_TOP/$header" "$kind"
		echo "$kdir" > "$gen.kdir"
	fi
}
generate kfi/api/bindings_generated.rs include/kfabric/kfi_all.h kfi
generate prov/ibverbs/ib_bindings_generated.rs prov/ibverbs/kfi_ib_shim.h ib
generate prov/sockets/sock_bindings_generated.rs prov/sockets/kfi_sockets_glue.h sock

# shellcheck disable=SC2046
make -C "$kdir" M="$KFABRIC_TOP" $(kmake_args) -j"$(nproc)" "$@" modules >&2
echo "$kdir"
