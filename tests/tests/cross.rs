//! Cross-crate tests: fsprof-fuse serves, the fsprof tools read.

use std::fs;

use tests::{Mounted, run};

#[test]
fn fsprof_show_reads_a_live_mount() {
    let Some(m) = Mounted::start("show", "fsprof-fuse", &[]) else {
        return;
    };
    for i in 0..25 {
        fs::create_dir(m.mnt.join(format!("d{i}"))).unwrap();
        fs::write(m.mnt.join(format!("d{i}/f")), b"data").unwrap();
    }
    let (code, out, err) = run(
        "fsprof",
        &[
            "show".as_ref(),
            m.mnt.as_os_str(),
            "--color".as_ref(),
            "never".as_ref(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("OP_MKDIR: 25 calls"), "{out}");
    assert!(out.contains("OP_CREATE: 25 calls"), "{out}");
    let (code, out, err) = run(
        "fsprof",
        &[
            "summary".as_ref(),
            m.mnt.as_os_str(),
            "--format".as_ref(),
            "csv".as_ref(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.lines().any(|l| l.starts_with("fuse,OP_WRITE,25,")),
        "{out}"
    );
    // The live profile is consistent.
    let (code, out, err) = run(
        "fsprof",
        &[
            "check".as_ref(),
            m.mnt.as_os_str(),
            "--in-flight".as_ref(),
            "8".as_ref(),
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
}

#[test]
fn fsprof_profile_mounts_runs_shows_and_unmounts() {
    if !tests::fuse_available() {
        return;
    }
    let dir = tests::scratch("profile");
    fs::create_dir_all(dir.join("a/b")).unwrap();
    for i in 0..30 {
        fs::write(dir.join(format!("a/b/f{i}")), vec![b'x'; 1000 * i]).unwrap();
    }
    let saved = dir.with_extension("json");
    let (code, out, err) = run(
        "fsprof",
        &[
            "profile".as_ref(),
            dir.as_os_str(),
            "--save".as_ref(),
            saved.as_os_str(),
            "--color".as_ref(),
            "never".as_ref(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("read 30 files (435000 bytes)"), "{out}");
    assert!(out.contains("OP_OPEN: 30 calls"), "{out}");
    let p = profile_store::json::parse(&fs::read_to_string(&saved).unwrap()).unwrap();
    assert_eq!(p.layers[0].count("OP_OPEN"), 30);
    // With a command, run in the mount: it sees the files, and nothing stays mounted.
    let (code, out, err) = run(
        "fsprof",
        &[
            "profile".as_ref(),
            dir.as_os_str(),
            "--".as_ref(),
            "sh".as_ref(),
            "-c".as_ref(),
            "mkdir made && ls a/b | wc -l".as_ref(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("30\n"), "{out}");
    assert!(
        out.contains("OP_MKDIR: 1 calls") || out.contains("OP_MKDIR: 1 call"),
        "{out}"
    );
    assert!(dir.join("made").is_dir());
    let mounts = fs::read_to_string("/proc/mounts").unwrap();
    assert!(!mounts.contains("fsprof-profile-"), "{mounts}");
    // A directory that does not exist: one line, non-zero.
    let (code, _, err) = run(
        "fsprof",
        &["profile".as_ref(), dir.join("missing").as_os_str()],
    );
    assert_eq!(code, 2);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    let _ = fs::remove_dir_all(&dir);
    let _ = fs::remove_file(&saved);
}
