// SPDX-License-Identifier: GPL-2.0

//! What one timed run (raw or kfi) takes and gives back: the shape of the
//! run, its buffers, its timing; and where buffers go that the provider may
//! still use after a failed run.

use core::ops::Range;
use kernel::{
    prelude::*,
    time::{Instant, Monotonic},
};

pub(crate) type Time = Instant<Monotonic>;

/// The operations of a run: `iters` of `size` bytes, at most `win` in
/// flight (kfi runs; a blocking socket has its own window). Without
/// `ring`, operation `i` has bytes of its own in the run's buffers (no
/// reuse); with it, the buffers hold `win + 1` operation slots that the
/// operations use round-robin (see [`Shape::slots`] and `pattern.rs`).
#[derive(Clone, Copy)]
pub(crate) struct Shape {
    pub(crate) size: usize,
    pub(crate) iters: usize,
    pub(crate) win: usize,
    pub(crate) ring: bool,
}

impl Shape {
    /// A run without reuse.
    pub(crate) fn new(size: usize, iters: usize, win: usize) -> Self {
        Self {
            size,
            iters,
            win,
            ring: false,
        }
    }

    /// Operation slots of the buffers the run uses: one per operation, or
    /// with `ring` one more than the window, so that the operation that
    /// last used a slot has completed when the next one takes it (at most
    /// `win` are in flight).
    pub(crate) fn slots(&self) -> usize {
        if self.ring {
            self.win.saturating_add(1).min(self.iters)
        } else {
            self.iters
        }
    }

    /// The slot of operation `i`.
    pub(crate) fn slot(&self, i: usize) -> usize {
        i.checked_rem(self.slots()).unwrap_or(0)
    }

    /// The operation that used the slot of operation `i` before it, if
    /// any.
    pub(crate) fn before(&self, i: usize) -> Option<usize> {
        i.checked_sub(self.slots())
    }

    /// The bytes of operation `i` in a run's buffer: those of its slot.
    pub(crate) fn span(&self, i: usize) -> Result<Range<usize>> {
        let at = self.slot(i).checked_mul(self.size).ok_or(EINVAL)?;
        Ok(at..at.checked_add(self.size).ok_or(EINVAL)?)
    }

    /// All bytes of the run's buffers.
    pub(crate) fn total(&self) -> Result<usize> {
        self.slots().checked_mul(self.size).ok_or(EINVAL)
    }

    /// Operation `i` of `buf`.
    pub(crate) fn op<'a>(&self, buf: &'a [u8], i: usize) -> Result<&'a [u8]> {
        buf.get(self.span(i)?).ok_or(EINVAL)
    }

    /// Operation `i` of `buf`, to write.
    pub(crate) fn op_mut<'a>(&self, buf: &'a mut [u8], i: usize) -> Result<&'a mut [u8]> {
        buf.get_mut(self.span(i)?).ok_or(EINVAL)
    }
}

/// A run's data: the source holds the pattern (`pattern.rs`) of its
/// operations, the destination is cleared before the run and checked
/// after it. A side of a run that needs only one of them gets the other
/// empty.
pub(crate) struct Bufs {
    pub(crate) src: VVec<u8>,
    pub(crate) dst: VVec<u8>,
}

impl Bufs {
    /// (the source alone, the destination alone), for the two sides.
    pub(crate) fn split(self) -> (Self, Self) {
        (
            Self {
                src: self.src,
                dst: VVec::new(),
            },
            Self {
                src: VVec::new(),
                dst: self.dst,
            },
        )
    }

    /// The source of `a` and the destination of `b`, together again.
    pub(crate) fn rejoin(a: Self, b: Self) -> Self {
        Self {
            src: a.src,
            dst: b.dst,
        }
    }
}

/// Round-trip times of a ping-pong, nanoseconds.
#[derive(Clone, Copy)]
pub(crate) struct Lat {
    pub(crate) p50: i64,
    pub(crate) p99: i64,
    pub(crate) min: i64,
    pub(crate) max: i64,
}

/// Sorts `v` in place, ascending: a heap sort (the core library's sorts
/// end in a panic function objtool does not know as one, which it then
/// reports as falling through into the next function).
fn heap_sort(v: &mut [i64]) {
    let sift = |v: &mut [i64], mut root: usize, end: usize| loop {
        let mut child = 2 * root + 1;
        if child >= end {
            return;
        }
        if child + 1 < end && v[child] < v[child + 1] {
            child += 1;
        }
        if v[root] >= v[child] {
            return;
        }
        v.swap(root, child);
        root = child;
    };
    for root in (0..v.len() / 2).rev() {
        sift(v, root, v.len());
    }
    for end in (1..v.len()).rev() {
        v.swap(0, end);
        sift(v, 0, end);
    }
}

impl Lat {
    /// The percentiles of `v` (nearest rank); sorts it.
    pub(crate) fn of(v: &mut [i64]) -> Option<Self> {
        heap_sort(v);
        let rank = |p: usize| {
            let r = v.len().saturating_mul(p).div_ceil(100).max(1);
            v.get(r - 1).copied()
        };
        Some(Self {
            p50: rank(50)?,
            p99: rank(99)?,
            min: *v.first()?,
            max: *v.last()?,
        })
    }
}

/// The CPUs a side of a run started and ended on (the scheduler may move
/// it in between), to see how placement moves the results.
#[derive(Clone, Copy)]
pub(crate) struct Cpus {
    pub(crate) first: u32,
    pub(crate) last: u32,
}

/// The CPU this code runs on now.
pub(crate) fn cpu_now() -> u32 {
    kernel::cpu::CpuId::current().as_u32()
}

/// What a run measured.
pub(crate) struct Sample {
    /// From the first operation's start to the last one's end on either
    /// side.
    pub(crate) ns: i64,
    pub(crate) lat: Option<Lat>,
    /// Where its sides ran: the active side (client, sender, initiator)
    /// first.
    pub(crate) cpus: [Option<Cpus>; 2],
}

impl Sample {
    /// A one-way run's: from the sender's start `t0` to the later of the
    /// sender's and the receiver's `ends`; CPUs of the sender, then the
    /// receiver.
    pub(crate) fn stream(t0: Time, ends: [Time; 2], cpus: [Cpus; 2]) -> Self {
        let [s, r] = cpus;
        Self {
            ns: span_ns(t0, &ends),
            lat: None,
            cpus: [Some(s), Some(r)],
        }
    }
}

/// Nanoseconds from `t0` to the later of `ends`.
pub(crate) fn span_ns(t0: Time, ends: &[Time]) -> i64 {
    ends.iter()
        .map(|&e| (e - t0).as_nanos())
        .max()
        .unwrap_or(0)
        .max(1)
}

/// What a side of a run hands back: its buffers and its result. `busy`:
/// the side failed with operations still in flight, so the provider may
/// use its buffers until the endpoints close.
pub(crate) struct Back<T> {
    pub(crate) bufs: Bufs,
    pub(crate) res: Result<T>,
    pub(crate) busy: bool,
    pub(crate) cpus: Cpus,
}

/// Buffers of failed runs that a provider may still write into: kept
/// until the endpoints are closed (declare it before them, so that it is
/// dropped after them).
pub(crate) struct Grave(KVec<Bufs>);

impl Grave {
    pub(crate) fn new() -> Self {
        Self(KVec::new())
    }

    /// The buffers, value and CPUs of a side that succeeded; else its
    /// error, its buffers kept here when they may still be in use.
    pub(crate) fn sort<T>(&mut self, b: Back<T>) -> Result<(Bufs, T, Cpus)> {
        match b.res {
            Ok(v) => Ok((b.bufs, v, b.cpus)),
            Err(e) => {
                if b.busy {
                    self.keep(b.bufs);
                }
                Err(e)
            }
        }
    }

    fn keep(&mut self, bufs: Bufs) {
        // `push` would drop the buffers when it cannot grow the list.
        if self.0.reserve(1, GFP_KERNEL).is_err() {
            leak(bufs);
        } else if let Err(e) = self.0.push_within_capacity(bufs) {
            leak(e.0);
        }
    }
}

/// Never frees `bufs`: the last resort for buffers that may be in use.
fn leak(bufs: Bufs) {
    pr_warn!("bench: leaking buffers that operations may still use\n");
    core::mem::forget(bufs);
}
