//! `fsprof run`, `fsprof trace show|stats` and `fsprof replay`: real programs (compiled here
//! with `cc`) run under the preload library in scratch directories, their traces listed,
//! measured, replayed elsewhere, cut short, and refused when of another version.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use profile_store::Profile;

use crate::util::{compile_c, count};

/// What one run of `fsprof` did.
struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs `fsprof args...` in `dir`, without colour.
fn fsprof_in(dir: &Path, args: &[&str]) -> Out {
    let o = Command::new(env!("CARGO_BIN_EXE_fsprof"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("fsprof runs");
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// Asserts one line `fsprof: ...` on standard error and exit code 2; returns the line.
#[track_caller]
fn one_line_error(o: &Out) -> String {
    assert_eq!(o.code, 2, "stdout: {}\nstderr: {}", o.stdout, o.stderr);
    assert_eq!(o.stderr.lines().count(), 1, "{}", o.stderr);
    assert!(o.stderr.starts_with("fsprof: "), "{}", o.stderr);
    assert!(!o.stderr.contains("panicked"), "{}", o.stderr);
    o.stderr.trim_end().to_string()
}

fn read_profile(p: &Path) -> Profile {
    let text = std::fs::read_to_string(p).unwrap();
    if p.extension().is_some_and(|e| e == "json") {
        profile_store::json::parse(&text).unwrap()
    } else {
        profile_store::text::parse(&text).unwrap()
    }
}

/// A scratch directory with the reader program and three files of 16 KiB, 5000 and 0 bytes.
struct Work {
    tmp: tempfile::TempDir,
    reader: PathBuf,
}

impl Work {
    fn new() -> Work {
        let tmp = tempfile::tempdir().unwrap();
        let reader = compile_c(tmp.path(), "tools/tests/c/reader.c", &[]);
        std::fs::write(tmp.path().join("a"), vec![b'a'; 16384]).unwrap();
        std::fs::write(tmp.path().join("b"), vec![b'b'; 5000]).unwrap();
        std::fs::write(tmp.path().join("c"), b"").unwrap();
        Work { tmp, reader }
    }

    fn dir(&self) -> &Path {
        self.tmp.path()
    }

    fn path(&self, name: &str) -> String {
        self.dir().join(name).to_str().unwrap().to_string()
    }

    fn reader(&self) -> &str {
        self.reader.to_str().unwrap()
    }
}

#[test]
fn run_shows_the_user_layer_and_exits_with_the_programs_status() {
    let w = Work::new();
    let o = fsprof_in(w.dir(), &["run", "--", w.reader(), "a", "b", "c"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.starts_with("ran "), "{}", o.stdout);
    assert!(o.stdout.contains("exit status: 0"), "{}", o.stdout);
    assert!(
        o.stdout.contains("layer user: 3 operations, 15 calls"),
        "{}",
        o.stdout
    );
    // 16384 bytes: 4 reads and one at the end; 5000: 2 and 1; empty: 1.
    assert!(o.stdout.contains("SYS_READ: 9 calls"), "{}", o.stdout);
    assert!(o.stdout.contains("SYS_OPENAT: 3 calls"), "{}", o.stdout);
    for (script, want) in [
        ("exit 7", 7),
        ("kill -TERM $$", 143),
        ("kill -KILL $$", 137),
    ] {
        let o = fsprof_in(w.dir(), &["run", "--", "sh", "-c", script]);
        assert_eq!(o.code, want, "{script}: {}", o.stderr);
        assert!(o.stdout.contains("layer user:"), "{script}: {}", o.stdout);
    }
    // A program that does not exist: one line.
    let e = one_line_error(&fsprof_in(w.dir(), &["run", "--", "no-such-program-here"]));
    assert_eq!(e, "fsprof: no-such-program-here: command not found");
}

#[test]
fn run_writes_the_profile_to_a_file_in_text_or_json() {
    let w = Work::new();
    for name in ["p.fsprof", "p.json"] {
        let out = w.path(name);
        let o = fsprof_in(
            w.dir(),
            &["run", "--output", &out, "--", w.reader(), "a", "b"],
        );
        assert_eq!(o.code, 0, "{}", o.stderr);
        assert!(!o.stdout.contains("bkt"), "histograms shown: {}", o.stdout);
        assert!(
            o.stdout.contains(&format!("profile written to {out}")),
            "{}",
            o.stdout
        );
        let p = read_profile(Path::new(&out));
        assert_eq!(p.layers.len(), 1);
        assert_eq!(count(&p, "user", "SYS_OPENAT"), 2);
        assert_eq!(count(&p, "user", "SYS_READ"), 8);
        assert_eq!(count(&p, "user", "SYS_CLOSE"), 2);
        // Every tool reads it.
        let o = fsprof_in(w.dir(), &["summary", &out]);
        assert_eq!(o.code, 0, "{}", o.stderr);
        assert!(o.stdout.contains("SYS_READ"), "{}", o.stdout);
        let o = fsprof_in(w.dir(), &["show", &out, "--op", "sys_openat"]);
        assert_eq!(o.code, 0, "{}", o.stderr);
        assert!(o.stdout.contains("SYS_OPENAT: 2 calls"), "{}", o.stdout);
    }
}

#[test]
fn a_static_program_is_refused_in_one_line_and_not_run() {
    let w = Work::new();
    let stat = compile_c(w.dir(), "tools/tests/c/reader.c", &["-static"]);
    // Were it run, it would fail on the missing file and say so.
    let o = fsprof_in(w.dir(), &["run", "--", stat.to_str().unwrap(), "missing"]);
    let e = one_line_error(&o);
    assert!(e.contains("statically linked"), "{e}");
    assert!(e.contains("fsprof profile"), "{e}");
    assert!(o.stdout.is_empty(), "{}", o.stdout);
}

/// Whether the mount holding `dir` (the longest mount point above it) is `nosuid`.
fn on_a_nosuid_mount(dir: &Path) -> bool {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    info.lines()
        .filter_map(|l| {
            let mut f = l.split(' ');
            let point = f.nth(4)?;
            let opts = f.next()?;
            dir.starts_with(point)
                .then_some((point.len(), opts.split(',').any(|o| o == "nosuid")))
        })
        .max_by_key(|(len, _)| *len)
        .is_some_and(|(_, nosuid)| nosuid)
}

/// The dynamic loader ignores LD_PRELOAD for a set-user-ID program of another user (and
/// takes it from what the program starts): `fsprof run` used to report its 0 calls as if it
/// had made none. It now says why nothing was recorded; the same program without the bit is
/// recorded in full.
#[test]
fn a_set_user_id_program_is_run_and_its_unrecorded_calls_are_explained() {
    use std::os::unix::fs::PermissionsExt;
    let w = Work::new();
    let suid = w.dir().join("suid-reader");
    std::fs::copy(w.reader(), &suid).unwrap();
    if let Err(e) = std::os::unix::fs::chown(&suid, Some(65534), Some(65534)) {
        assert!(std::env::var("CI").is_err(), "chown under CI: {e}");
        eprintln!("SKIPPED: giving a program to another user needs root ({e})");
        return;
    }
    if on_a_nosuid_mount(w.dir()) {
        // The bit does nothing there: nothing to warn about, and this test cannot run.
        assert!(
            std::env::var("CI").is_err(),
            "{} is nosuid under CI",
            w.dir().display()
        );
        eprintln!("SKIPPED: {} is on a nosuid mount", w.dir().display());
        return;
    }
    // The other user reads the files there.
    std::fs::set_permissions(w.dir(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = |mode: u32| {
        std::fs::set_permissions(&suid, std::fs::Permissions::from_mode(mode)).unwrap();
        fsprof_in(w.dir(), &["run", "--", "./suid-reader", "a", "b", "c"])
    };
    let o = run(0o4755);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.contains(", 0 calls\n"), "{}", o.stdout);
    assert!(
        o.stdout.contains(
            "warning: ./suid-reader is set-user-ID (owner uid 65534, you are 0): the dynamic \
             loader ignores LD_PRELOAD for it"
        ),
        "{}",
        o.stdout
    );
    let o = run(0o755);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.contains(", 15 calls\n"), "{}", o.stdout);
    assert!(!o.stdout.contains("warning"), "{}", o.stdout);
}

/// Traces `sh -c 'reader a; reader b c; true'` in the work directory: three processes.
fn trace_two_readers(w: &Work) -> String {
    let trace = w.path("t.trace");
    let script = format!("{r} a; {r} b c; true", r = w.reader());
    let o = fsprof_in(
        w.dir(),
        &["run", "--trace", &trace, "--", "sh", "-c", &script],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stdout.contains(&format!("trace {trace}: ")),
        "{}",
        o.stdout
    );
    trace
}

#[test]
fn trace_show_lists_calls_like_strace_filtered_by_pid_and_call() {
    let w = Work::new();
    let trace = trace_two_readers(&w);
    let all = fsprof_in(w.dir(), &["trace", "show", &trace]);
    assert_eq!(all.code, 0, "{}", all.stderr);
    assert!(all.stderr.is_empty(), "{}", all.stderr);
    let opens = fsprof_in(w.dir(), &["trace", "show", &trace, "--call", "openat"]);
    assert_eq!(opens.code, 0, "{}", opens.stderr);
    let lines: Vec<&str> = opens.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", opens.stdout);
    assert!(
        lines[0].contains(" openat(AT_FDCWD, \"a\", O_RDONLY) = 3 <"),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].contains(" openat(AT_FDCWD, \"b\", O_RDONLY) = 3 <"),
        "{}",
        lines[1]
    );
    // pid/tid of each reader; the two readers are different processes.
    let pid = |l: &str| {
        l.split_whitespace()
            .nth(1)
            .unwrap()
            .split('/')
            .next()
            .unwrap()
            .to_string()
    };
    let (p1, p2) = (pid(lines[0]), pid(lines[1]));
    assert_ne!(p1, p2);
    assert_eq!(pid(lines[2]), p2);
    let second = fsprof_in(w.dir(), &["trace", "show", &trace, "--pid", &p2]);
    assert!(!second.stdout.is_empty());
    assert!(
        second.stdout.lines().all(|l| pid(l) == p2),
        "{}",
        second.stdout
    );
    // b (5000 bytes): two reads with data, one at the end; c (empty): one.
    let reads = fsprof_in(
        w.dir(),
        &[
            "trace",
            "show",
            &trace,
            "--pid",
            &p2,
            "--call",
            "SYS_READ,close",
        ],
    );
    let calls: Vec<&str> = reads
        .stdout
        .lines()
        .map(|l| {
            l.split_whitespace()
                .nth(2)
                .unwrap()
                .split('(')
                .next()
                .unwrap()
        })
        .collect();
    assert_eq!(
        calls,
        ["read", "read", "read", "close", "read", "close"],
        "{}",
        reads.stdout
    );
    assert!(
        reads.stdout.lines().next().unwrap().contains(" = 4096 <"),
        "{}",
        reads.stdout
    );
    // Every listed line is in the full listing, in the same order.
    let full: Vec<&str> = all.stdout.lines().collect();
    let mut at = 0;
    for l in reads.stdout.lines() {
        at += full[at..]
            .iter()
            .position(|f| *f == l)
            .expect("in the full listing")
            + 1;
    }
    let e = one_line_error(&fsprof_in(
        w.dir(),
        &["trace", "show", &trace, "--call", "frob"],
    ));
    assert!(e.contains("unknown call 'frob'"), "{e}");
}

#[test]
fn trace_stats_measures_the_trace_and_writes_its_response_time_profile() {
    let w = Work::new();
    let trace = w.path("t.trace");
    let prof = w.path("run.fsprof");
    let script = format!("{r} a; {r} b c; true", r = w.reader());
    let o = fsprof_in(
        w.dir(),
        &[
            "run", "--trace", &trace, "--output", &prof, "--", "sh", "-c", &script,
        ],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let out = w.path("stats.json");
    let o = fsprof_in(w.dir(), &["trace", "stats", &trace, "--output", &out]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let run = read_profile(Path::new(&prof));
    let stats = read_profile(Path::new(&out));
    // The overall layer holds exactly the calls the run counted.
    let calls = run.layer("user").unwrap().total_count();
    assert_eq!(stats.layer("user").unwrap().total_count(), calls);
    for op in &run.layer("user").unwrap().ops {
        assert_eq!(count(&stats, "user", &op.name), op.count, "{}", op.name);
    }
    // One layer per process: the shell and the two readers.
    let per_pid: Vec<&str> = stats
        .layers
        .iter()
        .map(|l| l.name.as_str())
        .filter(|n| n.starts_with("user@pid:"))
        .collect();
    assert_eq!(per_pid.len(), 3, "{per_pid:?}");
    let all = o.stdout.lines().find(|l| l.starts_with("all ")).unwrap();
    assert_eq!(
        all.split_whitespace().nth(1),
        Some(calls.to_string().as_str()),
        "{all}"
    );
    assert!(o.stdout.contains("3 processes"), "{}", o.stdout);
    let pids: Vec<&str> = o.stdout.lines().filter(|l| l.starts_with("pid ")).collect();
    assert_eq!(pids.len(), 3, "{}", o.stdout);
    // Each process named by what it ran: the shell, and the reader in two children it forked
    // (named after the shell too where they made calls before their exec).
    let reader = std::fs::canonicalize(w.reader()).unwrap();
    let ran_reader = format!("reader ({})", reader.display());
    assert_eq!(
        pids.iter().filter(|l| l.ends_with(&ran_reader)).count(),
        2,
        "{}",
        o.stdout
    );
    assert_eq!(
        pids.iter()
            .filter(|l| l.contains("  sh (") && !l.contains("reader"))
            .count(),
        1,
        "{}",
        o.stdout
    );
    let o = fsprof_in(
        w.dir(),
        &[
            "compare",
            "--layers",
            "user,user",
            &out,
            "--method",
            "totops",
        ],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
}

#[test]
fn a_trace_of_another_version_is_refused_in_one_line() {
    let w = Work::new();
    let trace = trace_two_readers(&w);
    let mut bytes = std::fs::read(&trace).unwrap();
    bytes[8..12].copy_from_slice(&7u32.to_le_bytes());
    let old = w.path("old.trace");
    std::fs::write(&old, bytes).unwrap();
    for args in [
        vec!["trace", "show", old.as_str()],
        vec!["trace", "stats", old.as_str()],
        vec!["replay", old.as_str(), "--in", "replayed"],
    ] {
        let e = one_line_error(&fsprof_in(w.dir(), &args));
        assert_eq!(
            e,
            format!("fsprof: {old}: trace format version 7; this fsprof reads versions 1 to 3"),
            "{args:?}"
        );
    }
    assert!(!w.dir().join("replayed").exists());
    // Not a trace at all.
    let e = one_line_error(&fsprof_in(w.dir(), &["trace", "show", &w.path("a")]));
    assert_eq!(e, format!("fsprof: {}: not an fsprof trace", w.path("a")));
}

#[test]
fn a_sigkilled_programs_trace_is_read_and_a_torn_tail_is_reported() {
    let w = Work::new();
    let trace = w.path("k.trace");
    // Reads in a loop until it is killed: kill -9 from inside, after enough calls that the
    // program has written chunks of its own.
    let script = format!(
        "i=0; while [ $i -lt 400 ]; do {r} a b; i=$((i+1)); done; kill -KILL $$",
        r = w.reader()
    );
    let o = fsprof_in(
        w.dir(),
        &["run", "--trace", &trace, "--", "sh", "-c", &script],
    );
    assert_eq!(o.code, 137, "{}", o.stderr);
    let whole = fsprof_in(w.dir(), &["trace", "show", &trace, "--call", "openat"]);
    assert_eq!(whole.code, 0, "{}", whole.stderr);
    assert!(whole.stderr.is_empty(), "{}", whole.stderr);
    assert_eq!(whole.stdout.lines().count(), 800);
    // The same trace cut in the middle of its last chunk, as a writer killed mid-write leaves
    // it: everything before the cut is read, and the cut reported.
    let bytes = std::fs::read(&trace).unwrap();
    let last = bytes
        .windows(4)
        .rposition(|c| c == b"FPCK")
        .expect("a chunk");
    let cut = w.path("cut.trace");
    std::fs::write(&cut, &bytes[..last + 100]).unwrap();
    let torn = fsprof_in(w.dir(), &["trace", "show", &cut, "--call", "openat"]);
    assert_eq!(torn.code, 0, "{}", torn.stderr);
    assert_eq!(torn.stderr.lines().count(), 1, "{}", torn.stderr);
    assert!(
        torn.stderr.starts_with(&format!(
            "fsprof: {cut}: torn tail at offset {last}: 100 bytes of an incomplete chunk"
        )),
        "{}",
        torn.stderr
    );
    let n = torn.stdout.lines().count();
    assert!(n < 800, "{n}");
    // What was read is the start of the whole listing.
    let full: Vec<&str> = whole.stdout.lines().collect();
    let listed: Vec<&str> = torn.stdout.lines().collect();
    assert!(listed.iter().all(|l| full.contains(l)));
    let stats = fsprof_in(w.dir(), &["trace", "stats", &cut]);
    assert_eq!(stats.code, 0, "{}", stats.stderr);
    assert!(
        stats.stdout.contains("torn tail at offset"),
        "{}",
        stats.stdout
    );
}

/// A directory holding what the replay workload expects: in/a, in/b, in/sub/c.
fn replay_workdir(root: &Path) -> PathBuf {
    let w = root.join("work");
    std::fs::create_dir_all(w.join("in/sub")).unwrap();
    std::fs::write(w.join("in/a"), vec![b'a'; 10000]).unwrap();
    std::fs::write(w.join("in/b"), vec![b'b'; 3000]).unwrap();
    std::fs::write(w.join("in/sub/c"), vec![b'c'; 100]).unwrap();
    w
}

/// Runs `prog` in `work` under `fsprof run --trace`, the trace and profile at `base` with
/// `.trace` and `.fsprof` added; returns the trace and the calls the profile counts.
fn traced_in(work: &Path, prog: &Path, base: &Path) -> (PathBuf, u64) {
    let trace = base.with_extension("trace");
    let traced = base.with_extension("fsprof");
    let o = fsprof_in(
        work,
        &[
            "run",
            "--trace",
            trace.to_str().unwrap(),
            "--output",
            traced.to_str().unwrap(),
            "--",
            prog.to_str().unwrap(),
        ],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let calls = read_profile(&traced).layer("user").unwrap().total_count();
    (trace, calls)
}

#[test]
fn replay_on_another_directory_matches_and_a_planted_difference_is_listed() {
    let tmp = tempfile::tempdir().unwrap();
    let prog = compile_c(tmp.path(), "user-trace/tests/c/replay.c", &[]);
    let work = replay_workdir(tmp.path());
    let (trace, traced_calls) = traced_in(&work, &prog, &tmp.path().join("w"));
    // The program's one write to standard output (a pipe here) is kept out of layer user.
    let pipe = read_profile(&tmp.path().join("w.fsprof"));
    let pipe = pipe
        .layer("user@fd:pipe")
        .expect("a layer of the calls on pipes");
    assert_eq!(pipe.op("SYS_WRITE").map(|o| o.count), Some(1));
    let t = trace.to_str().unwrap();
    // A trace too large for the memory allowed is refused while it is read, in one line,
    // before anything is created.
    let refused = tmp.path().join("replay-refused");
    let o = fsprof_in(
        tmp.path(),
        &[
            "replay",
            t,
            "--in",
            refused.to_str().unwrap(),
            "--max-memory",
            "0",
        ],
    );
    assert_eq!(o.code, 2, "{}{}", o.stdout, o.stderr);
    assert_eq!(o.stderr.lines().count(), 1, "{}", o.stderr);
    assert!(
        o.stderr
            .starts_with(&format!("fsprof: {t}: too large to replay here")),
        "{}",
        o.stderr
    );
    assert!(!refused.join("in").exists());
    for timing in ["fast", "recorded"] {
        let target = tmp.path().join(format!("replay-{timing}"));
        let out = tmp.path().join(format!("replay-{timing}.json"));
        let o = fsprof_in(
            tmp.path(),
            &[
                "replay",
                t,
                "--in",
                target.to_str().unwrap(),
                "--timing",
                timing,
                "--output",
                out.to_str().unwrap(),
            ],
        );
        assert_eq!(o.code, 0, "{timing}: {}{}", o.stdout, o.stderr);
        // No progress on a pipe.
        assert!(o.stderr.is_empty(), "{}", o.stderr);
        // Every call on a file is replayed: all of layer user (the write to standard output,
        // a pipe here, is in user@fd:pipe, and is not replayed).
        assert_eq!(
            o.stdout.lines().last().unwrap(),
            format!("replayed {traced_calls} calls, 0 mismatches"),
            "{}",
            o.stdout
        );
        let replayed = read_profile(&out);
        assert_eq!(replayed.layer("user").unwrap().total_count(), traced_calls);
        assert_eq!(
            std::fs::metadata(target.join("out/shared")).unwrap().len(),
            8192
        );
        assert_eq!(std::fs::metadata(target.join("in/a")).unwrap().len(), 10000);
    }
    // A difference planted in the target: the traced open of "missing" failed, here it works.
    let target = tmp.path().join("planted");
    std::fs::create_dir(&target).unwrap();
    std::fs::write(target.join("missing"), b"surprise").unwrap();
    let o = fsprof_in(
        tmp.path(),
        &[
            "replay",
            t,
            "--in",
            target.to_str().unwrap(),
            "--timing",
            "fast",
        ],
    );
    assert_eq!(o.code, 1, "{}{}", o.stdout, o.stderr);
    let listed: Vec<&str> = o
        .stdout
        .lines()
        .filter(|l| l.starts_with("mismatch: "))
        .collect();
    assert_eq!(listed.len(), 1, "{}", o.stdout);
    assert!(
        listed[0].contains(" open(\"missing\", O_RDONLY) = -1 ENOENT, replay "),
        "{}",
        listed[0]
    );
    assert_eq!(
        o.stdout.lines().last().unwrap(),
        format!("replayed {traced_calls} calls, 1 mismatches")
    );
    // A bad timing is refused in one line.
    let e = one_line_error(&fsprof_in(
        tmp.path(),
        &["replay", t, "--in", "x", "--timing", "slow"],
    ));
    assert!(e.contains("expected recorded or fast"), "{e}");
}

/// A trace far larger than the memory a replay may take is replayed all the same, streamed: its
/// calls are planned while the replay threads run, a bounded queue ahead of each (three threads
/// ordered on one directory, so queues fill and wait on each other).
#[test]
fn a_trace_larger_than_the_memory_allowed_is_replayed_streamed() {
    let tmp = tempfile::tempdir().unwrap();
    let prog = compile_c(tmp.path(), "user-trace/tests/c/many.c", &[]);
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let (trace, calls) = traced_in(&work, &prog, &tmp.path().join("m"));
    // 3 threads x 2,500 files x 5 calls, mkdir and rmdir: 37,502 calls, over 19 MiB at the
    // 550 bytes a call a replay held each call when it read the whole trace first. With 8 MiB
    // for 4 threads, each queue holds about 1,900 calls of its thread's 12,500.
    assert_eq!(calls, 37_502);
    for timing in ["fast", "recorded"] {
        let target = tmp.path().join(format!("replay-{timing}"));
        let o = fsprof_in(
            tmp.path(),
            &[
                "replay",
                trace.to_str().unwrap(),
                "--in",
                target.to_str().unwrap(),
                "--timing",
                timing,
                "--max-memory",
                "8",
            ],
        );
        assert_eq!(o.code, 0, "{timing}: {}{}", o.stdout, o.stderr);
        assert_eq!(
            o.stdout.lines().last().unwrap(),
            format!("replayed {calls} calls, 0 mismatches"),
            "{}",
            o.stdout
        );
        assert!(
            !target.join("d").exists(),
            "the replay removed what it made"
        );
    }
}

/// A shell wrapper that reads a pipe byte by byte (`read` in a loop) around a program that
/// reads a file: the reads of the pipe are not file-system time. They are kept out of layer
/// `user`, in `user@fd:pipe`, and `fsprof run` says so; `trace show` names the file of each
/// descriptor, and the pipe as a pipe.
#[test]
fn pipes_are_kept_apart_from_files_and_the_trace_names_each_descriptor() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("data"), "x".repeat(10_000)).unwrap();
    let script = "seq 1 300 | while read -r x; do :; done; cat data > /dev/null";
    let o = fsprof_in(
        tmp.path(),
        &[
            "run", "--trace", "t.trace", "-o", "t.fsprof", "--", "sh", "-c", script,
        ],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let line = o
        .stdout
        .lines()
        .find(|l| l.starts_with("not files, kept out of layer user: "))
        .unwrap_or_else(|| panic!("{}", o.stdout));
    assert!(
        line.contains("pipe ") && line.ends_with("(layers user@fd:KIND)"),
        "{line}"
    );
    let p = read_profile(&tmp.path().join("t.fsprof"));
    let reads = |layer: &str| {
        p.layer(layer)
            .and_then(|l| l.op("SYS_READ"))
            .map_or(0, |o| o.count)
    };
    // The shell's `read` takes a byte at a time: about a thousand reads of the pipe, against
    // the few of the file cat reads (and the libraries the programs load).
    assert!(
        reads("user@fd:pipe") >= 1000,
        "pipe: {}",
        reads("user@fd:pipe")
    );
    assert!(reads("user") < 100, "files: {}", reads("user"));
    // The write to /dev/null is a character device's.
    let chr = p.layer("user@fd:chr").expect("the write to /dev/null");
    assert!(chr.op("SYS_WRITE").is_some_and(|o| o.count >= 1));
    let shown = fsprof_in(tmp.path(), &["trace", "show", "t.trace"]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    let data = tmp.path().join("data").canonicalize().unwrap();
    assert!(
        shown.stdout.lines().any(|l| l.contains("read(0<pipe>, ")),
        "{}",
        shown.stdout
    );
    // cat opens "data" relative to its directory: the trace names it as it was opened.
    assert!(
        shown
            .stdout
            .lines()
            .any(|l| l.contains("read(3<data>, ")
                || l.contains(&format!("read(3<{}>", data.display()))),
        "{}",
        shown.stdout
    );
}
