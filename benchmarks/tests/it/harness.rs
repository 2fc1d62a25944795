//! `fsprof-bench` end to end: native runs (warm and cold), the results file, skipped and
//! failing targets, the recorded versions, and that every mount is gone after a panic and
//! after an interrupt. The mount tests use the workspace's own `fsprof-fuse` (built beside
//! `fsprof-bench` by `cargo test --workspace`), so they need no other package.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use benchmarks::harness::{mounts, target::Binaries, target::Target};

use crate::{BENCH, POSTMARK, Scratch, skip};

/// `fsprof-bench` with a work directory, our generator, and the given arguments; nothing is
/// recorded unless the arguments name a results file.
fn bench(work: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(BENCH);
    c.arg("--work-dir")
        .arg(work)
        .arg("--postmark")
        .arg(POSTMARK)
        .args(args)
        .stdin(Stdio::null());
    if !args.contains(&"--results") {
        c.arg("--no-record");
    }
    c
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The smallest metadata run (one run on the native target unless `extra` says otherwise).
fn tiny_native(work: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["--suite", "metadata", "--scale", "0.01"];
    if !extra.contains(&"--targets") {
        args.extend(["--targets", "native"]);
    }
    if !extra.contains(&"--runs") {
        args.extend(["--runs", "1"]);
    }
    args.extend_from_slice(extra);
    bench(work, &args).output().unwrap()
}

/// The workspace's `fsprof-fuse` when it and `/dev/fuse` are there; otherwise a visible skip,
/// or a failure under `CI=true`.
fn fsprof_fuse() -> Option<PathBuf> {
    let p = Path::new(BENCH).with_file_name("fsprof-fuse");
    if !Path::new("/dev/fuse").exists() {
        skip("/dev/fuse is missing: cannot mount");
        return None;
    }
    if !p.is_file() {
        skip(&format!(
            "{} is not built (cargo test --workspace --release builds it)",
            p.display()
        ));
        return None;
    }
    Some(p)
}

/// The line of `out` starting with `prefix`.
fn line<'a>(out: &'a str, prefix: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting with {prefix:?} in:\n{out}"))
}

#[test]
fn pinned_runs_say_so_and_a_missing_cpu_is_refused() {
    let s = Scratch::new("pin");
    let work = s.path().join("work");
    let args = |cpu: &str| {
        [
            "--suite",
            "metadata",
            "--targets",
            "native",
            "--runs",
            "1",
            "--scale",
            "0.01",
            "--pin",
        ]
        .iter()
        .map(|a| a.to_string())
        .chain([cpu.to_string()])
        .collect::<Vec<_>>()
    };
    // The first CPU this process may use (a cpuset may leave out CPU 0).
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let cpu = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .to_string();
    let a = args(&cpu);
    let o = bench(&work, &a.iter().map(String::as_str).collect::<Vec<_>>())
        .output()
        .unwrap();
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{err}");
    assert!(
        line(&out, "- Runs: ").contains(&format!("everything pinned to CPU {cpu}")),
        "{out}"
    );
    let a = args("100000");
    let o = bench(&work, &a.iter().map(String::as_str).collect::<Vec<_>>())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(err.contains("cannot pin to CPU 100000"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn native_run_prints_tables_and_leaves_nothing() {
    let s = Scratch::new("native");
    let work = s.path().join("work");
    let o = bench(
        &work,
        &[
            "--suite",
            "metadata,postmark-thesis,clients",
            "--targets",
            "native",
            "--runs",
            "2",
            "--scale",
            "0.02",
        ],
    )
    .output()
    .unwrap();
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{err}");
    for h in [
        "### metadata\n",
        "### postmark-thesis\n",
        "### clients / clients-4\n",
    ] {
        assert!(out.contains(h), "{h} missing:\n{out}");
    }
    assert!(out.contains("| native | "), "{out}");
    assert!(out.contains("- Machine: Linux "), "{out}");
    assert!(!out.contains("**Warning**"), "{out}");
    assert_eq!(std::fs::read_dir(&work).unwrap().count(), 0);
    // Two runs are fewer than a median needs: said on stderr and in the results.
    assert!(err.contains("warning: 2 runs per target"), "{err}");
    assert!(
        line(&out, "- Runs: ")
            .starts_with("- Runs: 2 per target and workload (**fewer than 3 runs**"),
        "{out}"
    );
    // The work directory's file system, with "(no journal)" exactly when it is an ext4
    // without one (where create-heavy runs pay for the previous run's deletions).
    let fs = mounts::fs_type_of(&work).unwrap();
    let journal = if mounts::ext4_without_journal(&work) {
        " (no journal)"
    } else {
        ""
    };
    assert_eq!(
        line(&out, "- Work directory: "),
        format!("- Work directory: `{}` on {fs}{journal}", work.display())
    );
}

/// A work directory that is itself a mount (a tmpfs here) is where the runs go: the harness
/// unmounted it as a "stale mount" and measured the disk below. A FUSE mount left below it by
/// a killed run is still cleared.
#[test]
fn a_work_directory_that_is_a_mount_is_used_not_unmounted() {
    let s = Scratch::new("mounted-work");
    let work = s.dir("work");
    let tmpfs = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64m", "tmpfs"])
        .arg(&work)
        .status()
        .unwrap();
    if !tmpfs.success() {
        skip("mounting a tmpfs needs root");
        return;
    }
    // As a killed run leaves it: an fsprof-fuse mount in a run directory.
    let left = fsprof_fuse().map(|fuse| {
        let (lower, mnt) = (work.join("run-0/lower"), work.join("run-0/mnt"));
        std::fs::create_dir_all(&lower).unwrap();
        std::fs::create_dir_all(&mnt).unwrap();
        let st = Command::new(fuse).arg(&lower).arg(&mnt).status().unwrap();
        assert!(st.success());
        assert!(mounts::is_mounted(&mnt));
        mnt
    });
    let o = tiny_native(&work, &[]);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{err}");
    assert!(mounts::is_mounted(&work), "{err}");
    assert!(
        !err.contains(&format!("unmounting stale mount {}\n", work.display())),
        "{err}"
    );
    assert_eq!(
        line(&out, "- Work directory: "),
        format!("- Work directory: `{}` on tmpfs", work.display())
    );
    if let Some(mnt) = left {
        assert!(
            err.contains(&format!("unmounting stale mount {}", mnt.display())),
            "{err}"
        );
        assert!(!mounts::is_mounted(&mnt));
    }
}

/// Progress: on a terminal (a pseudo-terminal from `script`), a bar with the run under way,
/// runs done, time so far and time left, below the runs' lines; otherwise only the lines.
#[test]
fn progress_is_drawn_on_a_terminal_only() {
    let s = Scratch::new("progress");
    let work = s.path().join("work");
    let args = [
        "--suite",
        "metadata",
        "--scale",
        "0.01",
        "--targets",
        "native",
        "--runs",
        "2",
    ];
    let cmd = format!(
        "{BENCH} --work-dir {} --postmark {POSTMARK} --no-record {}",
        work.display(),
        args.join(" ")
    );
    let o = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("script (util-linux) is needed: {e}"));
    let on_tty = text(&o.stdout);
    assert!(o.status.success(), "{on_tty}");
    assert!(on_tty.contains("runs, about"), "{on_tty}");
    assert!(on_tty.contains("metadata on native, run 2/2"), "{on_tty}");
    assert!(on_tty.contains("\x1b["), "no terminal control: {on_tty}");
    assert!(
        on_tty.contains("metadata run 1/2 native: create "),
        "{on_tty}"
    );
    // Not a terminal: the same lines, nothing drawn.
    let o = bench(&work, &args).output().unwrap();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("metadata run 2/2 native: create "), "{err}");
    assert!(!err.contains("runs, about"), "{err}");
    assert!(!err.contains('\x1b') && !err.contains('\r'), "{err:?}");
}

/// Three runs are enough: no warning, no remark in the results.
#[test]
fn three_runs_draw_no_warning() {
    let s = Scratch::new("three");
    let o = tiny_native(&s.path().join("work"), &["--runs", "3"]);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{err}");
    assert!(!err.contains("warning"), "{err}");
    assert!(
        line(&out, "- Runs: ").starts_with("- Runs: 3 per target and workload, "),
        "{out}"
    );
    assert!(out.contains("| native | "), "{out}");
}

/// `--cold` drops the page cache before every measured phase (root only): the run works and
/// reports every metric.
#[test]
fn cold_native_run_reports() {
    if benchmarks::sys::euid() != 0 {
        skip("--cold needs root");
        return;
    }
    let s = Scratch::new("cold");
    let work = s.path().join("work");
    let o = tiny_native(&work, &["--cold"]);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{err}");
    assert!(
        out.contains(
            "; cold caches (page, dentry and inode caches dropped before each measurement); "
        ),
        "{out}"
    );
    let row = line(&out, "| native | ");
    // create, stat_cold, stat_warm, find and unlink, then daemon CPU (none: native) and the
    // number of runs.
    let cells: Vec<&str> = row.trim_matches('|').split(" | ").map(str::trim).collect();
    assert_eq!(cells.len(), 8, "{row}");
    for c in &cells[1..6] {
        assert!(c.contains('[') && c.ends_with("×1.00"), "{row}");
    }
    assert_eq!(cells[6], "–", "{row}");
    assert_eq!(cells[7], "1", "{row}");
    assert!(
        out.contains("Work done: 200 files in 100 directories."),
        "{out}"
    );
    assert_eq!(std::fs::read_dir(&work).unwrap().count(), 0);
}

/// Without --results, the results go to RESULTS.md in the current directory, not into the
/// source tree the program was built from (the default used to be the build tree's
/// benchmarks/RESULTS.md, baked in at compile time: a run from anywhere appended to it).
#[test]
fn results_go_to_the_current_directory_by_default() {
    let s = Scratch::new("results-cwd");
    let work = s.path().join("work");
    let tree = Path::new(env!("CARGO_MANIFEST_DIR")).join("RESULTS.md");
    let before = std::fs::read(&tree).ok();
    let mut args = vec![
        "--suite",
        "metadata",
        "--scale",
        "0.01",
        "--targets",
        "native",
    ];
    args.extend(["--runs", "1", "--note", "default results file"]);
    let mut c = Command::new(BENCH);
    c.arg("--work-dir")
        .arg(&work)
        .arg("--postmark")
        .arg(POSTMARK)
        .args(&args)
        .current_dir(s.path())
        .stdin(Stdio::null());
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let md = std::fs::read_to_string(s.path().join("RESULTS.md")).unwrap();
    assert!(md.contains("default results file"), "{md}");
    assert_eq!(
        std::fs::read(&tree).ok(),
        before,
        "the source tree's RESULTS.md changed"
    );
}

/// The results file: created with a header, then one section per run appended, each with
/// the exact command, the machine and the table.
#[test]
fn results_file_gets_command_machine_and_table() {
    let s = Scratch::new("results");
    let work = s.path().join("work");
    let results = s.path().join("RESULTS.md");
    let r = results.to_str().unwrap();
    for note in ["first", "second run"] {
        let o = tiny_native(&work, &["--results", r, "--note", note]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert!(
            text(&o.stderr).contains(&format!("appended to {r}")),
            "{}",
            text(&o.stderr)
        );
    }
    let md = std::fs::read_to_string(&results).unwrap();
    assert!(md.starts_with("# Benchmark results\n\n"), "{md}");
    assert_eq!(md.matches("# Benchmark results").count(), 1, "{md}");
    let sections: Vec<&str> = md.split("\n## ").skip(1).collect();
    assert_eq!(sections.len(), 2, "{md}");
    for (section, note) in sections.iter().zip(["first", "'second run'"]) {
        assert!(section.contains(" UTC — metadata\n"), "{section}");
        let command = line(section, "- Command: `");
        assert!(
            command.starts_with(&format!("- Command: `{BENCH} --work-dir ")),
            "{command}"
        );
        assert!(
            command.contains(&format!(" --results {r} --note {note}`")),
            "{command}"
        );
        assert!(section.contains("\n- Machine: Linux "), "{section}");
        assert!(section.contains("\n- Work directory: `"), "{section}");
        assert!(section.contains("\n- Versions: fsprof-bench "), "{section}");
        assert!(section.contains("\n### metadata\n"), "{section}");
        assert!(
            section.contains("\n| target | create (s; lower is better) |"),
            "{section}"
        );
        assert!(section.contains("\n| native | "), "{section}");
    }
    // What was printed is what was recorded.
    let o = tiny_native(&work, &["--results", r]);
    let printed = text(&o.stdout);
    let md = std::fs::read_to_string(&results).unwrap();
    assert!(
        md.ends_with(&printed),
        "recorded:\n{md}\nprinted:\n{printed}"
    );
}

#[test]
fn missing_targets_are_skipped_with_a_message() {
    let s = Scratch::new("skip");
    let o = tiny_native(
        &s.path().join("work"),
        &[
            "--targets",
            "native,fsprof-fuse,raif:1:2",
            "--fsprof-fuse",
            "/nonexistent/fsprof-fuse",
            "--raif",
            "/nonexistent/raif",
        ],
    );
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("skipping target fsprof-fuse: fsprof-fuse not found"),
        "{err}"
    );
    assert!(
        err.contains("skipping target raif:1:2: raif not found"),
        "{err}"
    );
    let out = text(&o.stdout);
    assert!(out.contains("- Skipped fsprof-fuse: "), "{out}");
}

/// Regression: a target that never ran (its mount failed every time) used to give exit
/// status 0 and a table of dashes appended to RESULTS.md.
#[test]
fn target_that_never_ran_fails_the_run_and_records_nothing() {
    let s = Scratch::new("failing");
    let work = s.path().join("work");
    let results = s.path().join("RESULTS.md");
    // `false` runs and exits 1: every mount of this "fsprof-fuse" fails.
    let o = tiny_native(
        &work,
        &[
            "--targets",
            "native,fsprof-fuse",
            "--fsprof-fuse",
            "/bin/false",
            "--results",
            results.to_str().unwrap(),
        ],
    );
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        // The metadata suite's two workloads (metadata, git-status), each failed on fsprof-fuse.
        err.contains("2 workload/target pairs without a successful run (first: metadata on fsprof-fuse: mounting fsprof-fuse failed"),
        "{err}"
    );
    assert!(err.contains("not recorded"), "{err}");
    assert!(!results.exists(), "failed run was recorded");
    // The table is still printed, with the failure in it.
    assert!(
        out.contains("| fsprof-fuse | – | – | – | – | – | – | 0 (mounting fsprof-fuse failed"),
        "{out}"
    );
    assert!(mounts::mounts_under(&work).is_empty());
    assert_eq!(std::fs::read_dir(&work).unwrap().count(), 0);
}

#[test]
fn bad_arguments_exit_2() {
    let s = Scratch::new("args");
    for args in [
        &["--targets", "ext9"][..],
        &["--suite", "nope"][..],
        &["--targets", "raif:3:2"][..],
        &["--runs", "0"][..],
        &["--settle", "65"][..],
        // Sizes past what any disk holds (1e300 wrote without end, and wrapped counts).
        &["--scale", "1e300"][..],
        &["--scale", "1001"][..],
        &["--scale", "0"][..],
    ] {
        let o = bench(&s.path().join("work"), args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = text(&o.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("fsprof-bench: "), "{args:?}: {err}");
    }
    // Durations take their unit.
    let o = bench(&s.path().join("work"), &["--settle", "65"])
        .output()
        .unwrap();
    assert!(text(&o.stderr).contains("duration '65' has no unit: write 65s"));
}

/// Regression: versions were taken from whatever a command printed, so a target that is no
/// Debian package was recorded as "fsprof-fuse dpkg-query: no packages found matching
/// fsprof-fuse". Our binaries are recorded by their `--version` and the tree's git state.
#[test]
fn fsprof_fuse_run_records_its_own_version() {
    let Some(fuse) = fsprof_fuse() else {
        return;
    };
    let s = Scratch::new("versions");
    let work = s.path().join("work");
    let o = tiny_native(
        &work,
        &[
            "--targets",
            "native,fsprof-fuse",
            "--fsprof-fuse",
            fuse.to_str().unwrap(),
        ],
    );
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{err}");
    let versions = line(&out, "- Versions: ");
    assert!(!versions.contains("dpkg-query"), "{versions}");
    let own = format!("fsprof-fuse {}", env!("CARGO_PKG_VERSION"));
    assert!(versions.contains(&own), "{versions}");
    assert!(out.contains("| fsprof-fuse | "), "{out}");
    assert!(mounts::mounts_under(&work).is_empty());
}

#[test]
fn guard_unmounts_on_panic() {
    let Some(fuse) = fsprof_fuse() else {
        return;
    };
    let s = Scratch::new("panic");
    let t = Target::parse("fsprof-fuse").unwrap();
    let bins = Binaries {
        fsprof_fuse: Some(fuse),
        raif: None,
        passthrough_hp: None,
    };
    let program = t.program(&bins).unwrap();
    let dir = s.path().to_path_buf();
    let mnt = dir.join("mnt");
    let r = std::panic::catch_unwind(|| {
        let m = t.mount(program.as_deref(), &dir).unwrap();
        assert!(mounts::is_mounted(&m.path));
        std::fs::write(m.path.join("f"), b"x").unwrap();
        panic!("workload failed");
    });
    assert!(r.is_err());
    assert!(!mounts::is_mounted(&mnt), "still mounted after panic");
    assert_eq!(std::fs::read(dir.join("lower/f")).unwrap(), b"x");
}

#[test]
fn interrupt_unmounts_and_cleans_up() {
    let Some(fuse) = fsprof_fuse() else {
        return;
    };
    let s = Scratch::new("int");
    let work = s.path().join("work");
    let mut child = bench(
        &work,
        &[
            "--suite",
            "postmark-raif",
            "--targets",
            "fsprof-fuse",
            "--fsprof-fuse",
            fuse.to_str().unwrap(),
            "--runs",
            "3",
            "--scale",
            "0.5",
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    // Wait until the harness has a mount, then interrupt it.
    let t = Instant::now();
    while mounts::mounts_under(&work).is_empty() {
        if t.elapsed() > Duration::from_secs(60) || child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let saw_mount = !mounts::mounts_under(&work).is_empty();
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let o = child.wait_with_output().unwrap();
    let err = text(&o.stderr);
    assert!(kill.success(), "kill failed: {err}");
    assert!(saw_mount, "no mount appeared: {err}");
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("interrupted"), "{err}");
    assert!(mounts::mounts_under(&work).is_empty(), "mount left behind");
    assert_eq!(std::fs::read_dir(&work).unwrap().count(), 0);
}
