//! What the syscall level says about single calls: the records of calls over the slow
//! threshold (for a mount's slow log, [`SlowSink`]) and the N slowest calls (the profile's
//! `slowest` section, with `layer=syscall`), in the slow log's JSON (`docs/format.md#slow-log`)
//! with `"layer":"syscall"` added.
//!
//! The kernel sends an event only for a call over the slow threshold or one among its CPU's N
//! slowest so far (a min-heap per CPU, `slowest_take` in the program): the events of each CPU
//! hold that CPU's N slowest calls, so the N slowest of all are among them, and [`Slowest`]
//! keeps those.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use serde::Serialize;

/// One call, described.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SlowRecord {
    /// When it ended (Unix time, ns).
    pub time_unix_ns: u64,
    /// `SYS_...`.
    pub op: &'static str,
    /// Its latency.
    pub latency_ns: u64,
    /// Its errno (0 for success).
    pub errno: i32,
    /// Its file's inode number, where known (0 otherwise).
    pub ino: u64,
    /// Its file's path, where known.
    pub path: Option<String>,
    /// The calling thread.
    pub pid: u32,
    /// Its process.
    pub tgid: u32,
    /// Its command name.
    pub comm: String,
    /// Its user id.
    pub uid: u32,
    /// Its offset, where the call has one.
    pub offset: Option<u64>,
    /// Its byte count, where the call has one.
    pub size: Option<u64>,
}

#[derive(Serialize)]
struct Json<'a> {
    seq: u64,
    time_unix_ns: u64,
    op: &'a str,
    latency_ns: u64,
    errno: i32,
    ino: u64,
    path: Option<&'a str>,
    pid: u32,
    tgid: u32,
    comm: &'a str,
    uid: u32,
    offset: Option<u64>,
    size: Option<u64>,
    inner: [u8; 0],
    inner_dropped: u32,
    layer: &'a str,
}

impl SlowRecord {
    /// The record as one JSON line (without its newline), numbered `seq`, in printable ASCII
    /// (characters beyond it as `\uXXXX`), so that it is also a valid section line.
    pub fn line(&self, seq: u64) -> String {
        let j = Json {
            seq,
            time_unix_ns: self.time_unix_ns,
            op: self.op,
            latency_ns: self.latency_ns,
            errno: self.errno,
            ino: self.ino,
            path: self.path.as_deref(),
            pid: self.pid,
            tgid: self.tgid,
            comm: &self.comm,
            uid: self.uid,
            offset: self.offset,
            size: self.size,
            inner: [],
            inner_dropped: 0,
            layer: crate::LAYER,
        };
        profile_store::json::ascii(serde_json::to_string(&j).expect("plain data serializes"))
    }
}

/// Where the records of calls over the slow threshold go: a mount's slow log
/// (`.fsprof.slow`, `--slow-log`), which numbers them among its own.
pub trait SlowSink: Send + Sync {
    /// Takes one record.
    fn push(&self, rec: &SlowRecord);
}

/// The N slowest calls seen.
#[derive(Debug)]
pub struct Slowest {
    n: usize,
    seq: u64,
    heap: BinaryHeap<Reverse<(u64, u64, SlowRecord)>>,
}

impl Slowest {
    /// Keeps the `n` slowest.
    pub fn new(n: usize) -> Slowest {
        Slowest {
            n: n.max(1),
            seq: 0,
            heap: BinaryHeap::new(),
        }
    }

    /// Keeps `rec`, which took `cycles`, if it is among the N slowest so far.
    pub fn offer(&mut self, cycles: u64, rec: SlowRecord) {
        if self.heap.len() >= self.n {
            match self.heap.peek() {
                Some(Reverse((min, _, _))) if cycles <= *min => return,
                _ => {
                    self.heap.pop();
                }
            }
        }
        self.seq += 1;
        self.heap.push(Reverse((cycles, self.seq, rec)));
    }

    /// The kept records as lines, slowest first (ties: the older first).
    pub fn lines(&self) -> Vec<String> {
        let mut kept: Vec<&(u64, u64, SlowRecord)> = self.heap.iter().map(|r| &r.0).collect();
        kept.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        kept.into_iter().map(|(_, seq, r)| r.line(*seq)).collect()
    }

    /// How many it keeps at most.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Forgets every record (a reset).
    pub fn clear(&mut self) {
        self.heap.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(op: &'static str, ns: u64) -> SlowRecord {
        SlowRecord {
            time_unix_ns: 1,
            op,
            latency_ns: ns,
            errno: 0,
            ino: 7,
            path: Some("/d/f é".into()),
            pid: 10,
            tgid: 10,
            comm: "cat".into(),
            uid: 0,
            offset: Some(0),
            size: None,
        }
    }

    #[test]
    fn the_slowest_are_kept_slowest_first() {
        let mut s = Slowest::new(2);
        for c in [5u64, 1, 9, 3, 9] {
            s.offer(c, rec("SYS_PREAD", c));
        }
        let lines = s.lines();
        assert_eq!(lines.len(), 2);
        let v: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
        assert_eq!(v["latency_ns"], 9);
        assert_eq!(v["layer"], "syscall");
        assert_eq!(v["path"], "/d/f é");
        assert!(lines[0].is_ascii(), "{}", lines[0]);
        assert!(lines.iter().all(|l| l.contains("\"latency_ns\":9")));
    }
}
