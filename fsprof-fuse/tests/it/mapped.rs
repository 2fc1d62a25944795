//! Writes through a shared mapping of a file opened with `O_DIRECT` or `O_APPEND`, and an
//! fsx-like exerciser of direct and mapped I/O: the same as on LOWER (issue 42). The kernel
//! writes a mapping's pages back through any writable handle of the file; on ext4 the last
//! page of an `O_DIRECT` file failed with `EINVAL` (so `msync` did), and through an `O_APPEND`
//! handle the pages went to the end of the file.

use std::fs::{self, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use test_support::SharedMapping;
use test_support::exerciser::{self, Config};

use crate::fixture::{Fixture, FsDir, Transport};

/// The modes in which the kernel sends data to the daemon.
const MODES: [&[&str]; 3] = [&[], &["--writeback"], &["--direct-io"]];

/// Writes through a mapping of `dir/direct` (opened `O_DIRECT`, 10,000 bytes: its last page
/// is no multiple of ext4's block) and of `dir/append` (opened `O_APPEND`), each `msync`ed:
/// whether each `msync` worked, and what the files hold then.
fn mapped_writes(dir: &Path) -> (Vec<String>, Vec<u8>, Vec<u8>) {
    let mut outcomes = Vec::new();
    let direct = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(dir.join("direct"))
        .unwrap();
    direct.set_len(10_000).unwrap();
    let mut map = SharedMapping::new(&direct, 10_000).unwrap();
    let mut data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8 + 1).collect();
    data[..3].copy_from_slice(b"abc");
    map.write(&data);
    outcomes.push(format!(
        "direct msync: {:?}",
        map.sync().map_err(|e| e.kind())
    ));
    drop(map);
    drop(direct);
    fs::write(dir.join("append"), vec![b'a'; 8192]).unwrap();
    let append = OpenOptions::new()
        .read(true)
        .append(true)
        .open(dir.join("append"))
        .unwrap();
    let mut map = SharedMapping::new(&append, 8192).unwrap();
    let mut page = map.read();
    page[100..110].copy_from_slice(b"XXXXXXXXXX");
    map.write(&page);
    outcomes.push(format!(
        "append msync: {:?}",
        map.sync().map_err(|e| e.kind())
    ));
    // A write(2) still appends.
    append.write_at(b"end", 0).unwrap();
    drop(map);
    drop(append);
    let read = |n| fs::read(dir.join(n)).unwrap();
    (outcomes, read("direct"), read("append"))
}

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
        assert!(want.0.iter().all(|o| o.ends_with("Ok(())")), "{:?}", want.0);
        assert_eq!(want.2.len(), 8195);
        f.mount(mode);
        let got = mapped_writes(&f.mnt);
        assert_eq!(got.0, want.0, "{mode:?}");
        assert!(got.1 == want.1, "{mode:?}: the O_DIRECT file differs");
        assert!(got.2 == want.2, "{mode:?}: the O_APPEND file differs");
        // And LOWER holds what the mount showed.
        assert!(fs::read(f.l("direct")).unwrap() == want.1, "{mode:?}");
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
