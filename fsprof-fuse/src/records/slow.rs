//! The slow-operation log (`--slow`): every request slower than a threshold, with who made it,
//! on which file, and what it did inside (the lower or branch calls and their latencies), like
//! ext4slower, in a bounded ring read at `MNT/.fsprof.slow` as JSON lines
//! (`docs/format.md#slow-log`) and optionally appended to a file.
//!
//! Fields of a record: `seq` (a number that grows by one per record since the mount, so a
//! follower can tell new records from old), `time_unix_ns` (when the request ended), `op`,
//! `latency_ns`, `errno` (0 for success), `ino`, `path` (the node's path in the mount as the
//! daemon last knew it, or null when it does not know it any more; for a request on a name
//! in a directory, such as a lookup, create, mkdir, unlink or rename, the directory's path and
//! that name), `pid` (as the kernel sent it: the calling thread; 0 for requests the kernel
//! makes on its own, such as writeback), `tgid` and `comm` (from `/proc`, cached for a second
//! or until the pid execs; null once the thread is gone), `uid`, `offset` and `size` (null where they do not apply), `inner` (a list of `{call, latency_ns}`)
//! and `inner_dropped` (calls beyond those kept).
//!
//! Only requests over the threshold take the ring's lock or allocate. When the ring is full the
//! oldest record is dropped and counted (`slow_dropped=N` in the profile).

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::{self, Write as _};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use profile_store::{ClockInfo, Extension};
use serde::Serialize;

use super::paths::Paths;
use crate::filesystem::Request;
use crate::filesystem::request::Span;
use crate::filesystem::trace::Trace;

/// Default ring size.
pub const DEFAULT_RING: usize = 10_000;
/// Largest ring (a record takes a few hundred bytes: some hundreds of MiB at most).
pub const MAX_RING: usize = 1_000_000;

/// Most pids whose `/proc` details are cached.
const PROC_CACHE: usize = 4096;

#[derive(Serialize)]
struct InnerJson {
    call: String,
    latency_ns: u64,
}

#[derive(Serialize)]
struct RecordJson {
    seq: u64,
    time_unix_ns: u64,
    op: &'static str,
    latency_ns: u64,
    errno: i32,
    ino: u64,
    path: Option<String>,
    pid: u32,
    tgid: Option<u32>,
    comm: Option<String>,
    uid: u32,
    offset: Option<u64>,
    size: Option<u64>,
    inner: Vec<InnerJson>,
    inner_dropped: u32,
}

/// A pid's `/proc` details: when read, its exec generation then ([`super::execs`]), tgid, comm.
type ProcEntry = (Instant, u32, Option<u32>, Option<Vec<u8>>);

/// Describes a request as one record (a JSON line without its newline): the part the slow log
/// and the keeper of the slowest requests ([`super::slowest`]) share. Called only for the
/// requests they keep, never on the fast path.
pub struct Describer {
    seq: AtomicU64,
    procs: Mutex<HashMap<u32, ProcEntry>>,
    paths: Option<Arc<dyn Paths>>,
}

impl Describer {
    /// Names nodes with `paths`.
    pub fn new(paths: Option<Arc<dyn Paths>>) -> Describer {
        Describer {
            seq: AtomicU64::new(0),
            procs: Mutex::new(HashMap::new()),
            paths,
        }
    }

    /// The pid's tgid and comm: cached for a second, or until it execs.
    fn proc(&self, pid: u32) -> (Option<u32>, Option<Vec<u8>>) {
        let now = Instant::now();
        let execs = super::execs::Execs::get();
        let generation = execs.generation(pid);
        if let Some((at, g, t, c)) = self.procs.lock().get(&pid) {
            if *g == generation && now.duration_since(*at) < execs.ttl() {
                return (*t, c.clone());
            }
        }
        let (t, c) = proc_details(pid);
        let mut procs = self.procs.lock();
        if procs.len() >= PROC_CACHE {
            procs.clear();
        }
        procs.insert(pid, (now, generation, t, c.clone()));
        (t, c)
    }

    /// What the record of `req` (over `span`) says, which took `cycles`, answered `errno` (0
    /// for success) and made the inner calls of `trace`: everything but its `seq`, which the
    /// keeper gives it under its own lock ([`Described::line`]), so that records are kept in
    /// the order of their numbers.
    pub fn describe(
        &self,
        req: &Request,
        span: Span<'_>,
        cycles: u64,
        errno: i32,
        trace: &Trace,
    ) -> Described {
        let clock = ClockInfo::get();
        let ns = |c: u64| (clock.cycles_to_secs(c as f64) * 1e9).round() as u64;
        let path = self
            .paths
            .as_ref()
            .and_then(|p| p.path(req.nodeid))
            .map(|dir| match span.name {
                Some(name) => join(dir, name),
                None => dir,
            });
        let (tgid, comm) = self.proc(req.pid);
        let time_unix_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Described {
            named: span.name.is_some(),
            time_unix_ns,
            op: req.op.name(),
            latency_ns: ns(cycles),
            errno,
            ino: req.nodeid.0,
            path,
            pid: req.pid,
            tgid,
            comm,
            uid: req.uid,
            offset: span.offset,
            size: span.size,
            inner: trace
                .calls()
                .map(|c| InnerJson {
                    call: c.call.name(),
                    latency_ns: ns(c.cycles),
                })
                .collect(),
            inner_dropped: trace.dropped(),
        }
    }

    /// The next record number (from 1).
    pub fn next_seq(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::Relaxed) + 1
    }
}

/// A record without its number ([`Describer::describe`]).
pub struct Described {
    /// The path is a name in the node (a directory), not the node's own.
    named: bool,
    time_unix_ns: u64,
    op: &'static str,
    latency_ns: u64,
    errno: i32,
    ino: u64,
    path: Option<Vec<u8>>,
    pid: u32,
    tgid: Option<u32>,
    comm: Option<Vec<u8>>,
    uid: u32,
    offset: Option<u64>,
    size: Option<u64>,
    inner: Vec<InnerJson>,
    inner_dropped: u32,
}

impl Described {
    /// The request's node's own path, when known (not for a request on a name in it).
    pub fn node_path(&self) -> Option<&[u8]> {
        if self.named {
            None
        } else {
            self.path.as_deref()
        }
    }

    /// The record as one JSON line (without its newline), numbered `seq`.
    pub fn line(self, seq: u64) -> String {
        let rec = RecordJson {
            seq,
            time_unix_ns: self.time_unix_ns,
            op: self.op,
            latency_ns: self.latency_ns,
            errno: self.errno,
            ino: self.ino,
            path: self.path.as_deref().map(profile_store::name::json),
            pid: self.pid,
            tgid: self.tgid,
            comm: self.comm.as_deref().map(profile_store::name::json),
            uid: self.uid,
            offset: self.offset,
            size: self.size,
            inner: self.inner,
            inner_dropped: self.inner_dropped,
        };
        serde_json::to_string(&rec).expect("plain data serializes")
    }
}

struct Ring {
    lines: VecDeque<String>,
    dropped: u64,
    file: Option<File>,
}

/// The slow-operation log of one mount.
pub struct SlowLog {
    threshold_cycles: u64,
    capacity: usize,
    ring: Mutex<Ring>,
    describer: Describer,
}

impl std::fmt::Debug for SlowLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlowLog")
            .field("threshold_cycles", &self.threshold_cycles)
            .field("capacity", &self.capacity)
            .finish()
    }
}

fn proc_details(pid: u32) -> (Option<u32>, Option<Vec<u8>>) {
    if pid == 0 {
        return (None, None);
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok();
    let tgid = status.as_deref().and_then(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Tgid:"))
            .and_then(|v| v.trim().parse().ok())
    });
    let comm = std::fs::read(format!("/proc/{pid}/comm"))
        .ok()
        .map(|mut c| {
            if c.last() == Some(&b'\n') {
                c.pop();
            }
            c
        });
    (tgid, comm)
}

impl SlowLog {
    /// Records requests of at least `threshold_cycles`, keeping the last `capacity`, and
    /// appends them to `file` if given (opened for appending, created if missing).
    pub fn new(
        threshold_cycles: u64,
        capacity: usize,
        file: Option<&Path>,
        paths: Option<Arc<dyn Paths>>,
    ) -> io::Result<SlowLog> {
        let file = match file {
            Some(p) => Some(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)?,
            ),
            None => None,
        };
        Ok(SlowLog {
            threshold_cycles,
            capacity: capacity.max(1),
            ring: Mutex::new(Ring {
                lines: VecDeque::new(),
                dropped: 0,
                file,
            }),
            describer: Describer::new(paths),
        })
    }

    /// The threshold in cycles.
    #[inline]
    pub fn threshold_cycles(&self) -> u64 {
        self.threshold_cycles
    }

    /// Records `req` (over `span`), which took `cycles`, answered `errno` (0 for success) and
    /// made the inner calls of `trace`.
    #[cold]
    pub fn record(&self, req: &Request, span: Span<'_>, cycles: u64, errno: i32, trace: &Trace) {
        let described = self.describer.describe(req, span, cycles, errno, trace);
        self.push_line(|seq| described.line(seq));
    }

    /// Records a request whose JSON line (without newline) `line` makes from the record number
    /// it is given: a request of this mount's, or a call of the syscall level.
    #[cold]
    pub fn push_line(&self, line: impl FnOnce(u64) -> String) {
        let mut ring = self.ring.lock();
        let mut line = line(self.describer.next_seq());
        line.push('\n');
        if let Some(f) = ring.file.as_mut() {
            // One write per record, so that no other writer's line lands inside it. After a
            // failed one (a full disk) the file may end in part of a line: nothing more is
            // appended, so every line before it stays whole.
            if let Err(e) = f.write_all(line.as_bytes()) {
                log::warn!(
                    "--slow-log: {e}; no more records are appended to the file (they stay in \
                     the ring, MNT/.fsprof.slow)"
                );
                ring.file = None;
            }
        }
        line.pop();
        if ring.lines.len() >= self.capacity {
            ring.lines.pop_front();
            ring.dropped += 1;
        }
        ring.lines.push_back(line);
    }

    /// The ring as JSON lines, oldest first.
    pub fn contents(&self) -> Vec<u8> {
        let ring = self.ring.lock();
        let mut out = Vec::with_capacity(ring.lines.iter().map(|l| l.len() + 1).sum());
        for l in &ring.lines {
            out.extend_from_slice(l.as_bytes());
            out.push(b'\n');
        }
        out
    }

    /// Records in the ring.
    pub fn len(&self) -> usize {
        self.ring.lock().lines.len()
    }

    /// Whether the ring is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Records dropped from the ring since the last reset.
    pub fn dropped(&self) -> u64 {
        self.ring.lock().dropped
    }
}

impl Extension for SlowLog {
    fn extra(&self) -> Vec<(String, String)> {
        let clock = ClockInfo::get();
        let ns = (clock.cycles_to_secs(self.threshold_cycles as f64) * 1e9).round() as u64;
        vec![
            ("slow_threshold_ns".into(), ns.to_string()),
            ("slow_dropped".into(), self.dropped().to_string()),
        ]
    }

    fn reset(&self) {
        let mut ring = self.ring.lock();
        ring.lines.clear();
        ring.dropped = 0;
    }
}

/// The path of `name` in directory `dir` (a path in the mount).
fn join(mut dir: Vec<u8>, name: &std::ffi::OsStr) -> Vec<u8> {
    if dir.last() != Some(&b'/') {
        dir.push(b'/');
    }
    dir.extend_from_slice(name.as_encoded_bytes());
    dir
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filesystem::Ino;
    use crate::filesystem::trace::CallId;
    use crate::protocol::ops::{Op, Sys};

    #[test]
    fn the_ring_keeps_the_newest_and_counts_the_dropped() {
        let log = SlowLog::new(0, 3, None, None).unwrap();
        let req = Request::new(Op::Read, 1, Ino(7), 4242, 1000, 1000);
        let t = Trace::new();
        t.push(CallId::new(None, Sys::Pread), 1);
        for _ in 0..5 {
            log.record(&req, Span::default(), 10, 0, &t);
        }
        assert_eq!((log.len(), log.dropped()), (3, 2));
        let text = String::from_utf8(log.contents()).unwrap();
        let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(first["seq"], 3);
        assert_eq!(first["op"], "OP_READ");
        assert_eq!(first["pid"], 4242);
        assert_eq!(first["uid"], 1000);
        assert_eq!(first["path"], serde_json::Value::Null);
        assert_eq!(first["inner"][0]["call"], "pread");
        log.reset();
        assert!(log.is_empty());
        assert_eq!(log.dropped(), 0);
    }
}
