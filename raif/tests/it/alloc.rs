//! `fallocate` at every level: preallocation (mode 0 and `KEEP_SIZE`), `PUNCH_HOLE` and
//! `ZERO_RANGE` read as on a plain file, leave the copies and parity right (scrub finds nothing,
//! and with any one branch failed every byte reads the same), and a branch without room
//! answers `ENOSPC` with the size unchanged.

use std::fs::{self, File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use test_support::{Transport, transports};

use crate::fixture::{Fixture, Rng};

/// `fallocate(2)` on `f`; the errno on failure.
pub(crate) fn fallocate(f: &File, mode: i32, off: u64, len: u64) -> Result<(), i32> {
    // SAFETY: a valid descriptor; the call touches no memory of ours.
    let r = unsafe { libc::fallocate(f.as_raw_fd(), mode, off as i64, len as i64) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    }
}

fn every_mode(t: Transport, what: &str, args: &[&str], redundant: bool) {
    let Some(mut f) = Fixture::new(t, &format!("falloc-{what}"), 3) else {
        return;
    };
    f.mount(args);
    let mut rng = Rng::new(91);
    let mut want = rng.bytes(50_000);
    fs::write(f.m("f"), &want).unwrap();
    let h = OpenOptions::new()
        .read(true)
        .write(true)
        .open(f.m("f"))
        .unwrap();
    // Mode 0 past the end: the size grows, the new bytes read as zeros.
    fallocate(&h, 0, 60_000, 10_000).unwrap();
    want.resize(70_000, 0);
    // KEEP_SIZE: the size stays.
    fallocate(&h, libc::FALLOC_FL_KEEP_SIZE, 100_000, 20_000).unwrap();
    assert_eq!(h.metadata().unwrap().len(), 70_000);
    // A hole over partial and whole rows.
    let punch = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
    fallocate(&h, punch, 3000, 30_000).unwrap();
    want[3000..33_000].fill(0);
    // A hole past the end changes nothing.
    fallocate(&h, punch, 200_000, 5000).unwrap();
    // Zeros over the end: the size grows to the range's end.
    fallocate(&h, libc::FALLOC_FL_ZERO_RANGE, 40_000, 40_000).unwrap();
    want[40_000..].fill(0);
    want.resize(80_000, 0);
    // Then data again inside the old hole (its rows' parity must have been right).
    let patch = rng.bytes(5000);
    h.write_all_at(&patch, 10_000).unwrap();
    want[10_000..15_000].copy_from_slice(&patch);
    assert_eq!(
        fallocate(&h, libc::FALLOC_FL_COLLAPSE_RANGE, 0, 4096),
        Err(libc::EOPNOTSUPP)
    );
    assert_eq!(
        fallocate(&h, libc::FALLOC_FL_PUNCH_HOLE, 0, 4096),
        Err(libc::EOPNOTSUPP)
    );
    drop(h);
    assert!(fs::read(f.m("f")).unwrap() == want, "{what}: contents");
    assert_eq!(f.unmount(), Some(0));
    let scrub = f.scrub(false);
    assert_eq!(scrub.code, 0, "{what}: {}{}", scrub.stdout, scrub.stderr);
    assert!(scrub.stdout.contains(" 0 mismatches"), "{}", scrub.stdout);
    if redundant {
        for x in 0..3 {
            f.mount(args);
            fs::write(f.m(".raif"), format!("fail {x}\n")).unwrap();
            assert!(
                fs::read(f.m("f")).unwrap() == want,
                "{what}: contents with branch {x} failed"
            );
            assert_eq!(f.unmount(), Some(0));
            let out = f.rebuild(x, &f.branches[x].clone());
            assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
        }
    }
}

transports!(fallocate_raif0);

fn fallocate_raif0(t: Transport) {
    every_mode(t, "raif0", &["--level", "0", "--stripe", "4K"], false);
}

transports!(fallocate_raif1);

fn fallocate_raif1(t: Transport) {
    every_mode(
        t,
        "raif1",
        &["--level", "1", "--copies", "2", "--stripe", "4K"],
        true,
    );
}

transports!(fallocate_raif4);

fn fallocate_raif4(t: Transport) {
    every_mode(t, "raif4", &["--level", "4", "--stripe", "4K"], true);
}

transports!(fallocate_raif5);

fn fallocate_raif5(t: Transport) {
    every_mode(t, "raif5", &["--level", "5", "--stripe", "4K"], true);
}

transports!(fallocate_without_room_answers_enospc);

/// Preallocating more than a branch holds answers ENOSPC and leaves the size.
fn fallocate_without_room_answers_enospc(t: Transport) {
    let Some(mut f) = Fixture::new(t, "falloc-full", 3) else {
        return;
    };
    if !f.tmpfs(&["8m", "8m", "8m"]) {
        return;
    }
    f.mount(&["--level", "5"]);
    fs::write(f.m("f"), b"abc").unwrap();
    let h = OpenOptions::new().write(true).open(f.m("f")).unwrap();
    assert_eq!(fallocate(&h, 0, 0, 64 << 20), Err(libc::ENOSPC));
    assert_eq!(h.metadata().unwrap().len(), 3);
    fallocate(&h, 0, 0, 1 << 20).unwrap();
    assert_eq!(h.metadata().unwrap().len(), 1 << 20);
    drop(h);
    assert_eq!(f.unmount(), Some(0));
}
