//! `fsprof profile --no-mount DIR -- CMD`: no FUSE mount is made; the command's calls and its
//! descendants' are counted exactly in the `syscall` layer, a statically linked program's too;
//! a dynamically linked workload's counts equal the user layer's call for call; the findings,
//! files, slow records, stack, why and diff read the profile; and without the right to load
//! BPF the run is refused in one line.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use profile_store::Profile;

use crate::util::count;

/// Whether this process may load BPF programs (root: the suite's CI runs as root).
fn privileged() -> bool {
    let root = std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .is_some_and(|v| v.split_whitespace().nth(1) == Some("0"))
    });
    if !root {
        eprintln!("SKIPPED: --no-mount needs root (CAP_BPF and CAP_PERFMON)");
    }
    root
}

/// 100 preads of argv[1] (argv[2] times over), then the file system type of the working
/// directory into argv[3]: a FUSE mount would say 0x65735546.
const PREADS: &str = r#"
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/vfs.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0) return 1;
    char b[32];
    for (int i = 0; i < 100 * atoi(argv[2]); i++) if (pread(fd, b, sizeof b, 0) < 0) return 2;
    close(fd);
    struct statfs s;
    if (statfs(".", &s) != 0) return 3;
    FILE *f = fopen(argv[3], "w");
    fprintf(f, "%lx\n", (unsigned long)s.f_type);
    return fclose(f) == 0 ? 0 : 4;
}
"#;

/// Calls the C library makes as the system call of the same name: N of each.
const WORKLOAD: &str = r#"
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int n = atoi(argv[1]);
    char p[64], q[64], l[64];
    int fd = open("w.dat", O_RDWR | O_CREAT, 0644);
    for (int i = 0; i < n; i++) {
        snprintf(p, sizeof p, "d%d", i);
        snprintf(q, sizeof q, "e%d", i);
        snprintf(l, sizeof l, "l%d", i);
        if (pwrite(fd, "abcd", 4, i * 4) != 4) return 1;
        fsync(fd);
        fdatasync(fd);
        lseek(fd, 0, SEEK_SET);
        ftruncate(fd, 8);
        mkdir(p, 0755);
        rename(p, q);
        rmdir(q);
        symlink("w.dat", l);
        char buf[64];
        readlink(l, buf, sizeof buf);
        unlink(l);
        struct statx sx;
        statx(AT_FDCWD, "w.dat", 0, STATX_BASIC_STATS, &sx);
        chmod("w.dat", 0644);
        truncate("w.dat", 4);
    }
    close(fd);
    return unlink("w.dat");
}
"#;

/// The calls the workload makes that neither the dynamic loader nor the preload library
/// makes: what both levels see.
const SHARED: &[&str] = &[
    "SYS_PWRITE",
    "SYS_FSYNC",
    "SYS_FDATASYNC",
    "SYS_LSEEK",
    "SYS_FTRUNCATE",
    "SYS_MKDIR",
    "SYS_RENAME",
    "SYS_RMDIR",
    "SYS_SYMLINK",
    "SYS_READLINK",
    "SYS_UNLINK",
    "SYS_STATX",
    "SYS_CHMOD",
    "SYS_TRUNCATE",
];

fn run(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_fsprof"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .expect("fsprof runs");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn load(p: &Path) -> Profile {
    profile_store::text::parse(&std::fs::read_to_string(p).unwrap()).unwrap()
}

struct Work {
    tmp: tempfile::TempDir,
}

impl Work {
    fn new() -> Work {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("data"), vec![b'd'; 4096]).unwrap();
        Work { tmp }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    fn s(&self, rel: &str) -> String {
        self.path(rel).display().to_string()
    }
}

#[test]
fn no_mount_is_made_and_a_static_programs_preads_are_counted_exactly() {
    if !privileged() {
        return;
    }
    let w = Work::new();
    let prog = test_support::compile_c(w.tmp.path(), "preads", PREADS, &["-static"]);
    let (save, fstype) = (w.s("p.fsprof"), w.s("fstype"));
    let (code, out, err) = run(
        w.tmp.path(),
        &[
            "profile",
            "--no-mount",
            "--save",
            &save,
            &w.s(""),
            "--",
            prog.to_str().unwrap(),
            "data",
            "1",
            &fstype,
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    let ftype = std::fs::read_to_string(w.path("fstype")).unwrap();
    assert_ne!(ftype.trim(), "65735546", "the command ran on a FUSE mount");
    let p = load(&w.path("p.fsprof"));
    assert!(
        p.layer("fuse").is_none(),
        "{:?}",
        p.layers.iter().map(|l| &l.name).collect::<Vec<_>>()
    );
    assert_eq!(count(&p, "syscall", "SYS_PREAD"), 100);
    assert_eq!(p.extra("syscall_scope"), Some("processes"));
    assert_eq!(p.extra("syscall_lost"), Some("0"));
    assert!(out.contains("Findings, layer syscall"), "{out}");
    // Followed through a shell and its children: three runs of the program, 300 preads (a
    // descendant still running when the command ends is counted until then).
    let (code, out, err) = run(
        w.tmp.path(),
        &[
            "profile",
            "--no-mount",
            "--save",
            &save,
            &w.s(""),
            "--",
            "sh",
            "-c",
            &format!(
                "for i in 1 2; do {} data 1 {fstype}; done; {} data 1 {fstype} & wait",
                prog.display(),
                prog.display()
            ),
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    let p = load(&w.path("p.fsprof"));
    // (The shell's dynamic loader makes preads of its own.)
    assert_eq!(count(&p, "syscall@comm:preads", "SYS_PREAD"), 300);
}

#[test]
fn a_dynamic_workloads_counts_equal_the_user_layers_call_for_call() {
    if !privileged() {
        return;
    }
    let w = Work::new();
    let prog = test_support::compile_c(w.tmp.path(), "workload", WORKLOAD, &[]);
    let save = w.s("u.fsprof");
    let (code, out, err) = run(
        w.tmp.path(),
        &[
            "profile",
            "--no-mount",
            "--user",
            "--findings-only",
            "--save",
            &save,
            &w.s(""),
            "--",
            prog.to_str().unwrap(),
            "50",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    let p = load(&w.path("u.fsprof"));
    for op in SHARED {
        assert_eq!(
            (op, count(&p, "syscall", op)),
            (op, count(&p, "user", op)),
            "user and syscall disagree"
        );
        // (One more unlink: the workload's last call.)
        let n = if *op == "SYS_UNLINK" { 51 } else { 50 };
        assert_eq!(count(&p, "user", op), n, "{op}");
    }
    // `fsprof compare` lines the two layers up call by call.
    let (code, out, _) = run(
        w.tmp.path(),
        &["compare", "--layers", "user,syscall", &save],
    );
    assert_eq!(code, 0);
    let line = out
        .lines()
        .find(|l| l.starts_with("SYS_PWRITE"))
        .expect("SYS_PWRITE row");
    assert!(
        line.split_whitespace().nth(3) == Some("0.0"),
        "totops: {line}"
    );
}

#[test]
fn the_tools_read_a_profile_made_without_a_mount() {
    if !privileged() {
        return;
    }
    let w = Work::new();
    let prog = test_support::compile_c(w.tmp.path(), "preads", PREADS, &["-static"]);
    let (save, log, report) = (w.s("t.fsprof"), w.s("slow.log"), w.s("r.html"));
    let (code, out, err) = run(
        w.tmp.path(),
        &[
            "profile",
            "--no-mount",
            "--slow",
            "0s",
            "--slow-log",
            &log,
            "--report",
            &report,
            "--save",
            &save,
            &w.s(""),
            "--",
            prog.to_str().unwrap(),
            "data",
            "3",
            "ft",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("slowest requests:"), "{out}");
    let p = load(&w.path("t.fsprof"));
    assert!(p.layer("syscall@comm:preads").is_some(), "per-caller layer");
    let (code, files, _) = run(w.tmp.path(), &["files", &save]);
    assert_eq!(code, 0);
    assert!(files.contains("/data"), "{files}");
    let (code, slow, _) = run(w.tmp.path(), &["slow", &log]);
    assert_eq!(code, 0);
    assert!(
        slow.lines().filter(|l| l.contains("SYS_PREAD")).count() >= 300,
        "{slow}"
    );
    let (code, slowest, _) = run(w.tmp.path(), &["slow", &save]);
    assert_eq!(code, 0);
    assert!(slowest.contains("SYS_"), "{slowest}");
    let (code, stack, _) = run(w.tmp.path(), &["stack", &save, "SYS_PREAD"]);
    assert_eq!(code, 0, "{stack}");
    assert!(stack.contains("syscall"), "{stack}");
    let (code, diff, _) = run(w.tmp.path(), &["diff", &save, &save]);
    assert_eq!(code, 0, "{diff}");
    assert!(std::fs::metadata(w.path("r.html")).unwrap().len() > 1000);
    // why: without a block level, it says what to record.
    let (code, _, err) = run(w.tmp.path(), &["why", &save, "SYS_PREAD"]);
    assert_ne!(code, 0, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--kernel"), "{err}");
}

#[test]
fn an_unprivileged_user_is_refused_in_one_line() {
    if !privileged() {
        return;
    }
    let w = Work::new();
    for prefix in [
        &[
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--",
        ][..],
        &[
            "setpriv",
            "--inh-caps=-bpf,-perfmon,-sys_admin",
            "--bounding-set=-bpf,-perfmon,-sys_admin",
            "--",
        ][..],
    ] {
        let marker = w.path("ran");
        let o = Command::new(prefix[0])
            .args(&prefix[1..])
            .arg(env!("CARGO_BIN_EXE_fsprof"))
            .args(["profile", "--no-mount", "/tmp", "--", "touch"])
            .arg(&marker)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("CAP_BPF and CAP_PERFMON"), "{err}");
        assert!(!marker.exists(), "the command ran");
    }
}

#[test]
fn options_that_need_a_mount_are_refused() {
    for extra in [
        &["--lower"][..],
        &["--uring"],
        &["--inject", "op=read,every=1,errno=EIO"],
    ] {
        let mut args = vec!["profile", "--no-mount"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["/tmp", "--", "true"]);
        let (code, _, err) = run(Path::new("/"), &args);
        assert_eq!(code, 2, "{extra:?}: {err}");
        assert!(err.contains("--no-mount"), "{err}");
    }
    let (code, _, err) = run(Path::new("/"), &["profile", "--no-mount", "/tmp"]);
    assert_eq!(code, 2, "{err}");
}

/// `--kernel` adds the block layers of DIR's devices, and `why` sets the syscall level's
/// peaks against them: reads after the page cache was dropped reach the device, and `why`
/// names its block level.
#[test]
fn why_sets_a_no_mount_profile_against_the_block_level() {
    if !privileged() {
        return;
    }
    let w = Work::new();
    for i in 0..20 {
        std::fs::write(w.path(&format!("f{i}")), vec![i as u8; 256 << 10]).unwrap();
    }
    let st = Command::new("sync").status().unwrap();
    assert!(st.success());
    std::fs::write("/proc/sys/vm/drop_caches", "3").unwrap();
    let save = w.s("k.fsprof");
    let (code, out, err) = run(
        w.tmp.path(),
        &[
            "profile",
            "--no-mount",
            "--kernel",
            "--findings-only",
            "--save",
            &save,
            &w.s(""),
            "--",
            "sh",
            "-c",
            "cat f* > /dev/null",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    let p = load(&w.path("k.fsprof"));
    let Some(block) = p.layers.iter().find(|l| l.name.starts_with("block@dev:")) else {
        eprintln!(
            "SKIPPED: {} has no block device ({err})",
            w.tmp.path().display()
        );
        return;
    };
    let reads: u64 = block
        .ops
        .iter()
        .filter(|o| o.name.starts_with("BLK_READ"))
        .map(|o| o.count)
        .sum();
    let ops: Vec<_> = block.ops.iter().map(|o| (&o.name, o.count)).collect();
    assert!(reads > 0, "no block read after drop_caches: {ops:?}");
    assert!(count(&p, "syscall", "SYS_READ") >= 40, "{out}");
    let (code, why, err) = run(w.tmp.path(), &["why", &save, "SYS_READ"]);
    assert_eq!(code, 0, "{err}");
    assert!(why.contains(&block.name), "{why}");
    assert!(why.contains("peak 1"), "{why}");
}
