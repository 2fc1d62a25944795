//! The profile tells the truth about itself: each request has one latency, the same in every
//! record; the recorders' own work is in none; every system call the daemon makes on LOWER is
//! one of its request's inner calls. Counts only: no assertion on how long anything took.

use std::fs;
use std::path::{Path, PathBuf};

use test_support::fidelity::{
    EVERY_RECORDER, assert_one_latency, median_bucket, profile_and_slow_log, read_control,
    short_processes, stat_process,
};
use test_support::strace::{Strace, breakdown_calls, mixed};
use test_support::wait_until;

use crate::fixture::{Fixture, Transport};

/// Every recorder on, and an injected delay (the daemon's own time, inside the span).
fn every_recorder() -> Vec<&'static str> {
    let mut args = EVERY_RECORDER.to_vec();
    args.extend(["--inject", "op=mkdir,every=3,delay=1ms"]);
    args
}

fn one_latency_in_every_record(t: Transport) {
    let Some(f) = Fixture::mounted("one-latency", t, &every_recorder()) else {
        return;
    };
    short_processes(&f.mnt, 24);
    let (p, slow) = profile_and_slow_log(&f.mnt);
    let n = assert_one_latency(&p, &slow);
    // 24 processes of a dozen requests and more each, all checked.
    assert!(n >= 24 * 12, "{n} requests");
    // An injected op delay is the daemon's own time: inside the span, in every record alike.
    assert!(p.layer("fuse").unwrap().count("OP_MKDIR") >= 24);
}
transports!(one_latency_in_every_record);

/// The `fuse` layer's calls of `ops` in `mnt`'s profile, bucket by bucket.
fn buckets(mnt: &Path, ops: &[&str]) -> Vec<u64> {
    let text = read_control(&mnt.join(".fsprof"));
    let p = profile_store::text::parse(&text).unwrap();
    let fuse = p.layer("fuse").unwrap();
    let mut out = vec![0; fuse.buckets];
    for o in ops.iter().filter_map(|n| fuse.op(n)) {
        for (d, c) in out.iter_mut().zip(o.merged()) {
            *d += c;
        }
    }
    out
}

/// 200 short processes each `stat` one file, on a mount that records nothing but the
/// histograms and on one with every recorder on, taking turns (so that both see the machine
/// alike): each process's first request is its command's first, which used to pay for the
/// recorders (a `/proc` read of its name, a slow record's path and process) inside its
/// latency. The median bucket of GETATTR and LOOKUP is the same with and without, give or
/// take one.
fn short_processes_keep_their_latency(t: Transport) {
    let exact = ["--cache", "exact"];
    let Some(bare) = Fixture::mounted("bare", t, &[&exact[..], &["--no-breakdown"]].concat())
    else {
        return;
    };
    let Some(full) = Fixture::mounted("full", t, &[&exact[..], &EVERY_RECORDER[..]].concat())
    else {
        return;
    };
    for f in [&bare, &full] {
        fs::write(f.l("f"), b"one file\n").unwrap();
        f.reset();
    }
    for _ in 0..200 {
        stat_process(&bare.m("f"));
        stat_process(&full.m("f"));
    }
    let ops = ["OP_GETATTR", "OP_LOOKUP"];
    let (b, r) = (buckets(&bare.mnt, &ops), buckets(&full.mnt, &ops));
    assert!(b.iter().sum::<u64>() >= 400 && r.iter().sum::<u64>() >= 400);
    let (mb, mr) = (median_bucket(&b), median_bucket(&r));
    assert!(
        mr.abs_diff(mb) <= 1,
        "median bucket {mr} with every recorder, {mb} without\n  without: {b:?}\n  with:    {r:?}"
    );
}
transports!(short_processes_keep_their_latency);

/// A tree on LOWER, made before the mount, so that the daemon meets every object for the
/// first time through the workload (its inode store opens each: `openat` with `O_PATH`,
/// `statx`, `name_to_handle_at`).
fn tree(lower: &Path) {
    fs::create_dir(lower.join("d")).unwrap();
    for i in 0..40 {
        fs::write(lower.join(format!("d/f{i}")), format!("file {i}\n")).unwrap();
    }
}

/// For a mixed workload on a fresh mount, the breakdown's count of each inner call equals the
/// count of that system call the daemon made on LOWER, as `strace` saw it (filtered to LOWER as
/// [`Strace::stop`] says): no call is missing from a request's breakdown (the inode store's
/// opens and handle lookups were).
fn every_lower_call_is_an_inner_call(t: Transport) {
    let Some(mut f) = Fixture::new("strace", t) else {
        return;
    };
    tree(&f.lower);
    f.mount(&["--breakdown"]);
    let lower: PathBuf = fs::canonicalize(&f.lower).unwrap();
    let traces = f.root.join("traces");
    fs::create_dir(&traces).unwrap();
    f.reset();
    let Some(tracer) = Strace::attach(f.pid(), &traces) else {
        return;
    };
    mixed(&f.mnt);
    // Every open answered by its release (the kernel sends them after close(2) returns), and
    // no call in flight; reading the profile makes no lower call.
    let settled = |p: &profile_store::Profile| {
        let l = p.layer("fuse").unwrap();
        let opened = l.count("OP_OPEN") + l.count("OP_CREATE") + l.count("OP_OPENDIR");
        let released = l.count("OP_RELEASE") + l.count("OP_RELEASEDIR");
        profile_store::views::check(p, 0).is_empty() && opened == released
    };
    let parse = |t: String| profile_store::text::parse(&t).unwrap();
    let mut p = parse(read_control(&f.m(".fsprof")));
    wait_until("every release", || {
        p = parse(read_control(&f.m(".fsprof")));
        settled(&p)
    });
    let seen = tracer.stop(&[lower]);
    let after = parse(read_control(&f.m(".fsprof")));
    assert_eq!(
        p.layer("fuse").unwrap().total_count(),
        after.layer("fuse").unwrap().total_count(),
        "a request came while strace stopped"
    );
    let recorded = breakdown_calls(&p);
    assert_eq!(
        recorded, seen,
        "the breakdown's inner calls against strace's"
    );
    // The cold listing: an O_PATH open, its statx check and its handle for each file.
    for call in [
        "openat",
        "name_to_handle_at",
        "statx",
        "getdents64",
        "close",
    ] {
        assert!(recorded.get(call).copied().unwrap_or(0) > 0, "{call}");
    }
    assert!(recorded["name_to_handle_at"] >= 40);
}
transports!(every_lower_call_is_an_inner_call);
