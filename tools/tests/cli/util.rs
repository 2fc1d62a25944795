//! Helpers: run the built `fsprof`, compare with golden files, build synthetic profiles.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use profile_store::{ClockKind, Layer, OpProfile, Profile, Resolution};

/// What one run of `fsprof` did.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Asserts success and returns standard output.
    #[track_caller]
    pub fn ok(self) -> String {
        assert_eq!(self.code, 0, "fsprof failed: {}", self.stderr);
        self.stdout
    }

    /// Asserts an error reported as one line `fsprof: ...` with exit code `code`; returns it.
    #[track_caller]
    pub fn one_line_error(&self, code: i32) -> &str {
        assert_eq!(
            self.code, code,
            "stdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        let lines: Vec<&str> = self.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "not one line: {:?}", self.stderr);
        assert!(lines[0].starts_with("fsprof: "), "{:?}", lines[0]);
        assert!(!self.stderr.contains("panicked"), "{}", self.stderr);
        lines[0]
    }
}

/// Runs `fsprof args...` with `stdin` as standard input, and `NO_COLOR=1`.
pub fn fsprof_with_input(args: &[&str], stdin: &[u8]) -> Run {
    spawn(args, stdin, Some("1"))
}

/// Runs `fsprof args...` with `NO_COLOR` unset, so only the terminal check stands between a
/// pipe and colour.
pub fn fsprof_without_no_color(args: &[&str]) -> Run {
    spawn(args, b"", None)
}

fn spawn(args: &[&str], stdin: &[u8], no_color: Option<&str>) -> Run {
    // Run in the golden directory, so golden outputs name their inputs without a path.
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fsprof"));
    cmd.args(args)
        .current_dir(golden_path(""))
        .env_remove("RUST_LOG");
    match no_color {
        Some(v) => cmd.env("NO_COLOR", v),
        None => cmd.env_remove("NO_COLOR"),
    };
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("fsprof starts");
    // A command may exit without reading its input (a usage error): a closed pipe is fine.
    match child.stdin.take().unwrap().write_all(stdin) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => panic!("stdin not written: {e}"),
        _ => {}
    }
    let out = child.wait_with_output().expect("fsprof runs");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8(out.stdout).expect("UTF-8 stdout"),
        stderr: String::from_utf8(out.stderr).expect("UTF-8 stderr"),
    }
}

/// Runs `fsprof args...` with empty standard input.
pub fn fsprof(args: &[&str]) -> Run {
    fsprof_with_input(args, b"")
}

/// A file of the golden directory.
pub fn golden_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name)
}

/// The path of an input profile in the golden directory, as a string for arguments.
pub fn input(name: &str) -> String {
    golden_path(name).to_str().unwrap().to_string()
}

/// Compares `actual` with the golden file `name`; with `FSPROF_BLESS=1` rewrites it instead.
#[track_caller]
pub fn golden(name: &str, actual: &str) {
    let path = golden_path(name);
    if std::env::var_os("FSPROF_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with FSPROF_BLESS=1 to create)",
            path.display()
        )
    });
    if want != actual {
        let first = want
            .lines()
            .zip(actual.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(want.lines().count().min(actual.lines().count()));
        panic!(
            "{} differs from the output at line {}:\n--- golden\n{}\n--- actual\n{}\n(FSPROF_BLESS=1 regenerates)",
            path.display(),
            first + 1,
            want.lines().nth(first).unwrap_or("<end>"),
            actual.lines().nth(first).unwrap_or("<end>")
        );
    }
}

/// A profile with one layer `fuse` at resolution 1, clock 1 GHz, and the operations given as
/// (name, [(bucket, calls)]); each call's latency is taken as its bucket's mid-point.
pub fn synthetic(ops: &[(&str, &[(usize, u64)])]) -> Profile {
    let mut layer = Layer::new("fuse", Resolution::ONE);
    for (name, buckets) in ops {
        let mut o = OpProfile::new(*name, 64, 1);
        for &(b, n) in *buckets {
            o.epochs[0][b] += n;
            o.count += n;
            o.total += n * (3u64 << b) / 2;
        }
        layer.ops.push(o);
    }
    Profile {
        started_unix_ns: Some(1_795_000_000_000_000_000),
        clock: Some(ClockKind::Tsc),
        cycles_per_sec: Some(1_000_000_000),
        invariant_tsc: Some(true),
        layers: vec![layer],
        ..Profile::default()
    }
}

/// Writes `p` as a text profile named `name` in `dir`; returns the path as a string.
pub fn write_profile(dir: &Path, name: &str, p: &Profile) -> String {
    let path = dir.join(name);
    std::fs::write(&path, profile_store::text::write(p)).unwrap();
    path.to_str().unwrap().to_string()
}

/// `buckets` moved `by` buckets up.
pub fn shifted(buckets: &[(usize, u64)], by: usize) -> Vec<(usize, u64)> {
    buckets.iter().map(|&(b, n)| (b + by, n)).collect()
}

/// Asserts that every line of `out` fits in `width` columns.
#[track_caller]
pub fn assert_fits(out: &str, width: usize) {
    for line in out.lines() {
        assert!(
            line.chars().count() <= width,
            "wider than {width} columns ({}): {line}",
            line.chars().count()
        );
    }
}

/// The fast path of the synthetic bimodal operation.
pub const FAST: &[(usize, u64)] = &[(9, 300), (10, 2000), (11, 700), (12, 40)];

/// Its slow path.
pub const SLOW: &[(usize, u64)] = &[(20, 15), (21, 90), (22, 60), (23, 4)];

/// Both paths.
pub fn bimodal() -> Vec<(usize, u64)> {
    FAST.iter().chain(SLOW).copied().collect()
}

/// Compiles the C program `src` (relative to the workspace root, e.g.
/// `tools/tests/c/reader.c`) into `dir` with the fortified entry points, as Debian builds;
/// `extra` are more flags (`-static`). Returns the program.
pub fn compile_c(dir: &Path, src: &str, extra: &[&str]) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(src);
    let name = src.file_stem().unwrap().to_str().unwrap();
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

/// The count of operation `op` in layer `layer` of profile `p` (0 when absent).
pub fn count(p: &Profile, layer: &str, op: &str) -> u64 {
    p.layer(layer)
        .unwrap_or_else(|| panic!("no layer {layer}"))
        .op(op)
        .map_or(0, |o| o.count)
}
