# SPDX-License-Identifier: GPL-2.0
# Shared helpers of the kfabric scripts: cache location, pinned tool versions,
# and progress output with durations (a first run builds a kernel for many
# minutes; whoever waits must see what is going on).

KFABRIC_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
KFABRIC_CACHE=${KFABRIC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kfabric}

# Pinned versions of what is fetched from the registries.
VIRTME_NG_VERSION=1.42
BINDGEN_CLI_VERSION=0.73.2
KERNEL_SOURCE_PREFERRED=linux-source-7.3
LLVM_SUFFIX=-19

# The Debian toolchain the kernel is built with (the rustup one has no
# rust-src and cannot fetch one).
RUSTC=/usr/bin/rustc
RUSTDOC=/usr/bin/rustdoc
RUSTFMT=/usr/bin/rustfmt
CLIPPY_DRIVER=/usr/bin/clippy-driver
BINDGEN=$KFABRIC_CACHE/tools/bin/bindgen
VNG=$KFABRIC_CACHE/venv/bin/vng
export LIBCLANG_PATH=/usr/lib/llvm${LLVM_SUFFIX}/lib

# Arguments every kernel-tree make invocation gets (kernel and modules).
kmake_args() {
	echo "LLVM=$LLVM_SUFFIX RUSTC=$RUSTC RUSTDOC=$RUSTDOC RUSTFMT=$RUSTFMT BINDGEN=$BINDGEN CLIPPY_DRIVER=$CLIPPY_DRIVER"
}

log() { printf '[kfabric %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# step NAME CMD...: runs CMD, printing its name before and its duration after.
step() {
	local name=$1 t0 rc
	shift
	t0=$(date +%s)
	log "step: $name ..."
	"$@"
	rc=$?
	log "step: $name: $( [ $rc -eq 0 ] && echo done || echo "FAILED (rc=$rc)") in $(( $(date +%s) - t0 ))s"
	return $rc
}
