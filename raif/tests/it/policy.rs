//! A policy file puts `*.log` on RAIF1 and `*.bin` on RAIF0 (as the branch files show), and a
//! changed policy affects new files only.

use std::fs;
use test_support::{Transport, transports};

use raif::layout::Level;

use crate::fixture::{Fixture, Rng, policy_file, statvfs_avail};
use crate::records::record;

transports!(the_policy_decides_each_new_files_layout);

fn the_policy_decides_each_new_files_layout(t: Transport) {
    let Some(mut f) = Fixture::new(t, "policy", 3) else {
        return;
    };
    let p = policy_file(
        &f,
        "[default]\nlevel = 5\n\n[[rule]]\nglob = \"*.log\"\nlevel = 1\n\n\
         [[rule]]\nglob = \"*.bin\"\nlevel = 0\nstripe = \"4K\"\n",
    );
    f.mount(&["--level", "1", "--policy", &p]);
    let mut rng = Rng::new(5);
    let log = rng.bytes(30_000);
    let bin = rng.bytes(50_000);
    let txt = rng.bytes(3_000);
    fs::create_dir(f.m("sub")).unwrap();
    fs::write(f.m("sub/app.log"), &log).unwrap();
    fs::write(f.m("sub/data.bin"), &bin).unwrap();
    fs::write(f.m("notes.txt"), &txt).unwrap();

    // RAIF1: a full copy on every branch.
    for i in 0..3 {
        assert_eq!(
            fs::read(f.b(i, "sub/app.log")).unwrap(),
            log,
            "copy on branch {i}"
        );
        assert_eq!(
            record(&f.b(i, "sub/app.log")).unwrap().layout.level,
            Level::Raif1
        );
    }
    // RAIF0 with 4 KiB units: the parts hold the stripes, round-robin from the start branch.
    let m = record(&f.b(0, "sub/data.bin")).unwrap();
    assert_eq!((m.layout.level, m.layout.stripe), (Level::Raif0, 4096));
    let parts: Vec<Vec<u8>> = (0..3)
        .map(|i| fs::read(f.b(i, "sub/data.bin")).unwrap())
        .collect();
    assert_eq!(parts.iter().map(Vec::len).sum::<usize>(), bin.len());
    for (k, unit) in bin.chunks(4096).enumerate() {
        let b = (m.layout.start as usize + k) % 3;
        let off = (k / 3) * 4096;
        assert_eq!(
            &parts[b][off..off + unit.len()],
            unit,
            "unit {k} on branch {b}"
        );
    }
    // Everything else: the policy's default (RAIF5), not the command line's RAIF1.
    assert_eq!(
        record(&f.b(1, "notes.txt")).unwrap().layout.level,
        Level::Raif5
    );
    // statfs and .raif follow the policy's default too: RAIF5 over three branches has two
    // branches' worth of space (the command line's RAIF1 would have one).
    let ratio = statvfs_avail(&f.mnt) as f64 / statvfs_avail(&f.branches[0]) as f64;
    assert!((1.9..2.1).contains(&ratio), "statfs ratio {ratio}");
    let status = f.status();
    assert!(status.contains("default level=5 "), "{status}");

    // A new policy: new files follow it, existing ones keep their layout.
    f.unmount();
    policy_file(&f, "[[rule]]\nglob = \"*.log\"\nlevel = 5\n");
    f.mount(&["--level", "1", "--policy", &p]);
    fs::write(f.m("sub/new.log"), &log).unwrap();
    assert_eq!(
        record(&f.b(0, "sub/new.log")).unwrap().layout.level,
        Level::Raif5
    );
    assert_eq!(
        record(&f.b(0, "sub/app.log")).unwrap().layout.level,
        Level::Raif1
    );
    assert_eq!(fs::read(f.m("sub/app.log")).unwrap(), log);
    assert_eq!(fs::read(f.m("sub/data.bin")).unwrap(), bin);
    assert_eq!(fs::read(f.m("sub/new.log")).unwrap(), log);
}

transports!(a_many_star_glob_against_a_long_name_does_not_stall_creates);

/// A glob with many stars against a long name full of dashes used to take exponential time
/// (6 s for 100 dashes, and creates by other users waited behind it). Matching is linear: a
/// 255-byte name is created at once; the timeout only keeps a regression from hanging.
fn a_many_star_glob_against_a_long_name_does_not_stall_creates(t: Transport) {
    let Some(mut f) = Fixture::new(t, "glob-dos", 3) else {
        return;
    };
    let p = policy_file(
        &f,
        "[[rule]]\nglob = \"*-*-*-*-*-*.log\"\nlevel = 0\n\n\
         [[rule]]\nglob = \"d/**/*-*-*-*-*-*-*-*-*-*.x\"\nlevel = 5\n",
    );
    f.mount(&["--level", "1", "--policy", &p]);
    fs::create_dir(f.m("d")).unwrap();
    let names = [
        "-".repeat(255),                    // no match: the worst case for backtracking
        format!("{}.log", "-".repeat(251)), // a match
        format!("d/{}", "-".repeat(255)),   // the path rule, no match
    ];
    let (tx, rx) = std::sync::mpsc::channel();
    let paths: Vec<_> = names.iter().map(|n| f.m(n)).collect();
    std::thread::spawn(move || {
        for p in paths {
            tx.send(fs::write(&p, b"x").map_err(|e| format!("{}: {e}", p.display())))
                .unwrap();
        }
    });
    for n in &names {
        let r = rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("creating {} bytes' name did not end", n.len()));
        r.unwrap();
    }
    let level = |n: &str| record(&f.b(0, n)).unwrap().layout.level;
    assert_eq!(level(&names[0]), Level::Raif1);
    assert_eq!(level(&names[1]), Level::Raif0);
    assert_eq!(level(&names[2]), Level::Raif1);
}

/// A glob nested 150 braces deep made globset panic (exit 101); it is refused in one line,
/// exit 2, before any branch is touched.
#[test]
fn a_deep_glob_in_a_policy_is_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let deep = format!("{}b{}", "{a,".repeat(150), "}".repeat(150));
    let policy = dir.path().join("policy.toml");
    fs::write(&policy, format!("[[rule]]\nglob = \"{deep}\"\nlevel = 0\n")).unwrap();
    for b in ["b0", "b1", "mnt"] {
        fs::create_dir(dir.path().join(b)).unwrap();
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_raif"))
        .arg("--branches")
        .arg(format!(
            "{},{}",
            dir.path().join("b0").display(),
            dir.path().join("b1").display()
        ))
        .arg("--policy")
        .arg(&policy)
        .arg(dir.path().join("mnt"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("braces nested 150 deep"), "{err}");
    assert!(
        fs::read_dir(dir.path().join("b0"))
            .unwrap()
            .next()
            .is_none()
    );
}
