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
