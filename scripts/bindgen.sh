#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# bindgen.sh KDIR OUT HEADER: Rust declarations of kfabric's C ABI.
#
# Uses the C flags the kernel build itself gave bindgen (saved in
# rust/bindings/.bindings_generated.rs.cmd), so the layout matches the
# kernel's. Only items from include/kfabric/ are emitted; the kernel types
# they use (struct module, kvec, ...) come from kernel::bindings, imported by
# the file that includes the output; the integer typedefs (u64, ...) they
# need are generated as aliases of the same primitive types.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

kdir=$1 out=$2 header=$3
cmdfile=$kdir/rust/bindings/.bindings_generated.rs.cmd
[ -f "$cmdfile" ] || die "$cmdfile missing: is $kdir a built Rust-enabled kernel?"

# The clang arguments are what follows ' -- ' in the saved command; the
# dependency-file option and the post-processing after ";" are dropped.
clang_args=$(sed -n 's/^savedcmd_[^ ]* := .* -- //p' "$cmdfile" | sed -e 's/;.*$//' -e 's/-Wp,-MMD,[^ ]*//')
[ -n "$clang_args" ] || die "no clang arguments found in $cmdfile"
bindgen=$(sed -n 's/^savedcmd_[^ ]* := \([^ ]*\) .*/\1/p' "$cmdfile")

tmp=$out.tmp
cd "$kdir"
# shellcheck disable=SC2086
"$bindgen" "$header" \
	--use-core --ctypes-prefix ffi --with-derive-default --no-layout-tests \
	--no-debug '.*' --no-doc-comments --rust-target 1.85 \
	--allowlist-file '.*/include/kfabric/.*' \
	--blocklist-type 'module|kvec|bio_vec|scatterlist|net|page' \
	--default-enum-style consts --no-prepend-enum-name \
	-o "$tmp" -- $clang_args -I"$KFABRIC_TOP/include" -DMODULE
# Capability and flag bits are 64-bit in C (1ULL << n); bindgen types a
# macro by its value, so give the ones marked so in the headers u64.
# (~0ULL, "all ones", comes out as the i32 -1.)
for name in $(grep -hE '^#define KFI_[A-Z0-9_]+[[:space:]]+.*(1ULL|~0ULL|/\* u64 \*/)' \
		"$KFABRIC_TOP"/include/kfabric/*.h | awk '{ print $2 }'); do
	sed -i -e "s/^pub const $name: u32 = /pub const $name: u64 = /" \
	       -e "s/^pub const $name: i32 = -1;/pub const $name: u64 = u64::MAX;/" "$tmp"
done
mv "$tmp" "$out"
