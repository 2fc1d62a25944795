//! Setuid and setgid bits after a change by a caller without `CAP_FSETID`, and objects made in
//! a setgid directory: the same as on LOWER, and the mount's kernel shows the new mode at once
//! (issue 42), in each data mode. The cases and the comparison are
//! [`test_support::privs`]'s, shared with RAIF's tests.

use std::fs;

use test_support::privs::{compare_changes, compare_creations, mode_of, owned_mode};

use crate::fixture::{Fixture, Transport};

/// The modes in which the kernel sends data to the daemon (others may use the mount).
const MODES: [&[&str]; 3] = [
    &["--allow-other"],
    &["--allow-other", "--direct-io"],
    &["--allow-other", "--writeback"],
];

fn setuid_bits_go_as_on_lower_and_the_mount_shows_it_at_once(t: Transport) {
    for args in MODES {
        let Some(f) = Fixture::mounted("privs", t, args) else {
            return;
        };
        let reference = f.root.join("ref");
        fs::create_dir(&reference).unwrap();
        let bad = compare_changes(&f.mnt, &reference, &|n| vec![mode_of(&f.l(n))]);
        assert!(bad.is_empty(), "{args:?}:\n{}", bad.join("\n"));
    }
}
transports!(setuid_bits_go_as_on_lower_and_the_mount_shows_it_at_once);

fn objects_made_in_a_setgid_directory_get_its_group_and_bits_as_on_lower(t: Transport) {
    let Some(f) = Fixture::mounted("sgid-dir", t, &["--allow-other"]) else {
        return;
    };
    let reference = f.root.join("ref");
    fs::create_dir(&reference).unwrap();
    let bad = compare_creations(&f.mnt, &reference, &|n| vec![owned_mode(&f.l(n))]);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
transports!(objects_made_in_a_setgid_directory_get_its_group_and_bits_as_on_lower);
