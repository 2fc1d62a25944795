//! Serving trees far larger than the open-file limit.

use std::fs::{self, File};
use std::os::unix::fs::MetadataExt;

use crate::fixture::Fixture;

const DIRS: usize = 200;
const PER_DIR: usize = 1000;

fn open_fds(pid: u32) -> usize {
    fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

#[test]
fn two_hundred_thousand_files_under_a_limit_of_1024_descriptors() {
    let Some(mut f) = Fixture::new("scale") else {
        return;
    };
    f.mount_with(&["prlimit", "--nofile=1024:1024"], &[]);
    let limits = fs::read_to_string(format!("/proc/{}/limits", f.pid())).unwrap();
    assert!(
        limits
            .lines()
            .any(|l| l.starts_with("Max open files") && l.contains(" 1024 ")),
        "{limits}"
    );
    let mut max_fds = 0;
    for d in 0..DIRS {
        fs::create_dir(f.m(&format!("d{d}"))).unwrap();
        for i in 0..PER_DIR {
            File::create(f.m(&format!("d{d}/f{i}"))).unwrap();
        }
        max_fds = max_fds.max(open_fds(f.pid()));
    }
    // Make the kernel forget its inodes, so every stat below is a lookup by name again.
    fs::write("/proc/sys/vm/drop_caches", b"2").unwrap();
    let mut n = 0;
    for d in 0..DIRS {
        for i in 0..PER_DIR {
            let rel = format!("d{d}/f{i}");
            let (m, l) = (
                fs::metadata(f.m(&rel)).unwrap(),
                fs::metadata(f.l(&rel)).unwrap(),
            );
            assert_eq!((m.ino(), m.len()), (l.ino(), 0));
            n += 1;
        }
        max_fds = max_fds.max(open_fds(f.pid()));
    }
    assert_eq!(n, DIRS * PER_DIR);
    assert!(max_fds <= 1024, "daemon held {max_fds} descriptors");
    let p = f.profile();
    assert!(p.layers[0].count("OP_CREATE") >= (DIRS * PER_DIR) as u64);
    assert!(fs::read_dir(f.m("d7")).unwrap().count() == PER_DIR);
    assert_eq!(f.unmount(), Some(0), "{}", f.log_text());
}
