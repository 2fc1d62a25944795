//! Planning a replay: the trace's records grouped by traced thread, every path resolved (against
//! the process's working directory and descriptors, as the program saw them) and mapped into
//! the replay directory, the order kept between threads that touched the same file or
//! directory, the fork points where a child's descriptor table is copied, and the tree the
//! trace needed when it started.
//!
//! # Order
//!
//! All records (and forks) are visited in the order they started, merged from each thread's
//! chunks as they are read (a call that made a descriptor takes its place when it ended: see
//! [`order_time`]). Each names some objects: the paths it resolves, the parent directory of a
//! name it creates or removes, the file behind a descriptor. A record waits for the last
//! record of another thread that named one of its objects; since every wait points to an
//! earlier record, there are no cycles, and a replay that feeds each thread's steps in this
//! order through bounded queues always has a step that can run.
//!
//! # The tree at the start
//!
//! The first thing the trace says about a path decides whether it existed: an open without
//! `O_CREAT`, a successful stat or unlink say it did; `ENOENT`, `O_CREAT|O_EXCL` or mkdir say it
//! did not. A file's size is the furthest byte read from it before the program first changed
//! it, exact where a read stopped short (end of file), a stat reported it, or a seek to the end
//! returned it. Every directory that held a name the trace used successfully existed too.

use std::collections::{BTreeMap, HashMap};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use crate::abi::{self, Origin, id};
use crate::error::Error;
use crate::trace::{ReadReport, Record, Records, TraceHeader, TraceReader};

/// A thread's step.
#[derive(Debug)]
pub struct Step {
    /// What to do.
    pub kind: StepKind,
    /// Steps of other threads that must have finished first: (thread, index).
    pub deps: Vec<(u32, u32)>,
    /// Time between the end of this thread's previous call and this one's start, as traced.
    pub think_ns: u64,
}

/// What a step does.
#[derive(Debug)]
pub enum StepKind {
    /// Replay a traced call.
    Call {
        /// The traced call.
        rec: Record,
        /// Its path items mapped into the replay directory (in signature order; `None` for a
        /// null path or an item that is not a path).
        paths: Vec<Option<CString>>,
        /// A path lies outside the traced root: the call is not replayed.
        outside: bool,
    },
    /// The traced process forked `child` here: copy the descriptor table.
    Fork {
        /// The child's pid.
        child: u32,
    },
}

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

/// What a path was at the start of the trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A regular file of this size.
    File(u64),
    /// A directory.
    Dir,
    /// A symbolic link whose target has this length.
    Symlink(u64),
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

/// What the trace says a path was at its start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Initial {
    Exists(Seen),
    Absent,
    /// Created by the program without saying whether it existed (`O_CREAT`, rename target):
    /// it existed if the program read from it before changing it.
    Maybe,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    File,
    Dir,
    Symlink,
    Unknown,
}

#[derive(Debug, Default)]
struct PathState {
    initial: Option<Initial>,
    modified: bool,
    min_size: u64,
    exact: Option<u64>,
    link_len: u64,
}

#[derive(Debug, Clone, Default)]
struct FdSim {
    path: Option<PathBuf>,
    /// Position of reads and writes without an offset; `None` once unknown.
    pos: Option<u64>,
}

#[derive(Debug, Clone, Default)]
struct ProcSim {
    cwd: PathBuf,
    fds: HashMap<i64, FdSim>,
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

/// One slot's records, a chunk at a time.
struct SlotCursor {
    offsets: std::vec::IntoIter<u64>,
    /// The chunk being read, by start (reversed: the next is last).
    recs: Vec<Record>,
}

/// One thread's steps in order: its slots' records merged by start, its forks slotted in by
/// time.
struct ThreadCursor {
    slots: Vec<SlotCursor>,
    /// (time, child pid), by time.
    forks: std::collections::VecDeque<(u64, u32)>,
}

impl ThreadCursor {
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
    fn peek(&mut self, file: &std::fs::File, base: &Path) -> Result<Option<u64>, Error> {
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
    fn take(&mut self, file: &std::fs::File, base: &Path) -> Result<Entry, Error> {
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

/// Every step of a trace in the order they started, planned: what [`Planner`] makes of each.
pub struct Steps<'a> {
    index: &'a Index,
    trace: &'a Path,
    file: std::fs::File,
    cursors: Vec<ThreadCursor>,
    /// (time, thread) of each thread's next step, earliest first.
    heap: std::collections::BinaryHeap<std::cmp::Reverse<(u64, u32)>>,
    /// Steps each thread has had.
    next: Vec<u32>,
    state: PlanState,
}

/// What planning keeps from step to step (bounded by the objects the trace names, not by its
/// calls).
struct PlanState {
    root: PathBuf,
    target: PathBuf,
    procs: HashMap<u32, ProcSim>,
    tree: BTreeMap<PathBuf, PathState>,
    last: HashMap<Key, (u32, u32)>,
    fork_step: HashMap<u32, (u32, u32, u64)>,
    prev_end: Vec<Option<u64>>,
}

impl<'a> Steps<'a> {
    /// Plans the replay of the trace `trace` (indexed as `index`) into `target`, traced paths
    /// under `root` (default: where the traced command started) mapped there.
    pub fn new(
        index: &'a Index,
        trace: &'a Path,
        target: &Path,
        root: Option<&Path>,
    ) -> Result<Steps<'a>, Error> {
        let file = std::fs::File::open(trace)
            .map_err(|e| Error::io(format!("opening {}", trace.display()), e))?;
        let root = root.map_or_else(|| index.header.root.clone(), normalize);
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
        let mut heap = std::collections::BinaryHeap::new();
        for (t, c) in cursors.iter_mut().enumerate() {
            if let Some(time) = c.peek(&file, trace)? {
                heap.push(std::cmp::Reverse((time, t as u32)));
            }
        }
        let n = index.threads.len();
        Ok(Steps {
            index,
            trace,
            file,
            cursors,
            heap,
            next: vec![0; n],
            state: PlanState {
                root,
                target: target.to_path_buf(),
                procs: HashMap::new(),
                tree: BTreeMap::new(),
                last: HashMap::new(),
                fork_step: HashMap::new(),
                prev_end: vec![None; n],
            },
        })
    }

    /// The next step in start order, with its thread; `None` at the end.
    pub fn next_step(&mut self) -> Result<Option<(usize, Step)>, Error> {
        let Some(std::cmp::Reverse((time, t))) = self.heap.pop() else {
            return Ok(None);
        };
        let ti = t as usize;
        let entry = self.cursors[ti].take(&self.file, self.trace)?;
        let i = self.next[ti];
        self.next[ti] += 1;
        if let Some(time) = self.cursors[ti].peek(&self.file, self.trace)? {
            self.heap.push(std::cmp::Reverse((time, t)));
        }
        let step = self.state.visit(
            &self.index.header,
            self.index.threads[ti].pid,
            t,
            i,
            time,
            entry,
        );
        Ok(Some((ti, step)))
    }

    /// What to create before replaying (once every step was taken): replay paths and kinds,
    /// parents before children.
    pub fn tree(&self) -> Vec<(PathBuf, Kind)> {
        initial_tree(&self.state.tree, &self.state.root, &self.state.target)
    }
}

impl PlanState {
    /// Plans step `i` of thread `t` (of process `pid`), which started at `time`.
    fn visit(
        &mut self,
        header: &TraceHeader,
        pid: u32,
        t: u32,
        i: u32,
        time: u64,
        entry: Entry,
    ) -> Step {
        let ti = t as usize;
        let mut deps = Vec::new();
        // A forked child's first step waits for its fork.
        let mut forked_at = None;
        if i == 0 {
            if let Some(&(ft, fi, ftime)) = self.fork_step.get(&pid) {
                if ft != t {
                    deps.push((ft, fi));
                    forked_at = Some(ftime);
                }
            }
        }
        let root = &self.root;
        let proc = self.procs.entry(pid).or_insert_with(|| ProcSim {
            cwd: root.clone(),
            ..ProcSim::default()
        });
        match entry {
            Entry::Fork(child) => {
                let copy = proc.clone();
                self.procs.insert(child, copy);
                self.fork_step.insert(child, (t, i, time));
                Step {
                    kind: StepKind::Fork { child },
                    deps,
                    think_ns: 0,
                }
            }
            Entry::Call(rec) => {
                let rec = rec.expect("each record is visited once");
                let mut planner = Planner {
                    root,
                    target: &self.target,
                    tree: &mut self.tree,
                };
                let (paths, outside, keys) = planner.visit(pid, proc, &rec);
                for k in keys {
                    if let Some(&(lt, li)) = self.last.get(&k) {
                        if lt != t && !deps.contains(&(lt, li)) {
                            deps.push((lt, li));
                        }
                    }
                    self.last.insert(k, (t, i));
                }
                // The gap since this thread's previous call; a fork child's first call counts
                // from the fork; other threads' first calls start at once.
                let think = match (self.prev_end[ti], forked_at) {
                    (Some(e), _) => rec.start.saturating_sub(e),
                    (None, Some(f)) => rec.start.saturating_sub(f),
                    (None, None) => 0,
                };
                self.prev_end[ti] = Some(rec.end());
                Step {
                    think_ns: header.cycles_to_ns(think),
                    kind: StepKind::Call {
                        rec,
                        paths,
                        outside,
                    },
                    deps,
                }
            }
        }
    }
}

/// Whether `rec` makes a descriptor (when it succeeds).
fn makes_fd(rec: &Record) -> bool {
    use crate::abi::id::*;
    let call = rec.call;
    matches!(
        call,
        OPEN | OPENAT | CREAT | DUP | DUP2 | DUP3 | FOPEN | FREOPEN | OPENDIR
    ) || call == FCNTL
        && matches!(
            rec.int(0).map(|c| c as i32),
            Some(libc::F_DUPFD | libc::F_DUPFD_CLOEXEC)
        )
}

/// When `rec` takes its place in the order between threads: when it started, but for a call
/// that made a descriptor, when it ended. The kernel hands out the lowest free number as the
/// call ends, so an open that started before another thread's close of that number, and got
/// the number, comes after the close.
fn order_time(rec: &Record) -> u64 {
    if rec.result >= 0 && makes_fd(rec) {
        rec.end()
    } else {
        rec.start
    }
}

/// A step of a thread before planning: a traced call (taken when visited) or a fork.
#[derive(Debug)]
enum Entry {
    Call(Option<Record>),
    Fork(u32),
}

/// An object calls are ordered on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Path(PathBuf),
    /// A descriptor number of a process.
    Fd(u32, i64),
}

struct Planner<'a> {
    root: &'a Path,
    target: &'a Path,
    tree: &'a mut BTreeMap<PathBuf, PathState>,
}

/// Whether the `k`-th string item of `call` is a path (and which descriptor item it is
/// relative to), or something else (a mode, a name, a link's target).
fn path_role(call: u8, k: usize) -> Option<Option<usize>> {
    use id::*;
    match (call, k) {
        (
            OPENAT | FSTATAT | STATX | FACCESSAT | MKDIRAT | UNLINKAT | READLINKAT | FCHMODAT
            | FCHOWNAT | UTIMENSAT,
            0,
        ) => Some(Some(0)),
        (RENAMEAT | RENAMEAT2 | LINKAT, 0) => Some(Some(0)),
        (RENAMEAT | RENAMEAT2 | LINKAT, 1) => Some(Some(1)),
        (SYMLINK, 0) | (SYMLINKAT, 0) => None,
        (SYMLINK, 1) => Some(None),
        (SYMLINKAT, 1) => Some(Some(0)),
        (FSETXATTR | FGETXATTR | FREMOVEXATTR | FDOPEN, _) => None,
        (SETXATTR | LSETXATTR | GETXATTR | LGETXATTR | REMOVEXATTR | LREMOVEXATTR, 1) => None,
        (FOPEN | FREOPEN, 1) => None,
        (_, 0 | 1) => Some(None),
        _ => None,
    }
}

/// The traced path behind a descriptor of `proc`, when the trace opened it.
fn fd_path(proc: &ProcSim, fd: i64) -> Option<PathBuf> {
    proc.fds.get(&fd).and_then(|f| f.path.clone())
}

/// Lexically normalized absolute path (`.` and `..` resolved without the file system).
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
            _ => {}
        }
    }
    out
}

/// fopen mode to open flags.
fn fopen_flags(mode: &[u8]) -> i32 {
    let plus = mode.contains(&b'+');
    let excl = if mode.contains(&b'x') {
        libc::O_EXCL
    } else {
        0
    };
    match mode.first() {
        Some(b'w') => {
            (if plus { libc::O_RDWR } else { libc::O_WRONLY })
                | libc::O_CREAT
                | libc::O_TRUNC
                | excl
        }
        Some(b'a') => {
            (if plus { libc::O_RDWR } else { libc::O_WRONLY })
                | libc::O_CREAT
                | libc::O_APPEND
                | excl
        }
        _ => {
            if plus {
                libc::O_RDWR
            } else {
                libc::O_RDONLY
            }
        }
    }
}

/// Which calls read data from their (first) descriptor, and which write.
fn reads(call: u8) -> bool {
    use id::*;
    matches!(
        call,
        READ | PREAD | READV | PREADV | PREADV2 | FREAD | FGETS
    )
}

fn writes(call: u8) -> bool {
    use id::*;
    matches!(
        call,
        WRITE
            | PWRITE
            | WRITEV
            | PWRITEV
            | PWRITEV2
            | FWRITE
            | FPUTS
            | FTRUNCATE
            | FALLOCATE
            | POSIX_FALLOCATE
    )
}

/// Calls that move the descriptor's position by their result.
fn moves(call: u8) -> bool {
    use id::*;
    matches!(call, READ | READV | WRITE | WRITEV | FREAD | FWRITE | FGETS)
}

impl Planner<'_> {
    fn state(&mut self, p: &Path) -> Option<&mut PathState> {
        if p.starts_with(self.root) {
            Some(self.tree.entry(p.to_path_buf()).or_default())
        } else {
            None
        }
    }

    /// Records what the trace first says about `p` (later statements are about what the
    /// program did, not about the start).
    fn first(&mut self, p: &Path, i: Initial) {
        if let Some(s) = self.state(p) {
            if s.initial.is_none() {
                s.initial = Some(i);
            }
        }
    }

    fn modified(&mut self, p: &Path) {
        if let Some(s) = self.state(p) {
            if s.initial.is_none() {
                s.initial = Some(Initial::Maybe);
            }
            s.modified = true;
        }
    }

    /// A read from the unchanged file `p` reached `end`; `eof` when it stopped there.
    fn extent(&mut self, p: &Path, end: u64, eof: bool) {
        if let Some(s) = self.state(p) {
            if s.modified {
                return;
            }
            if s.initial.is_none() || s.initial == Some(Initial::Maybe) && end > 0 {
                s.initial = Some(Initial::Exists(Seen::File));
            }
            s.min_size = s.min_size.max(end);
            if eof && s.exact.is_none() {
                s.exact = Some(end);
            }
        }
    }

    fn exact_size(&mut self, p: &Path, size: u64) {
        if let Some(s) = self.state(p) {
            if !s.modified && s.exact.is_none() {
                s.exact = Some(size);
            }
        }
    }

    /// A name in `p`'s directory was used successfully: its directories existed (unless the
    /// program made them).
    fn parent_used(&mut self, p: &Path) {
        let mut d = p.parent();
        while let Some(dir) = d {
            if !dir.starts_with(self.root) || dir == self.root {
                break;
            }
            match self.state(dir) {
                Some(s) if s.initial.is_none() => s.initial = Some(Initial::Exists(Seen::Dir)),
                _ => break,
            }
            d = dir.parent();
        }
    }

    fn map(&self, p: &Path) -> Option<CString> {
        let rel = p.strip_prefix(self.root).ok()?;
        let t = if rel.as_os_str().is_empty() {
            self.target.to_path_buf()
        } else {
            self.target.join(rel)
        };
        CString::new(t.as_os_str().as_bytes()).ok()
    }

    /// Resolves, maps and learns from one record; returns its mapped paths, whether one lies
    /// outside the root, and the objects it names.
    fn visit(
        &mut self,
        pid: u32,
        proc: &mut ProcSim,
        rec: &Record,
    ) -> (Vec<Option<CString>>, bool, Vec<Key>) {
        use id::*;
        let call = rec.call;
        let ok = rec.result >= 0;
        let errno = if ok { 0 } else { (-rec.result) as i32 };
        let fds: Vec<i64> = (0..4).map_while(|k| rec.fd(k)).collect();
        // Absolute traced paths of the string items that are paths.
        let mut abs: Vec<Option<PathBuf>> = Vec::new();
        let mut mapped = Vec::new();
        let mut outside = false;
        let mut k = 0;
        while let Some(raw) = rec
            .args
            .iter()
            .filter_map(|a| match a {
                crate::trace::Arg::Path(p) => Some(p.as_deref()),
                _ => None,
            })
            .nth(k)
        {
            let resolved = match (path_role(call, k), raw) {
                (Some(dirfd), Some(raw)) => {
                    let raw = Path::new(std::ffi::OsStr::from_bytes(raw));
                    let base = match dirfd.and_then(|d| fds.get(d).copied()) {
                        Some(fd) if fd != libc::AT_FDCWD as i64 => {
                            proc.fds.get(&fd).and_then(|f| f.path.clone())
                        }
                        _ => Some(proc.cwd.clone()),
                    };
                    if raw.is_absolute() {
                        Some(normalize(raw))
                    } else if raw.as_os_str().is_empty() {
                        base
                    } else {
                        base.map(|b| normalize(&b.join(raw)))
                    }
                }
                // A null path (utimensat, freopen): the descriptor or stream itself.
                (Some(Some(d)), None) => fds
                    .get(d)
                    .and_then(|fd| proc.fds.get(fd))
                    .and_then(|f| f.path.clone()),
                _ => None,
            };
            let is_path = path_role(call, k).is_some() && raw.is_some();
            match &resolved {
                Some(p) => match self.map(p) {
                    Some(m) => mapped.push(Some(m)),
                    None => {
                        outside = true;
                        mapped.push(None);
                    }
                },
                None => {
                    if is_path {
                        outside = true;
                    }
                    // Not a path: keep a symlink target (mapped when absolute under the root)
                    // or leave None; executors read the record's strings for the rest.
                    let keep = raw.and_then(|r| {
                        let rp = Path::new(std::ffi::OsStr::from_bytes(r));
                        if matches!(call, SYMLINK | SYMLINKAT) && rp.is_absolute() {
                            self.map(&normalize(rp))
                        } else {
                            None
                        }
                    });
                    mapped.push(keep);
                }
            }
            abs.push(if is_path { resolved } else { None });
            k += 1;
        }

        let mut keys = Vec::new();
        for p in abs.iter().flatten() {
            keys.push(Key::Path(p.clone()));
        }
        let descriptor_calls = !matches!(
            call,
            OPENAT
                | FSTATAT
                | STATX
                | FACCESSAT
                | MKDIRAT
                | UNLINKAT
                | RENAMEAT
                | RENAMEAT2
                | LINKAT
                | SYMLINKAT
                | READLINKAT
                | FCHMODAT
                | FCHOWNAT
        ) || abs.iter().all(Option::is_none);
        if descriptor_calls {
            for &fd in fds.iter().filter(|&&f| f >= 0) {
                if let Some(p) = fd_path(proc, fd) {
                    keys.push(Key::Path(p));
                }
            }
        }
        // Descriptor numbers are shared by a process's threads: calls that use, make or
        // close the same number stay in order.
        for &fd in fds.iter().filter(|&&f| f >= 0) {
            keys.push(Key::Fd(pid, fd));
        }
        if makes_fd(rec) && ok {
            keys.push(Key::Fd(pid, rec.result));
        }
        // Names created or removed change their directory.
        let changes_dir = match call {
            OPEN | OPENAT => rec.flags() as i32 & libc::O_CREAT != 0,
            FOPEN => fopen_flags(rec.path(1).unwrap_or(b"r")) & libc::O_CREAT != 0,
            CREAT | MKDIR | MKDIRAT | RMDIR | UNLINK | UNLINKAT | REMOVE | RENAME | RENAMEAT
            | RENAMEAT2 | LINK | LINKAT | SYMLINK | SYMLINKAT => true,
            _ => false,
        };
        if changes_dir {
            for p in abs.iter().flatten() {
                if let Some(d) = p.parent() {
                    keys.push(Key::Path(d.to_path_buf()));
                }
            }
        }

        // What the call says about the tree at the start, and its effect on descriptors.
        let p0 = abs.first().cloned().flatten();
        let p1 = abs.get(1).cloned().flatten();
        match call {
            OPEN | OPENAT | CREAT | FOPEN | FREOPEN => {
                let flags = match call {
                    CREAT => libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC,
                    FOPEN | FREOPEN => fopen_flags(rec.path(1).unwrap_or(b"r")),
                    _ => rec.flags() as i32,
                };
                if call == FREOPEN {
                    if let Some(old) = fds.first() {
                        proc.fds.remove(old);
                    }
                }
                if let Some(p) = &p0 {
                    if ok {
                        if flags & libc::O_CREAT == 0 {
                            let seen = if flags & libc::O_DIRECTORY != 0 {
                                Seen::Dir
                            } else {
                                Seen::Unknown
                            };
                            self.first(p, Initial::Exists(seen));
                        } else if flags & libc::O_EXCL != 0 {
                            self.first(p, Initial::Absent);
                        } else {
                            self.first(p, Initial::Maybe);
                        }
                        if flags & libc::O_TRUNC != 0 {
                            self.modified(p);
                        }
                        self.parent_used(p);
                    } else {
                        match errno {
                            libc::ENOENT => self.first(p, Initial::Absent),
                            libc::EEXIST => {
                                self.first(p, Initial::Exists(Seen::Unknown));
                                self.parent_used(p);
                            }
                            libc::EISDIR => {
                                self.first(p, Initial::Exists(Seen::Dir));
                                self.parent_used(p);
                            }
                            _ => {}
                        }
                    }
                }
                if ok {
                    let path = p0.clone().or_else(|| {
                        (call == FREOPEN)
                            .then(|| fds.first().and_then(|&f| fd_path(proc, f)))
                            .flatten()
                    });
                    let pos = (flags & libc::O_APPEND == 0).then_some(0);
                    proc.fds.insert(rec.result, FdSim { path, pos });
                }
            }
            FDOPEN | FDOPENDIR => {}
            OPENDIR => {
                if let Some(p) = &p0 {
                    if ok {
                        self.first(p, Initial::Exists(Seen::Dir));
                        self.parent_used(p);
                        proc.fds.insert(
                            rec.result,
                            FdSim {
                                path: Some(p.clone()),
                                pos: None,
                            },
                        );
                    } else if errno == libc::ENOENT {
                        self.first(p, Initial::Absent);
                    }
                }
            }
            CLOSE | FCLOSE | CLOSEDIR => {
                if let Some(fd) = fds.first() {
                    proc.fds.remove(fd);
                }
            }
            DUP | DUP2 | DUP3 if ok => {
                let src = fds
                    .first()
                    .and_then(|f| proc.fds.get(f))
                    .cloned()
                    .unwrap_or_default();
                proc.fds.insert(rec.result, src);
            }
            FCNTL => {
                let cmd = rec.int(0).unwrap_or(0) as i32;
                if ok && (cmd == libc::F_DUPFD || cmd == libc::F_DUPFD_CLOEXEC) {
                    let src = fds
                        .first()
                        .and_then(|f| proc.fds.get(f))
                        .cloned()
                        .unwrap_or_default();
                    proc.fds.insert(rec.result, src);
                }
            }
            STAT | LSTAT | FSTATAT | STATX => match (&p0, ok) {
                (Some(p), true) => {
                    let (mode, size) = rec.stat().unwrap_or((0, 0));
                    let seen = match mode as u32 & libc::S_IFMT {
                        libc::S_IFDIR => Seen::Dir,
                        libc::S_IFREG => Seen::File,
                        libc::S_IFLNK => Seen::Symlink,
                        _ => Seen::Unknown,
                    };
                    self.first(p, Initial::Exists(seen));
                    if seen == Seen::File {
                        self.exact_size(p, size);
                    }
                    if seen == Seen::Symlink {
                        if let Some(s) = self.state(p) {
                            s.link_len = s.link_len.max(size);
                        }
                    }
                    self.parent_used(p);
                }
                (Some(p), false) if errno == libc::ENOENT => self.first(p, Initial::Absent),
                (None, true) => {
                    // fstatat/statx on a descriptor (empty path).
                    if let (Some(p), Some((mode, size))) =
                        (fds.first().and_then(|&f| fd_path(proc, f)), rec.stat())
                    {
                        if mode as u32 & libc::S_IFMT == libc::S_IFREG {
                            self.exact_size(&p, size);
                        }
                    }
                }
                _ => {}
            },
            FSTAT => {
                if let (Some(p), Some((mode, size))) =
                    (fds.first().and_then(|&f| fd_path(proc, f)), rec.stat())
                {
                    if mode as u32 & libc::S_IFMT == libc::S_IFREG {
                        self.exact_size(&p, size);
                    }
                }
            }
            MKDIR | MKDIRAT => {
                if let Some(p) = &p0 {
                    if ok {
                        self.first(p, Initial::Absent);
                        self.parent_used(p);
                    } else if errno == libc::EEXIST {
                        self.first(p, Initial::Exists(Seen::Dir));
                        self.parent_used(p);
                    }
                }
            }
            RMDIR | UNLINK | UNLINKAT | REMOVE => {
                if let Some(p) = &p0 {
                    if ok {
                        let dir = call == RMDIR
                            || call == UNLINKAT && rec.flags() as i32 & libc::AT_REMOVEDIR != 0;
                        self.first(
                            p,
                            Initial::Exists(if dir { Seen::Dir } else { Seen::Unknown }),
                        );
                        self.parent_used(p);
                        self.modified(p);
                    } else if errno == libc::ENOENT {
                        self.first(p, Initial::Absent);
                    }
                }
            }
            RENAME | RENAMEAT | RENAMEAT2 | LINK | LINKAT => {
                if let Some(p) = &p0 {
                    if ok {
                        self.first(p, Initial::Exists(Seen::Unknown));
                        self.parent_used(p);
                        if call != LINK && call != LINKAT {
                            self.modified(p);
                        }
                    } else if errno == libc::ENOENT {
                        self.first(p, Initial::Absent);
                    }
                }
                if let (Some(p), true) = (&p1, ok) {
                    self.modified(p);
                    self.parent_used(p);
                }
            }
            SYMLINK | SYMLINKAT => {
                if let (Some(p), true) = (&p1, ok) {
                    self.first(p, Initial::Absent);
                    self.parent_used(p);
                }
            }
            READLINK | READLINKAT => {
                if let (Some(p), true) = (&p0, ok) {
                    self.first(p, Initial::Exists(Seen::Symlink));
                    if let Some(s) = self.state(p) {
                        s.link_len = s.link_len.max(rec.result as u64);
                    }
                    self.parent_used(p);
                }
            }
            TRUNCATE => {
                if let (Some(p), true) = (&p0, ok) {
                    self.first(p, Initial::Exists(Seen::File));
                    self.parent_used(p);
                    self.modified(p);
                }
            }
            CHDIR => {
                if let (Some(p), true) = (&p0, ok) {
                    self.first(p, Initial::Exists(Seen::Dir));
                    self.parent_used(p);
                    proc.cwd = p.clone();
                }
            }
            FCHDIR => {
                if let (Some(p), true) = (fds.first().and_then(|&f| fd_path(proc, f)), ok) {
                    proc.cwd = p;
                }
            }
            ACCESS | FACCESSAT | STATFS | CHMOD | FCHMODAT | CHOWN | LCHOWN | FCHOWNAT
            | UTIMENSAT | SETXATTR | LSETXATTR | GETXATTR | LGETXATTR | LISTXATTR | LLISTXATTR
            | REMOVEXATTR | LREMOVEXATTR => {
                if let Some(p) = &p0 {
                    if ok || errno == libc::ENODATA || errno == libc::ERANGE {
                        self.first(p, Initial::Exists(Seen::Unknown));
                        self.parent_used(p);
                    } else if errno == libc::ENOENT {
                        self.first(p, Initial::Absent);
                    }
                }
            }
            _ => {}
        }

        // Data: what reads say about sizes, what writes change, where positions move.
        if let Some(&fd) = fds.first() {
            let size = rec.size().unwrap_or(0);
            if reads(call) && ok {
                let f = proc.fds.get(&fd).cloned().unwrap_or_default();
                let at = match call {
                    PREAD | PREADV | PREADV2 => rec.off(0).map(|o| o.max(0) as u64),
                    _ => f.pos,
                };
                if let (Some(p), Some(at)) = (f.path, at) {
                    let got = rec.result as u64;
                    let eof = if call == FGETS { got == 0 } else { got < size };
                    self.extent(&p, at + got, eof);
                }
            }
            if writes(call) {
                if let Some(p) = fd_path(proc, fd) {
                    self.modified(&p);
                }
            }
            if call == LSEEK && ok {
                let whence = rec.int(0).unwrap_or(0) as i32;
                let off = rec.off(0).unwrap_or(0);
                if let Some(f) = proc.fds.get_mut(&fd) {
                    f.pos = Some(rec.result as u64);
                    if whence == libc::SEEK_END {
                        if let Some(p) = f.path.clone() {
                            self.exact_size(&p, (rec.result - off).max(0) as u64);
                        }
                    }
                }
            }
            if matches!(call, FSEEK | FSEEKO) && ok {
                let whence = rec.int(0).unwrap_or(0) as i32;
                let off = rec.off(0).unwrap_or(0);
                if let Some(f) = proc.fds.get_mut(&fd) {
                    f.pos = match whence {
                        libc::SEEK_SET => Some(off.max(0) as u64),
                        libc::SEEK_CUR => f.pos.map(|p| (p as i64 + off).max(0) as u64),
                        _ => None,
                    };
                }
            }
            if matches!(call, FTELL | FTELLO) && ok {
                if let Some(f) = proc.fds.get_mut(&fd) {
                    f.pos = Some(rec.result as u64);
                }
            }
            if moves(call) && ok {
                if let Some(f) = proc.fds.get_mut(&fd) {
                    let n = if call == FPUTS {
                        size
                    } else {
                        rec.result as u64
                    };
                    f.pos = f.pos.map(|p| p + n);
                }
            }
            if call == SENDFILE || call == COPY_FILE_RANGE {
                // Output descriptor first for sendfile, second for copy_file_range.
                let out = if call == SENDFILE {
                    fds.first()
                } else {
                    fds.get(1)
                };
                if let Some(p) = out.and_then(|&f| fd_path(proc, f)) {
                    self.modified(&p);
                }
            }
        }
        (mapped, outside, keys)
    }
}

/// The entries to create, parents first, in replay paths.
fn initial_tree(
    states: &BTreeMap<PathBuf, PathState>,
    root: &Path,
    target: &Path,
) -> Vec<(PathBuf, Kind)> {
    let mut out: BTreeMap<PathBuf, Kind> = BTreeMap::new();
    let existed = |s: &PathState| matches!(s.initial, Some(Initial::Exists(_)));
    for (p, s) in states {
        if !existed(s) || p == root {
            continue;
        }
        let has_children = states
            .range(p.clone()..)
            .skip(1)
            .take_while(|(q, _)| q.starts_with(p))
            .any(|(_, c)| existed(c));
        let size = s.exact.unwrap_or(s.min_size);
        let kind = match s.initial {
            Some(Initial::Exists(Seen::Dir)) => Kind::Dir,
            Some(Initial::Exists(Seen::Symlink)) => Kind::Symlink(s.link_len.max(1)),
            _ if has_children => Kind::Dir,
            _ => Kind::File(size),
        };
        out.insert(p.clone(), kind);
    }
    // Parents of everything created are directories.
    let paths: Vec<PathBuf> = out.keys().cloned().collect();
    for p in paths {
        let mut d = p.parent();
        while let Some(dir) = d {
            if dir == root || !dir.starts_with(root) {
                break;
            }
            out.insert(dir.to_path_buf(), Kind::Dir);
            d = dir.parent();
        }
    }
    out.into_iter()
        .map(|(p, k)| {
            let rel = p.strip_prefix(root).expect("under the root");
            (target.join(rel), k)
        })
        .collect()
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
        };
        // An open that got fd 5 ends at 14, after a close of 5 that started at 12.
        assert_eq!(order_time(&rec(OPENAT, 10, 4, 5)), 14);
        assert_eq!(order_time(&rec(CLOSE, 12, 1, 0)), 12);
        // Failed, it made none; other calls are ordered by their start.
        assert_eq!(order_time(&rec(OPENAT, 10, 4, -2)), 10);
        assert_eq!(order_time(&rec(STAT, 10, 4, 0)), 10);
    }

    #[test]
    fn paths_normalize_lexically() {
        assert_eq!(normalize(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
        assert_eq!(normalize(Path::new("/../x")), PathBuf::from("/x"));
    }

    #[test]
    fn fopen_modes() {
        assert_eq!(fopen_flags(b"r"), libc::O_RDONLY);
        assert_eq!(fopen_flags(b"r+"), libc::O_RDWR);
        assert_eq!(
            fopen_flags(b"w"),
            libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC
        );
        assert_eq!(
            fopen_flags(b"a+"),
            libc::O_RDWR | libc::O_CREAT | libc::O_APPEND
        );
        assert_eq!(
            fopen_flags(b"wx"),
            libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_EXCL
        );
    }

    #[test]
    fn roles_of_string_items() {
        assert_eq!(path_role(id::OPENAT, 0), Some(Some(0)));
        assert_eq!(path_role(id::RENAMEAT, 1), Some(Some(1)));
        assert_eq!(path_role(id::FOPEN, 1), None);
        assert_eq!(path_role(id::SETXATTR, 1), None);
        assert_eq!(path_role(id::SYMLINK, 0), None);
        assert_eq!(path_role(id::SYMLINK, 1), Some(None));
        assert_eq!(path_role(id::STAT, 0), Some(None));
    }
}
