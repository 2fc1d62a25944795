//! `fsprof summary`: golden tables in every format.

use crate::util::{fsprof, golden};

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
