//! `fsprof export`: round trips and Prometheus.

use crate::util::{fsprof, input};

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
