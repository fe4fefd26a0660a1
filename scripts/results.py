#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Summarizes the test VM runs of scripts/check.sh.

usage: results.py VARIANT=OUTDIR [VARIANT=OUTDIR ...]

For each run it reads the KTAP files the guest wrote (*.ktap), the guest
console and kernel log, and the kmemleak report. Every KTAP test case counts
as a test; so do three checks per run: the guest finished, its log has no
kernel error report, and (where kmemleak is on) no leak from a kfabric
module. A suite whose plan announces more cases than it reported counts the
missing ones as failed. Prints a per-suite summary and, last, the line
'N passed, N failed, N skipped'. Exits 1 on any failure.
"""

import glob
import os
import re
import sys

CASE = re.compile(r"^(\s+)(not ok|ok) (\d+) ([^#\s]+)(\s*#\s*(SKIP|skip).*)?$")
PLAN = re.compile(r"^\s+1\.\.(\d+)")
SUBTEST = re.compile(r"^\s*# Subtest: (\S+)")
# Kernel reports that fail a run wherever they come from.
BAD = re.compile(
    r"BUG:|WARNING:|Call Trace:|UBSAN:|KASAN:|Oops|general protection fault|"
    r"kernel BUG|Kernel panic|INFO: task .* blocked|soft lockup|"
    r"possible circular locking|inconsistent lock state|suspicious RCU usage|"
    # An object a test or demo could not close is leaked.
    r"kfabric: closing an object failed"
)
# The first module of the tree loads (only this tree's modules are out of
# tree in the guest): what the log says before it is the boot's.
FIRST_LOAD = re.compile(r"^.*loading out-of-tree module taints kernel", re.M)


def parse_ktap(path):
    """Returns (suite, [(name, status, lines)]) for one KTAP file."""
    suite = os.path.basename(path)
    cases, plan, diag = [], None, []
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            m = SUBTEST.match(line)
            if m and suite == os.path.basename(path):
                suite = m.group(1)
                continue
            m = PLAN.match(line)
            if m:
                plan = int(m.group(1))
                continue
            m = CASE.match(line)
            if m and len(m.group(1)) >= 4:
                status = "skip" if m.group(5) else ("fail" if m.group(2) == "not ok" else "pass")
                cases.append((m.group(4), status, diag))
                diag = []
            elif line.strip().startswith("#"):
                diag.append(line.strip())
    if plan is not None and plan > len(cases):
        for i in range(len(cases), plan):
            cases.append((f"case_{i + 1}_not_reported", "fail", ["# no result (crashed?)"]))
    return suite, cases


# kselftest TAP (tests/selftests): results at the top level.
KSFT_CASE = re.compile(r"^(not ok|ok) (\d+) (.*?)\s*(# (SKIP|XFAIL)\b.*)?$")
KSFT_PLAN = re.compile(r"^1\.\.(\d+)(\s*# SKIP.*)?$")


def parse_kselftest(path):
    """Returns (suite, [(name, status, lines)]) for one kselftest TAP file;
    a plan with no results (a crash) counts its cases as failed, a whole
    skip as one skipped case."""
    suite = "kselftest_" + os.path.basename(path)[len("kselftest-"):-len(".tap")]
    cases, plan, diag, skip_all = [], None, [], None
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            m = KSFT_PLAN.match(line)
            if m:
                plan = int(m.group(1))
                skip_all = m.group(2)
                continue
            m = KSFT_CASE.match(line)
            if m:
                status = "skip" if m.group(5) else ("fail" if m.group(1) == "not ok" else "pass")
                cases.append((m.group(3).replace(" ", "_"), status, diag))
                diag = []
            elif line.startswith("#") or line.startswith("Bail out"):
                diag.append(line)
    if plan == 0 and skip_all:
        cases.append(("all", "skip", [skip_all]))
    elif plan is None:
        cases.append(("ran", "fail", diag[-6:] or ["# no TAP plan"]))
    elif plan > len(cases):
        for i in range(len(cases), plan):
            cases.append((f"case_{i + 1}_not_reported", "fail", diag[-6:] or ["# no result"]))
    return suite, cases


def check_run(variant, outdir):
    """Yields (suite, name, status, detail) for one VM run."""
    files = [(p, parse_ktap) for p in sorted(glob.glob(os.path.join(outdir, "*.ktap")))]
    files += [(p, parse_kselftest)
              for p in sorted(glob.glob(os.path.join(outdir, "kselftest-*.tap")))]
    for path, parse in files:
        suite, cases = parse(path)
        for name, status, diag in cases:
            yield (f"{variant}:{suite}", name, status, "\n".join(diag[-6:]))
    if variant == "static":
        return

    # Each log split where kfabric's first module loads: a report before
    # that is the boot's (the kernel and QEMU alone, no kfabric code yet).
    logs, boot = "", ""
    for name in ("console.log", "dmesg.log"):
        p = os.path.join(outdir, name)
        if os.path.exists(p):
            with open(p, errors="replace") as f:
                text = f.read()
            m = FIRST_LOAD.search(text)
            at = m.start() if m else 0
            boot += text[:at]
            logs += text[at:]
    vm = f"{variant}:vm"
    errors = re.findall(r"KFABRIC_GUEST_ERROR: .*", logs)
    done = "KFABRIC_GUEST_DONE" in logs and not errors
    yield (vm, "guest_completed", "pass" if done else "fail",
           "\n".join(errors) or ("" if done else "the guest did not finish (timeout or crash)"))
    bad = [l for l in logs.splitlines() if BAD.search(l)]
    yield (vm, "kernel_log_clean", "fail" if bad else "pass", "\n".join(bad[:10]))
    # Shown, not counted against kfabric: see Documentation/testing.rst.
    boot_bad = [l for l in boot.splitlines() if BAD.search(l)]
    yield (vm, "boot_log_clean", "skip" if boot_bad else "pass",
           "\n".join(["# a report during boot, before any kfabric module loaded:"] + boot_bad[:10])
           if boot_bad else "")
    leak = os.path.join(outdir, "kmemleak.txt")
    if os.path.exists(leak):
        with open(leak, errors="replace") as f:
            report = f.read()
        # A frame in a kfabric module: by name while the module is loaded,
        # or as a bare address in the module area once it is unloaded (the
        # test kernel has no other modules).
        ours = [b for b in report.split("unreferenced object")[1:]
                if re.search(r"\[(kfabric|kfi_\w+)\]|^\s+0xffffffff[a-f][0-9a-f]{7}\b", b, re.M)]
        yield (vm, "no_kmemleak_from_kfabric", "fail" if ours else "pass",
               ("unreferenced object" + ours[0])[:2000] if ours else "")
    else:
        yield (vm, "no_kmemleak_from_kfabric", "skip", "kmemleak not enabled in this kernel")


def main(argv):
    totals = {"pass": 0, "fail": 0, "skip": 0}
    suites = {}
    failures, boot_reports = [], []
    for arg in argv:
        variant, _, outdir = arg.partition("=")
        for suite, name, status, detail in check_run(variant, outdir):
            totals[status] += 1
            s = suites.setdefault(suite, {"pass": 0, "fail": 0, "skip": 0})
            s[status] += 1
            if status == "fail":
                failures.append((suite, name, detail))
            elif status == "skip" and name == "boot_log_clean":
                boot_reports.append((suite, detail))
    print("== per-suite results ==")
    for suite, s in suites.items():
        print(f"  {suite:40s} {s['pass']:3d} passed, {s['fail']:3d} failed, {s['skip']:3d} skipped")
    for suite, detail in boot_reports:
        print(f"SKIPPED {suite}.boot_log_clean (not kfabric's: the boot, before any of its modules)")
        for line in detail.splitlines():
            print(f"    {line}")
    for suite, name, detail in failures:
        print(f"FAILED {suite}.{name}")
        for line in detail.splitlines():
            print(f"    {line}")
    print(f"{totals['pass']} passed, {totals['fail']} failed, {totals['skip']} skipped")
    return 1 if totals["fail"] or not totals["pass"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
