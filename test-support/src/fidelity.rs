//! The profile's fidelity to itself, checked on a real mount (fsprof-fuse's and raif's tests):
//! one latency per request in every record (the `fuse` layer, the slow log, the per-caller
//! layers, the breakdown, the slowest requests), and a workload of short processes to show it
//! on.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::process::Command;

use profile_store::{Profile, keyed};

use crate::PATIENCE;

/// Every request record on: the slow log of every request, the slowest requests, the hot
/// files, the callers by command name, the breakdown, and a time-lapse (flags of fsprof-fuse
/// and raif).
pub const EVERY_RECORDER: [&str; 9] = [
    "--slow",
    "0us",
    "--slowest",
    "--hot-files",
    "--by",
    "comm",
    "--breakdown",
    "--epoch",
    "1s",
];

/// A control file's contents, read without a `stat` of it (a control file's `stat` is served
/// unrecorded by the file system below, so a test that counts lower calls must not make one).
pub fn read_control(path: &Path) -> String {
    let f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut s = String::new();
    // `Take` reads to the end without asking the file's size first.
    f.take(u64::MAX)
        .read_to_string(&mut s)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    s
}

/// The mount's profile, parsed.
fn profile(mnt: &Path) -> Profile {
    let text = read_control(&mnt.join(".fsprof"));
    profile_store::text::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// Every operation's count in every layer of `p`.
fn counts(p: &Profile) -> Vec<(String, String, u64)> {
    p.layers
        .iter()
        .flat_map(|l| {
            l.ops
                .iter()
                .map(|o| (l.name.clone(), o.name.clone(), o.count))
        })
        .collect()
}

/// A profile of the mount at `mnt` and its slow log (`.fsprof.slow`, one JSON value per record)
/// that hold the same requests: no call in flight, and nothing counted between the two reads
/// (the profile read again after the slow log is the same). Reading the control files makes no
/// request of the mount's (under the default caches).
pub fn profile_and_slow_log(mnt: &Path) -> (Profile, Vec<serde_json::Value>) {
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        let before = profile(mnt);
        let slow = read_control(&mnt.join(".fsprof.slow"));
        let after = profile(mnt);
        let settled = profile_store::views::check(&after, 0).is_empty();
        if settled && counts(&before) == counts(&after) {
            let records: Vec<serde_json::Value> = slow
                .lines()
                .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
                .collect();
            // A request's slow record is written after its latency is counted: one the
            // kernel sent on its own (a FORGET) may have been counted and not yet logged.
            // Wait for the log to catch up; a record lost for good fails the caller's check.
            if logged_counts(&records) == fuse_counts(&after)
                || std::time::Instant::now() >= deadline
            {
                return (after, records);
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{}: requests still coming after {PATIENCE:?}",
            mnt.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The slow log's records per operation: how many, and their latencies' sum in ns.
fn logged(records: &[serde_json::Value]) -> BTreeMap<String, (u64, f64)> {
    let mut m: BTreeMap<String, (u64, f64)> = BTreeMap::new();
    for r in records {
        let e = m
            .entry(r["op"].as_str().expect("op").to_string())
            .or_default();
        e.0 += 1;
        e.1 += r["latency_ns"].as_u64().expect("latency_ns") as f64;
    }
    m
}

/// [`logged`]'s counts alone.
fn logged_counts(records: &[serde_json::Value]) -> BTreeMap<String, u64> {
    logged(records)
        .into_iter()
        .map(|(op, (n, _))| (op, n))
        .collect()
}

/// The `fuse` layer's count per operation (those with any).
fn fuse_counts(p: &Profile) -> BTreeMap<String, u64> {
    p.layer("fuse")
        .map(|l| {
            l.ops
                .iter()
                .filter(|o| o.count > 0)
                .map(|o| (o.name.clone(), o.count))
                .collect()
        })
        .unwrap_or_default()
}

/// Asserts that each request of the `fuse` layer of `p` has one latency everywhere: with a
/// slow log of every request (`--slow 0us`), the log holds exactly the layer's count per
/// operation and its latencies add up to the layer's total within 2% (they are the same
/// cycles, rounded to nanoseconds one by one); the per-caller layers (`--by`), where there are
/// any, and the breakdown, where there is one, hold exactly the layer's counts and cycles; and
/// each operation's slowest request, where the `slowest` section has one, lies in its slowest
/// bucket. Returns the number of requests checked.
pub fn assert_one_latency(p: &Profile, slow: &[serde_json::Value]) -> u64 {
    let fuse = p.layer("fuse").expect("a fuse layer");
    let hz = p.cycles_per_sec.expect("a calibrated clock") as f64;
    assert_eq!(
        p.extra("slow_dropped"),
        Some("0"),
        "the slow ring overflowed"
    );
    let mut logged = logged(slow);
    let mut checked = 0;
    for o in &fuse.ops {
        let (n, ns) = logged.remove(&o.name).unwrap_or_default();
        assert_eq!(n, o.count, "{}: slow log against histogram", o.name);
        let total_ns = o.total as f64 / hz * 1e9;
        assert!(
            (ns - total_ns).abs() <= 0.02 * total_ns + 1.0,
            "{}: the slow log's latencies add up to {ns:.0} ns, the histogram's to {total_ns:.0} ns",
            o.name
        );
        checked += o.count;
    }
    assert!(logged.is_empty(), "logged, not counted: {logged:?}");
    // The per-caller layers: the same requests, the same cycles.
    let by: Vec<_> = p
        .layers
        .iter()
        .filter(|l| match keyed::parse(&l.name) {
            Some(keyed::Keyed::Key { base, .. }) | Some(keyed::Keyed::Other { base }) => {
                base == "fuse"
            }
            None => false,
        })
        .collect();
    if !by.is_empty() {
        for o in &fuse.ops {
            let (n, total) = by
                .iter()
                .filter_map(|l| l.op(&o.name))
                .fold((0, 0), |a, x| (a.0 + x.count, a.1 + x.total));
            assert_eq!((n, total), (o.count, o.total), "{}: --by layers", o.name);
        }
    }
    if let Some(s) = p.section(profile_store::inner::SECTION) {
        let ic = profile_store::inner::InnerCalls::from_section(s).expect("a breakdown");
        for o in &fuse.ops {
            let rows = ic.rows.iter().filter(|r| r.op == o.name);
            let (n, cycles) = rows.fold((0, 0), |a, r| (a.0 + r.count, a.1 + r.cycles));
            assert_eq!((n, cycles), (o.count, o.total), "{}: breakdown", o.name);
            for r in ic.rows.iter().filter(|r| r.op == o.name) {
                assert_eq!(
                    o.epochs.iter().map(|e| e[r.bucket]).sum::<u64>(),
                    r.count,
                    "{} bucket {}: breakdown's outer bucket",
                    o.name,
                    r.bucket
                );
            }
        }
    }
    checked
}

/// A mixed workload of short processes in `dir` (a mount): each makes, writes, reads, stats,
/// lists, renames and removes files of its own.
pub fn short_processes(dir: &Path, processes: usize) {
    let script = "set -e; d=p$0; mkdir $d; echo hello > $d/a; cat $d/a > /dev/null; \
                  stat $d/a > /dev/null; ls -l $d > /dev/null; mv $d/a $d/b; ln -s b $d/l; \
                  readlink $d/l > /dev/null; rm $d/b $d/l; rmdir $d";
    let children: Vec<_> = (0..processes)
        .map(|i| {
            Command::new("sh")
                .args(["-c", script, &i.to_string()])
                .current_dir(dir)
                .spawn()
                .expect("sh")
        })
        .collect();
    for mut c in children {
        let s = c.wait().expect("wait");
        assert!(s.success(), "a workload process failed: {s}");
    }
}

/// The bucket that holds the median of `counts`.
pub fn median_bucket(counts: &[u64]) -> usize {
    let n: u64 = counts.iter().sum();
    let mut seen = 0;
    for (b, c) in counts.iter().enumerate() {
        seen += c;
        if 2 * seen >= n {
            return b;
        }
    }
    0
}

/// `stat` of `path`, in a new process (a short process: its first request is its comm's
/// first).
pub fn stat_process(path: &Path) {
    let out = Command::new("stat").arg(path).output().expect("stat");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
