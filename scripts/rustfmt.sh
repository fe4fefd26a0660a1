#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# rustfmt.sh [--check]: formats (or checks) every Rust file of the tree with
# the Debian rustfmt and the kernel's formatting rules (edition 2021).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$KFABRIC_TOP"
git ls-files -co --exclude-standard '*.rs' | grep -v 'bindings_generated.rs$' |
	xargs "$RUSTFMT" --edition 2021 --config newline_style=Unix "$@"
