//! The slowest requests of a run (`--slowest N`): the N requests with the highest latency since
//! the mount (or the last reset), whatever that latency is, each described as the slow log
//! describes a request ([`super::slow`]: operation, latency, path, process, inner calls).
//!
//! `--slow TIME` keeps the newest requests over a threshold, which a user must guess before the
//! run; this keeps the slowest ones, which is what a report of the run wants to show.
//!
//! # How
//!
//! A bounded min-heap of the kept requests, behind a lock, and an atomic `floor`: 0 while fewer
//! than N are kept, then the latency of the fastest kept one. A request reads the floor without
//! a lock and goes on at once unless it is slower; only then is it described (its path and
//! process looked up) and the lock taken, where it replaces the fastest kept request if it is
//! still slower than it (another thread may have raised the floor meanwhile). So once N requests
//! are kept, a request pays one relaxed atomic load, and the lock is taken only by a request
//! slower than the N-th slowest so far: about `N · ln(total / N)` times in a run whose
//! latencies come in random order. Requests no caller waits for (`FORGET`, `RELEASE`,
//! `RELEASEDIR`: [`is_background`]) are never kept.
//!
//! Written as the profile's `slowest` section (`docs/format.md#sections`), slowest first, one record per line
//! in the slow log's JSON with every character outside printable ASCII as a `\uXXXX` escape
//! (a section line is printable ASCII): `# section=slowest n=N`.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use profile_store::{Extension, Section};

use super::paths::Paths;
use super::slow::Describer;
use crate::filesystem::Request;
use crate::filesystem::request::Span;
use crate::filesystem::trace::Trace;
use crate::protocol::ops::Op;

/// The section's name.
pub const SECTION: &str = profile_store::SLOWEST_SECTION;
/// Requests `fsprof profile` keeps by default.
pub const DEFAULT_N: usize = 50;
/// Most requests kept (each is a few hundred bytes, written into every profile).
pub const MAX_N: usize = 10_000;

/// Whether no caller waits for the reply to `op`: the kernel sends it in the background.
pub fn is_background(op: Op) -> bool {
    matches!(op, Op::Forget | Op::Release | Op::Releasedir)
}

/// One kept request: ordered by latency, then by number (of two equally slow, the older one
/// is the first to go).
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Kept {
    cycles: u64,
    seq: u64,
    line: String,
}

/// The N slowest requests of one mount.
pub struct Slowest {
    n: usize,
    /// The latency a request must exceed to be kept: 0 until N are kept, then the fastest
    /// kept one's.
    floor: AtomicU64,
    heap: Mutex<BinaryHeap<Reverse<Kept>>>,
    describer: Describer,
}

impl std::fmt::Debug for Slowest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slowest").field("n", &self.n).finish()
    }
}

impl Slowest {
    /// Keeps the `n` (at least 1) slowest requests; `paths` names their files.
    pub fn new(n: usize, paths: Option<Arc<dyn Paths>>) -> Slowest {
        let n = n.max(1);
        Slowest {
            n,
            floor: AtomicU64::new(0),
            heap: Mutex::new(BinaryHeap::with_capacity(n + 1)),
            describer: Describer::new(paths),
        }
    }

    /// Whether a request of `op` that took `cycles` may be among the slowest: one atomic load,
    /// no lock. Only then is [`Slowest::record`] called.
    #[inline]
    pub fn offers(&self, op: Op, cycles: u64) -> bool {
        cycles > self.floor.load(Ordering::Relaxed) && !is_background(op)
    }

    /// Keeps `req` (over `span`), which took `cycles`, answered `errno` (0 for success) and
    /// made the inner calls of `trace`, if it is slower than the fastest kept request; returns
    /// the path of the request's node when it was described ([`super::hot`] keeps it).
    #[cold]
    pub fn record(
        &self,
        req: &Request,
        span: Span<'_>,
        cycles: u64,
        errno: i32,
        trace: &Trace,
    ) -> Option<Vec<u8>> {
        let described = self.describer.describe(req, span, cycles, errno, trace);
        let node_path = described.node_path().map(<[u8]>::to_vec);
        let mut heap = self.heap.lock();
        if heap.len() >= self.n {
            match heap.peek() {
                // Another request raised the floor past this one meanwhile.
                Some(Reverse(min)) if cycles <= min.cycles => return node_path,
                _ => {
                    heap.pop();
                }
            }
        }
        let seq = self.describer.next_seq();
        heap.push(Reverse(Kept {
            cycles,
            seq,
            line: ascii(described.line(seq)),
        }));
        if heap.len() >= self.n {
            if let Some(Reverse(min)) = heap.peek() {
                self.floor.store(min.cycles, Ordering::Relaxed);
            }
        }
        node_path
    }

    /// The kept records, slowest first (ties: the older first).
    pub fn lines(&self) -> Vec<String> {
        let mut kept: Vec<(u64, u64, String)> = self
            .heap
            .lock()
            .iter()
            .map(|Reverse(k)| (k.cycles, k.seq, k.line.clone()))
            .collect();
        kept.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        kept.into_iter().map(|k| k.2).collect()
    }

    /// Requests kept.
    pub fn len(&self) -> usize {
        self.heap.lock().len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

pub use profile_store::json::ascii;

impl Extension for Slowest {
    fn sections(&self) -> Vec<Section> {
        let mut s = Section::new(SECTION);
        s.attrs = vec![("n".into(), self.n.to_string())];
        s.lines = self.lines();
        vec![s]
    }

    fn reset(&self) {
        let mut heap = self.heap.lock();
        heap.clear();
        self.floor.store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filesystem::Ino;

    fn keep(s: &Slowest, op: Op, cycles: u64) {
        let req = Request::new(op, 1, Ino(cycles), 4242, 0, 0);
        if s.offers(op, cycles) {
            s.record(&req, Span::default(), cycles, 0, &Trace::new());
        }
    }

    fn inos(s: &Slowest) -> Vec<u64> {
        s.lines()
            .iter()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["ino"]
                    .as_u64()
                    .unwrap()
            })
            .collect()
    }

    #[test]
    fn the_n_slowest_are_kept_whatever_their_order() {
        let s = Slowest::new(3, None);
        // 1..=1000 shuffled (i · 7 mod 1000 is a permutation: 7 is prime to 1000), so the
        // slowest come early, late and in between.
        for i in 0..1000u64 {
            keep(&s, Op::Read, (i * 7) % 1000 + 1);
        }
        assert_eq!(inos(&s), [1000, 999, 998]);
        // The floor is the third slowest: a faster request does not even take the lock.
        assert!(!s.offers(Op::Read, 998));
        assert!(s.offers(Op::Read, 999));
        // Fewer requests than N: all of them.
        let t = Slowest::new(5, None);
        keep(&t, Op::Read, 10);
        keep(&t, Op::Write, 3);
        assert_eq!(inos(&t), [10, 3]);
        assert!(t.offers(Op::Read, 1));
    }

    #[test]
    fn background_requests_are_never_kept_and_reset_empties() {
        let s = Slowest::new(2, None);
        keep(&s, Op::Forget, 1_000_000);
        keep(&s, Op::Release, 1_000_000);
        keep(&s, Op::Releasedir, 1_000_000);
        keep(&s, Op::Fsync, 5);
        assert_eq!(inos(&s), [5]);
        let sec = &s.sections()[0];
        assert_eq!((sec.name.as_str(), sec.attr("n")), ("slowest", Some("2")));
        s.reset();
        assert!(s.is_empty());
        assert!(s.offers(Op::Read, 1));
    }

    #[test]
    fn concurrent_requests_keep_exactly_the_slowest() {
        let s = Arc::new(Slowest::new(10, None));
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let s = s.clone();
                std::thread::spawn(move || {
                    for i in 0..2000u64 {
                        keep(&s, Op::Read, i * 4 + t + 1);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let want: Vec<u64> = (7991..=8000).rev().collect();
        assert_eq!(inos(&s), want);
    }

    #[test]
    fn lines_are_printable_ascii_and_the_same_json() {
        let raw = r#"{"path":"/caf\u00e9 ☕ 𝄞","x":"a\u007fb"}"#;
        let v: serde_json::Value = serde_json::from_str(raw).unwrap();
        let line = ascii(serde_json::to_string(&v).unwrap());
        assert!(line.bytes().all(|b| (0x20..0x7f).contains(&b)), "{line}");
        assert_eq!(serde_json::from_str::<serde_json::Value>(&line).unwrap(), v);
        assert!(Section::is_valid_line(&line));
    }
}
