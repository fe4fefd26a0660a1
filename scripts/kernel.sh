#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Sets up what kfabric is built and tested with, idempotently:
#   kernel.sh tools          Debian packages, virtme-ng, bindgen-cli
#   kernel.sh source         the kernel source package, unpacked in the cache
#   kernel.sh build VARIANT  a Rust-enabled kernel (VARIANT: normal | debug);
#                            prints the build directory (the KDIR) on stdout
#   kernel.sh path VARIANT   prints that KDIR if it is built, fails otherwise
# Everything lands under $KFABRIC_CACHE, keyed by kernel version and a hash of
# the configuration and toolchain, so later runs reuse it.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

APT_PACKAGES="rustc-web rust-web-src rustfmt-web rust-web-clippy clang-19 lld-19 llvm-19
	libclang-19-dev flex bison bc libelf-dev libssl-dev cpio kmod qemu-system-x86
	busybox-static iproute2 python3-venv python3-pip make gcc git xz-utils util-linux python3-matplotlib"

# The system's own Debian mirror, as its apt configuration names it.
mirror_uri() {
	local uri
	uri=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
	[ -n "$uri" ] || uri=$(awk '$1 == "deb" && $0 !~ /security/ { print $2; exit }' \
		/etc/apt/sources.list 2>/dev/null || true)
	[ -n "$uri" ] || die "no Debian mirror found in the apt configuration"
	echo "$uri"
}

# Some machine images come with qemu-utils from the release's backports: the
# release's own qemu-system-x86 then conflicts with it, and apt would remove
# it. In that case the QEMU system packages come from the same backports
# suite, through an extra source list given on the command line only (the
# system's apt configuration is left alone).
QEMU_SYSTEM_PACKAGES="qemu-system-x86 qemu-system-common qemu-system-data seabios"
apt_extra=()
qemu_backports=()
qemu_from_backports() {
	local ver codename list p
	ver=$(dpkg-query -W -f='${Version}' qemu-utils 2>/dev/null || true)
	case "$ver" in *~bpo*) ;; *) return 1 ;; esac
	codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
	[ -n "$codename" ] || return 1
	list="$KFABRIC_CACHE/apt-backports.list"
	echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $(mirror_uri) $codename-backports main" > "$list"
	apt_extra=(-o "Dir::Etc::SourceList=$list")
	for p in $QEMU_SYSTEM_PACKAGES; do qemu_backports+=("$p/$codename-backports"); done
}

install_apt() {
	local missing=() p
	for p in $APT_PACKAGES; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
			missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && { log "apt packages: all present"; return 0; }
	log "apt packages to install: ${missing[*]} (log: $KFABRIC_CACHE/apt-install.log)"
	if [[ " ${missing[*]} " == *" qemu-system-x86 "* ]] && qemu_from_backports; then
		log "qemu-utils comes from backports here: QEMU from there too (${qemu_backports[*]})"
		for p in "${!missing[@]}"; do [ "${missing[$p]}" = qemu-system-x86 ] && unset "missing[$p]"; done
		missing+=("${qemu_backports[@]}")
	fi
	apt-get "${apt_extra[@]}" update -qq > "$KFABRIC_CACHE/apt-install.log" 2>&1 ||
		{ tail -n 20 "$KFABRIC_CACHE/apt-install.log" >&2; die "apt-get update failed"; }
	# --no-remove: set-up never takes away a package the machine has; if
	# one would have to go, stop and say so instead.
	if ! DEBIAN_FRONTEND=noninteractive apt-get "${apt_extra[@]}" install -y -q \
		--no-install-recommends --no-remove "${missing[@]}" >> "$KFABRIC_CACHE/apt-install.log" 2>&1; then
		tail -n 20 "$KFABRIC_CACHE/apt-install.log" >&2
		die "installing ${missing[*]} failed (apt would have to remove a package this machine has, or a package is not offered); full log: $KFABRIC_CACHE/apt-install.log"
	fi
}

install_virtme() {
	if [ -x "$VNG" ] && "$VNG" --version 2>/dev/null | grep -q "$VIRTME_NG_VERSION"; then
		log "virtme-ng $VIRTME_NG_VERSION: present"
		return 0
	fi
	python3 -m venv "$KFABRIC_CACHE/venv" >&2
	"$KFABRIC_CACHE/venv/bin/pip" install -q "virtme-ng==$VIRTME_NG_VERSION" >&2
}

install_bindgen() {
	if [ -x "$BINDGEN" ] && "$BINDGEN" --version 2>/dev/null | grep -q "$BINDGEN_CLI_VERSION"; then
		log "bindgen-cli $BINDGEN_CLI_VERSION: present"
		return 0
	fi
	# Built with the machine's cargo, outside the repo so that the repo's
	# rust-toolchain.toml does not apply.
	(cd "$KFABRIC_CACHE" && cargo install -q --locked --version "$BINDGEN_CLI_VERSION" \
		--root "$KFABRIC_CACHE/tools" bindgen-cli) >&2
}

cmd_tools() {
	mkdir -p "$KFABRIC_CACHE"
	step "apt packages" install_apt
	step "virtme-ng (PyPI)" install_virtme
	step "bindgen-cli (cargo install)" install_bindgen
}

# Fetches the kernel source package through a private apt state whose only
# source is the system's own Debian mirror with the newer suites, so that the
# system's apt configuration is left alone.
fetch_source() {
	local apt="$KFABRIC_CACHE/apt" uri pkg ver deb dir opts
	uri=$(mirror_uri)
	mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial"
	: > "$apt/status"
	{
		echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $uri trixie-backports main"
		echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $uri trixie main"
	} > "$apt/sources.list"
	opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o "Dir::Etc::SourceParts=/nonexistent"
	      -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache"
	      -o "Dir::State::Status=$apt/status" -o "APT::Sandbox::User=root")
	apt-get "${opts[@]}" update -qq >&2
	pkg=$KERNEL_SOURCE_PREFERRED
	if ! apt-cache "${opts[@]}" show "$pkg" >/dev/null 2>&1; then
		pkg=$(apt-cache "${opts[@]}" search --names-only '^linux-source-7\.[0-9]+$' |
			awk '{ print $1 }' | sort -V | tail -n 1)
		[ -n "$pkg" ] || die "no linux-source-7.* package offered"
		log "$KERNEL_SOURCE_PREFERRED not offered; falling back to $pkg"
	fi
	ver=$(apt-cache "${opts[@]}" policy "$pkg" | awk '/Candidate:/ { print $2 }')
	log "kernel source: $pkg $ver"
	dir="$KFABRIC_CACHE/src/$pkg-$ver"
	if [ ! -f "$dir/.kfabric-unpacked" ]; then
		rm -rf "$dir" "$apt/debs"
		mkdir -p "$dir" "$apt/debs"
		(cd "$apt/debs" && apt-get "${opts[@]}" download "$pkg" >&2)
		deb=$(ls "$apt"/debs/*.deb)
		dpkg-deb --fsys-tarfile "$deb" | tar -xO --wildcards './usr/src/linux-source-*.tar.xz' |
			tar -xJ -C "$dir" --strip-components=1
		rm -rf "$apt/debs"
		touch "$dir/.kfabric-unpacked"
	fi
	echo "$dir" > "$KFABRIC_CACHE/src/current"
}

cmd_source() {
	mkdir -p "$KFABRIC_CACHE/src"
	if [ -f "$KFABRIC_CACHE/src/current" ] && [ -f "$(cat "$KFABRIC_CACHE/src/current")/.kfabric-unpacked" ]; then
		log "kernel source: $(cat "$KFABRIC_CACHE/src/current") (cached)"
		return 0
	fi
	step "kernel source package" fetch_source
}

fragments() {
	case "$1" in
	normal) echo "$KFABRIC_TOP/scripts/config/kfabric.config $KFABRIC_TOP/scripts/config/speed.config" ;;
	debug) echo "$KFABRIC_TOP/scripts/config/kfabric.config $KFABRIC_TOP/scripts/config/debug.config" ;;
	*) die "unknown kernel variant '$1' (normal or debug)" ;;
	esac
}

# The cache key: source version, configuration fragments and toolchain.
build_dir() {
	local variant=$1 src key
	src=$(cat "$KFABRIC_CACHE/src/current" 2>/dev/null) || die "kernel source not fetched"
	# shellcheck disable=SC2046
	key=$( { basename "$src"; cat $(fragments "$variant"); "$RUSTC" --version;
		"clang$LLVM_SUFFIX" --version | head -n 1; "$BINDGEN" --version; } | sha256sum | cut -c1-12)
	echo "$KFABRIC_CACHE/kernel/$(basename "$src")-$variant-$key"
}

configure_and_build() {
	local variant=$1 src=$2 out=$3 f
	# shellcheck disable=SC2046
	make -s -C "$src" O="$out" $(kmake_args) tinyconfig >&2
	for f in $(fragments "$variant"); do
		"$src/scripts/kconfig/merge_config.sh" -m -O "$out" "$out/.config" "$f" >/dev/null
	done
	# shellcheck disable=SC2046
	make -s -C "$src" O="$out" $(kmake_args) olddefconfig >&2
	for f in CONFIG_RUST CONFIG_KUNIT CONFIG_INFINIBAND CONFIG_RDMA_SIW CONFIG_ACPI; do
		grep -q "^$f=y" "$out/.config" || die "$f did not stay set; see $out/.config"
	done
	if [ "$variant" = normal ]; then
		grep -q "^CONFIG_CC_OPTIMIZE_FOR_PERFORMANCE=y" "$out/.config" ||
			die "CONFIG_CC_OPTIMIZE_FOR_PERFORMANCE did not stay set; see $out/.config"
	fi
	if [ "$variant" = debug ]; then
		for f in CONFIG_KASAN CONFIG_PROVE_LOCKING CONFIG_DEBUG_KMEMLEAK CONFIG_DEBUG_ATOMIC_SLEEP; do
			grep -q "^$f=y" "$out/.config" || die "$f did not stay set; see $out/.config"
		done
	fi
	log "building the $variant kernel in $out with $(nproc) jobs (about 6-10 minutes on 2 cores); full log: $out/build.log"
	# shellcheck disable=SC2046
	make -C "$src" O="$out" $(kmake_args) -j"$(nproc)" bzImage modules > "$out/build.log" 2>&1 &
	local pid=$! rc
	build_progress "$variant" "$out/build.log" "$pid"
	wait "$pid" && rc=0 || rc=$?
	[ $rc -eq 0 ] || { tail -n 40 "$out/build.log" >&2; die "kernel build failed; full log: $out/build.log"; }
	# The next build of this variant estimates its length from this one.
	build_steps "$out/build.log" > "$KFABRIC_CACHE/kernel/steps-$variant"
}

# The compile and link steps a kernel build log shows so far.
build_steps() { grep -cE '^  (CC|RUSTC|AS|LD|AR|BINDGEN|EXPORTS|HOSTCC)' "$1" 2>/dev/null || true; }

# build_progress VARIANT LOG PID: one progress line (steps done / expected,
# elapsed, estimate) while PID runs; redrawn in place on a terminal, a new
# line every minute otherwise (CI logs).
build_progress() {
	local variant=$1 logf=$2 pid=$3 t0 total done el left line last=0
	t0=$(date +%s)
	# Measured on this project's machines; replaced by the last real count.
	total=$(cat "$KFABRIC_CACHE/kernel/steps-$variant" 2>/dev/null || true)
	[ -n "$total" ] || { [ "$variant" = debug ] && total=2350 || total=2300; }
	while kill -0 "$pid" 2>/dev/null; do
		sleep 5
		done=$(build_steps "$logf")
		el=$(( $(date +%s) - t0 ))
		left=?
		[ "$done" -gt 50 ] && [ "$done" -lt "$total" ] &&
			left=$(( el * (total - done) / done / 60 + 1 ))m
		line=$(printf '[kfabric %s] %s kernel: %s/~%s steps, %dm%02ds elapsed, ~%s left' \
			"$(date +%H:%M:%S)" "$variant" "$done" "$total" $((el / 60)) $((el % 60)) "$left")
		if [ -t 2 ]; then
			printf '\r%s ' "$line" >&2
		elif [ $((el - last)) -ge 60 ]; then
			echo "$line" >&2
			last=$el
		fi
	done
	[ -t 2 ] && echo >&2
	return 0
}

cmd_build() {
	local variant=${1:-normal} out src
	fragments "$variant" >/dev/null
	cmd_tools
	cmd_source
	src=$(cat "$KFABRIC_CACHE/src/current")
	out=$(build_dir "$variant")
	mkdir -p "$KFABRIC_CACHE/kernel"
	# One build per configuration at a time; other variants go on meanwhile.
	exec 9> "$out.lock"
	flock 9
	if [ -f "$out/.kfabric-built" ]; then
		log "$variant kernel: $out (cached)"
	else
		rm -rf "$out"
		mkdir -p "$out"
		step "$variant kernel build" configure_and_build "$variant" "$src" "$out"
		touch "$out/.kfabric-built"
	fi
	echo "$out"
}

cmd_path() {
	local out
	out=$(build_dir "${1:-normal}")
	[ -f "$out/.kfabric-built" ] || exit 1
	echo "$out"
}

case "${1:-}" in
tools) cmd_tools ;;
source) cmd_tools; cmd_source ;;
build) cmd_build "${2:-normal}" ;;
path) cmd_path "${2:-normal}" ;;
*) echo "usage: $0 tools | source | build [normal|debug] | path [normal|debug]" >&2; exit 2 ;;
esac
