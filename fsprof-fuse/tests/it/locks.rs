//! Locks between two processes through the mount (kernel-local locks).

use std::fs::{self, File, OpenOptions};
use std::os::fd::AsFd;
use std::process::Command;

use fsprof_fuse::sys;

use crate::fixture::{Fixture, Transport};

/// Run by a second process (this test binary re-executed): tries a POSIX write lock on
/// `FSPROF_LOCK_FILE` and exits 0 if it got it, 1 if another process holds one.
#[test]
#[ignore = "helper process for posix_locks_exclude_another_process"]
fn lock_helper_try_posix_lock() {
    let Some(path) = std::env::var_os("FSPROF_LOCK_FILE") else {
        return;
    };
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let code = match sys::posix_lock(f.as_fd(), true) {
        Ok(()) => 0,
        Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EACCES)) => 1,
        Err(e) => panic!("lock: {e}"),
    };
    std::process::exit(code);
}

fn other_process_gets_posix_lock(path: &std::path::Path) -> bool {
    let st = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "locks::lock_helper_try_posix_lock",
            "--nocapture",
        ])
        .env("FSPROF_LOCK_FILE", path)
        .output()
        .unwrap();
    match st.status.code() {
        Some(0) => true,
        Some(1) => false,
        other => panic!(
            "helper exited {other:?}: {}",
            String::from_utf8_lossy(&st.stderr)
        ),
    }
}

fn posix_locks_exclude_another_process(t: Transport) {
    let Some(f) = Fixture::mounted("posix-locks", t, &[]) else {
        return;
    };
    fs::write(f.m("locked"), b"x").unwrap();
    let path = f.m("locked");
    assert!(
        other_process_gets_posix_lock(&path),
        "nobody holds a lock yet"
    );
    let mine = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    sys::posix_lock(mine.as_fd(), true).unwrap();
    assert!(
        !other_process_gets_posix_lock(&path),
        "our write lock must exclude another process"
    );
    drop(mine);
    assert!(
        other_process_gets_posix_lock(&path),
        "closing released the lock"
    );
}
transports!(posix_locks_exclude_another_process);

// File::lock is Rust 1.89; only this test needs it (the crates themselves build with 1.85).
#[allow(clippy::incompatible_msrv)]
fn flock_excludes_another_process(t: Transport) {
    let Some(f) = Fixture::mounted("flock", t, &[]) else {
        return;
    };
    fs::write(f.m("locked"), b"x").unwrap();
    let mine = File::open(f.m("locked")).unwrap();
    mine.lock().unwrap();
    let try_other = || {
        Command::new("flock")
            .args(["--nonblock", "--exclusive"])
            .arg(f.m("locked"))
            .arg("true")
            .status()
            .unwrap()
            .success()
    };
    assert!(!try_other(), "flock(1) got the lock we hold");
    mine.unlock().unwrap();
    assert!(try_other(), "flock(1) did not get the released lock");
}
transports!(flock_excludes_another_process);
