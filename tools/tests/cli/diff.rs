//! `fsprof diff`: the operations worth a look.

use serde_json::Value;

use crate::util::{bimodal, fsprof, synthetic, write_profile};

#[test]
fn diff_against_itself_with_one_operation_changed_lists_exactly_that_operation() {
    let dir = tempfile::tempdir().unwrap();
    let ops: Vec<(&str, Vec<(usize, u64)>)> = vec![
        ("OP_READ", bimodal()),
        ("OP_WRITE", vec![(12, 3000), (13, 1000)]),
        ("OP_LOOKUP", vec![(8, 9000), (9, 100), (18, 30)]),
        ("OP_GETATTR", vec![(7, 20000)]),
        ("OP_OPEN", vec![(11, 500), (12, 2500)]),
        ("OP_STATFS", vec![(9, 3)]),
    ];
    let base = ops.clone();
    let view: Vec<(&str, &[(usize, u64)])> = base.iter().map(|(n, b)| (*n, b.as_slice())).collect();
    let a = write_profile(dir.path(), "a.fsprof", &synthetic(&view));
    // Itself: nothing to look at.
    let out = fsprof(&["diff", &a, &a, "--format", "json"]).ok();
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["layers"][0]["report"]["findings"]
            .as_array()
            .unwrap()
            .len(),
        0
    );
    // Each operation changed in turn, by a new slow path of 5% of its calls (peaks under 1%
    // of the calls are not named): only that one is listed.
    for changed in ["OP_READ", "OP_WRITE", "OP_LOOKUP", "OP_GETATTR", "OP_OPEN"] {
        let mut ops_b = base.clone();
        let mut new_calls = 0;
        for (n, b) in &mut ops_b {
            if *n == changed {
                new_calls = b.iter().map(|&(_, c)| c).sum::<u64>() / 19;
                b.push((24, new_calls));
            }
        }
        let view: Vec<(&str, &[(usize, u64)])> =
            ops_b.iter().map(|(n, b)| (*n, b.as_slice())).collect();
        let b = write_profile(dir.path(), "b.fsprof", &synthetic(&view));
        let out = fsprof(&["diff", &a, &b, "--format", "json"]).ok();
        let v: Value = serde_json::from_str(&out).unwrap();
        let findings = v["layers"][0]["report"]["findings"].as_array().unwrap();
        let names: Vec<&str> = findings.iter().map(|f| f["op"].as_str().unwrap()).collect();
        assert_eq!(names, [changed], "{out}");
        let kinds: Vec<&str> = findings[0]["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["kind"].as_str().unwrap())
            .collect();
        assert!(kinds.contains(&"new_peak"), "{changed}: {kinds:?}");
        let top: Vec<u64> = findings[0]["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["kind"] == "new_peak")
            .map(|r| r["peak"]["mode"].as_u64().unwrap())
            .collect();
        assert_eq!(top, [24], "{changed}");
        // The text form names it too.
        let text = fsprof(&["diff", &a, &b]).ok();
        assert!(text.contains(&format!("1. {changed}  D=")), "{text}");
        // (OP_READ's slow path reaches bucket 23, so its new peak starts there.)
        assert!(text.contains("new peak at bucket"), "{text}");
        assert!(text.contains(&format!("{new_calls} calls")) || changed == "OP_READ");
        let csv = fsprof(&["diff", &a, &b, "--format", "csv"]).ok();
        let rows: Vec<&str> = csv.lines().collect();
        assert_eq!(rows.len(), 2, "{csv}");
        assert!(
            rows[1].starts_with(&format!("fuse,{changed},100.000,")),
            "{csv}"
        );
    }
}

/// The findings of `fsprof diff A B --format json` (with `extra` arguments): (op, reason kinds).
fn diff_findings(a: &str, b: &str, extra: &[&str]) -> Vec<(String, Vec<String>)> {
    let mut args = vec!["diff", a, b, "--format", "json"];
    args.extend_from_slice(extra);
    let v: Value = serde_json::from_str(&fsprof(&args).ok()).unwrap();
    v["layers"][0]["report"]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let kinds = f["reasons"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["kind"].as_str().unwrap().to_string())
                .collect();
            (f["op"].as_str().unwrap().to_string(), kinds)
        })
        .collect()
}

#[test]
fn diff_and_compare_ignore_a_stray_call_but_not_a_new_path() {
    // 13000 lookups; B has the same plus one call in an empty bucket. On a log scale that call
    // is a peak, and diff used to list "new peak at bucket 15 (1 calls, <0.1%)" while GROUPOPS
    // and GROUPLAT scored 100 ("peaks 1->2").
    let dir = tempfile::tempdir().unwrap();
    let base: &[(usize, u64)] = &[(9, 3000), (10, 10_000)];
    let other: &[(usize, u64)] = &[(12, 4000), (13, 1000)];
    let a = write_profile(
        dir.path(),
        "a.fsprof",
        &synthetic(&[("OP_LOOKUP", base), ("OP_READ", other)]),
    );
    let with = |extra: &[(usize, u64)]| -> Vec<(usize, u64)> {
        base.iter().chain(extra).copied().collect()
    };
    let stray = write_profile(
        dir.path(),
        "stray.fsprof",
        &synthetic(&[("OP_LOOKUP", &with(&[(15, 1)])), ("OP_READ", other)]),
    );
    assert_eq!(diff_findings(&a, &stray, &[]), []);
    let text = fsprof(&["diff", &a, &stray]).ok();
    assert!(!text.contains("new peak"), "{text}");
    assert!(text.contains("peaks from 1.0%"), "{text}");
    // With every peak counted (the old behaviour) the stray call is a new peak, of one
    // call's time: minor, unless every stake is listed too.
    assert_eq!(diff_findings(&a, &stray, &["--min-peak-share", "0"]), []);
    let all = diff_findings(&a, &stray, &["--min-peak-share", "0", "--min-stake", "0"]);
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0].1, ["new_peak"]);

    // A stray call slow enough to move the estimated latency past 1% (bucket 20: 1.5M cycles
    // against 17.7M): the totals do not decide, and the peaks must not say "1->2".
    let slow = write_profile(
        dir.path(),
        "slow.fsprof",
        &synthetic(&[("OP_LOOKUP", &with(&[(20, 1)])), ("OP_READ", other)]),
    );
    let v: Value = serde_json::from_str(
        &fsprof(&[
            "compare",
            &a,
            &slow,
            "--op",
            "lookup",
            "--method",
            "groupops,grouplat",
            "--format",
            "json",
        ])
        .ok(),
    )
    .unwrap();
    for s in v["layers"][0]["ops"][0]["scores"].as_array().unwrap() {
        assert_eq!(s["decision"]["by"], "peaks", "{s}");
        assert!(s["d"].as_f64().unwrap() < 1.0, "{s}");
    }
    let v: Value = serde_json::from_str(
        &fsprof(&[
            "compare",
            &a,
            &slow,
            "--op",
            "lookup",
            "--method",
            "groupops",
            "--format",
            "json",
            "--min-peak-share",
            "0",
        ])
        .ok(),
    )
    .unwrap();
    let s = &v["layers"][0]["ops"][0]["scores"][0];
    assert_eq!(
        (s["d"].as_f64(), &s["decision"]["by"]),
        (Some(100.0), &Value::from("peak_count"))
    );

    // A real new path, 5% of the calls: still named.
    let real = write_profile(
        dir.path(),
        "real.fsprof",
        &synthetic(&[("OP_LOOKUP", &with(&[(20, 685)])), ("OP_READ", other)]),
    );
    let found = diff_findings(&a, &real, &[]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, "OP_LOOKUP");
    assert!(found[0].1.contains(&"new_peak".to_string()), "{found:?}");
    let text = fsprof(&["diff", &a, &real]).ok();
    assert!(
        text.contains("new peak at bucket 20 (685 calls, 5.0%"),
        "{text}"
    );
}

#[test]
fn the_latency_at_stake_ranks_operations_whose_scores_saturate() {
    // Two builds: READDIR 3.5 -> 1.7 ms and OPEN 88 -> 54 ms, both scored 100 (their peaks
    // moved). READDIR used to come first; the latency at stake puts OPEN first.
    let dir = tempfile::tempdir().unwrap();
    // At 1 GHz bucket 20 is ~1 ms a call (mid-point 1.5 ms).
    let a = synthetic(&[
        ("OP_READDIR", &[(19, 4)]),
        ("OP_OPEN", &[(22, 14)]),
        ("OP_GETATTR", &[(10, 100_000)]),
    ]);
    let b = synthetic(&[
        ("OP_READDIR", &[(17, 8)]),
        ("OP_OPEN", &[(25, 1)]),
        ("OP_GETATTR", &[(10, 100_000)]),
    ]);
    let (pa, pb) = (
        write_profile(dir.path(), "a.fsprof", &a),
        write_profile(dir.path(), "b.fsprof", &b),
    );
    let out = fsprof(&["diff", &pa, &pb, "--format", "json"]).ok();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let f = v["layers"][0]["report"]["findings"].as_array().unwrap();
    let names: Vec<&str> = f.iter().map(|x| x["op"].as_str().unwrap()).collect();
    let scores: Vec<f64> = f.iter().map(|x| x["score"].as_f64().unwrap()).collect();
    assert_eq!(names, ["OP_OPEN", "OP_READDIR"], "{out}");
    assert_eq!(scores, [100.0, 100.0], "{out}");
    let text = fsprof(&["diff", &pa, &pb]).ok();
    assert!(text.contains("1. OP_OPEN  D=100.0, at stake "), "{text}");
    let help = fsprof(&["diff", "--help"]).ok();
    assert!(help.contains("the most latency at stake first"), "{help}");
    assert!(!help.contains("most different first"), "{help}");
}
