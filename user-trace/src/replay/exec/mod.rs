//! Executing a replay plan: one thread per traced thread, each traced process's descriptors
//! in a table (traced number → the replay's handle), waits for the steps other threads must
//! finish first, and the traced think times when asked. The calls themselves are replayed by
//! family: on paths ([`names`], beneath the replay directory), on descriptors
//! ([`descriptors`]) and on streams ([`streams`]).

mod descriptors;
mod names;
mod streams;
mod table;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use profile_store::bucket::{BucketMap, Resolution};

use crate::abi::{self, BUCKETS, CALLS, id, is_lock_cmd};
use crate::replay::plan::{Step, StepKind, ThreadInfo};
use crate::replay::root::{Refusal, Root};
use crate::sys::calls::StatInfo;
use crate::trace::{Record, format_call, format_result};
use table::{Call, Outcome, Skip, Table, lock};

/// Refused calls listed per thread (all are counted).
pub const REFUSALS_LISTED: usize = 5;

/// Waits between threads: how many steps each thread has finished.
struct Progress {
    done: Vec<AtomicUsize>,
    waiters: AtomicUsize,
    lock: Mutex<()>,
    cv: Condvar,
}

impl Progress {
    fn new(threads: usize) -> Progress {
        Progress {
            done: (0..threads).map(|_| AtomicUsize::new(0)).collect(),
            waiters: AtomicUsize::new(0),
            lock: Mutex::new(()),
            cv: Condvar::new(),
        }
    }

    /// Waits until thread `t` has finished its step `i`.
    fn wait(&self, t: u32, i: u32) {
        let (t, i) = (t as usize, i as usize);
        if self.done[t].load(Ordering::SeqCst) > i {
            return;
        }
        let mut g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.waiters.fetch_add(1, Ordering::SeqCst);
        while self.done[t].load(Ordering::SeqCst) <= i {
            g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
        self.waiters.fetch_sub(1, Ordering::SeqCst);
    }

    /// Thread `t` finished its step `i`.
    fn complete(&self, t: usize, i: usize) {
        self.done[t].store(i + 1, Ordering::SeqCst);
        if self.waiters.load(Ordering::SeqCst) > 0 {
            let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.cv.notify_all();
        }
    }
}

/// A call whose replayed result differs from the traced one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// Traced process.
    pub pid: u32,
    /// Traced thread.
    pub tid: u32,
    /// The traced call as strace prints it, with its traced result.
    pub call: String,
    /// What the replay got.
    pub got: String,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "mismatch: {}/{} {}, replay {}",
            self.pid, self.tid, self.call, self.got
        )
    }
}

/// A call the replay refused to issue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// Traced process.
    pub pid: u32,
    /// Traced thread.
    pub tid: u32,
    /// The traced call as strace prints it, with its traced result.
    pub call: String,
    /// Why.
    pub why: Refusal,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "refused: {}/{} {}: {}",
            self.pid,
            self.tid,
            self.call,
            self.why.reason()
        )
    }
}

/// What one replay thread did.
#[derive(Debug)]
pub struct ThreadOutcome {
    /// Per call id: count, total cycles, buckets.
    pub counters: Vec<[u64; 2 + BUCKETS]>,
    /// Calls replayed.
    pub replayed: u64,
    /// Calls on paths outside the root.
    pub outside: u64,
    /// Calls on descriptors the replay does not have.
    pub no_fd: u64,
    /// Calls the replay does not issue.
    pub unsupported: u64,
    /// Calls refused (see [`crate::replay::root`]).
    pub refused: u64,
    /// The first of them.
    pub refusals: Vec<Refused>,
    /// Mismatches found.
    pub mismatches: u64,
    /// The first of them.
    pub listed: Vec<Mismatch>,
    /// When the thread's last call ended (the replay's elapsed time is the latest of these, not
    /// when the progress loop noticed).
    pub ended: Instant,
}

/// State shared by the replay threads.
pub struct Shared<'a> {
    threads: &'a [ThreadInfo],
    root: &'a Root,
    progress: Progress,
    tables: Mutex<HashMap<u32, Arc<Mutex<Table>>>>,
    recorded: bool,
    list_limit: usize,
    /// Calls finished so far, over all threads (for progress reports).
    pub finished: AtomicU64,
    /// Opened when the threads may start (the first steps are queued).
    go: (Mutex<bool>, Condvar),
}

impl<'a> Shared<'a> {
    /// State for replaying `threads` in `root`; `recorded` keeps the traced think times.
    pub fn new(
        threads: &'a [ThreadInfo],
        root: &'a Root,
        recorded: bool,
        list_limit: usize,
    ) -> Shared<'a> {
        Shared {
            threads,
            root,
            progress: Progress::new(threads.len()),
            tables: Mutex::new(HashMap::new()),
            recorded,
            list_limit,
            finished: AtomicU64::new(0),
            go: (Mutex::new(false), Condvar::new()),
        }
    }

    /// Lets the replay threads start.
    pub fn start(&self) {
        *lock(&self.go.0) = true;
        self.go.1.notify_all();
    }

    fn table(&self, pid: u32) -> Arc<Mutex<Table>> {
        let mut t = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        t.entry(pid).or_default().clone()
    }

    /// Replays thread `t`: the steps `steps` brings, in order, until it closes.
    pub fn run_thread(&self, t: usize, steps: std::sync::mpsc::Receiver<Step>) -> ThreadOutcome {
        let th = &self.threads[t];
        let map = BucketMap::new(Resolution::ONE);
        let mut out = ThreadOutcome {
            counters: vec![[0; 2 + BUCKETS]; CALLS.len()],
            replayed: 0,
            outside: 0,
            no_fd: 0,
            unsupported: 0,
            refused: 0,
            refusals: Vec::new(),
            mismatches: 0,
            listed: Vec::new(),
            ended: Instant::now(),
        };
        let mut buf = Vec::new();
        let mut open = lock(&self.go.0);
        while !*open {
            open = self.go.1.wait(open).unwrap_or_else(|e| e.into_inner());
        }
        drop(open);
        let mut prev_end = Instant::now();
        for (i, step) in steps.iter().enumerate() {
            for &(dt, di) in &step.deps {
                self.progress.wait(dt, di);
            }
            if self.recorded && step.think_ns > 0 {
                wait_until(prev_end + Duration::from_nanos(step.think_ns));
            }
            self.step(th.pid, th.tid, &step, &mut buf, &map, &mut out);
            prev_end = Instant::now();
            self.progress.complete(t, i);
            self.finished.fetch_add(1, Ordering::Relaxed);
        }
        out.ended = prev_end;
        out
    }

    fn step(
        &self,
        pid: u32,
        tid: u32,
        step: &Step,
        buf: &mut Vec<u8>,
        map: &BucketMap,
        out: &mut ThreadOutcome,
    ) {
        match &step.kind {
            StepKind::Fork { child } => {
                let parent = self.table(pid);
                let mut copy = Table::default();
                for (&k, h) in lock(&parent).fds.iter_mut() {
                    if let Some(d) = h.dup() {
                        copy.fds.insert(k, d);
                    }
                }
                *lock(&self.table(*child)) = copy;
            }
            StepKind::Call { outside: true, .. } => out.outside += 1,
            StepKind::Call { rec, paths, .. } => {
                let table = self.table(pid);
                let mut call = Call {
                    rec,
                    paths,
                    table: &table,
                    root: self.root,
                    buf,
                };
                let t0 = profile_store::clock::now();
                let r = run_call(&mut call);
                let cycles = profile_store::clock::now().saturating_sub(t0);
                match r {
                    Ok((got, st)) => {
                        out.replayed += 1;
                        let c = &mut out.counters[rec.call as usize];
                        c[0] += 1;
                        c[1] = c[1].wrapping_add(cycles);
                        c[2 + map.bucket(cycles)] += 1;
                        if let Some(why) = mismatch(rec, got, st) {
                            out.mismatches += 1;
                            if out.listed.len() < self.list_limit {
                                out.listed.push(Mismatch {
                                    pid,
                                    tid,
                                    call: format!("{} = {}", format_call(rec), format_result(rec)),
                                    got: why,
                                });
                            }
                        }
                    }
                    Err(Skip::Fd) => out.no_fd += 1,
                    Err(Skip::Unsupported) => out.unsupported += 1,
                    Err(Skip::Refused(why)) => {
                        out.refused += 1;
                        if out.refusals.len() < REFUSALS_LISTED {
                            out.refusals.push(Refused {
                                pid,
                                tid,
                                call: format!("{} = {}", format_call(rec), format_result(rec)),
                                why,
                            });
                        }
                    }
                }
            }
        }
    }
}

/// Replays one traced call, by family.
fn run_call(c: &mut Call) -> Outcome {
    names::run(c)
        .or_else(|| descriptors::run(c))
        .or_else(|| streams::run(c))
        .unwrap_or(Err(Skip::Unsupported))
}

/// Waits until `t`: sleeps for most of a long wait, spins the last stretch.
fn wait_until(t: Instant) {
    const SPIN: Duration = Duration::from_micros(100);
    loop {
        let now = Instant::now();
        if now >= t {
            return;
        }
        let left = t - now;
        if left > SPIN {
            std::thread::sleep(left - SPIN);
        } else {
            std::hint::spin_loop();
        }
    }
}

/// A result as text.
fn result_text(v: i64) -> String {
    format_result(&Record {
        result: v,
        ..Record::default()
    })
}

/// Why the replayed result differs from the traced one, if it does.
fn mismatch(rec: &Record, got: i64, st: Option<StatInfo>) -> Option<String> {
    use id::*;
    let traced = rec.result;
    let differ = if traced < 0 || got < 0 {
        traced != got
    } else {
        match rec.call {
            // New descriptors are numbered by the replay's own table.
            OPEN | OPENAT | CREAT | DUP | DUP2 | DUP3 | FOPEN | FDOPEN | FREOPEN | OPENDIR
            | FDOPENDIR => false,
            // Values that depend on the file system (flags, name lengths, labels).
            FCNTL if !is_lock_cmd(rec.int(0).unwrap_or(0)) => false,
            READLINK | READLINKAT | LISTXATTR | LLISTXATTR | FLISTXATTR => false,
            // Directory listings: entries come in another order and size; compare the end.
            GETDENTS64 | FGETS => (traced > 0) != (got > 0),
            _ => traced != got,
        }
    };
    if differ {
        return Some(result_text(got));
    }
    if let (Some((mode, size)), Some((_, got_size))) = (rec.stat(), st) {
        if mode as u32 & libc::S_IFMT == libc::S_IFREG && size != got_size {
            return Some(format!(
                "{} with size {got_size} (traced {size})",
                result_text(got)
            ));
        }
    }
    None
}

/// The calls of a finished replay as a user layer.
pub fn layer(outcomes: &[ThreadOutcome]) -> profile_store::Layer {
    let mut layer = profile_store::Layer::new("user", Resolution::ONE);
    for (c, spec) in abi::CALLS.iter().enumerate() {
        let mut op = profile_store::OpProfile::new(spec.name, BUCKETS, 1);
        for o in outcomes {
            let k = &o.counters[c];
            op.count += k[0];
            op.total = op.total.wrapping_add(k[1]);
            for (b, v) in op.epochs[0].iter_mut().zip(&k[2..]) {
                *b += v;
            }
        }
        if op.count > 0 {
            layer.ops.push(op);
        }
    }
    layer
        .ops
        .sort_by(|a, b| profile_store::ops::listing_order(&a.name, &b.name));
    layer
}
