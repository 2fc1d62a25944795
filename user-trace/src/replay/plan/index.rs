//! The first, streaming, pass over a trace ([`index`]): who the threads are, where each one's
//! chunks lie and where processes forked; then each thread's steps read back in order, a
//! chunk at a time ([`ThreadCursor`]), merged by [`order_time`].

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use super::calls::makes_fd;
use crate::abi::{self, Origin};
use crate::error::Error;
use crate::trace::{ReadReport, Record, Records, TraceHeader, TraceReader};

/// One traced thread.
#[derive(Debug, Clone)]
pub struct ThreadInfo {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Its steps (calls and forks).
    pub steps: u64,
    /// Its slots' chunks, by file offset, in order.
    slots: Vec<Vec<u64>>,
}

/// Where a trace's records are (the first, streaming, pass over it): who the threads are, where
/// each one's chunks lie, and where processes forked.
#[derive(Debug)]
pub struct Index {
    /// The trace header.
    pub header: TraceHeader,
    /// The traced threads.
    pub threads: Vec<ThreadInfo>,
    /// (parent thread, time, child pid), in slot order.
    forks: Vec<(usize, u64, u32)>,
    /// What reading the trace found.
    pub read: ReadReport,
}

impl Index {
    /// Steps in all.
    pub fn steps(&self) -> u64 {
        self.threads.iter().map(|t| t.steps).sum()
    }
}

/// Reads the trace once, keeping only where each thread's chunks are (memory grows with the
/// number of chunks, 64 KiB of trace each, not with the calls).
pub fn index(trace: &Path) -> Result<Index, Error> {
    let mut reader = TraceReader::open(trace)?;
    let header = reader.header().clone();
    // Each slot's identity, chunk offsets and record count.
    let mut slots: BTreeMap<u32, (abi::ChunkHeader, Vec<u64>, u64)> = BTreeMap::new();
    let mut rec = Record::default();
    let mut records = 0u64;
    while let Some(chunk) = reader.next_chunk()? {
        let n = decoded(chunk.records(), &mut rec);
        records += n;
        let e = slots
            .entry(chunk.header.slot)
            .or_insert_with(|| (chunk.header, Vec::new(), 0));
        e.1.push(chunk.offset);
        e.2 += n;
    }
    let mut read = reader.report().clone();
    read.records = records;

    // Threads: (pid, tid), in slot order.
    let mut thread_of: BTreeMap<(u32, u32), usize> = BTreeMap::new();
    let mut threads: Vec<ThreadInfo> = Vec::new();
    let mut slot_thread: HashMap<u32, usize> = HashMap::new();
    for (&slot, (h, _, _)) in &slots {
        let t = *thread_of.entry((h.pid, h.tid)).or_insert_with(|| {
            threads.push(ThreadInfo {
                pid: h.pid,
                tid: h.tid,
                steps: 0,
                slots: Vec::new(),
            });
            threads.len() - 1
        });
        slot_thread.insert(slot, t);
    }
    let mut forks: Vec<(usize, u64, u32)> = Vec::new();
    let mut forked_pids = std::collections::HashSet::new();
    for (&slot, (h, offsets, n)) in &mut slots {
        let t = slot_thread[&slot];
        threads[t].slots.push(std::mem::take(offsets));
        threads[t].steps += *n;
        if h.origin == Origin::Fork.code() && forked_pids.insert(h.pid) {
            let parent = slot_thread
                .get(&h.parent_slot)
                .copied()
                .or_else(|| thread_of.get(&(h.ppid, h.ppid)).copied());
            if let Some(p) = parent {
                forks.push((p, h.born, h.pid));
                threads[p].steps += 1;
            }
        }
    }
    Ok(Index {
        header,
        threads,
        forks,
        read,
    })
}

/// Counts the records of a chunk that decode (those after an undecodable one are not
/// read), with `rec` as scratch.
fn decoded(mut it: Records, rec: &mut Record) -> u64 {
    let mut n = 0;
    while let Ok(true) = it.next_into(rec) {
        n += 1;
    }
    n
}

/// When `rec` takes its place in the order between threads: when it started, but for a call
/// that made a descriptor, when it ended. The kernel hands out the lowest free number as the
/// call ends, so an open that started before another thread's close of that number, and got
/// the number, comes after the close.
pub(super) fn order_time(rec: &Record) -> u64 {
    if rec.result >= 0 && makes_fd(rec) {
        rec.end()
    } else {
        rec.start
    }
}

/// A step of a thread before planning: a traced call (taken when visited) or a fork.
#[derive(Debug)]
pub(super) enum Entry {
    Call(Option<Record>),
    Fork(u32),
}

/// One slot's records, a chunk at a time.
struct SlotCursor {
    offsets: std::vec::IntoIter<u64>,
    /// The chunk being read, by start (reversed: the next is last).
    recs: Vec<Record>,
}

/// One thread's steps in order: its slots' records merged by start, its forks slotted in by
/// time.
pub(super) struct ThreadCursor {
    slots: Vec<SlotCursor>,
    /// (time, child pid), by time.
    forks: std::collections::VecDeque<(u64, u32)>,
}

impl ThreadCursor {
    /// A cursor for each thread of `index`, its forks in order of time.
    pub(super) fn all(index: &Index) -> Vec<ThreadCursor> {
        let mut cursors: Vec<ThreadCursor> = index
            .threads
            .iter()
            .map(|t| ThreadCursor {
                slots: t
                    .slots
                    .iter()
                    .map(|o| SlotCursor {
                        offsets: o.clone().into_iter(),
                        recs: Vec::new(),
                    })
                    .collect(),
                forks: Default::default(),
            })
            .collect();
        let mut forks = index.forks.clone();
        forks.sort_by_key(|f| f.1);
        for (p, time, child) in forks {
            cursors[p].forks.push_back((time, child));
        }
        cursors
    }

    /// The slot with the earliest next record, reading chunks as needed; `None` when all are
    /// read.
    fn head(&mut self, file: &std::fs::File, base: &Path) -> Result<Option<usize>, Error> {
        let mut best: Option<(u64, usize)> = None;
        for (k, s) in self.slots.iter_mut().enumerate() {
            while s.recs.is_empty() {
                let Some(off) = s.offsets.next() else { break };
                s.recs = read_chunk(file, base, off)?;
            }
            if let Some(r) = s.recs.last() {
                let at = order_time(r);
                if best.is_none_or(|(t, _)| at < t) {
                    best = Some((at, k));
                }
            }
        }
        Ok(best.map(|(_, k)| k))
    }

    /// The time of the next step and the step, without taking it; `None` at the end.
    pub(super) fn peek(&mut self, file: &std::fs::File, base: &Path) -> Result<Option<u64>, Error> {
        let rec = self.head(file, base)?.map(|k| {
            order_time(
                self.slots[k]
                    .recs
                    .last()
                    .expect("the head slot has a record"),
            )
        });
        // A fork comes before the records that started at or after it.
        Ok(match (self.forks.front(), rec) {
            (Some(&(time, _)), Some(r)) if time <= r => Some(time),
            (Some(&(time, _)), None) => Some(time),
            (_, r) => r,
        })
    }

    /// Takes the next step (after [`ThreadCursor::peek`] said there is one).
    pub(super) fn take(&mut self, file: &std::fs::File, base: &Path) -> Result<Entry, Error> {
        let head = self.head(file, base)?;
        let rec_start = head.and_then(|k| self.slots[k].recs.last().map(order_time));
        if let Some(&(time, child)) = self.forks.front() {
            if rec_start.is_none_or(|r| time <= r) {
                self.forks.pop_front();
                return Ok(Entry::Fork(child));
            }
        }
        let k = head.expect("a step was peeked");
        Ok(Entry::Call(self.slots[k].recs.pop()))
    }
}

/// The records of the chunk at `off` of `file` (the trace `base`), by start, last first.
fn read_chunk(file: &std::fs::File, base: &Path, off: u64) -> Result<Vec<Record>, Error> {
    use std::os::unix::fs::FileExt;
    let io = |e| Error::io(format!("reading {}", base.display()), e);
    let mut h = [0u8; abi::CHUNK_HEADER];
    file.read_exact_at(&mut h, off).map_err(io)?;
    let header = abi::ChunkHeader::decode(&h)
        .ok_or_else(|| Error::Config(format!("{}: changed while replayed", base.display())))?;
    let mut payload = vec![0u8; header.len as usize];
    file.read_exact_at(&mut payload, off + abi::CHUNK_HEADER as u64)
        .map_err(io)?;
    let mut it = Records::new(&payload, header.base);
    let mut out = Vec::new();
    loop {
        let mut rec = Record::default();
        match it.next_into(&mut rec) {
            Ok(true) => out.push(rec),
            _ => break,
        }
    }
    // In order (stable: a call nested in another, recorded first, comes after it), then
    // reversed to be popped.
    out.sort_by_key(order_time);
    out.reverse();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_that_made_a_descriptor_takes_its_place_when_it_ended() {
        use crate::abi::id::{CLOSE, OPENAT, STAT};
        let rec = |call, start, latency, result| Record {
            call,
            start,
            latency,
            result,
            args: Vec::new(),
            kind: 0,
        };
        // An open that got fd 5 ends at 14, after a close of 5 that started at 12.
        assert_eq!(order_time(&rec(OPENAT, 10, 4, 5)), 14);
        assert_eq!(order_time(&rec(CLOSE, 12, 1, 0)), 12);
        // Failed, it made none; other calls are ordered by their start.
        assert_eq!(order_time(&rec(OPENAT, 10, 4, -2)), 10);
        assert_eq!(order_time(&rec(STAT, 10, 4, 0)), 10);
    }
}
