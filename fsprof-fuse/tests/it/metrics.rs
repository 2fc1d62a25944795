//! The `--metrics` endpoint scraped by a real Prometheus (Debian's `prometheus`, started here on
//! free loopback ports, stopped and its data removed on success, failure and panic).

use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::fixture::{Fixture, Transport};

/// Directories made through the mount: the exact count Prometheus must report.
const MKDIRS: u64 = 37;

/// A free loopback port (bound, then released for the program that will listen on it).
fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    l.local_addr().unwrap().port()
}

/// A Prometheus server scraping one target every second; killed and its storage removed when
/// dropped.
struct Prometheus {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    fn start(target: &str) -> Option<Prometheus> {
        let bin = Path::new("/usr/bin/prometheus");
        let ci = std::env::var("CI").is_ok_and(|v| v == "true");
        if !bin.exists() {
            assert!(!ci, "prometheus is not installed (.ci/run installs it)");
            eprintln!("SKIPPED: prometheus is not installed");
            return None;
        }
        let dir = tempfile::Builder::new()
            .prefix("fsprof-prometheus-")
            .tempdir()
            .unwrap();
        let config = dir.path().join("prometheus.yml");
        fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: fsprof\n    static_configs:\n      \
                 - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        let port = free_port();
        let child = Command::new(bin)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(fs::File::create(dir.path().join("log")).unwrap())
            .spawn()
            .expect("start prometheus");
        Some(Prometheus {
            child,
            port,
            _dir: dir,
        })
    }

    /// The value of an instant query's first sample, if it has one.
    fn query(&self, q: &str) -> Option<f64> {
        let out = Command::new("curl")
            .args(["-sf", "--max-time", "5", "-G"])
            .arg(format!("http://127.0.0.1:{}/api/v1/query", self.port))
            .arg("--data-urlencode")
            .arg(format!("query={q}"))
            .output()
            .expect("run curl");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        let s = v["data"]["result"][0]["value"][1].as_str()?;
        s.parse().ok()
    }

    /// Polls `q` until `done` holds for its value (30 s at most; panics with the last value).
    fn wait_for(&self, q: &str, done: impl Fn(f64) -> bool) -> f64 {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let v = self.query(q);
            if let Some(v) = v.filter(|&v| done(v)) {
                return v;
            }
            assert!(Instant::now() < deadline, "{q}: still {v:?} after 30 s");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `curl -s URL`.
fn get(url: &str) -> String {
    let out = Command::new("curl")
        .args(["-sf", "--max-time", "5", url])
        .output()
        .expect("run curl");
    assert!(out.status.success(), "GET {url} failed");
    String::from_utf8(out.stdout).unwrap()
}

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
    // The exposition is valid.
    let text = get(&format!("http://{addr}/metrics"));
    let mut check = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("promtool");
    use std::io::Write as _;
    check
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = check.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let Some(prom) = Prometheus::start(&addr) else {
        return;
    };
    let count = r#"sum(fsprof_operation_latency_seconds_count{layer="fuse",op="OP_MKDIR"})"#;
    let n = prom.wait_for(count, |v| v >= MKDIRS as f64);
    assert_eq!(n, MKDIRS as f64, "{count}");
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
