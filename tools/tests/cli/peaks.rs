//! `fsprof peaks`: peaks of profiles of known structure.

use serde_json::Value;

use crate::util::{bimodal, fsprof, synthetic, write_profile};

#[test]
fn bimodal_profile_has_two_peaks_at_the_right_buckets() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_profile(
        dir.path(),
        "bi.fsprof",
        &synthetic(&[("OP_READ", &bimodal())]),
    );
    let out = fsprof(&["peaks", &p, "--format", "json"]).ok();
    let v: Value = serde_json::from_str(&out).unwrap();
    let peaks = v["ops"][0]["peaks"].as_array().unwrap();
    let got: Vec<(u64, u64, u64, u64)> = peaks
        .iter()
        .map(|p| {
            (
                p["lo"].as_u64().unwrap(),
                p["mode"].as_u64().unwrap(),
                p["hi"].as_u64().unwrap(),
                p["calls"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, [(9, 10, 12, 3040), (20, 21, 23, 169)]);
    // A higher prominence threshold keeps only one path, once it passes what sets the two
    // apart: in calls, the slow peak stands log2(90) + 1 ≈ 7.5 above the empty buckets
    // between (an empty bucket is half a call); in time (calls × 2^b), the fast peak
    // stands ≈ 9 above the valley.
    let count = |prominence: &str| {
        let out = fsprof(&["peaks", &p, "--format", "json", "--prominence", prominence]).ok();
        let v: Value = serde_json::from_str(&out).unwrap();
        v["ops"][0]["peaks"].as_array().unwrap().len()
    };
    assert_eq!(count("7"), 2);
    assert_eq!(count("10"), 1);
}

#[test]
fn peaks_lists_every_peak_unless_asked_for_a_minimum_share() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_profile(
        dir.path(),
        "p.fsprof",
        &synthetic(&[("OP_LOOKUP", &[(9, 3000), (10, 10_000), (15, 1)])]),
    );
    let count = |extra: &[&str]| {
        let mut args = vec!["peaks", p.as_str(), "--format", "json"];
        args.extend_from_slice(extra);
        let v: Value = serde_json::from_str(&fsprof(&args).ok()).unwrap();
        v["ops"][0]["peaks"].as_array().unwrap().len()
    };
    assert_eq!(count(&[]), 2);
    assert_eq!(count(&["--min-peak-share", "1"]), 1);
    let r = fsprof(&["peaks", &p, "--min-peak-share", "101"]);
    assert!(r.one_line_error(2).contains("--min-peak-share"));
}
