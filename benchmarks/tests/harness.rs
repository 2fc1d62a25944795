//! `fsprof-bench` end to end: a native run, skipped targets, and that every mount is gone after
//! a panic and after an interrupt (these need `/dev/fuse` and bindfs; without them they skip
//! with a message).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use benchmarks::harness::{mounts, target::Target};

const BENCH: &str = env!("CARGO_BIN_EXE_fsprof-bench");
const POSTMARK: &str = env!("CARGO_BIN_EXE_fsprof-postmark");

struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        static N: AtomicUsize = AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!(
            "fsprof-bench-test-{}-{}-{name}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Scratch(p)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        for m in mounts::mounts_under(&self.0) {
            mounts::unmount(&m, 5);
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn bench(work: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(BENCH);
    c.arg("--work-dir")
        .arg(work)
        .arg("--postmark")
        .arg(POSTMARK)
        .arg("--no-record")
        .args(args)
        .stdin(Stdio::null());
    c
}

/// bindfs and /dev/fuse, or a visible skip.
fn have_bindfs() -> bool {
    let fuse = Path::new("/dev/fuse").exists();
    let bindfs = benchmarks::harness::target::which("bindfs").is_some();
    if !(fuse && bindfs) {
        eprintln!("SKIPPED: needs /dev/fuse and bindfs (apt-get install bindfs fuse3)");
    }
    fuse && bindfs
}

#[test]
fn native_run_prints_tables_and_leaves_nothing() {
    let s = Scratch::new("native");
    let work = s.0.join("work");
    let o = bench(
        &work,
        &[
            "--suite",
            "metadata,postmark-thesis,clients",
            "--targets",
            "native",
            "--runs",
            "2",
            "--scale",
            "0.02",
        ],
    )
    .output()
    .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    for h in [
        "### metadata\n",
        "### postmark-thesis\n",
        "### clients / clients-4\n",
    ] {
        assert!(out.contains(h), "{h} missing:\n{out}");
    }
    assert!(out.contains("| native | "), "{out}");
    assert!(out.contains("- Machine: Linux "), "{out}");
    assert!(!out.contains("**Warning**"), "{out}");
    assert_eq!(std::fs::read_dir(&work).unwrap().count(), 0);
}

#[test]
fn missing_targets_are_skipped_with_a_message() {
    let s = Scratch::new("skip");
    let o = bench(
        &s.0.join("work"),
        &[
            "--suite",
            "metadata",
            "--targets",
            "native,fsprof-fuse,raif:1:2",
            "--fsprof-fuse",
            "/nonexistent/fsprof-fuse",
            "--raif",
            "/nonexistent/raif",
            "--runs",
            "1",
            "--scale",
            "0.01",
        ],
    )
    .output()
    .unwrap();
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("skipping target fsprof-fuse: fsprof-fuse not found"),
        "{err}"
    );
    assert!(
        err.contains("skipping target raif:1:2: raif not found"),
        "{err}"
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("- Skipped fsprof-fuse: "), "{out}");
}

#[test]
fn bad_arguments_exit_2() {
    let s = Scratch::new("args");
    for args in [
        &["--targets", "ext9"][..],
        &["--suite", "nope"][..],
        &["--targets", "raif:3:2"][..],
    ] {
        let o = bench(&s.0.join("work"), args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
    }
}

#[test]
fn guard_unmounts_on_panic() {
    if !have_bindfs() {
        return;
    }
    let s = Scratch::new("panic");
    let t = Target::parse("bindfs").unwrap();
    let program = t.program(&Default::default()).unwrap();
    let dir = s.0.clone();
    let mnt = dir.join("mnt");
    let r = std::panic::catch_unwind(|| {
        let m = t.mount(program.as_deref(), &dir).unwrap();
        assert!(mounts::is_mounted(&m.path));
        std::fs::write(m.path.join("f"), b"x").unwrap();
        panic!("workload failed");
    });
    assert!(r.is_err());
    assert!(!mounts::is_mounted(&mnt), "still mounted after panic");
    assert_eq!(std::fs::read(dir.join("lower/f")).unwrap(), b"x");
}

#[test]
fn interrupt_unmounts_and_cleans_up() {
    if !have_bindfs() {
        return;
    }
    let s = Scratch::new("int");
    let work = s.0.join("work");
    let mut child = bench(
        &work,
        &[
            "--suite",
            "postmark-raif",
            "--targets",
            "bindfs",
            "--runs",
            "3",
            "--scale",
            "0.5",
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    // Wait until the harness has a mount, then interrupt it.
    let t = Instant::now();
    while mounts::mounts_under(&work).is_empty() {
        if t.elapsed() > Duration::from_secs(60) || child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let saw_mount = !mounts::mounts_under(&work).is_empty();
    // SAFETY: sending a signal to our own child, whose pid is valid until it is waited for.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(saw_mount, "no mount appeared: {err}");
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("interrupted"), "{err}");
    assert!(mounts::mounts_under(&work).is_empty(), "mount left behind");
    assert_eq!(std::fs::read_dir(&work).unwrap().count(), 0);
}
