//! Planning a replay: the trace's records grouped by traced thread, every path resolved (against
//! the process's working directory and descriptors, as the program saw them) and mapped into
//! the replay directory, the order kept between threads that touched the same file or
//! directory, the fork points where a child's descriptor table is copied, and the tree the
//! trace needed when it started.
//!
//! # Order
//!
//! All records (and forks) are visited in the order they started. Each names some objects: the
//! paths it resolves, the parent directory of a name it creates or removes, the file behind a
//! descriptor. A record waits for the last record of another thread that named one of its
//! objects; since every wait points to an earlier record, there are no cycles.
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
use crate::trace::{ReadReport, Record, TraceHeader, TraceReader};

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
#[derive(Debug)]
pub struct ThreadPlan {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Its steps in order.
    pub steps: Vec<Step>,
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

/// A replay plan.
#[derive(Debug)]
pub struct Plan {
    /// The trace header.
    pub header: TraceHeader,
    /// The traced threads.
    pub threads: Vec<ThreadPlan>,
    /// What to create before replaying: replay paths and kinds, parents before children.
    pub tree: Vec<(PathBuf, Kind)>,
    /// What reading the trace found.
    pub read: ReadReport,
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

/// Reads the trace and plans its replay into `target` with traced paths under `root` mapped
/// there; refuses, as soon as it is read that far, a trace whose calls would take more than
/// `budget` bytes (at [`super::BYTES_PER_CALL`] a call).
pub fn plan(trace: &Path, target: &Path, root: Option<&Path>, budget: u64) -> Result<Plan, Error> {
    let most = budget / super::BYTES_PER_CALL;
    let mut held = 0u64;
    let mut reader = TraceReader::open(trace)?;
    let header = reader.header().clone();
    let root = root.map_or_else(|| header.root.clone(), normalize);

    // Records by slot, and each slot's identity.
    let mut slots: BTreeMap<u32, (abi::ChunkHeader, Vec<Record>)> = BTreeMap::new();
    while let Some(chunk) = reader.next_chunk()? {
        let mut it = chunk.records();
        let entry = slots
            .entry(chunk.header.slot)
            .or_insert_with(|| (chunk.header, Vec::new()));
        loop {
            let mut rec = Record::default();
            match it.next_into(&mut rec) {
                Ok(true) => {
                    held += 1;
                    if held > most {
                        return Err(Error::Config(format!(
                            "{}: too large to replay here: a replay holds the whole trace in \
                             memory (about {} bytes a call), and it has more than {most} calls, \
                             over the {} MiB allowed (--max-memory; default half of the memory \
                             available)",
                            trace.display(),
                            super::BYTES_PER_CALL,
                            budget >> 20
                        )));
                    }
                    entry.1.push(rec)
                }
                Ok(false) => break,
                Err(_) => {
                    // Counted by the reader's report through for_each_record; here by hand.
                    break;
                }
            }
        }
    }
    let mut read = reader.report().clone();
    read.records = slots.values().map(|(_, r)| r.len() as u64).sum();

    // Threads: (pid, tid), records in start order.
    let mut thread_of: BTreeMap<(u32, u32), usize> = BTreeMap::new();
    let mut threads: Vec<ThreadPlan> = Vec::new();
    let mut slot_thread: HashMap<u32, usize> = HashMap::new();
    let mut calls: Vec<Vec<Record>> = Vec::new();
    for (&slot, (h, _)) in &slots {
        let t = *thread_of.entry((h.pid, h.tid)).or_insert_with(|| {
            threads.push(ThreadPlan {
                pid: h.pid,
                tid: h.tid,
                steps: Vec::new(),
            });
            calls.push(Vec::new());
            threads.len() - 1
        });
        slot_thread.insert(slot, t);
    }
    let mut forks: Vec<(usize, u64, u32)> = Vec::new(); // (parent thread, time, child pid)
    let mut forked_pids = std::collections::HashSet::new();
    for (&slot, (h, recs)) in &mut slots {
        calls[slot_thread[&slot]].append(recs);
        if h.origin == Origin::Fork.code() && forked_pids.insert(h.pid) {
            let parent = slot_thread
                .get(&h.parent_slot)
                .copied()
                .or_else(|| thread_of.get(&(h.ppid, h.ppid)).copied());
            if let Some(p) = parent {
                forks.push((p, h.born, h.pid));
            }
        }
    }

    // Each thread's sequence: its records by start, forks slotted in by time.
    let mut seq: Vec<Vec<(u64, Entry)>> = Vec::new();
    for (t, recs) in calls.iter_mut().enumerate() {
        recs.sort_by_key(|r| r.start);
        let mut s: Vec<(u64, Entry)> = recs
            .drain(..)
            .map(|r| (r.start, Entry::Call(Some(r))))
            .collect();
        for &(_, time, child) in forks.iter().filter(|f| f.0 == t) {
            let at = s.partition_point(|e| e.0 < time);
            s.insert(at, (time, Entry::Fork(child)));
        }
        seq.push(s);
    }

    // Visit everything in start order.
    let mut order: Vec<(u64, u32, u32)> = Vec::new();
    for (t, s) in seq.iter().enumerate() {
        for (i, e) in s.iter().enumerate() {
            order.push((e.0, t as u32, i as u32));
        }
    }
    order.sort_unstable();

    let mut procs: HashMap<u32, ProcSim> = HashMap::new();
    let mut tree: BTreeMap<PathBuf, PathState> = BTreeMap::new();
    let mut last: HashMap<Key, (u32, u32)> = HashMap::new();
    let mut fork_step: HashMap<u32, (u32, u32, u64)> = HashMap::new();
    let mut steps: Vec<Vec<Option<Step>>> = seq
        .iter()
        .map(|s| s.iter().map(|_| None).collect())
        .collect();
    let mut prev_end: Vec<Option<u64>> = vec![None; seq.len()];
    let mut planner = Planner {
        root: &root,
        target,
        tree: &mut tree,
    };

    for &(_, t, i) in &order {
        let (ti, ii) = (t as usize, i as usize);
        let pid = threads[ti].pid;
        let entry = &mut seq[ti][ii];
        let mut deps = Vec::new();
        // A forked child's first step waits for its fork.
        let mut forked_at = None;
        if ii == 0 {
            if let Some(&(ft, fi, time)) = fork_step.get(&pid) {
                if ft != t {
                    deps.push((ft, fi));
                    forked_at = Some(time);
                }
            }
        }
        let kind = if let Entry::Fork(child) = entry.1 {
            let parent = procs.entry(pid).or_insert_with(|| ProcSim {
                cwd: root.clone(),
                ..ProcSim::default()
            });
            let copy = parent.clone();
            procs.insert(child, copy);
            fork_step.insert(child, (t, i, entry.0));
            StepKind::Fork { child }
        } else {
            let Entry::Call(rec) = &mut entry.1 else {
                unreachable!("forks are handled above")
            };
            let rec = rec.take().expect("each record is visited once");
            let proc = procs.entry(pid).or_insert_with(|| ProcSim {
                cwd: root.clone(),
                ..ProcSim::default()
            });
            let (paths, outside, keys) = planner.visit(pid, proc, &rec);
            for k in keys {
                if let Some(&(lt, li)) = last.get(&k) {
                    if lt != t && !deps.contains(&(lt, li)) {
                        deps.push((lt, li));
                    }
                }
                last.insert(k, (t, i));
            }
            // The gap since this thread's previous call; a fork child's first call counts from
            // the fork; other threads' first calls start at once.
            let think = match (prev_end[ti], forked_at) {
                (Some(e), _) => rec.start.saturating_sub(e),
                (None, Some(f)) => rec.start.saturating_sub(f),
                (None, None) => 0,
            };
            prev_end[ti] = Some(rec.end());
            let think_ns = header.cycles_to_ns(think);
            steps[ti][ii] = Some(Step {
                kind: StepKind::Call {
                    rec,
                    paths,
                    outside,
                },
                deps,
                think_ns,
            });
            continue;
        };
        steps[ti][ii] = Some(Step {
            kind,
            deps,
            think_ns: 0,
        });
    }
    for (t, s) in steps.into_iter().enumerate() {
        threads[t].steps = s
            .into_iter()
            .map(|s| s.expect("every step visited"))
            .collect();
    }
    let tree = initial_tree(&tree, &root, target);
    Ok(Plan {
        header,
        threads,
        tree,
        read,
    })
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
        let makes_fd = matches!(
            call,
            OPEN | OPENAT | CREAT | DUP | DUP2 | DUP3 | FOPEN | FREOPEN | OPENDIR
        ) || call == FCNTL
            && matches!(
                rec.int(0).map(|c| c as i32),
                Some(libc::F_DUPFD | libc::F_DUPFD_CLOEXEC)
            );
        if makes_fd && ok {
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
