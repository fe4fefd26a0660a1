# SPDX-License-Identifier: GPL-2.0
# Minimal KTAP writer for the shell tests of the guest.
#   tap_begin FILE SUITE; tap_ok NAME; tap_fail NAME REASON; tap_end
# Cases are written as the KUnit suites' are: "    ok N name".

tap_begin() {
	TAP_FILE=$1
	TAP_SUITE=$2
	TAP_N=0
	TAP_FAILED=0
	printf 'KTAP version 1\n# Subtest: %s\n' "$TAP_SUITE" > "$TAP_FILE"
}

tap_ok() {
	TAP_N=$((TAP_N + 1))
	printf '    ok %d %s\n' "$TAP_N" "$1" >> "$TAP_FILE"
}

tap_fail() {
	TAP_N=$((TAP_N + 1))
	TAP_FAILED=1
	printf '    # %s: %s\n    not ok %d %s\n' "$1" "$2" "$TAP_N" "$1" >> "$TAP_FILE"
}

# tap_check NAME REASON CMD...: ok when CMD succeeds.
tap_check() {
	name=$1 reason=$2
	shift 2
	if "$@" > /dev/null 2>&1; then tap_ok "$name"; else tap_fail "$name" "$reason"; fi
}

tap_end() {
	printf '    1..%d\n' "$TAP_N" >> "$TAP_FILE"
	if [ "$TAP_FAILED" = 0 ]; then
		printf 'ok 1 %s\n' "$TAP_SUITE" >> "$TAP_FILE"
	else
		printf 'not ok 1 %s\n' "$TAP_SUITE" >> "$TAP_FILE"
	fi
}
