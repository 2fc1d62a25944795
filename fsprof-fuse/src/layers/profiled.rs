//! The profiling layer: times every request into the `fuse` layer of the profile.
//!
//! A request counts when it starts (before the inner file system runs) and lands in its
//! latency bucket when the inner file system returns, which is when its reply is ready: the
//! transport builds and sends the reply after that. (Timed to after the reply was written, a
//! request would include the woken caller's own work whenever the scheduler ran the caller on
//! the daemon's CPU first: measured on a two-CPU VM, GETATTR then showed a mean of 74 µs over an
//! `fstat` of 1.3 µs, and a second, scheduler-made peak.) A request that panics is recorded as
//! ending when the panic leaves the file system.
//!
//! Requests made unrecorded ([`Request::recorded`]) are not timed.
//!
//! Requests that fail are also counted per operation and errno ([`Errors`]), for the live
//! views: `fsprof_operation_errors_total` at `--metrics`. (Not in `.fsprof`, which stays
//! version 1 without the features that need sections.)

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use profile_store::{Extension, Profiler, Recorder, Section};

use super::{Hook, Hooked, Span};
use crate::filesystem::Request;
use crate::ops::NAMES;

/// Errnos counted one by one; a larger one (never sent by Linux) is counted as the last.
const ERRNOS: usize = 134;

/// Failed requests per operation and errno, counted with one relaxed add on the error path
/// only. Live snapshots carry it as an `errors` section: `# section=errors layer=LAYER`, then
/// one line `op=OP_NAME errno=N count=C` per pair that occurred.
pub struct Errors {
    layer: String,
    counts: Box<[[AtomicU64; ERRNOS]]>,
}

/// The section holding [`Errors`].
pub const ERRORS_SECTION: &str = "errors";

impl Errors {
    /// An empty table for the requests of layer `layer`.
    pub fn new(layer: &str) -> Errors {
        Errors {
            layer: layer.to_string(),
            counts: (0..NAMES.len())
                .map(|_| [const { AtomicU64::new(0) }; ERRNOS])
                .collect(),
        }
    }

    /// Counts a failure of operation `op` with `e`.
    #[inline]
    pub fn count(&self, op: usize, e: &io::Error) {
        let errno = e
            .raw_os_error()
            .unwrap_or(libc::EIO)
            .clamp(0, ERRNOS as i32 - 1) as usize;
        if let Some(row) = self.counts.get(op) {
            row[errno].fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Extension for Errors {
    fn sections(&self) -> Vec<Section> {
        let mut s = Section::new(ERRORS_SECTION);
        s.attrs = vec![("layer".into(), self.layer.clone())];
        for (op, row) in self.counts.iter().enumerate() {
            for (errno, c) in row.iter().enumerate() {
                let n = c.load(Ordering::Relaxed);
                if n > 0 {
                    s.lines
                        .push(format!("op={} errno={errno} count={n}", NAMES[op]));
                }
            }
        }
        vec![s]
    }

    fn reset(&self) {
        for c in self.counts.iter().flatten() {
            c.store(0, Ordering::Relaxed);
        }
    }
}

/// A file system whose requests are timed.
pub type Profiled<F> = Hooked<Timing, F>;

/// The timing hook: the `fuse` layer's recorder (over [`crate::ops::NAMES`]), or none (the
/// requests then pass through untimed, as with `--no-profile`).
pub struct Timing {
    rec: Option<Recorder>,
    errors: Option<Arc<Errors>>,
}

impl Timing {
    /// Times into `rec`, or not at all.
    pub fn new(rec: Option<Recorder>) -> Timing {
        Timing { rec, errors: None }
    }

    /// Also counts failed requests into `errors`.
    pub fn counting_errors(mut self, errors: Arc<Errors>) -> Timing {
        self.errors = Some(errors);
        self
    }
}

impl Hook for Timing {
    #[inline(always)]
    fn around<R>(
        &self,
        req: &Request,
        _span: Span<'_>,
        serve: impl FnOnce(&Request) -> io::Result<R>,
    ) -> io::Result<R> {
        match &self.rec {
            Some(rec) if req.recorded() => {
                // Records when dropped, after `serve` returns or while a panic unwinds.
                let _timer = rec.time(req.op.id());
                let r = serve(req);
                if let (Err(e), Some(errors)) = (&r, &self.errors) {
                    errors.count(req.op.id(), e);
                }
                r
            }
            _ => serve(req),
        }
    }
}

/// `inner` timed into `rec` (or not, with `None`), its failures counted into an `errors`
/// section of `profiler`'s live snapshots.
pub fn profiled<F: crate::filesystem::FileSystem>(
    inner: F,
    rec: Option<Recorder>,
    profiler: Option<&Profiler>,
) -> Profiled<F> {
    let mut timing = Timing::new(rec.clone());
    if let (Some(rec), Some(p)) = (&rec, profiler) {
        let errors = Arc::new(Errors::new(rec.name()));
        p.extend_live(errors.clone());
        timing = timing.counting_errors(errors);
    }
    Hooked::new(timing, inner)
}
