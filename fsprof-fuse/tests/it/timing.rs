//! A request is recorded as ending where the inner file system marked its reply ready, not after
//! the reply was written (which can let the woken caller run first on this thread's CPU).

use std::ffi::OsStr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use fsprof_fuse::mount::{LiveMount, MountSettings};
use fsprof_fuse::ops;
use fsprof_fuse::profiled::{Profiled, reply_ready};
use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, INodeNo, ReplyAttr, ReplyEntry, Request,
};
use profile_store::{Profiler, Recorder, RecorderConfig};

use crate::fixture::{Fixture, errno};

/// Longer than any of these requests takes without it.
const DELAY: Duration = Duration::from_millis(200);

/// Serves an empty root. GETATTR marks its reply ready, then waits `DELAY` before sending it;
/// LOOKUP waits `DELAY` without marking anything.
struct Delays;

fn root_attr() -> FileAttr {
    FileAttr {
        ino: INodeNo(1),
        size: 0,
        blocks: 0,
        atime: SystemTime::UNIX_EPOCH,
        mtime: SystemTime::UNIX_EPOCH,
        ctime: SystemTime::UNIX_EPOCH,
        crtime: SystemTime::UNIX_EPOCH,
        kind: FileType::Directory,
        perm: 0o755,
        nlink: 2,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

impl Filesystem for Delays {
    fn getattr(&self, _req: &Request, _ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let attr = root_attr();
        reply_ready();
        std::thread::sleep(DELAY);
        reply.attr(&Duration::ZERO, &attr);
    }

    fn lookup(&self, _req: &Request, _parent: INodeNo, _name: &OsStr, reply: ReplyEntry) {
        std::thread::sleep(DELAY);
        reply.error(Errno::ENOENT);
    }
}

#[test]
fn requests_end_where_the_reply_was_marked_ready() {
    let Some(f) = Fixture::new("ready") else {
        return;
    };
    // Two decorators, one inside the other, each with its own layer: both must end a request
    // at the inner file system's mark.
    let rec = Recorder::new("fuse", &ops::NAMES, &RecorderConfig::default());
    let inner = Recorder::new("inner", &ops::NAMES, &RecorderConfig::default());
    let profiler = Arc::new(Profiler::new(vec![rec.clone(), inner.clone()]));
    let settings = MountSettings {
        mnt: f.mnt.clone(),
        fsname: "delays".into(),
        subtype: "delays".into(),
        threads: 2,
        allow_other: false,
        auto_unmount: false,
    };
    let fs = Profiled::new(Profiled::new(Delays, Some(inner), None), Some(rec), None);
    let live = LiveMount::start(fs, &settings).unwrap();
    for _ in 0..3 {
        std::fs::metadata(&f.mnt).unwrap();
        assert_eq!(errno(std::fs::metadata(f.m("absent"))), libc::ENOENT);
    }
    drop(live);
    let p = profiler.snapshot();
    let cps = p.cycles_per_sec.expect("calibrated clock") as f64;
    let delay = DELAY.as_secs_f64();
    for l in &p.layers {
        // Mean recorded latency, from the exact total.
        let mean = |op: &str| {
            let o = l.op(op).unwrap_or_else(|| panic!("{op} not recorded"));
            assert!(o.count >= 3, "{op}: {} calls", o.count);
            o.total as f64 / o.count as f64 / cps
        };
        // GETATTR ended at its mark, before the delay: timed to the end of the method, every
        // call would take at least DELAY.
        let getattr = mean("OP_GETATTR");
        assert!(
            getattr < delay,
            "layer {}: GETATTR mean {getattr} s",
            l.name
        );
        // Requests that mark nothing are timed to the end of the inner method.
        let lookup = mean("OP_LOOKUP");
        assert!(lookup >= delay, "layer {}: LOOKUP mean {lookup} s", l.name);
    }
}
