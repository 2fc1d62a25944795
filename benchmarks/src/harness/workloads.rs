//! The workloads of the suites: each prepares its files (untimed), then measures.

use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::rng::Mt19937;
use crate::sys;

/// Whether a smaller or a larger value of a metric is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    /// Times, latencies.
    Lower,
    /// Throughput, operations per second.
    Higher,
}

/// One measured number.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Metric {
    /// Short name, e.g. `total`.
    pub name: &'static str,
    /// Unit, e.g. `s`, `MiB/s`.
    pub unit: &'static str,
    /// The value.
    pub value: f64,
    /// Which direction is better.
    pub better: Better,
}

impl Metric {
    fn new(name: &'static str, unit: &'static str, value: f64, better: Better) -> Metric {
        Metric {
            name,
            unit,
            value,
            better,
        }
    }
}

/// What a measurement returns: the metrics and a fingerprint of the work done (file counts,
/// grep output), which must be the same on every target.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// The numbers.
    pub metrics: Vec<Metric>,
    /// Same work on every target, or the results are not comparable.
    pub fingerprint: String,
}

/// Settings shared by the workloads.
#[derive(Debug, Clone)]
pub struct Context {
    /// `fsprof-postmark`.
    pub postmark: PathBuf,
    /// Drop the page cache before measuring.
    pub cold: bool,
    /// Where run files that must not be inside the mount go (outputs, logs).
    pub scratch: PathBuf,
}

/// A workload.
#[derive(Debug, Clone)]
pub enum Workload {
    /// Postmark (our generator) with these commands and clients.
    Postmark {
        /// Postmark commands (without location and `run`).
        commands: String,
        /// Concurrent clients.
        clients: u32,
    },
    /// Create, stat (after drop_caches, then again), `find` (after drop_caches) and unlink
    /// `files` empty files spread over `dirs` directories.
    Metadata {
        /// Files.
        files: u32,
        /// Directories.
        dirs: u32,
    },
    /// `git status` (after drop_caches, then again) in a repository of the files `git ls-files`
    /// lists in `source`, committed once (not timed).
    GitStatus {
        /// A git work tree.
        source: PathBuf,
    },
    /// `grep -r` over a copy of `source` (at most `budget` bytes of it).
    Grep {
        /// Tree to copy.
        source: PathBuf,
        /// Most bytes copied.
        budget: u64,
    },
    /// Sequential 1 MiB reads of a `bytes` file, `loops` times over.
    SeqRead {
        /// File size.
        bytes: u64,
        /// Passes over the file.
        loops: u32,
    },
    /// Random 4 KiB reads of a `bytes` file, `ops` of them.
    RandRead {
        /// File size.
        bytes: u64,
        /// Reads.
        ops: u64,
    },
}

fn io_err(what: &str, p: &Path) -> impl FnOnce(std::io::Error) -> String {
    let p = p.display().to_string();
    let what = what.to_string();
    move |e| format!("{what} '{p}': {e}")
}

/// Drops the page, dentry and inode caches (root only).
pub fn drop_caches() -> Result<(), String> {
    // Write dirty pages back first: only clean pages can be dropped.
    let _ = Command::new("sync").status();
    std::fs::write("/proc/sys/vm/drop_caches", "3\n")
        .map_err(|e| format!("cannot drop caches (needs root): {e}"))
}

/// Runs a child to completion, killing it if the harness is interrupted. Output goes to files
/// in `scratch`; returns (status success, stdout, stderr, wall time).
pub fn run_child(
    cmd: &mut Command,
    scratch: &Path,
    tag: &str,
) -> Result<(bool, String, String, Duration), String> {
    let out_path = scratch.join(format!("{tag}.out"));
    let err_path = scratch.join(format!("{tag}.err"));
    let out = std::fs::File::create(&out_path).map_err(io_err("cannot create", &out_path))?;
    let err = std::fs::File::create(&err_path).map_err(io_err("cannot create", &err_path))?;
    let t = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    let status = loop {
        if let Some(s) = child.try_wait().map_err(|e| e.to_string())? {
            break s;
        }
        if sys::interrupted() {
            let _ = child.kill();
            let _ = child.wait();
            return Err("interrupted".into());
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let elapsed = t.elapsed();
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    let _ = std::fs::remove_file(&out_path);
    let _ = std::fs::remove_file(&err_path);
    Ok((status.success(), stdout, stderr, elapsed))
}

fn check_interrupt() -> Result<(), String> {
    if sys::interrupted() {
        Err("interrupted".into())
    } else {
        Ok(())
    }
}

fn fio() -> Option<PathBuf> {
    super::target::which("fio")
}

impl Workload {
    /// A short description for the results.
    pub fn describe(&self) -> String {
        match self {
            Workload::Postmark { commands, clients } => format!(
                "fsprof-postmark, {} client{}: {}",
                clients,
                if *clients == 1 { "" } else { "s" },
                commands.lines().collect::<Vec<_>>().join("; ")
            ),
            Workload::Metadata { files, dirs } => {
                format!(
                    "create, stat after drop_caches, stat again, find after drop_caches, \
                     unlink {files} empty files in {dirs} directories"
                )
            }
            Workload::GitStatus { source } => format!(
                "git status after drop_caches, then again, in a committed copy of the files \
                 of {}",
                source.display()
            ),
            Workload::Grep { source, budget } => format!(
                "grep -r -c 'fn main' over a copy of {} (at most {} MiB)",
                source.display(),
                budget >> 20
            ),
            Workload::SeqRead { bytes, loops } => format!(
                "sequential 1 MiB reads of a {} MiB file, {loops} passes ({})",
                bytes >> 20,
                if fio().is_some() {
                    "fio, psync"
                } else {
                    "built-in reader"
                }
            ),
            Workload::RandRead { bytes, ops } => format!(
                "{ops} random 4 KiB reads of a {} MiB file ({})",
                bytes >> 20,
                if fio().is_some() {
                    "fio, psync"
                } else {
                    "built-in reader"
                }
            ),
        }
    }

    /// Prepares the files the workload needs in `dir` (not timed).
    pub fn prepare(&self, dir: &Path, _ctx: &Context) -> Result<(), String> {
        match self {
            Workload::Postmark { .. } | Workload::Metadata { .. } => Ok(()),
            Workload::GitStatus { source } => git_repository(source, &dir.join("repo")),
            Workload::Grep { source, budget } => {
                let mut left = *budget;
                copy_tree(source, &dir.join("tree"), &mut left)
            }
            Workload::SeqRead { bytes, .. } | Workload::RandRead { bytes, .. } => {
                write_file(&dir.join("data"), *bytes)
            }
        }
    }

    /// Runs and times the workload in `dir`.
    pub fn measure(&self, dir: &Path, ctx: &Context) -> Result<Outcome, String> {
        if ctx.cold {
            drop_caches()?;
        } else {
            // Let writeback and journal work of earlier runs (the previous run's tree was just
            // removed) finish before the clock starts, so it is not billed to this run.
            let _ = Command::new("sync").status();
        }
        match self {
            Workload::Postmark { commands, clients } => postmark(dir, ctx, commands, *clients),
            Workload::Metadata { files, dirs } => metadata(dir, ctx, *files, *dirs),
            Workload::GitStatus { .. } => git_status(&dir.join("repo"), ctx),
            Workload::Grep { .. } => grep(dir, ctx),
            Workload::SeqRead { bytes, loops } => match fio() {
                Some(f) => fio_read(&f, dir, ctx, *bytes, Pattern::Sequential(*loops)),
                None => own_seqread(dir, *bytes, *loops),
            },
            Workload::RandRead { bytes, ops } => match fio() {
                Some(f) => fio_read(&f, dir, ctx, *bytes, Pattern::Random(*ops)),
                None => own_randread(dir, *bytes, *ops),
            },
        }
    }
}

fn postmark(dir: &Path, ctx: &Context, commands: &str, clients: u32) -> Result<Outcome, String> {
    let cfg = ctx.scratch.join("postmark.pm");
    std::fs::write(
        &cfg,
        format!("set location {}\n{commands}\nrun\nquit\n", dir.display()),
    )
    .map_err(io_err("cannot write", &cfg))?;
    let mut cmd = Command::new(&ctx.postmark);
    // Strict: a mistake in the suite's commands ends the run instead of an `Eh?`.
    cmd.arg("--json")
        .arg("--strict")
        .arg("--clients")
        .arg(clients.to_string())
        .arg(&cfg);
    let (ok, out, err, _) = run_child(&mut cmd, &ctx.scratch, "postmark")?;
    if !ok {
        return Err(format!(
            "fsprof-postmark failed: {}",
            err.lines().last().unwrap_or("")
        ));
    }
    let v: serde_json::Value =
        serde_json::from_str(&out).map_err(|e| format!("fsprof-postmark output: {e}"))?;
    let r = &v["runs"][0];
    if r["complete"] != true {
        return Err("postmark ran out of files".into());
    }
    let f = |k: &str| r["seconds"][k].as_f64().unwrap_or(f64::NAN);
    let total = f("total");
    let tx = f("transactions");
    let transactions = r["transactions"].as_f64().unwrap_or(0.0);
    Ok(Outcome {
        metrics: vec![
            Metric::new("total", "s", total, Better::Lower),
            Metric::new("transactions", "s", tx, Better::Lower),
            Metric::new(
                "transactions/s",
                "1/s",
                if tx > 0.0 { transactions / tx } else { 0.0 },
                Better::Higher,
            ),
        ],
        fingerprint: format!(
            "created {} read {} appended {} deleted {} bytes {}/{}",
            r["created"],
            r["read"],
            r["appended"],
            r["deleted"],
            r["bytes_read"],
            r["bytes_written"]
        ),
    })
}

fn metadata(dir: &Path, ctx: &Context, files: u32, dirs: u32) -> Result<Outcome, String> {
    let dirs = dirs.max(1);
    let root = dir.join("meta");
    std::fs::create_dir(&root).map_err(io_err("cannot create", &root))?;
    let subdirs: Vec<PathBuf> = (0..dirs).map(|d| root.join(format!("d{d}"))).collect();
    for d in &subdirs {
        std::fs::create_dir(d).map_err(io_err("cannot create", d))?;
    }
    let path = |i: u32| subdirs[(i % dirs) as usize].join(format!("f{i}"));
    let phase = |what: &str, f: &dyn Fn(&Path) -> std::io::Result<()>| -> Result<f64, String> {
        if ctx.cold {
            drop_caches()?;
        }
        let t = Instant::now();
        for i in 0..files {
            if i % 1024 == 0 {
                check_interrupt()?;
            }
            let p = path(i);
            f(&p).map_err(io_err(what, &p))?;
        }
        Ok(t.elapsed().as_secs_f64())
    };
    let create = phase("cannot create", &|p| {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(p)
            .map(drop)
    })?;
    let stat = |p: &Path| std::fs::metadata(p).map(drop);
    drop_caches()?;
    let stat_cold = phase("cannot stat", &stat)?;
    let stat_warm = phase("cannot stat", &stat)?;
    drop_caches()?;
    let (_, out, err, find) = run_child(
        Command::new("find").arg(&root).args(["-printf", "%s\n"]),
        &ctx.scratch,
        "find",
    )?;
    let found = out.lines().count();
    if !err.trim().is_empty() || found != files as usize + dirs as usize + 1 {
        return Err(format!("find: {found} entries: {}", err.trim()));
    }
    let unlink = phase("cannot unlink", &|p| std::fs::remove_file(p))?;
    for d in &subdirs {
        std::fs::remove_dir(d).map_err(io_err("cannot remove", d))?;
    }
    std::fs::remove_dir(&root).map_err(io_err("cannot remove", &root))?;
    Ok(Outcome {
        metrics: vec![
            Metric::new("create", "s", create, Better::Lower),
            Metric::new("stat_cold", "s", stat_cold, Better::Lower),
            Metric::new("stat_warm", "s", stat_warm, Better::Lower),
            Metric::new("find", "s", find.as_secs_f64(), Better::Lower),
            Metric::new("unlink", "s", unlink, Better::Lower),
        ],
        fingerprint: format!("{files} files in {dirs} directories"),
    })
}

/// `git` with a fixed identity and no user or system configuration.
fn git(dir: &Path) -> Command {
    let mut c = Command::new("git");
    c.current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .args(["-c", "user.name=bench", "-c", "user.email=bench@localhost"]);
    c
}

/// Makes `to` a repository of the files `git ls-files` lists in `source`, committed.
fn git_repository(source: &Path, to: &Path) -> Result<(), String> {
    let out = git(source)
        .args(["ls-files", "-z"])
        .output()
        .map_err(|e| format!("git ls-files in '{}': {e}", source.display()))?;
    if !out.status.success() {
        return Err(format!("'{}' is not a git work tree", source.display()));
    }
    for rel in out.stdout.split(|&b| b == 0).filter(|r| !r.is_empty()) {
        let rel = Path::new(std::str::from_utf8(rel).map_err(|e| e.to_string())?);
        let (from, dest) = (source.join(rel), to.join(rel));
        if let Some(d) = dest.parent() {
            std::fs::create_dir_all(d).map_err(io_err("cannot create", d))?;
        }
        // A tracked file deleted in the work tree is left out.
        if from.is_file() {
            std::fs::copy(&from, &dest).map_err(io_err("cannot copy", &from))?;
        }
    }
    for args in [
        &["init", "-q"][..],
        &["add", "-A"],
        &["commit", "-q", "-m", "tree"],
    ] {
        let st = git(to).args(args).status().map_err(|e| e.to_string())?;
        if !st.success() {
            return Err(format!("git {}: {st}", args.join(" ")));
        }
    }
    Ok(())
}

fn git_status(repo: &Path, ctx: &Context) -> Result<Outcome, String> {
    let mut times = Vec::new();
    for pass in ["cold", "warm"] {
        if pass == "cold" {
            drop_caches()?;
        }
        let (ok, out, err, t) = run_child(
            git(repo).args(["status", "--porcelain"]),
            &ctx.scratch,
            "git",
        )?;
        if !ok || !out.trim().is_empty() {
            return Err(format!("git status: {}{}", out.trim(), err.trim()));
        }
        times.push(t.as_secs_f64());
    }
    Ok(Outcome {
        metrics: vec![
            Metric::new("git_status_cold", "s", times[0], Better::Lower),
            Metric::new("git_status_warm", "s", times[1], Better::Lower),
        ],
        fingerprint: "a clean work tree".into(),
    })
}

/// Copies regular files and directories of `from` into `to`, in name order, until `left`
/// bytes are used up (symlinks and special files are skipped).
fn copy_tree(from: &Path, to: &Path, left: &mut u64) -> Result<(), String> {
    std::fs::create_dir_all(to).map_err(io_err("cannot create", to))?;
    let mut entries: Vec<_> = std::fs::read_dir(from)
        .map_err(io_err("cannot read", from))?
        .filter_map(Result::ok)
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        if *left == 0 {
            break;
        }
        check_interrupt()?;
        let ft = e.file_type().map_err(io_err("cannot stat", &e.path()))?;
        let dst = to.join(e.file_name());
        if ft.is_dir() {
            copy_tree(&e.path(), &dst, left)?;
        } else if ft.is_file() {
            let len = e.metadata().map(|m| m.len()).unwrap_or(0);
            if len > *left {
                *left = 0;
                break;
            }
            std::fs::copy(e.path(), &dst).map_err(io_err("cannot copy to", &dst))?;
            *left -= len;
        }
    }
    Ok(())
}

fn grep(dir: &Path, ctx: &Context) -> Result<Outcome, String> {
    let mut cmd = Command::new("grep");
    cmd.args(["-r", "-c", "-e", "fn main", "tree"])
        .current_dir(dir)
        .env("LC_ALL", "C");
    let (_, out, err, elapsed) = run_child(&mut cmd, &ctx.scratch, "grep")?;
    if !err.trim().is_empty() {
        return Err(format!("grep: {}", err.lines().next().unwrap_or("")));
    }
    let mut lines: Vec<&str> = out.lines().collect();
    lines.sort_unstable();
    let matches: u64 = lines
        .iter()
        .filter_map(|l| l.rsplit(':').next()?.parse::<u64>().ok())
        .sum();
    Ok(Outcome {
        metrics: vec![Metric::new(
            "grep",
            "s",
            elapsed.as_secs_f64(),
            Better::Lower,
        )],
        fingerprint: format!("{} files, {matches} matching lines", lines.len()),
    })
}

const MIB: u64 = 1 << 20;

fn write_file(p: &Path, bytes: u64) -> Result<(), String> {
    let mut f = std::fs::File::create(p).map_err(io_err("cannot create", p))?;
    let mut rng = Mt19937::new(4357);
    let block: Vec<u8> = (0..MIB).map(|_| rng.genrand() as u8).collect();
    let mut left = bytes;
    while left > 0 {
        check_interrupt()?;
        let n = left.min(MIB) as usize;
        f.write_all(&block[..n])
            .map_err(io_err("cannot write", p))?;
        left -= n as u64;
    }
    f.sync_all().map_err(io_err("cannot sync", p))?;
    Ok(())
}

/// The access pattern of [`fio_read`].
#[derive(Debug, Clone, Copy)]
enum Pattern {
    /// Whole-file passes.
    Sequential(u32),
    /// Random 4 KiB reads.
    Random(u64),
}

fn fio_read(
    fio: &Path,
    dir: &Path,
    ctx: &Context,
    bytes: u64,
    pattern: Pattern,
) -> Result<Outcome, String> {
    let mut cmd = Command::new(fio);
    cmd.arg("--name=read")
        .arg(format!("--filename={}", dir.join("data").display()))
        .arg(format!("--size={bytes}"))
        .arg("--ioengine=psync")
        // fio drops the file's cached pages before starting by default; on a stacked file
        // system that empties only the upper cache while the lower one stays warm. Caches are
        // the harness's business (--cold drops them all).
        .arg("--invalidate=0")
        .arg("--output-format=json");
    match pattern {
        Pattern::Sequential(loops) => {
            cmd.args(["--rw=read", "--bs=1M"])
                .arg(format!("--loops={loops}"));
        }
        Pattern::Random(ops) => {
            cmd.args(["--rw=randread", "--bs=4k", "--randrepeat=1"])
                .arg(format!("--io_size={}", ops * 4096));
        }
    }
    let (ok, out, err, _) = run_child(&mut cmd, &ctx.scratch, "fio")?;
    if !ok {
        return Err(format!("fio failed: {}", err.lines().last().unwrap_or("")));
    }
    // fio may print notes before the JSON document.
    let json = out.find('{').map(|i| &out[i..]).unwrap_or("");
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("fio output: {e}"))?;
    let read = &v["jobs"][0]["read"];
    let bw = read["bw_bytes"].as_f64().unwrap_or(0.0) / MIB as f64;
    let iops = read["iops"].as_f64().unwrap_or(0.0);
    let p99 = read["clat_ns"]["percentile"]["99.000000"]
        .as_f64()
        .unwrap_or(f64::NAN)
        / 1000.0;
    let io_bytes = read["io_bytes"].as_u64().unwrap_or(0);
    let metrics = match pattern {
        Pattern::Sequential(_) => vec![Metric::new("read", "MiB/s", bw, Better::Higher)],
        Pattern::Random(_) => vec![
            Metric::new("read", "IOPS", iops, Better::Higher),
            Metric::new("p99", "us", p99, Better::Lower),
        ],
    };
    Ok(Outcome {
        metrics,
        fingerprint: format!("{io_bytes} bytes read"),
    })
}

fn own_seqread(dir: &Path, bytes: u64, loops: u32) -> Result<Outcome, String> {
    let p = dir.join("data");
    let mut buf = vec![0u8; MIB as usize];
    let t = Instant::now();
    let mut total = 0u64;
    for _ in 0..loops {
        check_interrupt()?;
        let mut f = std::fs::File::open(&p).map_err(io_err("cannot open", &p))?;
        loop {
            let n = f.read(&mut buf).map_err(io_err("cannot read", &p))?;
            if n == 0 {
                break;
            }
            total += n as u64;
        }
    }
    let secs = t.elapsed().as_secs_f64();
    Ok(Outcome {
        metrics: vec![Metric::new(
            "read",
            "MiB/s",
            total as f64 / MIB as f64 / secs.max(1e-9),
            Better::Higher,
        )],
        fingerprint: format!("{total} bytes read ({loops} x {bytes})"),
    })
}

fn own_randread(dir: &Path, bytes: u64, ops: u64) -> Result<Outcome, String> {
    let p = dir.join("data");
    let f = std::fs::File::open(&p).map_err(io_err("cannot open", &p))?;
    let blocks = (bytes / 4096).max(1);
    let mut rng = Mt19937::new(4357);
    let mut buf = [0u8; 4096];
    let mut lat = hdrhistogram::Histogram::<u64>::new(3).expect("valid");
    let t = Instant::now();
    for i in 0..ops {
        if i % 4096 == 0 {
            check_interrupt()?;
        }
        let off = (rng.genrand() as u64 % blocks) * 4096;
        let s = Instant::now();
        f.read_at(&mut buf, off)
            .map_err(io_err("cannot read", &p))?;
        lat.saturating_record(s.elapsed().as_nanos() as u64);
    }
    let secs = t.elapsed().as_secs_f64();
    Ok(Outcome {
        metrics: vec![
            Metric::new("read", "IOPS", ops as f64 / secs.max(1e-9), Better::Higher),
            Metric::new(
                "p99",
                "us",
                lat.value_at_quantile(0.99) as f64 / 1000.0,
                Better::Lower,
            ),
        ],
        fingerprint: format!("{} bytes read", ops * 4096),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch directory, removed when the returned guard is dropped.
    fn scratch() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    fn ctx(d: &Path) -> Context {
        Context {
            postmark: PathBuf::from("/nonexistent"),
            cold: false,
            scratch: d.to_path_buf(),
        }
    }

    #[test]
    fn metadata_cleans_up() {
        let dir = scratch();
        let d = dir.path();
        let o = Workload::Metadata {
            files: 300,
            dirs: 7,
        }
        .measure(d, &ctx(d))
        .unwrap();
        let names: Vec<&str> = o.metrics.iter().map(|m| m.name).collect();
        assert_eq!(
            names,
            ["create", "stat_cold", "stat_warm", "find", "unlink"]
        );
        assert_eq!(std::fs::read_dir(d).unwrap().count(), 0);
    }

    #[test]
    fn copy_tree_respects_budget() {
        let dir = scratch();
        let d = dir.path();
        let src = d.join("src");
        std::fs::create_dir_all(src.join("a")).unwrap();
        std::fs::write(src.join("a/x"), vec![0u8; 100]).unwrap();
        std::fs::write(src.join("b"), vec![0u8; 100]).unwrap();
        let mut left = 150;
        copy_tree(&src, &d.join("dst"), &mut left).unwrap();
        assert!(d.join("dst/a/x").exists());
        assert!(!d.join("dst/b").exists());
    }

    #[test]
    fn own_readers() {
        let dir = scratch();
        let d = dir.path();
        write_file(&d.join("data"), 3 * MIB + 5).unwrap();
        let n = 3 * MIB + 5;
        let s = own_seqread(d, n, 2).unwrap();
        assert_eq!(s.fingerprint, format!("{} bytes read (2 x {n})", 2 * n));
        let r = own_randread(d, 3 * MIB, 100).unwrap();
        assert_eq!(r.metrics[0].unit, "IOPS");
    }
}
