#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""bench-report.py OUTDIR: the summary of 'make bench'.

Reads what the guest left in OUTDIR (samples.txt: one 'bench: sample ...'
line per timed run of kfi_bench.ko, each naming its fabric: 'sockets' for
kfi_sockets against kernel TCP, an RDMA domain such as 'siw0' or 'rxe0' for
kfi_ibverbs against raw ib_core verbs on it; guest.txt: the guest's facts and CPU
times) and what run-demo.sh recorded on the host (host.txt: load before and
after), and writes:

  - the header (guest facts, memcpy bound, host load, busy flag) and one
    table per operation to stdout, medians over the repetitions with their
    spread, then the fan-out table (one RDM hub to 1, 64 and 1024 peers:
    memory per connection and aggregate message rate);
  - OUTDIR/latest.json: the facts and one object per table row;
  - OUTDIR/bench.png: bandwidth, ratio and latency plots (matplotlib; skipped
    with a note when it is missing).

Warm-up runs are excluded. A kfi row's ratio is the ratio of the medians of
kfi and of its raw baseline; its spread is the smallest and largest ratio of
a kfi run to the raw run of the same repetition (they ran back to back).
"""

import json
import math
import os
import statistics
import sys
import time

# Targets of the benchmark issue: (row, least bytes, most bytes, comparison,
# bound).
# Bandwidth targets apply to the pipelined rows (window >= 8): a window of 1
# drains the pipeline after every operation, which a blocking stream never
# does; those rows show their ratio without a verdict.
TARGET_WINDOW = 8
TARGETS = [
    ("kfi_send", 64 << 10, None, ">=", 0.95),
    ("kfi_write", 64 << 10, None, ">=", 0.95),
    ("kfi_write_ic", 64 << 10, None, ">=", 0.95),
    ("kfi_pingpong", 64, 64, "<=", 1.25),
]
# kfi_ibverbs targets: (fabric prefix, row, least bytes, most bytes,
# comparison, bound), against the raw verbs row of the same window.
IB_TARGETS = [
    ("siw", "kfi_write", 64 << 10, None, ">=", 0.97),
]
# Other processes using more CPUs than this, on average, make the run busy.
BUSY_CPUS = 0.25
# Guest steal time above this share of its CPU time makes the run busy.
BUSY_STEAL = 0.01
# Fan-out target: (peers, most bytes of memory per idle connection).
FANOUT_TARGET = (1024, 16 << 10)

KFI_ROWS = [("kfi_send", "send/recv"), ("kfi_tagged", "tagged send/recv"), ("kfi_write", "RMA write"),
            ("kfi_write_ic", "RMA write, inject completion"),
            ("kfi_read", "RMA read")]
# kfi_ibverbs rows and their raw verbs baselines (same window).
IB_ROWS = [("kfi_send", "ib_send", "send/recv"), ("kfi_write", "ib_write", "RMA write"),
           ("kfi_read", "ib_read", "RMA read")]
PP_ROWS = [
    ("raw_pingpong", "raw TCP, two threads"),
    ("raw_pingpong_1thread", "raw TCP, one thread (floor)"),
    ("kfi_pingpong", "kfi_sockets"),
    ("kfi_pingpong_1thread", "kfi_sockets, one thread (its floor)"),
]


def read_kv(path):
    """KEY=VALUE lines of a file (missing file: empty)."""
    out = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                k, sep, v = line.rstrip("\n").partition("=")
                if sep:
                    out[k.strip()] = v.strip()
    except OSError:
        pass
    return out


def number_or_text(v):
    try:
        return int(v)
    except ValueError:
        return v


# The fan-out lines: 'bench: <kind> key=value...' (fanout_open: the open
# pass and the memory it took; fanout: a rate pass; fanout_close).
FAN_KINDS = ("fanout_open", "fanout", "fanout_close")


def parse_samples(path):
    """(samples, config, status lines, fan-out lines by kind) of samples.txt."""
    samples, config, status = [], {}, []
    fan = {k: [] for k in FAN_KINDS}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            kind = line[len("bench: "):].split(" ", 1)[0] if line.startswith("bench: ") else ""
            if kind in FAN_KINDS:
                fan[kind].append({k: number_or_text(v)
                                  for k, v in (w.split("=", 1) for w in line.split()[2:] if "=" in w)})
            elif line.startswith("bench: sample "):
                kv = dict(w.split("=", 1) for w in line.split()[2:] if "=" in w)
                if kv.get("rep") == "warmup":
                    continue
                s = {k: (v if k in ("row", "cpus", "fabric") else int(v)) for k, v in kv.items()}
                s.setdefault("fabric", "sockets")
                samples.append(s)
            elif line.startswith("bench: config "):
                config.update(w.split("=", 1) for w in line.split()[2:] if "=" in w)
            elif line.startswith("bench: ib "):
                ib = dict(w.split("=", 1) for w in line.split()[2:] if "=" in w)
                config.setdefault("ib", {})[ib.get("fabric", "?")] = ib
            elif line.startswith("bench: "):
                status.append(line[len("bench: "):])
    return samples, config, status, fan


def pct(values, p):
    """Nearest-rank percentile."""
    v = sorted(values)
    return v[max(1, math.ceil(len(v) * p / 100)) - 1]


def stats(values):
    return {"min": min(values), "median": statistics.median(values), "p90": pct(values, 90)}


def mbps(s):
    return s["bytes"] * s["iters"] * 1000.0 / s["ns"]


def cpu_fields(stat_line):
    """user..steal ticks of a /proc/stat 'cpu' line: (busy, idle, steal)."""
    f = [int(x) for x in stat_line.split()[1:]]
    f += [0] * (8 - len(f))
    user, nice, system, idle, iowait, irq, softirq, steal = f[:8]
    return user + nice + system + irq + softirq + steal, idle + iowait, steal


def seconds(times_line):
    """The two values of a bash 'times' line ('0m1.5s 0m0.2s'), summed."""
    total = 0.0
    for t in times_line.split():
        m, _, s = t.rstrip("s").partition("m")
        total += int(m) * 60 + float(s)
    return total


def load_facts(out):
    g = read_kv(os.path.join(out, "guest.txt"))
    h = read_kv(os.path.join(out, "host.txt"))
    facts = {
        "accel": h.get("accel", "?"),
        "vcpus": g.get("vcpus", "?"),
        "kernel": g.get("kernel", "?"),
        "clocksource": g.get("clocksource", "?"),
        "guest_cpu": g.get("cpu_model", "?"),
        "hypervisor": g.get("hypervisor", "") or "none detected",
        "host_cpus": h.get("host_cpus", "?"),
        "host_cpu": h.get("host_cpu", "?"),
        "bench_seconds": g.get("bench_seconds", "?"),
    }
    kconf = read_kv(h.get("kconfig", "/nonexistent"))
    facts["hz"] = kconf.get("CONFIG_HZ", "?")
    models = [m for m in ("NONE", "VOLUNTARY", "LAZY", "RT") if kconf.get("CONFIG_PREEMPT_" + m) == "y"]
    if kconf.get("CONFIG_PREEMPT") == "y":
        models.append("FULL")
    facts["preemption"] = "/".join(models) or "?"
    if kconf.get("CONFIG_PREEMPT_DYNAMIC") == "y":
        facts["preemption"] += " (dynamic: %s)" % (g.get("preempt_dynamic") or "?")
    facts["hz_mode"] = next(
        (m for m in ("HZ_PERIODIC", "NO_HZ_IDLE", "NO_HZ_FULL") if kconf.get("CONFIG_" + m) == "y"), "?")

    # Guest steal time over the bench.
    if "stat_before" in g and "stat_after" in g:
        b0, i0, s0 = cpu_fields(g["stat_before"])
        b1, i1, s1 = cpu_fields(g["stat_after"])
        total = (b1 - b0) + (i1 - i0)
        facts["guest_steal_share"] = (s1 - s0) / total if total > 0 else 0.0
    # Host: what else ran while the VM did.
    busy_reasons = []
    try:
        hz = int(h.get("user_hz", "100"))
        wall = float(h["after_time"]) - float(h["before_time"])
        host_busy = (cpu_fields(h["after_stat"])[0] - cpu_fields(h["before_stat"])[0]) / hz
        ours = seconds(h["after_times"]) - seconds(h["before_times"])
        facts["host_wall_s"] = round(wall, 1)
        facts["host_vm_cpu_s"] = round(ours, 1)
        facts["host_other_cpus"] = round(max(0.0, host_busy - ours) / wall, 3) if wall > 0 else None
        facts["host_loadavg_before"] = h["before_loadavg"]
        facts["host_loadavg_after"] = h["after_loadavg"]
        if facts["host_other_cpus"] is not None and facts["host_other_cpus"] > BUSY_CPUS:
            busy_reasons.append("other processes used %.2f CPUs on average" % facts["host_other_cpus"])
    except (KeyError, ValueError):
        busy_reasons.append("host load not recorded")
    if facts.get("guest_steal_share", 0.0) > BUSY_STEAL:
        busy_reasons.append("guest steal %.1f%%" % (100 * facts["guest_steal_share"]))
    facts["busy"] = bool(busy_reasons)
    facts["busy_reasons"] = busy_reasons
    return facts


def cost(m):
    """Median CPU cost of a row's repetitions (kernel time of all CPUs over
    the whole sample) per MiB and per operation, its softirq share, and the
    TCP counters summed over the repetitions; {} for samples without them."""
    with_cost = [s for s in m.values() if "sys_ns" in s]
    if not with_cost:
        return {}
    per_mib = [s["sys_ns"] / 1000.0 / (s["bytes"] * s["iters"] / float(1 << 20)) for s in with_cost]
    per_op = [s["sys_ns"] / 1000.0 / s["iters"] for s in with_cost]
    sys_total = sum(s["sys_ns"] for s in with_cost)
    out = {"cpu_us_per_mib": statistics.median(per_mib), "cpu_us_per_op": statistics.median(per_op),
           "softirq_share": (sum(s["sirq_ns"] for s in with_cost) / sys_total) if sys_total else 0.0,
           "tcp_retrans": sum(s.get("retrans", 0) for s in with_cost),
           "tcp_delayed_acks": sum(s.get("delack", 0) for s in with_cost)}
    ctx = [s["ctxt"] / s["iters"] for s in with_cost if "ctxt" in s]
    if ctx:
        out["ctxsw_per_op"] = statistics.median(ctx)
    return out


def cpu_col(r, key):
    return "%9.1f" % r[key] if key in r else "%9s" % "-"


def ctx_col(r):
    """The context switches per operation, 7 wide."""
    return "%7.2f" % r["ctxsw_per_op"] if "ctxsw_per_op" in r else "%7s" % "-"


def by_rep(samples, row, size, win=None):
    return {s["rep"]: s for s in samples
            if s["row"] == row and s["bytes"] == size and (win is None or s["win"] == win)}


def verdict(target, lo, hi):
    """'met', 'not met' or 'inconclusive' for ratio spread [lo, hi]."""
    op, bound = target
    if op == ">=":
        return "met" if lo >= bound else ("not met" if hi < bound else "inconclusive")
    return "met" if hi <= bound else ("not met" if lo > bound else "inconclusive")


def target_for(row, size):
    for r, least, most, op, bound in TARGETS:
        if r == row and size >= least and (most is None or size <= most):
            return (op, bound)
    return None


def ratio_block(kfi, raw, value):
    """Ratio of medians and per-repetition spread of kfi over raw samples."""
    reps = sorted(set(kfi) & set(raw))
    if not reps:
        return None
    per = [value(kfi[r]) / value(raw[r]) for r in reps]
    med = statistics.median([value(kfi[r]) for r in reps]) / statistics.median([value(raw[r]) for r in reps])
    return {"ratio": med, "ratio_min": min(per), "ratio_max": max(per), "ratio_per_rep": per}


def sample_list(m, value):
    """The repetitions of a row: value and where the sides ran."""
    return [{"rep": r, "value": round(value(m[r]), 3), "cpus": m[r].get("cpus", "")} for r in sorted(m)]


def same_cpu(s):
    """Whether the two sides of a run started on one CPU (None: one side)."""
    sides = [c.split(">")[0] for c in s.get("cpus", "").split(",") if ">" in c]
    return sides[0] == sides[1] if len(sides) == 2 else None


def placement(samples):
    """Per two-sided row and size: medians of the runs whose sides started
    on one CPU and of those that started on two."""
    out = []
    keys = sorted({(s["row"], s["bytes"], s["win"]) for s in samples if same_cpu(s) is not None},
                  key=lambda k: (k[0], k[2], k[1]))
    for row, size, win in keys:
        m = [s for s in samples if (s["row"], s["bytes"], s["win"]) == (row, size, win)]
        pp = "p50" in m[0]
        value = (lambda s: s["p50"] / 1000.0) if pp else mbps
        same = [value(s) for s in m if same_cpu(s)]
        split = [value(s) for s in m if same_cpu(s) is False]
        out.append({"op": row, "bytes": size, "window": win, "unit": "rtt usec p50" if pp else "MB/s",
                    "same_cpu_runs": len(same), "same_cpu_median": statistics.median(same) if same else None,
                    "two_cpu_runs": len(split), "two_cpu_median": statistics.median(split) if split else None})
    return out


def build_rows(samples):
    """kfi_sockets rows, against kernel TCP."""
    rows = []
    sizes = sorted({s["bytes"] for s in samples if s["row"] == "raw_stream"})
    # Memcpy bound.
    for size in sorted({s["bytes"] for s in samples if s["row"] == "memcpy"}):
        m = by_rep(samples, "memcpy", size)
        vals = [mbps(s) for s in m.values()]
        rows.append({"op": "memcpy", "bytes": size, "window": 1, "iters": next(iter(m.values()))["iters"],
                     "reps": len(vals), "mbps": stats(vals),
                     "verified": all(s["verified"] for s in m.values())})
    # Ping-pong.
    for size in sorted({s["bytes"] for s in samples if s["row"] == "raw_pingpong"}):
        raw = by_rep(samples, "raw_pingpong", size)
        floor = by_rep(samples, "raw_pingpong_1thread", size)
        for name, _ in PP_ROWS:
            m = by_rep(samples, name, size)
            if not m:
                continue
            p50 = [s["p50"] / 1000.0 for s in m.values()]
            row = {"op": name, "bytes": size, "window": 1, "iters": next(iter(m.values()))["iters"],
                   "reps": len(p50), "rtt_us_p50": stats(p50),
                   "rtt_us_p99": stats([s["p99"] / 1000.0 for s in m.values()]),
                   "rtt_us_mean": stats([s["ns"] / s["iters"] / 1000.0 for s in m.values()]),
                   "verified": all(s["verified"] for s in m.values()),
                   "samples": sample_list(m, lambda s: s["p50"] / 1000.0)}
            row.update(cost(m))
            if name == "kfi_pingpong_1thread":
                # Against the raw floor: the CPU work per round trip.
                rb = ratio_block(m, floor, lambda s: s["p50"]) if floor else None
                if rb:
                    row.update(rb)
            elif name != "raw_pingpong":
                rb = ratio_block(m, raw, lambda s: s["p50"])
                if rb:
                    row.update(rb)
                    t = target_for(name, size)
                    if t and name.startswith("kfi"):
                        row["target"] = "%s %.2fx raw two-thread" % t
                        row["verdict"] = verdict(t, rb["ratio_min"], rb["ratio_max"])
            if name == "kfi_pingpong" and floor:
                fb = ratio_block(m, floor, lambda s: s["p50"])
                if fb:
                    row["ratio_vs_floor"] = fb["ratio"]
            rows.append(row)
    # Bandwidth.
    for size in sizes:
        raw = by_rep(samples, "raw_stream", size)
        vals = [mbps(s) for s in raw.values()]
        iters = next(iter(raw.values()))["iters"]
        rows.append({"op": "raw_stream", "bytes": size, "window": 0, "iters": iters, "reps": len(vals),
                     "mbps": stats(vals),
                     "mxfers_per_s": statistics.median([s["iters"] * 1000.0 / s["ns"] for s in raw.values()]),
                     "usec_per_xfer": statistics.median([s["ns"] / s["iters"] / 1000.0 for s in raw.values()]),
                     "verified": all(s["verified"] for s in raw.values()),
                     "samples": sample_list(raw, mbps), **cost(raw)})
        for name, _ in KFI_ROWS:
            for win in sorted({s["win"] for s in samples if s["row"] == name}):
                m = by_rep(samples, name, size, win)
                if not m:
                    continue
                vals = [mbps(s) for s in m.values()]
                row = {"op": name, "bytes": size, "window": win, "iters": next(iter(m.values()))["iters"],
                       "reps": len(vals), "mbps": stats(vals),
                       "mxfers_per_s": statistics.median([s["iters"] * 1000.0 / s["ns"] for s in m.values()]),
                       "usec_per_xfer": statistics.median([s["ns"] / s["iters"] / 1000.0 for s in m.values()]),
                       "raw_mbps": statistics.median([mbps(s) for s in raw.values()]),
                       "verified": all(s["verified"] for s in m.values()),
                       "samples": sample_list(m, mbps)}
                row.update(cost(m))
                judge(row, m, raw, cost(raw).get("cpu_us_per_mib"), win,
                      target_for(name, size), "raw stream")
                rows.append(row)
    return rows


def judge(row, m, raw, raw_cpu, win, target, baseline):
    """Adds to a bandwidth row its CPU ratio to the baseline (whose CPU
    cost per MiB is raw_cpu), the ratio of the medians of samples m and raw
    with its spread, and the verdict on target (from window TARGET_WINDOW
    up)."""
    if "cpu_us_per_mib" in row and raw_cpu:
        row["cpu_ratio"] = row["cpu_us_per_mib"] / raw_cpu
    rb = ratio_block(m, raw, mbps)
    if rb:
        row.update(rb)
        if target and win >= TARGET_WINDOW:
            row["target"] = "%s %.2fx %s" % (target + (baseline,))
            row["verdict"] = verdict(target, rb["ratio_min"], rb["ratio_max"])


def ib_target_for(fabric, row, size):
    for f, r, least, most, op, bound in IB_TARGETS:
        if fabric.startswith(f) and r == row and size >= least and (most is None or size <= most):
            return (op, bound)
    return None


def bw_row(op, size, win, m, fabric):
    """A bandwidth row of the samples m (by repetition)."""
    vals = [mbps(s) for s in m.values()]
    row = {"fabric": fabric, "op": op, "bytes": size, "window": win, "iters": next(iter(m.values()))["iters"],
           "reps": len(vals), "mbps": stats(vals),
           "mxfers_per_s": statistics.median([s["iters"] * 1000.0 / s["ns"] for s in m.values()]),
           "usec_per_xfer": statistics.median([s["ns"] / s["iters"] / 1000.0 for s in m.values()]),
           "verified": all(s["verified"] for s in m.values()), "samples": sample_list(m, mbps)}
    row.update(cost(m))
    return row


def pp_row(op, size, m, fabric):
    p50 = [s["p50"] / 1000.0 for s in m.values()]
    row = {"fabric": fabric, "op": op, "bytes": size, "window": 1, "iters": next(iter(m.values()))["iters"],
           "reps": len(p50), "rtt_us_p50": stats(p50),
           "rtt_us_p99": stats([s["p99"] / 1000.0 for s in m.values()]),
           "rtt_us_mean": stats([s["ns"] / s["iters"] / 1000.0 for s in m.values()]),
           "verified": all(s["verified"] for s in m.values()),
           "samples": sample_list(m, lambda s: s["p50"] / 1000.0)}
    row.update(cost(m))
    return row


def build_ib_rows(samples, fabric):
    """kfi_ibverbs rows of one fabric, each kfi row after its raw verbs
    baseline: ping-pong against ib_pingpong, each bandwidth row against
    the raw row of the same operation and window."""
    rows = []
    for size in sorted({s["bytes"] for s in samples if s["row"] == "ib_pingpong"}):
        raw = by_rep(samples, "ib_pingpong", size)
        rows.append(pp_row("ib_pingpong", size, raw, fabric))
        m = by_rep(samples, "kfi_pingpong", size)
        if not m:
            continue
        row = pp_row("kfi_pingpong", size, m, fabric)
        row["raw_rtt_us_p50"] = rows[-1]["rtt_us_p50"]["median"]
        rb = ratio_block(m, raw, lambda s: s["p50"])
        if rb:
            row.update(rb)
        rows.append(row)
    for kfi, base, _ in IB_ROWS:
        for win in sorted({s["win"] for s in samples if s["row"] == base}):
            for size in sorted({s["bytes"] for s in samples if s["row"] == base and s["win"] == win}):
                raw = by_rep(samples, base, size, win)
                rr = bw_row(base, size, win, raw, fabric)
                rows.append(rr)
                m = by_rep(samples, kfi, size, win)
                if not m:
                    continue
                row = bw_row(kfi, size, win, m, fabric)
                row["raw_mbps"] = rr["mbps"]["median"]
                row["raw_usec_per_xfer"] = rr["usec_per_xfer"]
                judge(row, m, raw, rr.get("cpu_us_per_mib"), win,
                      ib_target_for(fabric, kfi, size), "raw verbs")
                rows.append(row)
    return rows


def print_ib_report(config, rows, fabrics):
    """The kfi_ibverbs tables: per fabric, ping-pong and each operation and
    window, the kfi row beside its raw verbs baseline."""
    p = print
    for fab in fabrics:
        sel = [r for r in rows if r["fabric"] == fab]
        ib = config.get("ib", {}).get(fab, {})
        p("")
        p("kfi_ibverbs on %s against raw ib_core verbs on the same device (RC QP pair through rdma_cm,"
          " same threads, windows and sizes)" % fab)
        if ib:
            p("  bandwidth: sizes up to %s B (the provider's max_msg_size is %s B), each run's operations"
              " reusing window + 1 slots, regions of at most %s B; %s MiB a run within 32..%s operations"
              % (human(int(ib.get("max_size", 0))), human(int(ib.get("max_msg", 0))),
                 human(int(ib.get("region", 0))), ib.get("budget_mib", "?"), ib.get("max_iters", "?")))
            top = int(ib.get("max_size", 0))
            beyond = [human(64 << (2 * k)) for k in range(11) if top < (64 << (2 * k)) <= (4 << 20)]
            if beyond:
                p("  not measured: %s B (above the provider's max_msg_size: one region of the device at any"
                  " alignment)" % ", ".join(beyond))
            p("  ping-pong: sizes up to %s B, each side's two slots reused" % human(int(ib.get("pp_max", 0))))
        pp = [r for r in sel if r["op"] in ("ib_pingpong", "kfi_pingpong")]
        if pp:
            p("  ping-pong (round trip, usec)")
            p("    %-13s %7s %6s %8s %8s %8s %8s %7s %-13s %9s %7s %s"
              % ("row", "bytes", "iters", "p50min", "p50med", "p50p90", "p99med", "ratio", "spread",
                 "cpu us/op", "ctx/op", "verified"))
            for r in pp:
                p("    %-13s %7s %6d %8.1f %8.1f %8.1f %8.1f %7s %-13s %s %s %s"
                  % (r["op"], human(r["bytes"]), r["iters"], r["rtt_us_p50"]["min"], r["rtt_us_p50"]["median"],
                     r["rtt_us_p50"]["p90"], r["rtt_us_p99"]["median"],
                     "%.2fx" % r["ratio"] if "ratio" in r else "-", spread(r),
                     cpu_col(r, "cpu_us_per_op"), ctx_col(r), "yes" if r["verified"] else "NO"))
        for kfi, base, label in IB_ROWS:
            for win in sorted({r["window"] for r in sel if r["op"] == kfi}):
                ks = [r for r in sel if r["op"] == kfi and r["window"] == win]
                raws = {r["bytes"]: r for r in sel if r["op"] == base and r["window"] == win}
                p("  %s (%s) beside %s, window %d" % (kfi, label, base, win))
                p("    %7s %6s %9s %9s %9s %9s %9s %9s %7s %-13s %-13s %9s %7s %7s %7s %s"
                  % ("bytes", "iters", "raw MB/s", "MB/s min", "median", "p90", "raw us/x", "usec/xfer", "ratio",
                     "spread", "target", "cpu/MiB", "cpu/raw", "ctx/op", "raw ctx", "verified"))
                for r in ks:
                    rr = raws.get(r["bytes"], {})
                    p("    %7s %6d %9.1f %9.1f %9.1f %9.1f %9.2f %9.2f %6.2fx %-13s %-13s %s %7s %s %s %s"
                      % (human(r["bytes"]), r["iters"], r.get("raw_mbps", float("nan")), r["mbps"]["min"],
                         r["mbps"]["median"], r["mbps"]["p90"], r.get("raw_usec_per_xfer", float("nan")),
                         r["usec_per_xfer"], r.get("ratio", float("nan")), spread(r), r.get("verdict", ""),
                         cpu_col(r, "cpu_us_per_mib"), "%.2fx" % r["cpu_ratio"] if "cpu_ratio" in r else "-",
                         ctx_col(r), ctx_col(rr), "yes" if r["verified"] and rr.get("verified", False) else "NO"))
    p("")
    p("kfi_ibverbs targets (verdict from the spread)")
    for f, row, least, most, op, bound in IB_TARGETS:
        for fab in (x for x in fabrics if x.startswith(f)):
            sel = [r for r in rows if r["fabric"] == fab and r["op"] == row and "verdict" in r]
            parts = ["%s %s (%.2fx %s)" % (human(r["bytes"]), r["verdict"], r["ratio"], spread(r)) for r in sel]
            top = max((r["bytes"] for r in rows if r["fabric"] == fab and r["op"] == row), default=0)
            why = "not measured (largest size %s B)" % human(top) if not parts else "; ".join(parts)
            p("  %s on %s %s %.2fx raw verbs at >= %s, window %d: %s"
              % (row, fab, op, bound, human(least), TARGET_WINDOW, why))


def human(n):
    for unit, shift in (("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return "%d%s" % (n >> shift, unit)
    return str(n)


def spread(r):
    return "[%.2f..%.2f]" % (r["ratio_min"], r["ratio_max"]) if "ratio_min" in r else ""


def build_fan_rows(fan):
    """The fan-out rows, one per number of peers: the open pass and the
    memory the N idle connections took (fanout_open), the rate passes'
    message rates (fanout, warm-up excluded) and the close (fanout_close)."""
    rows = []
    for o in fan["fanout_open"]:
        n = o["peers"]
        conns = max(1, o.get("conns", n))
        rate = [s for s in fan["fanout"] if s["peers"] == n and s.get("rep") != "warmup"]
        close = [c for c in fan["fanout_close"] if c["peers"] == n]
        row = {"fabric": "sockets", "op": "kfi_fanout", "peers": n, "asked": o.get("asked", n), "conns": conns,
               "endpoints_open_ms": o["endpoints_ns"] / 1e6, "connect_ms": o["ns"] / 1e6,
               "first_connect_ms": o.get("first_ns", 0) / 1e6,
               "slab_bytes_per_conn": o["slab"] / conns, "used_bytes_per_conn": o["used"] / conns,
               "stack_bytes": o["stack"], "vmalloc_bytes": o["vmalloc"],
               "first_slab_bytes_per_conn": o.get("first_slab", 0) / conns,
               "first_used_bytes_per_conn": o.get("first_used", 0) / conns,
               "first_stack_bytes": o.get("first_stack", 0), "settle_ms": o["settle_ms"],
               "connect_ctxsw": o.get("ctxt"),
               "verified": bool(o["verified"]) and all(s["verified"] for s in rate)}
        if rate:
            vals = [s["msgs"] * 1e9 / s["ns"] for s in rate]
            row.update({"bytes": rate[0]["bytes"], "window": rate[0]["win"], "msgs": rate[0]["msgs"],
                        "reps": len(rate), "msgs_per_s": stats(vals),
                        "cpu_us_per_msg": statistics.median([s["sys_ns"] / 1000.0 / s["msgs"] for s in rate]),
                        "samples": [{"rep": s["rep"], "value": round(v, 1), "cpus": s.get("cpus", "")}
                                    for s, v in zip(rate, vals)]})
            ctx = [s["ctxt"] / s["msgs"] for s in rate if "ctxt" in s]
            if ctx:
                row["ctxsw_per_msg"] = statistics.median(ctx)
        if close:
            row["close_ms"] = close[-1]["ns"] / 1e6
        peers, bound = FANOUT_TARGET
        if row["asked"] == peers:
            row["target"] = "<= %s B per idle connection at %d peers" % (human(bound), peers)
            if n == peers:
                row["verdict"] = "met" if row["used_bytes_per_conn"] <= bound else "not met"
            else:
                row["verdict"] = "not measured (%d peers only)" % n
        rows.append(row)
    return rows


def print_fan_report(rows):
    p = print
    if not rows:
        return
    p("")
    p("fan-out: one kfi_sockets RDM endpoint (the hub) to N peer RDM endpoints over loopback, one TCP"
      " connection per peer; %s B messages round-robin, %s in flight"
      % (rows[0].get("bytes", "?"), rows[0].get("window", "?")))
    p("  %5s %8s %9s %11s %11s %-12s %11s %10s %10s %10s %10s %7s %8s %s"
      % ("peers", "open s", "conn s", "slab B/con", "used B/con", "target", "first B/con", "msgs/s min",
         "median", "p90", "cpu us/msg", "ctx/msg", "close s", "verified"))
    for r in rows:
        m = r.get("msgs_per_s", {})
        p("  %5d %8.1f %9.2f %11.0f %11.0f %-12s %11.0f %10.0f %10.0f %10.0f %10s %7s %8s %s"
          % (r["peers"], r["endpoints_open_ms"] / 1000.0, r["connect_ms"] / 1000.0, r["slab_bytes_per_conn"],
             r["used_bytes_per_conn"], r.get("verdict", "").split(" (")[0], r["first_used_bytes_per_conn"],
             m.get("min", float("nan")),
             m.get("median", float("nan")), m.get("p90", float("nan")),
             "%.1f" % r["cpu_us_per_msg"] if "cpu_us_per_msg" in r else "-",
             "%.2f" % r["ctxsw_per_msg"] if "ctxsw_per_msg" in r else "-",
             "%.1f" % (r["close_ms"] / 1000.0) if "close_ms" in r else "-", "yes" if r["verified"] else "NO"))
    p("  open s: opening the N peers and two hubs; conn s: the measured hub's first message to every peer"
      " (opens its N connections); close s: closing everything")
    p("  B/con: what the guest's memory grew by while the measured hub opened its N connections, to all idle,"
      " over N; each connection counts both its ends (the hub's and the peer's connection state, two TCP"
      " sockets). slab: slab caches (large kmallocs included); used: all of it (free pages, per-CPU lists"
      " included). first B/con: the same (used) for the first hub's N connections, opened just before, which"
      " also paid for the worker threads the kernel started for the handshakes; kernel stacks:")
    for r in rows:
        p("    %d peers: first hub %+d KiB, measured hub %+d KiB (vmalloc %+d KiB)"
          % (r["peers"], r["first_stack_bytes"] >> 10, r["stack_bytes"] >> 10, r["vmalloc_bytes"] >> 10))
    for r in rows:
        if "target" in r:
            p("  target %s: %s (%.0f B used, %.0f B slab per connection)"
              % (r["target"], r["verdict"], r["used_bytes_per_conn"], r["slab_bytes_per_conn"]))


def print_report(facts, config, status, rows, placement_rows):
    p = print
    p("")
    where = "loopback, same boot"
    if config.get("hosts") == "2":
        where = "two guests joined by a virtual NIC (client's view)"
    p("kfabric bench: kfi_sockets against raw kernel TCP, %s (%s)"
      % (where, time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())))
    p("  guest: accel %s, %s vCPUs (%s), HZ %s (%s), preemption %s, clocksource %s, kernel %s"
      % (facts["accel"], facts["vcpus"], facts["guest_cpu"], facts["hz"], facts["hz_mode"],
         facts["preemption"], facts["clocksource"], facts["kernel"]))
    mc = [r for r in rows if r["op"] == "memcpy"]
    if mc:
        p("  memcpy bound (1 CPU, median): " + ", ".join(
            "%s %.0f MB/s" % (human(r["bytes"]), r["mbps"]["median"]) for r in mc))
    p("  host: %s CPUs (%s); load before %s, after %s; other processes %s CPUs; guest steal %s"
      % (facts["host_cpus"], facts["host_cpu"], facts.get("host_loadavg_before", "?"),
         facts.get("host_loadavg_after", "?"),
         facts.get("host_other_cpus", "?"),
         "%.2f%%" % (100 * facts["guest_steal_share"]) if "guest_steal_share" in facts else "?"))
    if facts["busy"]:
        p("  *** BUSY MACHINE: %s: treat these numbers with suspicion ***" % "; ".join(facts["busy_reasons"]))
    else:
        p("  machine quiet during the run (other processes <= %.2f CPUs, steal <= %.0f%%)"
          % (BUSY_CPUS, 100 * BUSY_STEAL))
    p("  %s timed repetitions per row after one warm-up (excluded), raw and kfi interleaved;"
      " bench ran %s s in the guest" % (config.get("reps", "?"), facts["bench_seconds"]))
    p("  MB/s = 10^6 bytes/s; min/median/p90 over repetitions; ratio = kfi median / raw median,"
      " [spread] = min..max of per-repetition ratios")

    pp = [r for r in rows if r["op"] in dict(PP_ROWS)]
    if pp:
        p("")
        p("ping-pong (round trip, usec)")
        p("  %-22s %7s %6s %8s %8s %8s %8s %7s %-13s %-14s %9s %7s %s"
          % ("row", "bytes", "iters", "p50min", "p50med", "p50p90", "p99med", "ratio", "spread", "target",
             "cpu us/op", "ctx/op", "verified"))
        for r in pp:
            p("  %-22s %7s %6d %8.1f %8.1f %8.1f %8.1f %7s %-13s %-14s %s %s %s"
              % (r["op"], human(r["bytes"]), r["iters"], r["rtt_us_p50"]["min"], r["rtt_us_p50"]["median"],
                 r["rtt_us_p50"]["p90"], r["rtt_us_p99"]["median"],
                 "%.2fx" % r["ratio"] if "ratio" in r else "-", spread(r),
                 r.get("verdict", ""), cpu_col(r, "cpu_us_per_op"), ctx_col(r), "yes" if r["verified"] else "NO"))
        for r in pp:
            if "ratio_vs_floor" in r:
                p("  kfi_pingpong %s B: %.2fx the one-thread floor" % (human(r["bytes"]), r["ratio_vs_floor"]))
        if any(r["op"] == "kfi_pingpong_1thread" for r in pp):
            p("  kfi_pingpong_1thread: ratio against raw_pingpong_1thread (CPU work per round trip)")

    raw = [r for r in rows if r["op"] == "raw_stream"]
    if raw:
        p("")
        p("raw_stream (two threads, blocking kernel_sendmsg/kernel_recvmsg, TCP_NODELAY)")
        p("  %7s %6s %9s %9s %9s %10s %9s %7s %s" % ("bytes", "iters", "MB/s min", "median", "p90", "usec/xfer",
                                                     "cpu/MiB", "ctx/op", "verified"))
    for r in raw:
        p("  %7s %6d %9.0f %9.0f %9.0f %10.2f %s %s %s"
          % (human(r["bytes"]), r["iters"], r["mbps"]["min"], r["mbps"]["median"], r["mbps"]["p90"],
             r["usec_per_xfer"], cpu_col(r, "cpu_us_per_mib"), ctx_col(r), "yes" if r["verified"] else "NO"))
    for name, label in KFI_ROWS:
        for win in sorted({r["window"] for r in rows if r["op"] == name}):
            sel = [r for r in rows if r["op"] == name and r["window"] == win]
            p("")
            p("%s (%s), window %d" % (name, label, win))
            p("  %7s %6s %9s %9s %9s %10s %9s %7s %-13s %-13s %9s %7s %7s %s"
              % ("bytes", "iters", "MB/s min", "median", "p90", "usec/xfer", "raw MB/s", "ratio", "spread",
                 "target", "cpu/MiB", "cpu/raw", "ctx/op", "verified"))
            for r in sel:
                p("  %7s %6d %9.0f %9.0f %9.0f %10.2f %9.0f %6.2fx %-13s %-13s %s %7s %s %s"
                  % (human(r["bytes"]), r["iters"], r["mbps"]["min"], r["mbps"]["median"], r["mbps"]["p90"],
                     r["usec_per_xfer"], r["raw_mbps"], r.get("ratio", float("nan")), spread(r),
                     r.get("verdict", ""), cpu_col(r, "cpu_us_per_mib"),
                     "%.2fx" % r["cpu_ratio"] if "cpu_ratio" in r else "-", ctx_col(r),
                     "yes" if r["verified"] else "NO"))

    tcp = [r for r in rows if "tcp_retrans" in r]
    if tcp:
        p("")
        p("cpu/MiB, cpu us/op: kernel CPU time of all vCPUs (system + softirq + irq) per MiB moved or per"
          " operation, median over repetitions, whole sample (set-up included); cpu/raw = kfi over raw stream;"
          " ctx/op: the guest's context switches (all CPUs, /proc/stat ctxt) per operation, same window")
        p("  TCP during the timed runs (nstat): %d segments retransmitted, %d delayed ACKs; softirq share of"
          " the kernel time %.0f%% (raw stream) / %.0f%% (kfi rows)"
          % (sum(r["tcp_retrans"] for r in tcp), sum(r["tcp_delayed_acks"] for r in tcp),
             100 * statistics.median([r["softirq_share"] for r in tcp if r["op"] == "raw_stream"] or [0]),
             100 * statistics.median([r["softirq_share"] for r in tcp if r["op"].startswith("kfi")] or [0])))

    # Printed for the two-sided rows of the targets; all are in the JSON.
    pl = [x for x in placement_rows if x["same_cpu_runs"] and x["two_cpu_runs"]
          and (x["op"] != "kfi_send" or x["window"] >= TARGET_WINDOW)]
    if pl:
        p("")
        p("placement: medians of the runs (warm-up excluded) whose two sides started on one vCPU / on two")
        p("  %-22s %7s %3s %-12s %11s %11s %7s" % ("row", "bytes", "win", "unit", "one vCPU", "two vCPUs",
                                                 "runs"))
        for x in pl:
            p("  %-22s %7s %3d %-12s %11.1f %11.1f %3d/%-3d"
              % (x["op"], human(x["bytes"]), x["window"], x["unit"], x["same_cpu_median"], x["two_cpu_median"],
                 x["same_cpu_runs"], x["two_cpu_runs"]))

    p("")
    p("targets (verdict from the spread: met only if every repetition meets it)")
    for row, least, most, op, bound in TARGETS:
        sel = [r for r in rows if r["op"] == row and "verdict" in r]
        where = ("at %s B" % human(least)) if least == most else ("at >= %s, window %d" % (human(least), TARGET_WINDOW))
        parts = ["%s %s (%.2fx %s)" % (human(r["bytes"]), r["verdict"], r["ratio"], spread(r)) for r in sel]
        p("  %s %s %.2fx raw %s: %s" % (row, op, bound, where, "; ".join(parts) or "not measured"))
    if facts["busy"]:
        p("  (busy machine: the verdicts above are not evidence)")


def plot(rows, facts, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "skipped: no matplotlib for %s (Debian: python3-matplotlib)" % sys.executable
    from matplotlib.ticker import FuncFormatter
    ib_rows = [r for r in rows if r.get("fabric", "sockets") != "sockets"]
    rows = [r for r in rows if r.get("fabric", "sockets") == "sockets"]
    if ib_rows:
        fig, axes = plt.subplots(2, 3, figsize=(17, 10.4))
        (bw, ra, lat), ib_axes = axes[0], axes[1]
    else:
        fig, (bw, ra, lat) = plt.subplots(1, 3, figsize=(17, 5.2))
    size_fmt = FuncFormatter(lambda v, _: human(int(v)) if v >= 1 else "")
    styles = {1: "--", 8: "-"}
    colors = {"raw_stream": "black", "kfi_send": "tab:blue", "kfi_tagged": "tab:purple", "kfi_write": "tab:orange",
              "kfi_write_ic": "tab:red", "kfi_read": "tab:green"}

    def series(op, win):
        sel = sorted((r for r in rows if r["op"] == op and r["window"] == win), key=lambda r: r["bytes"])
        return sel, [r["bytes"] for r in sel]

    sel, x = series("raw_stream", 0)
    if sel:
        y = [r["mbps"]["median"] for r in sel]
        bw.plot(x, y, "o-", color=colors["raw_stream"], label="raw TCP stream (2 threads)", linewidth=2)
        bw.fill_between(x, [r["mbps"]["min"] for r in sel], [r["mbps"]["p90"] for r in sel],
                        color=colors["raw_stream"], alpha=0.12)
    for op, label in KFI_ROWS:
        for win in (1, 8):
            sel, x = series(op, win)
            if not sel:
                continue
            bw.plot(x, [r["mbps"]["median"] for r in sel], "o" + styles.get(win, ":"), color=colors[op],
                    label="kfi %s, window %d" % (label, win))
            bw.fill_between(x, [r["mbps"]["min"] for r in sel], [r["mbps"]["p90"] for r in sel],
                            color=colors[op], alpha=0.08)
            ra.plot(x, [r["ratio"] for r in sel], "o" + styles.get(win, ":"), color=colors[op],
                    label="%s, window %d" % (label, win))
            ra.vlines(x, [r["ratio_min"] for r in sel], [r["ratio_max"] for r in sel], color=colors[op], alpha=0.5)
    for r in (r for r in rows if r["op"] == "memcpy"):
        bw.axhline(r["mbps"]["median"], color="grey", linestyle=":", linewidth=1)
        bw.annotate("memcpy %s" % human(r["bytes"]), (64, r["mbps"]["median"]), fontsize=7, color="grey",
                    va="bottom")
    bw.set_xscale("log", base=2)
    bw.xaxis.set_major_formatter(size_fmt)
    bw.set_yscale("log")
    bw.set_xlabel("operation size (bytes)")
    bw.set_ylabel("MB/s (median; band: min..p90)")
    bw.set_title("bandwidth")
    bw.legend(fontsize=7, loc="lower right")
    bw.grid(True, which="both", alpha=0.3)
    ra.axhline(1.0, color="black", linewidth=1)
    ra.axhline(0.95, color="red", linestyle=":", linewidth=1, label="target 0.95x (send, write; >= 64K)")
    ra.set_xscale("log", base=2)
    ra.xaxis.set_major_formatter(size_fmt)
    ra.set_xlabel("operation size (bytes)")
    ra.set_ylabel("kfi / raw stream (median; bar: per-rep min..max)")
    ra.set_title("ratio to the raw stream")
    ra.legend(fontsize=7, loc="upper left")
    ra.grid(True, which="both", alpha=0.3)
    pp_sizes = sorted({r["bytes"] for r in rows if r["op"] == "raw_pingpong"})
    pp_colors = ["black", "grey", "tab:blue", "tab:cyan"]
    for i, (op, label) in enumerate(PP_ROWS):
        sel = sorted((r for r in rows if r["op"] == op), key=lambda r: r["bytes"])
        if not sel:
            continue
        if len(pp_sizes) > 1:
            lat.plot([r["bytes"] for r in sel], [r["rtt_us_p50"]["median"] for r in sel], "o-",
                     color=pp_colors[i], label=label + " p50")
            lat.plot([r["bytes"] for r in sel], [r["rtt_us_p99"]["median"] for r in sel], "x:",
                     color=pp_colors[i], label=label + " p99")
            lat.set_xscale("log", base=2)
            lat.set_yscale("log")
            lat.xaxis.set_major_formatter(size_fmt)
            lat.set_xlabel("message size (bytes)")
        else:
            r = sel[0]
            lat.bar(i - 0.2, r["rtt_us_p50"]["median"], 0.4, color="tab:blue", label="p50" if i == 0 else None)
            lat.bar(i + 0.2, r["rtt_us_p99"]["median"], 0.4, color="tab:red", label="p99" if i == 0 else None)
            lat.set_xticks(range(len(PP_ROWS)), [lbl.replace(", ", "\n") for _, lbl in PP_ROWS], fontsize=8)
            lat.set_xlabel("%s B ping-pong" % human(r["bytes"]))
    lat.set_ylabel("round trip, usec (median over repetitions)")
    lat.set_title("latency")
    lat.legend(fontsize=7)
    lat.grid(True, axis="y", alpha=0.3)
    if ib_rows:
        plot_ib(ib_rows, ib_axes, size_fmt, colors)
    fig.suptitle("kfabric bench: accel %s, %s vCPUs, HZ %s%s" % (
        facts["accel"], facts["vcpus"], facts["hz"], " - BUSY MACHINE" if facts["busy"] else ""))
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return None


def plot_ib(rows, axes, size_fmt, colors):
    """The kfi_ibverbs panels: bandwidth of each fabric with 8 in flight,
    kfi (solid) beside raw verbs (dashed); the ratios; the ping-pongs."""
    fabrics = sorted({r["fabric"] for r in rows})
    bw_ax, ra, lat = axes
    marks = ["o", "s", "^", "v"]
    for fi, fab in enumerate(fabrics):
        for kfi, base, label in IB_ROWS:
            for op, style, name in ((kfi, "-", "kfi"), (base, "--", "raw verbs")):
                sel = sorted((r for r in rows if r["fabric"] == fab and r["op"] == op
                              and r["window"] == TARGET_WINDOW), key=lambda r: r["bytes"])
                if not sel:
                    continue
                x = [r["bytes"] for r in sel]
                bw_ax.plot(x, [r["mbps"]["median"] for r in sel], marks[fi % 4] + style, color=colors[kfi],
                           label="%s %s %s" % (fab, name, label))
                if op == kfi:
                    ra.plot(x, [r["ratio"] for r in sel], marks[fi % 4] + "-", color=colors[kfi],
                            label="%s %s" % (fab, label))
                    ra.vlines(x, [r["ratio_min"] for r in sel], [r["ratio_max"] for r in sel], color=colors[kfi],
                              alpha=0.5)
        for op, style, name in (("kfi_pingpong", "-", "kfi"), ("ib_pingpong", "--", "raw verbs")):
            sel = sorted((r for r in rows if r["fabric"] == fab and r["op"] == op), key=lambda r: r["bytes"])
            if sel:
                lat.plot([r["bytes"] for r in sel], [r["rtt_us_p50"]["median"] for r in sel], marks[fi % 4] + style,
                         color=["tab:blue", "tab:red", "tab:purple", "tab:brown"][fi % 4],
                         label="%s %s p50" % (fab, name))
    for ax in (bw_ax, ra, lat):
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(size_fmt)
        ax.set_xlabel("operation size (bytes)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6)
    bw_ax.set_yscale("log")
    bw_ax.set_ylabel("MB/s (median), window %d" % TARGET_WINDOW)
    bw_ax.set_title("kfi_ibverbs (solid) and raw verbs (dashed)")
    ra.axhline(1.0, color="black", linewidth=1)
    ra.set_ylabel("kfi / raw verbs, window %d (bar: per-rep min..max)" % TARGET_WINDOW)
    ra.set_title("kfi_ibverbs ratio to raw verbs")
    lat.set_yscale("log")
    lat.set_ylabel("round trip, usec (median p50)")
    lat.set_title("kfi_ibverbs and raw verbs ping-pong")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: bench-report.py OUTDIR")
    out = sys.argv[1]
    samples, config, status, fan = parse_samples(os.path.join(out, "samples.txt"))
    if not samples:
        sys.exit("bench-report: no samples in %s/samples.txt" % out)
    facts = load_facts(out)
    sock = [s for s in samples if s["fabric"] == "sockets"]
    fabrics = sorted({s["fabric"] for s in samples} - {"sockets"})
    rows = build_rows(sock) if sock else []
    for r in rows:
        r["fabric"] = "sockets"
    ib_rows = [r for f in fabrics for r in build_ib_rows([s for s in samples if s["fabric"] == f], f)]
    places = placement(sock)
    print_report(facts, config, status, rows, places)
    if ib_rows:
        print_ib_report(config, ib_rows, fabrics)
    fan_rows = build_fan_rows(fan)
    print_fan_report(fan_rows)
    bad = [s for s in status if s.startswith("failed")]
    if bad:
        print("")
        print("BENCH FAILED: " + "; ".join(bad))
    rows = rows + ib_rows
    js = os.path.join(out, "latest.json")
    with open(js, "w", encoding="utf-8") as f:
        json.dump({"facts": facts, "config": config, "status": status, "rows": rows + fan_rows,
                   "placement": places}, f, indent=1)
        f.write("\n")
    png = os.path.join(out, "bench.png")
    note = plot(rows, facts, png)
    print("")
    print("results: %s" % os.path.abspath(js))
    print("plot:    %s" % (note or os.path.abspath(png)))
    print("samples: %s" % os.path.abspath(os.path.join(out, "samples.txt")))


if __name__ == "__main__":
    main()
