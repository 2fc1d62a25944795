//! Request records on RAIF: branch calls are named `branchN:call` in the breakdown and the
//! slow log, paths come from the inode table, and `branch=` rules inject into one branch.

use std::fs;
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
        assert!(!fsprof_fuse::mount::is_mount_point(&f.mnt));
    }
}

transports!(one_latency_in_every_record);

/// Each request of a RAIF mount has one latency, the same in the `fuse` layer, the slow log of
/// every request, the per-caller layers and the breakdown (`test_support::fidelity`), with
/// every recorder on and short processes working over a RAIF5 volume.
fn one_latency_in_every_record(t: Transport) {
    let Some(f) = Fixture::mounted(
        t,
        "one-latency",
        3,
        &[
            "--level",
            "5",
            "--slow",
            "0us",
            "--slowest",
            "--hot-files",
            "--by",
            "comm",
            "--breakdown",
            "--epoch",
            "1s",
        ],
    ) else {
        return;
    };
    test_support::fidelity::short_processes(&f.m(""), 16);
    let (p, slow) = test_support::fidelity::profile_and_slow_log(&f.m(""));
    let n = test_support::fidelity::assert_one_latency(&p, &slow);
    assert!(n >= 16 * 12, "{n} requests");
}
