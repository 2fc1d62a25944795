//! `fsprof summary`: golden tables in every format.

use crate::util::{fsprof, golden, synthetic, write_profile};

#[test]
fn golden_summary() {
    for (format, file) in [
        ("text", "summary.txt"),
        ("csv", "summary.csv"),
        ("json", "summary.json"),
    ] {
        let out = fsprof(&["summary", "sample.fsprof", "--format", format]).ok();
        golden(file, &out);
    }
}

#[test]
fn summary_and_show_write_small_shares_alike() {
    // OP_STATFS has 20480 of 4.7e9 cycles: '<0.1%' in both.
    let summary = fsprof(&["summary", "sample.fsprof"]).ok();
    let row = summary
        .lines()
        .find(|l| l.starts_with("OP_STATFS"))
        .unwrap();
    assert!(row.ends_with("<0.1%"), "{row}");
    let show = fsprof(&[
        "show",
        "sample.fsprof",
        "--op",
        "statfs",
        "--color",
        "never",
    ])
    .ok();
    assert!(
        show.contains("OP_STATFS: 2 calls, <0.1% of the layer's latency"),
        "{show}"
    );
}

#[test]
fn an_empty_profile_totals_zero_without_a_sign() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_profile(dir.path(), "empty.fsprof", &synthetic(&[]));
    let out = fsprof(&["summary", &p]).ok();
    let total = out.lines().find(|l| l.starts_with("total")).unwrap();
    assert!(!total.contains("-0"), "{total}");
    assert!(total.contains("0.00"), "{total}");
}

#[test]
fn one_call_is_one_call() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_profile(
        dir.path(),
        "one.fsprof",
        &synthetic(&[("OP_MKDIR", &[(12, 1)]), ("OP_READ", &[(10, 2)])]),
    );
    let out = fsprof(&["show", &p]).ok();
    assert!(out.contains("OP_MKDIR: 1 call,"), "{out}");
    assert!(out.contains("OP_READ: 2 calls,"), "{out}");
    assert!(!out.contains("1 calls"), "{out}");
    let out = fsprof(&["peaks", &p]).ok();
    assert!(out.contains("OP_MKDIR: 1 finished call, 1 peak"), "{out}");
}
