//! RAIF as a volume: it knows its members (a directory a member was rebuilt away from is
//! refused, naming it), remembers its settings (a RAIF5 volume mounted again without --level
//! makes RAIF5 files), and an admin drives it with `raif status`, `raif fail` and `raif
//! replace`, whose refusals say why.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use test_support::{Transport, transport_args, transports};

use crate::fixture::{Fixture, Output, Rng, hash, xattr_get};

/// Runs `raif --branches LIST MNT` (in the background, as a user would) over `branches`, with
/// the fixture's transport and `args`: its output (a mount it made is unmounted at once).
fn mount_over(f: &Fixture, branches: &[PathBuf], args: &[&str]) -> Output {
    let list: Vec<String> = branches.iter().map(|b| b.display().to_string()).collect();
    let list = list.join(",");
    let mnt = f.mnt.display().to_string();
    let mut all = vec!["--branches", &list, &mnt];
    all.extend(transport_args(f.transport));
    all.extend(args.iter().copied());
    let out = f.raif(&all);
    if fsprof_fuse::daemon::mount::is_mount_point(&f.mnt) {
        test_support::unmount_path(&f.mnt);
    }
    out
}

/// The level in the record of `name` on branch `b`.
fn level_of(f: &Fixture, b: usize, name: &str) -> String {
    let rec = xattr_get(&f.b(b, name), "user.raif").expect("a record");
    let text = String::from_utf8_lossy(&rec).into_owned();
    text.split(' ').nth(3).expect("a level").to_string()
}

/// Writes files of random sizes; returns their hashes by name.
fn fill(f: &Fixture, count: usize, seed: u64) -> HashMap<String, u64> {
    let mut rng = Rng::new(seed);
    (0..count)
        .map(|i| {
            let name = format!("f{i}");
            let len = 1 + rng.below(70_000) as usize;
            let data = rng.bytes(len);
            fs::write(f.m(&name), &data).unwrap();
            (name, hash(&data))
        })
        .collect()
}

fn check(f: &Fixture, files: &HashMap<String, u64>, when: &str) {
    for (name, h) in files {
        let got = fs::read(f.m(name)).unwrap_or_else(|e| panic!("{when}: {name}: {e}"));
        assert_eq!(hash(&got), *h, "{when}: {name} differs");
    }
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

transports!(a_directory_a_member_was_replaced_by_is_refused_naming_it);

/// The sequence: RAIF5 over b0, b1, b2; branch 1 failed; a file written; `raif
/// replace` onto new1; unmounted. Mounting with the old b1 mounted with exit 0, served it as
/// online, warned falsely of an unclean unmount, and lost `new.txt` once branch 2 failed. It
/// is refused now, naming b1 and what it is; the right members serve every file, also with a
/// second branch failed; and `--take-failed` takes b1 in as failed and rebuilds it in place.
fn a_directory_a_member_was_replaced_by_is_refused_naming_it(t: Transport) {
    let Some(mut f) = Fixture::new(t, "replaced", 3) else {
        return;
    };
    let args = ["--level", "5", "--stripe", "4K"];
    f.mount(&args);
    let mut files = fill(&f, 6, 1);
    fs::write(f.m(".raif"), b"fail 1\n").unwrap();
    fs::write(f.m("new.txt"), b"written while branch 1 was failed\n").unwrap();
    files.insert(
        "new.txt".into(),
        hash(b"written while branch 1 was failed\n"),
    );
    let new1 = f.root.join("new1");
    fs::create_dir(&new1).unwrap();
    let mnt = path(&f.mnt);
    let out = f.raif(&["replace", &mnt, "1", &path(&new1)]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("online"), "{}", out.stdout);
    assert!(f.status().contains("generations 0 1 0"), "{}", f.status());
    assert_eq!(f.unmount(), Some(0));

    // The old b1: refused, in one line naming it and what fixes it; nothing mounted.
    let old = f.branches.clone();
    let out = mount_over(&f, &old, &args);
    assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
    let line = out
        .stderr
        .lines()
        .find(|l| l.contains("old copy"))
        .unwrap_or_else(|| panic!("no refusal: {}", out.stderr));
    assert!(
        line.contains(&format!("branch 1 ({})", path(&f.branches[1])))
            && line.contains("an old copy of member 1, replaced at generation 1")
            && line.contains("--take-failed"),
        "{line}"
    );

    // The right members: every file, also with branch 2 failed; no false unclean warning.
    f.branches[1] = new1.clone();
    f.mount(&[]);
    assert!(
        !f.log_text().contains("not unmounted cleanly"),
        "{}",
        f.log_text()
    );
    check(&f, &files, "with new1");
    fs::write(f.m(".raif"), b"fail 2\n").unwrap();
    check(&f, &files, "with new1, branch 2 failed");
    assert_eq!(f.unmount(), Some(0));
    // Branch 2 comes back stale; rebuilt in place, it serves again.
    let out = f.rebuild(2, &f.branches[2].clone());
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);

    // --take-failed: the old b1 is taken in as failed, never read, and rebuilt in place.
    let mut with_old = f.branches.clone();
    with_old[1] = old[1].clone();
    f.branches = with_old;
    f.mount(&["--take-failed"]);
    // Its marker says its last mount did not end (it was failed during it): no warning, as
    // it is not the member.
    assert!(
        !f.log_text().contains("not unmounted cleanly"),
        "{}",
        f.log_text()
    );
    check(&f, &files, "old b1 taken in");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while f.state(1) != "online" {
        assert!(
            std::time::Instant::now() < deadline,
            "the old copy was never rebuilt:\n{}\n{}",
            f.status(),
            f.log_text()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(f.status().contains("generations 0 2 1"), "{}", f.status());
    assert_eq!(f.unmount(), Some(0));
    f.scrub_is_clean();
    // new1 is an old copy now.
    let mut with_new1 = f.branches.clone();
    with_new1[1] = new1;
    let out = mount_over(&f, &with_new1, &[]);
    assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .contains("an old copy of member 1, replaced at generation 2"),
        "{}",
        out.stderr
    );
}

transports!(a_volume_remembers_its_level_and_says_when_it_changes);

/// A RAIF5 volume mounted again without --level made RAIF1 files, silently. It makes RAIF5
/// files; a mount with --level 1 changes the default for new files only, in one line; a
/// different policy file is taken with a line naming both digests.
fn a_volume_remembers_its_level_and_says_when_it_changes(t: Transport) {
    let Some(mut f) = Fixture::new(t, "settings", 3) else {
        return;
    };
    f.mount(&["--level", "5", "--stripe", "4K"]);
    fs::write(f.m("first"), vec![1u8; 10_000]).unwrap();
    assert_eq!(f.unmount(), Some(0));
    f.mount(&[]);
    fs::write(f.m("second"), vec![2u8; 10_000]).unwrap();
    assert_eq!(level_of(&f, 0, "second"), "5");
    let status = f.status();
    assert!(status.contains("default level=5 stripe=4096"), "{status}");
    assert!(!f.log_text().contains("changes"), "{}", f.log_text());
    assert_eq!(f.unmount(), Some(0));

    f.mount(&["--level", "1"]);
    let log = f.log_text();
    let said: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("RAIF5 to RAIF1"))
        .collect();
    assert_eq!(said.len(), 1, "{log}");
    assert!(said[0].contains("existing files keep theirs"), "{log}");
    fs::write(f.m("third"), vec![3u8; 10_000]).unwrap();
    assert_eq!(level_of(&f, 0, "third"), "1");
    assert_eq!(level_of(&f, 0, "first"), "5");
    assert_eq!(fs::read(f.m("first")).unwrap(), vec![1u8; 10_000]);
    assert_eq!(f.unmount(), Some(0));

    // Kept: RAIF1 from now on. A policy file, then another one.
    let p1 = f.root.join("p1.toml");
    fs::write(&p1, "[[rule]]\nglob = \"*.big\"\nlevel = 0\n").unwrap();
    f.mount(&["--policy", &path(&p1)]);
    assert!(f.log_text().contains("a policy file is taken (sha256:"));
    fs::write(f.m("x.big"), vec![4u8; 10_000]).unwrap();
    fs::write(f.m("fourth"), vec![4u8; 10_000]).unwrap();
    assert_eq!(level_of(&f, 0, "fourth"), "1");
    assert_eq!(f.unmount(), Some(0));
    let p2 = f.root.join("p2.toml");
    fs::write(&p2, "[[rule]]\nglob = \"*.big\"\nlevel = 4\n").unwrap();
    f.mount(&["--policy", &path(&p2)]);
    let log = f.log_text();
    let said: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("another policy file"))
        .collect();
    assert_eq!(said.len(), 1, "{log}");
    assert_eq!(said[0].matches("sha256:").count(), 2, "{}", said[0]);
    fs::write(f.m("y.big"), vec![5u8; 10_000]).unwrap();
    assert_eq!(level_of(&f, 0, "y.big"), "4");
    assert_eq!(level_of(&f, 0, "x.big"), "0");
    assert_eq!(f.unmount(), Some(0));
}

transports!(raif_status_fail_and_replace_drive_a_mounted_volume);

/// `raif status` (text and JSON, from the mount and from the branches), `raif fail` and its
/// refusal in words, `raif replace`'s refusal in words.
fn raif_status_fail_and_replace_drive_a_mounted_volume(t: Transport) {
    let Some(mut f) = Fixture::mounted(t, "admin", 3, &["--level", "5", "--stripe", "4K"]) else {
        return;
    };
    let files = fill(&f, 4, 2);
    let mnt = path(&f.mnt);
    // Exit code 0 with every member online, 1 without.
    let json = |out: &Output| -> serde_json::Value {
        assert!(
            out.code == 0 || out.code == 1,
            "{}{}",
            out.stdout,
            out.stderr
        );
        let v: serde_json::Value =
            serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.stdout));
        let all = v["online"] == v["members"].as_array().map_or(0, Vec::len);
        assert_eq!(out.code, if all { 0 } else { 1 }, "{v}");
        v
    };
    let v = json(&f.raif(&["status", &mnt, "--json"]));
    assert_eq!(v["mounted_at"], mnt.as_str());
    assert_eq!(v["online"], 3);
    assert_eq!(v["settings"]["level"], 5);
    assert_eq!(v["settings"]["stripe"], 4096);
    assert_eq!(v["members"][1]["state"], "online");
    assert_eq!(v["members"][1]["path"], path(&f.branches[1]).as_str());
    assert_eq!(v["members"][1]["generation"], 0);
    assert!(v["errors"].as_array().unwrap().is_empty(), "{v}");

    let out = f.raif(&["fail", &mnt, "1"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.starts_with("branch 1 failed "), "{}", out.stdout);
    // A second failure is refused, in words.
    let out = f.raif(&["fail", &mnt, "2"]);
    assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .contains("the mount refused 'fail 2': branch 1 is failed already"),
        "{}",
        out.stderr
    );
    let out = f.raif(&["fail", &mnt, "7"]);
    assert!(
        out.stderr.contains("there is no branch 7"),
        "{}",
        out.stderr
    );
    // So is a replacement onto a directory that holds files of something else.
    let busy = f.root.join("busy");
    fs::create_dir(&busy).unwrap();
    fs::write(busy.join("x"), b"x").unwrap();
    let out = f.raif(&["replace", &mnt, "1", &path(&busy)]);
    assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .contains("not empty and not branch 1 of this volume"),
        "{}",
        out.stderr
    );
    let v = json(&f.raif(&["status", &mnt, "--json"]));
    assert_eq!(v["online"], 2);
    assert_eq!(v["members"][1]["state"], "failed");
    assert_eq!(v["members"][1]["reason"], "failed by the administrator");
    let errors: Vec<String> = v["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["what"].as_str().unwrap().to_string())
        .collect();
    assert!(
        errors.iter().any(|e| e.contains("branch 1 failed"))
            && errors.iter().any(|e| e.contains("'fail 2' refused")),
        "{errors:?}"
    );
    let text = f.raif(&["status", &mnt]);
    assert_eq!(text.code, 1, "a member is not online: {}", text.stdout);
    assert!(
        text.stdout.contains("member 1 failed     generation 0")
            && text.stdout.contains("new files: RAIF5, stripe 4096 bytes"),
        "{}",
        text.stdout
    );
    // Degraded, the counter counts only the reads that reach RAIF: the page cache answers
    // those of data read before, and the status says so under the counters. Once the caches
    // are dropped, reading everything back is counted.
    assert!(
        text.stdout
            .contains("reads the page cache answers never reach RAIF and are not counted"),
        "{}",
        text.stdout
    );
    test_support::drop_all_caches();
    check(&f, &files, "degraded, caches dropped");
    let v = json(&f.raif(&["status", &mnt, "--json"]));
    assert!(v["degraded_reads"].as_u64().unwrap() > 0, "{v}");

    let new1 = f.root.join("new1");
    fs::create_dir(&new1).unwrap();
    let out = f.raif(&["replace", &mnt, "1", &path(&new1)]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let v = json(&f.raif(&["status", &mnt, "--json"]));
    assert_eq!(v["members"][1]["generation"], 1);
    assert_eq!(v["rebuild"]["state"], "done");
    check(&f, &files, "after replace");
    assert_eq!(f.unmount(), Some(0));

    // From the branches, not mounted: the same volume, members and generations.
    f.branches[1] = new1;
    let list = f.branch_list();
    let v = json(&f.raif(&["status", "--branches", &list, "--json"]));
    assert_eq!(v["mounted_at"], serde_json::Value::Null);
    assert_eq!(v["online"], 3);
    assert_eq!(v["members"][1]["generation"], 1);
    assert_eq!(v["settings"]["level"], 5);
}

transports!(scrub_reads_each_stored_byte_once);

/// `raif scrub` read every byte twice (its checksum pass, then its copy or parity pass): 4.5
/// MiB stored gave 9437184 bytes read. On a volume of every level, sparse files among them,
/// the bytes it reads are the bytes the parts hold (their checksums, kept apart, aside).
fn scrub_reads_each_stored_byte_once(t: Transport) {
    let Some(mut f) = Fixture::new(t, "scrub-once", 3) else {
        return;
    };
    let policy = crate::fixture::level_policy(&f, Some(5));
    f.mount(&["--stripe", "4K", "--policy", &policy]);
    let mut rng = Rng::new(9);
    for name in ["r0-a", "r1-b", "r4-c", "r5-d", "r1-small", "r5-small"] {
        let len = if name.ends_with("small") {
            700
        } else {
            300_000
        };
        fs::write(f.m(name), rng.bytes(len)).unwrap();
    }
    // Sparse: data at both ends of 2 MiB.
    for name in ["r5-sparse", "r1-sparse", "r0-sparse"] {
        let file = fs::File::create(f.m(name)).unwrap();
        std::os::unix::fs::FileExt::write_all_at(&file, &rng.bytes(10_000), 0).unwrap();
        std::os::unix::fs::FileExt::write_all_at(&file, &rng.bytes(10_000), 2 << 20).unwrap();
    }
    assert_eq!(f.unmount(), Some(0));
    let out = f.scrub(false);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let summary = out.stdout.lines().last().unwrap_or_default();
    let words: Vec<&str> = summary.split(' ').collect();
    // "... N bytes read of M stored; ..."
    let number_before = |w: &str, back: usize| -> u64 {
        let at = words
            .iter()
            .position(|x| x.trim_end_matches(';') == w)
            .unwrap_or_else(|| panic!("no '{w}' in {summary}"));
        words[at - back].parse().unwrap()
    };
    let read = number_before("read", 2);
    let stored = number_before("stored", 1);
    // Three copies of the RAIF1 files, parity for the RAIF4/5 ones: well over the data.
    assert!(stored > 1_500_000, "{summary}");
    assert_eq!(read, stored, "{summary}");
}
