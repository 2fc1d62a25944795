//! `fsprof compare`: scores of every method on profiles of known structure, golden output.

use serde_json::Value;

use crate::util::{
    FAST, assert_fits, bimodal, fsprof, golden, input, shifted, synthetic, write_profile,
};

#[test]
fn golden_peaks_compare_diff() {
    let a = "sample.fsprof";
    let b = "sample-write-contention.fsprof";
    for (file, args) in [
        ("peaks.txt", vec!["peaks", a]),
        ("compare.txt", vec!["compare", a, b, "--layer", "fuse"]),
        ("diff.txt", vec!["diff", a, b]),
    ] {
        let out = fsprof(&args).ok();
        assert_fits(&out, 80);
        golden(file, &out);
    }
}

fn scores(a: &str, b: &str) -> Vec<(String, f64)> {
    let out = fsprof(&["compare", a, b, "--format", "json"]).ok();
    let v: Value = serde_json::from_str(&out).unwrap();
    v["layers"][0]["ops"][0]["scores"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["method"].as_str().unwrap().to_string(),
                s["d"].as_f64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn identical_profiles_score_zero_on_every_method() {
    let dir = tempfile::tempdir().unwrap();
    let p = synthetic(&[("OP_READ", &bimodal()), ("OP_WRITE", FAST)]);
    let a = write_profile(dir.path(), "a.fsprof", &p);
    let b = write_profile(dir.path(), "b.fsprof", &p);
    let s = scores(&a, &b);
    assert_eq!(s.len(), 6);
    for (method, d) in s {
        assert_eq!(d, 0.0, "{method}");
    }
}

#[test]
fn emd_orders_shifts_while_chisquare_calls_both_different() {
    let dir = tempfile::tempdir().unwrap();
    let base = bimodal();
    let a = write_profile(dir.path(), "a.fsprof", &synthetic(&[("OP_READ", &base)]));
    let one = write_profile(
        dir.path(),
        "one.fsprof",
        &synthetic(&[("OP_READ", &shifted(&base, 1))]),
    );
    let four = write_profile(
        dir.path(),
        "four.fsprof",
        &synthetic(&[("OP_READ", &shifted(&base, 4))]),
    );
    let get = |s: &[(String, f64)], m: &str| s.iter().find(|(n, _)| n == m).unwrap().1;
    let (s1, s4) = (scores(&a, &one), scores(&a, &four));
    let (e1, e4) = (get(&s1, "emd"), get(&s4, "emd"));
    assert!((e1 - 20.0).abs() < 1e-6, "one bucket: {e1}");
    assert!((e4 - 80.0).abs() < 1e-6, "four buckets: {e4}");
    assert!(e1 < e4 / 2.0);
    let (c1, c4) = (get(&s1, "chisquare"), get(&s4, "chisquare"));
    assert!(c1 > 99.0 && c4 > 99.0, "chisquare {c1} {c4}");
    // Shifting changes neither the calls nor their shape: TOTOPS sees nothing.
    assert_eq!(get(&s1, "totops"), 0.0);
}

#[test]
fn totops_and_totlat_match_hand_computation() {
    let dir = tempfile::tempdir().unwrap();
    // A: 100 calls in bucket 10 (mid 1536), 20 in bucket 14 (mid 24576):
    //    N = 120, L = 153600 + 491520 = 645120.
    // B: 90 calls in bucket 10, 30 in bucket 14: M = 120, L = 138240 + 737280 = 875520.
    let a = write_profile(
        dir.path(),
        "a.fsprof",
        &synthetic(&[("OP_READ", &[(10, 100), (14, 20)])]),
    );
    let b = write_profile(
        dir.path(),
        "b.fsprof",
        &synthetic(&[("OP_READ", &[(10, 90), (14, 30), (30, 0)])]),
    );
    let c = write_profile(
        dir.path(),
        "c.fsprof",
        &synthetic(&[("OP_READ", &[(10, 150), (14, 30)])]),
    );
    let get = |s: &[(String, f64)], m: &str| s.iter().find(|(n, _)| n == m).unwrap().1;
    let ab = scores(&a, &b);
    assert_eq!(get(&ab, "totops"), 0.0);
    let want = (875_520.0 - 645_120.0) / 645_120.0 * 100.0;
    assert!(
        (get(&ab, "totlat") - want).abs() < 1e-9,
        "{}",
        get(&ab, "totlat")
    );
    // C: 180 calls: |120 − 180| / 120 = 50%; L = 230400 + 737280 = 967680: 50% as well.
    let ac = scores(&a, &c);
    assert!((get(&ac, "totops") - 50.0).abs() < 1e-9);
    assert!((get(&ac, "totlat") - 50.0).abs() < 1e-9);
    // Normalized by A, so the other way round is |180 − 120| / 180.
    let ca = scores(&c, &a);
    assert!((get(&ca, "totops") - 100.0 / 3.0).abs() < 1e-9);
}

#[test]
fn help_documents_the_scales() {
    let out = fsprof(&["compare", "--help"]).ok();
    for needle in [
        "totops",
        "D = min(100, 20 * EMD)",
        "dof = non-empty buckets - 1",
        "grouplat",
    ] {
        assert!(out.contains(needle), "{needle} missing from compare --help");
    }
}

#[test]
fn two_layers_of_one_profile_compare_with_layers() {
    // sample.fsprof has a fuse and a lower layer: compared without splitting the profile.
    let p = input("sample.fsprof");
    let out = fsprof(&[
        "compare",
        &p,
        "--layers",
        "fuse,lower",
        "--method",
        "totops",
    ])
    .ok();
    assert!(out.contains("layer fuse vs lower"), "{out}");
    assert!(out.contains("OP_READ"), "{out}");
    let r = fsprof(&["compare", &p, "--layers", "fuse"]);
    assert!(
        r.one_line_error(2).contains("two layer names"),
        "{}",
        r.stderr
    );
    let r = fsprof(&["compare", &p, "--layers", "fuse,nope"]);
    assert!(
        r.one_line_error(2).contains("no layer nope"),
        "{}",
        r.stderr
    );
    // Without --layers a second profile is needed.
    fsprof(&["compare", &p]).one_line_error(2);
}
