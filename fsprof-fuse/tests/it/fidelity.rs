//! The profile tells the truth about itself: each request has one latency, the same in every
//! record; the recorders' own work is in none; every system call the daemon makes on LOWER is
//! one of its request's inner calls. Counts only: no assertion on how long anything took.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use test_support::fidelity::{
    assert_one_latency, median_bucket, profile_and_slow_log, read_control, short_processes,
    stat_process,
};
use test_support::wait_until;

use crate::fixture::{Fixture, Transport};

/// Every recorder on: the slow log of every request, the slowest requests, the hot files, the
/// callers by command name, the breakdown, and a time-lapse.
const EVERY_RECORDER: [&str; 11] = [
    "--slow",
    "0us",
    "--slowest",
    "--hot-files",
    "--by",
    "comm",
    "--breakdown",
    "--epoch",
    "1s",
    "--inject",
    "op=mkdir,every=3,delay=1ms",
];

fn one_latency_in_every_record(t: Transport) {
    let Some(f) = Fixture::mounted("one-latency", t, &EVERY_RECORDER) else {
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
    let Some(full) = Fixture::mounted("full", t, &[&exact[..], &EVERY_RECORDER[..9]].concat())
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

/// `strace` following the daemon `pid` (every thread), writing one file per thread under
/// `out`; returns once it has attached to every thread.
fn strace(pid: u32, out: &Path) -> Option<Child> {
    let found = Command::new("strace").arg("-V").output().is_ok();
    if !found {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true");
        assert!(!ci, "strace is missing (CI must install it)");
        eprintln!("SKIPPED: strace is missing");
        return None;
    }
    let child = Command::new("strace")
        .args(["-f", "-ff", "-y", "-qq", "-o"])
        .arg(out.join("trace"))
        .arg("-p")
        .arg(pid.to_string())
        .stdin(Stdio::null())
        .spawn()
        .expect("strace");
    let threads = || fs::read_dir(format!("/proc/{pid}/task")).unwrap().count();
    wait_until("strace attached to every thread", || {
        let files = fs::read_dir(out).unwrap().count();
        files >= threads()
    });
    Some(child)
}

/// Stops `strace` (it detaches on SIGINT) and waits for it.
fn stop(mut child: Child) {
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    child.wait().expect("strace exits");
}

/// The inner calls' names for the system calls strace names otherwise.
fn inner_name(syscall: &str) -> &str {
    match syscall {
        "pread64" => "pread",
        "pwrite64" => "pwrite",
        "fstatfs" => "fstatvfs",
        s => s,
    }
}

/// The system calls in the traces under `dir` made on LOWER (`lower`, canonical): those whose
/// descriptor (as `strace -y` decodes it), path or new descriptor lies in LOWER, or that go
/// through `/proc/self/fd/N` (the daemon reaches only lower objects so), counted by the name
/// inner calls give them. Calls on `/dev/fuse`, futexes, the io_uring's and the like are not.
fn lower_calls(dir: &Path, lower: &Path) -> BTreeMap<String, u64> {
    let tag = format!("<{}", lower.display());
    let mut out = BTreeMap::new();
    for e in fs::read_dir(dir).unwrap() {
        let text = fs::read_to_string(e.unwrap().path()).unwrap();
        for line in text.lines() {
            let Some((name, _)) = line.split_once('(') else {
                continue;
            };
            if !name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            {
                continue; // "+++ exited", "--- SIGINT", a resumed line
            }
            if line.contains(&tag) || line.contains("\"/proc/self/fd/") {
                *out.entry(inner_name(name).to_string()).or_default() += 1;
            }
        }
    }
    out
}

/// Every inner call the breakdown of `p` holds, by name, summed over operations and buckets.
fn breakdown_calls(p: &profile_store::Profile) -> BTreeMap<String, u64> {
    let s = p
        .section(profile_store::inner::SECTION)
        .expect("a breakdown");
    let ic = profile_store::inner::InnerCalls::from_section(s).unwrap();
    let mut out = BTreeMap::new();
    for r in &ic.rows {
        assert_eq!(
            r.other_cycles, 0,
            "{} bucket {}: calls beyond the slots",
            r.op, r.bucket
        );
        for c in &r.calls {
            *out.entry(c.call.clone()).or_default() += c.count;
        }
    }
    out
}

/// A tree on LOWER, made before the mount, so that the daemon meets every object for the
/// first time through the workload (its inode store opens each: `openat` with `O_PATH`,
/// `statx`, `name_to_handle_at`).
fn tree(lower: &Path) {
    fs::create_dir(lower.join("d")).unwrap();
    for i in 0..40 {
        fs::write(lower.join(format!("d/f{i}")), format!("file {i}\n")).unwrap();
    }
}

/// A mixed workload in the mount `m`: a cold listing, reads, writes, creates, renames,
/// removals, links, attributes, a directory made and removed.
fn mixed(m: &Path) {
    let script = "set -e; ls -l d > /dev/null; cat d/f1 d/f2 > /dev/null; echo more >> d/f3; \
        touch d/new; mkdir e; mv d/f4 e/; rm d/f5; ln -s f6 d/l; readlink d/l > /dev/null; \
        ln d/f7 d/hard; chmod 600 d/f8; truncate -s 2 d/f9; setfattr -n user.a -v 1 d/f10; \
        getfattr -d d/f10 > /dev/null; stat -f . > /dev/null; rm e/f4; rmdir e; \
        ls -l d > /dev/null";
    let out = Command::new("sh")
        .args(["-c", script])
        .current_dir(m)
        .output()
        .expect("sh");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// For a mixed workload on a fresh mount, the breakdown's count of each inner call equals the
/// count of that system call the daemon made on LOWER, as `strace` saw it (filtered to LOWER as
/// [`lower_calls`] says): no call is missing from a request's breakdown (the inode store's
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
    let Some(tracer) = strace(f.pid(), &traces) else {
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
    stop(tracer);
    let after = parse(read_control(&f.m(".fsprof")));
    assert_eq!(
        p.layer("fuse").unwrap().total_count(),
        after.layer("fuse").unwrap().total_count(),
        "a request came while strace stopped"
    );
    let seen = lower_calls(&traces, &lower);
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
