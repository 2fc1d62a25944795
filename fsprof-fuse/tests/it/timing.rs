//! A request is timed around the file system's work: from before the inner call to when it
//! returns, which is when its reply is ready (the transport sends it after). Layers stacked
//! over one another time the same requests.

use std::ffi::OsStr;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use fsprof_fuse::daemon::mount::{LiveMount, MountSettings};
use fsprof_fuse::filesystem::{Attr, AttrOut, Entry, FileSystem, Ino, Key, Request};
use fsprof_fuse::layers::profiled::profiled;
use fsprof_fuse::protocol::ops;
use fsprof_fuse::sys::fuse::Device;
use fsprof_fuse::transport::Transport;
use profile_store::{Profiler, Recorder, RecorderConfig};

use crate::fixture::{Fixture, errno};

/// How long LOOKUP takes in [`Delays`].
const DELAY: Duration = Duration::from_millis(200);

/// Serves an empty root; LOOKUP takes [`DELAY`] to answer that nothing is there.
struct Delays;

impl FileSystem for Delays {
    type File = Key;
    type Dir = Key;

    fn getattr(&self, _req: &Request, _ino: Ino, _fh: Option<&Key>) -> io::Result<AttrOut> {
        Ok(AttrOut {
            attr: Attr {
                ino: 1,
                mode: libc::S_IFDIR | 0o755,
                nlink: 2,
                blksize: 4096,
                ..Attr::default()
            },
            ttl: Duration::ZERO,
        })
    }

    fn lookup(&self, _req: &Request, _parent: Ino, _name: &OsStr) -> io::Result<Entry> {
        std::thread::sleep(DELAY);
        Err(io::Error::from_raw_os_error(libc::ENOENT))
    }
}

fn requests_are_timed_around_the_file_system_and_every_layer_sees_them(t: Transport) {
    let Some(f) = Fixture::new("timing", t) else {
        return;
    };
    // Two profiling layers, one inside the other, each with its own recorder.
    let rec = Recorder::new("fuse", &ops::NAMES, &RecorderConfig::default());
    let inner = Recorder::new("inner", &ops::NAMES, &RecorderConfig::default());
    let profiler = Arc::new(Profiler::new(vec![rec.clone(), inner.clone()]));
    let settings = MountSettings {
        mnt: f.mnt.clone(),
        fsname: "delays".into(),
        subtype: "delays".into(),
        threads: 2,
        max_threads: 2,
        allow_other: false,
        auto_unmount: false,
        transport: t,
        metrics: None,
        metrics_native: false,
        metrics_token: None,
        share_records: false,
        // Every lookup reaches the file system (the counts below).
        cache: fsprof_fuse::toolkit::kernel_cache::CachePreset::Exact.policy(),
        flags: Default::default(),
    };
    let fs = profiled(
        profiled(Delays, Some(inner), None, Default::default()),
        Some(rec),
        None,
        Default::default(),
    );
    let live = LiveMount::start(fs, &settings, &Device::new()).unwrap();
    for _ in 0..3 {
        std::fs::metadata(&f.mnt).unwrap();
        assert_eq!(errno(std::fs::metadata(f.m("absent"))), libc::ENOENT);
    }
    drop(live);
    let p = profiler.snapshot();
    let cps = p.cycles_per_sec.expect("calibrated clock") as f64;
    let (outer, inner) = (&p.layers[0], &p.layers[1]);
    for op in ["OP_GETATTR", "OP_LOOKUP"] {
        let (o, i) = (outer.op(op).unwrap(), inner.op(op).unwrap());
        assert!(o.count >= 3, "{op}: {} calls", o.count);
        assert_eq!(o.count, i.count, "{op}: both layers time the same requests");
        // The outer layer's time contains the inner one's.
        assert!(
            o.total >= i.total,
            "{op}: outer {} < inner {}",
            o.total,
            i.total
        );
    }
    // LOOKUP is timed to when the file system returned: at least its delay, in both layers.
    for l in [outer, inner] {
        let o = l.op("OP_LOOKUP").unwrap();
        let mean = o.total as f64 / o.count as f64 / cps;
        assert!(
            mean >= DELAY.as_secs_f64() * 0.95,
            "layer {}: LOOKUP mean {mean} s",
            l.name
        );
    }
}
transports!(requests_are_timed_around_the_file_system_and_every_layer_sees_them);
