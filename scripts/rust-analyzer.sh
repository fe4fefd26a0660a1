#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# rust-analyzer.sh: writes rust-project.json at the top of the tree, so an
# editor's rust-analyzer understands kfabric's crates (the kernel crate, the
# core, the providers, the tests) as they are built ('make rust-analyzer').
set -euo pipefail
. "$(dirname "$0")/lib.sh"

kdir=$("$KFABRIC_TOP/scripts/modules.sh" normal | tail -n 1) || die "module build failed"
cd "$KFABRIC_TOP"
# shellcheck disable=SC2046
make -s -C "$kdir" M="$KFABRIC_TOP" $(kmake_args) rust-analyzer >&2
[ -s rust-project.json ] || die "rust-project.json was not written"
log "wrote $KFABRIC_TOP/rust-project.json"
