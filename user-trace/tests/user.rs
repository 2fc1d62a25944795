//! Runs real C programs (compiled here with `cc`) under the preload library and checks what
//! it recorded: exact counts, processes, re-entrancy, traces, static programs, replay.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use profile_store::Profile;
use user_trace::{RunConfig, RunOutcome, run};

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
    let layer = p.layer("user").expect("user layer");
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
