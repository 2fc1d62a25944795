//! Open files whose name is gone (unlinked, or replaced by a rename) keep working through their
//! descriptor, even after the daemon's descriptor cache has been turned over many times.
//!
//! Regression test: in path mode an open file was reopened by parent and name once its cached
//! descriptor was evicted, so `ftruncate`, `fchmod`, `futimens` and `flistxattr` on a file
//! unlinked (or renamed over) while open failed with `ENOENT`/`ESTALE`.

use std::fs::{self, File};
use std::io::Read;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

use test_support::{held_file_operations_work, open_held, removed_dir_answers_fstat};

use crate::fixture::{Fixture, Transport};

/// Descriptor limit of the daemon: its cache holds half, 32 descriptors.
const LIMIT: &str = "--nofile=64:64";
/// Files opened after the name is gone: many times the cache's capacity.
const OTHERS: usize = 300;

/// Mounts under a small descriptor limit, without attribute caching (every `fstat` reaches the
/// daemon).
fn mounted(t: Transport, name: &str, mode: &str) -> Option<Fixture> {
    let mut f = Fixture::new(name, t)?;
    f.mount_with(
        &["prlimit", LIMIT],
        &["--inode-mode", mode, "--attr-timeout", "0s"],
    );
    Some(f)
}

/// Opens (and closes) `OTHERS` other files through the mount, each needing a cached descriptor.
fn churn_the_descriptor_cache(f: &Fixture) {
    fs::create_dir(f.l("others")).unwrap();
    for i in 0..OTHERS {
        fs::write(f.l(&format!("others/{i}")), b"o").unwrap();
    }
    for i in 0..OTHERS {
        let mut s = Vec::new();
        File::open(f.m(&format!("others/{i}")))
            .unwrap()
            .read_to_end(&mut s)
            .unwrap();
        assert_eq!(s, b"o");
    }
}

fn unlinked_while_open(t: Transport, mode: &str) {
    let Some(mut f) = mounted(t, &format!("unlinked-{mode}"), mode) else {
        return;
    };
    let mut held = open_held(&f.m("held"), 10);
    fs::create_dir(f.m("dir")).unwrap();
    let dir = File::open(f.m("dir")).unwrap();
    fs::remove_file(f.m("held")).unwrap();
    fs::remove_dir(f.m("dir")).unwrap();
    churn_the_descriptor_cache(&f);
    held_file_operations_work(&mut held, 10);
    assert_eq!(held.metadata().unwrap().nlink(), 0);
    removed_dir_answers_fstat(&dir);
    drop((held, dir));
    assert!(
        !f.log_text().contains("Too many open files"),
        "{}",
        f.log_text()
    );
    assert_eq!(f.unmount(), Some(0), "{}", f.log_text());
}

fn renamed_over_while_open(t: Transport, mode: &str) {
    let Some(mut f) = mounted(t, &format!("renamed-over-{mode}"), mode) else {
        return;
    };
    let mut held = open_held(&f.m("a"), 10);
    fs::write(f.m("b"), b"newer!").unwrap();
    fs::set_permissions(f.m("b"), fs::Permissions::from_mode(0o644)).unwrap();
    fs::rename(f.m("b"), f.m("a")).unwrap();
    churn_the_descriptor_cache(&f);
    held_file_operations_work(&mut held, 10);
    // The object now named "a" was not touched.
    let now = fs::metadata(f.l("a")).unwrap();
    assert_eq!((now.len(), now.mode() & 0o7777), (6, 0o644));
    assert_eq!(fs::read(f.m("a")).unwrap(), b"newer!");
    drop(held);
    assert_eq!(f.unmount(), Some(0), "{}", f.log_text());
}

fn an_unlinked_open_file_keeps_working_by_path(t: Transport) {
    unlinked_while_open(t, "paths");
}
transports!(an_unlinked_open_file_keeps_working_by_path);

fn an_unlinked_open_file_keeps_working_by_handle(t: Transport) {
    unlinked_while_open(t, "handles");
}
transports!(an_unlinked_open_file_keeps_working_by_handle);

fn an_open_file_renamed_over_keeps_working_by_path(t: Transport) {
    renamed_over_while_open(t, "paths");
}
transports!(an_open_file_renamed_over_keeps_working_by_path);

fn an_open_file_renamed_over_keeps_working_by_handle(t: Transport) {
    renamed_over_while_open(t, "handles");
}
transports!(an_open_file_renamed_over_keeps_working_by_handle);
