//! The inner-call breakdown behind `fsprof why` (DARC for layers): for each FUSE operation,
//! which lower or branch calls its requests made, keyed by the latency bucket the outer request
//! landed in: outer bucket → inner call → inner-bucket counts and cycles.
//!
//! The table is fixed arrays, allocated once per operation the first time it is seen (zeroed
//! pages from the system, which the kernel fills in as they are first written: no table is
//! written out up front), and always after the request's end has been read, so that building
//! it is never part of a latency; a request adds to it with relaxed atomic additions and
//! allocates nothing. Every inner call a request made counts ([`Trace::sums`]). Each outer bucket
//! has [`SLOTS`] inner-call slots, taken by the first calls seen there; the time of calls
//! beyond them is counted as `other` (never silently lost). Inner buckets are at resolution 1.
//!
//! Written as the `inner_calls` section (`docs/format.md#inner-call-breakdown`), whose grammar
//! is [`profile_store::inner`]'s.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use profile_store::bucket::BucketMap;
use profile_store::inner::{InnerCalls, OuterRow, Row};
use profile_store::{Extension, Resolution, Section};
use zerocopy::FromZeros;

use crate::filesystem::trace::{CallId, Trace};
use crate::protocol::ops::NAMES;

/// Inner-call slots per outer bucket: as many as the kinds of call the requests of one bucket
/// of a two-branch RAIF volume make on both (a truncation's `openat`, `statx`, `ftruncate`,
/// `fgetxattr`, `fsetxattr`, `close` and the intent log's `pwrite` and `fdatasync` on each, and
/// a `chmod`'s in the same bucket), with room to spare. Only the slots a request reaches are
/// touched: an outer bucket is 17 KiB.
pub const SLOTS: usize = 32;
/// Inner buckets per slot (resolution 1).
const INNER: usize = 64;

#[derive(FromZeros)]
struct Slot {
    /// `CallId + 1`; 0 while free.
    call: AtomicU32,
    count: AtomicU64,
    cycles: AtomicU64,
    buckets: [AtomicU64; INNER],
}

#[derive(FromZeros)]
struct Outer {
    count: AtomicU64,
    cycles: AtomicU64,
    /// Cycles of inner calls that found no free slot.
    other_cycles: AtomicU64,
    slots: [Slot; SLOTS],
}

/// `n` outer buckets, zeroed: a zeroed allocation, whose pages the kernel provides as they are
/// touched (a table is some hundreds of KiB, of which a request touches one outer bucket).
fn zeroed_table(n: usize) -> Box<[Outer]> {
    <[Outer]>::new_box_zeroed_with_elems(n).unwrap_or_else(|_| {
        std::alloc::handle_alloc_error(std::alloc::Layout::array::<Outer>(n).expect("small"))
    })
}

/// The breakdown of one mount's `fuse` layer (see the module documentation).
pub struct Breakdown {
    map: BucketMap,
    resolution: Resolution,
    buckets: usize,
    ops: Box<[OnceLock<Box<[Outer]>>]>,
}

impl std::fmt::Debug for Breakdown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Breakdown")
            .field("resolution", &self.resolution)
            .finish()
    }
}

#[inline]
fn add(c: &AtomicU64, by: u64) {
    c.fetch_add(by, Ordering::Relaxed);
}

impl Breakdown {
    /// A breakdown whose outer buckets are those of the `fuse` layer at `resolution`.
    pub fn new(resolution: Resolution) -> Breakdown {
        Breakdown {
            map: BucketMap::new(resolution),
            resolution,
            buckets: 64 * resolution.get() as usize,
            ops: (0..NAMES.len()).map(|_| OnceLock::new()).collect(),
        }
    }

    /// Adds a request of operation `op` that took `cycles`, with every inner call of `trace`.
    #[inline]
    pub fn record(&self, op: usize, cycles: u64, trace: &Trace) {
        let table = self.ops[op].get_or_init(|| zeroed_table(self.buckets));
        let outer = &table[self.map.bucket(cycles)];
        add(&outer.count, 1);
        add(&outer.cycles, cycles);
        for c in trace.sums() {
            match Self::slot(outer, c.call) {
                Some(s) => {
                    add(&s.count, c.count as u64);
                    add(&s.cycles, c.cycles);
                    add(&s.buckets[c.bucket as usize], c.count as u64);
                }
                None => add(&outer.other_cycles, c.cycles),
            }
        }
        if trace.other_cycles() > 0 {
            add(&outer.other_cycles, trace.other_cycles());
        }
    }

    /// The slot of `call` in `outer`, taking a free one if it has none.
    #[inline]
    fn slot(outer: &Outer, call: CallId) -> Option<&Slot> {
        let want = call.0 as u32 + 1;
        for s in &outer.slots {
            match s.call.load(Ordering::Acquire) {
                v if v == want => return Some(s),
                0 => match s
                    .call
                    .compare_exchange(0, want, Ordering::AcqRel, Ordering::Acquire)
                {
                    Ok(_) => return Some(s),
                    Err(v) if v == want => return Some(s),
                    Err(_) => continue,
                },
                _ => continue,
            }
        }
        None
    }

    /// The current numbers.
    pub fn snapshot(&self) -> InnerCalls {
        let mut out = InnerCalls {
            layer: "fuse".into(),
            resolution: self.resolution,
            rows: Vec::new(),
        };
        for (op, table) in self.ops.iter().enumerate() {
            let Some(table) = table.get() else { continue };
            for (b, o) in table.iter().enumerate() {
                let count = o.count.load(Ordering::Relaxed);
                if count == 0 {
                    continue;
                }
                let mut calls = Vec::new();
                for s in &o.slots {
                    let id = s.call.load(Ordering::Acquire);
                    let n = s.count.load(Ordering::Relaxed);
                    if id == 0 || n == 0 {
                        continue;
                    }
                    calls.push(Row {
                        call: CallId(id as u16 - 1).name(),
                        count: n,
                        cycles: s.cycles.load(Ordering::Relaxed),
                        buckets: s
                            .buckets
                            .iter()
                            .enumerate()
                            .filter_map(|(i, c)| {
                                let c = c.load(Ordering::Relaxed);
                                (c > 0).then_some((i, c))
                            })
                            .collect(),
                    });
                }
                out.rows.push(OuterRow {
                    op: NAMES[op].to_string(),
                    bucket: b,
                    count,
                    cycles: o.cycles.load(Ordering::Relaxed),
                    other_cycles: o.other_cycles.load(Ordering::Relaxed),
                    calls,
                });
            }
        }
        out
    }
}

impl Extension for Breakdown {
    fn sections(&self) -> Vec<Section> {
        vec![self.snapshot().to_section()]
    }

    fn reset(&self) {
        for table in self.ops.iter().filter_map(OnceLock::get) {
            for o in table.iter() {
                o.count.store(0, Ordering::Relaxed);
                o.cycles.store(0, Ordering::Relaxed);
                o.other_cycles.store(0, Ordering::Relaxed);
                for s in &o.slots {
                    s.count.store(0, Ordering::Relaxed);
                    s.cycles.store(0, Ordering::Relaxed);
                    for b in &s.buckets {
                        b.store(0, Ordering::Relaxed);
                    }
                    s.call.store(0, Ordering::Release);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ops::{Op, Sys};

    #[test]
    fn requests_land_by_outer_bucket_with_their_inner_calls() {
        let b = Breakdown::new(Resolution::ONE);
        let t = Trace::new();
        t.push(CallId::new(None, Sys::Pread), 1000);
        t.push(CallId::new(None, Sys::Pread), 24);
        b.record(Op::Read.id(), 1100, &t);
        b.record(Op::Read.id(), 1200, &Trace::new());
        let s = b.snapshot();
        assert_eq!(s.rows.len(), 1);
        let r = &s.rows[0];
        assert_eq!(
            (r.op.as_str(), r.bucket, r.count, r.cycles),
            ("OP_READ", 10, 2, 2300)
        );
        assert_eq!(r.calls.len(), 1);
        assert_eq!(r.calls[0].call, "pread");
        assert_eq!((r.calls[0].count, r.calls[0].cycles), (2, 1024));
        assert_eq!(r.calls[0].buckets, [(4, 1), (9, 1)]);
        b.reset();
        assert!(b.snapshot().rows.is_empty());
    }

    #[test]
    fn every_inner_call_counts_not_only_those_a_slow_record_keeps() {
        // A cold listing: hundreds of opens and handle lookups in one request.
        let b = Breakdown::new(Resolution::ONE);
        let t = Trace::new();
        for _ in 0..576 {
            t.push(CallId::new(None, Sys::Openat), 5000);
            t.push(CallId::new(None, Sys::NameToHandleAt), 1500);
        }
        b.record(Op::Readdirplus.id(), 4_000_000, &t);
        let s = b.snapshot();
        let calls: Vec<(&str, u64, u64)> = s.rows[0]
            .calls
            .iter()
            .map(|c| (c.call.as_str(), c.count, c.cycles))
            .collect();
        assert_eq!(
            calls,
            [
                ("openat", 576, 576 * 5000),
                ("name_to_handle_at", 576, 576 * 1500)
            ]
        );
        assert_eq!(s.rows[0].calls[0].buckets, [(12, 576)]);
    }

    #[test]
    fn calls_beyond_the_slots_count_as_other() {
        let b = Breakdown::new(Resolution::ONE);
        // Two requests in one outer bucket (a trace keeps fewer kinds of call than the slots).
        for calls in Sys::ALL[..SLOTS + 2].chunks(SLOTS / 2 + 1) {
            let t = Trace::new();
            for s in calls {
                t.push(CallId::new(None, *s), 10);
            }
            b.record(Op::Lookup.id(), 500, &t);
        }
        let s = b.snapshot();
        assert_eq!(s.rows[0].calls.len(), SLOTS);
        assert_eq!(s.rows[0].other_cycles, 20);
    }
}
