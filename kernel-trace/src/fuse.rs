//! The `kernel` layer's pairing: `fuse:fuse_request_send` with `fuse:fuse_request_end` by the
//! request's `unique` (the end carries no opcode), and the FUSE opcodes' profile names.
//!
//! Pairing is independent of the order records are read in: each CPU has its own ring, and a
//! request sent on one CPU may end on another, so an end read before its send waits for it
//! ([`FusePairs::end`]). An end whose send has not turned up after two drains never will (the
//! send was lost, or came before tracing started): it is counted as unpaired, never put in a
//! bucket. A reset makes every request in flight stale: it ends uncounted, as the daemon's
//! `fuse` layer does with a call in flight across a reset.

use std::collections::HashMap;

/// The profile name of FUSE opcode `op` (`OP_` + the daemon's name for it: `SETLKW` counts as
/// `OP_SETLK`, `RENAME2` as `OP_RENAME`, `BATCH_FORGET` as `OP_FORGET`), or `None` for the
/// requests no file system serves (`INIT`, `DESTROY`, `INTERRUPT`, `NOTIFY_REPLY`, ...).
pub fn op_name(op: u32) -> Option<&'static str> {
    Some(match op {
        1 => "OP_LOOKUP",
        2 | 42 => "OP_FORGET",
        3 => "OP_GETATTR",
        4 => "OP_SETATTR",
        5 => "OP_READLINK",
        6 => "OP_SYMLINK",
        8 => "OP_MKNOD",
        9 => "OP_MKDIR",
        10 => "OP_UNLINK",
        11 => "OP_RMDIR",
        12 | 45 => "OP_RENAME",
        13 => "OP_LINK",
        14 => "OP_OPEN",
        15 => "OP_READ",
        16 => "OP_WRITE",
        17 => "OP_STATFS",
        18 => "OP_RELEASE",
        20 => "OP_FSYNC",
        21 => "OP_SETXATTR",
        22 => "OP_GETXATTR",
        23 => "OP_LISTXATTR",
        24 => "OP_REMOVEXATTR",
        25 => "OP_FLUSH",
        27 => "OP_OPENDIR",
        28 => "OP_READDIR",
        29 => "OP_RELEASEDIR",
        30 => "OP_FSYNCDIR",
        31 => "OP_GETLK",
        32 | 33 => "OP_SETLK",
        34 => "OP_ACCESS",
        35 => "OP_CREATE",
        37 => "OP_BMAP",
        39 => "OP_IOCTL",
        40 => "OP_POLL",
        43 => "OP_FALLOCATE",
        44 => "OP_READDIRPLUS",
        46 => "OP_LSEEK",
        47 => "OP_COPY_FILE_RANGE",
        50 => "OP_SYNCFS",
        51 => "OP_TMPFILE",
        52 => "OP_STATX",
        _ => return None,
    })
}

/// A request that ended, timed from its send to its end (nanoseconds of the trace clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Done {
    /// The request's `unique`.
    pub unique: u64,
    /// Its index in the layer's operation table.
    pub op: usize,
    /// Send time.
    pub start: u64,
    /// End time.
    pub end: u64,
    /// The error the daemon answered (negative errno), 0 for success.
    pub error: i32,
}

#[derive(Debug, Clone, Copy)]
struct Sent {
    /// `None`: a request no file system serves (its end is dropped).
    op: Option<usize>,
    t: u64,
    stale: bool,
}

#[derive(Debug, Clone, Copy)]
struct Early {
    t: u64,
    error: i32,
    drains: u8,
    stale: bool,
}

/// Counts of what could not be put in a bucket, shown in the profile.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FuseCounts {
    /// Ends whose send never turned up.
    pub unpaired: u64,
    /// Sends dropped while more than [`MAX_IN_FLIGHT`] requests were waiting for their end.
    pub unended: u64,
    /// Sends of requests no file system serves (`INIT`, `INTERRUPT`...), not timed.
    pub untimed: u64,
}

/// Most requests kept waiting for their end; past it the oldest quarter is dropped (counted).
pub const MAX_IN_FLIGHT: usize = 1 << 16;

/// Sends waiting for their ends and ends waiting for their sends, by `unique`.
pub struct FusePairs {
    /// Operation table index of each opcode (`None`: not timed).
    table: Vec<Option<usize>>,
    sent: HashMap<u64, Sent>,
    early: HashMap<u64, Early>,
    /// What could not be paired.
    pub counts: FuseCounts,
}

impl FusePairs {
    /// Pairs requests whose operation names are looked up in `ops` (the layer's table).
    pub fn new(ops: &[&str]) -> FusePairs {
        let table = (0..64u32)
            .map(|op| op_name(op).and_then(|n| ops.iter().position(|o| *o == n)))
            .collect();
        FusePairs {
            table,
            sent: HashMap::new(),
            early: HashMap::new(),
            counts: FuseCounts::default(),
        }
    }

    /// A request `unique` of opcode `opcode` was sent at `t`; returns it if its end came
    /// first.
    pub fn send(&mut self, unique: u64, opcode: u32, t: u64) -> Option<Done> {
        let op = self.table.get(opcode as usize).copied().flatten();
        if op.is_none() {
            self.counts.untimed += 1;
        }
        if let Some(e) = self.early.remove(&unique) {
            let op = op?;
            return (!e.stale).then_some(Done {
                unique,
                op,
                start: t,
                end: e.t.max(t),
                error: e.error,
            });
        }
        if self.sent.len() >= MAX_IN_FLIGHT {
            self.evict();
        }
        self.sent.insert(
            unique,
            Sent {
                op,
                t,
                stale: false,
            },
        );
        None
    }

    /// Request `unique` ended at `t` with `error`; returns it if its send was seen.
    pub fn end(&mut self, unique: u64, t: u64, error: i32) -> Option<Done> {
        match self.sent.remove(&unique) {
            Some(s) => (!s.stale).then_some(Done {
                unique,
                op: s.op?,
                start: s.t,
                end: t.max(s.t),
                error,
            }),
            None => {
                self.early.insert(
                    unique,
                    Early {
                        t,
                        error,
                        drains: 0,
                        stale: false,
                    },
                );
                None
            }
        }
    }

    /// Called after each drain of every ring: an end that waited two drains for its send is
    /// unpaired.
    pub fn drained(&mut self) {
        let before = self.early.len();
        let mut stale_gone = 0;
        self.early.retain(|_, e| {
            e.drains += 1;
            if e.drains >= 2 && e.stale {
                stale_gone += 1;
            }
            e.drains < 2
        });
        self.counts.unpaired += (before - self.early.len() - stale_gone) as u64;
    }

    /// The profile was reset: requests in flight end uncounted.
    pub fn reset(&mut self) {
        for s in self.sent.values_mut() {
            s.stale = true;
        }
        for e in self.early.values_mut() {
            e.stale = true;
        }
        self.counts = FuseCounts::default();
    }

    /// Requests waiting for their end.
    pub fn in_flight(&self) -> usize {
        self.sent.len()
    }

    fn evict(&mut self) {
        let mut ts: Vec<u64> = self.sent.values().map(|s| s.t).collect();
        let q = ts.len() / 4;
        let (_, cut, _) = ts.select_nth_unstable(q);
        let cut = *cut;
        let before = self.sent.len();
        self.sent.retain(|_, s| s.t > cut);
        self.counts.unended += (before - self.sent.len()) as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPS: &[&str] = &["OP_LOOKUP", "OP_READ", "OP_SETLK", "OP_RENAME"];

    #[test]
    fn opcodes_map_to_the_daemons_names() {
        let p = FusePairs::new(OPS);
        assert_eq!(p.table[1], Some(0));
        assert_eq!(p.table[15], Some(1));
        assert_eq!(p.table[33], Some(2), "SETLKW counts as OP_SETLK");
        assert_eq!(p.table[45], Some(3), "RENAME2 counts as OP_RENAME");
        assert_eq!(p.table[26], None, "INIT is not timed");
        assert_eq!(op_name(36), None, "INTERRUPT");
    }

    #[test]
    fn pairs_by_unique_in_either_order() {
        let mut p = FusePairs::new(OPS);
        assert_eq!(p.send(10, 15, 100), None);
        assert_eq!(p.send(12, 1, 105), None);
        let d = p.end(12, 150, -2).unwrap();
        assert_eq!((d.op, d.start, d.end, d.error), (0, 105, 150, -2));
        // An end read before its send (another CPU's ring).
        assert_eq!(p.end(14, 300, 0), None);
        let d = p.send(14, 15, 200).unwrap();
        assert_eq!((d.op, d.start, d.end), (1, 200, 300));
        let d = p.end(10, 400, 0).unwrap();
        assert_eq!((d.unique, d.end - d.start), (10, 300));
        p.drained();
        assert_eq!(p.counts, FuseCounts::default());
        assert_eq!(p.in_flight(), 0);
    }

    #[test]
    fn an_end_without_its_send_is_unpaired_after_two_drains() {
        let mut p = FusePairs::new(OPS);
        assert_eq!(p.end(8, 100, 0), None);
        p.drained();
        assert_eq!(p.counts.unpaired, 0);
        p.drained();
        assert_eq!(p.counts.unpaired, 1);
        // Its send arriving later pairs nothing.
        assert_eq!(p.send(8, 15, 50), None);
        assert_eq!(p.in_flight(), 1);
    }

    #[test]
    fn requests_in_flight_at_a_reset_end_uncounted() {
        let mut p = FusePairs::new(OPS);
        p.send(2, 15, 10);
        p.end(4, 30, 0);
        p.reset();
        assert_eq!(p.end(2, 20, 0), None);
        assert_eq!(p.send(4, 15, 25), None);
        p.drained();
        p.drained();
        assert_eq!(p.counts, FuseCounts::default());
        // INIT: not timed, and its end is not unpaired.
        assert_eq!(p.send(6, 26, 1), None);
        assert_eq!(p.end(6, 2, 0), None);
        p.drained();
        p.drained();
        assert_eq!((p.counts.untimed, p.counts.unpaired), (1, 0));
    }

    #[test]
    fn in_flight_is_bounded() {
        let mut p = FusePairs::new(OPS);
        for u in 0..(MAX_IN_FLIGHT as u64 + 10) {
            p.send(u, 15, u);
        }
        assert!(p.in_flight() <= MAX_IN_FLIGHT);
        assert!(p.counts.unended >= (MAX_IN_FLIGHT / 4) as u64);
        // The newest are kept.
        assert!(p.end(MAX_IN_FLIGHT as u64 + 9, u64::MAX, 0).is_some());
    }
}
