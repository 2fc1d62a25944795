//! `fsprof check`: problems listed, exit code 1.

use crate::util::{FAST, SLOW, fsprof, input, synthetic, write_profile};

#[test]
fn check_lists_each_problem_and_exits_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = synthetic(&[("OP_READ", FAST), ("OP_WRITE", SLOW)]);
    p.layers[0].ops[0].count += 5; // 5 calls missing from the buckets
    p.layers[0].ops[1].count -= 1; // more calls in buckets than counted
    let bad = write_profile(dir.path(), "bad.fsprof", &p);
    let r = fsprof(&["check", &bad]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", r.stdout);
    assert!(lines[0].contains("OP_READ") && lines[0].contains("below count"));
    assert!(lines[1].contains("OP_WRITE") && lines[1].contains("exceeds count"));
    assert_eq!(
        r.one_line_error(1),
        format!("fsprof: check: 2 problems in {bad}")
    );
    // Five calls in flight are allowed with --in-flight 5; the other problem stays.
    let r = fsprof(&["check", &bad, "--in-flight", "5"]);
    assert_eq!(r.code, 1);
    assert_eq!(r.stdout.lines().count(), 1);
    // Good profiles pass.
    let out = fsprof(&[
        "check",
        &input("sample.fsprof"),
        &input("timelapse.fsprof"),
        &input("original.fsprof"),
    ])
    .ok();
    assert_eq!(
        out.lines().filter(|l| l.contains(": ok (")).count(),
        3,
        "{out}"
    );
}
