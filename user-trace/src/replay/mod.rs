//! `fsprof replay`: re-executes a trace against another directory (ULTra's trace replay).
//!
//! * Paths under the root (by default the directory the traced command started in) are mapped
//!   into the replay directory; calls on paths outside it, and on descriptors the trace did not
//!   open (standard streams, pipes), are not replayed and are counted as such.
//! * First the tree the trace needed at its start is created: directories, and files with
//!   their sizes (see [`plan`] for how they are inferred); traces hold no file data, so files
//!   are filled with a pattern, and writes write one.
//! * Each traced thread is replayed on its own thread, each traced process has its own
//!   descriptor table (copied at forks), and calls that touched the same file or directory in
//!   different threads keep their traced order.
//! * [`Timing::Recorded`] keeps the traced time between a thread's calls; [`Timing::Fast`]
//!   drops it.
//! * Every replayed call is timed into a user layer, so replays compare with `fsprof compare`.
//! * A call whose result differs from the trace's (another errno, a short read, a stat of
//!   another size) is a mismatch: counted and listed.
//!
//! The trace is streamed: a first pass notes where each thread's chunks lie, a second plans
//! every call to find the tree the trace needed at its start, and a third plans them again and
//! feeds each replay thread through a bounded queue, reading one chunk per traced thread at a
//! time ([`plan::Steps`]). Memory grows with the traced threads (a decoded chunk and a queue
//! each, within [`ReplayConfig::max_memory`]) and with the objects the trace names (paths,
//! descriptors), not with its calls. The queues are filled before the replay threads start, so
//! a trace that fits in them is planned before the clock starts, and one that does not is
//! planned beside the replay.
//!
//! Limitations: `fgets`
//! and directory listings are compared loosely (line lengths of files the trace only read are
//! not known; entries come in the file system's order); fcntl commands other than locks,
//! descriptor duplication and flags are not replayed.

mod create;
mod exec;
pub mod plan;
mod root;

use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use profile_store::{ClockInfo, Profile};

pub use exec::{Mismatch, REFUSALS_LISTED, Refused};
pub use root::Refusal;
use root::Root;

use crate::error::Error;
use crate::trace::ReadReport;

/// How to space a thread's calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Timing {
    /// Keep the traced time between a thread's calls (the application's own work).
    #[default]
    Recorded,
    /// Issue each call as soon as the previous one (and the calls it waits for) returned.
    Fast,
}

impl std::str::FromStr for Timing {
    type Err = String;

    fn from_str(s: &str) -> Result<Timing, String> {
        match s {
            "recorded" => Ok(Timing::Recorded),
            "fast" => Ok(Timing::Fast),
            _ => Err(format!("timing '{s}': expected recorded or fast")),
        }
    }
}

/// What to replay where.
#[derive(Debug, Clone)]
pub struct ReplayConfig {
    /// The trace.
    pub trace: PathBuf,
    /// The directory to replay in (created if missing; should be empty).
    pub dir: PathBuf,
    /// Traced paths under this prefix are mapped to `dir`. Default: the directory the traced
    /// command started in.
    pub root: Option<PathBuf>,
    /// Timing. Default: recorded.
    pub timing: Timing,
    /// Mismatches listed in the report (all are counted). Default 1000.
    pub list_limit: usize,
    /// The memory the replay's queues and chunks may take, in bytes (a queued call estimated at
    /// [`BYTES_PER_CALL`]); a trace with too many threads for even short queues is refused.
    /// Default (`None`): half of the memory available (`MemAvailable` in `/proc/meminfo`).
    pub max_memory: Option<u64>,
    /// Make the files the trace needed sparse (their sizes, no data) instead of filling them:
    /// for traces of huge or sparse files, whose reads then read holes. Default: filled, and a
    /// tree larger than the space free in `dir` is refused before anything is written.
    pub sparse: bool,
}

/// Memory a planned call takes (the call, its strings, its place in a queue), as measured on
/// a Postmark trace.
pub const BYTES_PER_CALL: u64 = 550;

/// Half of the memory available now (`MemAvailable`), or 1 GiB if `/proc/meminfo` says
/// nothing.
pub fn default_max_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemAvailable:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(1 << 30, |kib| kib * 1024 / 2)
}

impl ReplayConfig {
    /// A configuration with the defaults.
    pub fn new(trace: impl Into<PathBuf>, dir: impl Into<PathBuf>) -> ReplayConfig {
        ReplayConfig {
            trace: trace.into(),
            dir: dir.into(),
            root: None,
            timing: Timing::Recorded,
            list_limit: 1000,
            max_memory: None,
            sparse: false,
        }
    }
}

/// What a replay did.
#[derive(Debug, Clone)]
pub struct ReplayReport {
    /// The root the traced paths were mapped from.
    pub root: PathBuf,
    /// The directory they were replayed in.
    pub dir: PathBuf,
    /// Directories and files created before replaying.
    pub created_dirs: u64,
    /// Files created before replaying, and their bytes.
    pub created_files: u64,
    /// Bytes written into them.
    pub created_bytes: u64,
    /// Traced threads replayed (one replay thread each).
    pub threads: usize,
    /// Calls replayed.
    pub calls: u64,
    /// Calls not replayed because a path lay outside the root.
    pub skipped_outside: u64,
    /// Calls not replayed because their descriptor was not opened by the trace.
    pub skipped_descriptor: u64,
    /// Calls the replay does not issue.
    pub skipped_unsupported: u64,
    /// Calls refused: their paths lead out of the replay directory, or they would remove or
    /// replace it.
    pub refused: u64,
    /// The first of them (a few per thread, at most [`REFUSALS_LISTED`] in all).
    pub refusals: Vec<Refused>,
    /// Mismatches found.
    pub mismatches: u64,
    /// The first of them (up to the configured limit).
    pub listed: Vec<Mismatch>,
    /// Wall time of the replay proper (after creating the tree).
    pub elapsed: Duration,
    /// The replay's user-level profile.
    pub profile: Profile,
    /// What reading the trace found (torn tail, damage).
    pub read: ReadReport,
}

impl fmt::Display for ReplayReport {
    /// The report as `fsprof replay` prints it; the last line is `replayed N calls, M
    /// mismatches`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for p in self.read.problems() {
            writeln!(f, "trace: {p}")?;
        }
        writeln!(
            f,
            "created {} directories and {} files ({} bytes) as the trace found them",
            self.created_dirs, self.created_files, self.created_bytes
        )?;
        for m in &self.listed {
            writeln!(f, "{m}")?;
        }
        if self.mismatches > self.listed.len() as u64 {
            writeln!(
                f,
                "... and {} more mismatches",
                self.mismatches - self.listed.len() as u64
            )?;
        }
        if self.refused > 0 {
            writeln!(
                f,
                "refused {} calls that would have reached outside {} (through a symbolic link \
                 or ..) or replaced it; the first {}:",
                self.refused,
                self.dir.display(),
                self.refusals.len()
            )?;
            for r in &self.refusals {
                writeln!(f, "  {r}")?;
            }
        }
        let skipped = self.skipped_outside + self.skipped_descriptor + self.skipped_unsupported;
        if skipped > 0 {
            writeln!(
                f,
                "not replayed: {} calls outside {}, {} on descriptors the trace did not open, {} unsupported",
                self.skipped_outside,
                self.root.display(),
                self.skipped_descriptor,
                self.skipped_unsupported
            )?;
        }
        writeln!(
            f,
            "{} thread{} in {:.3} s",
            self.threads,
            if self.threads == 1 { "" } else { "s" },
            self.elapsed.as_secs_f64()
        )?;
        write!(
            f,
            "replayed {} calls, {} mismatches",
            self.calls, self.mismatches
        )
    }
}

/// Feeds the planned steps to the replay threads' queues: fills them before the threads start
/// (then `start` is set), so that planning does not run beside the replay while there is room;
/// past that, one step at a time as room is made.
fn feed(
    steps: &mut plan::Steps,
    queues: &[std::sync::mpsc::SyncSender<plan::Step>],
    shared: &exec::Shared,
    start: &mut Instant,
    progress: Option<&(dyn Fn(u64, u64) + Sync)>,
    total: u64,
) -> Result<(), Error> {
    use std::sync::mpsc::TrySendError;
    let mut started = false;
    let mut reported = Instant::now();
    let result = (|| {
        while let Some((t, step)) = steps.next_step()? {
            if !started {
                match queues[t].try_send(step) {
                    Ok(()) => continue,
                    Err(TrySendError::Full(step)) => {
                        started = true;
                        *start = Instant::now();
                        shared.start();
                        let _ = queues[t].send(step);
                    }
                    Err(TrySendError::Disconnected(_)) => {}
                }
                continue;
            }
            // A thread that ended early (it panicked) takes no more.
            let _ = queues[t].send(step);
            if let Some(report) = progress {
                if reported.elapsed() >= Duration::from_millis(200) {
                    report(shared.finished.load(Ordering::Relaxed), total);
                    reported = Instant::now();
                }
            }
        }
        Ok(())
    })();
    if !started {
        *start = Instant::now();
    }
    result
}

/// Calls a replay thread may have queued, at least.
const QUEUE_MIN: u64 = 64;

/// Memory a decoded chunk may take while its calls are merged: up to 64 KiB of trace, about
/// 2,500 calls of Postmark, each a record with its arguments (an upper estimate).
const CHUNK_DECODED: u64 = 1 << 20;

/// Replays `config.trace` in `config.dir`. `progress`, when given, is called about every
/// 200 ms with the calls finished and the total.
pub fn replay(
    config: &ReplayConfig,
    progress: Option<&(dyn Fn(u64, u64) + Sync)>,
) -> Result<ReplayReport, Error> {
    let dir = std::path::absolute(&config.dir)
        .map_err(|e| Error::io(format!("finding {}", config.dir.display()), e))?;
    let budget = config.max_memory.unwrap_or_else(default_max_memory);
    let trace = &config.trace;
    let index = plan::index(trace)?;
    let threads = index.threads.len().max(1) as u64;
    // Streaming takes a chunk being read and a queue of planned calls per thread.
    let chunk = CHUNK_DECODED;
    let least = threads * (chunk + QUEUE_MIN * BYTES_PER_CALL);
    if budget < least {
        return Err(Error::Config(format!(
            "{}: too large to replay here: its {threads} threads need at least {} MiB (a chunk \
             being read and {QUEUE_MIN} queued calls each), over the {} MiB allowed \
             (--max-memory; default half of the memory available)",
            trace.display(),
            least.div_ceil(1 << 20),
            budget >> 20
        )));
    }
    let queue = (budget / threads - chunk) / BYTES_PER_CALL;
    let root = config
        .root
        .clone()
        .unwrap_or_else(|| index.header.root.clone());
    // A first planning pass finds the tree the trace needed at its start.
    let mut pass = plan::Steps::new(&index, trace, config.root.as_deref())?;
    while pass.next_step()?.is_some() {}
    let tree = pass.tree();
    drop(pass);
    std::fs::create_dir_all(&dir)
        .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    let beneath = Root::open(&dir)?;
    let (created_dirs, created_files, created_bytes) =
        create::tree(&tree, &beneath, &dir, config.sparse)?;
    crate::sys::calls::raise_fd_limit();
    let info = ClockInfo::get();
    let started_unix_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);

    // The second pass plans again, feeding each thread's queue as it goes.
    let mut steps = plan::Steps::new(&index, trace, config.root.as_deref())?;
    let shared = exec::Shared::new(
        &index.threads,
        &beneath,
        config.timing == Timing::Recorded,
        config.list_limit,
    );
    let total = index.steps();
    let mut start = Instant::now();
    let outcomes: Vec<exec::ThreadOutcome> = std::thread::scope(|s| {
        let mut queues = Vec::new();
        let handles: Vec<_> = index
            .threads
            .iter()
            .enumerate()
            .map(|(t, th)| {
                let (tx, rx) = std::sync::mpsc::sync_channel(queue.min(th.steps).max(1) as usize);
                queues.push(tx);
                let shared = &shared;
                std::thread::Builder::new()
                    .name(format!("replay-{}", th.tid))
                    .spawn_scoped(s, move || shared.run_thread(t, rx))
            })
            .collect();
        let fed = feed(&mut steps, &queues, &shared, &mut start, progress, total);
        drop(queues);
        shared.start();
        if let Some(report) = progress {
            while handles
                .iter()
                .any(|h| h.as_ref().is_ok_and(|h| !h.is_finished()))
            {
                report(shared.finished.load(Ordering::Relaxed), total);
                std::thread::sleep(Duration::from_millis(200));
            }
        }
        let outcomes = handles
            .into_iter()
            .map(|h| {
                h.map_err(|e| Error::io("starting a replay thread", e))?
                    .join()
                    .map_err(|_| Error::Config("a replay thread panicked".into()))
            })
            .collect::<Result<Vec<_>, Error>>();
        fed.and(outcomes)
    })?;
    let elapsed = outcomes
        .iter()
        .map(|o| o.ended.saturating_duration_since(start))
        .max()
        .unwrap_or_default();
    if let Some(report) = progress {
        report(total, total);
    }

    let mut listed: Vec<Mismatch> = outcomes.iter().flat_map(|o| o.listed.clone()).collect();
    listed.truncate(config.list_limit);
    let mut refusals: Vec<Refused> = outcomes.iter().flat_map(|o| o.refusals.clone()).collect();
    refusals.truncate(REFUSALS_LISTED);
    let profile = Profile {
        started_unix_ns: Some(started_unix_ns),
        clock: Some(info.kind),
        cycles_per_sec: Some(info.cycles_per_sec),
        invariant_tsc: info.invariant_tsc,
        extra: Vec::new(),
        sections: Vec::new(),
        layers: vec![exec::layer(&outcomes)],
    };
    Ok(ReplayReport {
        root,
        dir,
        created_dirs,
        created_files,
        created_bytes,
        threads: index.threads.len(),
        calls: outcomes.iter().map(|o| o.replayed).sum(),
        skipped_outside: outcomes.iter().map(|o| o.outside).sum(),
        skipped_descriptor: outcomes.iter().map(|o| o.no_fd).sum(),
        skipped_unsupported: outcomes.iter().map(|o| o.unsupported).sum(),
        refused: outcomes.iter().map(|o| o.refused).sum(),
        refusals,
        mismatches: outcomes.iter().map(|o| o.mismatches).sum(),
        listed,
        elapsed,
        profile,
        read: index.read,
    })
}
