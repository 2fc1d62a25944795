//! The `--metrics` endpoint scraped by a real Prometheus (Debian's `prometheus`, started here on
//! free loopback ports, stopped and its data removed on success, failure and panic).

use std::fs;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Command;

use test_support::prometheus::{Prometheus, assert_promtool_passes, free_port, get};

use crate::fixture::{Fixture, Transport};

/// Directories made through the mount: the exact count Prometheus must report.
const MKDIRS: u64 = 37;
/// Names looked up that do not exist.
const MISSING: u64 = 5;

transports!(prometheus_scrapes_exact_counts_and_the_right_median_bucket);

/// A real Prometheus scrapes the endpoint: the count of OP_MKDIR equals the directories made,
/// and `histogram_quantile(0.5, ...)` lands in the bucket the profile says holds the median.
/// The exposition passes `promtool check metrics`.
fn prometheus_scrapes_exact_counts_and_the_right_median_bucket(t: Transport) {
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let Some(f) = Fixture::mounted("metrics", t, &["--metrics", &addr]) else {
        return;
    };
    for i in 0..MKDIRS {
        fs::create_dir(f.m(&format!("d{i}"))).unwrap();
    }
    // Failures counted per errno: each mkdir's LOOKUP of the new name, and these.
    for i in 0..MISSING {
        assert!(fs::metadata(f.m(&format!("missing{i}"))).is_err());
    }
    // The exposition is valid.
    let text = get(&format!("http://{addr}/metrics"));
    assert_promtool_passes(&text);
    let Some(prom) = Prometheus::start(&[&addr], None) else {
        return;
    };
    let count = r#"sum(fsprof_operation_latency_seconds_count{layer="fuse",op="OP_MKDIR"})"#;
    let n = prom.wait_for(count, |v| v >= MKDIRS as f64);
    assert_eq!(n, MKDIRS as f64, "{count}");
    let errors =
        r#"sum(fsprof_operation_errors_total{layer="fuse",op="OP_LOOKUP",errno="ENOENT"})"#;
    let n = prom.wait_for(errors, |v| v >= (MKDIRS + MISSING) as f64);
    assert_eq!(n, (MKDIRS + MISSING) as f64, "{errors}");
    for info in [
        r#"fsprof_build_info{transport="__T__"}"#,
        r#"fsprof_clock_info"#,
        r#"fsprof_layer_buckets_per_octave{layer="fuse"}"#,
    ] {
        let q = info.replace("__T__", t.name());
        assert_eq!(prom.wait_for(&q, |v| v >= 1.0), 1.0, "{q}");
    }
    // The median bucket, from the profile itself.
    let p = f.quiescent_profile();
    let hz = p.cycles_per_sec.expect("a clock rate") as f64;
    let layer = &p.layers[0];
    let op = layer.op("OP_MKDIR").expect("OP_MKDIR recorded");
    let merged = op.merged();
    let mut seen = 0;
    let b = merged
        .iter()
        .position(|&c| {
            seen += c;
            2 * seen >= MKDIRS
        })
        .unwrap();
    let (lo, hi) = layer.resolution.range(b);
    let q = r#"histogram_quantile(0.5, sum by (le) (fsprof_operation_latency_seconds_bucket{layer="fuse",op="OP_MKDIR"}))"#;
    let median = prom.wait_for(q, f64::is_finite);
    assert!(
        lo / hz <= median && median <= hi / hz,
        "median {median} s outside bucket {b}: [{} s, {} s]",
        lo / hz,
        hi / hz
    );
}

transports!(native_histograms_count_exactly_and_classic_scrapers_still_get_text);

/// With `--metrics-native`, a Prometheus started with native histograms (it asks for protobuf)
/// answers `histogram_count` with the exact count from the native histogram in cycles, and one
/// without them (it asks for text) still gets the classic histogram, exact too.
fn native_histograms_count_exactly_and_classic_scrapers_still_get_text(t: Transport) {
    let addr = format!("127.0.0.1:{}", free_port());
    let Some(f) = Fixture::mounted("native", t, &["--metrics", &addr, "--metrics-native"]) else {
        return;
    };
    for i in 0..MKDIRS {
        fs::create_dir(f.m(&format!("d{i}"))).unwrap();
    }
    let Some(native) =
        Prometheus::start_with(&[&addr], None, &["--enable-feature=native-histograms"])
    else {
        return;
    };
    let Some(classic) = Prometheus::start(&[&addr], None) else {
        return;
    };
    let q = r#"histogram_count(sum(fsprof_operation_latency_cycles{layer="fuse",op="OP_MKDIR"}))"#;
    assert_eq!(
        native.wait_for(q, |v| v >= MKDIRS as f64),
        MKDIRS as f64,
        "{q}"
    );
    // The counters come along in the protobuf scrape.
    let calls = r#"sum(fsprof_operation_calls_total{layer="fuse",op="OP_MKDIR"})"#;
    assert_eq!(
        native.wait_for(calls, |v| v >= MKDIRS as f64),
        MKDIRS as f64
    );
    // The native median lies in the bucket the profile holds the median in (in cycles).
    let p = f.quiescent_profile();
    let layer = &p.layers[0];
    let merged = layer.op("OP_MKDIR").unwrap().merged();
    let mut seen = 0;
    let b = merged
        .iter()
        .position(|&c| {
            seen += c;
            2 * seen >= MKDIRS
        })
        .unwrap();
    let (lo, hi) = layer.resolution.range(b);
    let q = r#"histogram_quantile(0.5, sum(fsprof_operation_latency_cycles{layer="fuse",op="OP_MKDIR"}))"#;
    let median = native.wait_for(q, f64::is_finite);
    assert!(
        lo <= median && median <= hi,
        "median {median} outside [{lo}, {hi}]"
    );
    let classic_count =
        r#"sum(fsprof_operation_latency_seconds_count{layer="fuse",op="OP_MKDIR"})"#;
    assert_eq!(
        classic.wait_for(classic_count, |v| v >= MKDIRS as f64),
        MKDIRS as f64
    );
}

/// An address in use is refused in one line
/// with nothing mounted.
#[test]
fn a_busy_address_is_refused_and_nothing_is_mounted() {
    let Some(f) = Fixture::mounted("metrics-busy", Transport::Classic, &[]) else {
        return;
    };
    let held = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = held.local_addr().unwrap().to_string();
    let mnt: PathBuf = f.root.join("second");
    fs::create_dir_all(&mnt).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_fsprof-fuse"))
        .arg(&f.lower)
        .arg(&mnt)
        .args(["--metrics", &addr])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(&addr) && err.lines().count() == 1, "{err}");
    assert!(!fsprof_fuse::mount::is_mount_point(&mnt));
}
