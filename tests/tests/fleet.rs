//! Live and fleet-wide: `fsprof merge` of two mounts (one read over its `--metrics` endpoint),
//! `fsprof top` in batch mode and under tmux, and the shipped Grafana dashboard's queries
//! against a real Prometheus with the shipped recording rules.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use profile_store::Profile;
use test_support::Daemon;
use test_support::prometheus::{Prometheus, free_port};
use tests::{Mounted, bin, run};

fn os(s: &str) -> &OsStr {
    OsStr::new(s)
}

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel)
}

fn read(path: &Path) -> Profile {
    profile_store::parse_any(&std::fs::read(path).unwrap()).unwrap()
}

/// Two machines (two mounts), one read over HTTP: the merge is the exact sum, and `fsprof
/// compare` of the merge against each shows each one's share.
#[test]
fn two_machines_merge_exactly_and_compare_shows_their_shares() {
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let Some(a) = Mounted::start("merge-a", "fsprof-fuse", &["--metrics", &addr]) else {
        return;
    };
    let Some(b) = Mounted::start("merge-b", "fsprof-fuse", &[]) else {
        return;
    };
    for i in 0..10 {
        std::fs::create_dir(a.mnt.join(format!("a{i}"))).unwrap();
    }
    for i in 0..30 {
        std::fs::create_dir(b.mnt.join(format!("b{i}"))).unwrap();
    }
    let url = format!("http://{addr}/metrics");
    let all = a.root.join("all.fsprof");
    let (code, out, err) = run(
        "fsprof",
        &[
            os("merge"),
            os(&url),
            b.mnt.as_os_str(),
            os("-o"),
            all.as_os_str(),
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("merged 2 profiles"), "{out}");
    // The endpoint reads back bucket for bucket as the mount's own profile.
    let a_url = a.root.join("a-url.fsprof");
    let (code, _, err) = run(
        "fsprof",
        &[
            os("export"),
            os(&url),
            os("--format"),
            os("text"),
            os("-o"),
            a_url.as_os_str(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    let a_mnt = a.root.join("a-mnt.fsprof");
    let (code, _, err) = run(
        "fsprof",
        &[
            os("export"),
            a.mnt.as_os_str(),
            os("--format"),
            os("text"),
            os("-o"),
            a_mnt.as_os_str(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    let b_mnt = a.root.join("b-mnt.fsprof");
    let (code, _, err) = run(
        "fsprof",
        &[
            os("export"),
            b.mnt.as_os_str(),
            os("--format"),
            os("text"),
            os("-o"),
            b_mnt.as_os_str(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    let (pa, pb, pall) = (read(&a_url), read(&b_mnt), read(&all));
    let mk = |p: &Profile| p.layer("fuse").unwrap().op("OP_MKDIR").cloned().unwrap();
    assert_eq!(
        mk(&pa).merged(),
        mk(&read(&a_mnt)).merged(),
        "read over HTTP"
    );
    assert_eq!(mk(&pa).count, 10);
    assert_eq!(mk(&pall).count, 40);
    let sum: Vec<u64> = mk(&pa)
        .merged()
        .iter()
        .zip(mk(&pb).merged())
        .map(|(x, y)| x + y)
        .collect();
    assert_eq!(mk(&pall).merged(), sum, "bucket by bucket");
    // Shares: TOTOPS of the merge against A is 75 (A made 10 of 40), against B 25.
    for (other, want) in [(url.as_str(), "75.0"), (b.mnt.to_str().unwrap(), "25.0")] {
        let (code, out, err) = run(
            "fsprof",
            &[
                os("compare"),
                all.as_os_str(),
                os(other),
                os("--method"),
                os("totops"),
                os("--op"),
                os("mkdir"),
            ],
        );
        assert_eq!(code, 0, "{err}");
        let line = out
            .lines()
            .find(|l| l.starts_with("OP_MKDIR"))
            .unwrap_or("");
        assert!(line.ends_with(want), "{other}: {out}");
    }
    // `fsprof diff` reads the endpoint too: from A alone to the merge, MKDIR's calls went
    // from 10 to 40.
    let (code, out, err) = run(
        "fsprof",
        &[
            os("diff"),
            os(&url),
            all.as_os_str(),
            os("--layer"),
            os("fuse"),
            os("--format"),
            os("json"),
        ],
    );
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let mkdir = doc["layers"][0]["report"]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["op"] == "OP_MKDIR")
        .unwrap_or_else(|| panic!("{out}"));
    let calls = &mkdir["reasons"][0];
    assert_eq!(
        (&calls["kind"], &calls["a"], &calls["b"]),
        (&"calls".into(), &10.into(), &40.into()),
        "{out}"
    );
}

/// Reads `fsprof top -b` frames: the OP_MKDIR calls of each, as they come.
struct Frames {
    child: Child,
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
}

impl Frames {
    fn start(input: &str) -> Frames {
        let mut child = Command::new(bin("fsprof"))
            .args(["top", "-b", "--interval", "300ms", input])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Frames { child, lines }
    }

    /// The OP_MKDIR calls of the next frame (0 when the frame has no such row).
    fn next(&mut self) -> u64 {
        let mut mkdirs = 0;
        let mut started = false;
        for line in self.lines.by_ref() {
            let line = line.unwrap();
            if line.starts_with("fsprof top - ") {
                started = true;
            } else if started && line.is_empty() {
                return mkdirs;
            } else if let Some(rest) = line.strip_prefix("OP_MKDIR ") {
                mkdirs = rest.split_whitespace().next().unwrap().parse().unwrap();
            }
        }
        panic!("fsprof top ended");
    }
}

impl Drop for Frames {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `fsprof top -b` counts every call in exactly one interval: directories made after the first
/// frame add up, over the frames that follow, to exactly their number; later frames show none.
#[test]
fn top_in_batch_mode_counts_every_call_once() {
    let Some(m) = Mounted::start("top-batch", "fsprof-fuse", &[]) else {
        return;
    };
    let mut frames = Frames::start(m.mnt.to_str().unwrap());
    assert_eq!(frames.next(), 0);
    for round in 0..3 {
        for i in 0..7 {
            std::fs::create_dir(m.mnt.join(format!("r{round}-{i}"))).unwrap();
        }
        let deadline = Instant::now() + test_support::PATIENCE;
        let mut seen = 0;
        while seen < 7 {
            assert!(Instant::now() < deadline, "round {round}: {seen} of 7 seen");
            seen += frames.next();
        }
        assert_eq!(seen, 7, "round {round}");
    }
    assert_eq!(frames.next() + frames.next(), 0);
}

/// With `--by` and `--hot-files`, `fsprof top` also shows who made each interval's calls and the
/// hottest files: a reader's uid, and the file it reads.
#[test]
fn top_shows_the_callers_and_the_hottest_files() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let Some(m) = Mounted::start("top-who", "fsprof-fuse", &["--by", "uid", "--hot-files=10"])
    else {
        return;
    };
    std::fs::write(m.lower.join("hot"), vec![3u8; 100_000]).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (stop, file) = (stop.clone(), m.mnt.join("hot"));
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::fs::read(&file).unwrap();
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    // Two frames, until the second (the first interval) shows the reader: the reader reads
    // every 10 ms, but a machine that stalls it (or the daemon) for the whole 300 ms interval
    // leaves a frame without its calls; that is a frame to try again, not a failure.
    let uid = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(m.lower.join("hot")).unwrap());
    let mut text = String::new();
    // The reader's uid (ours, the owner of the file this process made) and its file.
    let shown = |text: &str| {
        let last = text.rsplit("fsprof top - ").next().unwrap();
        let who = last.split("WHO").nth(1);
        let hot = last.split("HOTTEST FILES").nth(1);
        who.is_some_and(|w| w.lines().any(|l| l.starts_with(&format!("uid:{uid} "))))
            && hot.is_some_and(|h| h.lines().any(|l| l.ends_with(" /hot")))
    };
    let deadline = Instant::now() + test_support::PATIENCE;
    while text.is_empty() || !shown(&text) {
        assert!(Instant::now() < deadline, "the reader never shown: {text}");
        let out = Command::new(bin("fsprof"))
            .args(["top", "-b", "-n", "2", "--interval", "300ms"])
            .arg(&m.mnt)
            .output()
            .unwrap();
        text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(text.matches("fsprof top - ").count(), 2, "{text}");
    }
    stop.store(true, Ordering::Relaxed);
    reader.join().unwrap();
}

/// A tmux session on a private server, killed when dropped.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn cmd(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux")
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.cmd(&["capture-pane", "-p", "-t", "top"]).stdout).into_owned()
    }

    fn wait_for(&self, what: &str) -> String {
        let deadline = Instant::now() + test_support::PATIENCE;
        loop {
            let s = self.screen();
            if s.contains(what) {
                return s;
            }
            assert!(Instant::now() < deadline, "no '{what}' on the screen:\n{s}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
    }
}

/// Interactive `fsprof top` in a terminal (tmux): it draws, a key changes the sort, `q` quits.
#[test]
fn top_in_a_terminal_sorts_by_key_and_quits_on_q() {
    if !Path::new("/usr/bin/tmux").exists() {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true");
        assert!(!ci, "tmux is not installed (.ci/run installs it)");
        eprintln!("SKIPPED: tmux is not installed");
        return;
    }
    let Some(m) = Mounted::start("top-tty", "fsprof-fuse", &[]) else {
        return;
    };
    std::fs::create_dir(m.mnt.join("d")).unwrap();
    let done = m.root.join("exited");
    let tmux = Tmux {
        socket: format!("fsprof-test-{}", std::process::id()),
    };
    let script = format!(
        "{} top --interval 200ms {}; echo $? > {}",
        bin("fsprof").display(),
        m.mnt.display(),
        done.display()
    );
    let out = tmux.cmd(&[
        "new-session",
        "-d",
        "-s",
        "top",
        "-x",
        "150",
        "-y",
        "40",
        &script,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = tmux.wait_for("sorted by time at stake");
    assert!(s.contains("OPERATION") && s.contains("q quit"), "{s}");
    tmux.cmd(&["send-keys", "-t", "top", "c"]);
    tmux.wait_for("sorted by calls");
    tmux.cmd(&["send-keys", "-t", "top", "n"]);
    tmux.wait_for("sorted by name");
    tmux.cmd(&["send-keys", "-t", "top", "q"]);
    let deadline = Instant::now() + test_support::PATIENCE;
    while !done.exists() {
        assert!(Instant::now() < deadline, "fsprof top did not quit on q");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(std::fs::read_to_string(&done).unwrap().trim(), "0");
}

/// Every PromQL expression in `dashboards/fsprof.json` (with its variables given values), and
/// every variable's query, returns data from a real Prometheus that scrapes an fsprof-fuse
/// mount and a raif mount under load, with the shipped recording rules.
#[test]
fn every_dashboard_query_returns_data() {
    let rules = repo("dashboards/fsprof-rules.yml");
    let check = Command::new("promtool")
        .arg("check")
        .arg("rules")
        .arg(&rules)
        .output();
    if let Ok(c) = &check {
        assert!(c.status.success(), "{}", String::from_utf8_lossy(&c.stdout));
    }
    let (pf, pr) = (free_port(), free_port());
    let (fa, ra) = (format!("127.0.0.1:{pf}"), format!("127.0.0.1:{pr}"));
    let Some(f) = Mounted::start(
        "dash",
        "fsprof-fuse",
        &["--metrics", &fa, "--slow", "1us", "--slow-ring", "16"],
    ) else {
        return;
    };
    // A RAIF volume over two branches, for the branch panel.
    let root = f.root.join("raif");
    let (b0, b1, mnt) = (root.join("b0"), root.join("b1"), root.join("mnt"));
    for d in [&b0, &b1, &mnt] {
        std::fs::create_dir_all(d).unwrap();
    }
    let mut cmd = Command::new(bin("raif"));
    cmd.arg("-f")
        .arg("--branches")
        .arg(format!("{},{}", b0.display(), b1.display()))
        .arg(&mnt)
        .args(["--metrics", &ra]);
    let _raif = Daemon::start(cmd, &mnt, &root.join("raif.log"));
    let Some(prom) = Prometheus::start(&[&fa, &ra], Some(&rules)) else {
        return;
    };
    let dash: serde_json::Value =
        serde_json::from_slice(&std::fs::read(repo("dashboards/fsprof.json")).unwrap()).unwrap();
    let mut exprs = Vec::new();
    collect(&dash["panels"], "expr", &mut exprs);
    let mut vars = Vec::new();
    collect(&dash["templating"], "definition", &mut vars);
    assert!(exprs.len() >= 5, "{exprs:?}");
    let substitute = |e: &str| {
        e.replace("$__rate_interval", "1m")
            .replace("$instance", ".*")
            .replace("$layer", "fuse")
            .replace("$op", ".*")
    };
    // label_values(METRIC, LABEL) is Grafana's: the series of METRIC must exist.
    let queries: Vec<String> = exprs
        .iter()
        .map(|e| substitute(e))
        .chain(vars.iter().filter_map(|v| {
            let inner = v.strip_prefix("label_values(")?.strip_suffix(')')?;
            let (metric, _) = inner.rsplit_once(',')?;
            Some(substitute(metric))
        }))
        .collect();
    // Load: directories made and names missed on both mounts until every query has data.
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut i = 0u64;
    let mut missing: Vec<&String> = queries.iter().collect();
    while !missing.is_empty() {
        assert!(
            Instant::now() < deadline,
            "no data for: {missing:#?}\n{}",
            prom.log()
        );
        for m in [&f.mnt, &mnt] {
            std::fs::create_dir(m.join(format!("d{i}"))).unwrap();
            assert!(std::fs::metadata(m.join(format!("nope{i}"))).is_err());
        }
        i += 1;
        std::thread::sleep(Duration::from_millis(50));
        if i % 10 == 0 {
            missing.retain(|q| prom.query_all(q).is_empty());
        }
    }
}

/// Every string value of key `key` under `v`.
fn collect(v: &serde_json::Value, key: &str, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                match x.as_str() {
                    Some(s) if k == key => out.push(s.to_string()),
                    _ => collect(x, key, out),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| collect(x, key, out)),
        _ => {}
    }
}
