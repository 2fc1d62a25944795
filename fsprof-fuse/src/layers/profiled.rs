//! The profiling layer: times every request into the `fuse` layer of the profile, once, and
//! gives that one latency to every request record ([`super::recorded`]).
//!
//! # The span
//!
//! A request is timed by two clock readings: its *start*, read after the request has been
//! counted (and, with records on, after the records have looked up what they need: the
//! caller's key for `--by`, a forgotten node's path for `--hot-files`), right before the
//! request goes down to the file system; and its *end*, read as soon as the file system
//! returns, when its reply is ready: the transport builds and sends the reply after that. The
//! latency `end − start` goes unchanged to the `fuse` layer (its bucket, total and time-lapse
//! epoch, which the metrics endpoint reads), to the caller's `--by` layer, the breakdown, the
//! hot files, the slow log and the slowest requests; the records do their work (describe a
//! slow request, look up its path and process, hash a hot file) after the end. An `op`
//! injection's delay or error is inside the span: it stands for the daemon's own time.
//! (Timed to after the reply was written, a request would include the woken caller's own work
//! whenever the scheduler ran the caller on the daemon's CPU first: measured on a two-CPU VM,
//! GETATTR then showed a mean of 74 µs over an `fstat` of 1.3 µs, and a second,
//! scheduler-made peak.) A request that panics is recorded (in the `fuse` and `--by` layers)
//! as ending when the panic leaves the file system.
//!
//! Requests made unrecorded ([`Request::recorded`]) are not timed.
//!
//! Requests that fail are also counted per operation and errno ([`Errors`]), for the live
//! views: `fsprof_operation_errors_total` at `--metrics`. (Not in `.fsprof`, which stays
//! version 1 without the features that need sections.)

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use profile_store::{Extension, Profiler, Recorder, Section, Token, clock};

use super::recorded::{self, Records};
use super::{Hook, Hooked};
use crate::filesystem::Request;
use crate::filesystem::request::Span;
use crate::filesystem::trace::Trace;
use crate::protocol::errno::err;
use crate::protocol::ops::{NAMES, Op};
use crate::records::RecordSet;
use crate::records::by::ByCall;

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

/// A file system whose requests are timed, and recorded.
pub type Profiled<F> = Hooked<Timing, F>;

/// The timing hook: the `fuse` layer's recorder (over [`crate::protocol::ops::NAMES`]), or none (the
/// requests then pass through untimed, as with `--no-profile`), and the request records.
pub struct Timing {
    rec: Option<Recorder>,
    errors: Option<Arc<Errors>>,
    records: Records,
}

impl Timing {
    /// Times into `rec`, or not at all; no records.
    pub fn new(rec: Option<Recorder>) -> Timing {
        Timing {
            rec,
            errors: None,
            records: Records::default(),
        }
    }

    /// Also counts failed requests into `errors`.
    pub fn counting_errors(mut self, errors: Arc<Errors>) -> Timing {
        self.errors = Some(errors);
        self
    }

    /// Also applies the records of `set`, with each request's one latency.
    pub fn recording(mut self, set: RecordSet) -> Timing {
        self.records = Records::new(set);
        self
    }

    /// The records applied.
    pub fn records(&self) -> &Records {
        &self.records
    }

    #[inline(always)]
    fn count_error<R>(&self, req: &Request, r: &io::Result<R>) {
        if let (Err(e), Some(errors)) = (r, &self.errors) {
            errors.count(req.op.id(), e);
        }
    }

    /// A request with records on: see the module documentation for what comes before, inside
    /// and after its span.
    fn recorded<R>(
        &self,
        set: &RecordSet,
        req: &Request,
        span: Span<'_>,
        serve: impl FnOnce(&Request) -> io::Result<R>,
    ) -> io::Result<R> {
        recorded::before(set, req);
        let by = set.by.as_ref().map(|b| b.begin(req));
        let trace = Trace::new();
        let traced = self.records.traced();
        let run = Running::start(self.rec.as_ref(), by, req.op);
        let r = match set.inject.as_ref().and_then(|i| i.on_request(req)) {
            Some(e) => Err(err(e)),
            None if traced => serve(&req.traced(&trace)),
            None => serve(req),
        };
        let end = clock::now();
        let start = run.start;
        let kept = run.end(end);
        self.count_error(req, &r);
        // A request in flight across a reset is in no record, as in no layer.
        if kept && traced {
            let cycles = end.saturating_sub(start);
            recorded::after(set, req, span, cycles, recorded::errno(&r), &trace);
        }
        r
    }
}

/// One request's span in its recorders: counted in each, then started by one clock reading;
/// ended by one reading, whose latency each records. Dropped unended (a panic unwinding), it
/// ends then.
struct Running<'a> {
    fuse: Option<(&'a Recorder, Token)>,
    by: Option<ByCall<'a>>,
    start: u64,
    open: bool,
}

impl<'a> Running<'a> {
    /// Counts a request of `op` in `rec` (if any; `by` counted it in its key's layer
    /// already), then reads the clock: the start.
    #[inline(always)]
    fn start(rec: Option<&'a Recorder>, by: Option<ByCall<'a>>, op: Op) -> Running<'a> {
        let fuse = rec.map(|r| (r, r.count(op.id())));
        Running {
            fuse,
            by,
            start: clock::now(),
            open: true,
        }
    }

    /// Ends the span at clock reading `end` in every recorder; returns whether it was recorded
    /// (not when a reset came while it was in flight).
    #[inline(always)]
    fn end(mut self, end: u64) -> bool {
        self.close(end)
    }

    #[inline(always)]
    fn close(&mut self, end: u64) -> bool {
        self.open = false;
        let kept = match self.fuse {
            Some((rec, token)) => rec.record(token.at(self.start), end),
            None => true,
        };
        if let Some(by) = self.by.take() {
            by.finish(self.start, end);
        }
        kept
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if self.open {
            self.close(clock::now());
        }
    }
}

impl Hook for Timing {
    #[inline(always)]
    fn around<R>(
        &self,
        req: &Request,
        span: Span<'_>,
        serve: impl FnOnce(&Request) -> io::Result<R>,
    ) -> io::Result<R> {
        if !req.recorded() {
            return serve(req);
        }
        if let Some(set) = self.records.set() {
            return self.recorded(set, req, span, serve);
        }
        match &self.rec {
            Some(rec) => {
                let run = Running::start(Some(rec), None, req.op);
                let r = serve(req);
                run.end(clock::now());
                self.count_error(req, &r);
                r
            }
            None => serve(req),
        }
    }

    fn interrupt(&self, unique: u64) {
        self.records.interrupt(unique);
    }

    fn disconnected(&self) {
        self.records.disconnected();
    }
}

/// `inner` timed into `rec` (or not, with `None`), its failures counted into an `errors`
/// section of `profiler`'s live snapshots, and recorded as `set` says.
pub fn profiled<F: crate::filesystem::FileSystem>(
    inner: F,
    rec: Option<Recorder>,
    profiler: Option<&Profiler>,
    set: RecordSet,
) -> Profiled<F> {
    let mut timing = Timing::new(rec.clone()).recording(set);
    if let (Some(rec), Some(p)) = (&rec, profiler) {
        let errors = Arc::new(Errors::new(rec.name()));
        p.extend_live(errors.clone());
        timing = timing.counting_errors(errors);
    }
    Hooked::new(timing, inner)
}

#[cfg(test)]
mod tests {
    use std::panic::{AssertUnwindSafe, catch_unwind};
    use std::sync::atomic::AtomicBool;

    use parking_lot::Mutex;
    use profile_store::{ClockInfo, RecorderConfig};

    use super::*;
    use crate::filesystem::fake::Fake;
    use crate::filesystem::{FileSystem, Ino, Key};
    use crate::protocol::ops::Op;

    fn recorder() -> Recorder {
        Recorder::new("fuse", &NAMES, &RecorderConfig::default())
    }

    /// (calls counted, calls in a bucket) of `op` in `rec`.
    fn counts(rec: &Recorder, op: Op) -> (u64, u128) {
        rec.snapshot()
            .op(op.name())
            .map_or((0, 0), |o| (o.count, o.bucket_sum()))
    }

    fn req(op: Op, unique: u64) -> Request<'static> {
        Request::new(op, unique, Ino(5), 7, 1000, 1000)
    }

    /// The `errors` section's lines in `p`'s live view.
    fn errors(p: &Profiler) -> Vec<String> {
        let live = p.live_snapshot();
        let s = live.section(ERRORS_SECTION).expect("an errors section");
        assert_eq!(s.attr("layer"), Some("fuse"));
        s.lines.clone()
    }

    #[test]
    fn a_request_is_counted_before_it_runs_and_bucketed_after() {
        let rec = recorder();
        let inside = Arc::new(Mutex::new(Vec::new()));
        let (r, i) = (rec.clone(), inside.clone());
        let fs = profiled(
            Fake::during(move |req| i.lock().push(counts(&r, req.op))),
            Some(rec.clone()),
            None,
            RecordSet::default(),
        );
        fs.getattr(&req(Op::Getattr, 1), Ino(5), None).unwrap();
        fs.getattr(&req(Op::Getattr, 2), Ino(5), None).unwrap();
        assert_eq!(*inside.lock(), [(1, 0), (2, 1)]);
        assert_eq!(counts(&rec, Op::Getattr), (2, 2));
        assert_eq!(counts(&rec, Op::Lookup), (0, 0));
    }

    /// Names every node, slowly: a path lookup that takes 50 ms.
    struct SlowPaths;

    impl crate::records::Paths for SlowPaths {
        fn path(&self, _: Ino) -> Option<Vec<u8>> {
            std::thread::sleep(std::time::Duration::from_millis(50));
            Some(b"/slow".to_vec())
        }
    }

    /// Every recorder on (the slow log and the slowest naming their requests' files slowly):
    /// the `fuse` layer, the `--by` layer and the breakdown hold the same cycles, and no
    /// request's latency holds the records' work (their path lookups, 100 ms a request).
    #[test]
    fn every_record_gets_the_one_latency_and_none_of_its_own_work() {
        use crate::records::slowest::Slowest;
        use crate::records::{breakdown::Breakdown, by, hot::HotFiles, slow::SlowLog};
        let rec = recorder();
        let paths = || Some(Arc::new(SlowPaths) as Arc<dyn crate::records::Paths>);
        let by = Arc::new(by::ByKey::new(
            by::KeyKind::Uid,
            4,
            &RecorderConfig::default(),
        ));
        let breakdown = Arc::new(Breakdown::new(RecorderConfig::default().resolution));
        let slow = Arc::new(SlowLog::new(0, 100, None, paths()).unwrap());
        let set = RecordSet {
            by: Some(by.clone()),
            breakdown: Some(breakdown.clone()),
            slow: Some(slow.clone()),
            slowest: Some(Arc::new(Slowest::new(10, paths()))),
            hot: Some(Arc::new(HotFiles::new(4, paths()))),
            ..RecordSet::default()
        };
        let fs = profiled(Fake::new(), Some(rec.clone()), None, set);
        for u in 0..3 {
            fs.getattr(&req(Op::Getattr, u), Ino(5), None).unwrap();
        }
        let layer = rec.snapshot();
        let o = layer.op("OP_GETATTR").unwrap();
        assert_eq!((o.count, o.bucket_sum()), (3, 3));
        let mine = by.layers();
        let keyed = mine[0].op("OP_GETATTR").unwrap();
        assert_eq!((keyed.count, keyed.total), (o.count, o.total));
        let rows = breakdown.snapshot().rows;
        assert_eq!(
            (
                rows.iter().map(|r| r.count).sum::<u64>(),
                rows.iter().map(|r| r.cycles).sum()
            ),
            (o.count, o.total)
        );
        assert_eq!(slow.len(), 3);
        // Counts, not durations: each request took 100 ms more than its span if the lookups
        // were in it; all three fall below the bucket of 50 ms unless the machine stalled each
        // of them that long.
        let fifty_ms = ClockInfo::get().secs_to_cycles(0.05);
        let first_slow = layer.resolution.bucket(fifty_ms);
        let fast = o.merged()[..first_slow].iter().sum::<u64>();
        assert!(fast >= 1, "{:?}", o.merged());
    }

    #[test]
    fn a_failed_request_is_timed_and_counted_by_errno_in_the_live_view() {
        let rec = recorder();
        let p = Profiler::new(vec![rec.clone()]);
        let fs = profiled(
            Fake::new(),
            Some(rec.clone()),
            Some(&p),
            RecordSet::default(),
        );
        fs.inner().fail_with(libc::ENOENT);
        for u in 0..2 {
            let e = fs.lookup(&req(Op::Lookup, u), Ino(1), "x".as_ref());
            assert_eq!(e.unwrap_err().raw_os_error(), Some(libc::ENOENT));
        }
        fs.inner().fail_with(libc::EACCES);
        assert!(fs.open(&req(Op::Open, 3), Ino(5), 0).is_err());
        fs.inner().fail_with(0);
        fs.open(&req(Op::Open, 4), Ino(5), 0).unwrap();
        assert_eq!(counts(&rec, Op::Lookup), (2, 2));
        assert_eq!(counts(&rec, Op::Open), (2, 2));
        assert_eq!(
            errors(&p),
            [
                "op=OP_LOOKUP errno=2 count=2",
                "op=OP_OPEN errno=13 count=1"
            ]
        );
        // Live views only: the profile files stay as they were.
        assert!(p.snapshot().section(ERRORS_SECTION).is_none());
        p.reset();
        assert!(errors(&p).is_empty());
    }

    #[test]
    fn a_request_that_panics_is_still_timed_and_the_panic_goes_on() {
        let rec = recorder();
        let p = Profiler::new(vec![rec.clone()]);
        let inner = Fake::during(|req| {
            if req.op == Op::Read {
                panic!("deliberate panic in the file system");
            }
        });
        let fs = profiled(inner, Some(rec.clone()), Some(&p), RecordSet::default());
        let mut buf = [0u8; 8];
        let r = catch_unwind(AssertUnwindSafe(|| {
            fs.read(&req(Op::Read, 1), Ino(5), &Key::new(7), 0, &mut buf)
        }));
        let payload = r.expect_err("the panic reaches the caller");
        assert_eq!(
            payload.downcast_ref::<&str>(),
            Some(&"deliberate panic in the file system")
        );
        assert_eq!(counts(&rec, Op::Read), (1, 1), "timed by the drop guard");
        // A panic is no error reply of the file system's (the transport answers it).
        assert!(errors(&p).is_empty());
        // The layer goes on serving.
        fs.getattr(&req(Op::Getattr, 2), Ino(5), None).unwrap();
        assert_eq!(counts(&rec, Op::Getattr), (1, 1));
    }

    #[test]
    fn unrecorded_requests_are_served_but_not_counted() {
        let rec = recorder();
        let p = Profiler::new(vec![rec.clone()]);
        let fs = profiled(
            Fake::new(),
            Some(rec.clone()),
            Some(&p),
            RecordSet::default(),
        );
        let quiet = req(Op::Statfs, 1).unrecorded(Ino::ROOT);
        fs.statfs(&quiet, Ino::ROOT).unwrap();
        fs.inner().fail_with(libc::EIO);
        assert!(fs.statfs(&quiet, Ino::ROOT).is_err());
        let calls = fs.inner().calls();
        assert_eq!(calls.len(), 2);
        assert!(calls.iter().all(|c| !c.recorded));
        assert_eq!(counts(&rec, Op::Statfs), (0, 0));
        assert!(errors(&p).is_empty());
    }

    #[test]
    fn without_a_recorder_requests_pass_through_untimed() {
        let fs = profiled(Fake::new(), None, None, RecordSet::default());
        fs.getattr(&req(Op::Getattr, 1), Ino(5), None).unwrap();
        assert_eq!(fs.inner().seen(), ["getattr ino=5 fh=None"]);
        assert!(fs.hook().rec.is_none() && fs.hook().errors.is_none());
    }

    #[test]
    fn a_reset_during_a_request_never_leaves_more_bucketed_than_counted() {
        let rec = recorder();
        let reset_now = Arc::new(AtomicBool::new(false));
        let (r, now) = (rec.clone(), reset_now.clone());
        let fs = profiled(
            Fake::during(move |_| {
                if now.swap(false, Ordering::Relaxed) {
                    r.reset();
                }
            }),
            Some(rec.clone()),
            None,
            RecordSet::default(),
        );
        let get = |u| fs.getattr(&req(Op::Getattr, u), Ino(5), None).unwrap();
        get(1);
        assert_eq!(counts(&rec, Op::Getattr), (1, 1));
        // Counted before the reset, finished after it: the reset took the count, and the
        // finish (of an older generation) records nothing.
        reset_now.store(true, Ordering::Relaxed);
        get(2);
        assert_eq!(counts(&rec, Op::Getattr), (0, 0));
        get(3);
        assert_eq!(counts(&rec, Op::Getattr), (1, 1));
    }

    #[test]
    fn requests_from_many_threads_are_each_counted_once() {
        let rec = recorder();
        let fs = profiled(Fake::new(), Some(rec.clone()), None, RecordSet::default());
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let fs = &fs;
                s.spawn(move || {
                    for i in 0..250 {
                        let r = req(Op::Getattr, t * 1000 + i);
                        fs.getattr(&r, Ino(5), None).unwrap();
                    }
                });
            }
        });
        assert_eq!(counts(&rec, Op::Getattr), (1000, 1000));
        assert_eq!(fs.inner().calls().len(), 1000);
    }

    #[test]
    fn errnos_beyond_the_table_and_errors_without_one_are_counted_too() {
        let e = Errors::new("fuse");
        e.count(Op::Read.id(), &io::Error::from_raw_os_error(600));
        e.count(Op::Read.id(), &io::Error::other("no errno"));
        e.count(Op::Read.id(), &io::Error::from_raw_os_error(libc::EIO));
        // An operation outside the table is ignored, not a panic.
        e.count(NAMES.len(), &io::Error::from_raw_os_error(libc::EIO));
        assert_eq!(
            e.sections()[0].lines,
            ["op=OP_READ errno=5 count=2", "op=OP_READ errno=133 count=1"]
        );
        e.reset();
        assert!(e.sections()[0].lines.is_empty());
    }
}
