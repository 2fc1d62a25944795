//! What the syscall level costs a system call, in ns: `cargo run --release -p syscall-trace
//! --example cost [ROUNDS] [CALLS]` (as root). Each round times CALLS `pread`s of 16 bytes,
//! CALLS `stat`s of a cached file and CALLS `getppid`s (a call that is not a file-system call)
//! in this process under each setting, in turn (so that a slow spell of the machine falls on
//! all of them), and the medians and ranges of the rounds are printed:
//!
//! * `off`: nothing loaded;
//! * `procs-miss`: process scope, this process not followed (what every other process pays
//!   while `fsprof profile --no-mount` runs);
//! * `procs-hit`: process scope, this process followed (every call timed, histograms only);
//! * `procs-by`, `procs-hot`, `procs-slow`: as `procs-hit`, with one of what `procs-full` adds
//!   (per-caller entries by command; 100 hot files; the 50 slowest calls), to see what each
//!   costs;
//! * `procs-full`: as `procs-hit`, with what `fsprof profile --no-mount` keeps by default:
//!   per-caller entries by command, hot files and the 50 slowest calls;
//! * `mount-miss`: mount scope, the file not on the mount (what a process that does not use
//!   the mount pays for `--syscalls`);
//! * `mount-hit`: mount scope, the file on the mount (a tmpfs of its own here, so the call is
//!   native and only the level's cost is added).
//!
//! The calls are made by a child process (`cost --child FILE CALLS`), as the program never
//! counts the process that loaded it in mount scope (the daemon). The cost is the calling
//! thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`: the kernel's time in
//! the call and in the programs included; time the thread waits for a CPU, which a loaded
//! machine makes large, excluded), so that the other processes of a shared machine change it
//! little. With `--stats` (a third argument), the kernel's own count of the programs' run time
//! is printed too (`kernel.bpf_stats_enabled` is set to 1 for the run and put back after): the
//! ns one run of each program costs, averaged over every system call of the machine meanwhile.
//! The count's own clock reads add about 0.1 µs to every run of a program on this VM, which
//! the CPU times then include: compare settings without it.
//!
//! `COST_ONLY=off,procs-full` (settings, comma-separated) runs only those settings.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;
use std::process::{Command, Stdio};

use syscall_trace::{By, Config, Scope, Tracer};

/// This thread's CPU time in ns.
fn cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, exclusive timespec for the call to write.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn per_call(calls: u64, mut f: impl FnMut()) -> f64 {
    let t = cpu_ns();
    for _ in 0..calls {
        f();
    }
    (cpu_ns() - t) as f64 / calls as f64
}

fn measure(file: &Path, calls: u64) -> [f64; 3] {
    let fd = std::fs::File::open(file).unwrap();
    let mut b = [0u8; 16];
    let pread = per_call(calls, || {
        fd.read_at(&mut b, 0).unwrap();
    });
    let stat = per_call(calls, || {
        std::fs::metadata(file).unwrap();
    });
    // SAFETY: getppid has no arguments and cannot fail.
    let other = per_call(calls, || unsafe {
        libc::getppid();
    });
    [pread, stat, other]
}

/// Runs the calls in a child process, which waits for a line on its input before it starts (so
/// that it can be followed first), and returns its figures.
fn in_child(file: &Path, calls: u64, tracer: Option<&Tracer>, follow: bool) -> [f64; 3] {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .arg("--child")
        .arg(file)
        .arg(calls.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    if follow {
        tracer.unwrap().follow_process(child.id()).unwrap();
    }
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    child.wait().unwrap();
    let v: Vec<f64> = line
        .split_whitespace()
        .map(|w| w.parse().unwrap())
        .collect();
    [v[0], v[1], v[2]]
}

/// Unmounts the tmpfs when dropped, a panic included.
struct Unmount(std::path::PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

const NAMES: [&str; 9] = [
    "off",
    "procs-miss",
    "procs-hit",
    "procs-by",
    "procs-hot",
    "procs-slow",
    "procs-full",
    "mount-miss",
    "mount-hit",
];

fn start(
    name: &str,
    mnt: &Path,
    dev: kernel_trace::devices::Dev,
) -> Option<std::sync::Arc<Tracer>> {
    match name {
        "off" => None,
        "procs-miss" | "procs-hit" => {
            Some(Tracer::start(Config::new(Scope::Processes), None).unwrap())
        }
        "procs-full" | "procs-by" | "procs-hot" | "procs-slow" => {
            let mut c = Config::new(Scope::Processes);
            if matches!(name, "procs-full" | "procs-by") {
                c.by = Some(By::Comm);
            }
            if matches!(name, "procs-full" | "procs-hot") {
                c.hot_files = Some(100);
            }
            if matches!(name, "procs-full" | "procs-slow") {
                c.slowest = Some(50);
            }
            Some(Tracer::start(c, None).unwrap())
        }
        _ => {
            let t = Tracer::start(
                Config::new(Scope::Mount {
                    mnt: mnt.to_path_buf(),
                    control_names: Vec::new(),
                    control_ino_min: 0,
                }),
                None,
            )
            .unwrap();
            t.set_mount(dev).unwrap();
            Some(t)
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().map(String::as_str) == Some("--child") {
        let file = args.nth(1).unwrap();
        let calls = args.next().unwrap().parse().unwrap();
        let mut go = String::new();
        std::io::stdin().read_line(&mut go).unwrap();
        let r = measure(Path::new(&file), calls);
        println!("{} {} {}", r[0], r[1], r[2]);
        return;
    }
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(7);
    let calls: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(200_000);
    let stats = args.next().as_deref() == Some("--stats");
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("m");
    std::fs::create_dir(&mnt).unwrap();
    let ok = Command::new("mount")
        .args(["-t", "tmpfs", "none"])
        .arg(&mnt)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "mount -t tmpfs (needs root)");
    let _unmount = Unmount(mnt.clone());
    let inside = mnt.join("f");
    let outside = dir.path().join("f");
    std::fs::write(&inside, b"0123456789abcdef").unwrap();
    std::fs::write(&outside, b"0123456789abcdef").unwrap();
    let dev = kernel_trace::devices::Dev::from_stat(std::fs::metadata(&mnt).unwrap().dev());
    let mut results: Vec<[Vec<f64>; 3]> = vec![Default::default(); NAMES.len()];
    // Per setting: runs and ns of sys_enter, then of sys_exit.
    let mut runs = vec![[0u64; 4]; NAMES.len()];
    let stats_was =
        std::fs::read_to_string("/proc/sys/kernel/bpf_stats_enabled").unwrap_or_default();
    if stats {
        let _ = std::fs::write("/proc/sys/kernel/bpf_stats_enabled", "1");
    }
    for round in 0..rounds {
        for (i, name) in NAMES.iter().enumerate() {
            if std::env::var("COST_ONLY").is_ok_and(|o| !o.split(',').any(|x| x == *name)) {
                continue;
            }
            let tracer = start(name, &mnt, dev);
            let follow = name.starts_with("procs-") && *name != "procs-miss";
            let file = if *name == "mount-hit" {
                &inside
            } else {
                &outside
            };
            let got = in_child(file, calls, tracer.as_deref(), follow);
            for (r, v) in results[i].iter_mut().zip(got) {
                r.push(v);
            }
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
    if stats && !stats_was.trim().is_empty() {
        let _ = std::fs::write("/proc/sys/kernel/bpf_stats_enabled", stats_was.trim());
    }
    print_results(calls, rounds, &mut results, stats.then_some(&runs[..]));
}

fn print_results(
    calls: u64,
    rounds: usize,
    results: &mut [[Vec<f64>; 3]],
    runs: Option<&[[u64; 4]]>,
) {
    println!(
        "{calls} calls a round, {rounds} rounds; the thread's CPU ns per call, median [min-max], + over off"
    );
    println!(
        "{:<11} {:>24} {:>24} {:>24}",
        "setting", "pread 16 B", "stat", "getppid"
    );
    let off: Vec<f64> = results[0].iter().map(|v| median(&mut v.clone())).collect();
    for (i, name) in NAMES.iter().enumerate() {
        if results[i][0].is_empty() {
            continue;
        }
        let cells: Vec<String> = results[i]
            .iter_mut()
            .zip(&off)
            .map(|(v, off)| {
                let m = median(v);
                format!("{m:.0} [{:.0}-{:.0}] {:+.0}", v[0], v[v.len() - 1], m - off)
            })
            .collect();
        println!(
            "{name:<11} {:>24} {:>24} {:>24}",
            cells[0], cells[1], cells[2]
        );
    }
    let Some(runs) = runs else { return };
    println!(
        "\nthe programs' own time, from the kernel's counts (every system call of the machine):"
    );
    println!(
        "{:<11} {:>16} {:>16}",
        "setting", "sys_enter ns", "sys_exit ns"
    );
    for (i, name) in NAMES.iter().enumerate().skip(1) {
        let r = runs[i];
        let ns = |n: u64, t: u64| if n == 0 { 0.0 } else { t as f64 / n as f64 };
        println!(
            "{name:<11} {:>16.1} {:>16.1}",
            ns(r[0], r[1]),
            ns(r[2], r[3])
        );
    }
}
