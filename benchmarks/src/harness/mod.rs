//! The benchmark harness: runs named suites against several targets and tabulates them.
//!
//! For every workload of the chosen suites, run `k` of every target happens before run `k + 1`
//! of any (targets alternate, so slow drifts of the machine hit all of them alike). Each run
//! gets a fresh directory: the target is mounted over a new, empty lower directory, the
//! workload prepares its files (untimed), the page cache is dropped if asked, the workload is
//! measured while the FUSE daemon's CPU time (`utime + stime` from `/proc/PID/stat`) is sampled
//! before and after, and the target is unmounted and its directory removed. Every mount sits
//! in a [`mounts::MountGuard`], which unmounts on return, error, panic and, since SIGINT and
//! SIGTERM are caught and end the run at the next check, on interrupt.
//!
//! Suites (sizes at `--scale 1`; `--scale` multiplies them):
//!
//! | suite | workload |
//! | --- | --- |
//! | `postmark-thesis` | figure 6.1's Postmark configuration at one tenth: 2,000 files of 512 B–10 KiB, 20,000 transactions, 60 subdirectories, 4 KiB unbuffered I/O |
//! | `postmark-raif` | figure 9.2's at one tenth: 6,000 files, 60,000 transactions, 60 subdirectories |
//! | `metadata` | create, stat and unlink 20,000 empty files in 100 directories, each phase timed |
//! | `grep` | `grep -r` over a copy of up to 64 MiB of a real source tree (the cargo registry sources) |
//! | `seqread` | 8 passes of sequential 1 MiB reads over a 256 MiB file (fio when installed) |
//! | `randread` | 65,536 random 4 KiB reads of a 256 MiB file (fio when installed) |
//! | `clients` | Postmark (500 files, 5,000 transactions) with 1, 2 and 4 concurrent clients |
//! | `postmark-reference` | run only when named (not part of `all`): the reference Postmark configuration, with which the peers' reference figures were measured, exactly: 10,000 files of 512 B–10 KiB, 150,000 transactions, 60 subdirectories, 4 KiB unbuffered I/O, biases 5/5, seed 42 |
//!
//! No `--scale` of `postmark-thesis` or `postmark-raif` gives the reference configuration
//! (they keep ten transactions per file and scale the subdirectories with the files; it has
//! fifteen per file and 60 subdirectories), hence its own suite; at `--scale 1` it is exactly
//! that configuration, so its ratios compare with the reference's (native 5.4 s; bindfs 4.7×,
//! unionfs-fuse 4.8×, mergerfs 6.4×, loggedfs 13.9×).

pub mod mounts;
pub mod procfs;
pub mod progress;
pub mod results;
pub mod target;
pub mod workloads;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use progress::{Progress, Step};
use results::{Sample, Series, WorkloadResult};
use target::{Binaries, Kind, Target};
use workloads::{Context, Workload};

/// Suite names, in the order `all` runs them.
pub const SUITES: &[&str] = &[
    "postmark-thesis",
    "postmark-raif",
    "metadata",
    "grep",
    "seqread",
    "randread",
    "clients",
];

/// Suites run only when named (`all` leaves them out).
pub const NAMED_SUITES: &[&str] = &["postmark-reference", "metadata-flat"];

/// Whether `name` is a suite, of `all` or run only when named.
pub fn is_suite(name: &str) -> bool {
    SUITES.contains(&name) || NAMED_SUITES.contains(&name)
}

/// "a, b, ... or all" for error messages.
pub fn suite_choices() -> String {
    let names: Vec<&str> = SUITES.iter().chain(NAMED_SUITES).copied().collect();
    format!("{} or all", names.join(", "))
}

fn scaled(base: f64, scale: f64) -> u64 {
    ((base * scale).round() as u64).max(1)
}

/// Postmark commands shaped like the thesis's figures 6.1 and 9.2 (which differ only in the
/// numbers of files and transactions).
fn thesis_postmark(files: u64, transactions: u64, subdirectories: u64) -> String {
    format!(
        "set size 512 10240\nset number {files}\nset seed 42\nset transactions {transactions}\n\
         set subdirectories {subdirectories}\nset read 4096\nset write 4096\n\
         set buffering false\nset bias read 5\nset bias create 5"
    )
}

/// The default tree for the `grep` suite: the cargo registry sources.
pub fn default_grep_source() -> PathBuf {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .unwrap_or_else(|| PathBuf::from("/root/.cargo"));
    home.join("registry/src")
}

/// The tree of the metadata suite's `git status`: the workspace fsprof-bench was built from
/// (its files as `git ls-files` lists them; no network).
pub fn default_git_source() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.parent().unwrap_or(here).to_path_buf()
}

/// The workloads of a suite, labelled.
pub fn suite_workloads(
    suite: &str,
    scale: f64,
    grep_source: &Path,
) -> Result<Vec<(String, Workload)>, String> {
    let one = |w: Workload| Ok(vec![(suite.to_string(), w)]);
    match suite {
        "postmark-thesis" => one(Workload::Postmark {
            commands: thesis_postmark(
                scaled(2000.0, scale),
                scaled(20000.0, scale),
                scaled(60.0, scale),
            ),
            clients: 1,
        }),
        "postmark-raif" => one(Workload::Postmark {
            commands: thesis_postmark(
                scaled(6000.0, scale),
                scaled(60000.0, scale),
                scaled(60.0, scale),
            ),
            clients: 1,
        }),
        "postmark-reference" => one(Workload::Postmark {
            commands: thesis_postmark(
                scaled(10000.0, scale),
                scaled(150000.0, scale),
                scaled(60.0, scale),
            ),
            clients: 1,
        }),
        "metadata" => Ok(vec![
            (
                "metadata".into(),
                Workload::Metadata {
                    files: scaled(20000.0, scale) as u32,
                    dirs: 100,
                },
            ),
            (
                "git-status".into(),
                Workload::GitStatus {
                    source: default_git_source(),
                },
            ),
        ]),
        // The goal's shape: every file in one directory.
        "metadata-flat" => one(Workload::Metadata {
            files: scaled(20000.0, scale) as u32,
            dirs: 1,
        }),
        "grep" => {
            if !grep_source.is_dir() {
                return Err(format!(
                    "grep: source tree '{}' not found (use --grep-source)",
                    grep_source.display()
                ));
            }
            one(Workload::Grep {
                source: grep_source.to_path_buf(),
                budget: scaled(64.0 * 1048576.0, scale),
            })
        }
        "seqread" => one(Workload::SeqRead {
            bytes: scaled(256.0, scale) << 20,
            loops: 8,
        }),
        "randread" => one(Workload::RandRead {
            bytes: scaled(256.0, scale) << 20,
            ops: scaled(65536.0, scale),
        }),
        "clients" => Ok([1u32, 2, 4]
            .iter()
            .map(|&n| {
                (
                    format!("clients-{n}"),
                    Workload::Postmark {
                        commands: format!(
                            "set number {}\nset transactions {}\nset seed 42\n\
                             set subdirectories 10\nset buffering false",
                            scaled(500.0, scale),
                            scaled(5000.0, scale)
                        ),
                        clients: n,
                    },
                )
            })
            .collect()),
        other => Err(format!(
            "unknown suite '{other}': expected {}",
            suite_choices()
        )),
    }
}

/// Fewer runs than this per workload and target draw a warning, and the recorded results say
/// so: with one or two runs the "median" is a single run or the mean of two.
pub const MIN_RUNS: u32 = 3;

/// What to run.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Suites, in order.
    pub suites: Vec<String>,
    /// Targets, the first being the reference for ratios.
    pub targets: Vec<Target>,
    /// Runs per workload and target (at least 1; 3 or more for a median worth the name).
    pub runs: u32,
    /// Drop the page cache before each measurement.
    pub cold: bool,
    /// Pause between one run's clean-up and the next run's start (see
    /// [`mounts::ext4_without_journal`]).
    pub settle: Duration,
    /// Where run directories are made (removed again after each run).
    pub work_dir: PathBuf,
    /// Multiplies every workload's size.
    pub scale: f64,
    /// fsprof binaries.
    pub binaries: Binaries,
    /// `fsprof-postmark`.
    pub postmark: PathBuf,
    /// Tree for the grep suite.
    pub grep_source: PathBuf,
    /// A note printed with the results (what this run is for).
    pub note: Option<String>,
    /// Run everything (the harness, each workload and each daemon) on this one CPU. On a VM,
    /// waking a thread on another virtual CPU can cost more than the file system's own work
    /// and varies run to run with the scheduler's placement; on one CPU every target is
    /// measured under the same placement, which compares the file systems' own costs.
    pub pin: Option<usize>,
}

/// What a harness run produced.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    /// One entry per workload.
    pub workloads: Vec<WorkloadResult>,
    /// Targets skipped and why.
    pub skipped: Vec<(String, String)>,
    /// Names and versions of what ran.
    pub versions: Vec<(String, String)>,
}

fn slug(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Removes a run directory, refusing if anything is still mounted below it.
fn remove_run_dir(dir: &Path) -> Result<(), String> {
    let left = mounts::mounts_under(dir);
    if !left.is_empty() {
        return Err(format!(
            "'{}' is still mounted: not removing '{}'",
            left[0].display(),
            dir.display()
        ));
    }
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("cannot remove '{}': {e}", dir.display())),
    }
}

/// One run: fresh directory, mount, prepare, measure, unmount, remove.
fn one_run(
    target: &Target,
    program: Option<&Path>,
    workload: &Workload,
    dir: &Path,
    plan: &Plan,
) -> Result<Sample, String> {
    remove_run_dir(dir)?;
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create '{}': {e}", dir.display()))?;
    let result = (|| {
        let mut mounted = target.mount(program, dir)?;
        let ctx = Context {
            postmark: plan.postmark.clone(),
            cold: plan.cold,
            scratch: dir.to_path_buf(),
        };
        workload.prepare(&mounted.path, &ctx)?;
        let cpu0 = mounted.daemon_cpu();
        let outcome = workload.measure(&mounted.path, &ctx)?;
        let cpu1 = mounted.daemon_cpu();
        if !mounted.unmount() {
            return Err(format!("cannot unmount {}", target.name));
        }
        Ok(Sample {
            metrics: outcome.metrics,
            daemon_cpu: cpu0.zip(cpu1).map(|(a, b)| b - a),
            fingerprint: outcome.fingerprint,
        })
        // `mounted` drops here: on every error path above its guard unmounts.
    })();
    let removed = remove_run_dir(dir);
    let sample = result?;
    removed?;
    Ok(sample)
}

/// Waits until `pause` has passed since `since` (the end of the previous run), writing dirty
/// blocks back first; interruptible.
fn settle(since: Instant, pause: Duration, progress: &mut impl Progress) -> Result<(), String> {
    if pause.is_zero() {
        return Ok(());
    }
    let _ = std::process::Command::new("sync").status();
    let left = pause.saturating_sub(since.elapsed());
    if left.is_zero() {
        return Ok(());
    }
    progress.line(&format!("settling {:.0} s", left.as_secs_f64()));
    let end = Instant::now() + left;
    while Instant::now() < end {
        if crate::sys::interrupted() {
            return Err("interrupted".into());
        }
        std::thread::sleep(
            end.saturating_duration_since(Instant::now())
                .min(Duration::from_millis(250)),
        );
    }
    Ok(())
}

/// The name a target's program is recorded under in the versions line.
fn program_name(kind: &Kind, program: &Path) -> String {
    match kind {
        Kind::FsprofFuse { .. } => "fsprof-fuse".to_string(),
        Kind::Raif { .. } => "raif".to_string(),
        Kind::UnionfsFuse => "unionfs-fuse".to_string(),
        _ => program
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_string(),
    }
}

/// A target program's version: ours (built from this workspace) by their `--version` and the
/// tree's `git describe`, peers by their Debian package's version (named as in
/// [`program_name`]), falling back to `--version`.
fn program_version(kind: &Kind, program: &Path) -> String {
    match kind {
        Kind::FsprofFuse { .. } | Kind::Raif { .. } => results::workspace_program_version(program),
        _ => results::peer_version(&program_name(kind, program), program),
    }
}

/// The targets of `plan` that can run here (with their programs), those skipped and why, and
/// the versions of what is measured.
#[allow(clippy::type_complexity)]
fn available(
    plan: &Plan,
    progress: &mut impl Progress,
) -> Result<
    (
        Vec<(Target, Option<PathBuf>)>,
        Vec<(String, String)>,
        Vec<(String, String)>,
    ),
    String,
> {
    let mut versions = vec![("fsprof-bench".to_string(), results::own_version())];
    let mut skipped = Vec::new();
    let mut active: Vec<(Target, Option<PathBuf>)> = Vec::new();
    for t in &plan.targets {
        match t.program(&plan.binaries) {
            Ok(p) => {
                if let Some(p) = &p {
                    let name = program_name(&t.kind, p);
                    if !versions.iter().any(|(k, _)| *k == name) {
                        let v = program_version(&t.kind, p);
                        versions.push((name, v));
                    }
                }
                active.push((t.clone(), p));
            }
            Err(why) => {
                progress.line(&format!("skipping target {}: {why}", t.name));
                skipped.push((t.name.clone(), why));
            }
        }
    }
    if active.is_empty() {
        return Err("none of the targets is available".into());
    }
    for pkg in ["fuse3", "fio", "grep"] {
        if let Some(v) = results::package_version(pkg) {
            versions.push((pkg.to_string(), v));
        }
    }
    Ok((active, skipped, versions))
}

/// Runs the plan; `progress` hears of every run as it starts, and gets a line for each result,
/// warning and note.
pub fn run(plan: &Plan, progress: &mut impl Progress) -> Result<Report, String> {
    if plan.targets.is_empty() {
        return Err("no targets".into());
    }
    if let Some(cpu) = plan.pin {
        // Before anything is started: workloads and daemons inherit the affinity.
        crate::sys::pin_to_cpu(cpu).map_err(|e| format!("cannot pin to CPU {cpu}: {e}"))?;
    }
    if plan.cold && crate::sys::euid() != 0 {
        return Err("--cold drops the page cache, which needs root".into());
    }
    if plan.runs < MIN_RUNS {
        progress.line(&format!(
            "warning: {} run{} per target: at least {MIN_RUNS} are needed for a median that \
             one outlier cannot move (the results will say so)",
            plan.runs,
            if plan.runs == 1 { "" } else { "s" }
        ));
    }
    let (active, skipped, versions) = available(plan, progress)?;
    let mut workloads = Vec::new();
    for suite in &plan.suites {
        workloads.extend(
            suite_workloads(suite, plan.scale, &plan.grep_source)?
                .into_iter()
                .map(|(label, w)| (suite.clone(), label, w)),
        );
    }
    // Mounts left by an earlier, killed run would make directories impossible to remove
    // (only FUSE mounts below the work directory: never the one it is on).
    for m in mounts::fuse_mounts_below(&plan.work_dir) {
        progress.line(&format!("unmounting stale mount {}", m.display()));
        if !mounts::unmount(&m, 5) {
            return Err(format!("stale mount '{}' cannot be unmounted", m.display()));
        }
    }
    std::fs::create_dir_all(&plan.work_dir)
        .map_err(|e| format!("cannot create '{}': {e}", plan.work_dir.display()))?;
    if plan.settle.is_zero() && mounts::ext4_without_journal(&plan.work_dir) {
        progress.line(&format!(
            "note: '{}' is on ext4 without a journal, which avoids reusing inodes freed in the \
             last 60 s: create-heavy runs pay for the previous run's deletions (use --settle 65s)",
            plan.work_dir.display()
        ));
    }
    let mut out = Vec::new();
    let mut last_cleanup: Option<Instant> = None;
    let runs = plan.runs.max(1);
    let total = (workloads.len() * active.len()) as u64 * u64::from(runs);
    let mut done = 0u64;
    for (suite, label, workload) in &workloads {
        let mut series: Vec<Series> = active
            .iter()
            .map(|(t, _)| Series {
                target: t.name.clone(),
                ..Series::default()
            })
            .collect();
        for run in 0..runs {
            for ((target, program), s) in active.iter().zip(series.iter_mut()) {
                if crate::sys::interrupted() {
                    return Err("interrupted".into());
                }
                done += 1;
                if s.error.is_some() {
                    continue;
                }
                progress.step(&Step {
                    done: done - 1,
                    total,
                    suite,
                    label,
                    target: &target.name,
                    run: run + 1,
                    runs,
                });
                let dir =
                    plan.work_dir
                        .join(format!("{}-{}-{run}", slug(&target.name), slug(label)));
                if let Some(t) = last_cleanup {
                    settle(t, plan.settle, progress)?;
                }
                let result = one_run(target, program.as_deref(), workload, &dir, plan);
                last_cleanup = Some(Instant::now());
                match result {
                    Ok(sample) => {
                        let m: Vec<String> = sample
                            .metrics
                            .iter()
                            .map(|m| format!("{} {} {}", m.name, results::num(m.value), m.unit))
                            .collect();
                        progress.line(&format!(
                            "{label} run {}/{} {}: {}",
                            run + 1,
                            plan.runs,
                            target.name,
                            m.join(", ")
                        ));
                        s.samples.push(sample);
                    }
                    Err(e) if crate::sys::interrupted() => return Err(e),
                    Err(e) => {
                        progress.line(&format!("{label} {}: FAILED: {e}", target.name));
                        s.error = Some(e);
                    }
                }
            }
        }
        out.push(WorkloadResult {
            suite: suite.clone(),
            label: label.clone(),
            description: workload.describe(),
            series,
        });
    }
    Ok(Report {
        workloads: out,
        skipped,
        versions,
    })
}

/// A workload on which a target never ran successfully.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The workload's label.
    pub label: String,
    /// The target.
    pub target: String,
    /// Why (the first error).
    pub error: String,
}

impl Report {
    /// The series without a single successful run. A report with any is not worth recording:
    /// its table would show a row of dashes where a measurement should be.
    pub fn failures(&self) -> Vec<Failure> {
        self.workloads
            .iter()
            .flat_map(|w| {
                w.series
                    .iter()
                    .filter(|s| s.samples.is_empty())
                    .map(|s| Failure {
                        label: w.label.clone(),
                        target: s.target.clone(),
                        error: s.error.clone().unwrap_or_else(|| "no runs".into()),
                    })
            })
            .collect()
    }

    /// The Markdown section appended to `RESULTS.md`.
    pub fn markdown(&self, plan: &Plan, command: &str, started: u64) -> String {
        let mut s = format!(
            "## {} — {}\n\n",
            results::utc(started),
            plan.suites.join(", ")
        );
        s.push_str(&format!("- Command: `{command}`\n"));
        s.push_str(&results::machine_facts(&plan.work_dir, &self.versions));
        s.push_str(&format!(
            "- Runs: {} per target and workload{}, targets alternating{}; {}; scale {}\n",
            plan.runs,
            if plan.runs < MIN_RUNS {
                format!(" (**fewer than {MIN_RUNS} runs**: medians and ranges are indicative only)")
            } else {
                String::new()
            },
            match plan.pin {
                Some(cpu) => format!(", everything pinned to CPU {cpu} (workload and daemons)"),
                None => String::new(),
            },
            if plan.cold {
                "cold caches (page, dentry and inode caches dropped before each measurement)"
            } else {
                "warm caches"
            },
            plan.scale
        ));
        if !plan.settle.is_zero() {
            s.push_str(&format!(
                "- Settle: each run starts at least {} s after the previous one was cleaned up\n",
                plan.settle.as_secs()
            ));
        }
        let names: Vec<&str> = plan.targets.iter().map(|t| t.name.as_str()).collect();
        s.push_str(&format!(
            "- Targets: {} (ratios are to {}; each cell: median [min–max] ×ratio)\n",
            names.join(", "),
            self.workloads
                .first()
                .and_then(|w| w.series.first())
                .map_or("the first target", |x| x.target.as_str())
        ));
        if let Some(n) = &plan.note {
            s.push_str(&format!("- Note: {n}\n"));
        }
        for (t, why) in &self.skipped {
            s.push_str(&format!("- Skipped {t}: {why}\n"));
        }
        s.push('\n');
        for w in &self.workloads {
            s.push_str(&w.table());
            s.push('\n');
        }
        s
    }
}

/// Appends `section` to the results file, creating it with a header if needed.
pub fn append_results(file: &Path, section: &str) -> Result<(), String> {
    use std::io::Write;
    let new = !file.exists();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(file)
        .map_err(|e| format!("cannot open '{}': {e}", file.display()))?;
    if new {
        f.write_all(
            b"# Benchmark results\n\nSections are appended by `fsprof-bench` (see \
              `benchmarks/src/harness/mod.rs` for the suites), newest last. Each records the \
              exact command, the machine and the versions.\n\n",
        )
        .map_err(|e| e.to_string())?;
    }
    f.write_all(section.as_bytes())
        .map_err(|e| format!("cannot write '{}': {e}", file.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suites_scale() {
        let g = Path::new("/");
        let w = suite_workloads("postmark-thesis", 10.0, g).unwrap();
        match &w[0].1 {
            Workload::Postmark { commands, .. } => {
                assert!(commands.contains("set number 20000\n"));
                assert!(commands.contains("set transactions 200000\n"));
                assert!(commands.contains("set subdirectories 600\n"));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(suite_workloads("clients", 1.0, g).unwrap().len(), 3);
        assert!(suite_workloads("nope", 1.0, g).is_err());
        for s in SUITES.iter().chain(NAMED_SUITES) {
            assert!(suite_workloads(s, 0.01, g).is_ok(), "{s}");
        }
    }

    /// The peers' reference figures were measured with this configuration; at `--scale 1` the
    /// suite must be exactly it, line for line.
    #[test]
    fn reference_suite_is_the_reference_configuration() {
        let w = suite_workloads("postmark-reference", 1.0, Path::new("/")).unwrap();
        assert_eq!(w.len(), 1);
        match &w[0].1 {
            Workload::Postmark { commands, clients } => {
                assert_eq!(*clients, 1);
                let mut lines: Vec<&str> = commands.lines().collect();
                lines.sort_unstable();
                assert_eq!(
                    lines,
                    [
                        "set bias create 5",
                        "set bias read 5",
                        "set buffering false",
                        "set number 10000",
                        "set read 4096",
                        "set seed 42",
                        "set size 512 10240",
                        "set subdirectories 60",
                        "set transactions 150000",
                        "set write 4096",
                    ]
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(is_suite("postmark-reference"));
        assert!(!SUITES.contains(&"postmark-reference"));
    }
}
