//! Open files (and directories) whose name is gone, unlinked or replaced by a rename, keep
//! working through their descriptors, even after the daemon's descriptor cache has been turned
//! over many times.
//!
//! Regression test: RAIF found every object by parent and name, so `fstat`, `fchmod` and the
//! reply to `ftruncate` on a file unlinked while open failed with `ENOENT`, and on a file
//! renamed over they reached the file that took its name (`fchmod` changed the other file).

use std::fs::{self, File};
use std::os::unix::fs::{MetadataExt, PermissionsExt};

use test_support::{
    Transport, held_file_operations_work, open_held, removed_dir_answers_fstat, transports,
};

use crate::fixture::{Fixture, xattr_get};

/// Descriptor limit of the daemon: its cache holds half, 32 descriptors.
const LIMIT: &str = "--nofile=64:64";
/// Directories looked into after the name is gone: many times the cache's capacity.
const OTHERS: usize = 150;

/// Mounts `n` branches at `level` under a small descriptor limit, without attribute caching
/// (every `fstat` reaches the daemon).
fn mounted(t: Transport, name: &str, n: usize, level: &str) -> Option<Fixture> {
    let mut f = Fixture::new(t, name, n)?;
    f.mount_with(
        &["prlimit", LIMIT],
        &[
            "--level",
            level,
            "--stripe",
            "4K",
            "--attr-timeout",
            "0s",
            "--entry-timeout",
            "0s",
        ],
    );
    Some(f)
}

/// Makes `OTHERS` directories with a file each through the mount and reads every file: each
/// directory needs cached descriptors.
fn churn_the_descriptor_cache(f: &Fixture) {
    for i in 0..OTHERS {
        fs::create_dir_all(f.m(&format!("others/{i}"))).unwrap();
        fs::write(f.m(&format!("others/{i}/f")), b"o").unwrap();
    }
    for i in 0..OTHERS {
        assert_eq!(fs::read(f.m(&format!("others/{i}/f"))).unwrap(), b"o");
    }
}

fn unlinked_while_open(t: Transport, n: usize, level: &str) {
    let Some(mut f) = mounted(t, &format!("unlinked-{level}"), n, level) else {
        return;
    };
    // Over two 4K stripe units.
    let mut held = open_held(&f.m("held"), 5010);
    fs::create_dir(f.m("dir")).unwrap();
    let dir = File::open(f.m("dir")).unwrap();
    fs::remove_file(f.m("held")).unwrap();
    fs::remove_dir(f.m("dir")).unwrap();
    churn_the_descriptor_cache(&f);
    held_file_operations_work(&mut held, 5010);
    assert_eq!(held.metadata().unwrap().nlink(), 0);
    removed_dir_answers_fstat(&dir);
    // Nothing came back under the old names.
    for b in 0..n {
        assert!(!f.b(b, "held").exists() && !f.b(b, "dir").exists());
    }
    drop((held, dir));
    assert!(
        !f.log_text().contains("Too many open files"),
        "{}",
        f.log_text()
    );
    assert_eq!(f.unmount(), Some(0), "{}", f.log_text());
}

fn renamed_over_while_open(t: Transport, n: usize, level: &str) {
    let Some(mut f) = mounted(t, &format!("renamed-over-{level}"), n, level) else {
        return;
    };
    let mut held = open_held(&f.m("a"), 5010);
    fs::write(f.m("b"), b"newer!").unwrap();
    fs::set_permissions(f.m("b"), fs::Permissions::from_mode(0o644)).unwrap();
    fs::rename(f.m("b"), f.m("a")).unwrap();
    churn_the_descriptor_cache(&f);
    held_file_operations_work(&mut held, 5010);
    // The file now named "a" was not touched, through the mount or on any branch.
    let now = fs::metadata(f.m("a")).unwrap();
    assert_eq!((now.len(), now.mode() & 0o7777), (6, 0o644));
    assert_eq!(fs::read(f.m("a")).unwrap(), b"newer!");
    assert_eq!(xattr_get(&f.m("a"), "user.k2"), None);
    for b in 0..n {
        let m = fs::metadata(f.b(b, "a")).unwrap();
        assert_eq!(m.mode() & 0o7777, 0o644, "branch {b}");
        assert_ne!(m.mtime(), 2_000_000, "branch {b}");
        assert_eq!(xattr_get(&f.b(b, "a"), "user.k2"), None, "branch {b}");
    }
    drop(held);
    assert_eq!(f.unmount(), Some(0), "{}", f.log_text());
    // A fresh mount serves "a" as it was.
    f.mount(&[]);
    assert_eq!(fs::read(f.m("a")).unwrap(), b"newer!");
    assert_eq!(f.unmount(), Some(0), "{}", f.log_text());
}

transports!(an_unlinked_open_file_keeps_working_raif1);

fn an_unlinked_open_file_keeps_working_raif1(t: Transport) {
    unlinked_while_open(t, 2, "1");
}

transports!(an_unlinked_open_file_keeps_working_raif5);

fn an_unlinked_open_file_keeps_working_raif5(t: Transport) {
    unlinked_while_open(t, 3, "5");
}

transports!(an_open_file_renamed_over_keeps_working_raif1);

fn an_open_file_renamed_over_keeps_working_raif1(t: Transport) {
    renamed_over_while_open(t, 2, "1");
}

transports!(an_open_file_renamed_over_keeps_working_raif5);

fn an_open_file_renamed_over_keeps_working_raif5(t: Transport) {
    renamed_over_while_open(t, 3, "5");
}
