//! Regression tests for the audit of issue 6, one per finding, named after the bug.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Stdio};
use test_support::{Transport, transports};

use crate::fixture::{
    Fixture, Rng, flip_keeping_time, hash, level_policy, run, xattr_get, xattr_set,
};
use crate::records::record;

fn acl(p: &Path) -> String {
    run(
        "getfacl",
        &[
            "--omit-header",
            "--absolute-names",
            &p.display().to_string(),
        ],
    )
}

/// The mismatch lines of a scrub's output that contain `what`.
fn lines<'a>(out: &'a str, what: &str) -> Vec<&'a str> {
    out.lines()
        .filter(|l| l.starts_with("mismatch ") && l.contains(what))
        .collect()
}

transports!(rebuild_keeps_extended_attributes_and_acls_and_scrub_compares_them);

/// Finding 1: `rebuild` wrote only RAIF's record on directories and copied only mode, owner
/// and times of files, so user attributes and ACLs were lost; scrub did not notice.
fn rebuild_keeps_extended_attributes_and_acls_and_scrub_compares_them(t: Transport) {
    let Some(mut f) = Fixture::new(t, "xattr-rebuild", 3) else {
        return;
    };
    let pol = level_policy(&f, Some(5));
    let args = ["--stripe", "4K", "--policy", &pol];
    f.mount(&args);
    let mut rng = Rng::new(21);
    fs::create_dir(f.m("d")).unwrap();
    let names = ["r0-a", "r1-b", "r4-c", "r5-d", "d/r1-e", "d/r5-f"];
    for (i, n) in names.iter().enumerate() {
        fs::write(f.m(n), rng.bytes(3000 + 4000 * i)).unwrap();
        xattr_set(&f.m(n), "user.color", format!("c{i}").as_bytes());
    }
    xattr_set(&f.m("d"), "user.color", b"dir");
    run(
        "setfacl",
        &["-m", "u:1234:rw", &f.m("r5-d").display().to_string()],
    );
    run(
        "setfacl",
        &[
            "-m",
            "u:1234:rwx,d:u:1234:rx",
            &f.m("d").display().to_string(),
        ],
    );
    assert!(acl(&f.m("r5-d")).contains("user:1234:rw-"));
    assert_eq!(f.unmount(), Some(0));

    // Branch 1 replaced by an empty directory, then rebuilt.
    fs::rename(&f.branches[1], f.root.join("b1.old")).unwrap();
    fs::create_dir(&f.branches[1]).unwrap();
    let out = f.rebuild(1, &f.branches[1].clone());
    assert!(
        out.stdout.contains("rebuilt branch 1"),
        "{}{}",
        out.stdout,
        out.stderr
    );
    for (i, n) in names.iter().enumerate() {
        assert_eq!(
            xattr_get(&f.b(1, n), "user.color"),
            Some(format!("c{i}").into_bytes()),
            "{n} on the rebuilt branch"
        );
    }
    assert_eq!(xattr_get(&f.b(1, "d"), "user.color"), Some(b"dir".to_vec()));
    for n in ["r5-d", "d"] {
        assert_eq!(acl(&f.b(1, n)), acl(&f.b(0, n)), "ACL of {n}");
    }
    let scrub = f.scrub(false);
    assert!(scrub.stdout.contains(" 0 mismatches"), "{}", scrub.stdout);

    // Scrub compares owner, mode and attributes, and repairs them from branch 0.
    fs::set_permissions(f.b(2, "r4-c"), fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::chown(f.b(1, "r1-b"), Some(77), None).unwrap();
    xattr_set(&f.b(2, "d"), "user.color", b"other");
    xattr_set(&f.b(1, "d/r5-f"), "user.extra", b"x");
    let found = f.scrub(false);
    assert_eq!(found.code, 1, "{}", found.stdout);
    let m = lines(&found.stdout, "");
    assert_eq!(m.len(), 4, "{}", found.stdout);
    let has = |path: &str, what: &str| m.iter().any(|l| l.contains(path) && l.contains(what));
    assert!(
        has("r4-c:", "mode 600 (not 644) on branch 2"),
        "{}",
        found.stdout
    );
    assert!(
        has("r1-b:", "owner 77:0 (not 0:0) on branch 1"),
        "{}",
        found.stdout
    );
    assert!(
        has("d:", "extended attributes user.color on branch 2"),
        "{}",
        found.stdout
    );
    assert!(
        has("d/r5-f:", "extended attributes user.extra on branch 1"),
        "{}",
        found.stdout
    );
    let fixed = f.scrub(true);
    assert_eq!(fixed.code, 0, "{}", fixed.stdout);
    assert_eq!(
        fixed.stdout.matches("[repaired]").count(),
        4,
        "{}",
        fixed.stdout
    );
    assert!(f.scrub(false).stdout.contains(" 0 mismatches"));
    assert_eq!(fs::metadata(f.b(2, "r4-c")).unwrap().mode() & 0o777, 0o644);
    assert_eq!(xattr_get(&f.b(1, "d/r5-f"), "user.extra"), None);
}

transports!(attribute_changes_while_a_branch_is_failed_are_not_served_from_it);

/// Finding 2: chmod, chown and setxattr while a branch was failed did not raise the file's
/// generation, so the branch came back serving the old mode, owner and attributes (a chmod
/// 600 undone), and rebuild skipped them as current.
fn attribute_changes_while_a_branch_is_failed_are_not_served_from_it(t: Transport) {
    let Some(mut f) = Fixture::new(t, "attr-stale", 3) else {
        return;
    };
    let args = [
        "--level",
        "1",
        "--attr-timeout",
        "0s",
        "--entry-timeout",
        "0s",
    ];
    f.mount(&args);
    let names: Vec<String> = (0..6).map(|i| format!("f{i}")).collect();
    for n in &names {
        fs::write(f.m(n), n.as_bytes()).unwrap();
    }
    fs::create_dir(f.m("d")).unwrap();
    fs::write(f.m(".raif"), b"fail 2\n").unwrap();
    assert_eq!(f.state(2), "failed");
    for n in &names {
        fs::set_permissions(f.m(n), fs::Permissions::from_mode(0o600)).unwrap();
        std::os::unix::fs::chown(f.m(n), Some(123), Some(456)).unwrap();
        xattr_set(&f.m(n), "user.tag", b"new");
    }
    fs::set_permissions(f.m("d"), fs::Permissions::from_mode(0o700)).unwrap();
    xattr_set(&f.m("d"), "user.tag", b"dir");
    assert_eq!(f.unmount(), Some(0));

    // Back (stale): every answer about these files comes from the other branches. Each file
    // is asked several times (for a directory the branches take turns).
    f.mount(&args);
    assert_eq!(f.state(2), "stale", "{}", f.status());
    f.reset();
    for _ in 0..3 {
        for n in &names {
            let md = fs::metadata(f.m(n)).unwrap();
            assert_eq!(md.mode() & 0o7777, 0o600, "{n}");
            assert_eq!((md.uid(), md.gid()), (123, 456), "{n}");
            assert_eq!(xattr_get(&f.m(n), "user.tag"), Some(b"new".to_vec()), "{n}");
            assert_eq!(fs::read(f.m(n)).unwrap(), n.as_bytes());
        }
        assert_eq!(fs::metadata(f.m("d")).unwrap().mode() & 0o7777, 0o700);
        assert_eq!(xattr_get(&f.m("d"), "user.tag"), Some(b"dir".to_vec()));
    }
    let p = f.profile();
    let b2 = p.layer("branch2").unwrap();
    for op in ["OP_GETATTR", "OP_GETXATTR", "OP_READ", "OP_OPEN"] {
        assert_eq!(b2.count(op), 0, "the stale branch answered {op}");
    }
    assert_eq!(f.unmount(), Some(0));

    // Rebuilt in place: branch 2 gets the new attributes.
    let out = f.rebuild(2, &f.branches[2].clone());
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    for n in &names {
        let md = fs::metadata(f.b(2, n)).unwrap();
        assert_eq!(
            (md.mode() & 0o7777, md.uid(), md.gid()),
            (0o600, 123, 456),
            "{n}"
        );
        assert_eq!(
            xattr_get(&f.b(2, n), "user.tag"),
            Some(b"new".to_vec()),
            "{n}"
        );
    }
    assert_eq!(fs::metadata(f.b(2, "d")).unwrap().mode() & 0o7777, 0o700);
    assert_eq!(xattr_get(&f.b(2, "d"), "user.tag"), Some(b"dir".to_vec()));
    let scrub = f.scrub(false);
    assert!(scrub.stdout.contains(" 0 mismatches"), "{}", scrub.stdout);
}

transports!(a_branch_put_back_from_an_old_copy_is_failed_until_rebuilt);

/// Finding 3: a branch put back from an old copy of itself carried the right marker and was
/// served as online, old contents and all. It is refused at mount (issue 30; it was failed).
fn a_branch_put_back_from_an_old_copy_is_failed_until_rebuilt(t: Transport) {
    let Some(mut f) = Fixture::new(t, "old-copy", 2) else {
        return;
    };
    let args = ["--level", "1"];
    f.mount(&args);
    let mut rng = Rng::new(31);
    let names: Vec<String> = (0..8).map(|i| format!("f{i}")).collect();
    for n in &names {
        fs::write(f.m(n), rng.bytes(5000)).unwrap();
    }
    assert_eq!(f.unmount(), Some(0));
    let backup = f.root.join("b1.backup");
    run(
        "cp",
        &[
            "-a",
            &f.branches[1].display().to_string(),
            &backup.display().to_string(),
        ],
    );
    f.mount(&args);
    let mut now = Vec::new();
    for n in &names {
        let d = rng.bytes(6000);
        fs::write(f.m(n), &d).unwrap();
        now.push(d);
    }
    assert_eq!(f.unmount(), Some(0));
    fs::rename(&f.branches[1], f.root.join("b1.current")).unwrap();
    fs::rename(&backup, &f.branches[1]).unwrap();

    // Refused at mount, naming it (with --take-failed it would be taken in as failed).
    let list = f.branch_list();
    let mnt = f.mnt.display().to_string();
    let mut cmd = vec!["--branches", &list, &mnt];
    cmd.extend(test_support::transport_args(f.transport));
    let out = f.raif(&cmd);
    assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .contains("is an old copy of member 1: its marker says mount"),
        "{}",
        out.stderr
    );
    assert!(!fsprof_fuse::daemon::mount::is_mount_point(&f.mnt));
    // Scrub does not take it for a reference; rebuild brings it up to date in place.
    let scrub = f.scrub(false);
    assert!(
        scrub
            .stderr
            .contains("raif: warning: not verified: branch 1 failed"),
        "{}",
        scrub.stderr
    );
    assert_eq!(scrub.code, 1, "{}", scrub.stdout);
    let out = f.rebuild(1, &f.branches[1].clone());
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("8 files (") && out.stdout.contains("0 already current"));
    for (n, d) in names.iter().zip(&now) {
        assert_eq!(
            hash(&fs::read(f.b(1, n)).unwrap()),
            hash(d),
            "{n} on branch 1"
        );
    }
    f.mount(&args);
    assert_eq!(f.state(1), "online", "{}", f.status());
    fs::write(f.m(".raif"), b"fail 0\n").unwrap();
    for (n, d) in names.iter().zip(&now) {
        assert_eq!(
            hash(&fs::read(f.m(n)).unwrap()),
            hash(d),
            "{n} from branch 1"
        );
    }
}

transports!(a_crash_leaves_no_stale_bytes_past_the_end_of_a_file);

/// Finding 4: after an unclean stop, bytes a write left past the recorded size came back
/// (non-zero) when the file was extended, and scrub saw nothing. The same bytes left by a
/// failed write are cut when the file grows.
fn a_crash_leaves_no_stale_bytes_past_the_end_of_a_file(t: Transport) {
    let Some(mut f) = Fixture::new(t, "crash", 3) else {
        return;
    };
    let pol = level_policy(&f, Some(5));
    let args = ["--stripe", "4K", "--policy", &pol, "--no-checksums"];
    f.mount(&args);
    let mut rng = Rng::new(41);
    let names = ["r0-a", "r1-b", "r4-c", "r5-d"];
    let mut want = Vec::new();
    for n in names {
        let d = rng.bytes(10_000);
        fs::write(f.m(n), &d).unwrap();
        want.push(d);
    }
    // (Remounted so that no release of these writes' handles is still on its way.)
    assert_eq!(f.unmount(), Some(0));
    f.mount(&args);
    // Appends reach the branches (no writeback cache); the daemon dies before the close. The
    // files are held open by `dd` processes, not by this one: a process that another test's
    // thread forks meanwhile would inherit this one's descriptors and close them at its exec,
    // and each such close is a FLUSH that records the new size.
    let killer = f.arm_kill();
    let mut open = Vec::new();
    for (n, d) in names.iter().zip(want.iter_mut()) {
        let extra = rng.bytes(5000);
        let mut dd = Command::new("dd")
            .arg(format!("of={}", f.m(n).display()))
            .args(["oflag=append", "conv=notrunc", "bs=5000", "iflag=fullblock"])
            .args(["status=none"])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        dd.stdin.as_mut().unwrap().write_all(&extra).unwrap();
        d.extend_from_slice(&extra);
        open.push(dd);
    }
    // Each append is done once the kernel knows the new size (a write's reply sets it).
    test_support::wait_until("the appends arrive", || {
        names
            .iter()
            .all(|n| fs::metadata(f.m(n)).unwrap().len() == 15_000)
    });
    f.kill(killer);
    for mut dd in open {
        drop(dd.stdin.take());
        let _ = dd.wait(); // its close fails: the daemon is gone
    }
    for n in ["r0-a", "r4-c", "r5-d"] {
        assert_eq!(
            record(&f.b(0, n)).unwrap().size,
            10_000,
            "{n}: recorded before the append"
        );
    }

    f.mount(&args);
    assert!(f.status().contains("unclean_start true"), "{}", f.status());
    for (n, d) in names.iter().zip(want.iter_mut()) {
        assert_eq!(
            fs::metadata(f.m(n)).unwrap().len(),
            15_000,
            "{n}: the data written is kept"
        );
        OpenOptions::new()
            .write(true)
            .open(f.m(n))
            .unwrap()
            .set_len(20_000)
            .unwrap();
        d.resize(20_000, 0);
        let got = fs::read(f.m(n)).unwrap();
        assert_eq!(got.len(), 20_000);
        assert!(
            got[15_000..].iter().all(|&b| b == 0),
            "{n}: stale bytes past the end"
        );
        assert_eq!(hash(&got), hash(d), "{n}");
    }
    assert_eq!(f.unmount(), Some(0));
    let scrub = f.scrub(false);
    assert!(scrub.stdout.contains(" 0 mismatches"), "{}", scrub.stdout);

    // Bytes past the end without a crash (as a failed write past the end leaves them).
    let l = record(&f.b(0, "r5-d")).unwrap().layout;
    let holder = l.data_branch(l.locate(19_999).0, l.locate(19_999).1);
    let part = f.b(holder, "r5-d");
    let h = OpenOptions::new().write(true).open(&part).unwrap();
    h.set_len(l.part_size(holder, 20_000)).unwrap(); // zeros: as the file's holes read
    h.write_at(&[0xab; 3000], l.part_size(holder, 20_000))
        .unwrap();
    drop(h);
    f.mount(&args);
    assert!(f.status().contains("unclean_start false"));
    OpenOptions::new()
        .write(true)
        .open(f.m("r5-d"))
        .unwrap()
        .set_len(30_000)
        .unwrap();
    let got = fs::read(f.m("r5-d")).unwrap();
    assert_eq!(hash(&got[..20_000]), hash(&want[3]));
    assert!(
        got[20_000..].iter().all(|&b| b == 0),
        "bytes past the end came back"
    );
    assert_eq!(f.unmount(), Some(0));
    let scrub = f.scrub(false);
    assert!(scrub.stdout.contains(" 0 mismatches"), "{}", scrub.stdout);

    // The intent log named the rows being written when the daemon died, and the mount
    // resynchronised them: the crash leaves nothing to remember. A parity byte flipped later
    // (its time kept, as bit rot) is still ambiguous without checksums, and nothing is
    // rewritten.
    let marker = fs::read_to_string(f.b(0, ".raif-branch")).unwrap();
    assert!(marker.contains("crashed=false"), "{marker}");
    let pb = l.parity_branch(0).unwrap();
    flip_keeping_time(&f.b(pb, "r5-d"), 10);
    let before = fs::read(f.b(pb, "r5-d")).unwrap();
    let out = f.scrub(true);
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert_eq!(
        lines(&out.stdout, "[ambiguous: not repaired]").len(),
        1,
        "{}",
        out.stdout
    );
    assert_eq!(fs::read(f.b(pb, "r5-d")).unwrap(), before);
}

transports!(scrub_repairs_only_on_evidence);

/// Finding 5: with no evidence of which copy was right, `scrub --repair` took the first and
/// could copy a corrupt byte over the good one (or rewrite parity to match bad data).
/// Files without block checksums (`--no-checksums`): scrub decides on the other evidence
/// (checksums.rs has the same flips on files with checksums).
fn scrub_repairs_only_on_evidence(t: Transport) {
    let Some(mut f) = Fixture::new(t, "evidence", 3) else {
        return;
    };
    let pol = level_policy(&f, Some(5));
    let args = [
        "--stripe",
        "4K",
        "--policy",
        &pol,
        "--copies",
        "2",
        "--no-checksums",
    ];
    f.mount(&args);
    let mut rng = Rng::new(51);
    let mirror = rng.bytes(20_000);
    let striped = rng.bytes(30_000);
    fs::write(f.m("r1-m"), &mirror).unwrap();
    fs::write(f.m("r5-p"), &striped).unwrap();
    assert_eq!(f.unmount(), Some(0));
    let m = record(&f.b(0, "r1-m")).unwrap().layout;
    let (c0, c1) = (m.start as usize, (m.start as usize + 1) % 3);
    let mtime = |b: usize| fs::metadata(f.b(b, "r1-m")).unwrap().modified().unwrap();
    assert_eq!(mtime(c0), mtime(c1), "copies share one modification time");

    // Two copies, one flipped, its time put back: nothing says which is right.
    flip_keeping_time(&f.b(c0, "r1-m"), 5000);
    let p = record(&f.b(0, "r5-p")).unwrap().layout;
    let db = p.data_branch(1, 0);
    flip_keeping_time(&f.b(db, "r5-p"), 4096 + 7);
    let parity_before: Vec<Vec<u8>> = (0..3).map(|b| fs::read(f.b(b, "r5-p")).unwrap()).collect();
    for repair in [false, true] {
        let out = f.scrub(repair);
        assert_eq!(out.code, 1, "{}", out.stdout);
        let amb = lines(&out.stdout, "[ambiguous: not repaired]");
        assert_eq!(amb.len(), 2, "{}", out.stdout);
        assert!(
            amb.iter()
                .any(|l| l.contains("r1-m") && l.contains("offset 5000")),
            "{}",
            out.stdout
        );
        assert!(
            amb.iter()
                .any(|l| l.contains("r5-p") && l.contains("row 1")),
            "{}",
            out.stdout
        );
        assert!(!out.stdout.contains("[repaired]"), "{}", out.stdout);
        assert!(out.stdout.contains("2 ambiguous"), "{}", out.stdout);
    }
    assert_eq!(
        hash(&fs::read(f.b(c1, "r1-m")).unwrap()),
        hash(&mirror),
        "the good copy was kept"
    );
    for (b, was) in parity_before.iter().enumerate() {
        assert_eq!(
            &fs::read(f.b(b, "r5-p")).unwrap(),
            was,
            "part {b} was rewritten"
        );
    }

    // Evidence: a copy changed later than the other (its time stands out) is the wrong one.
    flip_keeping_time(&f.b(c0, "r1-m"), 5000); // back to good
    let file = OpenOptions::new()
        .write(true)
        .open(f.b(c1, "r1-m"))
        .unwrap();
    file.write_at(&[!mirror[7000]], 7000).unwrap();
    drop(file);
    flip_keeping_time(&f.b(db, "r5-p"), 4096 + 7); // back to good
    let out = f.scrub(true);
    assert_eq!(out.code, 0, "{}", out.stdout);
    assert!(
        lines(&out.stdout, "[repaired]")
            .iter()
            .any(|l| l.contains(&format!("copy on branch {c1} differs at offset 7000"))),
        "{}",
        out.stdout
    );
    assert_eq!(hash(&fs::read(f.b(c1, "r1-m")).unwrap()), hash(&mirror));
    assert!(f.scrub(false).stdout.contains(" 0 mismatches"));
    f.mount(&args);
    assert_eq!(hash(&fs::read(f.m("r1-m")).unwrap()), hash(&mirror));
    assert_eq!(hash(&fs::read(f.m("r5-p")).unwrap()), hash(&striped));
}

transports!(scrub_repairs_a_record_from_the_majority_and_never_copies_a_lone_bad_one);

/// A part's RAIF record replaced (by bit rot, or by hand) with another file's: scrub takes the
/// record three of four parts agree on and repairs the lone one (it had copied the bad record
/// over the three good ones when the bad one was on branch 0). When half the records disagree
/// with the other half, nothing says which is right: reported ambiguous, left alone.
fn scrub_repairs_a_record_from_the_majority_and_never_copies_a_lone_bad_one(t: Transport) {
    let Some(mut f) = Fixture::new(t, "record-majority", 4) else {
        return;
    };
    let pol = level_policy(&f, Some(5));
    let args = ["--stripe", "4K", "--policy", &pol, "--copies", "2"];
    f.mount(&args);
    let mut rng = Rng::new(52);
    let (big, small) = (rng.bytes(100_000), rng.bytes(3000));
    fs::write(f.m("r5-big"), &big).unwrap();
    fs::write(f.m("r5-small"), &small).unwrap();
    fs::write(f.m("r1-m"), &big).unwrap();
    fs::write(f.m("r1-n"), &small).unwrap();
    assert_eq!(f.unmount(), Some(0));
    let other = xattr_get(&f.b(0, "r5-small"), "user.raif").unwrap();
    xattr_set(&f.b(0, "r5-big"), "user.raif", &other);
    let out = f.scrub(true);
    assert!(
        lines(&out.stdout, "[repaired]")
            .iter()
            .any(|l| l.contains("r5-big") && l.contains("record on branch 0 differs")),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("orphan"), "{}", out.stdout);
    f.scrub_is_clean();

    // Half the records replaced, half not: no majority says which is right, so the file is
    // reported ambiguous and every record kept as it is.
    let orig: Vec<Vec<u8>> = (0..4)
        .map(|b| xattr_get(&f.b(b, "r1-m"), "user.raif").unwrap())
        .collect();
    let (good, bad) = (record(&f.b(0, "r1-m")), record(&f.b(0, "r1-n")));
    let other = xattr_get(&f.b(0, "r1-n"), "user.raif").unwrap();
    for b in [0, 1] {
        xattr_set(&f.b(b, "r1-m"), "user.raif", &other);
    }
    let out = f.scrub(true);
    assert_ne!(out.code, 0, "{}", out.stdout);
    assert!(
        lines(&out.stdout, "[ambiguous: not repaired]")
            .iter()
            .any(|l| l.contains("r1-m") && l.contains("no majority")),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("orphan"), "{}", out.stdout);
    for (b, want) in [(0, &bad), (1, &bad), (2, &good), (3, &good)] {
        assert_eq!(&record(&f.b(b, "r1-m")), want, "branch {b}");
    }
    for (b, x) in orig.iter().enumerate() {
        xattr_set(&f.b(b, "r1-m"), "user.raif", x);
    }
    f.scrub_is_clean();
    f.mount(&args);
    assert_eq!(hash(&fs::read(f.m("r5-big")).unwrap()), hash(&big));
    assert_eq!(hash(&fs::read(f.m("r1-m")).unwrap()), hash(&big));
    assert_eq!(hash(&fs::read(f.m("r5-small")).unwrap()), hash(&small));
}

transports!(truncating_a_file_with_a_lost_part_to_zero_clears_the_loss);

/// A RAIF0 part lost in a rebuild keeps failing with EIO; truncating the file to zero brings
/// the part back into use (its bytes are gone anyway).
fn truncating_a_file_with_a_lost_part_to_zero_clears_the_loss(t: Transport) {
    let Some(mut f) = Fixture::new(t, "lost", 2) else {
        return;
    };
    let args = ["--level", "0", "--stripe", "4K"];
    f.mount(&args);
    let mut rng = Rng::new(61);
    fs::write(f.m("f"), rng.bytes(20_000)).unwrap();
    assert_eq!(f.unmount(), Some(0));
    fs::rename(&f.branches[1], f.root.join("b1.gone")).unwrap();
    fs::create_dir(&f.branches[1]).unwrap();
    let out = f.rebuild(1, &f.branches[1].clone());
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(out.stdout.contains("lost: f "), "{}", out.stdout);
    f.mount(&args);
    assert_eq!(crate::fixture::errno(fs::read(f.m("f"))), libc::EIO);
    let fresh = rng.bytes(20_000);
    fs::write(f.m("f"), &fresh).unwrap(); // O_TRUNC
    assert_eq!(hash(&fs::read(f.m("f")).unwrap()), hash(&fresh));
    assert_eq!(f.unmount(), Some(0));
    for b in 0..2 {
        assert_eq!(
            record(&f.b(b, "f")).unwrap().lost,
            0,
            "record on branch {b}"
        );
    }
    f.mount(&args);
    assert_eq!(hash(&fs::read(f.m("f")).unwrap()), hash(&fresh));
}

transports!(after_a_crash_a_flipped_data_byte_is_ambiguous_not_repaired);

/// After an earlier unclean stop, a byte flipped in a data unit (its time put back) used to be
/// reported as a parity mismatch and `scrub --repair` recomputed the parity over the bad
/// byte, "consistent again", making the corruption permanent. A crash is no evidence of
/// which unit is wrong: the mismatch is ambiguous, every branch that could hold the bad byte
/// is named, and nothing is changed (a later checksum-based repair can still fix the data).
/// The same holds for two disagreeing mirror copies. (A volume that keeps an intent log knows
/// the rows a crash may have torn and resynchronises them at the next mount; this is a volume
/// that kept none.)
/// Without block checksums (`--no-checksums`); with them, checksums.rs.
fn after_a_crash_a_flipped_data_byte_is_ambiguous_not_repaired(t: Transport) {
    let Some(mut f) = Fixture::new(t, "crash-flip", 3) else {
        return;
    };
    let pol = level_policy(&f, Some(5));
    let args = [
        "--stripe",
        "4K",
        "--policy",
        &pol,
        "--copies",
        "2",
        "--no-checksums",
    ];
    f.mount(&args);
    let mut rng = Rng::new(71);
    let striped = rng.bytes(40_000);
    let mirror = rng.bytes(20_000);
    fs::write(f.m("r5-x"), &striped).unwrap();
    fs::write(f.m("r1-x"), &mirror).unwrap();
    assert_eq!(f.unmount(), Some(0));
    // An unclean stop (kill -9) of a volume that kept no intent log (as RAIF before it did:
    // the markers do not say `log=true`), then a clean mount and unmount.
    f.mount(&args);
    let killer = f.arm_kill();
    f.kill(killer);
    for b in 0..3 {
        let p = f.b(b, ".raif-branch");
        let m = fs::read_to_string(&p).unwrap();
        assert!(m.contains("log=true\n"), "{m}");
        fs::write(&p, m.replace("log=true\n", "")).unwrap();
    }
    f.mount(&args);
    assert!(f.status().contains("unclean_start true"), "{}", f.status());
    assert_eq!(f.unmount(), Some(0));
    let marker = fs::read_to_string(f.b(0, ".raif-branch")).unwrap();
    assert!(marker.contains("crashed=true"), "{marker}");
    assert_eq!(f.scrub(false).code, 0, "clean before the flip");

    let l = record(&f.b(0, "r5-x")).unwrap().layout;
    let (row, col) = (2, 1);
    let db = l.data_branch(row, col);
    let at = row * 4096 + 100; // part offset
    flip_keeping_time(&f.b(db, "r5-x"), at);
    let m = record(&f.b(0, "r1-x")).unwrap().layout;
    let c1 = (m.start as usize + 1) % 3;
    flip_keeping_time(&f.b(c1, "r1-x"), 3000);
    let parts =
        |name: &str| -> Vec<Vec<u8>> { (0..3).map(|b| fs::read(f.b(b, name)).unwrap()).collect() };
    let before = (parts("r5-x"), parts("r1-x"));
    for repair in [false, true] {
        let out = f.scrub(repair);
        assert_eq!(out.code, 1, "repair {repair}: {}", out.stdout);
        assert!(out.stdout.contains("stopped uncleanly"), "{}", out.stdout);
        let amb = lines(&out.stdout, "[ambiguous: not repaired]");
        assert_eq!(amb.len(), 2, "{}", out.stdout);
        // Every unit of the row holds bytes of the file there: all three branches.
        assert!(
            amb.iter().any(|x| x.contains("r5-x")
                && x.contains(&format!("row {row} "))
                && x.contains(&format!("part offset {at}"))
                && x.contains("any of branches 0, 1, 2")),
            "{}",
            out.stdout
        );
        let mut pair = [m.start as usize, c1];
        pair.sort();
        assert!(
            amb.iter().any(|x| x.contains("r1-x")
                && x.contains(&format!("copies on branches {}, {}", pair[0], pair[1]))
                && x.contains("offset 3000")),
            "{}",
            out.stdout
        );
        assert!(!out.stdout.contains("[repaired]"), "{}", out.stdout);
        assert!(!out.stdout.contains("consistent again"), "{}", out.stdout);
        assert_eq!((parts("r5-x"), parts("r1-x")), before, "nothing rewritten");
    }
    // The data part still holds the flipped byte, so it is still known to be bad data.
    let mut b = [0u8; 1];
    fs::File::open(f.b(db, "r5-x"))
        .unwrap()
        .read_at(&mut b, at)
        .unwrap();
    let logical = l.unit_start(row, col) + 100;
    assert_eq!(b[0], striped[logical as usize] ^ 0x5a);
    let marker = fs::read_to_string(f.b(0, ".raif-branch")).unwrap();
    assert!(marker.contains("crashed=true"), "{marker}");
}

transports!(the_mount_votes_on_a_record_and_repairs_the_outvoted_one);

/// The mount took a file's record from the one branch it asked: a record saying the size is
/// 2^63−1 was served, though the other two branches agreed on the right one (scrub voted, the
/// mount did not). It votes as scrub does, serves the majority's record, and repairs and logs
/// the outvoted one. Each file has the bad record on another branch, so some lookups ask it.
fn the_mount_votes_on_a_record_and_repairs_the_outvoted_one(t: Transport) {
    let Some(mut f) = Fixture::new(t, "vote", 3) else {
        return;
    };
    f.mount(&["--level", "5", "--stripe", "4K"]);
    let mut rng = Rng::new(51);
    let files: Vec<(String, Vec<u8>)> = (0..9)
        .map(|i| (format!("f{i}"), rng.bytes(5000 + 999 * i)))
        .collect();
    for (n, d) in &files {
        fs::write(f.m(n), d).unwrap();
    }
    assert_eq!(f.unmount(), Some(0));
    for (i, (n, d)) in files.iter().enumerate() {
        edit_record(&f.b(i % 3, n), 9, |size| {
            assert_eq!(size, d.len().to_string());
            i64::MAX.to_string()
        });
    }
    f.mount(&["--level", "5", "--stripe", "4K"]);
    for (n, d) in &files {
        assert_eq!(fs::metadata(f.m(n)).unwrap().len(), d.len() as u64, "{n}");
        assert_eq!(hash(&fs::read(f.m(n)).unwrap()), hash(d), "{n}");
    }
    let log = f.log_text();
    for (i, (n, _)) in files.iter().enumerate() {
        assert!(
            log.lines().any(
                |l| l.contains(&format!("/{n}: the record on branch {}", i % 3))
                    && l.contains("outvoted")
                    && l.ends_with("repaired")
            ),
            "{n}:\n{log}"
        );
    }
    assert_eq!(f.unmount(), Some(0));
    f.scrub_is_clean();
}

transports!(a_generation_a_crash_left_on_one_survivor_is_taken_by_the_mount_and_the_rebuild);

/// With a branch failed, a write raises the file's generation on the surviving parts one after
/// the other; a kill in between left the two survivors' records differing in the generation
/// alone, with no majority to vote: the degraded mount served the record of the branch it
/// asked, `raif rebuild` copied the first survivor's, and scrub then found the other
/// survivor's record outvoted (the degraded crash loop, one round in 20-30). The mount and the
/// rebuild take the newest generation and repair the record behind it.
fn a_generation_a_crash_left_on_one_survivor_is_taken_by_the_mount_and_the_rebuild(t: Transport) {
    let Some(mut f) = Fixture::new(t, "raised", 3) else {
        return;
    };
    let args = ["--level", "5", "--stripe", "4K"];
    f.mount(&args);
    let mut rng = Rng::new(52);
    let files: Vec<(String, Vec<u8>)> = (0..6)
        .map(|i| (format!("f{i}"), rng.bytes(9000 + 4321 * i)))
        .collect();
    for (n, d) in &files {
        fs::write(f.m(n), d).unwrap();
    }
    fs::write(f.m(".raif"), "fail 1\n").unwrap();
    assert_eq!(f.unmount(), Some(0));
    // The crash's trace: the generation raised on branch 0 or 2 only.
    let raised: Vec<u64> = files
        .iter()
        .enumerate()
        .map(|(i, (n, _))| {
            let p = f.b(if i % 2 == 0 { 0 } else { 2 }, n);
            let g = edit_record(&p, 10, |g| (g.parse::<u64>().unwrap() + 1).to_string());
            g.parse().unwrap()
        })
        .collect();
    f.mount(&args);
    for ((n, d), g) in files.iter().zip(&raised) {
        assert_eq!(hash(&fs::read(f.m(n)).unwrap()), hash(d), "{n}");
        for b in [0, 2] {
            let m = record(&f.b(b, n)).unwrap();
            assert_eq!(m.generation, *g, "{n} on branch {b}: the newest generation");
        }
    }
    assert_eq!(f.unmount(), Some(0));
    // And the rebuild decides as the mount does, whether or not the mount saw the file.
    let (n, _) = &files[1];
    edit_record(&f.b(2, n), 10, |_| (raised[1] + 1).to_string());
    // Scrub decides as they do: the record behind is the mismatch, nothing is ambiguous.
    let scrub = f.scrub(false);
    assert!(
        scrub
            .stdout
            .contains(&format!("mismatch {n}: record on branch 0 differs"))
            && scrub
                .stdout
                .contains(" 1 mismatches, 0 repaired, 0 ambiguous"),
        "{}{}",
        scrub.stdout,
        scrub.stderr
    );
    let out = f.rebuild(1, &f.branches[1].clone());
    assert_eq!(out.code, 0, "rebuild: {}{}", out.stdout, out.stderr);
    for b in 0..3 {
        assert_eq!(
            record(&f.b(b, n)).unwrap().generation,
            raised[1] + 1,
            "{n} on branch {b} after the rebuild"
        );
    }
    f.scrub_is_clean();
}

/// Rewrites word `i` of the record of the branch file `p` with `f` of it, keeping the checksum
/// entries after the record; returns the new word.
fn edit_record(p: &Path, i: usize, f: impl FnOnce(&str) -> String) -> String {
    let rec = xattr_get(p, "user.raif").unwrap();
    let end = rec.iter().position(|&c| c == 0).unwrap_or(rec.len());
    let text = String::from_utf8(rec[..end].to_vec()).unwrap();
    let mut w: Vec<String> = text.split(' ').map(String::from).collect();
    w[i] = f(&w[i]);
    let mut v = w.join(" ").into_bytes();
    v.extend_from_slice(&rec[end..]);
    xattr_set(p, "user.raif", &v);
    w[i].clone()
}
