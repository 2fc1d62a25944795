//! `fsprof replay FILE --in DIR`: re-executes a trace written by `fsprof run --trace` against
//! another directory (after ULTra), so that one real workload runs again on other file
//! systems and configurations.
//!
//! The engine is `user_trace::replay`: it creates the tree the trace needed at its start
//! (directories, and files of their sizes), maps traced paths under the root (by default the
//! directory the traced command started in) into DIR, replays each traced thread on a thread
//! of its own while keeping the traced order between threads that touched the same file or
//! directory, and times every call into a user layer. Every path is resolved beneath DIR, and
//! a call that would leave it is refused, counted and listed. A call whose result differs from
//! the trace's is a mismatch: counted and listed. The report's last line is
//! `replayed N calls, M mismatches`; the exit code is 1 when there were mismatches.

use std::fmt::Write as _;
use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use user_trace::Timing;

use crate::error::Error;
use crate::user_run::error;

/// `fsprof replay`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayConfig {
    /// The trace.
    pub trace: PathBuf,
    /// The directory to replay in (created if missing).
    pub dir: PathBuf,
    /// Traced paths under this prefix are mapped to `dir`. Default: the directory the traced
    /// command started in.
    pub root: Option<PathBuf>,
    /// `recorded` keeps the traced think times, `fast` drops them. Default: recorded.
    pub timing: Timing,
    /// Write the replay's user-level profile here (JSON for `.json`, else text).
    pub output: Option<PathBuf>,
    /// Mismatches listed at most (all are counted). Default 1000.
    pub list: usize,
    /// Refuse a trace that would take more memory than this (bytes). Default: half of the
    /// memory available.
    pub max_memory: Option<u64>,
    /// Make the files the trace needed sparse instead of filling them.
    pub sparse: bool,
}

/// Progress on standard error when it is a terminal: calls done out of the trace's, the
/// rate and the time left; nothing otherwise.
fn progress_bar() -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(0);
    pb.set_style(
        ProgressStyle::with_template(
            "{spinner} replaying: {pos}/{len} calls, {per_sec}, {elapsed}, {eta} left",
        )
        .expect("a valid template"),
    );
    pb.enable_steady_tick(Duration::from_millis(100));
    pb
}

/// `fsprof replay`: replays, appends the report to `out`; returns 1 when some call's result
/// differed from the trace's, else 0.
pub fn run(c: &ReplayConfig, out: &mut String) -> Result<u8, Error> {
    let mut config = user_trace::ReplayConfig::new(&c.trace, &c.dir);
    config.root = c.root.clone();
    config.timing = c.timing;
    config.list_limit = c.list;
    config.max_memory = c.max_memory;
    config.sparse = c.sparse;
    let pb = progress_bar();
    let report_progress = |done: u64, total: u64| {
        pb.set_length(total);
        pb.set_position(done);
    };
    let result = user_trace::replay(&config, Some(&report_progress));
    pb.finish_and_clear();
    let report = result.map_err(error)?;
    if let Some(path) = &c.output {
        crate::export::save(path, &report.profile)?;
        let _ = writeln!(out, "replay profile written to {}", path.display());
    }
    let _ = writeln!(out, "{report}");
    Ok(u8::from(report.mismatches > 0))
}
