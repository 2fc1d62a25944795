//! The kernel-cache presets (`--cache exact|normal|fast`): the profile's header names the one
//! used; an `exact` mount counts every lookup and stat the workload makes; `normal` leaves a
//! repeated one to the kernel's caches, and a knob given on its own overrides its preset.

use std::fs;

use crate::fixture::{Fixture, Transport, errno};

/// Stats of one file, and of one name that does not exist, made by the workload below.
const STATS: u64 = 50;

/// Creates `f`, resets the profile, then stats `f` and a missing name [`STATS`] times each.
/// Returns the profile's (LOOKUP, GETATTR) counts.
fn stat_workload(f: &Fixture) -> (u64, u64) {
    fs::write(f.m("f"), b"x").unwrap();
    // The write left the size and times to be asked for once: before the count starts.
    fs::metadata(f.m("f")).unwrap();
    f.reset();
    for _ in 0..STATS {
        fs::metadata(f.m("f")).unwrap();
        assert_eq!(errno(fs::metadata(f.m("absent"))), libc::ENOENT);
    }
    let p = f.quiescent_profile();
    (
        p.layers[0].count("OP_LOOKUP"),
        p.layers[0].count("OP_GETATTR"),
    )
}

fn the_header_names_the_preset(t: Transport) {
    // No --cache: the default, normal.
    for (args, name) in [
        (&[][..], "normal"),
        (&["--cache", "exact"][..], "exact"),
        (&["--cache", "normal"][..], "normal"),
        (&["--cache", "fast"][..], "fast"),
    ] {
        let Some(f) = Fixture::mounted("cache-header", t, args) else {
            return;
        };
        fs::write(f.m("f"), b"x").unwrap();
        let p = f.quiescent_profile();
        assert_eq!(p.extra("cache"), Some(name), "{args:?} {t:?}");
        // Only fast gathers writes, and says so.
        let writeback = (name == "fast").then_some("true");
        assert_eq!(p.extra("writeback_cache"), writeback, "{args:?} {t:?}");
    }
}
transports!(the_header_names_the_preset);

fn an_exact_mount_counts_every_lookup_and_stat(t: Transport) {
    let Some(f) = Fixture::mounted("cache-exact", t, &["--cache", "exact"]) else {
        return;
    };
    let (lookups, getattrs) = stat_workload(&f);
    // Each stat of `f` looks it up again and asks for its attributes; each of the missing
    // name looks it up. The kernel may add its own, never fewer.
    assert!(lookups >= 2 * STATS, "{t:?}: {lookups} lookups");
    assert!(getattrs >= STATS, "{t:?}: {getattrs} getattrs");
}
transports!(an_exact_mount_counts_every_lookup_and_stat);

fn a_normal_mount_leaves_repeated_stats_to_the_kernel(t: Transport) {
    let Some(f) = Fixture::mounted("cache-normal", t, &[]) else {
        return;
    };
    let (lookups, getattrs) = stat_workload(&f);
    // `f`'s name and attributes came with its creation; the missing name is looked up once
    // and then remembered (a negative entry).
    assert_eq!(lookups, 1, "{t:?}");
    assert_eq!(getattrs, 0, "{t:?}");
}
transports!(a_normal_mount_leaves_repeated_stats_to_the_kernel);

fn a_knob_overrides_its_preset(t: Transport) {
    let args = ["--cache", "normal", "--negative-timeout", "0s"];
    let Some(f) = Fixture::mounted("cache-knob", t, &args) else {
        return;
    };
    let (lookups, getattrs) = stat_workload(&f);
    // Only the missing name, never remembered, is asked for each time.
    assert_eq!((lookups, getattrs), (STATS, 0), "{t:?}");
    f.reset();
    // A name made behind the mount's back after the failed lookups is seen at once.
    fs::write(f.l("absent"), b"").unwrap();
    fs::metadata(f.m("absent")).unwrap();
}
transports!(a_knob_overrides_its_preset);
