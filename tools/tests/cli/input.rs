//! Inputs every command reads: files, standard input, JSON, mount points.

use crate::util::{fsprof, fsprof_with_input, input};

#[test]
fn standard_input_and_json_and_mount_point_read_alike() {
    let text = std::fs::read(input("sample.fsprof")).unwrap();
    let from_file = fsprof(&["summary", &input("sample.fsprof")]).ok();
    let from_stdin = fsprof_with_input(&["summary", "-"], &text).ok();
    assert_eq!(from_file, from_stdin);
    // JSON through export, then a directory holding the text as .fsprof (a mount point).
    let json = fsprof(&["export", &input("sample.fsprof"), "--format", "json"]).ok();
    let from_json = fsprof_with_input(&["summary", "-"], json.as_bytes()).ok();
    assert_eq!(from_file, from_json);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(".fsprof"), &text).unwrap();
    let from_dir = fsprof(&["summary", dir.path().to_str().unwrap()]).ok();
    assert_eq!(from_file, from_dir);
    let shown = fsprof(&["show", dir.path().to_str().unwrap(), "--color", "never"]).ok();
    assert_eq!(
        shown,
        fsprof(&["show", &input("sample.fsprof"), "--color", "never"]).ok()
    );
}

#[test]
fn standard_input_named_twice_is_refused_before_reading() {
    let text = std::fs::read(input("sample.fsprof")).unwrap();
    let p = input("sample.fsprof");
    for args in [
        vec!["compare", "-", "-"],
        vec!["diff", "-", "-"],
        vec!["plot", "-", "-", "-o", "-"],
        vec!["check", &p, "-", "-"],
    ] {
        let r = fsprof_with_input(&args, &text);
        let line = r.one_line_error(2);
        assert!(
            line.contains("standard input given 2 times"),
            "{args:?}: {line}"
        );
        assert!(r.stdout.is_empty(), "{args:?}: {}", r.stdout);
    }
    // Once is fine, on either side.
    let out = fsprof_with_input(&["diff", "-", &p], &text).ok();
    assert!(out.contains("0 operations worth a look"), "{out}");
    fsprof_with_input(&["compare", &p, "-"], &text).ok();
}

/// Opens `fifo` for writing and closes it (which ends a reader blocked opening it) unless
/// `done` is set within a minute; whether it had to.
fn unblock_after_a_minute(
    fifo: std::path::PathBuf,
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<bool> {
    use std::sync::atomic::Ordering;
    std::thread::spawn(move || {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while std::time::Instant::now() < deadline {
            if done.load(Ordering::Acquire) {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        drop(std::fs::OpenOptions::new().write(true).open(&fifo));
        true
    })
}

#[test]
fn a_fifo_named_as_a_profile_or_a_mounts_control_file_is_refused_without_blocking() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("d")).unwrap();
    let in_dir = dir.path().join("d/.fsprof");
    let named = dir.path().join("x.fsprof");
    for f in [&in_dir, &named] {
        let (c, _, e) = test_support::sh(&format!("mkfifo '{}'", f.display()));
        assert_eq!(c, 0, "{e}");
    }
    let d = dir.path().join("d").display().to_string();
    let x = named.display().to_string();
    for (args, fifo) in [
        (vec!["show", &d], &in_dir),
        (vec!["show", &x], &named),
        (vec!["summary", &x], &named),
        (vec!["slow", &x], &named),
        (vec!["trace", "show", &x], &named),
    ] {
        let done = std::sync::Arc::new(AtomicBool::new(false));
        let watchdog = unblock_after_a_minute(fifo.clone(), done.clone());
        let r = fsprof(&args);
        done.store(true, Ordering::Release);
        assert!(!watchdog.join().unwrap(), "{args:?} blocked on the FIFO");
        let line = r.one_line_error(2);
        assert!(
            line.contains("a FIFO, not a regular file"),
            "{args:?}: {line}"
        );
    }
}
