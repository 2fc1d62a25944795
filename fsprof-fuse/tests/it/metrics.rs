//! The `--metrics` endpoint scraped by a real Prometheus (Debian's `prometheus`, started here on
//! free loopback ports, stopped and its data removed on success, failure and panic), and
//! attacked by hostile clients ([`test_support::attack`]) while the mount serves a workload.

use std::fs;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use test_support::attack::{self, Attack, Scale};
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
    assert!(!fsprof_fuse::daemon::mount::is_mount_point(&mnt));
}

/// Mounts with `--metrics` on a free loopback port over transport `t`; the attack target.
fn attacked(name: &str, t: Transport) -> Option<(Fixture, attack::Target)> {
    let addr = format!("127.0.0.1:{}", free_port());
    let f = Fixture::mounted(name, t, &["--metrics", &addr])?;
    let target = attack::Target {
        addr: addr.parse().unwrap(),
        pid: f.pid(),
        dir: f.m("work"),
    };
    Some((f, target))
}

/// One attack of the full set, on the classic transport (the endpoint code is shared by both
/// transports and both daemons, which get the smoke tests below).
fn full_attack(a: Attack) {
    let Some((mut f, target)) = attacked("attack", Transport::Classic) else {
        return;
    };
    attack::run(&target, a, Scale::Full);
    assert_eq!(f.unmount(), Some(0), "{}", f.log_text());
}

/// Regression: `Content-Length: 99999999999999` on a GET made tiny_http allocate the body, and
/// the daemon aborted with the mount left dead.
#[test]
fn a_huge_declared_body_is_refused_unread_and_the_mount_lives() {
    full_attack(Attack::BodyLength);
}

/// Regression: a header line that never ended grew the daemon by every byte sent.
#[test]
fn an_endless_header_line_is_cut_off() {
    full_attack(Attack::EndlessHeader);
}

/// Regression: each half-open connection cost a thread and two descriptors (about 10,100 took
/// every descriptor of the daemon, and opens through the mount failed with EMFILE).
#[test]
fn eight_thousand_half_open_connections_cost_no_thread_and_a_few_descriptors() {
    full_attack(Attack::HalfOpen);
}

/// Regression: one client pipelining 2,000 GETs without reading blocked the endpoint's one
/// thread, and every other scrape timed out.
#[test]
fn a_client_that_pipelines_and_never_reads_holds_up_no_other_scrape() {
    full_attack(Attack::Pipelining);
}

/// Each attack, smaller, on the io_uring transport.
#[test]
fn every_attack_in_small_on_uring() {
    let Some((mut f, target)) = attacked("attack-uring", Transport::Uring) else {
        return;
    };
    for a in attack::ALL {
        attack::run(&target, a, Scale::Smoke);
    }
    assert_eq!(f.unmount(), Some(0), "{}", f.log_text());
}

/// Regression: tiny_http's accept thread ended on EMFILE, and the endpoint refused every
/// connection after the file system had its descriptors back. Now the failed accept is logged and retried: with
/// the daemon out of descriptors (files held open through the mount under a small limit), a
/// waiting connection gets the log line; once the files are closed, a scrape succeeds.
#[test]
fn accept_failures_are_logged_and_retried_and_never_end_the_endpoint() {
    let Some(mut f) = Fixture::new("metrics-emfile", Transport::Classic) else {
        return;
    };
    let addr = format!("127.0.0.1:{}", free_port());
    f.mount_with(&["prlimit", "--nofile=128:128"], &["--metrics", &addr]);
    let sock: std::net::SocketAddr = addr.parse().unwrap();
    attack::wait_for_scrape(sock, Duration::from_secs(30));
    // Hold files open through the mount until the daemon has no descriptor left.
    let mut held = Vec::new();
    let err = loop {
        assert!(held.len() < 10_000, "no EMFILE under a limit of 128");
        match fs::File::create(f.m(&format!("held{}", held.len()))) {
            Ok(file) => held.push(file),
            Err(e) => break e,
        }
    };
    assert_eq!(err.raw_os_error(), Some(libc::EMFILE), "{err}");
    // A connection now waits in the kernel's queue; each accept of it fails.
    let waiting = attack::connect(sock).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let accept_failed = |log: &str| {
        log.lines()
            .any(|l| l.contains("accept") && l.contains("Too many open files"))
    };
    while !accept_failed(&f.log_text()) {
        assert!(
            Instant::now() < deadline,
            "no accept failure logged:\n{}",
            f.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let n = held.len();
    drop(held);
    drop(waiting);
    let took = attack::wait_for_scrape(sock, Duration::from_secs(30));
    eprintln!(
        "out of descriptors after {n} open files; a scrape answered {} ms after they were closed",
        took.as_millis()
    );
    // The rate limit: a handful of lines, not one per retry (every 100 ms).
    let lines = f.log_text().matches("metrics: accept:").count();
    assert!((1..=5).contains(&lines), "{lines} lines:\n{}", f.log_text());
    assert_eq!(f.unmount(), Some(0), "{}", f.log_text());
}
