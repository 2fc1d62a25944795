//! The block layer on a real loop device: every direct read made is one request, timed and
//! counted exactly, and nothing of another device is counted; what the kernel does not write
//! (a full ring, or a hit it counts and never writes) is counted once.
//!
//! The kernel's drop: on this project's VM (Linux 6.18) perf counts a tracepoint hit taken in
//! an interrupt while a CPU idles and, at times, writes no sample for it (docs/format.md,
//! "Lost records"). A completion is such a hit whenever the reading thread sleeps on an idle
//! machine: anywhere from none to every one of them. So the reads whose timing is checked
//! run while every CPU has a busy SCHED_IDLE process (which yields at once to any other task,
//! but keeps the CPUs out of the idle task), and the accounting is checked without one.
//!
//! Needs root (losetup, perf_event_open) and chrt; skips with a message elsewhere, fails
//! under CI=true.

use std::io::Write as _;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kernel_trace::devices::{BlockDevice, Dev};
use kernel_trace::events::{BlockFormats, FuseFormats};
use kernel_trace::{Excluded, Plan};
use profile_store::{Extension, RecorderConfig};

fn root() -> bool {
    let uid = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(str::to_string))
        })
        .unwrap_or_default();
    if uid == "0" {
        return true;
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "kernel tracing tests need root under CI"
    );
    eprintln!("SKIPPED: kernel tracing tests need root");
    false
}

/// A loop device over a file, detached when dropped.
struct Loop {
    dev: PathBuf,
    _dir: tempfile::TempDir,
}

impl Loop {
    fn new(bytes: u64) -> Loop {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("img");
        let mut f = std::fs::File::create(&img).unwrap();
        let block = vec![0x5au8; 1 << 20];
        for _ in 0..bytes / block.len() as u64 {
            f.write_all(&block).unwrap();
        }
        f.sync_all().unwrap();
        let out = Command::new("losetup")
            .args(["--find", "--show", "--direct-io=on"])
            .arg(&img)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "losetup: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let dev = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
        Loop { dev, _dir: dir }
    }

    fn device(&self) -> BlockDevice {
        let m = std::fs::metadata(&self.dev).unwrap();
        BlockDevice {
            name: self.dev.file_name().unwrap().to_string_lossy().into_owned(),
            dev: Dev::from_stat(m.rdev()),
        }
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").arg("-d").arg(&self.dev).status();
    }
}

fn plan_for(devices: Vec<BlockDevice>) -> Plan {
    let tracefs = kernel_trace::tracefs::find_or_mount().unwrap();
    let fuse = FuseFormats::read(&tracefs.root).unwrap();
    let block = BlockFormats::read(&tracefs.root).unwrap();
    Plan {
        tracefs,
        fuse,
        block: Ok((block, devices)),
        ring_pages: kernel_trace::RING_PAGES,
    }
}

/// One busy process per online CPU, pinned, at SCHED_IDLE priority; killed when dropped.
/// (`test_support::busy` does the same for the mount tests; test-support depends on this
/// crate through fsprof-fuse.)
struct Busy(Vec<Child>);

impl Busy {
    fn new() -> Busy {
        let cpus = kernel_trace::online_cpus().unwrap();
        Busy(
            cpus.iter()
                .map(|c| {
                    Command::new("taskset")
                        .args(["-c", &c.to_string(), "chrt", "-i", "0"])
                        .args(["sh", "-c", "while :; do :; done"])
                        .spawn()
                        .expect("taskset and chrt")
                })
                .collect(),
        )
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn start(plan: Plan) -> Arc<kernel_trace::Tracer> {
    plan.start(
        Some(Dev { major: 0, minor: 0 }),
        &["OP_READ"],
        &RecorderConfig::default(),
        Arc::new(Excluded::default()),
    )
    .unwrap()
}

fn extra(tracer: &kernel_trace::Tracer, key: &str) -> u64 {
    Extension::extra(tracer)
        .into_iter()
        .find(|(k, _)| k == key)
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key}"))
}

fn direct_reads(dev: &Path, n: u64) {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(dev)
        .unwrap();
    let mut buf = AlignedBlock([0; 4096]);
    for i in 0..n {
        // From 1 MiB on, away from the blocks udev's probe of a new device reads (its first
        // and last), which would meet ours at one sector: ambiguous, not bucketed.
        let got = f.read_at(&mut buf.0, (1 << 20) + (i % 256) * 4096).unwrap();
        assert_eq!(got, 4096);
    }
}

#[repr(align(4096))]
struct AlignedBlock([u8; 4096]);

#[test]
fn every_direct_read_is_one_timed_request() {
    if !root() {
        return;
    }
    let lp = Loop::new(4 << 20);
    // 700 reads over 256 blocks: the same sectors again, one at a time (never ambiguous).
    let other = Loop::new(4 << 20);
    let dev = lp.device();
    let tracer = start(plan_for(vec![dev.clone()]));
    let busy = Busy::new();
    direct_reads(&lp.dev, 700);
    // Reads of another device are not this layer's.
    direct_reads(&other.dev, 50);
    drop(busy);
    let layers = tracer.layers();
    let name = format!("block@dev:{}", dev.name);
    let l = layers
        .iter()
        .find(|l| l.name == name)
        .expect("the device's layer");
    let reads: u64 = l
        .ops
        .iter()
        .filter(|o| o.name.starts_with("BLK_READ"))
        .map(|o| o.count)
        .sum();
    // A request whose completion the kernel counted and never wrote is in no bucket and in
    // `block_unsampled`: every read made is one or the other, exactly.
    let unsampled = extra(&tracer, "block_unsampled");
    eprintln!("700 reads: {reads} timed, {unsampled} unsampled");
    assert_eq!(
        reads + unsampled,
        700,
        "{:?} {:?}",
        l.ops.iter().map(|o| (&o.name, o.count)).collect::<Vec<_>>(),
        l.extra
    );
    assert!(reads > 0, "no read timed");
    for o in &l.ops {
        assert_eq!(o.bucket_sum(), o.count as u128, "{}", o.name);
        assert!(o.total > 0);
    }
    let key = |k: &str| l.extra.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    assert_eq!(key("scope").as_deref(), Some("device"));
    assert_eq!(key("unpaired").as_deref(), Some("0"));
    assert_eq!(key("ambiguous").as_deref(), Some("0"));
    assert_eq!(extra(&tracer, "kernel_lost"), 0, "a 1 MiB ring overflowed");
    assert_eq!(tracer.lost(), unsampled);
    assert!(
        layers
            .iter()
            .all(|l| !l.name.contains(&other.device().name))
    );
    // A reset forgets; later reads count from zero, idle CPUs or not.
    tracer.reset();
    direct_reads(&lp.dev, 30);
    let layers = tracer.layers();
    let l = layers.iter().find(|l| l.name == name).unwrap();
    let reads: u64 = l.ops.iter().map(|o| o.count).sum();
    eprintln!(
        "30 reads, CPUs free to idle: {reads} timed, {} lost",
        tracer.lost()
    );
    assert_eq!(reads + tracer.lost(), 30);
    tracer.stop();
}

/// A ring too small for the workload, not drained while it runs: the records it loses are
/// `kernel_lost` (the kernel's own count), never also unsampled, and with those read they
/// make up every record, also once a later record is written after the losses (which brings
/// the kernel's `PERF_RECORD_LOST` to the ring).
#[test]
fn a_full_ring_loses_records_counted_once() {
    if !root() {
        return;
    }
    let lp = Loop::new(4 << 20);
    let mut plan = plan_for(vec![lp.device()]);
    // 4 KiB a CPU: about 50 records, where 700 reads make 1,400.
    plan.ring_pages = 1;
    let tracer = start(plan);
    tracer.stop();
    let deadline = Instant::now() + Duration::from_secs(30);
    while tracer.is_draining() {
        assert!(
            Instant::now() < deadline,
            "the draining thread did not stop"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    direct_reads(&lp.dev, 700);
    tracer.layers();
    // Room again: the next records follow a PERF_RECORD_LOST.
    direct_reads(&lp.dev, 10);
    tracer.layers();
    let (lost, unsampled) = (
        extra(&tracer, "kernel_lost"),
        extra(&tracer, "block_unsampled"),
    );
    eprintln!(
        "{} records read, {lost} lost, {unsampled} unsampled",
        tracer.events()
    );
    assert!(lost > 0, "the ring never filled");
    assert_eq!(tracer.events() + lost + unsampled, 2 * 710);
    assert_eq!(tracer.lost(), lost + unsampled);
}
