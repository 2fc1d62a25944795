//! Block checksums: a byte flipped behind RAIF's back (its part's times put back) in a RAIF5
//! data unit, a RAIF5 parity unit and one copy of a two-copy mirror, on a volume that has
//! crashed before. Scrub names the branch and offset of exactly the bad block and repairs
//! exactly it; reads through the mount return the right bytes and repair the blocks they
//! read. Sum files go with the last link; RAIF0 files (nothing to repair from) have none.

use std::fs;
use test_support::{Transport, transports};

use crate::fixture::{Fixture, Rng, flip_keeping_time, hash};
use crate::records::record;

/// The bytes of every part of `names` on every branch.
fn parts(f: &Fixture, names: &[&str]) -> Vec<Vec<u8>> {
    names
        .iter()
        .flat_map(|n| (0..3).map(move |b| fs::read(f.b(b, n)).unwrap()))
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
    let policy = f.root.join("policy.toml");
    fs::write(
        &policy,
        "[[rule]]\nglob = \"m2-*\"\nlevel = 1\ncopies = 2\n\n\
         [[rule]]\nglob = \"r0-*\"\nlevel = 0\n",
    )
    .unwrap();
    let args = [
        "--level",
        "5",
        "--stripe",
        "4K",
        "--policy",
        policy.to_str().unwrap(),
    ];
    f.mount(&args);
    let mut rng = Rng::new(11);
    let files: Vec<(&str, Vec<u8>)> = vec![
        ("r5-data", rng.bytes(50_000)),
        ("m2-mirror", rng.bytes(20_000)),
        ("r0-plain", rng.bytes(30_000)),
    ];
    for (n, d) in &files {
        fs::write(f.m(n), d).unwrap();
    }
    // A crash, and the mount after it: the volume "stopped uncleanly" since its last scrub.
    f.kill_now();
    f.mount(&args);
    assert!(f.status().contains("unclean_start true"), "{}", f.status());
    assert_eq!(f.unmount(), Some(0));
    // Every part of a checksummed file has a sum file on the next branch.
    let id = record(&f.b(0, "r5-data")).unwrap().id;
    for b in 0..3 {
        let sums = f.b((b + 1) % 3, &format!(".raif-sums/{id:016x}.{b}"));
        assert!(sums.exists(), "{}", sums.display());
    }
    let clean = parts(&f, &["r5-data", "m2-mirror"]);
    let r0 = record(&f.b(0, "r0-plain")).unwrap().id;
    assert!(
        (0..3).all(|b| !f.b(b, &format!(".raif-sums/{r0:016x}.{b}")).exists()),
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
    let mut rng = Rng::new(9);
    let data = rng.bytes(40_000);
    fs::write(f.m("k"), &data).unwrap();
    // Every earlier request done (the kernel releases after close returns).
    f.profile_when(|p| {
        let l = p.layer("fuse").unwrap();
        l.count("OP_RELEASE") == l.count("OP_CREATE") + l.count("OP_OPEN")
    });
    f.reset();
    for _ in 0..10 {
        assert_eq!(hash(&fs::read(f.m("k")).unwrap()), hash(&data));
    }
    let p = f.profile_when(|p| {
        let l = p.layer("fuse").unwrap();
        l.count("OP_OPEN") == 10 && l.count("OP_RELEASE") == 10
    });
    let opens: u64 = (0..3)
        .map(|b| p.layer(&format!("branch{b}")).unwrap().count("OP_OPEN"))
        .sum();
    assert_eq!(
        opens, 30,
        "one openat per part per open, none for sum files"
    );
    // The kept descriptors still verify: a flipped data block is caught and repaired.
    let l = record(&f.b(0, "k")).unwrap().layout;
    flip_keeping_time(&f.b(l.data_branch(0, 0), "k"), 10);
    fs::write("/proc/sys/vm/drop_caches", "3\n").unwrap();
    assert_eq!(hash(&fs::read(f.m("k")).unwrap()), hash(&data));
    let (errors, repaired) = counts(&f);
    assert!(errors >= 1 && errors == repaired, "{}", f.status());
}

transports!(sum_files_go_with_the_last_link_and_checksums_can_be_added);

fn sum_files_go_with_the_last_link_and_checksums_can_be_added(t: Transport) {
    let Some(mut f) = Fixture::new(t, "sumlife", 3) else {
        return;
    };
    let sum_files = |f: &Fixture| -> usize {
        (0..3)
            .map(|b| fs::read_dir(f.b(b, ".raif-sums")).unwrap().count())
            .sum()
    };
    f.mount(&["--level", "5", "--stripe", "4K"]);
    assert!(!f.m(".raif-sums").exists(), "the sum directory is hidden");
    let mut rng = Rng::new(5);
    let data = rng.bytes(30_000);
    fs::write(f.m("a"), &data).unwrap();
    assert_eq!(sum_files(&f), 3);
    fs::hard_link(f.m("a"), f.m("b")).unwrap();
    fs::remove_file(f.m("a")).unwrap();
    assert_eq!(sum_files(&f), 3, "a link is left");
    assert_eq!(fs::read(f.m("b")).unwrap(), data);
    fs::remove_file(f.m("b")).unwrap();
    assert_eq!(sum_files(&f), 0, "the last link took them");
    // A rename over a file's last link takes them too (the replaced file's, not the moved).
    fs::write(f.m("c"), &data).unwrap();
    fs::write(f.m("d"), b"replaced").unwrap();
    assert_eq!(sum_files(&f), 6);
    fs::rename(f.m("c"), f.m("d")).unwrap();
    assert_eq!(sum_files(&f), 3, "the replaced file's sum files went");
    assert_eq!(fs::read(f.m("d")).unwrap(), data);
    fs::remove_file(f.m("d")).unwrap();
    assert_eq!(sum_files(&f), 0);
    assert_eq!(f.unmount(), Some(0));

    // A file written without checksums gains them through scrub --add-checksums, and from
    // then on a flipped byte is found and repaired by checksum, not by evidence.
    f.mount(&["--level", "5", "--stripe", "4K", "--no-checksums"]);
    fs::write(f.m("old"), &data).unwrap();
    assert_eq!(f.unmount(), Some(0));
    assert_eq!(sum_files(&f), 0);
    let added = f.raif(&["scrub", "--branches", &f.branch_list(), "--add-checksums"]);
    assert_eq!(added.code, 0, "{}{}", added.stdout, added.stderr);
    assert!(
        added.stdout.contains("checksums added to 1 files"),
        "{}",
        added.stdout
    );
    assert_eq!(sum_files(&f), 3);
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
