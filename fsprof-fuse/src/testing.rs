//! Helpers for tests that mount (this crate's, RAIF's, the cross-crate tests).

use std::path::Path;
use std::time::Duration;

use crate::{mount, sys};

/// Whether mount tests can run here (`/dev/fuse` and root). When they cannot, prints why and
/// returns `false`, except under `CI=true`, where that is a failure: CI must really run them.
pub fn fuse_available() -> bool {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    let why = if !Path::new("/dev/fuse").exists() {
        Some("no /dev/fuse")
    } else if sys::geteuid() != 0 {
        Some("not root")
    } else {
        None
    };
    match why {
        None => true,
        Some(w) if ci => panic!("mount tests cannot run under CI: {w}"),
        Some(w) => {
            eprintln!("SKIPPED: mount test needs /dev/fuse and root ({w})");
            false
        }
    }
}

/// Unmounts `mnt` with bounded retries (5 s), then detaches it lazily.
pub fn unmount(mnt: &Path) {
    for _ in 0..50 {
        if !mount::is_mount_point(mnt) || sys::umount(mnt, false).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = sys::umount(mnt, true);
}
