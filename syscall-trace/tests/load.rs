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

fn ours() -> usize {
    let out = Command::new("bpftool").args(["prog", "list"]).output();
    match out {
        Ok(o) => String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| l.contains(" name fsprof_"))
            .count(),
        Err(_) => 0,
    }
}

/// Whether the count of our programs is back to `n` within a few seconds: the kernel frees a
/// detached program from a work queue, after an RCU grace period.
fn gone(n: usize) -> bool {
    for _ in 0..100 {
        if ours() == n {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    false
}

#[test]
fn a_static_commands_preads_are_counted_exactly() {
    if !root() {
        eprintln!("SKIPPED: needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("p.c");
    std::fs::write(&src, PREADS).unwrap();
    let bin = dir.path().join("p");
    let cc = Command::new("gcc")
        .arg("-static")
        .arg("-O1")
        .arg("-o")
        .arg(&bin)
        .arg(&src)
        .status()
        .unwrap();
    assert!(cc.success());
    let data = dir.path().join("data");
    std::fs::write(&data, vec![7u8; 4096]).unwrap();
    let before = ours();
    let tracer = Tracer::start(Config::new(Scope::Processes), None).unwrap();
    assert_eq!(ours(), before + 5);
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
    assert!(gone(before), "still loaded after the close");
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
