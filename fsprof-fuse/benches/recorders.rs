//! What the request records cost per request, in clock cycles: each recorder on its own and all
//! together, against none, taking turns round after round (the machine's state drifts: only
//! figures of the same round are compared), over a file system that answers at once (so that
//! nothing but the profiling's own work is measured).
//!
//! Two figures per recorder: what it adds to a request's wall time (the loop's cycles per
//! request, less those of the same round's run with no recorder), and what it adds to the
//! latency the profile records (the `fuse` layer's mean, less no recorder's): the first is its
//! cost, the second must be nothing, since a recorder works outside the span it is given.
//!
//! `cargo bench -p fsprof-fuse --bench recorders [-- ROUNDS REQUESTS [NAME]]` (NAME: only the
//! configurations whose name holds it, and none).

use std::io;
use std::sync::Arc;

use fsprof_fuse::filesystem::{AttrOut, FileSystem, Ino, Key, Request};
use fsprof_fuse::layers::profiled::profiled;
use fsprof_fuse::protocol::ops::{NAMES, Op, Sys};
use fsprof_fuse::records::breakdown::Breakdown;
use fsprof_fuse::records::by::{ByKey, KeyKind};
use fsprof_fuse::records::hot::HotFiles;
use fsprof_fuse::records::slow::SlowLog;
use fsprof_fuse::records::slowest::Slowest;
use fsprof_fuse::records::{Paths, RecordSet};
use fsprof_fuse::toolkit::lower::Lower;
use profile_store::{ClockInfo, Recorder, RecorderConfig, clock};

/// A file system that answers a getattr at once, after one (empty) lower call, as the
/// passthrough makes one `statx`.
struct Answer(Lower);

impl FileSystem for Answer {
    type File = Key;
    type Dir = Key;

    fn getattr(&self, req: &Request, _: Ino, _: Option<&Key>) -> io::Result<AttrOut> {
        self.0.call(req, Sys::Statx, || ());
        Ok(AttrOut {
            attr: Default::default(),
            ttl: std::time::Duration::ZERO,
        })
    }
}

/// Names every node at once (the real one reads `/proc/self/fd`, when a record is kept).
struct OnePath;

impl Paths for OnePath {
    fn path(&self, _: Ino) -> Option<Vec<u8>> {
        Some(b"/d/file".to_vec())
    }
}

fn paths() -> Option<Arc<dyn Paths>> {
    Some(Arc::new(OnePath))
}

/// The recorders of one configuration, made afresh for each run.
type Make = fn() -> RecordSet;

/// 1 ms in cycles.
fn one_ms() -> u64 {
    ClockInfo::get().secs_to_cycles(0.001)
}

fn configurations() -> Vec<(&'static str, Make)> {
    vec![
        ("none", RecordSet::default),
        ("--breakdown", || RecordSet {
            breakdown: Some(Arc::new(Breakdown::new(Default::default()))),
            ..RecordSet::default()
        }),
        ("--by comm", || RecordSet {
            by: Some(Arc::new(ByKey::new(
                KeyKind::Comm,
                64,
                &RecorderConfig::default(),
            ))),
            ..RecordSet::default()
        }),
        ("--hot-files", || RecordSet {
            hot: Some(Arc::new(HotFiles::new(100, paths()))),
            ..RecordSet::default()
        }),
        ("--slowest", || RecordSet {
            slowest: Some(Arc::new(Slowest::new(50, paths()))),
            ..RecordSet::default()
        }),
        ("--slow 1ms", || RecordSet {
            slow: Some(Arc::new(
                SlowLog::new(one_ms(), 10_000, None, paths()).unwrap(),
            )),
            ..RecordSet::default()
        }),
        ("--slow 0us", || RecordSet {
            slow: Some(Arc::new(SlowLog::new(0, 10_000, None, paths()).unwrap())),
            ..RecordSet::default()
        }),
        ("all but --slow 0us", || RecordSet {
            breakdown: Some(Arc::new(Breakdown::new(Default::default()))),
            by: Some(Arc::new(ByKey::new(
                KeyKind::Comm,
                64,
                &RecorderConfig::default(),
            ))),
            hot: Some(Arc::new(HotFiles::new(100, paths()))),
            slowest: Some(Arc::new(Slowest::new(50, paths()))),
            slow: Some(Arc::new(
                SlowLog::new(one_ms(), 10_000, None, paths()).unwrap(),
            )),
            ..RecordSet::default()
        }),
    ]
}

/// One run of `n` getattrs with the records of `make`: (wall cycles per request, the `fuse`
/// layer's mean latency in cycles).
fn run(make: Make, n: u64) -> (f64, f64) {
    let rec = Recorder::new("fuse", &NAMES, &RecorderConfig::default());
    let fs = profiled(Answer(Lower::default()), Some(rec.clone()), None, make());
    let pid = std::process::id();
    // Warm: the thread's shards, the caller's name, the tables.
    for u in 0..1000 {
        let req = Request::new(Op::Getattr, u, Ino(5), pid, 0, 0);
        fs.getattr(&req, Ino(5), None).unwrap();
    }
    rec.reset();
    let start = clock::now();
    for u in 0..n {
        let req = Request::new(Op::Getattr, u, Ino(5 + u % 512), pid, 0, 0);
        std::hint::black_box(fs.getattr(&req, Ino(5), None).unwrap());
    }
    let wall = clock::now().saturating_sub(start) as f64 / n as f64;
    let layer = rec.snapshot();
    let o = layer.op("OP_GETATTR").expect("timed");
    assert_eq!(o.count, n);
    (wall, o.total as f64 / n as f64)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(21);
    let n: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let only = args.next();
    let configs: Vec<_> = configurations()
        .into_iter()
        .enumerate()
        .filter(|(i, (name, _))| *i == 0 || only.as_ref().is_none_or(|o| name.contains(o.as_str())))
        .map(|(_, c)| c)
        .collect();
    // Per configuration: wall and latency per request, and their excess over the same round's
    // run with no recorder.
    let mut wall = vec![Vec::new(); configs.len()];
    let mut span = vec![Vec::new(); configs.len()];
    let mut extra_wall = vec![Vec::new(); configs.len()];
    let mut extra_span = vec![Vec::new(); configs.len()];
    for _ in 0..rounds {
        let got: Vec<(f64, f64)> = configs.iter().map(|(_, make)| run(*make, n)).collect();
        for (i, (w, s)) in got.iter().enumerate() {
            wall[i].push(*w);
            span[i].push(*s);
            extra_wall[i].push(w - got[0].0);
            extra_span[i].push(s - got[0].1);
        }
    }
    let hz = ClockInfo::get().cycles_per_sec as f64;
    println!(
        "{rounds} rounds of {n} getattrs per configuration, taking turns; clock {:.3} GHz",
        hz / 1e9
    );
    println!(
        "{:<20} {:>12} {:>22} {:>12} {:>22}",
        "recorders", "wall/req", "added (median, range)", "latency/req", "added to the latency"
    );
    for (i, (name, _)) in configs.iter().enumerate() {
        let range = |v: &mut Vec<f64>| {
            let m = median(v);
            format!("{m:>6.0} ({:.0}..{:.0})", v[0], v[v.len() - 1])
        };
        println!(
            "{:<20} {:>12.0} {:>22} {:>12.0} {:>22}",
            name,
            median(&mut wall[i]),
            range(&mut extra_wall[i]),
            median(&mut span[i]),
            range(&mut extra_span[i]),
        );
    }
    println!("(cycles; added: less the same round's run with no recorder)");
}
