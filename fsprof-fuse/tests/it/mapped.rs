//! Writes through a shared mapping of a file opened with `O_DIRECT` or `O_APPEND`, and an
//! fsx-like exerciser of direct and mapped I/O: the same as on LOWER (issue 42). The kernel
//! writes a mapping's pages back through any writable handle of the file; on ext4 the last
//! page of an `O_DIRECT` file failed with `EINVAL` (so `msync` did), and through an `O_APPEND`
//! handle the pages went to the end of the file.

use std::fs;

use test_support::exerciser::{self, Config, mapped_writes};

use crate::fixture::{Fixture, FsDir, Transport};

/// The modes in which the kernel sends data to the daemon.
const MODES: [&[&str]; 3] = [&[], &["--writeback"], &["--direct-io"]];

fn mapped_writes_on_direct_and_append_files_work_as_on_lower(t: Transport) {
    let Some(base) = FsDir::ext4() else {
        return;
    };
    for mode in MODES {
        let Some(mut f) = Fixture::new_in("mapped", base.path(), t) else {
            return;
        };
        let reference = f.root.join("ref");
        fs::create_dir(&reference).unwrap();
        let want = mapped_writes(&reference);
        let ok = want.outcomes.iter().all(|o| o.ends_with("Ok(())"));
        assert!(ok, "{:?}", want.outcomes);
        assert_eq!(want.append.len(), 8195);
        f.mount(mode);
        let got = mapped_writes(&f.mnt);
        assert_eq!(got.outcomes, want.outcomes, "{mode:?}");
        assert!(
            got.direct == want.direct,
            "{mode:?}: the O_DIRECT file differs"
        );
        assert!(
            got.append == want.append,
            "{mode:?}: the O_APPEND file differs"
        );
        // And LOWER holds what the mount showed.
        assert!(fs::read(f.l("direct")).unwrap() == want.direct, "{mode:?}");
    }
}
transports!(mapped_writes_on_direct_and_append_files_work_as_on_lower);

/// fsx's `-Z` with mapped reads and writes: 10,000 operations on ext4, first on LOWER itself
/// (the exerciser is right there), then through the mount; fewer in the other data modes.
fn the_direct_and_mapped_io_exerciser_passes_through_the_mount(t: Transport) {
    let Some(base) = FsDir::ext4() else {
        return;
    };
    for (mode, ops) in [(MODES[0], 10_000), (MODES[1], 2_000), (MODES[2], 2_000)] {
        let Some(mut f) = Fixture::new_in("fsx", base.path(), t) else {
            return;
        };
        let cfg = Config {
            ops,
            seed: 42,
            ..Config::default()
        };
        let on_lower = exerciser::run(&f.root.join("reference"), cfg).unwrap();
        f.mount(mode);
        let through = exerciser::run(&f.m("fsx"), cfg).unwrap_or_else(|e| panic!("{mode:?}: {e}"));
        assert_eq!(through, on_lower, "{mode:?}: the same operations");
        assert!(through.mapped_writes > ops / 10 && through.direct_writes > ops / 10);
    }
}
transports!(the_direct_and_mapped_io_exerciser_passes_through_the_mount);
