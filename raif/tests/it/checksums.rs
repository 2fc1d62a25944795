//! Block checksums: a byte flipped behind RAIF's back (its part's times put back) in a RAIF5
//! data unit, a RAIF5 parity unit and one copy of a two-copy mirror, on a volume that has
//! crashed before. Scrub names the branch and offset of exactly the bad block and repairs
//! exactly it; reads through the mount return the right bytes and repair the blocks they
//! read. A part's checksums are kept in an attribute of the next branch's part, and past its
//! first MiB in an overflow file, which goes with the last link; RAIF0 files (nothing to
//! repair from) have none. Files in the development tree's older formats are upgraded once by
//! `raif scrub --add-checksums`.

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use test_support::{Transport, transports};

use crate::fixture::{Fixture, Rng, flip_keeping_time, hash, policy_file};
use crate::records::{record, sums_attr};

/// How many sum (or overflow) files the branches hold.
fn sum_files(f: &Fixture) -> usize {
    (0..3)
        .map(|b| fs::read_dir(f.b(b, ".raif-sums")).unwrap().count())
        .sum()
}

/// Waits until the mount has released every file opened (the kernel sends the release after
/// close(2) returns: the checksum attributes are written then).
fn released(f: &Fixture) {
    f.profile_when(|p| {
        let l = p.layer("fuse").unwrap();
        l.count("OP_RELEASE") == l.count("OP_CREATE") + l.count("OP_OPEN")
    });
}

/// Whether each part of `name` has its checksums after the record of the next branch's
/// part, which has no attribute of its own for them.
fn in_attributes(f: &Fixture, name: &str) -> bool {
    (0..3).all(|b| {
        let home = f.b((b + 1) % 3, name);
        sums_attr(&home).is_some_and(|v| !v.is_empty() && v.len() % 4 == 0)
            && crate::fixture::xattr_get(&home, raif::sums::OLD_XATTR).is_none()
    })
}

/// The bytes of every part of `names` on every branch.
fn parts(f: &Fixture, names: &[&str]) -> Vec<Vec<u8>> {
    names
        .iter()
        .flat_map(|n| (0..f.branches.len()).map(move |b| fs::read(f.b(b, n)).unwrap()))
        .collect()
}

fn mismatches(out: &str) -> Vec<&str> {
    out.lines().filter(|l| l.starts_with("mismatch")).collect()
}

/// The `checksum_errors N repaired M` counts of `.raif`.
fn counts(f: &Fixture) -> (u64, u64) {
    let s = f.status();
    let line = s
        .lines()
        .find(|l| l.starts_with("checksum_errors"))
        .unwrap_or_else(|| panic!("{s}"));
    let w: Vec<&str> = line.split_whitespace().collect();
    (w[1].parse().unwrap(), w[3].parse().unwrap())
}

transports!(checksums_name_and_repair_exactly_the_corrupt_block);

fn checksums_name_and_repair_exactly_the_corrupt_block(t: Transport) {
    let Some(mut f) = Fixture::new(t, "sums", 3) else {
        return;
    };
    let policy = policy_file(
        &f,
        "[[rule]]\nglob = \"m2-*\"\nlevel = 1\ncopies = 2\n\n\
         [[rule]]\nglob = \"r0-*\"\nlevel = 0\n",
    );
    let args = ["--level", "5", "--stripe", "4K", "--policy", &policy];
    f.mount(&args);
    let mut rng = Rng::new(11);
    let files: Vec<(&str, Vec<u8>)> = vec![
        ("r5-data", rng.bytes(50_000)),
        ("m2-mirror", rng.bytes(20_000)),
        ("r0-plain", rng.bytes(30_000)),
    ];
    for (n, d) in &files {
        // Synced: a file's checksums are written back when it is synced or its last handle
        // released, and a RELEASE the daemon has not served yet when it is killed leaves the
        // blocks of a new RAIF1 file unverified (entries unknown), not checksummed.
        let mut w = fs::File::create(f.m(n)).unwrap();
        w.write_all(d).unwrap();
        w.sync_all().unwrap();
    }
    // A crash, and the mount after it: the volume "stopped uncleanly" since its last scrub.
    f.kill_now();
    f.mount(&args);
    assert!(f.status().contains("unclean_start true"), "{}", f.status());
    assert_eq!(f.unmount(), Some(0));
    // Every part of a checksummed file has its checksums on the next branch, in an
    // attribute of the part there: small files need no file of their own.
    assert!(in_attributes(&f, "r5-data"));
    assert_eq!(sum_files(&f), 0);
    let clean = parts(&f, &["r5-data", "m2-mirror"]);
    assert!(
        (0..3).all(|b| sums_attr(&f.b(b, "r0-plain")).is_none()),
        "RAIF0 keeps no checksums"
    );

    let r5 = record(&f.b(0, "r5-data")).unwrap().layout;
    let db = r5.data_branch(1, 0);
    let pb = r5.parity_branch(2).unwrap();
    let m2 = record(&f.b(0, "m2-mirror")).unwrap().layout;
    let copy = (0..3).filter(|&b| m2.holds(b)).nth(1).unwrap();
    let flips = |f: &Fixture| {
        flip_keeping_time(&f.b(db, "r5-data"), 4096 + 100);
        flip_keeping_time(&f.b(pb, "r5-data"), 8192 + 50);
        flip_keeping_time(&f.b(copy, "m2-mirror"), 5000);
    };
    flips(&f);

    // Scrub names exactly the bad blocks: branch, part offset, and what they hold.
    let found = f.scrub(false);
    assert_eq!(found.code, 1, "{}{}", found.stdout, found.stderr);
    let lines = mismatches(&found.stdout);
    assert_eq!(lines.len(), 3, "{}", found.stdout);
    let has = |file: &str, what: &str| {
        assert!(
            lines
                .iter()
                .any(|l| l.contains(file) && l.contains(what) && !l.contains("ambiguous")),
            "{file}: {what}\n{}",
            found.stdout
        )
    };
    has(
        "r5-data",
        &format!(
            "block on branch {db} at part offset 4096 (logical offset {}) fails its checksum",
            r5.unit_start(1, 0)
        ),
    );
    has(
        "r5-data",
        &format!("block on branch {pb} at part offset 8192 (parity) fails its checksum"),
    );
    has(
        "m2-mirror",
        &format!("block on branch {copy} at part offset 4096 (logical offset 4096) fails"),
    );

    // --repair rewrites exactly those blocks: every part is byte for byte what it was before
    // the flips.
    let fixed = f.scrub(true);
    assert_eq!(fixed.code, 0, "{}{}", fixed.stdout, fixed.stderr);
    assert_eq!(
        fixed.stdout.matches("[repaired]").count(),
        3,
        "{}",
        fixed.stdout
    );
    let now = parts(&f, &["r5-data", "m2-mirror"]);
    for (i, (a, b)) in clean.iter().zip(&now).enumerate() {
        assert!(a == b, "part {i} differs after the repair");
    }

    // Reads through the mount are right, and the blocks they read that fail are rewritten and
    // counted.
    flips(&f);
    f.mount(&args);
    for (n, d) in &files[..2] {
        assert_eq!(hash(&fs::read(f.m(n)).unwrap()), hash(d), "{n}");
    }
    let (errors, repaired) = counts(&f);
    assert!(errors >= 1, "{}", f.status());
    assert_eq!(errors, repaired, "{}", f.status());
    assert!(
        f.log_text().contains("rewritten from redundancy"),
        "{}",
        f.log_text()
    );
    assert_eq!(f.unmount(), Some(0));
    // What the reads did not reach (the parity; maybe the other copy), scrub repairs.
    let rest = f.scrub(true);
    assert_eq!(rest.code, 0, "{}{}", rest.stdout, rest.stderr);
    let again = f.scrub(false);
    assert!(again.stdout.contains(" 0 mismatches"), "{}", again.stdout);
    let now = parts(&f, &["r5-data", "m2-mirror"]);
    assert!(now == clean, "parts differ from before the flips");
}

transports!(a_file_opened_again_reuses_its_sum_files);

/// Sum files stay open while the file is cached: opening a RAIF5×3 file again opens its three
/// parts and nothing else (Postmark opens a file for every transaction; opening and closing
/// three sum files each time was most of what checksums cost). What the reads verify is
/// still right: a block flipped behind RAIF's back is found through the kept descriptors.
fn a_file_opened_again_reuses_its_sum_files(t: Transport) {
    let Some(f) = Fixture::mounted(t, "sumkeep", 3, &["--level", "5", "--stripe", "4K"]) else {
        return;
    };
    // No other test drops the kernel's caches meanwhile: taken before `k` is made, since a
    // drop_caches that evicts it (even one that ends before the reset) makes RAIF forget the
    // file, and the next open reads its checksum attributes again (CI saw 33 calls, not 30).
    let alone = test_support::drop_caches_alone();
    let mut rng = Rng::new(9);
    let data = rng.bytes(40_000);
    fs::write(f.m("k"), &data).unwrap();
    // Requests finished (in the latency buckets; a call is counted when it starts, so a count
    // alone holds one still running).
    let done = |p: &profile_store::Profile, op: &str| {
        p.layer("fuse")
            .unwrap()
            .op(op)
            .map_or(0, |o| o.merged().iter().sum::<u64>())
    };
    // Every earlier request done (the kernel releases after close returns).
    f.profile_when(|p| done(p, "OP_RELEASE") == done(p, "OP_CREATE") + done(p, "OP_OPEN"));
    f.reset();
    let mut p = f.profile();
    for i in 1..=10 {
        assert_eq!(hash(&fs::read(f.m("k")).unwrap()), hash(&data));
        // Released before the next open (the kernel sends the release after close(2)
        // returns), and the release finished: else the next open may find the parts still
        // open and open none, or race the release that closes them.
        p = f.profile_when(|p| done(p, "OP_OPEN") == i && done(p, "OP_RELEASE") == i);
    }
    let opens: u64 = (0..3)
        .map(|b| p.layer(&format!("branch{b}")).unwrap().count("OP_OPEN"))
        .sum();
    assert_eq!(
        opens, 30,
        "one openat per part per open, none for sum files"
    );
    drop(alone);
    // The kept descriptors still verify: a flipped data block is caught and repaired.
    let l = record(&f.b(0, "k")).unwrap().layout;
    flip_keeping_time(&f.b(l.data_branch(0, 0), "k"), 10);
    test_support::drop_all_caches();
    assert_eq!(hash(&fs::read(f.m("k")).unwrap()), hash(&data));
    let (errors, repaired) = counts(&f);
    assert!(errors >= 1 && errors == repaired, "{}", f.status());
}

transports!(overflow_files_verify_and_go_with_the_last_link_and_checksums_can_be_added);

/// A part past its first MiB keeps the rest of its checksums in an overflow file: those verify
/// too, and the files go with the last link (not with a rename). A file written without
/// checksums gains them through `scrub --add-checksums`.
fn overflow_files_verify_and_go_with_the_last_link_and_checksums_can_be_added(t: Transport) {
    let Some(mut f) = Fixture::new(t, "sumlife", 3) else {
        return;
    };
    f.mount(&["--level", "5", "--stripe", "4K"]);
    assert!(!f.m(".raif-sums").exists(), "the sum directory is hidden");
    let mut rng = Rng::new(5);
    let data = rng.bytes(30_000);
    fs::write(f.m("small"), &data).unwrap();
    released(&f);
    assert!(in_attributes(&f, "small"));
    assert_eq!(sum_files(&f), 0, "a small file has no sum file");
    // 3 MiB over 2 data units a row: parts of 1.5 MiB, past the attribute's 1 MiB.
    let big = rng.bytes(3 << 20);
    fs::write(f.m("a"), &big).unwrap();
    released(&f);
    assert!(in_attributes(&f, "a"));
    assert_eq!(sum_files(&f), 3, "one overflow file per part");
    // A block past the first MiB of a data part, flipped: found and repaired by a read.
    let l = record(&f.b(0, "a")).unwrap().layout;
    flip_keeping_time(&f.b(l.data_branch(300, 0), "a"), 300 * 4096 + 7);
    test_support::drop_all_caches();
    assert_eq!(hash(&fs::read(f.m("a")).unwrap()), hash(&big));
    let (errors, repaired) = counts(&f);
    assert!(errors >= 1 && errors == repaired, "{}", f.status());

    fs::hard_link(f.m("a"), f.m("b")).unwrap();
    fs::remove_file(f.m("a")).unwrap();
    assert_eq!(sum_files(&f), 3, "a link is left");
    assert_eq!(hash(&fs::read(f.m("b")).unwrap()), hash(&big));
    fs::remove_file(f.m("b")).unwrap();
    assert_eq!(sum_files(&f), 0, "the last link took them");
    // A rename over a file's last link takes them too (the replaced file's, not the moved).
    fs::write(f.m("c"), &big).unwrap();
    fs::write(f.m("d"), &big[..5 << 19]).unwrap();
    assert_eq!(sum_files(&f), 6);
    fs::rename(f.m("c"), f.m("d")).unwrap();
    assert_eq!(sum_files(&f), 3, "the replaced file's overflow files went");
    assert_eq!(hash(&fs::read(f.m("d")).unwrap()), hash(&big));
    // Cut below the first MiB of each part, it needs its overflow files no more.
    fs::OpenOptions::new()
        .write(true)
        .open(f.m("d"))
        .unwrap()
        .set_len(100_000)
        .unwrap();
    let empty = (0..3).all(|b| {
        fs::read_dir(f.b(b, ".raif-sums"))
            .unwrap()
            .all(|e| e.unwrap().metadata().unwrap().len() == 0)
    });
    assert!(empty, "overflow files cut");
    assert_eq!(fs::read(f.m("d")).unwrap(), &big[..100_000]);
    fs::remove_file(f.m("d")).unwrap();
    assert_eq!(sum_files(&f), 0);
    assert_eq!(f.unmount(), Some(0));
    let clean = f.scrub(false);
    assert!(clean.stdout.contains(" 0 mismatches"), "{}", clean.stdout);

    // A file written without checksums gains them through scrub --add-checksums, and from
    // then on a flipped byte is found and repaired by checksum, not by evidence.
    f.mount(&["--level", "5", "--stripe", "4K", "--no-checksums"]);
    fs::write(f.m("old"), &data).unwrap();
    assert_eq!(f.unmount(), Some(0));
    assert!((0..3).all(|b| sums_attr(&f.b(b, "old")).is_none()));
    let added = f.raif(&["scrub", "--branches", &f.branch_list(), "--add-checksums"]);
    assert_eq!(added.code, 0, "{}{}", added.stdout, added.stderr);
    assert!(
        added.stdout.contains("checksums added to 1 files"),
        "{}",
        added.stdout
    );
    assert!(in_attributes(&f, "old"));
    let l = record(&f.b(0, "old")).unwrap().layout;
    let db = l.data_branch(0, 0);
    flip_keeping_time(&f.b(db, "old"), 3);
    let fixed = f.scrub(true);
    assert_eq!(fixed.code, 0, "{}{}", fixed.stdout, fixed.stderr);
    assert!(
        fixed.stdout.contains(&format!(
            "block on branch {db} at part offset 0 (logical offset 0) fails its checksum"
        )),
        "{}",
        fixed.stdout
    );
    f.mount(&["--level", "5", "--stripe", "4K"]);
    assert_eq!(fs::read(f.m("old")).unwrap(), data);
}

transports!(older_formats_are_upgraded_once_by_add_checksums);

/// A volume made by the development tree holds files whose parts keep their checksums in
/// formats this one does not read: every entry in a sum file (`sumfile`), or the first ones
/// in an attribute of their own after the file's id (`apart`, [`raif::sums::OLD_XATTR`]).
/// Those layouts are written here directly. They are not read: the files read right and
/// unverified, and scrub calls them unprotected, finds no mismatch and writes nothing. `raif
/// scrub --add-checksums` gives them their checksums once, after the record (the old
/// attribute goes, the sum file is emptied); run again, it has nothing to do. From then on a
/// flipped byte is found by checksum, named, and repaired by scrub and by a read.
fn older_formats_are_upgraded_once_by_add_checksums(t: Transport) {
    let Some(mut f) = Fixture::new(t, "sumupgrade", 3) else {
        return;
    };
    f.mount(&["--level", "5", "--stripe", "4K", "--no-checksums"]);
    let mut rng = Rng::new(17);
    let data = rng.bytes(30_000);
    fs::write(f.m("sumfile"), &data).unwrap();
    fs::write(f.m("apart"), &data).unwrap();
    fs::write(f.m("none"), &data).unwrap();
    assert_eq!(f.unmount(), Some(0));
    let meta = |name: &str| record(&f.b(0, name)).unwrap();
    let (ms, ma) = (meta("sumfile"), meta("apart"));
    for b in 0..3 {
        let home = (b + 1) % 3;
        // The sum file: every entry, 4 bytes each, at the overflow file's name.
        let at = format!(".raif-sums/{:016x}.{b}", ms.id);
        fs::write(f.b(home, &at), expected_entries(&f, "sumfile", b)).unwrap();
        // The attribute apart: the file's id, then the entries.
        let mut v = ma.id.to_le_bytes().to_vec();
        v.extend(expected_entries(&f, "apart", b));
        crate::fixture::xattr_set(&f.b(home, "apart"), raif::sums::OLD_XATTR, &v);
    }
    let names = ["sumfile", "apart", "none"];
    assert!(names.iter().all(|n| !in_attributes(&f, n)));

    // Not read: the files serve their data, unverified; scrub changes nothing.
    f.mount(&["--level", "5", "--stripe", "4K"]);
    for n in names {
        assert_eq!(fs::read(f.m(n)).unwrap(), data, "{n}");
    }
    assert_eq!(f.unmount(), Some(0));
    let before = parts(&f, &names);
    let said = f.scrub(false);
    assert_eq!(said.code, 0, "{}{}", said.stdout, said.stderr);
    assert!(said.stdout.contains(" 0 mismatches"), "{}", said.stdout);
    assert!(!said.stdout.contains("checksums added"), "{}", said.stdout);
    assert_eq!(parts(&f, &names), before, "scrub wrote nothing");

    let added = f.raif(&["scrub", "--branches", &f.branch_list(), "--add-checksums"]);
    assert_eq!(added.code, 0, "{}{}", added.stdout, added.stderr);
    assert!(
        added.stdout.contains("checksums added to 3 files"),
        "{}",
        added.stdout
    );
    for n in names {
        assert!(in_attributes(&f, n), "{n}: checksums after the record");
    }
    for b in 0..3 {
        let home = (b + 1) % 3;
        let at = format!(".raif-sums/{:016x}.{b}", ms.id);
        let len = fs::metadata(f.b(home, &at)).map_or(0, |m| m.len());
        assert_eq!(len, 0, "the old sum file of part {b} holds nothing now");
        for n in names {
            assert_eq!(
                sums_attr(&f.b(home, n)).unwrap(),
                expected_entries(&f, n, b),
                "{n} part {b}"
            );
        }
    }
    assert_eq!(parts(&f, &names), before, "the data is untouched");
    // Once only: run again, nothing to add.
    let again = f.raif(&["scrub", "--branches", &f.branch_list(), "--add-checksums"]);
    assert_eq!(again.code, 0, "{}{}", again.stdout, again.stderr);
    assert!(
        again.stdout.contains("checksums added to 0 files"),
        "{}",
        again.stdout
    );
    assert!(!again.stdout.contains("unprotected"), "{}", again.stdout);

    // A flipped byte in each upgraded file is found by its checksum and repaired.
    for (n, m) in [("sumfile", &ms), ("apart", &ma)] {
        let db = m.layout.data_branch(1, 0);
        flip_keeping_time(&f.b(db, n), 4096 + 9);
        let fixed = f.scrub(true);
        assert_eq!(fixed.code, 0, "{}{}", fixed.stdout, fixed.stderr);
        assert!(
            fixed.stdout.contains(&format!(
                "block on branch {db} at part offset 4096 (logical offset {}) fails its checksum",
                m.layout.unit_start(1, 0)
            )),
            "{n}: {}",
            fixed.stdout
        );
    }
    assert_eq!(parts(&f, &names), before, "repaired");
    // And by a read through the mount.
    let db = ma.layout.data_branch(2, 0);
    flip_keeping_time(&f.b(db, "apart"), 2 * 4096 + 5);
    f.mount(&["--level", "5", "--stripe", "4K"]);
    assert_eq!(fs::read(f.m("apart")).unwrap(), data);
    let (errors, repaired) = counts(&f);
    assert!(errors >= 1 && errors == repaired, "{}", f.status());
}

/// The checksum entries every part of `name` should have: the CRC of each of its blocks.
fn expected_entries(f: &Fixture, name: &str, b: usize) -> Vec<u8> {
    fs::read(f.b(b, name))
        .unwrap()
        .chunks(raif::sums::BLOCK as usize)
        .flat_map(|c| raif::sums::crc(c).to_le_bytes())
        .collect()
}

transports!(a_record_written_again_keeps_the_checksums_after_it);

/// The checksums of a part follow the record of the next branch's part, so every write of a
/// record (a size change through a handle or by name, a link, a rename) keeps them: after
/// each, they are exactly the CRCs of the part's blocks.
fn a_record_written_again_keeps_the_checksums_after_it(t: Transport) {
    let Some(mut f) = Fixture::new(t, "sumrec", 3) else {
        return;
    };
    let args = ["--level", "5", "--stripe", "4K"];
    let mut rng = Rng::new(23);
    let data = rng.bytes(30_000);
    let exact = |f: &Fixture, name: &str, step: &str| {
        for b in 0..3 {
            let home = f.b((b + 1) % 3, name);
            assert_eq!(
                sums_attr(&home).unwrap_or_default(),
                expected_entries(f, name, b),
                "{step}: the checksums of part {b} after the record on branch {}",
                (b + 1) % 3
            );
        }
    };
    f.mount(&args);
    fs::write(f.m("f"), &data).unwrap();
    assert_eq!(f.unmount(), Some(0));
    exact(&f, "f", "written");
    type Step<'a> = (&'a str, &'a dyn Fn(&Fixture));
    let steps: [Step; 5] = [
        ("cut through a handle", &|f| {
            let cut = fs::OpenOptions::new().write(true).open(f.m("f")).unwrap();
            cut.set_len(20_000).unwrap();
        }),
        ("appended", &|f| {
            let mut a = fs::OpenOptions::new().append(true).open(f.m("f")).unwrap();
            a.write_all(&data[..7_000]).unwrap();
        }),
        ("cut by name", &|f| {
            let p = std::ffi::CString::new(f.m("f").into_os_string().into_encoded_bytes());
            // SAFETY: a valid NUL-terminated path.
            assert_eq!(unsafe { libc::truncate(p.unwrap().as_ptr(), 25_000) }, 0);
        }),
        ("linked", &|f| fs::hard_link(f.m("f"), f.m("g")).unwrap()),
        ("renamed", &|f| fs::rename(f.m("f"), f.m("h")).unwrap()),
    ];
    let mut name = "f";
    for (step, act) in steps {
        f.mount(&args);
        act(&f);
        assert_eq!(f.unmount(), Some(0));
        if step == "renamed" {
            name = "h";
        }
        exact(&f, name, step);
        assert!(in_attributes(&f, name), "{step}");
    }
    // And they still find a flipped byte.
    let m = record(&f.b(0, name)).unwrap();
    let db = m.layout.data_branch(2, 0);
    flip_keeping_time(&f.b(db, name), 2 * 4096 + 5);
    let found = f.scrub(true);
    assert_eq!(found.code, 0, "{}{}", found.stdout, found.stderr);
    assert!(
        found
            .stdout
            .contains(&format!("block on branch {db} at part offset")),
        "{}",
        found.stdout
    );
    f.mount(&args);
    let mut want = data[..20_000].to_vec();
    want.extend_from_slice(&data[..5_000]);
    assert_eq!(fs::read(f.m(name)).unwrap(), want);
    assert_eq!(f.unmount(), Some(0));
    exact(&f, name, "repaired");
    // A record written by name, with nothing of the file in the mount's memory (a change of
    // mode while a branch is failed raises the file's generation on the others): it keeps
    // the checksums after the record it replaces.
    f.mount(&args);
    fs::write(f.m(".raif"), b"fail 2\n").unwrap();
    let before = record(&f.b(0, name)).unwrap().generation;
    fs::set_permissions(f.m(name), fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(f.unmount(), Some(0));
    assert!(
        record(&f.b(0, name)).unwrap().generation > before,
        "a record was written"
    );
    for b in [2, 0] {
        let home = f.b((b + 1) % 3, name);
        assert_eq!(
            sums_attr(&home).unwrap_or_default(),
            expected_entries(&f, name, b),
            "degraded chmod: the checksums of part {b}"
        );
    }
}

transports!(checksums_removed_or_cut_behind_raifs_back_are_reported_and_added_again);

/// A part whose checksums were taken away behind RAIF's back (the entries after a record
/// removed, or cut short) is no longer verified: scrub says which part and which blocks hold
/// data without a checksum, `--add-checksums` gives them theirs again once the file is found
/// consistent, and from then on a flipped byte there is found by checksum.
fn checksums_removed_or_cut_behind_raifs_back_are_reported_and_added_again(t: Transport) {
    let Some(mut f) = Fixture::new(t, "sumgone", 3) else {
        return;
    };
    f.mount(&["--level", "5", "--stripe", "4K"]);
    let data = Rng::new(31).bytes(60_000);
    fs::write(f.m("t"), &data).unwrap();
    assert_eq!(f.unmount(), Some(0));
    let attr = |b: usize| f.b((b + 1) % 3, "t");
    let record_of = |b: usize| {
        let v = crate::fixture::xattr_get(&attr(b), raif::layout::XATTR).unwrap();
        raif::layout::record_of(&v).to_vec()
    };
    // Part 0's entries gone (the record alone), part 1's cut after its first two blocks.
    let bare = record_of(0);
    crate::fixture::xattr_set(&attr(0), raif::layout::XATTR, &bare);
    let mut cut = record_of(1);
    cut.push(0);
    cut.extend_from_slice(&expected_entries(&f, "t", 1)[..8]);
    crate::fixture::xattr_set(&attr(1), raif::layout::XATTR, &cut);

    let said = f.scrub(false);
    assert_eq!(said.code, 0, "no mismatch: {}{}", said.stdout, said.stderr);
    for want in [
        "unprotected ",
        "branch 0's part keeps no checksums, while the file's other parts do",
        "of branch 1's part hold data without a checksum (the first at part offset 8192)",
        "1 files hold data without checksums",
    ] {
        assert!(said.stdout.contains(want), "{want}: {}", said.stdout);
    }
    assert!(!said.stdout.contains("branch 2's part"), "{}", said.stdout);

    let added = f.raif(&["scrub", "--branches", &f.branch_list(), "--add-checksums"]);
    assert_eq!(added.code, 0, "{}{}", added.stdout, added.stderr);
    assert!(
        added.stdout.contains("[checksums added]"),
        "{}",
        added.stdout
    );
    for b in 0..3 {
        assert_eq!(
            sums_attr(&attr(b)).unwrap(),
            expected_entries(&f, "t", b),
            "part {b}"
        );
    }
    let again = f.scrub(false);
    assert!(!again.stdout.contains("unprotected"), "{}", again.stdout);

    // Protected again: a byte flipped in part 1's fourth block is found by its checksum.
    flip_keeping_time(&f.b(1, "t"), 3 * 4096 + 11);
    let fixed = f.scrub(true);
    assert_eq!(fixed.code, 0, "{}{}", fixed.stdout, fixed.stderr);
    assert!(
        fixed
            .stdout
            .contains("block on branch 1 at part offset 12288"),
        "{}",
        fixed.stdout
    );
    f.mount(&["--level", "5", "--stripe", "4K"]);
    assert_eq!(fs::read(f.m("t")).unwrap(), data);
}

transports!(a_block_bad_in_every_copy_reads_eio_and_scrub_leaves_it);

/// A block whose every copy fails its checksum cannot be rebuilt: a read of it answers EIO
/// (never the corrupt bytes), the rest of the file reads right, `.raif` counts the error as
/// not repaired, and scrub says nothing checks out to rebuild it from and leaves it.
fn a_block_bad_in_every_copy_reads_eio_and_scrub_leaves_it(t: Transport) {
    use std::os::unix::fs::FileExt;
    let Some(mut f) = Fixture::new(t, "sumeio", 2) else {
        return;
    };
    f.mount(&["--level", "1"]);
    let data = Rng::new(41).bytes(20_000);
    fs::write(f.m("m"), &data).unwrap();
    assert_eq!(f.unmount(), Some(0));
    for b in 0..2 {
        flip_keeping_time(&f.b(b, "m"), 4096 + 5);
    }
    f.mount(&["--level", "1"]);
    test_support::drop_all_caches();
    let file = fs::File::open(f.m("m")).unwrap();
    let mut first = vec![0u8; 4096];
    file.read_exact_at(&mut first, 0).unwrap();
    assert_eq!(first, data[..4096]);
    let mut second = vec![0u8; 4096];
    let e = file.read_exact_at(&mut second, 4096).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
    let mut third = vec![0u8; 4096];
    file.read_exact_at(&mut third, 8192).unwrap();
    assert_eq!(third, data[8192..12_288]);
    drop(file);
    let (errors, repaired) = counts(&f);
    assert!(errors >= 1 && repaired == 0, "{}", f.status());
    assert_eq!(f.unmount(), Some(0));
    let parts_before = parts(&f, &["m"]);
    let out = f.scrub(true);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("fails its checksum, and nothing checks out to rebuild it from"),
        "{}",
        out.stdout
    );
    assert_eq!(parts(&f, &["m"]), parts_before, "nothing rewritten");
}

transports!(a_file_without_checksums_gains_them_when_rewritten);

/// A file made without checksums (`--no-checksums`, or by a release before them) gains them
/// when it is rewritten whole through a mount that keeps them (opened with `O_TRUNC`), and a
/// flipped byte is then found by checksum.
fn a_file_without_checksums_gains_them_when_rewritten(t: Transport) {
    let Some(mut f) = Fixture::new(t, "sumgain", 3) else {
        return;
    };
    let mut rng = Rng::new(43);
    f.mount(&["--level", "5", "--stripe", "4K", "--no-checksums"]);
    fs::write(f.m("old"), rng.bytes(20_000)).unwrap();
    assert_eq!(f.unmount(), Some(0));
    assert!((0..3).all(|b| sums_attr(&f.b(b, "old")).is_none()));
    f.mount(&["--level", "5", "--stripe", "4K"]);
    let data = rng.bytes(30_000);
    fs::write(f.m("old"), &data).unwrap();
    assert_eq!(f.unmount(), Some(0));
    assert!(in_attributes(&f, "old"));
    for b in 0..3 {
        assert_eq!(
            sums_attr(&f.b((b + 1) % 3, "old")).unwrap(),
            expected_entries(&f, "old", b),
            "part {b}"
        );
    }
    let db = record(&f.b(0, "old")).unwrap().layout.data_branch(1, 0);
    flip_keeping_time(&f.b(db, "old"), 4096 + 9);
    let fixed = f.scrub(true);
    assert_eq!(fixed.code, 0, "{}{}", fixed.stdout, fixed.stderr);
    assert!(
        fixed
            .stdout
            .contains(&format!("block on branch {db} at part offset 4096")),
        "{}",
        fixed.stdout
    );
    f.mount(&["--level", "5", "--stripe", "4K"]);
    assert_eq!(fs::read(f.m("old")).unwrap(), data);
}
