//! Runs real C programs (compiled here with `cc`) under the preload library and checks what
//! it recorded: exact counts, processes, re-entrancy, traces, static programs, replay.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use profile_store::Profile;
use user_trace::{RunConfig, RunOutcome, run};

#[path = "user/names.rs"]
mod names;
#[path = "user/replay_root.rs"]
mod replay_root;

/// Compiles `tests/c/NAME.c` into `dir` (with the fortified entry points, as Debian builds)
/// and returns the program.
fn compile(dir: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c")
        .join(format!("{name}.c"));
    let out = dir.join(name);
    let st = Command::new("cc")
        .args(["-O2", "-D_FORTIFY_SOURCE=2", "-pthread", "-o"])
        .arg(&out)
        .arg(&src)
        .args(extra)
        .status()
        .expect("cc runs");
    assert!(st.success(), "cc {}", src.display());
    out
}

/// Runs `program args` under the preload library.
fn run_traced(program: &Path, args: &[&Path], trace: Option<&Path>) -> RunOutcome {
    let mut command: Vec<OsString> = vec![program.into()];
    command.extend(args.iter().map(|a| a.as_os_str().to_owned()));
    run(&RunConfig {
        command,
        trace: trace.map(Path::to_path_buf),
        ..RunConfig::default()
    })
    .expect("run")
}

/// The user layer's counts, sorted by name, without operations whose count is zero.
fn counts(p: &Profile) -> Vec<(String, u64)> {
    counts_of(p, "user")
}

/// The calls of layer `user` and of the `user@fd:KIND` layers: every call the program made.
fn all_calls(p: &Profile) -> u64 {
    p.layers
        .iter()
        .filter(|l| l.name == "user" || l.name.starts_with("user@fd:"))
        .map(|l| l.total_count())
        .sum()
}

/// The calls of layer `name` with a count, by name.
fn counts_of(p: &Profile, name: &str) -> Vec<(String, u64)> {
    let layer = p.layer(name).expect("the layer");
    let mut v: Vec<(String, u64)> = layer
        .ops
        .iter()
        .filter(|o| o.count > 0)
        .map(|o| (o.name.clone(), o.count))
        .collect();
    v.sort();
    v
}

fn expect(pairs: &[(&str, u64)]) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = pairs.iter().map(|(n, c)| (n.to_string(), *c)).collect();
    v.sort();
    v
}

/// The profile is written as format version 2 (it holds `SYS_` calls) in text and JSON, and
/// both read back as the same profile.
fn assert_round_trips(p: &Profile) {
    let text = profile_store::text::write(p);
    assert!(text.starts_with("# fsprof-profile v2\n"), "{text}");
    assert_eq!(&profile_store::text::parse(&text).unwrap(), p);
    let json = profile_store::json::write(p);
    assert_eq!(&profile_store::json::parse(&json).unwrap(), p);
}

/// Every operation's buckets sum to its count (the run is over: nothing in flight).
fn assert_quiescent(p: &Profile) {
    for op in &p.layer("user").unwrap().ops {
        assert_eq!(op.bucket_sum(), op.count as u128, "{}", op.name);
    }
}

#[test]
fn exact_counts_from_threads_and_forked_children() {
    let tmp = tempfile::tempdir().unwrap();
    let prog = compile(tmp.path(), "exact", &[]);
    let syms = Command::new("nm").arg("-D").arg(&prog).output().unwrap();
    let syms = String::from_utf8_lossy(&syms.stdout);
    assert!(
        syms.contains("__openat_2") && syms.contains("__pread_chk"),
        "{syms}"
    );
    let data = tmp.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let out = run_traced(&prog, &[&data], None);
    assert_eq!(out.exit_code, 0);
    assert_eq!(
        counts(&out.profile),
        expect(&[
            ("SYS_OPENAT", 103),
            ("SYS_PREAD", 250),
            ("SYS_PWRITE", 100),
            ("SYS_CLOSE", 103),
            ("SYS_FSYNC", 3),
            ("SYS_RENAME", 10),
        ])
    );
    assert_quiescent(&out.profile);
    assert_round_trips(&out.profile);
    // Main thread, 4 threads, 2 fork children: 7 slots, nothing in the overflow slot.
    assert_eq!(out.region.slots_claimed, 7);
    assert_eq!(out.region.overflow_calls, 0);
    assert_eq!(out.region.attaches, 1);
}

/// Counts the records of a trace per call name; returns them with the read report.
fn trace_counts(path: &Path) -> (Vec<(String, u64)>, user_trace::trace::ReadReport) {
    let mut r = user_trace::trace::TraceReader::open(path).unwrap();
    let mut m = std::collections::BTreeMap::<String, u64>::new();
    r.for_each_record(|_, rec| *m.entry(rec.name().to_string()).or_default() += 1)
        .unwrap();
    (m.into_iter().collect(), r.report().clone())
}

#[test]
fn the_trace_holds_every_call_the_profile_counts() {
    let tmp = tempfile::tempdir().unwrap();
    let prog = compile(tmp.path(), "exact", &[]);
    let data = tmp.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let trace = tmp.path().join("t.trace");
    let out = run_traced(&prog, &[&data], Some(&trace));
    assert_eq!(out.exit_code, 0);
    let t = out.trace.as_ref().unwrap();
    assert_eq!(t.chunks.write_errors, 0);
    assert_eq!(t.chunks.untraced_calls, 0);
    assert_eq!(t.chunks.live_slots, 0);
    let (names, report) = trace_counts(&trace);
    assert!(report.problems().is_empty(), "{:?}", report.problems());
    assert_eq!(names, counts(&out.profile));
    assert_eq!(report.bytes, t.bytes);
}

/// A directory holding what `replay.c` expects to find: in/a, in/b and in/sub/c.
fn replay_workdir(root: &Path) -> PathBuf {
    let w = root.join("work");
    std::fs::create_dir_all(w.join("in/sub")).unwrap();
    std::fs::write(w.join("in/a"), vec![b'a'; 10000]).unwrap();
    std::fs::write(w.join("in/b"), vec![b'b'; 3000]).unwrap();
    std::fs::write(w.join("in/sub/c"), vec![b'c'; 100]).unwrap();
    w
}

/// Traces `replay.c` in a fresh work directory; returns the trace and the run.
fn trace_replay_workload(tmp: &Path) -> (PathBuf, RunOutcome) {
    let prog = compile(tmp, "replay", &[]);
    let work = replay_workdir(tmp);
    let trace = tmp.join("w.trace");
    let out = run(&RunConfig {
        command: vec![prog.into()],
        trace: Some(trace.clone()),
        dir: Some(work),
        ..RunConfig::default()
    })
    .unwrap();
    assert_eq!(out.exit_code, 0);
    (trace, out)
}

/// A trace of `wc -c` of a 1 TiB sparse file (it takes the size from `fstat`): the replay's
/// tree would hold more than the disk has free, so filling it is refused before anything is
/// written (it wrote 32 GB of pattern in a minute before), and `sparse` replays it with the
/// file's size and no data, with no mismatch.
#[test]
fn a_tree_larger_than_the_disk_is_refused_unless_sparse() {
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    std::fs::File::create(work.join("huge"))
        .unwrap()
        .set_len(1 << 40)
        .unwrap();
    let trace = tmp.path().join("h.trace");
    let out = run(&RunConfig {
        command: vec!["wc".into(), "-c".into(), "huge".into()],
        trace: Some(trace.clone()),
        dir: Some(work),
        ..RunConfig::default()
    })
    .unwrap();
    assert_eq!(out.exit_code, 0);
    let target = tmp.path().join("replay");
    let e = user_trace::replay(&user_trace::ReplayConfig::new(&trace, &target), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("more than the") && e.contains("--sparse"), "{e}");
    assert!(!target.join("huge").exists(), "nothing created: {e}");
    let report = user_trace::replay(
        &user_trace::ReplayConfig {
            sparse: true,
            ..user_trace::ReplayConfig::new(&trace, &target)
        },
        None,
    )
    .unwrap();
    assert_eq!(report.mismatches, 0, "{report}");
    let huge = std::fs::metadata(target.join("huge")).unwrap();
    assert_eq!(huge.len(), 1 << 40);
    use std::os::unix::fs::MetadataExt;
    assert!(huge.blocks() < 64, "sparse: {} blocks", huge.blocks());
}

#[test]
fn a_replay_on_another_directory_matches_the_trace() {
    let tmp = tempfile::tempdir().unwrap();
    let (trace, traced) = trace_replay_workload(tmp.path());
    for (timing, name) in [
        (user_trace::Timing::Fast, "fast"),
        (user_trace::Timing::Recorded, "rec"),
    ] {
        let target = tmp.path().join(format!("replay-{name}"));
        let cfg = user_trace::ReplayConfig {
            timing,
            ..user_trace::ReplayConfig::new(&trace, &target)
        };
        let report = user_trace::replay(&cfg, None).unwrap();
        let text = report.to_string();
        assert_eq!(report.mismatches, 0, "{text}");
        // Only the write to standard output is not replayed.
        assert_eq!(report.skipped_descriptor, 1, "{text}");
        assert_eq!(
            report.skipped_outside + report.skipped_unsupported,
            0,
            "{text}"
        );
        // Every call but the write to standard output (in user, or in user@fd:pipe or chr,
        // as the test's standard output is a file, a pipe or a terminal).
        let traced_calls = all_calls(&traced.profile);
        assert_eq!(report.calls, traced_calls - 1, "{text}");
        assert_eq!(
            text.lines().last().unwrap(),
            format!("replayed {} calls, 0 mismatches", traced_calls - 1)
        );
        // The replay's profile has the trace's calls on files, less the one not replayed when
        // the test's standard output is a file (else it was never in layer user).
        let mut want = counts(&traced.profile);
        if all_calls(&traced.profile) == traced.profile.layer("user").unwrap().total_count() {
            want.iter_mut().find(|(n, _)| n == "SYS_WRITE").unwrap().1 -= 1;
        }
        assert_eq!(counts(&report.profile), want);
        assert_round_trips(&report.profile);
        // The tree as the trace found it, and what the workload made of it.
        let size = |p: &str| std::fs::metadata(target.join(p)).map(|m| m.len()).ok();
        assert_eq!(size("in/a"), Some(10000));
        assert_eq!(size("in/b"), Some(3000));
        assert_eq!(size("in/sub/c"), Some(100));
        assert_eq!(size("out/shared"), Some(8192));
        assert_eq!(size("out/child"), Some(10));
        assert_eq!(size("missing"), None);
        assert_eq!(size("out/log2"), None);
    }
}

/// Every entry point `every.c` calls once (readdir 4 times: three entries and the end; open
/// and closedir twice; close 4 times), by the name the user layer gives it.
const EVERY: &[(&str, u64)] = &[
    ("SYS_ACCESS", 1),
    ("SYS_CHDIR", 1),
    ("SYS_CHMOD", 1),
    ("SYS_CHOWN", 1),
    ("SYS_CLOSE", 4),
    ("SYS_CLOSEDIR", 2),
    ("SYS_COPY_FILE_RANGE", 1),
    ("SYS_CREAT", 1),
    ("SYS_DUP", 1),
    ("SYS_DUP2", 1),
    ("SYS_DUP3", 1),
    ("SYS_FACCESSAT", 1),
    ("SYS_FALLOCATE", 1),
    ("SYS_FCHDIR", 1),
    ("SYS_FCHMOD", 1),
    ("SYS_FCHMODAT", 1),
    ("SYS_FCHOWN", 1),
    ("SYS_FCHOWNAT", 1),
    ("SYS_FCNTL", 1),
    ("SYS_FDATASYNC", 1),
    ("SYS_FDOPENDIR", 1),
    ("SYS_FGETXATTR", 1),
    ("SYS_FLISTXATTR", 1),
    ("SYS_FLOCK", 1),
    ("SYS_FREMOVEXATTR", 1),
    ("SYS_FSETXATTR", 1),
    ("SYS_FSTAT", 1),
    ("SYS_FSTATAT", 1),
    ("SYS_FSTATFS", 1),
    ("SYS_FSYNC", 1),
    ("SYS_FTRUNCATE", 1),
    ("SYS_FUTIMENS", 1),
    ("SYS_GETDENTS64", 1),
    ("SYS_GETXATTR", 1),
    ("SYS_LCHOWN", 1),
    ("SYS_LGETXATTR", 1),
    ("SYS_LINK", 1),
    ("SYS_LINKAT", 1),
    ("SYS_LISTXATTR", 1),
    ("SYS_LLISTXATTR", 1),
    ("SYS_LREMOVEXATTR", 1),
    ("SYS_LSEEK", 1),
    ("SYS_LSETXATTR", 1),
    ("SYS_LSTAT", 1),
    ("SYS_MKDIR", 1),
    ("SYS_MKDIRAT", 1),
    ("SYS_OPEN", 2),
    ("SYS_OPENAT", 1),
    ("SYS_OPENDIR", 1),
    ("SYS_POSIX_FALLOCATE", 1),
    ("SYS_PREAD", 1),
    ("SYS_PREADV", 1),
    ("SYS_PREADV2", 1),
    ("SYS_PWRITE", 1),
    ("SYS_PWRITEV", 1),
    ("SYS_PWRITEV2", 1),
    ("SYS_READ", 1),
    ("SYS_READDIR", 4),
    ("SYS_READLINK", 1),
    ("SYS_READLINKAT", 1),
    ("SYS_READV", 1),
    ("SYS_REMOVE", 1),
    ("SYS_REMOVEXATTR", 1),
    ("SYS_RENAME", 1),
    ("SYS_RENAMEAT", 1),
    ("SYS_RENAMEAT2", 1),
    ("SYS_RMDIR", 1),
    ("SYS_SENDFILE", 1),
    ("SYS_SETXATTR", 1),
    ("SYS_STAT", 1),
    ("SYS_STATFS", 1),
    ("SYS_STATX", 1),
    ("SYS_SYMLINK", 1),
    ("SYS_SYMLINKAT", 1),
    ("SYS_TRUNCATE", 1),
    ("SYS_UNLINK", 1),
    ("SYS_UNLINKAT", 1),
    ("SYS_UTIMENSAT", 1),
    ("SYS_WRITE", 1),
    ("SYS_WRITEV", 1),
];

#[test]
fn every_entry_point_is_counted_once_traced_and_replayed() {
    let tmp = tempfile::tempdir().unwrap();
    let prog = compile(tmp.path(), "every", &[]);
    let syms = Command::new("nm").arg("-D").arg(&prog).output().unwrap();
    let syms = String::from_utf8_lossy(&syms.stdout);
    for chk in [
        "__read_chk",
        "__pread_chk",
        "__readlink_chk",
        "__readlinkat_chk",
        "__open_2",
    ] {
        assert!(syms.contains(chk), "{chk}: {syms}");
    }
    let data = tmp.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let trace = tmp.path().join("every.trace");
    let out = run(&RunConfig {
        command: vec![prog.into(), ".".into()],
        trace: Some(trace.clone()),
        dir: Some(data),
        ..RunConfig::default()
    })
    .unwrap();
    assert_eq!(out.exit_code, 0);
    assert_eq!(counts(&out.profile), expect(EVERY));
    assert_quiescent(&out.profile);
    let (names, report) = trace_counts(&trace);
    assert!(report.problems().is_empty(), "{:?}", report.problems());
    assert_eq!(names, expect(EVERY));
    // Each call replays with the traced result (futimens did not: glibc's utimensat, which
    // the replay called without a path, refuses a null one).
    let target = tmp.path().join("replayed");
    let replayed =
        user_trace::replay(&user_trace::ReplayConfig::new(&trace, &target), None).unwrap();
    let text = replayed.to_string();
    assert_eq!(replayed.mismatches, 0, "{text}");
    assert_eq!(counts(&replayed.profile), expect(EVERY), "{text}");
}

#[test]
fn a_replay_counts_and_lists_calls_whose_result_differs() {
    let tmp = tempfile::tempdir().unwrap();
    let (trace, _) = trace_replay_workload(tmp.path());
    // The traced open of "missing" failed with ENOENT; here it will succeed.
    let target = tmp.path().join("replayed");
    std::fs::create_dir(&target).unwrap();
    std::fs::write(target.join("missing"), b"surprise").unwrap();
    let report = user_trace::replay(&user_trace::ReplayConfig::new(&trace, &target), None).unwrap();
    let text = report.to_string();
    assert_eq!(report.mismatches, 1, "{text}");
    let line = text.lines().find(|l| l.starts_with("mismatch: ")).unwrap();
    assert!(
        line.ends_with(" open(\"missing\", O_RDONLY) = -1 ENOENT, replay 7")
            || line.contains(" open(\"missing\", O_RDONLY) = -1 ENOENT, replay "),
        "{text}"
    );
    assert!(
        text.ends_with(&format!("replayed {} calls, 1 mismatches", report.calls)),
        "{text}"
    );
}

#[test]
fn show_prints_calls_like_strace_and_filters_by_pid_and_call() {
    let tmp = tempfile::tempdir().unwrap();
    let (trace, _) = trace_replay_workload(tmp.path());
    let show = |pids: Vec<u32>, calls: Vec<&str>| {
        let mut out = Vec::new();
        let cfg = user_trace::ShowConfig {
            trace: trace.clone(),
            pids,
            calls: calls.into_iter().map(String::from).collect(),
        };
        let summary = user_trace::show(&cfg, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(summary.printed as usize, text.lines().count(), "{text}");
        text
    };
    let all = show(vec![], vec![]);
    // The program's start, then its 56 calls.
    assert_eq!(all.lines().count(), 1 + 56, "{all}");
    let first = all.lines().next().unwrap();
    let prog = tmp.path().join("replay");
    assert!(
        first.ends_with(&format!(
            " +++ exec \"{}\", comm \"replay\" +++",
            prog.display()
        )),
        "{first}"
    );
    let line = all.lines().find(|l| l.contains("\"missing\"")).unwrap();
    assert!(
        line.contains(" open(\"missing\", O_RDONLY) = -1 ENOENT <0.0"),
        "{line}"
    );
    // In start order.
    let times: Vec<f64> = all
        .lines()
        .map(|l| l.split_whitespace().next().unwrap().parse().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{all}");
    assert_eq!(show(vec![], vec!["fwrite"]).lines().count(), 10);
    assert_eq!(
        show(vec![], vec!["SYS_FCLOSE", "closedir"]).lines().count(),
        3
    );
    // The fork child made 4 calls.
    let child = all
        .lines()
        .find(|l| l.contains("creat(\"out/child\""))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|p| p.split('/').next())
        .unwrap()
        .parse::<u32>()
        .unwrap();
    assert_eq!(show(vec![child], vec![]).lines().count(), 4);
    let e = user_trace::show(
        &user_trace::ShowConfig {
            trace: trace.clone(),
            calls: vec!["frobnicate".into()],
            ..Default::default()
        },
        &mut Vec::new(),
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "unknown call 'frobnicate' (e.g. openat, pread, fopen)"
    );
}

#[test]
fn stdio_calls_are_counted_and_their_buffered_io_is_not() {
    let tmp = tempfile::tempdir().unwrap();
    let prog = compile(tmp.path(), "stdio", &[]);
    let syms = Command::new("nm").arg("-D").arg(&prog).output().unwrap();
    let syms = String::from_utf8_lossy(&syms.stdout);
    assert!(
        syms.contains("__fread_chk") && syms.contains("__fgets_chk"),
        "{syms}"
    );
    let out = run_traced(&prog, &[&tmp.path().join("f")], None);
    assert_eq!(out.exit_code, 0);
    assert_eq!(
        counts(&out.profile),
        expect(&[
            ("SYS_FOPEN", 2),
            ("SYS_OPEN", 1),
            ("SYS_FDOPEN", 1),
            ("SYS_FWRITE", 50),
            ("SYS_FPUTS", 5),
            ("SYS_FFLUSH", 1),
            ("SYS_FREAD", 21),
            ("SYS_FSEEK", 1),
            ("SYS_FTELL", 1),
            ("SYS_FGETS", 3),
            ("SYS_FCLOSE", 3),
        ])
    );
    assert_quiescent(&out.profile);
}

#[test]
fn a_vfork_and_exec_child_is_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let prog = compile(tmp.path(), "vfork", &[]);
    let out = run_traced(&prog, &[&prog], None);
    assert_eq!(out.exit_code, 0);
    assert_eq!(
        counts(&out.profile),
        expect(&[("SYS_STAT", 7), ("SYS_ACCESS", 3)])
    );
    // The command and the program it exec'd in the child.
    assert_eq!(out.region.attaches, 2);
}

#[test]
fn a_signal_handler_reading_during_reads_loses_no_count() {
    let tmp = tempfile::tempdir().unwrap();
    let prog = compile(tmp.path(), "signals", &[]);
    let report = tmp.path().join("handler");
    let trace = tmp.path().join("s.trace");
    let out = run_traced(&prog, &[&report], Some(&trace));
    assert_eq!(out.exit_code, 0);
    let text = std::fs::read_to_string(&report).unwrap();
    let handler: u64 = text
        .trim()
        .strip_prefix("handler ")
        .unwrap()
        .parse()
        .unwrap();
    assert!(handler > 0, "the timer never fired");
    // The program reads /dev/zero, a character device: its reads are kept apart, in
    // user@fd:chr (the opens, by path, count as files).
    assert_eq!(counts(&out.profile), expect(&[("SYS_OPEN", 3)]));
    assert_eq!(
        counts_of(&out.profile, "user@fd:chr"),
        expect(&[("SYS_READ", 300_000 + handler)])
    );
    assert_quiescent(&out.profile);
    // Every call counted in a slot is traced; those the handler made inside the library's
    // bookkeeping went to the overflow slot, counted but not traced.
    let t = out.trace.unwrap();
    assert_eq!(t.chunks.untraced_calls, out.region.overflow_calls);
    let (names, report) = trace_counts(&trace);
    assert!(report.problems().is_empty(), "{:?}", report.problems());
    let traced: u64 = names.iter().map(|(_, n)| n).sum();
    assert_eq!(traced + out.region.overflow_calls, 300_003 + handler);
    eprintln!(
        "signal handler made {handler} reads; {} landed inside the library's bookkeeping",
        out.region.overflow_calls
    );
}

#[test]
fn a_statically_linked_program_is_refused_in_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let prog = compile(tmp.path(), "hello", &["-static"]);
    let e = run(&RunConfig {
        command: vec![prog.clone().into()],
        ..RunConfig::default()
    })
    .unwrap_err();
    let msg = e.to_string();
    assert_eq!(msg.lines().count(), 1, "{msg}");
    assert!(
        msg.starts_with(&format!("{}: statically linked", prog.display())),
        "{msg}"
    );
    // A dynamic build of the same program runs.
    let dynamic = compile(tmp.path(), "hello", &[]);
    assert_eq!(run_traced(&dynamic, &[], None).exit_code, 0);
}

/// Waits (counting steps, up to about 30 s) until `f` holds.
fn wait_for(mut f: impl FnMut() -> bool) {
    for _ in 0..3000 {
        if f() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("gave up waiting");
}

#[test]
fn a_program_killed_by_sigkill_leaves_a_whole_trace() {
    let tmp = tempfile::tempdir().unwrap();
    let prog = compile(tmp.path(), "forever", &[]);
    let (pidfile, data, trace) = (
        tmp.path().join("pid"),
        tmp.path().join("data"),
        tmp.path().join("k.trace"),
    );
    let runner = {
        let (prog, pidfile, data, trace) =
            (prog.clone(), pidfile.clone(), data.clone(), trace.clone());
        std::thread::spawn(move || run_traced(&prog, &[&pidfile, &data], Some(&trace)))
    };
    // Let it write a few chunks, then kill it.
    wait_for(|| std::fs::metadata(&trace).is_ok_and(|m| m.len() > 300_000));
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
    let out = runner.join().unwrap();
    assert_eq!(out.exit_code, 128 + 9);
    let t = out.trace.as_ref().unwrap();
    assert!(t.chunks.chunks_written >= 3, "{:?}", t.chunks);
    assert_eq!(
        t.chunks.chunks_drained, 1,
        "the records after the last flush"
    );
    // Every call that returned is in the trace; one call may have been cut by the kill: before
    // it was timed (counted, in no bucket), or between its bucket and its trace record (in a
    // bucket, not in the trace).
    let (names, report) = trace_counts(&trace);
    assert!(report.problems().is_empty(), "{:?}", report.problems());
    let layer = out.profile.layer("user").unwrap();
    let mut untraced = 0u128;
    for (name, n) in &names {
        let timed = layer.op(name).unwrap().bucket_sum();
        assert!(
            (*n as u128..=*n as u128 + 1).contains(&timed),
            "{name}: {n} traced, {timed} timed"
        );
        untraced += timed - *n as u128;
    }
    let in_flight: u64 = layer
        .ops
        .iter()
        .map(|o| o.count - o.bucket_sum() as u64)
        .sum();
    assert!(
        in_flight as u128 + untraced <= 1,
        "{in_flight} cut before their end, {untraced} after"
    );
}

#[test]
fn without_fsprof_run_a_killed_program_leaves_its_flushed_chunks_and_a_cut_one_is_reported() {
    // The program runs under the library alone (as when fsprof itself is killed): nobody
    // writes the last buffer, so the trace ends at the last chunk the program wrote.
    let tmp = tempfile::tempdir().unwrap();
    let prog = compile(tmp.path(), "forever", &[]);
    let (pidfile, data, trace) = (
        tmp.path().join("pid"),
        tmp.path().join("data"),
        tmp.path().join("k.trace"),
    );
    let region = user_trace::region::Region::create(8).unwrap();
    let header = user_trace::trace::TraceHeader::now(tmp.path(), &[prog.clone().into()]);
    std::fs::write(&trace, header.encode()).unwrap();
    let mut child = Command::new(&prog)
        .arg(&pidfile)
        .arg(&data)
        .env("LD_PRELOAD", user_trace::find_preload().unwrap())
        .env("FSPROF_SHM", region.path())
        .env("FSPROF_TRACE", &trace)
        .spawn()
        .unwrap();
    wait_for(|| std::fs::metadata(&trace).is_ok_and(|m| m.len() > 300_000));
    child.kill().unwrap();
    child.wait().unwrap();
    let (names, report) = trace_counts(&trace);
    let traced: u64 = names.iter().map(|(_, n)| n).sum();
    let (counts, _) = region.counts().unwrap();
    let finished: u64 = counts.iter().map(|c| c.buckets.iter().sum::<u64>()).sum();
    assert!(traced > 0 && traced < finished, "{traced} of {finished}");
    // The kill may or may not have cut a chunk; cut the last one by hand to see it reported.
    let full = std::fs::read(&trace).unwrap();
    let mut r = user_trace::trace::TraceReader::open(&trace).unwrap();
    let mut last = 0;
    let mut last_records = 0;
    while let Some(c) = r.next_chunk().unwrap() {
        if c.offset + 64 + c.payload.len() as u64 <= full.len() as u64 {
            last = c.offset;
            let mut it = c.records();
            let mut rec = user_trace::trace::Record::default();
            last_records = 0;
            while it.next_into(&mut rec).unwrap() {
                last_records += 1;
            }
        }
    }
    let _ = report;
    let cut = tmp.path().join("cut.trace");
    std::fs::write(&cut, &full[..last as usize + 1000]).unwrap();
    let (names, report) = trace_counts(&cut);
    let kept: u64 = names.iter().map(|(_, n)| n).sum();
    assert_eq!(report.torn_tail, Some((last, 1000)));
    assert_eq!(kept, r.report().records.max(traced) - last_records);
    let problems = report.problems();
    assert!(
        problems[0].starts_with(&format!("torn tail at offset {last}: 1000 bytes")),
        "{problems:?}"
    );
}

#[test]
fn stats_derive_response_time_throughput_concurrency_and_think_time() {
    let tmp = tempfile::tempdir().unwrap();
    let (trace, traced) = trace_replay_workload(tmp.path());
    let s = user_trace::stats(&user_trace::StatsConfig { trace }).unwrap();
    let h = &s.header;
    let all = &s.overall;
    // Main thread, two threads, one fork child; two processes.
    assert_eq!(all.calls, 56);
    assert_eq!(all.threads, 4);
    assert_eq!(s.processes.len(), 2);
    assert_eq!(all.errors, 1, "the open of a missing file");
    // Think intervals: between consecutive calls of each thread.
    assert_eq!(all.gaps, all.calls - all.threads);
    assert!(all.period(h) > 0.0 && all.throughput(h) > 0.0);
    assert!(all.concurrency(h) > 0.0 && all.concurrency(h) <= all.threads as f64);
    // Bytes: 4096 + 4096 + 1808 + 500 + 8192 + 100 + 1000 read; 8192 + 10 + 1000 + 5 written.
    assert_eq!(all.bytes_read, 4096 + 4096 + 1808 + 500 + 8192 + 100 + 1000);
    assert_eq!(all.bytes_written, 8192 + 10 + 1000 + 5);
    // Response time per call: the same calls as the run's profile, whole and per process.
    assert_eq!(counts(&s.profile), counts(&traced.profile));
    let child = s.processes.iter().find(|(_, m)| m.calls == 4).unwrap().0;
    let layer = s.profile.layer(&format!("user@pid:{child}")).unwrap();
    assert_eq!(layer.total_count(), 4);
    // The layers of the run's (user, and user@fd:KIND for the write to standard output when
    // it is no file), and one per process.
    assert_eq!(s.profile.layers.len(), traced.profile.layers.len() + 2);
    assert_eq!(all_calls(&s.profile), all_calls(&traced.profile));
    assert_round_trips(&s.profile);
    let text = s.to_string();
    assert!(text.starts_with("trace of `"), "{text}");
    assert_eq!(text.lines().count(), 5, "{text}");
}

#[test]
fn calls_made_before_the_library_is_initialised_are_counted() {
    let tmp = tempfile::tempdir().unwrap();
    let lib = compile(tmp.path(), "early", &["-shared", "-fPIC"]);
    let prog = compile(tmp.path(), "vfork", &[]);
    let out = run(&RunConfig {
        command: vec![prog.clone().into(), prog.clone().into()],
        env: vec![("LD_PRELOAD".into(), lib.into())],
        ..RunConfig::default()
    })
    .unwrap();
    assert_eq!(out.exit_code, 0);
    // The constructor runs in the command and again in the program its child execs. Its
    // closes are of /dev/null, a character device: kept apart, in user@fd:chr.
    assert_eq!(
        counts(&out.profile),
        expect(&[("SYS_OPEN", 6), ("SYS_STAT", 7), ("SYS_ACCESS", 3)])
    );
    assert_eq!(
        counts_of(&out.profile, "user@fd:chr"),
        expect(&[("SYS_CLOSE", 6)])
    );
}

#[test]
fn threads_beyond_the_slots_count_exactly_in_the_overflow_slot() {
    let tmp = tempfile::tempdir().unwrap();
    let prog = compile(tmp.path(), "exact", &[]);
    let data = tmp.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let trace = tmp.path().join("o.trace");
    let out = run(&RunConfig {
        command: vec![prog.into(), data.into()],
        slots: 2,
        trace: Some(trace.clone()),
        ..RunConfig::default()
    })
    .unwrap();
    assert_eq!(out.exit_code, 0);
    assert_eq!(
        counts(&out.profile),
        expect(&[
            ("SYS_OPENAT", 103),
            ("SYS_PREAD", 250),
            ("SYS_PWRITE", 100),
            ("SYS_CLOSE", 103),
            ("SYS_FSYNC", 3),
            ("SYS_RENAME", 10),
        ])
    );
    assert_quiescent(&out.profile);
    assert_eq!(out.region.slot_capacity, 2);
    assert_eq!(out.region.slots_claimed, 7);
    assert!(out.region.overflow_calls > 0);
    // Calls in the overflow slot are counted, not traced, and the trace says how many.
    let (names, _) = trace_counts(&trace);
    let traced: u64 = names.iter().map(|(_, n)| n).sum();
    assert_eq!(
        out.trace.unwrap().chunks.untraced_calls,
        out.region.overflow_calls
    );
    assert_eq!(traced + out.region.overflow_calls, 569);
}
