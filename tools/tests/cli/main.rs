//! Integration tests of the `fsprof` binary: golden outputs, synthetic profiles of known
//! structure, malformed inputs, figures. One test binary; helpers in `util`.

mod util;

use serde_json::Value;
use util::{
    fsprof, fsprof_with_input, fsprof_without_no_color, golden, input, shifted, synthetic,
    write_profile,
};

// ---------------------------------------------------------------------------------------------
// Golden outputs on the fixed profiles of tests/golden (FSPROF_BLESS=1 regenerates them).

/// Asserts that every line of `out` fits in `width` columns.
#[track_caller]
fn assert_fits(out: &str, width: usize) {
    for line in out.lines() {
        assert!(
            line.chars().count() <= width,
            "wider than {width} columns ({}): {line}",
            line.chars().count()
        );
    }
}

#[test]
fn golden_show() {
    let out = fsprof(&["show", "sample.fsprof", "--color", "never"]).ok();
    golden("show.txt", &out);
    assert_fits(&out, 80);
}

#[test]
fn golden_show_lower_layer_ascii_top() {
    let out = fsprof(&[
        "show",
        "sample.fsprof",
        "--color",
        "never",
        "--layer",
        "lower",
        "--top",
        "2",
        "--ascii",
    ])
    .ok();
    golden("show-lower-top2-ascii.txt", &out);
    assert_fits(&out, 80);
}

#[test]
fn golden_show_epochs() {
    let out = fsprof(&["show", "timelapse.fsprof", "--color", "never", "--epochs"]).ok();
    golden("show-epochs.txt", &out);
    assert_fits(&out, 80);
}

#[test]
fn golden_show_original_tools_profile() {
    // The thesis's §5.8 sample: no header, 29 buckets, 8 epochs, no clock rate.
    let out = fsprof(&["show", "original.fsprof", "--color", "never"]).ok();
    golden("show-original.txt", &out);
    assert!(out.contains("clock rate unknown"));
    assert_fits(&out, 80);
}

#[test]
fn epochs_matrix_of_a_wide_resolution_8_profile_fits_the_width() {
    // Resolution 8, calls from bucket 0 to 511 in 3 epochs: one column per bucket would be
    // 512 columns. Columns merge 2, 4, 8... buckets (powers of two, so octaves stay whole)
    // until the matrix fits, and hold the sum of their buckets.
    let dir = tempfile::tempdir().unwrap();
    let mut l = profile_store::Layer::new("fuse", profile_store::Resolution::new(8).unwrap());
    l.epochs = 3;
    l.epoch_cycles = 1 << 32;
    let mut o = profile_store::OpProfile::new("OP_READ", 512, 3);
    for (e, b, n) in [
        (0, 0, 5),
        (0, 7, 3),
        (1, 8, 1),
        (1, 100, 40),
        (2, 511, 2),
        (2, 510, 7),
    ] {
        o.epochs[e][b] = n;
        o.count += n;
        o.total += n * profile_store::Resolution::new(8)
            .unwrap()
            .lowest(b)
            .unwrap();
    }
    l.ops.push(o);
    let mut p = synthetic(&[]);
    p.layers = vec![l];
    let path = write_profile(dir.path(), "r8.fsprof", &p);
    for (width, per) in [(80usize, 8usize), (120, 8), (60, 16), (40, 32)] {
        let w = width.to_string();
        let out = fsprof(&["show", &path, "--epochs", "--width", &w, "--color", "never"]).ok();
        let rows: Vec<&str> = out.lines().filter(|l| l.ends_with('|')).collect();
        assert_eq!(rows.len(), 3, "{out}");
        for row in &rows {
            assert_fits(row, width);
            let cells = &row[row.find('|').unwrap() + 1..row.len() - 1];
            assert_eq!(cells.chars().count(), 512 / per, "width {width}: {row}");
        }
        // Epoch 0: buckets 0 and 7 share the first column; epoch 1: 8 and 100 are apart.
        let first = |row: &str| row[row.find('|').unwrap() + 1..].chars().next().unwrap();
        assert_ne!(first(rows[0]), ' ');
        assert!(out.contains(&format!("a column is {per} buckets")), "{out}");
        if width >= 80 {
            assert_fits(&out, width);
        }
    }
    // Wide enough for one column per bucket: no merging, no note.
    let out = fsprof(&[
        "show", &path, "--epochs", "--width", "600", "--color", "never",
    ])
    .ok();
    assert!(!out.contains("a column is"));
    assert!(
        out.lines()
            .any(|l| l.ends_with('|') && l.len() == 14 + 512 + 1)
    );
}

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

// ---------------------------------------------------------------------------------------------
// Synthetic profiles with known structure.

const FAST: &[(usize, u64)] = &[(9, 300), (10, 2000), (11, 700), (12, 40)];
const SLOW: &[(usize, u64)] = &[(20, 15), (21, 90), (22, 60), (23, 4)];

fn bimodal() -> Vec<(usize, u64)> {
    FAST.iter().chain(SLOW).copied().collect()
}

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
    // A higher prominence threshold keeps only the dominant path... but the slow peak is
    // log2(91) ≈ 6.5 high: it stays until the threshold passes that.
    let out = fsprof(&["peaks", &p, "--format", "json", "--prominence", "7"]).ok();
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["ops"][0]["peaks"].as_array().unwrap().len(), 1);
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
    // With every peak counted (the old behaviour) the stray call is a new peak.
    let all = diff_findings(&a, &stray, &["--min-peak-share", "0"]);
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

// ---------------------------------------------------------------------------------------------
// Inputs: standard input, mount points, JSON.

#[test]
fn standard_input_and_json_and_mount_point_read_alike() {
    let text = std::fs::read(input("sample.fsprof")).unwrap();
    let from_file = fsprof(&["summary", &input("sample.fsprof")]).ok();
    let from_stdin = fsprof_with_input(&["summary", "-"], &text).ok();
    assert_eq!(from_file, from_stdin);
    // JSON through export, then a directory holding it as .fsprof.json (a mount point).
    let json = fsprof(&["export", &input("sample.fsprof"), "--format", "json"]).ok();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(".fsprof.json"), &json).unwrap();
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
fn export_round_trips_and_prometheus_needs_a_clock() {
    let text = std::fs::read_to_string(input("sample.fsprof")).unwrap();
    let back = fsprof(&["export", &input("sample.fsprof"), "--format", "text"]).ok();
    assert_eq!(back, text);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.prom");
    fsprof(&[
        "export",
        &input("sample.fsprof"),
        "--format",
        "prometheus",
        "-o",
        out.to_str().unwrap(),
    ])
    .ok();
    let prom = std::fs::read_to_string(&out).unwrap();
    assert!(prom.contains("# TYPE fsprof_operation_latency_seconds histogram"));
    assert!(
        prom.contains(
            "fsprof_operation_latency_seconds_count{layer=\"lower\",op=\"OP_READ\"} 9034"
        )
    );
    let r = fsprof(&[
        "export",
        &input("original.fsprof"),
        "--format",
        "prometheus",
    ]);
    let line = r.one_line_error(2);
    assert!(line.contains("--cycles-per-sec"), "{line}");
    let ok = fsprof(&[
        "export",
        &input("original.fsprof"),
        "--format",
        "prometheus",
        "--cycles-per-sec",
        "1700000000",
    ])
    .ok();
    assert!(ok.contains("op=\"OP_WRITE_SUPER\",le=\"+Inf\"} 14"));
    let csv = fsprof(&["export", &input("timelapse.fsprof"), "--format", "csv"]).ok();
    assert!(csv.starts_with("layer,operation,epoch,bucket,"));
}

#[test]
fn colour_only_when_asked_or_on_a_terminal() {
    // NO_COLOR unset: a pipe gets no colour because it is not a terminal, nothing else.
    let plain = fsprof_without_no_color(&["show", &input("sample.fsprof"), "--top", "1"]).ok();
    assert!(!plain.contains('\x1b'), "a pipe is not a terminal");
    let plain = fsprof_without_no_color(&[
        "show",
        &input("sample.fsprof"),
        "--top",
        "1",
        "--color",
        "auto",
    ])
    .ok();
    assert!(!plain.contains('\x1b'), "a pipe is not a terminal");
    let coloured = fsprof(&[
        "show",
        &input("sample.fsprof"),
        "--top",
        "1",
        "--color",
        "always",
    ])
    .ok();
    assert!(coloured.contains("\x1b[36m"));
}

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

// ---------------------------------------------------------------------------------------------
// Errors: one line, non-zero, never a panic.

/// Malformed inputs and the text their one-line error must contain.
fn malformed(dir: &std::path::Path) -> Vec<(String, &'static str)> {
    let mut v = Vec::new();
    let mut put = |name: &str, body: &[u8], expect: &'static str| {
        let p = dir.join(name);
        std::fs::write(&p, body).unwrap();
        v.push((p.to_str().unwrap().to_string(), expect));
    };
    let good = std::fs::read_to_string(input("sample.fsprof")).unwrap();
    // A bucket line with one number too few, on line 5.
    let mut lines: Vec<String> = good.lines().map(str::to_string).collect();
    lines[4] = lines[4].rsplit_once(' ').unwrap().0.to_string();
    put(
        "short.fsprof",
        (lines.join("\n") + "\n").as_bytes(),
        "line 5",
    );
    put("empty.fsprof", b"", "line 1");
    put("garbage.fsprof", b"\x00\xff\xfe binary\n", "line 1");
    put(
        "version.fsprof",
        b"# fsprof-profile v9\n# clock=tsc\n",
        "unsupported profile version",
    );
    put("brace.json", b"{", "line 1");
    let json = fsprof(&["export", &input("sample.fsprof"), "--format", "json"]).ok();
    put("cut.json", &json.as_bytes()[..json.len() / 2], "JSON");
    put(
        "wrongfmt.json",
        br#"{"format":"other","version":1,"layers":[]}"#,
        "format",
    );
    v.push((
        dir.join("missing.fsprof").to_str().unwrap().to_string(),
        "No such file",
    ));
    let empty_dir = dir.join("not-a-mount");
    std::fs::create_dir(&empty_dir).unwrap();
    v.push((empty_dir.to_str().unwrap().to_string(), ".fsprof.json"));
    v
}

#[test]
fn every_subcommand_reports_malformed_input_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let good = input("sample.fsprof");
    let svg = dir.path().join("out.svg");
    let svg = svg.to_str().unwrap();
    for (bad, expect) in malformed(dir.path()) {
        let cases: Vec<Vec<&str>> = vec![
            vec!["show", &bad],
            vec!["show", &bad, "--epochs"],
            vec!["summary", &bad],
            vec!["check", &bad],
            vec!["peaks", &bad],
            vec!["compare", &bad, &good],
            vec!["compare", &good, &bad],
            vec!["diff", &bad, &good],
            vec!["diff", &good, &bad],
            vec!["plot", &bad, "-o", svg],
            vec!["plot", &good, &bad, "-o", svg],
            vec!["export", &bad, "--format", "json"],
        ];
        for args in cases {
            let r = fsprof(&args);
            let line = r.one_line_error(2);
            assert!(line.contains(bad.as_str()), "{args:?}: {line}");
            assert!(line.contains(expect), "{args:?}: want {expect:?} in {line}");
            assert!(r.stdout.is_empty(), "{args:?}: {}", r.stdout);
        }
    }
    // Standard input is named '-'.
    let r = fsprof_with_input(&["show", "-"], b"OP_READ 1 2\n 0 x\n");
    assert_eq!(
        r.one_line_error(2),
        "fsprof: -: line 2: expected a bucket count as a decimal number, found 'x'"
    );
}

#[test]
fn usage_errors_are_one_line() {
    let p = input("sample.fsprof");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["show", &p, "--op", "OP_NOPE"], "--op OP_NOPE"),
        (vec!["show", &p, "--layer", "nope"], "--layer nope"),
        (
            vec!["compare", &p, &p, "--method", "nope"],
            "unknown method",
        ),
        (vec!["summary", &p, "--format", "xml"], "unknown format"),
        (
            vec!["plot", &p, "--kind", "overlay", "-o", "/tmp/x.svg"],
            "needs two profiles",
        ),
        (vec!["diff", &p, &p, "--threshold", "300"], "--threshold"),
        (vec!["peaks"], "required"),
        (vec!["nope"], "unrecognized subcommand"),
        (vec!["show", &p, "--bogus"], "unexpected argument"),
        // A clock rate of 0 would divide every latency by zero.
        (
            vec!["show", &p, "--cycles-per-sec", "0"],
            "--cycles-per-sec",
        ),
        (
            vec![
                "export",
                &p,
                "--format",
                "prometheus",
                "--cycles-per-sec",
                "0",
            ],
            "0 is not in 1..",
        ),
    ];
    for (args, expect) in cases {
        let r = fsprof(&args);
        let line = r.one_line_error(2);
        assert!(line.contains(expect), "{args:?}: {line}");
    }
    // Writing where one cannot.
    let r = fsprof(&["plot", &p, "-o", "/nonexistent-dir/x.svg"]);
    assert!(r.one_line_error(2).contains("/nonexistent-dir/x.svg"));
}

#[test]
fn errors_naming_a_newline_stay_on_one_line() {
    let p = input("sample.fsprof");
    // An operation name with a newline in it.
    let r = fsprof(&["show", &p, "--op", "a\nb"]);
    assert!(
        r.one_line_error(2).contains("--op OP_A\\nB"),
        "{}",
        r.stderr
    );
    // A file name with a newline: missing, then present but malformed, then as an output.
    let dir = tempfile::tempdir().unwrap();
    let odd = dir.path().join("two\nlines.fsprof");
    let odd_s = odd.to_str().unwrap();
    let r = fsprof(&["summary", odd_s]);
    assert!(
        r.one_line_error(2).contains("two\\nlines.fsprof"),
        "{}",
        r.stderr
    );
    std::fs::write(&odd, "OP_READ 1 2\n 0 x\n").unwrap();
    for args in [
        vec!["summary", odd_s],
        vec!["diff", odd_s, &p],
        vec!["check", odd_s],
    ] {
        let r = fsprof(&args);
        assert!(
            r.one_line_error(2).contains("two\\nlines.fsprof: line 2"),
            "{}",
            r.stderr
        );
    }
    let out = dir.path().join("fig\nure.svg");
    let r = fsprof(&[
        "plot",
        &p,
        "-o",
        &format!("{}/no-such-dir/x\ny.svg", dir.path().display()),
    ]);
    assert!(r.one_line_error(2).contains("x\\ny.svg"), "{}", r.stderr);
    fsprof(&["plot", &p, "-o", out.to_str().unwrap()]).ok();
    assert!(out.exists());
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

// ---------------------------------------------------------------------------------------------
// Figures.

fn rects<'a>(doc: &'a roxmltree::Document, class: &str) -> Vec<roxmltree::Node<'a, 'a>> {
    doc.descendants()
        .filter(|n| n.has_tag_name("rect") && n.attribute("class") == Some(class))
        .collect()
}

#[test]
fn plots_are_well_formed_svg_with_one_bar_per_bucket() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.svg");
    let out = path.to_str().unwrap();
    let sample = input("sample.fsprof");
    // Histogram of three operations: bars = non-empty buckets of those operations.
    fsprof(&["plot", &sample, "--top", "3", "-o", out]).ok();
    let svg = std::fs::read_to_string(&path).unwrap();
    let doc = roxmltree::Document::parse(&svg).expect("well-formed SVG");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let p = profile_store::parse_any(std::fs::read(&sample).unwrap().as_slice()).unwrap();
    let mut ops: Vec<_> = p.layers[0].ops.iter().collect();
    ops.sort_by_key(|o| std::cmp::Reverse(o.total));
    let want: usize = ops[..3]
        .iter()
        .map(|o| o.merged().iter().filter(|&&c| c > 0).count())
        .sum();
    assert_eq!(rects(&doc, "bar").len(), want);
    // Every bar has a tooltip naming its bucket.
    assert!(rects(&doc, "bar").iter().all(|r| {
        r.first_element_child()
            .is_some_and(|t| t.text().unwrap_or("").starts_with("bucket "))
    }));
    // Both x scales: bucket numbers and latencies.
    let texts: Vec<&str> = doc.descendants().filter_map(|n| n.text()).collect();
    assert!(texts.contains(&"bucket") && texts.contains(&"latency"));
    assert!(texts.iter().any(|t| t.ends_with("us")));

    // Latency figure of one operation.
    fsprof(&[
        "plot", &sample, "--kind", "latency", "--op", "write", "-o", out,
    ])
    .ok();
    let svg = std::fs::read_to_string(&path).unwrap();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    assert_eq!(rects(&doc, "bar").len(), 7);

    // Heat map: one cell per non-empty (epoch, bucket).
    fsprof(&[
        "plot",
        &input("timelapse.fsprof"),
        "--kind",
        "heatmap",
        "--op",
        "lookup",
        "-o",
        out,
    ])
    .ok();
    let svg = std::fs::read_to_string(&path).unwrap();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let t = profile_store::parse_any(std::fs::read(input("timelapse.fsprof")).unwrap().as_slice())
        .unwrap();
    let cells = t.layers[0]
        .op("OP_LOOKUP")
        .unwrap()
        .epochs
        .iter()
        .flatten()
        .filter(|&&c| c > 0)
        .count();
    assert_eq!(rects(&doc, "cell").len(), cells);

    // Overlay: A's and B's bars.
    let b = input("sample-write-contention.fsprof");
    fsprof(&["plot", &sample, &b, "--op", "write", "-o", out]).ok();
    let svg = std::fs::read_to_string(&path).unwrap();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    assert_eq!(rects(&doc, "bar a").len(), 7);
    assert_eq!(rects(&doc, "bar b").len(), 10);

    // SVG on standard output.
    let svg = fsprof(&["plot", &input("original.fsprof"), "-o", "-"]).ok();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    assert_eq!(rects(&doc, "bar").len(), 3);
}

// ---------------------------------------------------------------------------------------------
// Robustness: whatever parses is shown, scored, plotted and exported without a panic.

#[test]
fn mutated_profiles_never_panic() {
    use tools::units::{Buckets, Clock};
    use tools::{check, compare, diff, export, hist::Histogram, peaks, plot, show, summary};

    let base = std::fs::read_to_string(input("sample.fsprof")).unwrap();
    let reference = profile_store::parse_any(base.as_bytes()).unwrap();
    let tokens: Vec<&str> = base.split(' ').collect();
    let replacements = [
        "0",
        "1",
        "18446744073709551615",
        "9223372036854775808",
        "2",
        "resolution=8",
        "buckets=128",
        "epochs=2",
        "cycles_per_sec=1",
        "epoch_cycles=1",
        "max_epochs_reached=true",
    ];
    // A fixed linear congruential sequence: the same mutations on every run.
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = |n: usize| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (seed >> 33) as usize % n
    };
    let mut parsed = 0;
    for _ in 0..400 {
        let mut t: Vec<String> = tokens.iter().map(|s| s.to_string()).collect();
        for _ in 0..1 + next(3) {
            let i = next(t.len());
            let keep_newline = t[i].ends_with('\n');
            let mut r = replacements[next(replacements.len())].to_string();
            if keep_newline {
                r.push('\n');
            }
            t[i] = r;
        }
        let text = t.join(" ");
        let Ok(p) = profile_store::parse_any(text.as_bytes()) else {
            continue;
        };
        parsed += 1;
        let clock = Clock(p.cycles_per_sec);
        let _ = check::check(&p, 0);
        for l in &p.layers {
            let ops: Vec<_> = l.ops.iter().collect();
            let _ = show::render(l, &ops, clock, false, &show::ShowStyle::default());
            let _ = show::render(l, &ops, clock, true, &show::ShowStyle::default());
            let _ = summary::render(&summary::summarize(l, clock), summary::TableFormat::Json);
            let _ = plot::figures::histogram(l, &ops, clock, "t");
            let _ = plot::figures::latency(l, &ops, clock, "t");
            let geo = Buckets::of(l);
            for o in &ops {
                let _ = plot::figures::heatmap(l, o, clock, "t");
                let h = Histogram::of(o, geo);
                let _ = peaks::find(&h, 1.0);
            }
            if let Some(r) = reference
                .layer(&l.name)
                .filter(|r| r.resolution == l.resolution)
            {
                let report = diff::diff(r, l, &diff::DiffConfig::default());
                let mut s = String::new();
                diff::render(&report, clock, 10, &mut s);
                for o in &ops {
                    let other = r.op(&o.name).map_or_else(
                        || Histogram::empty(Buckets::of(r)),
                        |x| Histogram::of(x, Buckets::of(r)),
                    );
                    let pair = compare::Pair::new(other, Histogram::of(o, geo));
                    for m in compare::Method::ALL {
                        let d = compare::score(m, &pair, &compare::GroupConfig::default()).d;
                        assert!((0.0..=100.0).contains(&d), "{m}: {d}");
                    }
                }
            }
        }
        for f in [
            export::ExportFormat::Text,
            export::ExportFormat::Json,
            export::ExportFormat::Csv,
            export::ExportFormat::Prometheus,
        ] {
            let _ = export::export(&p, f, "x");
        }
    }
    assert!(
        parsed > 100,
        "only {parsed} mutations parsed: the test exercises too little"
    );
}
