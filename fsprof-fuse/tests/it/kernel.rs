//! `--kernel`: the `kernel` layer counts exactly what the `fuse` layer counts, operation by
//! operation, on both transports; a lower directory without a block device has no block layer
//! and says why; a mount that cannot have the layers is refused in one line, with nothing
//! mounted (no CAP_PERFMON, no tracefs); and the block layers' ftrace instance goes with its
//! daemon.

use std::path::Path;
use std::process::Command;

use profile_store::Profile;

use crate::fixture::{Fixture, Transport, is_mounted};

fn extra<'a>(p: &'a Profile, key: &str) -> Option<&'a str> {
    p.extra(key)
}

/// 100 mkdir, 50 creates, 150 writes with an fsync each, 50 reads: the kernel's and the
/// daemon's counts per operation are equal (read once nothing is in flight: the kernel sends
/// RELEASE after close returns).
fn kernel_counts_equal_fuse_counts(t: Transport) {
    let Some(f) = Fixture::mounted("kernel-counts", t, &["--kernel"]) else {
        return;
    };
    let m = &f.mnt;
    for i in 0..100 {
        std::fs::create_dir(m.join(format!("d{i}"))).unwrap();
    }
    for i in 0..50 {
        use std::io::Write;
        let mut file = std::fs::File::create(m.join(format!("f{i}"))).unwrap();
        for _ in 0..3 {
            file.write_all(b"0123456789").unwrap();
            file.sync_all().unwrap();
        }
    }
    for i in 0..50 {
        std::fs::read(m.join(format!("f{i}"))).unwrap();
    }
    // Every RELEASE served too: one the kernel sent before the reset below but the daemon
    // read after it would count in `fuse` and not in `kernel` (a request in flight across a
    // reset ends uncounted, and the kernel's layer sees it in flight earlier): under
    // stress-ng, the counts after the reset then never agreed (a RELEASE short in `kernel`).
    let released = |p: &Profile| {
        let c = test_support::op_counts(p, "fuse");
        let get = |op: &str| c.iter().find(|(n, _)| n == op).map_or(0, |x| x.1);
        get("OP_RELEASE") == get("OP_CREATE") + get("OP_OPEN")
    };
    let p = test_support::profile_when(m, |p| {
        profile_store::views::check(p, 0).is_empty()
            && released(p)
            && test_support::op_counts(p, "kernel") == test_support::op_counts(p, "fuse")
    });
    let fuse = test_support::op_counts(&p, "fuse");
    assert_eq!(
        test_support::op_counts(&p, "kernel"),
        fuse,
        "kernel vs fuse"
    );
    let get = |op: &str| fuse.iter().find(|(n, _)| n == op).map_or(0, |x| x.1);
    assert_eq!(get("OP_MKDIR"), 100);
    assert_eq!(get("OP_CREATE"), 50);
    assert!(get("OP_WRITE") >= 150 && get("OP_FSYNC") == 150, "{fuse:?}");
    let k = p.layer("kernel").unwrap();
    for o in &k.ops {
        assert_eq!(o.bucket_sum(), o.count as u128, "{}", o.name);
    }
    let key = |n: &str| {
        k.extra
            .iter()
            .find(|(k, _)| k == n)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(key("scope"), Some("connection"));
    assert_eq!(key("unpaired"), Some("0"));
    assert_eq!(extra(&p, "kernel_lost"), Some("0"));
    // .fsprof.json carries the layer and its keys too.
    let json = std::fs::read(m.join(".fsprof.json")).unwrap();
    let pj = profile_store::json::parse(&String::from_utf8(json).unwrap()).unwrap();
    let kj = pj.layer("kernel").expect("kernel layer in .fsprof.json");
    assert!(
        kj.extra
            .iter()
            .any(|(k, v)| k == "scope" && v == "connection")
    );
    assert_eq!(kj.count("OP_MKDIR"), 100);
    // A reset starts both from zero alike.
    std::fs::write(m.join(".fsprof"), b"").unwrap();
    for i in 0..20 {
        std::fs::metadata(m.join(format!("f{i}"))).unwrap();
    }
    let p = test_support::profile_when(m, |p| {
        test_support::op_counts(p, "kernel") == test_support::op_counts(p, "fuse")
    });
    assert_eq!(
        test_support::op_counts(&p, "kernel"),
        test_support::op_counts(&p, "fuse")
    );
}

/// LOWER on tmpfs: mounted all the same, no block layer, the reason in the header, and the
/// kernel layer records.
fn tmpfs_lower_has_no_block_layer_and_says_why(t: Transport) {
    let Some(mut f) = Fixture::new_in("kernel-tmpfs", Path::new("/dev/shm"), t) else {
        return;
    };
    f.mount(&["--kernel"]);
    std::fs::create_dir(f.mnt.join("x")).unwrap();
    let p = test_support::profile_when(&f.mnt, |p| {
        test_support::op_counts(p, "kernel") == test_support::op_counts(p, "fuse")
    });
    assert!(
        p.layers.iter().all(|l| !l.name.starts_with("block@")),
        "{:?}",
        p.layers.iter().map(|l| &l.name).collect::<Vec<_>>()
    );
    let why = extra(&p, "block_layers").expect("block_layers key");
    assert!(why.starts_with("none:") && why.contains("tmpfs"), "{why}");
    assert_eq!(p.layer("kernel").unwrap().count("OP_MKDIR"), 1);
}

/// A tool reading `.fsprof` again and again leaves no request in `kernel`, as in `fuse`: with
/// no attribute caching, each read makes the kernel revalidate the root first (a `GETATTR`
/// the daemon passes down unrecorded). Before, `kernel` counted those GETATTRs and `fuse`
/// did not, so the two layers never agreed again while a tool kept polling.
fn a_tools_reads_leave_no_request_in_kernel_either(t: Transport) {
    let Some(f) = Fixture::mounted("kernel-reader", t, &["--kernel", "--cache", "exact"]) else {
        return;
    };
    let m = &f.mnt;
    for i in 0..10 {
        std::fs::write(m.join(format!("f{i}")), b"x").unwrap();
    }
    // Every RELEASE in, before the reset (the kernel sends it after close returns; one in
    // flight across a reset counts in `fuse` and not in `kernel`, whose send was before it).
    test_support::profile_when(m, |p| {
        p.layer("fuse").is_some_and(|l| l.count("OP_RELEASE") == 10)
            && profile_store::views::check(p, 0).is_empty()
    });
    std::fs::write(m.join(".fsprof"), b"").unwrap();
    for i in 0..10 {
        std::fs::metadata(m.join(format!("f{i}"))).unwrap();
    }
    for _ in 0..30 {
        test_support::read_profile(m);
    }
    let p = test_support::profile_when(m, |p| {
        test_support::op_counts(p, "kernel") == test_support::op_counts(p, "fuse")
    });
    assert_eq!(
        test_support::op_counts(&p, "kernel"),
        test_support::op_counts(&p, "fuse")
    );
    let getattrs = p.layer("fuse").unwrap().count("OP_GETATTR");
    assert!((10..30).contains(&getattrs), "{getattrs} GETATTRs in fuse");
}

transports!(
    kernel_counts_equal_fuse_counts,
    tmpfs_lower_has_no_block_layer_and_says_why,
    a_tools_reads_leave_no_request_in_kernel_either
);

/// Runs `fsprof-fuse -f --kernel LOWER MNT` through `sh -c PREFIX "$@"`, expecting a refusal:
/// returns its standard error, and checks that it failed and nothing was mounted.
fn refused(name: &str, prefix: &str) -> Option<String> {
    let f = Fixture::new(name, Transport::Classic)?;
    // tracefs mounted, so that the only thing missing is what the test takes away.
    kernel_trace::tracefs::find_or_mount().expect("tracefs");
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("{prefix} \"$@\""))
        .arg("sh")
        .arg(crate::fixture::bin())
        .arg("-f")
        .arg("--kernel")
        .arg(&f.lower)
        .arg(&f.mnt)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "not refused: {err}");
    assert!(!is_mounted(&f.mnt), "mounted anyway: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line: {err}");
    Some(err)
}

#[test]
fn without_cap_perfmon_the_mount_is_refused_in_one_line() {
    // Root without CAP_PERFMON, CAP_SYS_ADMIN and CAP_BPF (the kernel's
    // perf_event_paranoid default then forbids tracepoints of every process).
    if std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .is_ok_and(|s| s.trim().parse::<i32>().is_ok_and(|v| v < 0))
    {
        eprintln!("SKIPPED: kernel.perf_event_paranoid < 0 lets anyone trace");
        return;
    }
    let Some(err) = refused(
        "kernel-noperfmon",
        "setpriv --inh-caps=-perfmon,-sys_admin,-bpf --bounding-set=-perfmon,-sys_admin,-bpf --",
    ) else {
        return;
    };
    assert!(
        err.contains("tracepoint fuse:fuse_request_send") && err.contains("CAP_PERFMON"),
        "{err}"
    );
}

#[test]
fn without_tracefs_the_mount_is_refused_in_one_line() {
    // A mount namespace without tracefs, and without CAP_SYS_ADMIN to mount it again.
    let Some(err) = refused(
        "kernel-notracefs",
        "unshare -m --propagation private sh -c 'for m in $(grep -w tracefs /proc/self/mounts | cut -d\" \" -f2); do umount \"$m\"; done; exec setpriv --inh-caps=-sys_admin --bounding-set=-sys_admin -- \"$@\"' sh",
    ) else {
        return;
    };
    assert!(err.contains("tracefs is not mounted"), "{err}");
}

/// This process's ftrace instances of daemon `pid` (`instances/fsprof-PID-N`).
fn instances_of(pid: u32) -> Vec<String> {
    let root = kernel_trace::tracefs::find_or_mount()
        .expect("tracefs")
        .root;
    let prefix = format!("fsprof-{pid}-");
    std::fs::read_dir(root.join("instances"))
        .expect("tracefs instances")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&prefix))
        .collect()
}

/// The block layers' ftrace instance lives as long as the daemon: there while it serves, gone
/// once it is unmounted; one left by a daemon killed with SIGKILL is removed by the next
/// `--kernel` mount.
#[test]
fn the_ftrace_instance_lives_as_long_as_the_daemon() {
    let Some(mut f) = Fixture::new("kernel-ftrace", Transport::Classic) else {
        return;
    };
    f.mount(&["--kernel"]);
    let p = f.profile();
    let blocks = extra(&p, "block_layers").unwrap_or_default();
    if blocks.starts_with("none:") {
        eprintln!(
            "SKIPPED: no block device under {}: {blocks}",
            f.lower.display()
        );
        return;
    }
    assert_eq!(extra(&p, "block_trace"), Some("ftrace"), "{}", f.log_text());
    let pid = f.pid();
    assert_eq!(instances_of(pid).len(), 1);
    f.unmount();
    assert_eq!(
        instances_of(pid),
        Vec::<String>::new(),
        "left after unmount"
    );
    // Killed: nothing removes it, until the next mount.
    f.mount(&["--kernel"]);
    let killed = f.pid();
    assert_eq!(instances_of(killed).len(), 1);
    let status = Command::new("kill")
        .args(["-KILL", &killed.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    f.unmount();
    assert_eq!(instances_of(killed).len(), 1, "a killed daemon removed it");
    f.mount(&["--kernel"]);
    assert_eq!(
        instances_of(killed),
        Vec::<String>::new(),
        "the stale instance stayed"
    );
    assert_eq!(instances_of(f.pid()).len(), 1);
}
