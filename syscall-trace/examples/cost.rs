//! What the syscall level costs a system call, in ns: `cargo run --release -p syscall-trace
//! --example cost [ROUNDS] [CALLS]` (as root). Each round times CALLS `pread`s of 16 bytes and
//! CALLS `stat`s of a cached file in this process under five settings, in turn (so that a slow
//! spell of the machine falls on all of them), and the medians and ranges of the rounds are
//! printed:
//!
//! * `off`: nothing loaded;
//! * `procs-miss`: process scope, this process not followed (what every other process pays
//!   while `fsprof profile --no-mount` runs);
//! * `procs-hit`: process scope, this process followed (every call timed);
//! * `mount-miss`: mount scope, the file not on the mount (what a process that does not use
//!   the mount pays for `--syscalls`);
//! * `mount-hit`: mount scope, the file on the mount (a tmpfs of its own here, so the call is
//!   native and only the level's cost is added).
//!
//! Wall-clock differences on a shared machine are noisy; so the kernel's own count of the
//! programs' run time is printed too (`kernel.bpf_stats_enabled` is set to 1 for the run and
//! put back after): the ns one run of `sys_enter` and of `sys_exit` costs, in each setting, over
//! every system call of the machine meanwhile.

use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use syscall_trace::{Config, Scope, Tracer};

fn per_call(calls: u64, mut f: impl FnMut()) -> f64 {
    let t = Instant::now();
    for _ in 0..calls {
        f();
    }
    t.elapsed().as_nanos() as f64 / calls as f64
}

fn measure(file: &Path, calls: u64) -> (f64, f64) {
    let fd = std::fs::File::open(file).unwrap();
    let mut b = [0u8; 16];
    let pread = per_call(calls, || {
        fd.read_at(&mut b, 0).unwrap();
    });
    let stat = per_call(calls, || {
        std::fs::metadata(file).unwrap();
    });
    (pread, stat)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(7);
    let calls: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(200_000);
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("m");
    std::fs::create_dir(&mnt).unwrap();
    let ok = Command::new("mount")
        .args(["-t", "tmpfs", "none"])
        .arg(&mnt)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "mount -t tmpfs (needs root)");
    let inside = mnt.join("f");
    let outside = dir.path().join("f");
    std::fs::write(&inside, b"0123456789abcdef").unwrap();
    std::fs::write(&outside, b"0123456789abcdef").unwrap();
    let dev = kernel_trace::devices::Dev::from_stat(std::fs::metadata(&mnt).unwrap().dev());
    let names = ["off", "procs-miss", "procs-hit", "mount-miss", "mount-hit"];
    let mut results: Vec<(Vec<f64>, Vec<f64>)> = vec![(Vec::new(), Vec::new()); names.len()];
    // Per setting: runs and ns of sys_enter, then of sys_exit.
    let mut runs = vec![[0u64; 4]; names.len()];
    let stats_was =
        std::fs::read_to_string("/proc/sys/kernel/bpf_stats_enabled").unwrap_or_default();
    let _ = std::fs::write("/proc/sys/kernel/bpf_stats_enabled", "1");
    for round in 0..rounds {
        for (i, name) in names.iter().enumerate() {
            let tracer = match *name {
                "off" => None,
                "procs-miss" | "procs-hit" => {
                    Some(Tracer::start(Config::new(Scope::Processes), None).unwrap())
                }
                _ => {
                    let t = Tracer::start(
                        Config::new(Scope::Mount {
                            mnt: mnt.clone(),
                            control_names: Vec::new(),
                            control_ino_min: 0,
                        }),
                        None,
                    )
                    .unwrap();
                    t.set_mount(dev).unwrap();
                    Some(t)
                }
            };
            if *name == "procs-hit" {
                let t = tracer.as_ref().unwrap();
                t.follow_process(std::process::id()).unwrap();
            }
            let file = if *name == "mount-hit" {
                &inside
            } else {
                &outside
            };
            let (p, s) = measure(file, calls);
            results[i].0.push(p);
            results[i].1.push(s);
            if let Some(t) = tracer {
                for (prog, n, ns) in t.run_stats() {
                    let k = match prog {
                        "fsprof_sys_enter" => 0,
                        "fsprof_sys_exit" => 2,
                        _ => continue,
                    };
                    runs[i][k] += n;
                    runs[i][k + 1] += ns;
                }
                t.close();
            }
        }
        eprintln!("round {} of {rounds} done", round + 1);
    }
    let _ = Command::new("umount").arg(&mnt).status();
    if !stats_was.trim().is_empty() {
        let _ = std::fs::write("/proc/sys/kernel/bpf_stats_enabled", stats_was.trim());
    }
    println!("{calls} calls a round, {rounds} rounds; ns per call, median [min-max], + over off");
    println!("{:<11} {:>26} {:>26}", "setting", "pread 16 B", "stat");
    let (off_p, off_s) = (
        median(&mut results[0].0.clone()),
        median(&mut results[0].1.clone()),
    );
    for (i, name) in names.iter().enumerate() {
        let (p, s) = &mut results[i];
        let (mp, ms) = (median(p), median(s));
        let cell = |m: f64, v: &[f64], off: f64| {
            format!("{m:.0} [{:.0}-{:.0}] {:+.0}", v[0], v[v.len() - 1], m - off)
        };
        println!(
            "{name:<11} {:>26} {:>26}",
            cell(mp, p, off_p),
            cell(ms, s, off_s)
        );
    }
    println!(
        "\nthe programs' own time, from the kernel's counts (every system call of the machine):"
    );
    println!(
        "{:<11} {:>16} {:>16}",
        "setting", "sys_enter ns", "sys_exit ns"
    );
    for (i, name) in names.iter().enumerate().skip(1) {
        let r = runs[i];
        let ns = |n: u64, t: u64| if n == 0 { 0.0 } else { t as f64 / n as f64 };
        println!(
            "{name:<11} {:>16.1} {:>16.1}",
            ns(r[0], r[1]),
            ns(r[2], r[3])
        );
    }
}
