//! The `block@dev:NAME` layers' pairing: `block:block_rq_issue` with `block:block_rq_complete`
//! by device and sector, and the requests' operation names (`BLK_READ`, `BLK_WRITE_SYNC`...).
//!
//! Tracepoint records carry no request pointer, so a completion is matched with the issue of
//! the same device and start sector. Where that is not enough, nothing is guessed:
//! * two requests outstanding at one sector at once (concurrent FLUSHes, which all sit at
//!   sector 0, or two direct reads of one block) make the key ambiguous: every completion at
//!   it is counted as `ambiguous` until none is outstanding, and none goes into a bucket;
//! * a partial completion (fewer sectors than issued: the rest is still in flight, at a
//!   later sector) is counted as `partial` and the request waits on at its new sector; its
//!   final completion is timed from the issue;
//! * a completion read before its issue (another CPU's ring) waits two drains for it, then is
//!   counted as `unpaired`, as is one whose issue was lost or came before tracing started.
//!
//! Completions with an error are timed like the others and also counted per operation and
//! errno.

use std::collections::HashMap;

/// Base operations, in the order of the operation table ([`op_names`]).
const BASES: [&str; 7] = [
    "READ",
    "WRITE",
    "FLUSH",
    "DISCARD",
    "WRITE_ZEROES",
    "SECURE_ERASE",
    "OTHER",
];
/// Suffixes, in table order: index `base * 4 + sync + 2 * meta`.
const SUFFIXES: [&str; 4] = ["", "_SYNC", "_META", "_SYNC_META"];

/// Every operation name of a block layer, in table order.
pub fn op_names() -> Vec<String> {
    BASES
        .iter()
        .flat_map(|b| SUFFIXES.iter().map(move |s| format!("BLK_{b}{s}")))
        .collect()
}

/// The operation-table index of a request from its `rwbs` field (as `blk_fill_rwbs` writes
/// it: an `F` for a preflush, the operation `R`, `W`, `D`, `DE`, `F`, `WZ`/`Z`, `N`..., then
/// `F` (FUA), `A` (readahead), `S` (sync), `M` (meta)...).
pub fn op_of(rwbs: &[u8]) -> usize {
    let s: &[u8] = match rwbs.iter().position(|&b| b == 0) {
        Some(n) => &rwbs[..n],
        None => rwbs,
    };
    // A leading F is a preflush when an operation letter follows it.
    let s = match s {
        [b'F', next, ..] if b"RWDFNZ".contains(next) => &s[1..],
        _ => s,
    };
    let (base, rest) = match s {
        [b'W', b'Z', rest @ ..] => (4, rest),
        [b'D', b'E', rest @ ..] => (5, rest),
        [b'R', rest @ ..] => (0, rest),
        [b'W', rest @ ..] => (1, rest),
        [b'F', rest @ ..] => (2, rest),
        [b'D', rest @ ..] => (3, rest),
        [b'Z', rest @ ..] => (4, rest),
        [_, rest @ ..] => (6, rest),
        [] => (6, &[][..]),
    };
    let sync = rest.contains(&b'S') as usize;
    let meta = rest.contains(&b'M') as usize;
    base * 4 + sync + 2 * meta
}

/// A request that completed, timed from issue to completion (nanoseconds of the trace clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Done {
    /// Index of its device in the pairer's device list.
    pub device: usize,
    /// Operation-table index ([`op_of`]).
    pub op: usize,
    /// Issue time.
    pub start: u64,
    /// Completion time.
    pub end: u64,
    /// Negative errno, 0 for success.
    pub error: i32,
}

#[derive(Debug, Clone, Copy)]
struct Issued {
    op: usize,
    t: u64,
    sectors: u32,
    /// Requests outstanding at this key; above 1 the key is ambiguous until it drains.
    outstanding: u32,
    ambiguous: bool,
    stale: bool,
}

#[derive(Debug, Clone, Copy)]
struct Early {
    t: u64,
    sectors: u32,
    error: i32,
    drains: u8,
}

/// What could not be put in a bucket, per device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BlockCounts {
    /// Completions whose issue never turned up.
    pub unpaired: u64,
    /// Partial completions (the request went on).
    pub partial: u64,
    /// Completions at a key where more than one request was outstanding.
    pub ambiguous: u64,
    /// Completions with an error (also in their buckets).
    pub errors: u64,
    /// Issues dropped while more than [`MAX_OUTSTANDING`] waited (the oldest quarter).
    pub uncompleted: u64,
}

/// Most requests kept waiting for their completion per device.
pub const MAX_OUTSTANDING: usize = 1 << 16;

struct Device {
    issued: HashMap<u64, Issued>,
    early: HashMap<u64, Early>,
    counts: BlockCounts,
}

/// Issues waiting for completions, per device (by its kernel `dev` number) and sector.
pub struct BlockPairs {
    devs: Vec<u32>,
    state: Vec<Device>,
    /// Completions that will never be read ([`BlockPairs::unsampled`]) whose issue may still
    /// be waiting.
    orphans: u64,
}

impl BlockPairs {
    /// Pairs the requests of the devices whose kernel-encoded numbers are `devs`.
    pub fn new(devs: &[u32]) -> BlockPairs {
        BlockPairs {
            devs: devs.to_vec(),
            state: devs
                .iter()
                .map(|_| Device {
                    issued: HashMap::new(),
                    early: HashMap::new(),
                    counts: BlockCounts::default(),
                })
                .collect(),
            orphans: 0,
        }
    }

    /// `n` more completions will never be read (the kernel lost them in a full ring, or
    /// counted them and never wrote them: `crate::accounting`): their issues wait in vain.
    /// The next issues that meet a waiting one at its sector take its place instead of making
    /// the sector ambiguous, as many times.
    pub fn unsampled(&mut self, n: u64) {
        self.orphans += n;
    }

    /// The counts of device `i`.
    pub fn counts(&self, i: usize) -> BlockCounts {
        self.state[i].counts
    }

    fn index(&self, dev: u32) -> Option<usize> {
        self.devs.iter().position(|&d| d == dev)
    }

    /// A request was issued to the device.
    pub fn issue(
        &mut self,
        dev: u32,
        sector: u64,
        sectors: u32,
        op: usize,
        t: u64,
    ) -> Option<Done> {
        let i = self.index(dev)?;
        let d = &mut self.state[i];
        if let Some(e) = d.early.get(&sector).copied() {
            if e.t >= t {
                d.early.remove(&sector);
                let mut done = Done {
                    device: i,
                    op,
                    start: t,
                    end: e.t,
                    error: e.error,
                };
                if e.sectors != 0 && e.sectors < sectors {
                    // Completed in part before we saw the issue: the rest waits on.
                    d.counts.partial += 1;
                    Self::insert(d, sector + e.sectors as u64, sectors - e.sectors, op, t);
                    return None;
                }
                if e.error != 0 {
                    d.counts.errors += 1;
                }
                done.end = e.t;
                return Some(done);
            }
        }
        if self.orphans > 0 {
            if let Some(x) = d.issued.get(&sector) {
                if !x.ambiguous {
                    // The waiting issue's completion was one of those never written.
                    self.orphans -= 1;
                    d.issued.remove(&sector);
                }
            }
        }
        Self::insert(d, sector, sectors, op, t);
        None
    }

    fn insert(d: &mut Device, sector: u64, sectors: u32, op: usize, t: u64) {
        if let Some(x) = d.issued.get_mut(&sector) {
            x.outstanding += 1;
            x.ambiguous = true;
            return;
        }
        if d.issued.len() >= MAX_OUTSTANDING {
            let mut ts: Vec<u64> = d.issued.values().map(|s| s.t).collect();
            let q = ts.len() / 4;
            let cut = *ts.select_nth_unstable(q).1;
            let before = d.issued.len();
            d.issued.retain(|_, s| s.t > cut);
            d.counts.uncompleted += (before - d.issued.len()) as u64;
        }
        d.issued.insert(
            sector,
            Issued {
                op,
                t,
                sectors,
                outstanding: 1,
                ambiguous: false,
                stale: false,
            },
        );
    }

    /// A request of the device completed `sectors` sectors from `sector` (0 for a flush).
    pub fn complete(
        &mut self,
        dev: u32,
        sector: u64,
        sectors: u32,
        error: i32,
        t: u64,
    ) -> Option<Done> {
        let i = self.index(dev)?;
        let d = &mut self.state[i];
        let Some(mut x) = d.issued.remove(&sector) else {
            d.early.insert(
                sector,
                Early {
                    t,
                    sectors,
                    error,
                    drains: 0,
                },
            );
            return None;
        };
        if x.ambiguous {
            if !x.stale {
                d.counts.ambiguous += 1;
            }
            x.outstanding -= 1;
            if x.outstanding > 0 {
                d.issued.insert(sector, x);
            }
            return None;
        }
        if sectors != 0 && sectors < x.sectors {
            if !x.stale {
                d.counts.partial += 1;
            }
            let (next, rest) = (sector + sectors as u64, x.sectors - sectors);
            Self::insert(d, next, rest, x.op, x.t);
            if x.stale {
                if let Some(n) = d.issued.get_mut(&next) {
                    n.stale = true;
                }
            }
            return None;
        }
        if x.stale {
            return None;
        }
        if error != 0 {
            d.counts.errors += 1;
        }
        Some(Done {
            device: i,
            op: x.op,
            start: x.t,
            end: t.max(x.t),
            error,
        })
    }

    /// Called after each drain of every ring: completions that waited two drains for their
    /// issue are unpaired.
    pub fn drained(&mut self) {
        for d in &mut self.state {
            let before = d.early.len();
            d.early.retain(|_, e| {
                e.drains += 1;
                e.drains < 2
            });
            d.counts.unpaired += (before - d.early.len()) as u64;
        }
    }

    /// The profile was reset: requests outstanding complete uncounted; counts restart.
    pub fn reset(&mut self) {
        for d in &mut self.state {
            for x in d.issued.values_mut() {
                x.stale = true;
            }
            d.early.clear();
            d.counts = BlockCounts::default();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(rwbs: &str) -> String {
        op_names()[op_of(rwbs.as_bytes())].clone()
    }

    #[test]
    fn rwbs_names() {
        assert_eq!(name("R"), "BLK_READ");
        assert_eq!(name("RS"), "BLK_READ_SYNC");
        assert_eq!(name("RM"), "BLK_READ_META");
        assert_eq!(name("RSM"), "BLK_READ_SYNC_META");
        assert_eq!(name("RA"), "BLK_READ");
        assert_eq!(name("WS"), "BLK_WRITE_SYNC");
        assert_eq!(name("FWS"), "BLK_WRITE_SYNC");
        assert_eq!(name("WFS"), "BLK_WRITE_SYNC");
        assert_eq!(name("FF"), "BLK_FLUSH");
        assert_eq!(name("F"), "BLK_FLUSH");
        assert_eq!(name("D"), "BLK_DISCARD");
        assert_eq!(name("DE"), "BLK_SECURE_ERASE");
        assert_eq!(name("WZ"), "BLK_WRITE_ZEROES");
        assert_eq!(name("N"), "BLK_OTHER");
        assert_eq!(op_of(b"RS\0\0\0\0\0\0\0\0"), op_of(b"RS"));
        for n in op_names() {
            assert!(profile_store::ops::is_valid_name(&n), "{n}");
        }
    }

    const LOOP: u32 = 7 << 20;

    #[test]
    fn issue_and_completion_pair_by_device_and_sector() {
        let mut p = BlockPairs::new(&[LOOP, 8 << 20]);
        assert_eq!(p.issue(LOOP, 100, 8, 0, 10), None);
        assert_eq!(p.issue(8 << 20, 100, 8, 4, 12), None);
        assert_eq!(p.issue(9 << 20, 100, 8, 4, 12), None, "not ours");
        let d = p.complete(LOOP, 100, 8, 0, 50).unwrap();
        assert_eq!((d.device, d.op, d.start, d.end), (0, 0, 10, 50));
        let d = p.complete(8 << 20, 100, 8, -5, 60).unwrap();
        assert_eq!((d.device, d.error), (1, -5));
        assert_eq!(p.counts(1).errors, 1);
        // Completion read before its issue.
        assert_eq!(p.complete(LOOP, 7, 8, 0, 90), None);
        let d = p.issue(LOOP, 7, 8, 0, 80).unwrap();
        assert_eq!((d.start, d.end), (80, 90));
        p.drained();
        p.drained();
        assert_eq!(p.counts(0), BlockCounts::default());
    }

    #[test]
    fn concurrent_flushes_are_ambiguous_not_bucketed() {
        let mut p = BlockPairs::new(&[LOOP]);
        let flush = op_of(b"FF");
        p.issue(LOOP, 0, 0, flush, 10);
        p.issue(LOOP, 0, 0, flush, 11);
        assert_eq!(p.complete(LOOP, 0, 0, 0, 20), None);
        assert_eq!(p.complete(LOOP, 0, 0, 0, 21), None);
        assert_eq!(p.counts(0).ambiguous, 2);
        // The key is free again: the next flush pairs.
        p.issue(LOOP, 0, 0, flush, 30);
        assert!(p.complete(LOOP, 0, 0, 0, 40).is_some());
    }

    #[test]
    fn an_unsampled_completion_does_not_make_its_sector_ambiguous() {
        let mut p = BlockPairs::new(&[LOOP]);
        p.issue(LOOP, 8, 8, 0, 10);
        // Its completion was never written.
        p.unsampled(1);
        p.issue(LOOP, 8, 8, 0, 30);
        let d = p.complete(LOOP, 8, 8, 0, 40).unwrap();
        assert_eq!((d.start, d.end), (30, 40));
        assert_eq!(p.counts(0).ambiguous, 0);
        // Without such a completion, a second issue at a waiting sector is ambiguous.
        p.issue(LOOP, 16, 8, 0, 50);
        p.issue(LOOP, 16, 8, 0, 51);
        assert_eq!(p.complete(LOOP, 16, 8, 0, 60), None);
        assert_eq!(p.counts(0).ambiguous, 1);
    }

    #[test]
    fn partial_completions_wait_on_at_the_next_sector() {
        let mut p = BlockPairs::new(&[LOOP]);
        p.issue(LOOP, 1000, 16, 1, 5);
        assert_eq!(p.complete(LOOP, 1000, 8, 0, 20), None);
        assert_eq!(p.counts(0).partial, 1);
        let d = p.complete(LOOP, 1008, 8, 0, 30).unwrap();
        assert_eq!((d.start, d.end, d.op), (5, 30, 1));
    }

    #[test]
    fn completions_without_issue_become_unpaired_and_resets_drop_in_flight() {
        let mut p = BlockPairs::new(&[LOOP]);
        p.complete(LOOP, 64, 8, 0, 5);
        p.drained();
        p.drained();
        assert_eq!(p.counts(0).unpaired, 1);
        p.issue(LOOP, 128, 8, 0, 10);
        p.reset();
        assert_eq!(p.counts(0), BlockCounts::default());
        assert_eq!(p.complete(LOOP, 128, 8, 0, 20), None);
        assert_eq!(p.counts(0), BlockCounts::default());
    }
}
