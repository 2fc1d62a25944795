//! A real Prometheus server (Debian's `prometheus`) for tests of the `--metrics` endpoints:
//! started on a free loopback port (never 9090, which a system service may hold), scraping its
//! targets every second, queried through its HTTP API with `curl`; killed and its storage
//! removed when dropped (on success, failure and panic).

use std::fs;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A free loopback port (bound, then released for the program that will listen on it).
pub fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    l.local_addr().unwrap().port()
}

/// The body of `GET url` (with `curl`; at most 5 s).
pub fn get(url: &str) -> String {
    let out = Command::new("curl")
        .args(["-sf", "--max-time", "5", url])
        .output()
        .expect("run curl");
    assert!(out.status.success(), "GET {url} failed");
    String::from_utf8(out.stdout).unwrap()
}

/// Asserts that `promtool check metrics` finds nothing to say about the exposition `text`.
pub fn assert_promtool_passes(text: &str) {
    use std::io::Write as _;
    let mut check = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("promtool");
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
}

/// A running server; see the module.
pub struct Prometheus {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Prometheus {
    /// Scrapes `targets` (`HOST:PORT`) every second, with the recording rules of `rules` if
    /// given. `None` (with a message) where the package is missing, except under `CI=true`,
    /// where that is a failure.
    pub fn start(targets: &[&str], rules: Option<&Path>) -> Option<Prometheus> {
        Prometheus::start_with(targets, rules, &[])
    }

    /// [`Prometheus::start`] with more command-line flags (e.g.
    /// `--enable-feature=native-histograms`).
    pub fn start_with(
        targets: &[&str],
        rules: Option<&Path>,
        flags: &[&str],
    ) -> Option<Prometheus> {
        Prometheus::start_job(targets, rules, flags, "")
    }

    /// [`Prometheus::start_with`] with `job` added to the scrape job's configuration (YAML
    /// lines indented by four spaces, e.g. an `authorization:` block).
    pub fn start_job(
        targets: &[&str],
        rules: Option<&Path>,
        flags: &[&str],
        job: &str,
    ) -> Option<Prometheus> {
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
        let list: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
        let rule_files = rules.map_or(String::new(), |r| {
            format!("rule_files:\n  - '{}'\n", r.display())
        });
        fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n{rule_files}\
                 scrape_configs:\n  - job_name: fsprof\n{job}    static_configs:\n      \
                 - targets: [{}]\n",
                list.join(", ")
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
            .args(flags)
            .stdout(Stdio::null())
            .stderr(fs::File::create(dir.path().join("log")).unwrap())
            .spawn()
            .expect("start prometheus");
        Some(Prometheus { child, port, dir })
    }

    /// The result vector of an instant query (empty on an error or no data).
    pub fn query_all(&self, q: &str) -> Vec<serde_json::Value> {
        let out = Command::new("curl")
            .args(["-sf", "--max-time", "5", "-G"])
            .arg(format!("http://127.0.0.1:{}/api/v1/query", self.port))
            .arg("--data-urlencode")
            .arg(format!("query={q}"))
            .output()
            .expect("run curl");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        v["data"]["result"].as_array().cloned().unwrap_or_default()
    }

    /// The value of an instant query's first sample, if it has one.
    pub fn query(&self, q: &str) -> Option<f64> {
        let r = self.query_all(q);
        r.first()?["value"][1].as_str()?.parse().ok()
    }

    /// Polls `q` until `done` holds for its value (30 s at most; panics with the last value).
    pub fn wait_for(&self, q: &str, done: impl Fn(f64) -> bool) -> f64 {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let v = self.query(q);
            if let Some(v) = v.filter(|&v| done(v)) {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "{q}: still {v:?} after 30 s\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// What the server logged.
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
