//! Rebuilding a failed branch while the volume serves (`raif rebuild --mounted`): under a fio
//! verify workload, a branch is failed and rebuilt onto a new directory, then another branch
//! is failed: fio finds every block it wrote, and after the second branch is rebuilt offline
//! scrub finds nothing. And a rebuild cut short by a kill resumes, keeping what it had done.

use std::collections::HashMap;
use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use test_support::{Transport, transports};

use crate::fixture::{Fixture, Rng, hash};

/// Writes `count` files of random sizes up to `max` into `dir` (through the mount); returns
/// their hashes by name.
fn fill(f: &Fixture, dir: &str, count: usize, max: u64, seed: u64) -> HashMap<String, u64> {
    let mut rng = Rng::new(seed);
    fs::create_dir_all(f.m(dir)).unwrap();
    (0..count)
        .map(|i| {
            let name = format!("{dir}/f{i}");
            let len = 1 + rng.below(max) as usize;
            let data = rng.bytes(len);
            fs::write(f.m(&name), &data).unwrap();
            (name, hash(&data))
        })
        .collect()
}

/// Reads every file of `files` through the mount and checks its hash.
fn check(f: &Fixture, files: &HashMap<String, u64>, when: &str) {
    for (name, h) in files {
        let got = fs::read(f.m(name)).unwrap_or_else(|e| panic!("{when}: {name}: {e}"));
        assert_eq!(hash(&got), *h, "{when}: {name} differs");
    }
}

/// `raif rebuild --mounted MNT --replace I DIR`.
fn rebuild_mounted(f: &Fixture, i: usize, dir: &Path) -> crate::fixture::Output {
    let mnt = f.mnt.display().to_string();
    let d = dir.display().to_string();
    f.raif(&[
        "rebuild",
        "--mounted",
        &mnt,
        "--replace",
        &i.to_string(),
        &d,
    ])
}

transports!(online_rebuild_under_fio_verify_then_another_branch_fails);

fn online_rebuild_under_fio_verify_then_another_branch_fails(t: Transport) {
    let Some(mut f) = Fixture::new(t, "online-fio", 3) else {
        return;
    };
    f.mount(&["--level", "5", "--stripe", "4K"]);
    let files = fill(&f, "old", 150, 200 << 10, 7);
    let fio_dir = f.m("fio");
    fs::create_dir(&fio_dir).unwrap();
    // Random 4 KiB writes, each loop read back and checked (crc32c in every block), until the
    // test ends it (SIGINT). Its runtime only bounds a test that hangs: a rebuild that took
    // longer than a fixed runtime on a loaded machine failed the test ("fio ended before the
    // rebuild did").
    let mut fio = Command::new("fio")
        .args([
            "--name=verify",
            "--rw=randwrite",
            "--bs=4k",
            "--size=2M",
            "--numjobs=2",
            "--ioengine=psync",
            "--direct=1",
            "--verify=crc32c",
            "--loops=1000000",
            "--runtime=300",
            "--verify_state_save=0",
        ])
        .arg(format!("--directory={}", fio_dir.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("fio (installed by .ci/run)");
    // Under way once it has laid out its files: both jobs' 2 MiB.
    let laid_out = |e: &fs::DirEntry| e.metadata().is_ok_and(|m| m.len() == 2 << 20);
    test_support::wait_until("fio lays out its files", || {
        fs::read_dir(&fio_dir).is_ok_and(|d| d.flatten().filter(laid_out).count() == 2)
    });
    fs::write(f.m(".raif"), "fail 1\n").unwrap();
    let new1 = f.root.join("new1");
    fs::create_dir(&new1).unwrap();
    let out = rebuild_mounted(&f, 1, &new1);
    assert_eq!(
        out.code, 0,
        "rebuild --mounted: {}{}",
        out.stdout, out.stderr
    );
    assert!(out.stdout.contains("online"), "{}", out.stdout);
    // The workload ran all through the rebuild (it stops early on a verify error).
    if fio.try_wait().unwrap().is_some() {
        let o = fio.wait_with_output().unwrap();
        panic!(
            "fio ended before the rebuild did: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }
    assert_eq!(f.state(1), "online", "{}", f.status());
    assert!(
        f.status()
            .contains(&format!("branch 1 online {}", new1.display()))
    );
    // The bytes of every pass: the last one, which finds nothing to copy, made it 0/0.
    let status = f.status();
    let bytes = status
        .split_whitespace()
        .find_map(|w| w.strip_prefix("bytes="))
        .and_then(|b| b.split_once('/'))
        .map(|(d, t)| (d.parse::<u64>().unwrap(), t.parse::<u64>().unwrap()))
        .unwrap_or_else(|| panic!("no bytes= in {status}"));
    assert!(bytes.0 > 1 << 20 && bytes.1 > 1 << 20, "{status}");
    // A different branch fails: what branch 1 holds now (rebuilt, and written since) is
    // needed for every row. fio goes on until it has read back blocks with branch 0 failed
    // (a verify pass: a hundred reads through the parity), then is stopped.
    let degraded = || {
        let status = f.status();
        status
            .lines()
            .find_map(|l| l.strip_prefix("degraded_reads "))
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("no degraded_reads in {status}"))
    };
    let before = degraded();
    fs::write(f.m(".raif"), "fail 0\n").unwrap();
    test_support::wait_until("fio reads through the parity", || {
        degraded() >= before + 100 || fio.try_wait().unwrap().is_some()
    });
    // SAFETY: a plain signal to a child process of this test.
    assert_eq!(unsafe { libc::kill(fio.id() as i32, libc::SIGINT) }, 0);
    let done = fio.wait_with_output().unwrap();
    let report = String::from_utf8_lossy(&done.stdout);
    // Ended by the signal (fio exits 128 then), each job without an error.
    assert_eq!(
        done.status.code(),
        Some(128),
        "fio: {report}{}",
        String::from_utf8_lossy(&done.stderr)
    );
    assert_eq!(report.matches("err= 0").count(), 2, "{report}");
    assert!(report.contains("read:"), "fio verified nothing: {report}");
    test_support::drop_all_caches();
    check(&f, &files, "branch 0 failed after the rebuild of branch 1");
    assert!(f.status().contains("degraded_reads"), "{}", f.status());
    assert_eq!(f.unmount(), Some(0));
    // Branch 0 rebuilt from branches 1 (the new one) and 2: then every copy and parity agrees.
    f.branches[1] = new1;
    let b0 = f.branches[0].clone();
    let out = f.rebuild(0, &b0);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let scrub = f.scrub(false);
    assert_eq!(scrub.code, 0, "{}{}", scrub.stdout, scrub.stderr);
    assert!(scrub.stdout.contains("0 mismatches"), "{}", scrub.stdout);
}

transports!(online_rebuild_cut_short_by_a_kill_resumes);

fn online_rebuild_cut_short_by_a_kill_resumes(t: Transport) {
    let Some(mut f) = Fixture::new(t, "online-resume", 3) else {
        return;
    };
    let args = ["--level", "5", "--stripe", "4K"];
    f.mount(&args);
    let files = fill(&f, "d", 400, 64 << 10, 11);
    // The fill's intent entries cleared first: a file they name counts as torn after the kill
    // and is rebuilt again, which is right but would leave this test nothing to see kept.
    f.intent_logs_cleared();
    fs::write(f.m(".raif"), "fail 1\n").unwrap();
    let new1 = f.root.join("new1");
    fs::create_dir(&new1).unwrap();
    fs::write(f.m(".raif"), format!("rebuild 1 {}\n", new1.display())).unwrap();
    // Killed once some files are done, before the end.
    let mut last = String::new();
    for _ in 0..100_000 {
        last = f.status();
        let line = last.lines().find(|l| l.starts_with("rebuild branch 1 "));
        let done = line
            .and_then(|l| l.split(" files=").nth(1))
            .and_then(|r| r.split('/').next())
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0);
        if done > 0 || line.is_some_and(|l| !l.contains("state=running")) {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    f.kill_now();
    assert!(
        last.contains("state=running pass=1"),
        "the kill did not land in the first pass: {last}"
    );
    // The next mount finds the new directory as branch 1, come back: stale.
    f.branches[1] = new1.clone();
    f.mount(&args);
    assert_eq!(f.state(1), "stale", "{}", f.status());
    check(&f, &files, "after the kill");
    let out = rebuild_mounted(&f, 1, &new1);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    // Resumed: what the first run did is kept.
    let kept: u64 = out
        .stdout
        .split(" bytes written, ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{}", out.stdout));
    assert!(kept > 0, "nothing kept: {}", out.stdout);
    assert_eq!(f.state(1), "online", "{}", f.status());
    fs::write(f.m(".raif"), "fail 2\n").unwrap();
    check(&f, &files, "branch 2 failed after the resumed rebuild");
    assert_eq!(f.unmount(), Some(0));
    let b2 = f.branches[2].clone();
    let out = f.rebuild(2, &b2);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let scrub = f.scrub(false);
    assert_eq!(scrub.code, 0, "{}{}", scrub.stdout, scrub.stderr);
}

transports!(online_rebuild_refuses_what_it_cannot_do);

/// An online branch, a directory that is another volume's or holds files, one inside the
/// mount: refused with the reason, nothing changed.
fn online_rebuild_refuses_what_it_cannot_do(t: Transport) {
    let Some(f) = Fixture::mounted(t, "online-refuse", 3, &["--level", "1"]) else {
        return;
    };
    fs::write(f.m("x"), b"x").unwrap();
    let new = f.root.join("new");
    fs::create_dir(&new).unwrap();
    let out = rebuild_mounted(&f, 1, &new);
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("branch 1 is online"), "{}", out.stderr);
    fs::write(f.m(".raif"), "fail 1\n").unwrap();
    fs::write(new.join("stray"), b"s").unwrap();
    let out = rebuild_mounted(&f, 1, &new);
    assert!(out.stderr.contains("not empty"), "{}", out.stderr);
    let out = rebuild_mounted(&f, 7, &new);
    assert!(out.stderr.contains("3 branches"), "{}", out.stderr);
    let inside = f.m("sub");
    fs::create_dir(&inside).unwrap();
    let out = rebuild_mounted(&f, 1, &inside);
    assert!(out.stderr.contains("inside the mount"), "{}", out.stderr);
    assert_eq!(f.state(1), "failed");
    assert_eq!(fs::read(f.m("x")).unwrap(), b"x");
}
