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
//! `index::order_time`). Each names some objects: the paths it resolves, the parent directory
//! of a name it creates or removes, the file behind a descriptor. A record waits for the last
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

mod calls;
mod index;
mod learn;
mod planner;
mod sim;
mod tree;

use std::collections::HashMap;
use std::ffi::CString;
use std::path::{Path, PathBuf};

pub(crate) use calls::fopen_flags;
pub use index::{Index, ThreadInfo, index};
pub use tree::Kind;

use crate::error::Error;
use crate::trace::{Record, TraceHeader};
use calls::normalize;
use index::{Entry, ThreadCursor};
use planner::{Key, Planned, Planner};
use sim::ProcSim;
use tree::Tree;

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
        /// Its path items relative to the replay directory (in signature order; `None` for a
        /// null path or an item that is not a path; for a symbolic link's target, the target
        /// to create it with when it is not the traced one).
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

/// Every step of a trace in the order they started, planned: what the planner makes of each.
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
    procs: HashMap<u32, ProcSim>,
    tree: Tree,
    last: HashMap<Key, (u32, u32)>,
    fork_step: HashMap<u32, (u32, u32, u64)>,
    prev_end: Vec<Option<u64>>,
}

impl<'a> Steps<'a> {
    /// Plans the replay of the trace `trace` (indexed as `index`), traced paths under `root`
    /// (default: where the traced command started) mapped to paths relative to the replay
    /// directory.
    pub fn new(index: &'a Index, trace: &'a Path, root: Option<&Path>) -> Result<Steps<'a>, Error> {
        let file = profile_store::open::regular(trace)
            .map_err(|e| Error::io(format!("opening {}", trace.display()), e))?;
        let root = root.map_or_else(|| index.header.root.clone(), normalize);
        let mut cursors = ThreadCursor::all(index);
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
                procs: HashMap::new(),
                tree: Tree::new(root),
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

    /// What to create before replaying (once every step was taken): paths relative to the
    /// replay directory and kinds, parents before children.
    pub fn tree(&self) -> Vec<(PathBuf, Kind)> {
        self.state.tree.initial()
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
        let root = self.tree.root();
        let proc = self
            .procs
            .entry(pid)
            .or_insert_with(|| ProcSim::new(root.to_path_buf()));
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
                    tree: &mut self.tree,
                };
                let Planned {
                    paths,
                    outside,
                    keys,
                } = planner.visit(pid, proc, &rec);
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
