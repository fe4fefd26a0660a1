#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# api-dead-code.sh VARIANT: dead code in kfi/api is an error, once.
#
# kfi/api is shared by source: every module that includes it compiles its
# own copy and uses a part, so each copy allows dead code (kfi/api/mod.rs).
# Here every module is built once more, from a copy of the sources (the
# tree's objects stay), with dead_code forced to warn; an item of kfi/api
# reported dead by every module that includes its file is used by none,
# and fails the check. Prints those items; exit 1 if there are any.
# Run by 'make clippy' and by the static checks of 'make check'.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

variant=${1:-normal}
kdir=$("$KFABRIC_TOP/scripts/kernel.sh" build "$variant")
cd "$KFABRIC_TOP"
gen=(kfi/api/bindings_generated.rs prov/ibverbs/ib_bindings_generated.rs
     prov/sockets/sock_bindings_generated.rs)
# The copy needs the generated declarations that a module build makes.
[ -f "${gen[0]}" ] && [ -f "${gen[1]}" ] && [ -f "${gen[2]}" ] || "$KFABRIC_TOP/scripts/modules.sh" "$variant" >/dev/null
out=$KFABRIC_TOP/.api-dead-code
log=$out/build.log
rm -rf "$out"
mkdir -p "$out/src"
{ git ls-files -co --exclude-standard; printf '%s\n' "${gen[@]}"; } |
	tar -cf - -T - | tar -xf - -C "$out/src"
# shellcheck disable=SC2046
make -C "$kdir" M="$out/src" $(kmake_args) -j"$(nproc)" \
	KRUSTFLAGS="--force-warn=dead_code --error-format=json" modules > "$log" 2>&1 ||
	die "the build failed; its log: $log"
python3 - "$log" <<'PY'
import collections, json, os, re, subprocess, sys

# How many crates compile each file of kfi/api: every one that includes
# kfi/api/mod.rs, plus those that include the file itself by path.
direct = collections.Counter()
path = re.compile(r'^#\[path = "([^"]+)"\]', re.M)
for f in subprocess.check_output(["git", "ls-files", "*.rs"], text=True).split():
    for m in path.finditer(open(f, errors="replace").read()):
        direct[os.path.normpath(os.path.join(os.path.dirname(f), m.group(1)))] += 1
api = ("kfi/api/kfabric.rs", "kfi/api/ring.rs", "kfi/api/provider/",
       "kfi/api/toolkit/", "kfi/api/ulp/")

def crates(name):
    return direct["kfi/api/mod.rs"] + direct[name]

dead = collections.Counter()
for line in open(sys.argv[1], errors="replace"):
    try:
        d = json.loads(line) if line.startswith("{") else None
    except ValueError:
        d = None
    if not d or (d.get("code") or {}).get("code") != "dead_code":
        continue
    for s in d.get("spans", []):
        name = s["file_name"]
        name = name[name.find("kfi/api/"):] if "kfi/api/" in name else name
        if s.get("is_primary") and name.startswith(api):
            text = s["text"][0]["text"].strip() if s.get("text") else ""
            dead[(name, s["line_start"], text)] += 1
never = sorted(k for k, n in dead.items() if n >= crates(k[0]))
for name, line, text in never:
    print(f"{name}:{line}: used by no module: {text}")
print(f"kfi/api: {len(never)} items used by no module of the {direct['kfi/api/mod.rs']} that include it")
sys.exit(1 if never else 0)
PY
