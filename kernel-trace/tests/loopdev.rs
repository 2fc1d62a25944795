//! The block layer on a real loop device: every direct read made is one request, timed and
//! counted exactly, and nothing of another device is counted; what the kernel does not hand
//! over (a full buffer or ring, or a hit perf counts and never writes) is counted once.
//!
//! The block tracepoints go through a private ftrace instance, which writes every hit: on
//! this project's VM perf counts a tracepoint hit taken in an interrupt while a CPU idles
//! and, at times, writes no sample for it (docs/format.md, "Lost records"), and a completion
//! is such a hit whenever the reading thread sleeps. So the reads here run on CPUs free to
//! idle, and every one of them must be timed. The perf path, kept as the fallback where an
//! instance cannot be made, is tested for its accounting.
//!
//! Needs root (losetup, tracefs, perf_event_open); skips with a message elsewhere, fails
//! under CI=true.

use std::io::Write as _;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kernel_trace::devices::{BlockDevice, Dev};
use kernel_trace::events::{BlockFormats, FuseFormats};
use kernel_trace::{Excluded, Plan};
use profile_store::{Extension, RecorderConfig};

/// One test at a time: they count this process's ftrace instances.
static ALONE: Mutex<()> = Mutex::new(());

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
        fuse: Some(fuse),
        block: Ok((block, devices)),
        ring_pages: kernel_trace::RING_PAGES,
        ftrace_kb: Some(kernel_trace::ftrace::BUFFER_KB),
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

fn extra_str(tracer: &kernel_trace::Tracer, key: &str) -> String {
    Extension::extra(tracer)
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("no {key}"))
}

fn extra(tracer: &kernel_trace::Tracer, key: &str) -> u64 {
    extra_str(tracer, key)
        .parse()
        .unwrap_or_else(|_| panic!("{key} is not a number"))
}

/// This process's ftrace instances.
fn instances() -> Vec<String> {
    let root = kernel_trace::tracefs::find_or_mount().unwrap().root;
    let mine = format!("fsprof-{}-", std::process::id());
    let mut v: Vec<String> = std::fs::read_dir(root.join("instances"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&mine))
        .collect();
    v.sort();
    v
}

/// Stops `tracer`'s draining thread and waits until it has.
fn stop_draining(tracer: &kernel_trace::Tracer) {
    tracer.stop();
    let deadline = Instant::now() + Duration::from_secs(30);
    while tracer.is_draining() {
        assert!(
            Instant::now() < deadline,
            "the draining thread did not stop"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
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
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    if !root() {
        return;
    }
    let lp = Loop::new(4 << 20);
    // 700 reads over 256 blocks: the same sectors again, one at a time (never ambiguous).
    let other = Loop::new(4 << 20);
    let dev = lp.device();
    let tracer = start(plan_for(vec![dev.clone()]));
    assert_eq!(extra_str(&tracer, "block_trace"), "ftrace");
    direct_reads(&lp.dev, 700);
    // Reads of another device are not this layer's.
    direct_reads(&other.dev, 50);
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
    // Every read made is timed: the instance writes every completion, also those taken in
    // an interrupt of an idle CPU.
    let unsampled = extra(&tracer, "block_unsampled");
    eprintln!("700 reads: {reads} timed, {unsampled} unsampled");
    assert_eq!(
        (reads, unsampled),
        (700, 0),
        "{:?} {:?}",
        l.ops.iter().map(|o| (&o.name, o.count)).collect::<Vec<_>>(),
        l.extra
    );
    for o in &l.ops {
        assert_eq!(o.bucket_sum(), o.count as u128, "{}", o.name);
        assert!(o.total > 0);
    }
    let key = |k: &str| l.extra.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    assert_eq!(key("scope").as_deref(), Some("device"));
    assert_eq!(key("unpaired").as_deref(), Some("0"));
    assert_eq!(key("ambiguous").as_deref(), Some("0"));
    assert_eq!(extra(&tracer, "kernel_lost"), 0, "a buffer overflowed");
    assert_eq!(tracer.lost(), 0);
    assert!(
        layers
            .iter()
            .all(|l| !l.name.contains(&other.device().name))
    );
    // A reset forgets; later reads count from zero.
    tracer.reset();
    direct_reads(&lp.dev, 30);
    let layers = tracer.layers();
    let l = layers.iter().find(|l| l.name == name).unwrap();
    let reads: u64 = l.ops.iter().map(|o| o.count).sum();
    assert_eq!((reads, tracer.lost()), (30, 0));
    stop_draining(&tracer);
}

/// The perf fallback: a ring too small for the workload, not drained while it runs: the
/// records it loses are `kernel_lost` (the kernel's own count), never also unsampled, and
/// with those read (and those perf counted and never wrote) they make up every record, also
/// once a later record is written after the losses (which brings the kernel's
/// `PERF_RECORD_LOST` to the ring).
#[test]
fn a_full_ring_loses_records_counted_once() {
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    if !root() {
        return;
    }
    let lp = Loop::new(4 << 20);
    let mut plan = plan_for(vec![lp.device()]);
    plan.ftrace_kb = None;
    // 4 KiB a CPU: about 50 records, where 700 reads make 1,400.
    plan.ring_pages = 1;
    let tracer = start(plan);
    assert_eq!(extra_str(&tracer, "block_trace"), "perf");
    stop_draining(&tracer);
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

/// The ftrace instance's buffer too small for the workload, not drained while it runs: what
/// it drops is `kernel_lost` (the kernel's count, from `per_cpu/cpuN/stats`), never in a
/// bucket, and with the records read it makes up every record (or a few more).
#[test]
fn a_full_ftrace_buffer_loses_records_counted_once() {
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    if !root() {
        return;
    }
    let lp = Loop::new(4 << 20);
    let mut plan = plan_for(vec![lp.device()]);
    // The smallest buffer: a few pages a CPU, about a hundred records.
    plan.ftrace_kb = Some(4);
    let tracer = start(plan);
    assert_eq!(extra_str(&tracer, "block_trace"), "ftrace");
    stop_draining(&tracer);
    direct_reads(&lp.dev, 700);
    tracer.layers();
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
    assert!(lost > 0, "the buffer never filled");
    assert_eq!(unsampled, 0);
    // Every record is read or counted lost. The kernel's count held up to 4 more in 15 runs
    // (not explained for certain: likely a hit taken while its CPU is already writing one,
    // which the kernel reserves in the buffer before its filter sees it, so that a full
    // buffer also drops, and counts, records of other devices).
    let all = tracer.events() + lost;
    assert!(
        (2 * 710..2 * 710 + 16).contains(&all),
        "{all} records read or lost for {} made",
        2 * 710
    );
    assert!(tracer.events() <= 2 * 710);
    assert_eq!(tracer.lost(), lost);
}

/// The instance is the tracer's: made by it, removed with it (or when it is closed); one left by a process that is
/// gone (a crash) is removed by the next tracer.
#[test]
fn the_ftrace_instance_lives_as_long_as_its_tracer() {
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    if !root() {
        return;
    }
    let lp = Loop::new(4 << 20);
    let root_dir = kernel_trace::tracefs::find_or_mount().unwrap().root;
    // An instance of a process that has exited.
    let mut child = Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let stale = root_dir.join(format!("instances/fsprof-{dead}-0"));
    std::fs::create_dir(&stale).unwrap();
    let before = instances();
    let tracer = start(plan_for(vec![lp.device()]));
    assert!(!stale.exists(), "the stale instance was left");
    let made: Vec<String> = instances()
        .into_iter()
        .filter(|n| !before.contains(n))
        .collect();
    assert_eq!(made.len(), 1, "{made:?}");
    stop_draining(&tracer);
    drop(tracer);
    assert!(
        !instances().contains(&made[0]),
        "{} outlived its tracer",
        made[0]
    );
    // Closed (the mount is gone) while something still holds the tracer.
    let tracer = start(plan_for(vec![lp.device()]));
    let n = instances().len();
    tracer.close();
    assert_eq!(instances().len(), n - 1, "close left the instance");
    assert_eq!(extra_str(&tracer, "block_trace"), "ftrace");
}
