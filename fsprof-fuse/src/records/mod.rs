//! Request records: what the profile's histograms cannot say about a request — which file,
//! which process, which lower call made it slow — and deliberate faults to check that the
//! profiler finds them.
//!
//! * [`trace`]: the inner calls of one request, carried down by the request context.
//! * [`breakdown`]: outer bucket → inner call → inner bucket (`fsprof why`).
//! * [`slow`]: the slow-operation log (`.fsprof.slow`).
//! * [`slowest`]: the slowest requests of the run (the profile's `slowest` section).
//! * [`inject`]: injected delays and errors; [`waits`]: how a delay waits, so that an interrupt
//!   or the connection's end cuts it short.
//! * [`by`]: one profile per pid, uid or comm, bounded.
//! * [`hot`]: the hottest files (a space-saving sketch, [`sketch`]).
//!
//! [`crate::layers::recorded`] applies them around each request; the lower and branch calls
//! ([`crate::toolkit::lower::Lower`]) add to the trace and apply call injections. Everything here is off
//! unless asked for, and then costs the records layer an `Option` check per request.

pub mod breakdown;
pub mod by;
pub mod execs;
pub mod hot;
pub mod inject;
pub mod paths;
mod sketch;
pub mod slow;
pub mod slowest;
pub mod waits;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use profile_store::{ClockInfo, Profiler, RecorderConfig};

pub use paths::{LatePaths, Paths, mount_path};

use breakdown::Breakdown;
use by::ByKey;
use hot::HotFiles;
use inject::{Injector, RawRule, Rule};
use slow::SlowLog;
use slowest::Slowest;

/// What request records to keep, checked ([`crate::daemon::cli::RecordArgs`]). Default: none.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordConfig {
    /// Log requests at least this slow. Default off.
    pub slow: Option<Duration>,
    /// Records the slow log keeps. Default [`slow::DEFAULT_RING`].
    pub slow_ring: usize,
    /// Also append slow records to this file. Default none.
    pub slow_log: Option<PathBuf>,
    /// Keep the inner-call breakdown (`fsprof why`). Default off.
    pub breakdown: bool,
    /// Injection rules, as given and checked ([`Rule::from_raw`] accepts each). Default none.
    pub inject: Vec<RawRule>,
    /// Keep one `fuse` profile per key of this kind. Default off.
    pub by: Option<by::KeyKind>,
    /// Most keyed layers (beyond them, `fuse@other`). Default [`by::DEFAULT_MAX`].
    pub by_max: usize,
    /// Keep the top N files by latency and by calls. Default off.
    pub hot_files: Option<usize>,
    /// Record the kernel's layers (`kernel`, `block@dev:NAME`; [`crate::daemon::kernel`]). Default
    /// off.
    pub kernel: bool,
    /// Record the syscall level (`syscall`, timed in the kernel by BPF; [`crate::daemon::kernel`]).
    /// Default off.
    pub syscalls: bool,
    /// Keep the N slowest requests. Default off.
    pub slowest: Option<usize>,
}

impl Default for RecordConfig {
    fn default() -> RecordConfig {
        RecordConfig {
            slow: None,
            slow_ring: slow::DEFAULT_RING,
            slow_log: None,
            breakdown: false,
            inject: Vec::new(),
            by: None,
            by_max: by::DEFAULT_MAX,
            hot_files: None,
            kernel: false,
            syscalls: false,
            slowest: None,
        }
    }
}

/// What is recorded (each part optional).
#[derive(Debug, Default, Clone)]
pub struct RecordSet {
    /// Injection rules.
    pub inject: Option<Arc<Injector>>,
    /// The inner-call breakdown of the `fuse` layer.
    pub breakdown: Option<Arc<Breakdown>>,
    /// The slow-operation log.
    pub slow: Option<Arc<SlowLog>>,
    /// Per-key profiles.
    pub by: Option<Arc<ByKey>>,
    /// The hottest files.
    pub hot: Option<Arc<HotFiles>>,
    /// The slowest requests.
    pub slowest: Option<Arc<Slowest>>,
}

impl RecordSet {
    /// Whether every part is off.
    pub fn is_empty(&self) -> bool {
        self.inject.is_none()
            && self.breakdown.is_none()
            && self.slow.is_none()
            && self.by.is_none()
            && self.hot.is_none()
            && self.slowest.is_none()
    }
}

/// The records of one mount, built from a [`RecordConfig`].
pub struct Built {
    /// For the records layer.
    pub set: RecordSet,
    /// For the lower and branch calls.
    pub inject: Option<Arc<Injector>>,
    /// Set these once the file system is built.
    pub paths: Arc<LatePaths>,
}

impl RecordConfig {
    /// Whether anything is recorded.
    pub fn is_on(&self) -> bool {
        self.slow.is_some()
            || self.breakdown
            || !self.inject.is_empty()
            || self.by.is_some()
            || self.hot_files.is_some()
            || self.slowest.is_some()
    }

    /// Builds the records, adding what they put in the profile to `profiler` (the injection
    /// counts, the breakdown, the slow log's counts, the keyed layers); `recorder` is the
    /// `fuse` layer's configuration.
    pub fn build(
        &self,
        recorder: &RecorderConfig,
        profiler: Option<&Profiler>,
    ) -> Result<Built, String> {
        let resolution = recorder.resolution;
        let paths = Arc::new(LatePaths::default());
        let rules = self
            .inject
            .iter()
            .enumerate()
            .map(|(i, r)| {
                Rule::from_raw(r.clone()).map_err(|e| format!("injection rule {}: {e}", i + 1))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let inject = (!rules.is_empty())
            .then(|| Arc::new(Injector::new(rules, Some(paths.clone() as Arc<dyn Paths>))));
        let breakdown = self.breakdown.then(|| Arc::new(Breakdown::new(resolution)));
        let slow = match self.slow {
            None => None,
            Some(t) => {
                let cycles = ClockInfo::get().secs_to_cycles(t.as_secs_f64());
                let log = SlowLog::new(
                    cycles,
                    self.slow_ring,
                    self.slow_log.as_deref(),
                    Some(paths.clone() as Arc<dyn Paths>),
                )
                .map_err(|e| {
                    format!(
                        "--slow-log {}: {e}",
                        self.slow_log
                            .as_deref()
                            .unwrap_or(std::path::Path::new(""))
                            .display()
                    )
                })?;
                Some(Arc::new(log))
            }
        };
        let built = Built {
            set: RecordSet {
                inject: inject.clone(),
                breakdown,
                slow,
                by: self
                    .by
                    .map(|k| Arc::new(ByKey::new(k, self.by_max, recorder))),
                hot: self
                    .hot_files
                    .map(|n| Arc::new(HotFiles::new(n, Some(paths.clone() as Arc<dyn Paths>)))),
                slowest: self
                    .slowest
                    .map(|n| Arc::new(Slowest::new(n, Some(paths.clone() as Arc<dyn Paths>)))),
            },
            inject,
            paths,
        };
        if let Some(p) = profiler {
            built.attach(p);
        }
        if self.by == Some(by::KeyKind::Comm) || self.slow.is_some() || self.slowest.is_some() {
            // The process events' listener, now rather than in the first request that names
            // its caller.
            execs::Execs::get();
        }
        Ok(built)
    }
}

impl Built {
    /// Adds what the records put in the profile to `p`, and resets them with it.
    pub fn attach(&self, p: &Profiler) {
        if let Some(i) = &self.set.inject {
            p.extend(i.clone());
        }
        if let Some(b) = &self.set.breakdown {
            p.extend(b.clone());
        }
        if let Some(s) = &self.set.slow {
            p.extend(s.clone());
        }
        if let Some(b) = &self.set.by {
            p.extend(b.clone());
        }
        if let Some(h) = &self.set.hot {
            p.extend(h.clone());
        }
        if let Some(s) = &self.set.slowest {
            p.extend(s.clone());
        }
    }
}
