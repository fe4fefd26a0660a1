// SPDX-License-Identifier: GPL-2.0

//! kfi_bench.ko: the benchmark of `make bench` (`Documentation/bench.rst`).
//!
//! At load it measures, in one boot and over loopback, kfi_sockets through
//! kfabric.ko against plain kernel TCP driven with the same threading (each
//! side a work item on the unbound system workqueue, as kfi_sockets' own
//! progress work): ping-pong latency, and for sizes from 64 B up by powers
//! of 4 a raw stream against kfi send/recv, RMA write and RMA read with 1
//! and 8 operations in flight; plus the guest's memcpy bandwidth as the
//! physical bound. Every row is run once to warm up (TCG translates each
//! path the first time), then `reps` times, raw and kfi interleaved.
//!
//! With `ib_node` set (`kfi_bench_param.c`) it measures kfi_ibverbs
//! instead, over the soft RDMA device (siw, rxe) that has the address,
//! against raw ib_core verbs on the same device (`raw_ib.rs`): the same
//! ping-pong and bandwidth rows, each beside its raw verbs row of the same
//! window. Its runs reuse `window + 1` operation slots (see
//! `pattern.rs`), sizes up to the provider's largest message.
//!
//! `rows` (`kfi_bench_param.c`) runs some rows only, by name.
//!
//! After the kfi_sockets rows come the fan-out rows (`fanout.rs`): one RDM
//! endpoint talking to 1, 64 and 1024 peer RDM endpoints, the memory each
//! connection takes and the aggregate message rate.
//!
//! Every operation carries its own pattern, checked after each run; every
//! kfi completion is checked. Each run prints one line (`bench: sample
//! ...`) that the host turns into tables, JSON and a plot
//! (`scripts/bench-report.py`). Nothing passes or fails on speed; a run
//! with wrong data ends the bench as failed.

use kernel::{prelude::*, str::CString, sync::Arc};

#[path = "../../kfi/api/mod.rs"]
mod kfi;
#[allow(dead_code)]
#[path = "../../prov/sockets/ksock.rs"]
mod ksock;
// ksock.rs's kernel call not in the kernel crate's bindings.
#[path = "../../prov/sockets/sock_sys.rs"]
mod sock_sys;
// Shared by source inclusion; each module uses a part.
#[allow(dead_code)]
#[path = "../common/net.rs"]
mod net;
// kfi_ibverbs' safe wrappers over ib_core and rdma_cm and their raw
// declarations, for the raw verbs baseline; it uses a part.
#[allow(dead_code)]
#[path = "../../prov/ibverbs/ib/mod.rs"]
mod ib;
#[path = "../../prov/ibverbs/ib_sys.rs"]
mod ib_sys;

mod cost;
mod fanout;
mod ib_pair;
mod ib_ring;
mod kfi_runs;
mod mem;
mod pattern;
mod raw;
mod raw_ib;
mod run;
mod spawn;

use cost::Cost;
use kfi_runs::Kind;
use run::{Bufs, Grave, Sample, Shape, Time};

extern "C" {
    /// `kfi_bench_param.c`: the `ib_node` parameter (empty: unset).
    fn kfi_bench_ib_node() -> *const u8;
    /// `kfi_bench_param.c`: the `rows` parameter (empty: unset).
    fn kfi_bench_rows() -> *const u8;
}

/// The `ib_node` parameter: the address of the RDMA device to bench
/// kfi_ibverbs on, or `None`.
fn ib_node() -> Option<&'static CStr> {
    // SAFETY: A NUL-terminated module parameter that lives as long as the
    // module and is read-only (0444).
    let s = unsafe { CStr::from_char_ptr(kfi_bench_ib_node()) };
    (!s.is_empty()).then_some(s)
}

/// Whether the `rows` parameter (comma-separated row names; empty: all)
/// asks for the row named `name`.
fn wanted(name: &str) -> bool {
    // SAFETY: As for `ib_node`: a NUL-terminated, read-only module
    // parameter that lives as long as the module.
    let s = unsafe { CStr::from_char_ptr(kfi_bench_rows()) };
    let list = s.to_bytes();
    list.is_empty() || list.split(|&c| c == b',').any(|r| r == name.as_bytes())
}

module! {
    type: KfiBench,
    name: "kfi_bench",
    authors: ["kfabric developers"],
    description: "kfabric benchmark: kfi_sockets against kernel TCP, kfi_ibverbs against raw verbs",
    license: "GPL",
    params: {
        reps: u32 {
            default: 7,
            description: "Timed repetitions of every row (1..=50)",
        },
        min_size: u32 {
            default: 64,
            description: "Smallest kfi_sockets size, bytes (sizes below it are left out: a quicker run)",
        },
        max_size: u32 {
            default: 4 << 20,
            description: "Largest bandwidth size, bytes (64 B up by powers of 4)",
        },
        pp_max: u32 {
            default: 64 << 10,
            description: "Largest ping-pong size, bytes (64 B up by powers of 4)",
        },
        budget_mib: u32 {
            default: 64,
            description: "MiB one bandwidth run moves (within the iteration bounds)",
        },
        max_iters: u32 {
            default: 3000,
            description: "Most operations in one run",
        },
        ib_max_iters: u32 {
            default: 200,
            description: "Most operations in one kfi_ibverbs or raw verbs run (soft RDMA is slow under TCG)",
        },
        ib_budget_mib: u32 {
            default: 16,
            description: "MiB one kfi_ibverbs or raw verbs bandwidth run moves (within the iteration bounds)",
        },
        fan_peers: u32 {
            default: 1024,
            description: "Peers of the largest fan-out row (rows of 1, 64 and 1024 peers below it; 0: none)",
        },
        fan_msgs: u32 {
            default: 8192,
            description: "Messages of one fan-out rate pass (at least one per peer)",
        },
    },
}

struct KfiBench;

impl kernel::Module for KfiBench {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let t0 = Time::now();
        match bench() {
            Ok(0) => pr_info!(
                "bench: done in {} s\n",
                run::span_ns(t0, &[Time::now()]) / 1_000_000_000
            ),
            Ok(bad) => pr_err!("bench: failed: {} runs with wrong data\n", bad),
            Err(e) => pr_err!("bench: failed: {:?}\n", e),
        }
        Ok(Self)
    }
}

/// Fewest operations in a run (4 windows of 8).
const MIN_ITERS: usize = 32;
/// Round trips of a ping-pong run (fewer for large messages).
const PP_ITERS: usize = 1000;
/// MiB a ping-pong run of large messages moves each way.
const PP_BUDGET_MIB: usize = 16;
/// Smallest size.
const MIN_SIZE: usize = 64;
/// Windows of the kfi bandwidth rows.
const WINDOWS: [usize; 2] = [1, 8];
/// Most peers of a fan-out row, and most messages of its rate pass.
const MAX_FAN_PEERS: usize = 4096;
const MAX_FAN_MSGS: usize = 1 << 20;
/// Sizes of the memcpy bound, and the bytes copied for each.
const MEMCPY_SIZES: [usize; 2] = [1 << 20, 8 << 20];
const MEMCPY_BYTES: usize = 64 << 20;

/// The bench's settings, from the module parameters.
struct Plan {
    reps: usize,
    min_size: usize,
    max_size: usize,
    pp_max: usize,
    budget: usize,
    max_iters: usize,
    ib_max_iters: usize,
    ib_budget: usize,
    fan_peers: usize,
    fan_msgs: usize,
}

impl Plan {
    fn get() -> Self {
        let p = |v: u32| v as usize;
        Self {
            reps: p(module_parameters::reps.value()).clamp(1, 50),
            min_size: p(module_parameters::min_size.value()),
            max_size: p(module_parameters::max_size.value()).clamp(MIN_SIZE, pattern::MAX_SIZE),
            pp_max: p(module_parameters::pp_max.value()).clamp(MIN_SIZE, pattern::MAX_SIZE),
            budget: p(module_parameters::budget_mib.value()).clamp(1, 256) << 20,
            max_iters: p(module_parameters::max_iters.value()).clamp(MIN_ITERS, 100_000),
            ib_max_iters: p(module_parameters::ib_max_iters.value())
                .clamp(MIN_ITERS, ib_pair::RECV_DEPTH),
            ib_budget: p(module_parameters::ib_budget_mib.value()).clamp(1, 256) << 20,
            fan_peers: p(module_parameters::fan_peers.value()).min(MAX_FAN_PEERS),
            fan_msgs: p(module_parameters::fan_msgs.value()).clamp(1, MAX_FAN_MSGS),
        }
    }

    /// Operations of a bandwidth run of `size`-byte operations.
    fn iters(&self, size: usize) -> usize {
        self.budget
            .checked_div(size)
            .unwrap_or(0)
            .clamp(MIN_ITERS, self.max_iters)
    }

    /// Operations of a kfi_ibverbs (or raw verbs) bandwidth run of
    /// `size`-byte operations.
    fn ib_iters(&self, size: usize) -> usize {
        self.ib_budget
            .checked_div(size)
            .unwrap_or(0)
            .clamp(MIN_ITERS, self.ib_max_iters)
    }

    /// Round trips of a ping-pong of `size` bytes.
    fn pp_iters(&self, size: usize) -> usize {
        (PP_BUDGET_MIB << 20)
            .checked_div(size)
            .unwrap_or(0)
            .clamp(MIN_ITERS, PP_ITERS.min(self.max_iters))
    }
}

/// 64 B up to `max` by powers of 4.
fn sizes(max: usize) -> impl Iterator<Item = usize> {
    core::iter::successors(Some(MIN_SIZE), |s| s.checked_mul(4)).take_while(move |&s| s <= max)
}

/// One line of the table.
#[derive(Clone, Copy)]
enum Row {
    /// Two work items, blocking sockets.
    RawPingpong,
    /// Both sockets from one work item: the floor.
    RawPingpongOneThread,
    KfiPingpong,
    /// Both endpoints from one work item: the floor.
    KfiPingpongOneThread,
    /// Two work items, blocking sockets.
    RawStream,
    Kfi(Kind, usize),
    /// Raw verbs: send ping-pong over an RC QP pair.
    IbPingpong,
    /// Raw verbs: sends, RDMA writes or reads, window.
    Ib(Kind, usize),
    /// The guest's memcpy, for the bound.
    Memcpy,
}

impl Row {
    fn name(self) -> &'static str {
        match self {
            Row::RawPingpong => "raw_pingpong",
            Row::RawPingpongOneThread => "raw_pingpong_1thread",
            Row::KfiPingpong => "kfi_pingpong",
            Row::KfiPingpongOneThread => "kfi_pingpong_1thread",
            Row::RawStream => "raw_stream",
            Row::Kfi(Kind::Send, _) | Row::Kfi(Kind::Recv, _) => "kfi_send",
            Row::Kfi(Kind::Write, _) => "kfi_write",
            Row::Kfi(Kind::WriteIc, _) => "kfi_write_ic",
            Row::Kfi(Kind::Read, _) => "kfi_read",
            Row::Kfi(Kind::TSend, _) | Row::Kfi(Kind::TRecv, _) => "kfi_tagged",
            Row::IbPingpong => "ib_pingpong",
            Row::Ib(Kind::Send, _) | Row::Ib(Kind::Recv, _) => "ib_send",
            Row::Ib(Kind::Write, _) => "ib_write",
            Row::Ib(Kind::Read, _) => "ib_read",
            // Raw verbs have no tags, and no inject-completed writes; never
            // built.
            Row::Ib(Kind::TSend, _) | Row::Ib(Kind::TRecv, _) => "ib_tagged",
            Row::Ib(Kind::WriteIc, _) => "ib_write_ic",
            Row::Memcpy => "memcpy",
        }
    }

    fn win(self) -> usize {
        match self {
            Row::Kfi(_, w) | Row::Ib(_, w) => w,
            _ => 1,
        }
    }
}

/// The connections every run uses, and the buffers of failed runs.
/// Fields drop in order: the kfi pair closes before the buffers its
/// operations may still use.
struct Bench {
    kfi: Arc<kfi_runs::Pair>,
    /// The kernel TCP baseline (kfi_sockets runs).
    raw: Option<raw::RawPair>,
    /// The raw verbs baseline (kfi_ibverbs runs).
    ib: Option<Arc<ib_pair::IbPair>>,
    /// What the samples name the fabric: `sockets`, or the RDMA domain.
    fabric: CString,
    grave: Grave,
    /// Runs whose data did not match.
    bad: usize,
}

impl Bench {
    /// Runs `row` once on `bufs`: cleared destination, timed run, check.
    /// Prints the sample (`rep` None: the warm-up).
    fn sample(&mut self, row: Row, sh: Shape, rep: Option<usize>, bufs: Bufs) -> Result<Bufs> {
        let mut bufs = bufs;
        let total = sh.total()?;
        if sh.ring {
            // The last run restamped the slots.
            pattern::fill(bufs.src.get_mut(..total).ok_or(EINVAL)?, sh.size)?;
        }
        bufs.dst.get_mut(..total).ok_or(EINVAL)?.fill(0);
        let g = &mut self.grave;
        let before = Cost::now();
        let (bufs, s) = match (row, self.raw.as_ref(), self.ib.as_ref()) {
            (Row::RawPingpong, Some(raw), _) => raw::pingpong(raw, sh, bufs, g),
            (Row::RawPingpongOneThread, Some(raw), _) => raw::pingpong_one_thread(raw, sh, bufs, g),
            (Row::KfiPingpong, _, _) => kfi_runs::pingpong(&self.kfi, sh, bufs, g),
            (Row::KfiPingpongOneThread, _, _) => {
                kfi_runs::pingpong_one_thread(&self.kfi, sh, bufs, g)
            }
            (Row::RawStream, Some(raw), _) => raw::stream(raw, sh, bufs, g),
            (Row::Kfi(kind, _), _, _) => kfi_runs::stream(&self.kfi, kind, sh, bufs, g),
            (Row::IbPingpong, _, Some(ib)) => {
                raw_ib::pingpong(ib, sh, &mut bufs).map(|s| (bufs, s))
            }
            (Row::Ib(kind, _), _, Some(ib)) => {
                raw_ib::stream(ib, kind, sh, &mut bufs).map(|s| (bufs, s))
            }
            // Not a transfer (`memcpy_bound` measures it), or a baseline
            // of the other provider's pass.
            _ => Err(EINVAL),
        }
        .inspect_err(|e| pr_err!("bench: {} of {} B: {:?}\n", row.name(), sh.size, e))?;
        let cost = Cost::now().since(before);
        let bad = bufs
            .dst
            .get(..total)
            .map_or(Some(0), |d| pattern::first_bad_in(d, sh));
        if let Some(at) = bad {
            pr_err!(
                "bench: {} of {} B: wrong data at byte {}\n",
                row.name(),
                sh.size,
                at
            );
            self.bad += 1;
        }
        print(&self.fabric, row, sh, rep, &s, &cost, bad.is_none());
        Ok(bufs)
    }

    /// Warm-up, then `reps` rounds of `rows`, in reverse order every other
    /// round so that no row always runs first.
    fn rows(&mut self, rows: &[Row], sh: Shape, reps: usize) -> Result {
        let mut picked = KVec::with_capacity(rows.len(), GFP_KERNEL)?;
        for &r in rows.iter().filter(|r| wanted(r.name())) {
            picked.push(r, GFP_KERNEL)?;
        }
        let rows = &picked[..];
        if rows.is_empty() {
            return Ok(());
        }
        // Room for the row with the most slots.
        let mut len = 0;
        for r in rows {
            len = len.max(Shape { win: r.win(), ..sh }.total()?);
        }
        let mut bufs = Bufs {
            src: pattern::buffer(len, Some(sh.size))?,
            dst: pattern::buffer(len, None)?,
        };
        for &r in rows {
            let warm = Shape {
                iters: (sh.iters / 4).max(MIN_ITERS.min(sh.iters)),
                win: r.win(),
                ..sh
            };
            bufs = self.sample(r, warm, None, bufs)?;
        }
        for rep in 0..reps {
            for k in 0..rows.len() {
                let r = if rep % 2 == 0 {
                    rows[k]
                } else {
                    rows[rows.len() - 1 - k]
                };
                bufs = self.sample(r, Shape { win: r.win(), ..sh }, Some(rep), bufs)?;
            }
        }
        Ok(())
    }
}

/// A repetition's number, or `warmup`.
struct Rep(Option<usize>);

impl kernel::fmt::Display for Rep {
    fn fmt(&self, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
        match self.0 {
            Some(r) => write!(f, "{}", r),
            None => f.write_str("warmup"),
        }
    }
}

/// The CPUs of a run's sides: `first>last` each, comma-separated.
struct Sides([Option<run::Cpus>; 2]);

impl kernel::fmt::Display for Sides {
    fn fmt(&self, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
        let mut sep = "";
        for c in self.0.iter().flatten() {
            write!(f, "{}{}>{}", sep, c.first, c.last)?;
            sep = ",";
        }
        if sep.is_empty() {
            f.write_str("-")?;
        }
        Ok(())
    }
}

/// What a run cost besides its time, as `sample` fields.
struct Costs<'a>(&'a Cost);

impl kernel::fmt::Display for Costs<'_> {
    fn fmt(&self, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
        let c = self.0;
        write!(
            f,
            "sys_ns={} sirq_ns={} retrans={} delack={}",
            c.sys_ns, c.softirq_ns, c.retrans, c.delacks
        )?;
        match c.ctxt() {
            Some(n) => write!(f, " ctxt={}", n),
            None => Ok(()),
        }
    }
}

/// `bench: sample fabric=.. row=.. bytes=.. win=.. rep=.. iters=.. ns=..
/// [p50=.. p99=.. min=.. max=..] cpus=.. sys_ns=.. sirq_ns=.. retrans=..
/// delack=.. [ctxt=..] verified=..` (times in nanoseconds; the costs are
/// of the whole sample, its set-up included, over all CPUs; `ctxt`, the
/// context switches, when `/proc/stat` could be read).
fn print(
    fabric: &CStr,
    row: Row,
    sh: Shape,
    rep: Option<usize>,
    s: &Sample,
    cost: &Cost,
    ok: bool,
) {
    let rep = Rep(rep);
    let cpus = Sides(s.cpus);
    let cost = Costs(cost);
    match s.lat {
        Some(l) => pr_info!(
            "bench: sample fabric={} row={} bytes={} win={} rep={} iters={} ns={} p50={} p99={} min={} max={} cpus={} {} verified={}\n",
            fabric,
            row.name(),
            sh.size,
            sh.win,
            rep,
            sh.iters,
            s.ns,
            l.p50,
            l.p99,
            l.min,
            l.max,
            cpus,
            cost,
            u8::from(ok)
        ),
        None => pr_info!(
            "bench: sample fabric={} row={} bytes={} win={} rep={} iters={} ns={} cpus={} {} verified={}\n",
            fabric,
            row.name(),
            sh.size,
            sh.win,
            rep,
            sh.iters,
            s.ns,
            cpus,
            cost,
            u8::from(ok)
        ),
    }
}

/// The guest's memcpy bandwidth for `MEMCPY_SIZES`, one CPU: the bound
/// for any copying transport (a TCP stream copies each byte twice).
fn memcpy_bound(reps: usize) -> Result {
    for size in MEMCPY_SIZES {
        let src = pattern::buffer(size, Some(MIN_SIZE))?;
        let mut dst = pattern::buffer(size, None)?;
        let copies = MEMCPY_BYTES / size;
        let sh = Shape::new(size, copies, 1);
        // The first round (rep None) warms up.
        for rep in (0..=reps).map(|r| r.checked_sub(1)) {
            let before = Cost::now();
            let t0 = Time::now();
            for _ in 0..copies {
                dst.copy_from_slice(&src);
                core::hint::black_box(&mut dst);
            }
            let ns = run::span_ns(t0, &[Time::now()]);
            let cost = Cost::now().since(before);
            let ok = pattern::first_bad(&dst, MIN_SIZE).is_none();
            let s = Sample {
                ns,
                lat: None,
                cpus: [None, None],
            };
            print(c"sockets", Row::Memcpy, sh, rep, &s, &cost, ok);
        }
    }
    Ok(())
}

/// The whole bench: the number of runs with wrong data.
fn bench() -> Result<usize> {
    let plan = Plan::get();
    pr_info!(
        "bench: config reps={} max_size={} pp_max={} budget_mib={} max_iters={} min_iters={} pp_iters={} fan_peers={} fan_msgs={}\n",
        plan.reps,
        plan.max_size,
        plan.pp_max,
        plan.budget >> 20,
        plan.max_iters,
        MIN_ITERS,
        PP_ITERS,
        plan.fan_peers,
        plan.fan_msgs
    );
    pattern::self_check()?;
    kfi_runs::self_check()?;
    pr_info!("bench: self-check of the data and completion checks: ok\n");
    match ib_node() {
        None => bench_sockets(&plan),
        Some(node) => bench_ibverbs(&plan, node),
    }
}

/// The bandwidth rows of `kinds`, each kfi row after its baseline `raw`
/// (None: one baseline row for all, `RawStream`).
fn bw_rows(kinds: &[Kind], raw: Option<fn(Kind, usize) -> Row>) -> Result<KVec<Row>> {
    let mut bw = KVec::new();
    if raw.is_none() {
        bw.push(Row::RawStream, GFP_KERNEL)?;
    }
    for &kind in kinds {
        for w in WINDOWS {
            if let Some(r) = raw {
                bw.push(r(kind, w), GFP_KERNEL)?;
            }
            bw.push(Row::Kfi(kind, w), GFP_KERNEL)?;
        }
    }
    Ok(bw)
}

/// kfi_sockets against kernel TCP over loopback, and the memcpy bound.
fn bench_sockets(plan: &Plan) -> Result<usize> {
    if wanted(Row::Memcpy.name()) {
        memcpy_bound(plan.reps)?;
    }
    let grave = Grave::new();
    let raw = raw::pair(7490)?;
    let kfi = kfi_runs::pair(c"sockets", c"127.0.0.1", c"7492")?;
    let mut b = Bench {
        kfi,
        raw: Some(raw),
        ib: None,
        fabric: CString::try_from(c"sockets")?,
        grave,
        bad: 0,
    };
    let pp = [
        Row::RawPingpong,
        Row::RawPingpongOneThread,
        Row::KfiPingpong,
        Row::KfiPingpongOneThread,
    ];
    for size in sizes(plan.pp_max).filter(|&s| s >= plan.min_size) {
        let sh = Shape::new(size, plan.pp_iters(size), 1);
        b.rows(&pp, sh, plan.reps)?;
    }
    // kfi_sockets has tagged messages; kfi_ibverbs not yet.
    let bw = bw_rows(
        &[
            Kind::Send,
            Kind::TSend,
            Kind::Write,
            Kind::WriteIc,
            Kind::Read,
        ],
        None,
    )?;
    for size in sizes(plan.max_size).filter(|&s| s >= plan.min_size) {
        let sh = Shape::new(size, plan.iters(size), 1);
        b.rows(&bw, sh, plan.reps)?;
    }
    let bad = b.bad;
    // The pair and the baseline close before the fan-out rows.
    drop(b);
    let fan = fanout::FanPlan {
        // The fan-out rows go by one name in `rows`.
        max_peers: if wanted("fanout") { plan.fan_peers } else { 0 },
        msgs: plan.fan_msgs,
        reps: plan.reps,
    };
    Ok(bad + fanout::rows(&fan)?)
}

/// kfi_ibverbs against raw verbs over the RDMA device of `node`.
fn bench_ibverbs(plan: &Plan, node: &'static CStr) -> Result<usize> {
    let grave = Grave::new();
    let kfi = kfi_runs::pair(c"ibverbs", node, c"7492")?;
    // What one region holds on both sides at any alignment, in whole
    // pages: the provider's largest message.
    let region = kfi.max_msg / 4096 * 4096;
    let largest = |max: usize| sizes(max).last().unwrap_or(0);
    let bw_max = largest(plan.max_size.min(region));
    // A ping-pong's two slots each way lie in one region.
    let pp_max = largest(plan.pp_max.min(region / 2));
    let ib = ib_pair::pair(node, c"7494", 2 * pp_max, pp_max, region)?;
    let fabric = CString::try_from(&*kfi.domain)?;
    pr_info!(
        "bench: ib fabric={} node={} max_msg={} region={} max_size={} pp_max={} max_iters={} budget_mib={}\n",
        &*fabric,
        node,
        kfi.max_msg,
        region,
        bw_max,
        pp_max,
        plan.ib_max_iters,
        plan.ib_budget >> 20
    );
    let mut b = Bench {
        kfi,
        raw: None,
        ib: Some(ib),
        fabric,
        grave,
        bad: 0,
    };
    let pp = [Row::IbPingpong, Row::KfiPingpong];
    for size in sizes(pp_max) {
        let sh = Shape {
            ring: true,
            ..Shape::new(size, plan.pp_iters(size).min(plan.ib_max_iters), 1)
        };
        b.rows(&pp, sh, plan.reps)?;
    }
    let bw = bw_rows(&[Kind::Send, Kind::Write, Kind::Read], Some(Row::Ib))?;
    for size in sizes(bw_max) {
        let sh = Shape {
            ring: true,
            ..Shape::new(size, plan.ib_iters(size), 1)
        };
        b.rows(&bw, sh, plan.reps)?;
    }
    Ok(b.bad)
}
