//! The program loads, attaches and counts, in process scope: a statically linked command's
//! 100 preads are counted exactly, and nothing stays loaded once the tracer is closed.

use std::process::Command;
use std::sync::Arc;

use profile_store::Profiler;
use syscall_trace::{Config, Scope, Tracer};

fn root() -> bool {
    // SAFETY-free check: the effective uid from /proc.
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|v| v.split_whitespace().nth(1).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

const PREADS: &str = r#"
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0) return 1;
    char b[16];
    for (int i = 0; i < atoi(argv[2]); i++) if (pread(fd, b, sizeof b, 0) < 0) return 2;
    close(fd);
    return 0;
}
"#;

/// Compiles `source` with `gcc` and `flags` into `dir/name`. (syscall-trace's tests do not
/// use test-support, which depends on the daemons that depend on this crate.)
fn compile(dir: &std::path::Path, name: &str, source: &str, flags: &[&str]) -> std::path::PathBuf {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, source).unwrap();
    let bin = dir.join(name);
    let ok = Command::new("gcc")
        .args(["-O1", "-o"])
        .arg(&bin)
        .arg(&c)
        .args(flags)
        .status()
        .unwrap()
        .success();
    assert!(ok, "gcc {name}.c");
    bin
}

/// Whether BPF program `id` is loaded.
fn loaded(id: u32) -> bool {
    Command::new("bpftool")
        .args(["prog", "show", "id", &id.to_string()])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The programs of `ids` still loaded after up to 20 s (the kernel frees a detached program
/// from a work queue, after an RCU grace period).
fn gone(ids: &[u32]) -> Vec<u32> {
    for _ in 0..200 {
        if ids.iter().all(|&i| !loaded(i)) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    ids.iter().copied().filter(|&i| loaded(i)).collect()
}

#[test]
fn a_static_commands_preads_are_counted_exactly() {
    if !root() {
        eprintln!("SKIPPED: needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = compile(dir.path(), "p", PREADS, &["-static"]);
    let data = dir.path().join("data");
    std::fs::write(&data, vec![7u8; 4096]).unwrap();
    let tracer = Tracer::start(Config::new(Scope::Processes), None).unwrap();
    let ids = tracer.program_ids();
    assert_eq!(ids.len(), 5);
    assert!(ids.iter().all(|&i| loaded(i)));
    let profiler = Profiler::new(Vec::new());
    profiler.extend(tracer.clone() as Arc<dyn profile_store::Extension>);
    tracer.follow_next_child();
    let status = Command::new(&bin).arg(&data).arg("100").status().unwrap();
    tracer.stop_following_children();
    assert!(status.success());
    let p = profiler.snapshot();
    let l = p.layer("syscall").expect("syscall layer");
    assert_eq!(
        l.count("SYS_PREAD"),
        100,
        "{:?}",
        l.ops.iter().map(|o| (&o.name, o.count)).collect::<Vec<_>>()
    );
    for o in &l.ops {
        assert_eq!(o.bucket_sum(), o.count as u128, "{}", o.name);
    }
    assert_eq!(p.extra("syscall_lost"), Some("0"));
    tracer.close();
    assert_eq!(gone(&ids), Vec::<u32>::new(), "loaded after the close");
    // The profile stays readable after the close.
    assert_eq!(
        profiler
            .snapshot()
            .layer("syscall")
            .unwrap()
            .count("SYS_PREAD"),
        100
    );
}

const STATS: &str = r#"
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
int main(int argc, char **argv) {
    struct stat st;
    int n = atoi(argv[2]);
    for (int i = 0; i < n; i++) if (stat(argv[1], &st) < 0) return 1;
    /* The control files' names at the root are never counted. */
    for (int i = 0; i < n; i++) stat(argv[3], &st);
    int fd = open(argv[1], O_RDONLY);
    char b[8];
    for (int i = 0; i < 100; i++) pread(fd, b, sizeof b, 0);
    if (chdir(argv[4]) == 0) for (int i = 0; i < 10; i++) stat("f", &st);
    return 0;
}
"#;

/// A private tmpfs, unmounted on drop.
struct Tmpfs(std::path::PathBuf);

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// Mount scope over a tmpfs of its own: absolute paths under it, descriptors on it and
/// relative paths from a working directory on it count; its control names do not.
#[test]
fn mount_scope_counts_the_files_of_one_superblock() {
    use std::os::unix::fs::MetadataExt;
    if !root() {
        eprintln!("SKIPPED: needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = compile(dir.path(), "stats", STATS, &["-static"]);
    let mnt = dir.path().join("m");
    std::fs::create_dir(&mnt).unwrap();
    assert!(
        Command::new("mount")
            .args(["-t", "tmpfs", "none"])
            .arg(&mnt)
            .status()
            .unwrap()
            .success()
    );
    let _guard = Tmpfs(mnt.clone());
    std::fs::create_dir(mnt.join("d")).unwrap();
    std::fs::write(mnt.join("d/f"), b"hello").unwrap();
    std::fs::write(mnt.join(".fsprof"), b"x").unwrap();
    let tracer = Tracer::start(
        Config::new(Scope::Mount {
            mnt: mnt.clone(),
            control_names: vec![".fsprof".into(), ".fsprof.json".into()],
            control_ino_min: u64::MAX - 15,
        }),
        None,
    )
    .unwrap();
    let dev = std::fs::metadata(&mnt).unwrap().dev();
    tracer
        .set_mount(kernel_trace::devices::Dev::from_stat(dev))
        .unwrap();
    let profiler = Profiler::new(Vec::new());
    profiler.extend(tracer.clone() as Arc<dyn profile_store::Extension>);
    let status = Command::new(&bin)
        .arg(mnt.join("d/f"))
        .arg("1000")
        .arg(mnt.join(".fsprof"))
        .arg(mnt.join("d"))
        .status()
        .unwrap();
    assert!(status.success());
    let p = profiler.snapshot();
    let l = p.layer("syscall").unwrap();
    let counts: Vec<(&str, u64)> = l.ops.iter().map(|o| (o.name.as_str(), o.count)).collect();
    // glibc's stat is newfstatat: 1,000 absolute and 10 relative.
    assert_eq!(l.count("SYS_FSTATAT"), 1010, "{counts:?}");
    assert_eq!(l.count("SYS_PREAD"), 100, "{counts:?}");
    assert_eq!(l.count("SYS_OPENAT"), 1, "{counts:?}");
    assert_eq!(l.count("SYS_CHDIR"), 1, "{counts:?}");
    tracer.close();
}

const LATE: &str = r#"
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0) return 1;
    char b[16], c;
    for (int i = 0; i < 10; i++) pread(fd, b, sizeof b, 0);
    printf("ready\n");
    fflush(stdout);
    if (read(0, &c, 1) != 1) return 2;
    for (int i = 0; i < 100; i++) if (pread(fd, b, sizeof b, 0) < 0) return 3;
    return 0;
}
"#;

/// A process followed while it runs is counted from then on, though its task already told
/// the program it was not followed (the answer each task's storage keeps): its 10 preads
/// before are not counted, its 100 after are, exactly.
#[test]
fn a_running_process_followed_later_is_counted_from_then_on() {
    use std::io::{BufRead, BufReader, Write};
    if !root() {
        eprintln!("SKIPPED: needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = compile(dir.path(), "late", LATE, &["-static"]);
    let data = dir.path().join("data");
    std::fs::write(&data, vec![7u8; 64]).unwrap();
    let tracer = Tracer::start(Config::new(Scope::Processes), None).unwrap();
    let profiler = Profiler::new(Vec::new());
    profiler.extend(tracer.clone() as Arc<dyn profile_store::Extension>);
    let mut child = Command::new(&bin)
        .arg(&data)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "ready\n");
    tracer.follow_process(child.id()).unwrap();
    child.stdin.take().unwrap().write_all(b"g").unwrap();
    assert!(child.wait().unwrap().success());
    let p = profiler.snapshot();
    let l = p.layer("syscall").expect("syscall layer");
    assert_eq!(
        l.count("SYS_PREAD"),
        100,
        "{:?}",
        l.ops.iter().map(|o| (&o.name, o.count)).collect::<Vec<_>>()
    );
    tracer.close();
}
