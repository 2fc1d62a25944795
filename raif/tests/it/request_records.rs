//! Request records on RAIF: branch calls are named `branchN:call` in the breakdown and the
//! slow log, paths come from the inode table, and `branch=` rules inject into one branch.

use std::fs;
use std::path::PathBuf;

use profile_store::Profile;
use test_support::strace::{Strace, breakdown_calls, mixed};
use test_support::{Transport, transports};

use crate::fixture::Fixture;

transports!(branch_calls_are_named_by_branch_with_paths_and_branch_injections_counted);

fn branch_calls_are_named_by_branch_with_paths_and_branch_injections_counted(t: Transport) {
    let Some(f) = Fixture::mounted(
        t,
        "reqrec",
        2,
        &[
            "--level",
            "1",
            "--breakdown",
            "--slow",
            "0s",
            "--inject",
            "branch=1:pwrite,every=1,errno=EIO",
        ],
    ) else {
        return;
    };
    fs::create_dir(f.m("d")).unwrap();
    fs::write(f.m("d/file"), vec![5u8; 8192]).unwrap();
    let p = f.profile();
    let injected: u64 = p.extra("injected").unwrap().parse().unwrap();
    assert!(injected >= 1, "the branch-1 writes were injected");
    let lines = &p.section("inner_calls").unwrap().lines;
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("OP_WRITE ") && l.contains(" call=branch0:pwrite ")),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("OP_WRITE ") && l.contains(" call=branch1:pwrite ")),
        "{lines:?}"
    );
    let slow = fs::read_to_string(f.m(".fsprof.slow")).unwrap();
    let write = slow
        .lines()
        .find(|l| l.contains("\"op\":\"OP_WRITE\""))
        .expect("a slow write record");
    assert!(write.contains("\"path\":\"/d/file\""), "{write}");
    assert!(write.contains("\"call\":\"branch0:pwrite\""), "{write}");
    assert!(write.contains("\"call\":\"branch1:pwrite\""), "{write}");
}

transports!(rules_for_calls_the_volume_never_makes_are_refused);

/// A `branch=` rule past the last branch, or a `lower=` rule (fsprof-fuse's), could never fire:
/// the mount is refused with a one-line reason instead.
fn rules_for_calls_the_volume_never_makes_are_refused(t: Transport) {
    let Some(f) = Fixture::new(t, "reqrec-bad", 2) else {
        return;
    };
    for (rule, want) in [
        (
            "branch=2:pwrite,every=1,errno=EIO",
            "branch=2: there are 2 branches (0 to 1)",
        ),
        (
            "lower=pread,every=1,delay=1ms",
            "lower= rules are for fsprof-fuse",
        ),
    ] {
        let out = std::process::Command::new(crate::fixture::bin())
            .arg("--branches")
            .arg(f.branch_list())
            .arg(&f.mnt)
            .args(["--inject", rule])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{rule}: {err}");
        assert!(err.contains(want), "{rule}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(!fsprof_fuse::daemon::mount::is_mount_point(&f.mnt));
    }
}

transports!(one_latency_in_every_record);

/// Each request of a RAIF mount has one latency, the same in the `fuse` layer, the slow log of
/// every request, the per-caller layers and the breakdown (`test_support::fidelity`), with
/// every recorder on and short processes working over a RAIF5 volume.
fn one_latency_in_every_record(t: Transport) {
    let args = [
        &["--level", "5"][..],
        &test_support::fidelity::EVERY_RECORDER,
    ]
    .concat();
    let Some(f) = Fixture::mounted(t, "one-latency", 3, &args) else {
        return;
    };
    test_support::fidelity::short_processes(&f.m(""), 16);
    let (p, slow) = test_support::fidelity::profile_and_slow_log(&f.m(""));
    let n = test_support::fidelity::assert_one_latency(&p, &slow);
    assert!(n >= 16 * 12, "{n} requests");
}

transports!(every_branch_call_is_an_inner_call);

/// For a mixed workload on a fresh mount of a RAIF1 volume, the breakdown's count of each
/// branch call (`branchN:call`, summed over the branches) equals the count `strace` of the
/// daemon saw made on the branches (`test_support::strace`), the intent log's writes and
/// syncs and the `close` of every descriptor a request opened for itself or let go included
/// (a directory's `fsyncdir` too): no branch call is missing from a request's breakdown.
fn every_branch_call_is_an_inner_call(t: Transport) {
    let args = ["--level", "1", "--breakdown"];
    let Some(mut f) = Fixture::mounted(t, "strace", 2, &args) else {
        return;
    };
    fs::create_dir(f.m("d")).unwrap();
    for i in 0..40 {
        fs::write(f.m(&format!("d/f{i}")), format!("file {i}\n")).unwrap();
    }
    // Remounted: the daemon meets every object for the first time through the workload.
    f.unmount();
    f.mount(&args);
    let roots: Vec<PathBuf> = f
        .branches
        .iter()
        .map(|b| fs::canonicalize(b).unwrap())
        .collect();
    let traces = f.root.join("traces");
    fs::create_dir(&traces).unwrap();
    f.reset();
    let Some(tracer) = Strace::attach(f.pid(), &traces) else {
        return;
    };
    mixed(&f.mnt);
    // A directory synced (FSYNCDIR: a re-open of it on each branch, synced and closed).
    let synced = std::process::Command::new("sync")
        .arg(f.m("d"))
        .status()
        .unwrap();
    assert!(synced.success());
    let settled = |p: &Profile| {
        let l = p.layer("fuse").unwrap();
        let opened = l.count("OP_OPEN") + l.count("OP_CREATE") + l.count("OP_OPENDIR");
        let released = l.count("OP_RELEASE") + l.count("OP_RELEASEDIR");
        profile_store::views::check(p, 0).is_empty() && opened == released
    };
    let p = f.profile_when(settled);
    let seen = tracer.stop(&roots);
    let after = f.profile();
    assert_eq!(
        p.layer("fuse").unwrap().total_count(),
        after.layer("fuse").unwrap().total_count(),
        "a request came while strace stopped"
    );
    let recorded = breakdown_calls(&p);
    assert_eq!(
        recorded, seen,
        "the breakdown's branch calls against strace's"
    );
    for call in [
        "openat",
        "statx",
        "getdents64",
        "lgetxattr",
        "pwrite",
        "close",
    ] {
        assert!(recorded.get(call).copied().unwrap_or(0) > 0, "{call}");
    }
}
