//! Issue 42 through RAIF: setuid and setgid bits after a change by a caller without
//! `CAP_FSETID`, and objects made in a setgid directory, as on a plain directory of the
//! branches' file system, on every part and in what the mount shows at once; writes through a
//! shared mapping of a file opened `O_DIRECT` or `O_APPEND`, and the direct and mapped I/O
//! exerciser; and file handles, which RAIF refuses (documented).

use std::fs::{self, File};
use std::os::fd::AsFd;

use test_support::exerciser::{self, Config, mapped_writes};
use test_support::privs::{compare_changes, compare_creations, mode_of, owned_mode};
use test_support::{Transport, transports};

use crate::fixture::Fixture;

const LEVELS: [&[&str]; 2] = [
    &["--allow-other", "--level", "1"],
    &["--allow-other", "--level", "5", "--stripe", "4K"],
];

/// What `f` holds of `rel` on each branch that has it.
fn on_branches<T>(f: &Fixture, rel: &str, what: impl Fn(&std::path::Path) -> T) -> Vec<T> {
    (0..f.branches.len())
        .map(|i| f.b(i, rel))
        .filter(|p| p.symlink_metadata().is_ok())
        .map(|p| what(&p))
        .collect()
}

fn setuid_bits_go_on_every_part_as_on_a_plain_directory(t: Transport) {
    for args in LEVELS {
        let Some(f) = Fixture::mounted(t, "privs", 3, args) else {
            return;
        };
        let reference = f.root.join("ref");
        fs::create_dir(&reference).unwrap();
        let bad = compare_changes(&f.mnt, &reference, &|n| on_branches(&f, n, mode_of));
        assert!(bad.is_empty(), "{args:?}:\n{}", bad.join("\n"));
    }
}
transports!(setuid_bits_go_on_every_part_as_on_a_plain_directory);

fn objects_made_in_a_setgid_directory_as_on_a_plain_directory(t: Transport) {
    let Some(f) = Fixture::mounted(t, "sgid-dir", 3, LEVELS[1]) else {
        return;
    };
    let reference = f.root.join("ref");
    fs::create_dir(&reference).unwrap();
    let bad = compare_creations(&f.mnt, &reference, &|n| on_branches(&f, n, owned_mode));
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
transports!(objects_made_in_a_setgid_directory_as_on_a_plain_directory);

fn mapped_writes_on_direct_and_append_files_and_the_exerciser(t: Transport) {
    for args in LEVELS {
        let Some(f) = Fixture::mounted(t, "mapped", 3, args) else {
            return;
        };
        // The last page of a 10,000-byte file opened O_DIRECT (msync failed with EINVAL), and
        // pages written back through an O_APPEND handle: as on the branches' file system.
        let reference = f.root.join("ref");
        fs::create_dir(&reference).unwrap();
        let want = mapped_writes(&reference);
        assert!(mapped_writes(&f.mnt) == want, "{args:?}");
        let cfg = Config {
            ops: 2000,
            seed: 42,
            ..Config::default()
        };
        let counts = exerciser::run(&f.m("fsx"), cfg).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        assert!(counts.mapped_writes > 200, "{counts:?}");
    }
}
transports!(mapped_writes_on_direct_and_append_files_and_the_exerciser);

fn file_handles_are_refused(t: Transport) {
    // Documented: RAIF finds objects by parent and name, so one the kernel forgot could not be
    // found from its node id; handles are refused up front (EOPNOTSUPP, as on a file system
    // that cannot be exported) rather than going stale later.
    let Some(f) = Fixture::mounted(t, "handles", 2, LEVELS[0]) else {
        return;
    };
    fs::write(f.m("a"), b"x").unwrap();
    let dir = File::open(&f.mnt).unwrap();
    let e =
        fsprof_fuse::sys::name_to_handle_at(dir.as_fd(), std::ffi::OsStr::new("a")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EOPNOTSUPP), "{e}");
}
transports!(file_handles_are_refused);
