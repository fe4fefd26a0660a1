# SPDX-License-Identifier: GPL-2.0
#
# Shared by the kfabric selftests: the kernel's KTAP helpers and where the
# modules are. KFABRIC_TOP is the kfabric tree (default: three levels up
# from here); KSFT_HELPERS the kernel's kselftest/ktap_helpers.sh (default:
# beside this directory, as in a kernel tree).
here=$(cd "$(dirname "$0")" && pwd)
KFABRIC_TOP=${KFABRIC_TOP:-$(cd "$here/../../.." && pwd)}
KSFT_HELPERS=${KSFT_HELPERS:-$here/../kselftest/ktap_helpers.sh}
if [ ! -r "$KSFT_HELPERS" ]; then
	echo "1..0 # SKIP no ktap_helpers.sh at $KSFT_HELPERS"
	exit 4
fi
# shellcheck source=/dev/null
. "$KSFT_HELPERS"

KO_CORE=$KFABRIC_TOP/kfi/kfabric.ko
KO_SOCKETS=$KFABRIC_TOP/prov/sockets/kfi_sockets.ko
KO_IBVERBS=$KFABRIC_TOP/prov/ibverbs/kfi_ibverbs.ko
KO_HOLDER=$KFABRIC_TOP/tests/holder/kfi_holder.ko
DBG=/sys/kernel/debug/kfabric

mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug

if [ "$(id -u)" != 0 ] || [ ! -f "$KO_CORE" ]; then
	ktap_print_header
	ktap_skip_all "needs root and built kfabric modules ($KO_CORE)"
	exit "$KSFT_SKIP"
fi

loaded() { grep -q "^$1 " /proc/modules; }
providers() { cat "$DBG/providers" 2>/dev/null; }
has_provider() { providers | grep -q "^$1 "; }
# The open objects of class $1 (debugfs 'objects').
objects() { awk -v c="$1" '$1 == c { print $2 }' "$DBG/objects" 2>/dev/null; }
# Leaves nothing of kfabric loaded.
unload_all() { rmmod kfi_holder kfi_ibverbs kfi_sockets kfabric 2>/dev/null; true; }
