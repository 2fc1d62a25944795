//! `fsprof-fuse LOWER MNT`: builds the profiled passthrough from a checked configuration and
//! serves it; [`Daemon`] is the lifecycle it shares with `raif`.
//!
//! The stack of one mount, from the kernel down ([`build`]):
//!
//! ```text
//! transport (MountSettings::transport)  →  Control  →  Profiled (timing + records)  →  Passthrough
//!                                                                          (lower calls)
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;

use profile_store::{ClockInfo, Profiler, Recorder, RecorderConfig};

use crate::daemon::daemon_log::LogSink;
use crate::daemon::kernel::{Kernel, SyscallScope};
use crate::daemon::metrics;
use crate::daemon::mount::{self, Readiness, SetupError, setup_err};
use crate::filesystem::FileSystem;
use crate::layers::control::Control;
use crate::layers::control_files::ControlFiles;
use crate::layers::profiled::{Profiled, profiled};
use crate::passthrough::{Passthrough, PassthroughConfig};
use crate::protocol::ops;
use crate::records::RecordConfig;
use crate::sys;
use crate::sys::fuse::Device;
use crate::toolkit::lower::Lower;
use crate::transport::MountSettings;

/// Which layers to record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Layers {
    /// FUSE requests (`fuse`).
    pub fuse: bool,
    /// Lower system calls (`lower`), under the FUSE operation that made them.
    pub lower: bool,
}

/// A checked `fsprof-fuse` configuration.
#[derive(Debug, Clone)]
pub struct FuseConfig {
    /// The directory served (absolute, canonical).
    pub lower: PathBuf,
    /// Mount point (absolute, canonical).
    pub mnt: PathBuf,
    /// Stay in the foreground.
    pub foreground: bool,
    /// Write the final profile here at unmount (`.json` for JSON, text otherwise).
    pub save: Option<PathBuf>,
    /// Layers recorded; none means pure passthrough (no control files).
    pub layers: Layers,
    /// Bucketing and time-lapse.
    pub recorder: RecorderConfig,
    /// Base name of the control files.
    pub control_name: String,
    /// List the control files in the root directory (by default they are hidden from `readdir`).
    pub list_control: bool,
    /// Passthrough settings.
    pub passthrough: PassthroughConfig,
    /// Mount settings.
    pub mount: MountSettings,
    /// Where the daemon's log goes.
    pub log: LogSink,
    /// Request records (slow log, inner-call breakdown, injection).
    pub records: RecordConfig,
}

/// Serves `cfg` until unmounted. In background mode the calling process exits once the mount is
/// live (see [`mount::daemonize`]).
pub fn run(mut cfg: FuseConfig) -> Result<(), SetupError> {
    let (mount, log, save) = (cfg.mount.clone(), cfg.log.clone(), cfg.save.clone());
    let daemon = Daemon {
        program: "fsprof-fuse",
        foreground: cfg.foreground,
        mount: &mount,
        log: &log,
        save: save.as_deref(),
    };
    daemon.preflight()?;
    sys::hold_heap_thresholds();
    daemon.run(|device| build(&mut cfg, device))
}

/// How a file-system program runs: the lifecycle `fsprof-fuse` and `raif` share.
#[derive(Debug, Clone, Copy)]
pub struct Daemon<'a> {
    /// Name in messages.
    pub program: &'a str,
    /// Stay in the foreground.
    pub foreground: bool,
    /// Where and how to mount.
    pub mount: &'a MountSettings,
    /// Where the daemon's log goes.
    pub log: &'a LogSink,
    /// Write the final profile here at unmount.
    pub save: Option<&'a Path>,
}

impl Daemon<'_> {
    /// What can be checked before anything is set up, called by each program before
    /// [`Daemon::run`] (raif before it formats its branches): the files the daemon writes later, so that a path that cannot be written is
    /// said now rather than after the mount (the log) or at the unmount (the profile, lost),
    /// and that the metrics address can be bound.
    pub fn preflight(&self) -> Result<(), SetupError> {
        if let Some(p) = self.save {
            check_save_path(p)?;
        }
        if let Some(addr) = self.mount.metrics {
            std::net::TcpListener::bind(addr)
                .map_err(|e| setup_err(format!("--metrics {addr}: {}", mount::plain(&e))))?;
        }
        // Last, as it makes the file: only in the background, where the daemon's stderr goes
        // there.
        if let (Some(p), false) = (self.log.file(), self.foreground) {
            check_log_file(p)?;
        }
        Ok(())
    }

    /// Goes to the background (unless foreground), builds the file system with `build` (in the
    /// daemon, before any thread starts; it gets the session's device, known once mounted),
    /// serves it until unmounted and saves the profile. Setup errors reach the waiting parent
    /// as one line.
    pub fn run<F: FileSystem + 'static>(
        &self,
        build: impl FnOnce(&Device) -> Result<Served<F>, SetupError>,
    ) -> Result<(), SetupError> {
        let mnt = self.mount.mnt.display();
        // A write past the daemon's file-size limit (`ulimit -f`, systemd's `LimitFSIZE`) is
        // a lower file or branch without room: the caller gets EFBIG, and the mount lives on
        // (SIGXFSZ would kill it). `fsprof profile`, which starts a workload, never gets here.
        sys::ignore_file_size_signal().map_err(|e| setup_err(format!("SIGXFSZ: {e}")))?;
        let mut ready = if self.foreground {
            Readiness::none()
        } else {
            let ready = mount::daemonize(self.program)
                .map_err(|e| setup_err(format!("cannot go to the background: {e}")))?;
            // From here on, what the daemon logs (its setup's warnings too) goes to its log;
            // its errors reach the waiting parent, which prints them.
            if let Err(e) = mount::detach_stdio(self.log.file()) {
                let mut ready = ready;
                let e = setup_err(format!("log: {e}"));
                ready.fail(&e.0);
                return Err(e);
            }
            ready
        };
        // Before any thread starts (the metrics endpoint's, those the file system starts), so
        // that every thread blocks them and only the signal thread takes them: one that did
        // not (the endpoint's) got SIGTERM and ended the daemon with the mount left dead.
        if let Err(e) = sys::block_termination_signals() {
            let e = setup_err(format!("blocking signals: {e}"));
            ready.fail(&e.0);
            return Err(e);
        }
        let bound = match self.mount.metrics.map(metrics::Bound::new).transpose() {
            Ok(b) => b,
            Err(e) => {
                let e = setup_err(e.to_string());
                ready.fail(&e.0);
                return Err(e);
            }
        };
        let device = Device::new();
        match build(&device) {
            Ok(Served {
                fs,
                profiler,
                kernel,
                policy,
            }) => {
                if let Some(p) = &profiler {
                    p.set_extra("transport", self.mount.transport.name())
                        .expect("a valid constant key and value");
                    p.set_extra("cache", self.mount.cache.preset.name())
                        .expect("a valid constant key and value");
                }
                let endpoint = match (bound, &profiler) {
                    (None, _) => None,
                    (Some(_), None) => {
                        let e = setup_err(
                            "--metrics needs profiling (it cannot be used with --no-profile)",
                        );
                        close(&kernel);
                        ready.fail(&e.0);
                        return Err(e);
                    }
                    (Some(b), Some(p)) => match b.serve(
                        p.clone(),
                        self.mount.metrics_native,
                        policy.unwrap_or_else(|| {
                            crate::layers::access::Policy::owner_only(sys::geteuid())
                        }),
                        self.mount.metrics_token.clone(),
                    ) {
                        Ok(e) => Some(e),
                        Err(e) => {
                            let e = setup_err(format!("--metrics: {e}"));
                            close(&kernel);
                            ready.fail(&e.0);
                            return Err(e);
                        }
                    },
                };
                let mnt_path = self.mount.mnt.clone();
                let start_kernel = || match &kernel {
                    Some(k) => k.start(&mnt_path),
                    None => Ok(()),
                };
                let r = mount::serve(fs, self.mount, &device, &mut ready, start_kernel);
                drop(endpoint);
                // Before a failed setup's exit, which drops nothing.
                close(&kernel);
                if let Err(e) = &r {
                    ready.fail(&format!("mount {mnt}: {}", mount::plain(e)));
                }
                if let (Some(path), Some(p)) = (self.save, &profiler) {
                    save(path, p);
                }
                r.map_err(|e| setup_err(format!("mount {mnt}: {}", mount::plain(&e))))
            }
            Err(e) => {
                ready.fail(&e.0);
                Err(e)
            }
        }
    }
}

/// Ends `--kernel`'s tracing (removes its ftrace instance) once the mount is over or failed.
fn close(kernel: &Option<Arc<Kernel>>) {
    if let Some(k) = kernel {
        k.close();
    }
}

/// The stack served by `fsprof-fuse` (below the transport).
pub type Stack = Control<Profiled<Passthrough>>;

/// A file system built to be served: the stack, the profiler behind its control files (if
/// profiling) and the kernel's layers to start once it is mounted (`--kernel`).
pub struct Served<F> {
    /// The file system (below the transport).
    pub fs: F,
    /// The profiler of its control files.
    pub profiler: Option<Arc<Profiler>>,
    /// `--kernel`: started once mounted ([`Kernel::start`]), before the mount is announced.
    pub kernel: Option<Arc<Kernel>>,
    /// Who may read what (the control files'; the metrics endpoint follows it).
    pub policy: Option<crate::layers::access::Policy>,
}

/// What `fsprof-fuse` serves.
pub type Built = Served<Stack>;

/// Builds the profiled passthrough of `cfg` (also raises the open-file limit and sizes the
/// descriptor cache from it); `device` is the session's, once mounted.
pub fn build(cfg: &mut FuseConfig, device: &Device) -> Result<Built, SetupError> {
    let limit = sys::raise_nofile_limit().unwrap_or(1024);
    // Half the descriptors for cached inodes, the rest for open files and the kernel channels.
    cfg.passthrough.fd_cache = cfg.passthrough.fd_cache.min((limit / 2) as usize).max(16);
    let _ = ClockInfo::get();
    let fuse_rec = cfg
        .layers
        .fuse
        .then(|| Recorder::new("fuse", &ops::NAMES, &cfg.recorder));
    let lower_rec = cfg
        .layers
        .lower
        .then(|| Recorder::new("lower", &ops::NAMES, &cfg.recorder));
    let layers: Vec<Recorder> = fuse_rec.iter().chain(lower_rec.iter()).cloned().collect();
    let profiler = (!layers.is_empty()).then(|| Arc::new(Profiler::new(layers)));
    if let Some(p) = &profiler {
        if cfg.passthrough.writeback {
            // The kernel gathers writes: the daemon no longer sees each write(2).
            p.set_extra("writeback_cache", "true")
                .expect("a valid constant key and value");
        }
        if cfg.passthrough.kernel_passthrough {
            // The kernel serves reads and writes of open files itself: the daemon never sees
            // them, and only the syscall level (with --syscalls) times them.
            let (k, v) = if cfg.records.syscalls {
                ("passthrough", "syscall")
            } else {
                ("not_profiled", "OP_READ,OP_WRITE")
            };
            p.set_extra(k, v).expect("a valid constant key and value");
        }
    }
    let records = cfg
        .records
        .build(&cfg.recorder, profiler.as_deref())
        .map_err(setup_err)?;
    if cfg.records.syscalls && profiler.is_some() {
        syscall_trace::preflight().map_err(|e| setup_err(format!("--syscalls: {e}")))?;
    }
    let kernel = match &profiler {
        Some(p) if cfg.records.kernel || cfg.records.syscalls => {
            let plan = match cfg.records.kernel {
                true => Some(Kernel::check(&[&cfg.lower])?),
                false => None,
            };
            let syscalls = cfg.records.syscalls.then(|| SyscallScope {
                mnt: &cfg.mnt,
                control_names: crate::layers::control_files::names(&cfg.control_name, None),
                records: &cfg.records,
                slow: records.set.slow.clone(),
            });
            Some(Kernel::levels(plan, syscalls, p, &cfg.recorder)?)
        }
        _ => None,
    };
    let control = profiler.as_ref().map(|p| {
        let c = ControlFiles::new(
            &cfg.control_name,
            p.clone(),
            sys::geteuid(),
            cfg.mount.allow_other,
        )
        .listed(cfg.list_control)
        .sharing(
            cfg.mount.share_records,
            Some(records.paths.clone() as Arc<dyn crate::records::Paths>),
        );
        let c = match &kernel {
            Some(k) => c.excluding(k.excluded()),
            None => c,
        };
        match &records.set.slow {
            Some(s) => c.with_slow_log(s.clone()),
            None => c,
        }
    });
    if let Some(c) = &control {
        let hidden = c.hidden_names(&[&cfg.lower]);
        cfg.passthrough.hidden_root_names.extend(hidden);
    }
    let pt = Passthrough::new(
        &cfg.lower,
        cfg.passthrough.clone(),
        Lower::new(lower_rec).injecting(records.inject.clone()),
        device.clone(),
    )
    .map_err(|e| {
        setup_err(format!(
            "lower directory {}: {}",
            cfg.lower.display(),
            mount::plain(&e)
        ))
    })?;
    log::info!(
        "serving {} at {} (inodes by {})",
        cfg.lower.display(),
        cfg.mnt.display(),
        if pt.store().uses_handles() {
            "file handle"
        } else {
            "path"
        }
    );
    records.paths.set(pt.paths());
    // The stack, from the kernel down: transport (in `serve`) → control files → profiling
    // (each request timed once, its latency given to every request record) → the passthrough.
    let policy = control.as_ref().map(|c| c.policy().clone());
    Ok(Served {
        fs: Control::new(
            profiled(pt, fuse_rec, profiler.as_deref(), records.set),
            control,
        ),
        profiler,
        kernel,
        policy,
    })
}

/// Whether what `p` names (if anything) can take a profile written at once: not a directory,
/// FIFO or socket.
fn writable_kind(p: &Path) -> std::io::Result<bool> {
    use std::os::unix::fs::FileTypeExt;
    match std::fs::metadata(p) {
        Ok(m) => {
            let t = m.file_type();
            if t.is_dir() {
                return Err(std::io::Error::from_raw_os_error(libc::EISDIR));
            }
            if t.is_fifo() || t.is_socket() {
                return Err(std::io::Error::other("not a regular file"));
            }
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Opens the daemon's log file as the daemon will (created, appended to; a pipe, such as
/// `/dev/stderr` piped to a logger, is fine).
fn check_log_file(p: &Path) -> Result<(), SetupError> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(p)
        .map(drop)
        .map_err(|e| setup_err(format!("--log-file {}: {}", p.display(), mount::plain(&e))))
}

/// Whether the profile can be written at `p` at the unmount: an existing file opened for
/// writing (not truncated), or a new one made and removed again.
fn check_save_path(p: &Path) -> Result<(), SetupError> {
    let r = writable_kind(p).and_then(|exists| {
        if exists {
            std::fs::OpenOptions::new().write(true).open(p).map(drop)
        } else {
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(p)
                .and_then(|_| std::fs::remove_file(p))
        }
    });
    r.map_err(|e| setup_err(format!("--save {}: {}", p.display(), mount::plain(&e))))
}

/// Writes the final profile (JSON if the name ends in `.json`).
fn save(path: &Path, p: &Profiler) {
    match profile_store::save::save(path, &p.snapshot()) {
        Ok(()) => log::info!("profile saved to {}", path.display()),
        Err(e) => log::error!("cannot save profile to {}: {e}", path.display()),
    }
}
