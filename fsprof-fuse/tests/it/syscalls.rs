//! `--syscalls`: the `syscall` layer, timed in the kernel by BPF, on both transports. A
//! statically linked program's calls are counted exactly while the kernel's caches keep most
//! of them from the daemon; `--passthrough` reads are timed there though none reaches the
//! daemon; an injected delay is found at the syscall level with fuse's count; nothing stays
//! loaded after an unmount or a SIGKILL; without the right to load BPF the mount is refused
//! in one line.

use std::process::Command;

use profile_store::Profile;

use crate::fixture::{Fixture, Transport, is_mounted};

/// 100 preads of argv[1], then argv[2] stats of it, then a close.
const PREADS_AND_STATS: &str = r#"
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0) return 1;
    char b[64];
    for (int i = 0; i < 100; i++) if (pread(fd, b, sizeof b, 0) < 0) return 2;
    struct stat st;
    for (int i = 0; i < atoi(argv[2]); i++) if (stat(argv[1], &st) < 0) return 3;
    return close(fd) == 0 ? 0 : 4;
}
"#;

/// Waits until the syscall level counts calls on the mount (a `-f` daemon's mount point exists
/// a moment before its device is known to the level), then resets the profile.
fn live(f: &Fixture) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        std::fs::metadata(&f.mnt).unwrap();
        if count(&f.profile(), "syscall", "SYS_STATX") > 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the syscall level never counted"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    f.reset();
}

fn count(p: &Profile, layer: &str, op: &str) -> u64 {
    p.layer(layer).map_or(0, |l| l.count(op))
}

fn ops(p: &Profile, layer: &str) -> Vec<(String, u64)> {
    test_support::op_counts(p, layer)
}

/// A statically linked program (no preload library can see it): its 100 preads and 1,000
/// stats are in `syscall` exactly, while the kernel answers the stats from its attribute
/// cache (`--cache normal`) and the daemon sees at most 20 LOOKUPs and GETATTRs.
fn static_programs_calls_are_counted_exactly(t: Transport) {
    let Some(f) = Fixture::mounted("sys-static", t, &["--syscalls"]) else {
        return;
    };
    let bin = test_support::compile_c(&f.root, "pstat", PREADS_AND_STATS, &["-static"]);
    std::fs::write(f.m("data"), vec![b'x'; 4096]).unwrap();
    // Whatever the mount's start and the write did stays out of what is counted.
    live(&f);
    let st = Command::new(&bin)
        .arg(f.m("data"))
        .arg("1000")
        .status()
        .unwrap();
    assert!(st.success(), "{st}");
    let p = f.profile_when(|p| count(p, "syscall", "SYS_CLOSE") >= 1);
    assert_eq!(
        count(&p, "syscall", "SYS_PREAD"),
        100,
        "{:?}",
        ops(&p, "syscall")
    );
    // glibc's stat is the newfstatat system call.
    assert_eq!(
        count(&p, "syscall", "SYS_FSTATAT"),
        1000,
        "{:?}",
        ops(&p, "syscall")
    );
    assert_eq!(
        count(&p, "syscall", "SYS_OPENAT"),
        1,
        "{:?}",
        ops(&p, "syscall")
    );
    assert_eq!(
        count(&p, "syscall", "SYS_CLOSE"),
        1,
        "{:?}",
        ops(&p, "syscall")
    );
    let meta = count(&p, "fuse", "OP_LOOKUP") + count(&p, "fuse", "OP_GETATTR");
    assert!(meta <= 20, "{meta} LOOKUP+GETATTR: {:?}", ops(&p, "fuse"));
    let l = p.layer("syscall").unwrap();
    for o in &l.ops {
        assert_eq!(o.bucket_sum(), o.count as u128, "{}", o.name);
    }
    assert_eq!(p.extra("syscall_trace"), Some("bpf"));
    assert_eq!(p.extra("syscall_lost"), Some("0"), "{:?}", l.extra);
    assert_eq!(p.extra("syscall_unread_paths"), Some("0"));
    let key = |k: &str| {
        l.extra
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(key("level"), Some("syscall"));
    assert_eq!(key("scope"), Some("mount"));
    // The tool reading .fsprof again and again is not counted (control files).
    for _ in 0..5 {
        test_support::read_profile(&f.mnt);
    }
    let again = f.profile();
    assert_eq!(ops(&again, "syscall"), ops(&p, "syscall"));
}

/// `--passthrough --syscalls`: dd's 1,000 reads of 4 KiB are timed in `syscall`, per file and
/// per process, and none reaches the daemon.
fn passthrough_reads_are_timed_in_syscall(t: Transport) {
    let Some(mut f) = Fixture::new("sys-passthrough", t) else {
        return;
    };
    std::fs::write(f.l("big"), vec![b'p'; 4 << 20]).unwrap();
    f.mount(&["--passthrough", "--syscalls", "--hot-files", "--by", "comm"]);
    live(&f);
    let out = Command::new("dd")
        .arg(format!("if={}", f.m("big").display()))
        .args(["of=/dev/null", "bs=4096", "count=1000"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let p = f.profile_when(|p| count(p, "syscall", "SYS_CLOSE") >= 1);
    assert_eq!(
        count(&p, "syscall", "SYS_READ"),
        1000,
        "{:?}",
        ops(&p, "syscall")
    );
    assert_eq!(count(&p, "fuse", "OP_READ"), 0, "{:?}", ops(&p, "fuse"));
    assert_eq!(p.extra("passthrough"), Some("syscall"));
    assert_eq!(p.extra("not_profiled"), None);
    assert_eq!(count(&p, "syscall@comm:dd", "SYS_READ"), 1000);
    let hot = p
        .sections
        .iter()
        .find(|s| s.name == "hot_files" && s.attr("layer") == Some("syscall"))
        .expect("the syscall level's hot files");
    let first = hot
        .lines
        .iter()
        .find(|l| l.starts_with("by=calls rank=1 "))
        .expect("a hot file");
    assert!(first.ends_with("path=/big"), "{first}");
    let value: u64 = first
        .split(' ')
        .find_map(|f| f.strip_prefix("value="))
        .and_then(|v| v.parse().ok())
        .unwrap();
    assert!(value >= 1000, "{first}");
}

/// An injected delay of every MKDIR is found at the syscall level: as many calls at or above
/// the delay as the fuse layer has.
fn an_injected_delay_is_found_at_the_syscall_level(t: Transport) {
    let Some(f) = Fixture::mounted(
        "sys-inject",
        t,
        &["--syscalls", "--inject", "op=mkdir,every=1,delay=4ms"],
    ) else {
        return;
    };
    live(&f);
    for i in 0..20 {
        std::fs::create_dir(f.m(&format!("d{i}"))).unwrap();
    }
    let p = f.profile_when(|p| {
        count(p, "fuse", "OP_MKDIR") == 20 && count(p, "syscall", "SYS_MKDIR") == 20
    });
    let floor = 0.004 * p.cycles_per_sec.expect("a clock rate") as f64;
    // Calls that were surely faster than the delay: in buckets that end at or below it.
    let fast = |layer: &str, op: &str| {
        let l = p.layer(layer).unwrap();
        let o = l.op(op).unwrap();
        let n: u64 = (0..l.buckets)
            .filter(|&b| l.resolution.range(b).1 <= floor)
            .map(|b| o.merged()[b])
            .sum();
        (o.count, n)
    };
    assert_eq!(fast("fuse", "OP_MKDIR"), (20, 0));
    assert_eq!(
        fast("syscall", "SYS_MKDIR"),
        (20, 0),
        "{:?} {:?}",
        p.layer("syscall").unwrap().extra,
        p.extra
    );
}

transports!(
    static_programs_calls_are_counted_exactly,
    passthrough_reads_are_timed_in_syscall,
    an_injected_delay_is_found_at_the_syscall_level
);

/// The programs a daemon loaded are gone after its unmount, and after a SIGKILL.
#[test]
fn nothing_stays_loaded_after_an_unmount_or_a_kill() {
    let Some(mut f) = Fixture::new("sys-cleanup", Transport::Classic) else {
        return;
    };
    f.mount(&["--syscalls"]);
    let ids = test_support::bpf_programs_of(f.pid());
    assert_eq!(ids.len(), 5, "the daemon's programs: {ids:?}");
    assert!(ids.iter().all(|&i| test_support::bpf_program_loaded(i)));
    f.unmount();
    assert_eq!(
        test_support::bpf_programs_gone(&ids),
        Vec::<u32>::new(),
        "after the unmount"
    );
    f.mount(&["--syscalls"]);
    let ids = test_support::bpf_programs_of(f.pid());
    assert_eq!(ids.len(), 5);
    let st = Command::new("kill")
        .args(["-KILL", &f.pid().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    assert_eq!(
        test_support::bpf_programs_gone(&ids),
        Vec::<u32>::new(),
        "after SIGKILL"
    );
    f.unmount();
}

/// Runs `fsprof-fuse -f --syscalls LOWER MNT` through `sh -c PREFIX "$@"`, expecting a
/// one-line refusal with exit code 2 and nothing mounted; returns the line.
fn refused(name: &str, prefix: &str) -> Option<String> {
    let f = Fixture::new(name, Transport::Classic)?;
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("{prefix} \"$@\""))
        .arg("sh")
        .arg(crate::fixture::bin())
        .arg("-f")
        .arg("--syscalls")
        .arg(&f.lower)
        .arg(&f.mnt)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(!is_mounted(&f.mnt), "mounted anyway: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line: {err}");
    Some(err)
}

#[test]
fn without_cap_bpf_the_mount_is_refused_in_one_line() {
    let Some(err) = refused(
        "sys-nocap",
        "setpriv --inh-caps=-bpf,-perfmon,-sys_admin --bounding-set=-bpf,-perfmon,-sys_admin --",
    ) else {
        return;
    };
    assert!(
        err.contains("--syscalls") && err.contains("CAP_BPF") && err.contains("CAP_PERFMON"),
        "{err}"
    );
}

#[test]
fn an_unprivileged_user_is_refused_in_one_line() {
    let Some(err) = refused(
        "sys-nobody",
        "setpriv --reuid=65534 --regid=65534 --clear-groups --",
    ) else {
        return;
    };
    assert!(err.contains("--syscalls: permission denied"), "{err}");
}
