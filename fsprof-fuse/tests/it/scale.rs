//! Serving trees far larger than the open-file limit.

use std::fs::{self, File};
use std::os::unix::fs::MetadataExt;

use crate::fixture::{Fixture, Transport, drop_caches};

/// The daemon's open-file limit in these tests.
const LIMIT: usize = 1024;
/// Its descriptor cache: half the limit (see `app::build`).
const CACHE: usize = LIMIT / 2;
/// Descriptors besides the cache: standard streams, one /dev/fuse per worker, LOWER, and the
/// few files open at the moment of a count.
const OTHERS: usize = 64;

fn open_fds(pid: u32) -> usize {
    fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Creates `dirs` × `per_dir` files through one mount (`args`) whose daemon runs under a hard
/// limit of `LIMIT` descriptors, makes the kernel forget them, then stats each one (a lookup by
/// name again) and reads one per directory. The daemon's descriptors stay within its cache's
/// capacity plus a few, it never runs out, and it is told of the forgotten inodes.
fn many_files(t: Transport, name: &str, args: &[&str], dirs: usize, per_dir: usize) {
    let Some(mut f) = Fixture::new(name, t) else {
        return;
    };
    f.mount_with(&["prlimit", &format!("--nofile={LIMIT}:{LIMIT}")], args);
    let limits = fs::read_to_string(format!("/proc/{}/limits", f.pid())).unwrap();
    assert!(
        limits
            .lines()
            .any(|l| l.starts_with("Max open files") && l.contains(&format!(" {LIMIT} "))),
        "{limits}"
    );
    let mut max_fds = 0;
    for d in 0..dirs {
        fs::create_dir(f.m(&format!("d{d}"))).unwrap();
        for i in 0..per_dir {
            File::create(f.m(&format!("d{d}/f{i}"))).unwrap();
        }
        fs::write(f.m(&format!("d{d}/data")), format!("dir {d}")).unwrap();
        max_fds = max_fds.max(open_fds(f.pid()));
    }
    // Make the kernel forget its inodes, so every stat below is a lookup by name again.
    drop_caches();
    let mut n = 0;
    for d in 0..dirs {
        for i in 0..per_dir {
            let rel = format!("d{d}/f{i}");
            let (m, l) = (
                fs::metadata(f.m(&rel)).unwrap(),
                fs::metadata(f.l(&rel)).unwrap(),
            );
            assert_eq!((m.ino(), m.len()), (l.ino(), 0));
            n += 1;
        }
        assert_eq!(
            fs::read_to_string(f.m(&format!("d{d}/data"))).unwrap(),
            format!("dir {d}")
        );
        max_fds = max_fds.max(open_fds(f.pid()));
    }
    assert_eq!(n, dirs * per_dir);
    assert!(
        max_fds <= CACHE + OTHERS,
        "daemon held {max_fds} descriptors (cache {CACHE})"
    );
    let p = f.profile();
    assert!(p.layers[0].count("OP_CREATE") >= (dirs * per_dir) as u64);
    assert!(p.layers[0].count("OP_FORGET") > 0, "no inode was forgotten");
    assert!(fs::read_dir(f.m("d7")).unwrap().count() == per_dir + 1);
    assert!(
        !f.log_text().contains("Too many open files"),
        "{}",
        f.log_text()
    );
    assert_eq!(f.unmount(), Some(0), "{}", f.log_text());
}

fn two_hundred_thousand_files_under_a_limit_of_1024_descriptors(t: Transport) {
    many_files(t, "scale", &[], 200, 1000);
}
transports!(two_hundred_thousand_files_under_a_limit_of_1024_descriptors);

fn twenty_thousand_files_by_path_under_a_limit_of_1024_descriptors(t: Transport) {
    many_files(t, "scale-paths", &["--inode-mode", "paths"], 20, 1000);
}
transports!(twenty_thousand_files_by_path_under_a_limit_of_1024_descriptors);
