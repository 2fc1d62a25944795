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

#[test]
fn background_operations_are_marked_and_left_out_of_the_shares() {
    // FORGET takes 60% of the recorded latency, READ 30%, WRITE 10%: no caller waited for the
    // FORGETs, so READ is 75% of the latency that was waited for.
    let dir = tempfile::tempdir().unwrap();
    let mut p = synthetic(&[
        ("OP_FORGET", &[(10, 1)]),
        ("OP_READ", &[(10, 1)]),
        ("OP_WRITE", &[(10, 1)]),
    ]);
    for (op, total) in [("OP_FORGET", 600), ("OP_READ", 300), ("OP_WRITE", 100)] {
        p.layers[0]
            .ops
            .iter_mut()
            .find(|o| o.name == op)
            .unwrap()
            .total = total;
    }
    let p = write_profile(dir.path(), "bg.fsprof", &p);
    let out = fsprof(&["summary", &p]).ok();
    let row = |name: &str| {
        out.lines()
            .find(|l| l.starts_with(name))
            .unwrap()
            .to_string()
    };
    assert!(row("OP_FORGET").ends_with("bg"), "{out}");
    assert!(row("OP_READ").ends_with("75.0%"), "{out}");
    assert!(out.contains("bg: background, no caller waits"), "{out}");
    let out = fsprof(&["summary", &p, "--with-background"]).ok();
    let row = |name: &str| {
        out.lines()
            .find(|l| l.starts_with(name))
            .unwrap()
            .to_string()
    };
    assert!(row("OP_FORGET").ends_with("60.0%"), "{out}");
    assert!(row("OP_READ").ends_with("30.0%"), "{out}");
    let shown = fsprof(&["show", &p, "--color", "never"]).ok();
    assert!(
        shown.contains("OP_FORGET: 1 call, background: no caller waits (not in the shares)"),
        "{shown}"
    );
    assert!(
        shown.contains("OP_READ: 1 call, 75.0% of the layer's latency"),
        "{shown}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&fsprof(&["summary", &p, "--format", "json"]).ok()).unwrap();
    let forget = &json["ops"][0];
    assert_eq!(forget["op"], "OP_FORGET");
    assert_eq!(forget["background"], true);
    assert!(forget["latency_share"].is_null());
    // compare and diff name them.
    let cmp = fsprof(&["compare", &p, &p]).ok();
    assert!(
        cmp.contains("background, no caller waits: OP_FORGET (not in the latency weights)"),
        "{cmp}"
    );
}
