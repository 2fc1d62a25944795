//! A branch without room (`ENOSPC`, `EFBIG`; `EDQUOT` is handled the same way and tested in
//! memory, since root's writes are not held to quotas): the writer gets the branch's error, no
//! branch is failed, every file stays readable, copies and parity stay consistent (scrub is
//! clean), and `statfs` says how much a new file can really take.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use test_support::{Transport, transports};

use crate::fixture::{Fixture, Rng, hash, statvfs_avail};

/// Writes `total` bytes to `path` (created, or truncated) in `chunk`-byte `write(2)` calls
/// until one fails; returns the bytes the file system accepted and the error.
fn write_until_error(
    path: &Path,
    total: usize,
    chunk: usize,
    rng: &mut Rng,
) -> (Vec<u8>, io::Error) {
    let mut f = File::create(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut acked = Vec::new();
    while acked.len() < total {
        let buf = rng.bytes(chunk);
        let mut at = 0;
        while at < buf.len() {
            match f.write(&buf[at..]) {
                Ok(0) => panic!("write returned 0"),
                Ok(n) => {
                    acked.extend_from_slice(&buf[at..at + n]);
                    at += n;
                }
                Err(e) => return (acked, e),
            }
        }
    }
    panic!("{}: {total} bytes written without an error", path.display());
}

/// Every branch is online in `.raif`, and no write was counted degraded.
fn all_online(f: &Fixture) {
    let s = f.status();
    for i in 0..f.branches.len() {
        assert!(
            s.contains(&format!("branch {i} online ")),
            "branch {i} not online:\n{s}\n{}",
            f.log_text()
        );
    }
    assert!(s.contains("degraded_writes 0\n"), "{s}");
}

/// The mount's `statfs` says what a new file of the default level can take: the smallest
/// free space among the branches (whole 4 KiB blocks) times `data` branches' worth.
fn statfs_is_the_smallest_branch_times(f: &Fixture, data: u64) {
    let smallest = f.branches.iter().map(|b| statvfs_avail(b)).min().unwrap();
    assert_eq!(
        statvfs_avail(&f.mnt),
        smallest / 4096 * 4096 * data,
        "statfs of the mount"
    );
}

transports!(a_full_branch_answers_enospc_and_the_volume_stays_online);

/// The case: RAIF5 over three tmpfs branches, one of 6 MiB and two of 100 MiB.
/// Writing 40 MiB, then 200 MiB, must end in ENOSPC (not EIO), with no branch failed, every
/// file readable all along (a reader keeps checking `keep` while the writes fail), the bytes
/// acknowledged before the error readable as written, parity consistent (scrub), `rm`
/// reaching every branch, and the volume writable again once there is room.
fn a_full_branch_answers_enospc_and_the_volume_stays_online(t: Transport) {
    let Some(mut f) = Fixture::new(t, "full5", 3) else {
        return;
    };
    if !f.tmpfs(&["6m", "100m", "100m"]) {
        return;
    }
    let args = ["--level", "5"];
    f.mount(&args);
    let mut rng = Rng::new(12);
    let keep = rng.bytes(3_000_000);
    fs::write(f.m("keep"), &keep).unwrap();
    statfs_is_the_smallest_branch_times(&f, 2);

    // Readers check `keep`, then also `big` once written, all along while writes fail.
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    let reader = |path: std::path::PathBuf, want: u64| {
        let (stop, reads) = (stop.clone(), reads.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let got = fs::read(&path).expect("readable while a write fails");
                assert_eq!(hash(&got), want, "{} changed", path.display());
                reads.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let mut readers = vec![reader(f.m("keep"), hash(&keep))];
    let (big, e) = write_until_error(&f.m("big"), 40 << 20, 1 << 20, &mut rng);
    assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "40 MiB: {e}");
    assert!(big.len() < 12 << 20, "{} bytes fit", big.len());
    readers.push(reader(f.m("big"), hash(&big)));
    let (huge, e) = write_until_error(&f.m("huge"), 200 << 20, 1 << 20, &mut rng);
    assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "200 MiB: {e}");
    // Small writes until not a single block is left on the small branch.
    let (crumbs, e) = write_until_error(&f.m("crumbs"), 12 << 20, 4096, &mut rng);
    assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "crumbs: {e}");
    assert!(statvfs_avail(&f.branches[0]) < 4096, "branch 0 is full");
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().expect("reader");
    }
    assert!(reads.load(Ordering::Relaxed) > 1);
    all_online(&f);
    for (name, want) in [
        ("keep", &keep),
        ("big", &big),
        ("huge", &huge),
        ("crumbs", &crumbs),
    ] {
        assert_eq!(
            fs::metadata(f.m(name)).unwrap().len(),
            want.len() as u64,
            "{name}"
        );
        assert_eq!(hash(&fs::read(f.m(name)).unwrap()), hash(want), "{name}");
    }
    assert_eq!(f.unmount(), Some(0), "{}", f.log_text());
    // The rows the failed writes touched agree with their parity; the full branch's marker
    // was written at unmount (it stays a branch of the volume).
    f.scrub_is_clean();

    f.mount(&args);
    all_online(&f);
    for (name, want) in [("keep", &keep), ("big", &big), ("crumbs", &crumbs)] {
        assert_eq!(hash(&fs::read(f.m(name)).unwrap()), hash(want), "{name}");
    }
    for name in ["big", "huge", "crumbs"] {
        fs::remove_file(f.m(name)).unwrap();
        for b in 0..3 {
            assert!(!f.b(b, name).exists(), "{name} left on branch {b}");
        }
    }
    statfs_is_the_smallest_branch_times(&f, 2);
    let again = rng.bytes(6 << 20);
    fs::write(f.m("again"), &again).unwrap();
    assert_eq!(hash(&fs::read(f.m("again")).unwrap()), hash(&again));
    all_online(&f);
    assert_eq!(f.unmount(), Some(0));
    f.scrub_is_clean();
}

transports!(a_refused_write_inside_a_sparse_file_keeps_its_rows_consistent);

/// A write into the holes of a sparse RAIF5 file (within its size) on a full branch: the
/// bytes read back are a prefix of what was written, then the old zeros, and parity agrees.
fn a_refused_write_inside_a_sparse_file_keeps_its_rows_consistent(t: Transport) {
    let Some(mut f) = Fixture::new(t, "full-sparse", 3) else {
        return;
    };
    if !f.tmpfs(&["100m", "4m", "100m"]) {
        return;
    }
    let args = ["--level", "5", "--stripe", "16K"];
    f.mount(&args);
    let size = 30u64 << 20;
    File::create(f.m("sparse")).unwrap().set_len(size).unwrap();
    let mut rng = Rng::new(5);
    let start = 3u64 << 20;
    let file = OpenOptions::new().write(true).open(f.m("sparse")).unwrap();
    let mut written = Vec::new();
    let err = loop {
        // Odd sizes: segments of one unit and whole rows alike.
        let len = 100_000 + rng.below(200_000) as usize;
        let buf = rng.bytes(len);
        match file.write_at(&buf, start + written.len() as u64) {
            Ok(n) => written.extend_from_slice(&buf[..n]),
            Err(e) => break e,
        }
        assert!(written.len() < 20 << 20, "no error");
    };
    drop(file);
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "{err}");
    all_online(&f);
    let got = fs::read(f.m("sparse")).unwrap();
    assert_eq!(got.len() as u64, size, "the size stays");
    let (head, rest) = got.split_at(start as usize);
    assert!(head.iter().all(|&b| b == 0));
    assert_eq!(
        hash(&rest[..written.len()]),
        hash(&written),
        "acknowledged bytes"
    );
    // After them, what the refused write got in (if anything), then zeros.
    let tail = &rest[written.len()..];
    let zeros_from = tail.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    assert!(
        zeros_from < 400_000,
        "{zeros_from} bytes past the acknowledged ones"
    );
    assert_eq!(f.unmount(), Some(0));
    f.scrub_is_clean();
}

transports!(a_full_mirror_copy_answers_enospc_and_the_copies_agree);

/// RAIF1 over a small and a large branch, in both orders (the copy written first or second
/// runs out): ENOSPC, both copies the same, nothing failed.
fn a_full_mirror_copy_answers_enospc_and_the_copies_agree(t: Transport) {
    for sizes in [["6m", "100m"], ["100m", "6m"]] {
        let Some(mut f) = Fixture::new(t, "full1", 2) else {
            return;
        };
        if !f.tmpfs(&sizes) {
            return;
        }
        f.mount(&["--level", "1"]);
        let mut rng = Rng::new(8);
        let keep = rng.bytes(1_000_000);
        fs::write(f.m("keep"), &keep).unwrap();
        statfs_is_the_smallest_branch_times(&f, 1);
        let (acked, e) = write_until_error(&f.m("big"), 20 << 20, 1 << 20, &mut rng);
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{sizes:?}: {e}");
        // Overwrite the file in place with a larger write that runs out part-way.
        let over = rng.bytes(acked.len() + (3 << 20));
        let r = OpenOptions::new()
            .write(true)
            .open(f.m("big"))
            .unwrap()
            .write_all_at(&over, 0);
        assert_eq!(r.map_err(|e| e.raw_os_error()), Err(Some(libc::ENOSPC)));
        all_online(&f);
        assert_eq!(hash(&fs::read(f.m("keep")).unwrap()), hash(&keep));
        let got = fs::read(f.m("big")).unwrap();
        assert_eq!(got.len(), acked.len(), "{sizes:?}: the size stays");
        let j = (0..got.len())
            .find(|&i| got[i] != over[i])
            .unwrap_or(got.len());
        assert_eq!(
            hash(&got[j..]),
            hash(&acked[j..]),
            "{sizes:?}: new bytes, then old"
        );
        assert_eq!(
            fs::read(f.b(0, "big")).unwrap(),
            fs::read(f.b(1, "big")).unwrap(),
            "{sizes:?}: the copies agree"
        );
        assert_eq!(f.unmount(), Some(0));
        f.scrub_is_clean();
    }
}

transports!(a_branch_out_of_inodes_refuses_new_names_without_failing);

/// A branch out of inodes refuses creates, mkdirs and symlinks with ENOSPC: the branches
/// that had made the object take it back, nothing is failed. (tmpfs counts attributes against
/// the same room as inodes, and a file's record and checksums are larger than a directory's
/// record: what refuses a file may still take a directory, so each kind is made until it is
/// refused.)
fn a_branch_out_of_inodes_refuses_new_names_without_failing(t: Transport) {
    let Some(mut f) = Fixture::new(t, "full-inodes", 3) else {
        return;
    };
    if !f.tmpfs(&["50m", "50m,nr_inodes=40", "50m"]) {
        return;
    }
    f.mount(&["--level", "5"]);
    let mut made = Vec::new();
    let err = loop {
        let name = format!("f{}", made.len());
        match fs::write(f.m(&name), b"x") {
            Ok(()) => made.push(name),
            Err(e) => break (name, e),
        }
        assert!(made.len() < 100, "no error");
    };
    assert_eq!(err.1.raw_os_error(), Some(libc::ENOSPC), "{}", err.1);
    let mut dirs = Vec::new();
    let dir_err = loop {
        let name = format!("d{}", dirs.len());
        match fs::create_dir(f.m(&name)) {
            Ok(()) => dirs.push(name),
            Err(e) => break (name, e),
        }
        assert!(dirs.len() < 100, "no error");
    };
    assert_eq!(
        dir_err.1.raw_os_error(),
        Some(libc::ENOSPC),
        "{}",
        dir_err.1
    );
    let mut links = Vec::new();
    let link_err = loop {
        let name = format!("l{}", links.len());
        match std::os::unix::fs::symlink("target", f.m(&name)) {
            Ok(()) => links.push(name),
            Err(e) => break (name, e),
        }
        assert!(links.len() < 100, "no error");
    };
    assert_eq!(
        link_err.1.raw_os_error(),
        Some(libc::ENOSPC),
        "{}",
        link_err.1
    );
    let refused = [err.0.clone(), dir_err.0, link_err.0];
    for name in &refused {
        for b in 0..3 {
            assert!(!f.b(b, name).exists(), "{name} left on branch {b}");
        }
    }
    all_online(&f);
    // Renames and removals still work, and free room again.
    fs::rename(f.m(&made[0]), f.m("renamed")).unwrap();
    for name in &made[1..] {
        fs::remove_file(f.m(name)).unwrap();
    }
    for name in &dirs {
        fs::remove_dir(f.m(name)).unwrap();
    }
    for name in &links {
        fs::remove_file(f.m(name)).unwrap();
    }
    fs::create_dir(f.m("d")).unwrap();
    all_online(&f);
    assert_eq!(f.unmount(), Some(0));
    f.scrub_is_clean();
}

transports!(a_copy_that_cannot_grow_answers_efbig_and_the_other_is_put_back);

/// RAIF1 over a tmpfs (largest file: 8 EiB) and an ext4 with 1 KiB blocks (4 TiB): a write or
/// a truncation to 5 TiB succeeds on the first copy and is refused with EFBIG by the second.
/// The caller gets EFBIG, the first copy is put back, nothing is failed.
fn a_copy_that_cannot_grow_answers_efbig_and_the_other_is_put_back(t: Transport) {
    let Some(mut f) = Fixture::new(t, "efbig", 2) else {
        return;
    };
    let image = f.root.join("ext4.img");
    File::create(&image).unwrap().set_len(32 << 20).unwrap();
    let mkfs = std::process::Command::new("mkfs.ext4")
        .args(["-q", "-F", "-b", "1024"])
        .arg(&image)
        .status();
    if !mkfs.is_ok_and(|s| s.success()) {
        eprintln!("SKIPPED: mkfs.ext4 is not available");
        return;
    }
    if !f.tmpfs(&["100m", "100m"]) || !f.loop_branch(1, &image) {
        return;
    }
    fs::remove_dir(f.b(1, "lost+found")).unwrap();
    f.mount(&["--level", "1"]);
    let data = b"some bytes".repeat(1000);
    fs::write(f.m("f"), &data).unwrap();
    let far = 5u64 << 40;
    let h = OpenOptions::new().write(true).open(f.m("f")).unwrap();
    let r = h.write_at(b"far away", far);
    assert_eq!(r.map_err(|e| e.raw_os_error()), Err(Some(libc::EFBIG)));
    let r = h.set_len(far);
    assert_eq!(r.map_err(|e| e.raw_os_error()), Err(Some(libc::EFBIG)));
    drop(h);
    all_online(&f);
    assert_eq!(fs::read(f.m("f")).unwrap(), data);
    for b in 0..2 {
        assert_eq!(
            fs::metadata(f.b(b, "f")).unwrap().len(),
            data.len() as u64,
            "copy on branch {b}"
        );
    }
    assert_eq!(f.unmount(), Some(0));
    f.scrub_is_clean();
}

/// Writes `meta` as the record of every part of `name`.
fn set_record(f: &Fixture, name: &str, meta: &raif::layout::FileMeta) {
    let rec = raif::layout::Meta::File(*meta).encode();
    for b in 0..f.branches.len() {
        crate::fixture::xattr_set(&f.b(b, name), raif::layout::XATTR, rec.as_bytes());
    }
}

/// Flips byte `at` of the branch file `p`.
fn flip(p: &Path, at: u64) {
    let file = OpenOptions::new().read(true).write(true).open(p).unwrap();
    let mut b = [0u8; 1];
    file.read_exact_at(&mut b, at).unwrap();
    file.write_all_at(&[b[0] ^ 0xff], at).unwrap();
}

transports!(parts_recorded_out_of_date_are_not_trusted_until_scrub_repairs_them);

/// Where putting a refused write back is itself refused (a copy-on-write branch), the file is
/// recorded out of date instead (crafted here: tmpfs never refuses an overwrite). A RAIF5
/// file whose parity is out of date reads right from its data units, answers EIO rather than
/// wrong bytes once it would need the parity, and `scrub --repair` recomputes the parity; a
/// RAIF1 copy out of date is never read, and scrub copies it from another.
fn parts_recorded_out_of_date_are_not_trusted_until_scrub_repairs_them(t: Transport) {
    let Some(mut f) = Fixture::new(t, "out-of-date", 3) else {
        return;
    };
    let pol = crate::fixture::level_policy(&f, Some(5));
    let args = ["--stripe", "4K", "--policy", &pol];
    f.mount(&args);
    let mut rng = Rng::new(77);
    let (striped, mirrored) = (rng.bytes(50_000), rng.bytes(50_000));
    fs::write(f.m("p"), &striped).unwrap();
    fs::write(f.m("r1-m"), &mirrored).unwrap();
    assert_eq!(f.unmount(), Some(0));
    let spoil = |f: &Fixture| {
        let mut p = crate::records::record(&f.b(0, "p")).unwrap();
        p.parity_stale = true;
        set_record(f, "p", &p);
        flip(&f.b(p.layout.parity_branch(0).unwrap(), "p"), 100);
        let mut m = crate::records::record(&f.b(0, "r1-m")).unwrap();
        let odd = (m.layout.start as usize + 1) % 3;
        m.lost = 1 << odd;
        set_record(f, "r1-m", &m);
        flip(&f.b(odd, "r1-m"), 5000);
        flip(&f.b(odd, "r1-m"), 30_000);
        (p.layout, odd)
    };
    let (l, odd) = spoil(&f);

    f.mount(&args);
    for _ in 0..3 {
        assert_eq!(hash(&fs::read(f.m("p")).unwrap()), hash(&striped));
        assert_eq!(hash(&fs::read(f.m("r1-m")).unwrap()), hash(&mirrored));
    }
    all_online(&f);
    assert_eq!(f.unmount(), Some(0));
    let found = f.scrub(false);
    assert_eq!(found.code, 1, "{}", found.stdout);
    assert!(
        found.stdout.contains("mismatch p: parity out of date"),
        "{}",
        found.stdout
    );
    assert!(
        found.stdout.contains(&format!(
            "mismatch r1-m: copy on branch {odd} is out of date"
        )),
        "{}",
        found.stdout
    );
    let fixed = f.scrub(true);
    assert_eq!(fixed.code, 0, "{}", fixed.stdout);
    assert_eq!(
        fixed.stdout.matches("[repaired]").count(),
        2,
        "{}",
        fixed.stdout
    );
    f.scrub_is_clean();
    let p = crate::records::record(&f.b(1, "p")).unwrap();
    assert!(!p.parity_stale);
    assert_eq!(crate::records::record(&f.b(odd, "r1-m")).unwrap().lost, 0);

    // With a data branch of row 0 gone, the parity would be needed: refused, not made up.
    spoil(&f);
    f.mount(&args);
    let db = l.data_branch(0, 0);
    fs::write(f.m(".raif"), format!("fail {db}\n")).unwrap();
    let r = fs::read(f.m("p"));
    assert_eq!(crate::fixture::errno(r), libc::EIO);
}

transports!(statfs_of_raif1_with_fewer_copies_counts_the_next_files_branches);

/// RAIF1 with fewer copies than branches: `statfs` reports the smallest free space among the
/// branches the next new file's copies go to (which turn from file to file).
fn statfs_of_raif1_with_fewer_copies_counts_the_next_files_branches(t: Transport) {
    let Some(mut f) = Fixture::new(t, "statfs-copies", 3) else {
        return;
    };
    if !f.tmpfs(&["6m", "40m", "100m"]) {
        return;
    }
    f.mount(&["--level", "1", "--copies", "2"]);
    let avail: Vec<u64> = f
        .branches
        .iter()
        .map(|b| statvfs_avail(b) / 4096 * 4096)
        .collect();
    let mut seen = std::collections::HashSet::new();
    for i in 0..6 {
        let reported = statvfs_avail(&f.mnt);
        let name = format!("f{i}");
        fs::write(f.m(&name), b"").unwrap();
        let l = crate::records::record(&f.b(0, &name)).unwrap().layout;
        let copies: Vec<usize> = (0..3).filter(|&b| l.holds(b)).collect();
        assert_eq!(copies.len(), 2);
        let want = copies.iter().map(|&b| avail[b]).min().unwrap();
        assert_eq!(reported, want, "file {i} on branches {copies:?}");
        seen.insert(want);
    }
    assert_eq!(
        seen.len(),
        2,
        "the windows over branches 0-1, 1-2 and 2-0: {seen:?}"
    );
}

transports!(a_write_past_the_daemons_file_size_limit_answers_efbig);

/// A daemon started with a file-size limit (`ulimit -f`, systemd's `LimitFSIZE`) was killed
/// by SIGXFSZ when a caller wrote past it, taking the mount with it. The limit is a branch
/// without room like any other: the caller gets EFBIG, the mount goes on.
fn a_write_past_the_daemons_file_size_limit_answers_efbig(t: Transport) {
    let Some(mut f) = Fixture::new(t, "fsize", 2) else {
        return;
    };
    if !std::process::Command::new("prlimit")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        eprintln!("SKIPPED: prlimit is not available");
        return;
    }
    f.mount_with(&["prlimit", "--fsize=2000000"], &["--level", "1"]);
    let mut rng = Rng::new(3);
    let (acked, e) = write_until_error(&f.m("big"), 3 << 20, 1 << 20, &mut rng);
    assert_eq!(e.raw_os_error(), Some(libc::EFBIG), "{e}");
    assert!(acked.len() <= 2_000_000);
    all_online(&f);
    assert_eq!(hash(&fs::read(f.m("big")).unwrap()), hash(&acked));
    for b in 0..2 {
        assert_eq!(
            fs::metadata(f.b(b, "big")).unwrap().len(),
            acked.len() as u64
        );
    }
    fs::write(f.m("small"), b"still served").unwrap();
    assert_eq!(f.unmount(), Some(0), "{}", f.log_text());
    f.scrub_is_clean();
}

transports!(a_size_past_what_the_branches_hold_is_refused_at_once);

/// RAIF4/5 accepted `truncate -s $((1<<50))` (no branch holds parts that long), and writes near
/// the new end then failed with EFBIG; RAIF1 and ext4 refuse at once. Every level refuses the
/// truncation, and a preallocation that would grow the file, with EFBIG and the size as it
/// was. The daemon's file-size limit stands in for a branch's largest file.
fn a_size_past_what_the_branches_hold_is_refused_at_once(t: Transport) {
    let Some(mut f) = Fixture::new(t, "efbig-size", 3) else {
        return;
    };
    let policy = crate::fixture::level_policy(&f, Some(5));
    let limit = 64u64 << 20;
    f.mount_with(
        &["prlimit", &format!("--fsize={limit}:{limit}")],
        &["--stripe", "4K", "--policy", &policy],
    );
    for name in ["r0-a", "r1-b", "r4-c", "r5-d"] {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(f.m(name))
            .unwrap();
        file.write_all_at(b"hello", 0).unwrap();
        let e = file.set_len(1 << 30).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EFBIG), "{name}: {e}");
        assert_eq!(fs::metadata(f.m(name)).unwrap().len(), 5, "{name}");
        let e = crate::alloc::fallocate(&file, 0, 0, 1 << 30).unwrap_err();
        assert_eq!(e, libc::EFBIG, "{name}");
        assert_eq!(fs::metadata(f.m(name)).unwrap().len(), 5, "{name}");
        // A size the branches hold is taken, and reads back.
        file.set_len(limit / 2).unwrap();
        file.write_all_at(b"end", limit / 2 - 3).unwrap();
        let mut end = [0u8; 3];
        file.read_exact_at(&mut end, limit / 2 - 3).unwrap();
        assert_eq!(&end, b"end", "{name}");
    }
    all_online(&f);
    assert_eq!(f.unmount(), Some(0));
    f.scrub_is_clean();
}
