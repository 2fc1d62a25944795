//! The two transports serve alike: the kernel's forgets reach the daemon on both, one workload
//! gives the same counts on both, and on the io_uring transport requests really go over the
//! rings while forgets come over `/dev/fuse`.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{PermissionsExt, symlink};

use fsprof_fuse::sys;
use profile_store::{Profile, views};

use crate::fixture::{Fixture, Transport, drop_caches, drop_caches_alone, drop_caches_now};

/// Files made in `d` by [`forgets_reach_the_daemon`].
const FILES: u64 = 50;

/// After `drop_caches` the kernel forgets every inode it no longer uses and tells the daemon:
/// one FORGET per node (fuser hands a batch forget over node by node), whichever transport
/// carries the other requests.
fn forgets_reach_the_daemon(t: Transport) {
    let Some(f) = Fixture::mounted("forgets", t, &[]) else {
        return;
    };
    fs::create_dir(f.m("d")).unwrap();
    // Held open, `d` stays in the kernel's cache while its files are made (a concurrent
    // drop_caches would otherwise make it looked up, and forgotten, twice).
    let d = File::open(f.m("d")).unwrap();
    for i in 0..FILES {
        File::create(f.m(&format!("d/f{i}"))).unwrap();
    }
    drop(d);
    let p = f.quiescent_profile();
    let lookups = p.layers[0].count("OP_LOOKUP");
    drop_caches();
    // `d` and its files: each forgotten once (whenever a drop_caches came).
    let p = f.profile_when(|p| p.layers[0].count("OP_FORGET") > FILES);
    assert_eq!(p.layers[0].count("OP_FORGET"), FILES + 1, "{t:?}");
    // The kernel did forget them: each is looked up again by name.
    for i in 0..FILES {
        fs::metadata(f.m(&format!("d/f{i}"))).unwrap();
    }
    let p = f.quiescent_profile();
    assert!(
        p.layers[0].count("OP_LOOKUP") > lookups + FILES,
        "{t:?}: {} lookups after {lookups}",
        p.layers[0].count("OP_LOOKUP")
    );
}
transports!(forgets_reach_the_daemon);

/// Nodes [`workload`] makes: `a`, `a/f0`..`a/f9` and `a/s`.
const NODES: u64 = 12;

/// Every kind of request the passthrough serves, on `a/` in `f`'s mount.
fn workload(f: &Fixture) {
    fs::create_dir(f.m("a")).unwrap();
    for i in 0..10 {
        let mut w = File::create(f.m(&format!("a/f{i}"))).unwrap();
        w.write_all(format!("file {i}\n").as_bytes()).unwrap();
    }
    for i in 0..10 {
        let mut s = String::new();
        File::open(f.m(&format!("a/f{i}")))
            .unwrap()
            .read_to_string(&mut s)
            .unwrap();
        assert_eq!(s, format!("file {i}\n"));
    }
    assert_eq!(fs::read_dir(f.m("a")).unwrap().count(), 10);
    fs::rename(f.m("a/f0"), f.m("a/g0")).unwrap();
    fs::remove_file(f.m("a/f1")).unwrap();
    symlink("f2", f.m("a/s")).unwrap();
    assert_eq!(fs::read_link(f.m("a/s")).unwrap().to_str(), Some("f2"));
    fs::hard_link(f.m("a/f3"), f.m("a/h3")).unwrap();
    let f4 = File::open(f.m("a/f4")).unwrap();
    sys::setxattr_fd(f4.as_fd(), "user.k".as_ref(), b"v", 0).unwrap();
    let mut buf = [0u8; 64];
    assert_eq!(
        sys::getxattr_fd(f4.as_fd(), "user.k".as_ref(), &mut buf).unwrap(),
        1
    );
    assert!(sys::listxattr_fd(f4.as_fd(), &mut buf).unwrap() > 0);
    sys::removexattr_fd(f4.as_fd(), "user.k".as_ref()).unwrap();
    drop(f4);
    OpenOptions::new()
        .write(true)
        .open(f.m("a/f5"))
        .unwrap()
        .set_len(3)
        .unwrap();
    fs::set_permissions(f.m("a/f6"), fs::Permissions::from_mode(0o600)).unwrap();
    let f7 = OpenOptions::new()
        .read(true)
        .write(true)
        .open(f.m("a/f7"))
        .unwrap();
    sys::fallocate(f7.as_fd(), 0, 0, 8192).unwrap();
    assert_eq!(sys::lseek(f7.as_fd(), 0, libc::SEEK_DATA).unwrap(), 0);
    let f9 = OpenOptions::new().write(true).open(f.m("a/f9")).unwrap();
    sys::copy_file_range(f7.as_fd(), 0, f9.as_fd(), 100, 7, 0).unwrap();
    let _ = sys::poll(f9.as_fd(), libc::POLLOUT, 0);
    f9.sync_all().unwrap();
    drop((f7, f9));
    sys::fstatvfs(File::open(f.m("a")).unwrap().as_fd()).unwrap();
}

/// The profile once every open file and directory has been released and every call
/// recorded.
fn settled(f: &Fixture) -> Profile {
    f.profile_when(|p| {
        let c = |op| p.layers[0].count(op);
        c("OP_RELEASE") == c("OP_OPEN") + c("OP_CREATE")
            && c("OP_RELEASEDIR") == c("OP_OPENDIR")
            && views::check(p, 0).is_empty()
    })
}

/// Every layer's count of every operation.
fn counts(p: &Profile) -> BTreeMap<(String, String), u64> {
    p.layers
        .iter()
        .flat_map(|l| {
            l.ops
                .iter()
                .map(|o| ((l.name.clone(), o.name.clone()), o.count))
        })
        .collect()
}

/// The same workload, forgets included, gives the same count of every operation in every
/// layer on both transports (caches kept long, so nothing depends on timing).
#[test]
fn one_workload_counts_the_same_on_both_transports() {
    // No other test may make the kernel drop its caches meanwhile.
    let alone = drop_caches_alone();
    let mut seen = Vec::new();
    for t in [Transport::Classic, Transport::Uring] {
        let args = [
            "--layers",
            "fuse,lower",
            "--entry-timeout",
            "60s",
            "--attr-timeout",
            "60s",
        ];
        let Some(f) = Fixture::mounted("same-counts", t, &args) else {
            return;
        };
        f.reset();
        workload(&f);
        settled(&f);
        drop_caches_now(&alone);
        let p = f.profile_when(|p| p.layers[0].count("OP_FORGET") >= NODES);
        assert_eq!(p.layers[0].count("OP_FORGET"), NODES, "{t:?}");
        let p = settled(&f);
        assert!(p.layers[0].count("OP_SETXATTR") == 1, "{t:?}");
        seen.push((t, counts(&p)));
    }
    let (classic, uring) = (&seen[0].1, &seen[1].1);
    let differ: Vec<_> = classic
        .keys()
        .chain(uring.keys())
        .filter(|k| classic.get(*k) != uring.get(*k))
        .map(|k| (k, classic.get(k), uring.get(k)))
        .collect();
    assert!(differ.is_empty(), "classic vs uring: {differ:?}");
}

/// `(name, times run)` of each of the daemon `pid`'s threads (`schedstat`'s run count).
fn threads(pid: u32) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for e in fs::read_dir(format!("/proc/{pid}/task")).unwrap().flatten() {
        let comm = fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        let sched = fs::read_to_string(e.path().join("schedstat")).unwrap_or_default();
        let runs = sched
            .split_whitespace()
            .nth(2)
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        out.push((comm.trim().to_string(), runs));
    }
    out
}

/// Whether every thread of the daemon `pid` whose name starts with `prefix` (at least one) is
/// waiting in read(2).
fn in_read(pid: u32, prefix: &str) -> bool {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    let read = libc::SYS_read.to_string();
    let mut found = 0;
    for e in tasks.flatten() {
        let comm = fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        if !comm.starts_with(prefix) {
            continue;
        }
        let call = fs::read_to_string(e.path().join("syscall")).unwrap_or_default();
        if call.split_whitespace().next() != Some(read.as_str()) {
            return false;
        }
        found += 1;
    }
    found > 0
}

/// Times the threads whose name starts with `prefix` have run.
fn runs(pid: u32, prefix: &str) -> u64 {
    threads(pid)
        .iter()
        .filter(|(n, _)| n.starts_with(prefix))
        .map(|(_, r)| r)
        .sum()
}

/// On the io_uring transport there is one ring queue thread per possible CPU; they serve the
/// requests, while fuser's `/dev/fuse` thread stays idle until the kernel sends forgets.
#[test]
fn requests_go_over_the_rings_and_forgets_over_dev_fuse() {
    let args = ["--entry-timeout", "0s", "--attr-timeout", "0s"];
    let Some(f) = Fixture::mounted("rings", Transport::Uring, &args) else {
        return;
    };
    let pid = f.pid();
    let cpus = fsprof_fuse::transport::uring::possible_cpus().unwrap();
    // The rings serve as soon as the mount is there; fuser's thread starts a moment later, and
    // is idle once it waits in read(2) on /dev/fuse (a loaded machine can still be running its
    // start-up when the stats below begin).
    test_support::wait_until("fuser's thread waits on /dev/fuse", || {
        in_read(pid, "fuser-")
    });
    let names: Vec<String> = threads(pid).into_iter().map(|(n, _)| n).collect();
    for q in &cpus {
        assert!(names.contains(&format!("fuse-ring-{q}")), "{names:?}");
    }
    assert_eq!(
        names.iter().filter(|n| n.starts_with("fuser-")).count(),
        1,
        "{names:?}"
    );
    // A drop_caches by another test would send a forget meanwhile; taken before `x` is made,
    // so that none started earlier can evict it (its forget would come over /dev/fuse). And `x`
    // is held open while it is looked at, so that nothing else can evict it either (memory
    // pressure from other work on the machine).
    let alone = drop_caches_alone();
    fs::write(f.m("x"), b"x").unwrap();
    let held = File::open(f.m("x")).unwrap();
    let (ring0, dev0) = (runs(pid, "fuse-ring-"), runs(pid, "fuser-"));
    for _ in 0..300 {
        fs::metadata(f.m("x")).unwrap();
    }
    let (ring1, dev1) = (runs(pid, "fuse-ring-"), runs(pid, "fuser-"));
    drop(held);
    // Each stat is a LOOKUP and a GETATTR (nothing is cached), each a wake-up of a queue.
    assert!(
        ring1 - ring0 >= 300,
        "ring threads ran {} times",
        ring1 - ring0
    );
    assert_eq!(dev1, dev0, "/dev/fuse served requests");
    // The forget of `x` comes over /dev/fuse. A forget counted before (a drop_caches of another
    // test binary, or memory pressure) must not pass for this one: wait for a new one.
    let before = f.profile().layers[0].count("OP_FORGET");
    drop_caches_now(&alone);
    drop(alone);
    let p = f.profile_when(|p| p.layers[0].count("OP_FORGET") > before);
    assert!(
        p.layers[0].count("OP_FORGET") > before,
        "no forget after drop_caches"
    );
    assert!(runs(pid, "fuser-") > dev1, "no forget came over /dev/fuse");
}
