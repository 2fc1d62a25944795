//! A panic in one request is answered with EIO and the mount keeps serving.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::sync::Arc;

use fsprof_fuse::daemon::mount::{LiveMount, MountSettings};
use fsprof_fuse::filesystem::Request;
use fsprof_fuse::filesystem::request::Span;
use fsprof_fuse::layers::control::Control;
use fsprof_fuse::layers::control_files::ControlFiles;
use fsprof_fuse::layers::profiled::profiled;
use fsprof_fuse::layers::{Hook, Hooked};
use fsprof_fuse::passthrough::{Passthrough, PassthroughConfig};
use fsprof_fuse::protocol::ops::{self, Op};
use fsprof_fuse::sys::fuse::Device;
use fsprof_fuse::toolkit::lower::Lower;
use fsprof_fuse::transport::Transport;
use profile_store::{Profiler, Recorder, RecorderConfig};

use crate::fixture::{Fixture, errno, is_mounted};

/// Panics on every lookup in the directory with node id `.0`.
struct Boom(u64);

impl Hook for Boom {
    fn around<R>(
        &self,
        req: &Request,
        _span: Span,
        serve: impl FnOnce(&Request) -> io::Result<R>,
    ) -> io::Result<R> {
        if req.op == Op::Lookup && req.nodeid.0 == self.0 {
            panic!("deliberate panic looking up in node {}", self.0);
        }
        serve(req)
    }
}

fn a_panicking_request_gets_eio_and_the_mount_survives(t: Transport) {
    let Some(f) = Fixture::new("panic", t) else {
        return;
    };
    fs::create_dir(f.l("boom")).unwrap();
    // In handle mode (root) node ids are the lower inode numbers.
    let boom = fs::metadata(f.l("boom")).unwrap().ino();
    let rec = Recorder::new("fuse", &ops::NAMES, &RecorderConfig::default());
    let profiler = Arc::new(Profiler::new(vec![rec.clone()]));
    let control = ControlFiles::new(".fsprof", profiler.clone(), 0, false);
    let cfg = PassthroughConfig {
        hidden_root_names: control.hidden_names(&[]),
        ..PassthroughConfig::default()
    };
    let device = Device::new();
    let pt = Passthrough::new(&f.lower, cfg, Lower::default(), device.clone()).unwrap();
    assert!(pt.store().uses_handles(), "this test runs as root");
    let fs = Control::new(
        profiled(
            Hooked::new(Boom(boom), pt),
            Some(rec),
            None,
            Default::default(),
        ),
        Some(control),
    );
    let settings = MountSettings {
        mnt: f.mnt.clone(),
        fsname: "panicky".into(),
        subtype: "panicky".into(),
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
    // Unmounted when dropped, whatever happens in the test, waiting a bounded time.
    let live = LiveMount::start(fs, &settings, &device).unwrap();
    assert!(is_mounted(&f.mnt));

    assert_eq!(errno(fs::metadata(f.m("boom/x"))), libc::EIO);
    // Still serving, on every worker.
    for i in 0..20 {
        fs::create_dir(f.m(&format!("ok{i}"))).unwrap();
        fs::write(f.m(&format!("ok{i}/file")), b"alive").unwrap();
        assert_eq!(fs::read(f.m(&format!("ok{i}/file"))).unwrap(), b"alive");
    }
    assert_eq!(errno(fs::metadata(f.m("boom/y"))), libc::EIO);
    assert!(f.l("ok19/file").exists());
    // The panicking lookups were counted and finished: the profile stays consistent, once the
    // requests still on their way have ended (the kernel sends RELEASE after close(2) returns,
    // and a loaded machine can keep it in flight as long as it likes).
    let mut p = profiler.snapshot();
    test_support::wait_until("a snapshot with no request in flight", || {
        p = profiler.snapshot();
        profile_store::views::check(&p, 0).is_empty()
    });
    assert!(p.layers[0].count("OP_LOOKUP") >= 2 + 20);
    live.stop();
    assert!(!is_mounted(&f.mnt));
}
transports!(a_panicking_request_gets_eio_and_the_mount_survives);
