//! A panic in one request is answered with EIO and the mount keeps serving.

use std::ffi::OsStr;
use std::fs;
use std::sync::Arc;

use fsprof_fuse::control::Control;
use fsprof_fuse::ops;
use fsprof_fuse::passthrough::{Lower, Passthrough, PassthroughConfig};
use fsprof_fuse::profiled::Profiled;
use fuser::{
    FileHandle, Filesystem, INodeNo, KernelConfig, LockOwner, OpenFlags, ReplyAttr, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyWrite, Request, WriteFlags,
};
use profile_store::{Profiler, Recorder, RecorderConfig};

use fsprof_fuse::mount::{LiveMount, MountSettings};

use crate::fixture::{Fixture, errno, is_mounted};

/// The passthrough, except that looking up `boom` panics.
struct Panicky(Passthrough);

impl Filesystem for Panicky {
    fn init(&mut self, req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        self.0.init(req, config)
    }
    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        if name == "boom" {
            panic!("deliberate panic looking up {name:?}");
        }
        self.0.lookup(req, parent, name, reply)
    }
    fn forget(&self, req: &Request, ino: INodeNo, nlookup: u64) {
        self.0.forget(req, ino, nlookup)
    }
    fn getattr(&self, req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        self.0.getattr(req, ino, fh, reply)
    }
    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        self.0.mkdir(req, parent, name, mode, umask, reply)
    }
    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: fuser::ReplyCreate,
    ) {
        self.0.create(req, parent, name, mode, umask, flags, reply)
    }
    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        self.0.open(req, ino, flags, reply)
    }
    #[allow(clippy::too_many_arguments)]
    fn read(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        flags: OpenFlags,
        lo: Option<LockOwner>,
        reply: ReplyData,
    ) {
        self.0.read(req, ino, fh, offset, size, flags, lo, reply)
    }
    #[allow(clippy::too_many_arguments)]
    fn write(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        wf: WriteFlags,
        flags: OpenFlags,
        lo: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        self.0
            .write(req, ino, fh, offset, data, wf, flags, lo, reply)
    }
    fn flush(&self, req: &Request, ino: INodeNo, fh: FileHandle, lo: LockOwner, reply: ReplyEmpty) {
        self.0.flush(req, ino, fh, lo, reply)
    }
    #[allow(clippy::too_many_arguments)]
    fn release(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        flags: OpenFlags,
        lo: Option<LockOwner>,
        flush: bool,
        reply: ReplyEmpty,
    ) {
        self.0.release(req, ino, fh, flags, lo, flush, reply)
    }
    fn opendir(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        self.0.opendir(req, ino, flags, reply)
    }
    fn readdir(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        reply: ReplyDirectory,
    ) {
        self.0.readdir(req, ino, fh, offset, reply)
    }
    fn releasedir(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.0.releasedir(req, ino, fh, flags, reply)
    }
}

#[test]
fn a_panicking_request_gets_eio_and_the_mount_survives() {
    let Some(f) = Fixture::new("panic") else {
        return;
    };
    let rec = Recorder::new("fuse", &ops::NAMES, &RecorderConfig::default());
    let profiler = Arc::new(Profiler::new(vec![rec.clone()]));
    let control = Control::new(".fsprof", profiler.clone(), 0, false);
    let cfg = PassthroughConfig {
        hidden_root_names: control.hidden_names(&[]),
        ..PassthroughConfig::default()
    };
    let pt = Passthrough::new(&f.lower, cfg, Lower::default()).unwrap();
    let fs = Profiled::new(Panicky(pt), Some(rec), Some(control));
    let settings = MountSettings {
        mnt: f.mnt.clone(),
        fsname: "panicky".into(),
        subtype: "panicky".into(),
        threads: 2,
        allow_other: false,
        auto_unmount: false,
    };
    // Unmounted when dropped, whatever happens in the test, waiting a bounded time.
    let live = LiveMount::start(fs, &settings).unwrap();
    assert!(is_mounted(&f.mnt));

    assert_eq!(errno(fs::metadata(f.m("boom"))), libc::EIO);
    // Still serving, on every worker.
    for i in 0..20 {
        fs::create_dir(f.m(&format!("ok{i}"))).unwrap();
        fs::write(f.m(&format!("ok{i}/file")), b"alive").unwrap();
        assert_eq!(fs::read(f.m(&format!("ok{i}/file"))).unwrap(), b"alive");
    }
    assert_eq!(errno(fs::metadata(f.m("boom"))), libc::EIO);
    assert!(f.l("ok19/file").exists());
    // The panicking lookups were counted and finished: the profile stays consistent.
    // A reply goes out before its latency is recorded: wait (bounded) for quiescence.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut p = profiler.snapshot();
    while !profile_store::views::check(&p, 0).is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
        p = profiler.snapshot();
    }
    assert!(p.layers[0].count("OP_LOOKUP") >= 2 + 20);
    assert!(
        profile_store::views::check(&p, 0).is_empty(),
        "{:?}",
        profile_store::views::check(&p, 0)
    );
    live.stop();
    assert!(!is_mounted(&f.mnt));
}
