//! `fsprof profile DIR [-- CMD...]`: profile a directory in one step.
//!
//! Mounts DIR with the profiling passthrough of fsprof-fuse at a fresh private mount point (a
//! new directory of mode 0700 with an unpredictable name, made as `mkdtemp` does, never one
//! that exists already), served by this process; runs CMD there (default: read every file and
//! stat every entry, with progress on a terminal), unmounts, and shows every recorded layer.
//! The mount is removed on every path: normal end, error, panic, and Ctrl-C.
//!
//! With `--user`, CMD also runs under the preload library of `fsprof run` (`user-trace`), and
//! the profile holds three layers of the same calls: `user` (what the program called, timed
//! in the program), `fuse` (what reached the daemon) and `lower` (what the daemon called; the
//! flag implies `--lower`). A program that cannot be interposed (statically linked) is
//! refused before mounting.
//!
//! Signals: fsprof blocks `SIGINT`, `SIGTERM` and `SIGHUP` and waits for them in one thread. CMD
//! starts with the signal mask and dispositions fsprof was started with, so Ctrl-C (sent by the
//! terminal to the whole foreground process group) stops CMD as it would without fsprof; fsprof
//! then unmounts, shows the profile so far and exits with CMD's status (128 + N for a signal N,
//! as a shell reports it). A `SIGTERM` sent to fsprof alone is passed on to CMD. Without CMD, a
//! signal stops the walk, and fsprof exits with 128 + N after showing the profile.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::io::{IsTerminal as _, Read};
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use fsprof_fuse::daemon::app::{self, FuseConfig, Layers};
use fsprof_fuse::daemon::cli::{RecordingArgs, ServeArgs};
use fsprof_fuse::daemon::mount::{self, LiveMount};
use fsprof_fuse::passthrough::PassthroughConfig;
use fsprof_fuse::records::RecordConfig;
use fsprof_fuse::toolkit::kernel_cache::CachePolicy;
use fsprof_fuse::transport::MountSettings;
use profile_store::RecorderConfig;

use crate::error::Error;
use crate::input::{self, Loaded};
use crate::show::{self, ShowStyle};
use crate::sys;

/// `fsprof profile`.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileConfig {
    /// The directory to profile.
    pub dir: PathBuf,
    /// The workload to run inside the mount (working directory = the mount); empty for the
    /// built-in walk.
    pub command: Vec<OsString>,
    /// Also record the lower system calls (layer `lower`).
    pub lower_layer: bool,
    /// Run the workload under the preload library too, for a `user` layer (the program's
    /// C-library calls) above `fuse`. Needs a command.
    pub user: bool,
    /// No mount: count every file-system call of the command and its descendants in the
    /// `syscall` layer ([`crate::no_mount`]).
    pub no_mount: bool,
    /// Write the profile here too (JSON if it ends in `.json`).
    pub save: Option<PathBuf>,
    /// Show at most this many operations.
    pub top: Option<usize>,
    /// Show the findings only, not the histograms.
    pub findings_only: bool,
    /// Also write the HTML report ([`crate::report`]) here.
    pub report: Option<PathBuf>,
    /// What is recorded and how the mount is served, checked ([`recording`]).
    pub recording: Recording,
    /// How to draw the histograms.
    pub style: ShowStyle,
}

/// What `fsprof profile` records and how it serves its mount: the options it shares with
/// `fsprof-fuse` and `raif` ([`RecordingArgs`]), checked.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Recording {
    /// Buckets and time-lapse.
    pub recorder: RecorderConfig,
    /// Request records.
    pub records: RecordConfig,
    /// Transport, workers and metrics endpoint.
    pub serve: ServeArgs,
    /// The kernel caches: the preset and the knobs given over it.
    pub cache: CachePolicy,
}

/// The slowest requests `fsprof profile` keeps by default.
pub const DEFAULT_SLOWEST: usize = fsprof_fuse::records::slowest::DEFAULT_N;
/// The hottest files `fsprof profile` keeps by default.
pub const DEFAULT_HOT_FILES: usize = 100;

/// The recording options of `fsprof profile`, checked; unless `no_record`, with what the
/// report needs added where the options say nothing: the breakdown, the slowest requests
/// ([`DEFAULT_SLOWEST`]), the hottest files ([`DEFAULT_HOT_FILES`]) and the callers by command
/// name. `--slow TIME` is recorded only when given. `lower` says whether the `lower` layer is
/// recorded too (for the size check).
pub fn recording(
    mut args: RecordingArgs,
    no_record: bool,
    lower: bool,
) -> Result<Recording, Error> {
    let setup = |e: mount::SetupError| Error::usage("profile", e);
    // --no-record: histograms only, so not the breakdown the daemons record by default, unless
    // asked for.
    if no_record && !args.records.breakdown {
        args.records.no_breakdown = true;
    }
    if !no_record {
        let r = &mut args.records;
        r.breakdown = true;
        r.slowest = r.slowest.or(Some(DEFAULT_SLOWEST));
        r.hot_files = r.hot_files.or(Some(DEFAULT_HOT_FILES));
        r.by = r.by.take().or_else(|| Some("comm".into()));
    }
    let recorder = args.profile.recorder().map_err(setup)?;
    let records = args.records.config(None).map_err(setup)?;
    fsprof_fuse::daemon::cli::check_recordable(&recorder, 1 + lower as usize, &records)
        .map_err(setup)?;
    let cache = args.cache.policy();
    Ok(Recording {
        recorder,
        records,
        serve: args.serve,
        cache,
    })
}

/// The termination signal fsprof received, 0 for none.
static INTERRUPTED: AtomicI32 = AtomicI32::new(0);

/// The workload's process id while it runs, 0 otherwise.
static WORKLOAD: AtomicU32 = AtomicU32::new(0);

fn interrupted() -> i32 {
    INTERRUPTED.load(Ordering::Relaxed)
}

/// What the built-in walk did.
#[derive(Debug, Default)]
struct Walked {
    dirs: u64,
    files: u64,
    bytes: u64,
    errors: u64,
}

/// Progress of the walk on standard error when it is a terminal (files, bytes, rate, time);
/// nothing otherwise.
fn progress() -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new_spinner();
    pb.set_style(
        ProgressStyle::with_template(
            "{spinner} walking: {msg} files, {binary_bytes} read, {binary_bytes_per_sec}, {elapsed}",
        )
        .expect("a valid template"),
    );
    pb.set_message("0");
    pb.enable_steady_tick(Duration::from_millis(100));
    pb
}

/// Reads every file and stats every entry under `root` (not following symlinks).
fn walk(root: &Path) -> Walked {
    let mut w = Walked::default();
    let mut stack = vec![root.to_path_buf()];
    let mut buf = vec![0u8; 1 << 16];
    let pb = progress();
    while let Some(dir) = stack.pop() {
        if interrupted() != 0 {
            break;
        }
        w.dirs += 1;
        let Ok(rd) = std::fs::read_dir(&dir) else {
            w.errors += 1;
            continue;
        };
        for entry in rd.flatten() {
            let path = entry.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                w.errors += 1;
                continue;
            };
            if meta.is_dir() {
                stack.push(path);
            } else if meta.is_file() {
                w.files += 1;
                pb.set_message(w.files.to_string());
                match std::fs::File::open(&path) {
                    Ok(mut f) => loop {
                        if interrupted() != 0 {
                            break;
                        }
                        match f.read(&mut buf) {
                            Ok(0) => break,
                            Ok(n) => {
                                w.bytes += n as u64;
                                pb.inc(n as u64);
                            }
                            Err(_) => {
                                w.errors += 1;
                                break;
                            }
                        }
                    },
                    Err(_) => w.errors += 1,
                }
            }
        }
    }
    pb.finish_and_clear();
    w
}

/// `fsprof profile`: profiles `cfg.dir`, appending the report to `out`; returns the exit code:
/// the workload's (128 + N when a signal N ended it), 128 + N when a signal stopped the walk, 0
/// otherwise.
pub fn run(cfg: &ProfileConfig, out: &mut String) -> Result<u8, Error> {
    // The message names the directory once ("directory /abs/path: No such file...").
    let lower = mount::absolute_dir(&cfg.dir, "directory").map_err(|e| Error::usage("", e))?;
    // A new private directory (mkdtemp): never a path another user could have planted. Kept,
    // not removed recursively on drop, which could reach into a mount that is still there.
    let mnt = tempfile::Builder::new()
        .prefix("fsprof-profile-")
        .tempdir()
        .map_err(|e| Error::output(std::env::temp_dir().display().to_string(), e))?
        .keep();
    let result = profile_at(cfg, &lower, &mnt, out);
    // Only an empty directory: a mount point still in use stays.
    let _ = std::fs::remove_dir(&mnt);
    result
}

/// The exit code for a process ended by `status`: its code, or 128 + N for a signal N.
fn exit_code(status: std::process::ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(c), _) => c as u8,
        (None, Some(sig)) => (128 + sig) as u8,
        (None, None) => 1,
    }
}

/// Runs the workload `cmd` (`prog` names it in errors) with the signal mask fsprof was started
/// with, the mount's profile (`control`) reset as its last step before `exec`, so that the
/// profile holds what the program did and nothing fsprof did for it; returns its exit status
/// (and passes a `SIGTERM` fsprof receives on to it while it runs).
fn run_workload(
    mut cmd: std::process::Command,
    prog: &str,
    mask: sys::SignalMask,
    control: &Path,
) -> Result<std::process::ExitStatus, Error> {
    sys::restore_on_exec(&mut cmd, mask);
    sys::reset_on_exec(&mut cmd, control).map_err(|e| Error::usage(prog, e))?;
    let mut child = cmd.spawn().map_err(|e| Error::usage(prog, e))?;
    WORKLOAD.store(child.id(), Ordering::SeqCst);
    // A signal that came before the workload existed (a Ctrl-C while mounting) reached only
    // fsprof: pass it on, or the workload would run to its end. (One that came after the fork
    // reached it too; it gets it twice, which a program that exits on it does not notice.)
    let sig = INTERRUPTED.load(Ordering::SeqCst);
    if sig != 0 {
        sys::kill(child.id(), sig);
    }
    let status = child.wait().map_err(|e| Error::usage(prog, e));
    WORKLOAD.store(0, Ordering::SeqCst);
    status
}

/// The mount's configuration: fsprof-fuse's passthrough of `lower` at `mnt`, recording as
/// `cfg` says.
fn fuse_config(cfg: &ProfileConfig, lower: &Path, mnt: &Path) -> Result<FuseConfig, Error> {
    let setup = |e: mount::SetupError| Error::usage("mount", e);
    let cache = &cfg.recording.cache;
    Ok(FuseConfig {
        lower: lower.to_path_buf(),
        mnt: mnt.to_path_buf(),
        foreground: true,
        save: None,
        layers: Layers {
            fuse: true,
            lower: cfg.lower_layer,
        },
        recorder: cfg.recording.recorder.clone(),
        control_name: fsprof_fuse::layers::control_files::DEFAULT_NAME.into(),
        list_control: false,
        passthrough: PassthroughConfig {
            entry_ttl: cache.entry_ttl,
            attr_ttl: cache.attr_ttl,
            readdirplus: cache.readdirplus,
            writeback: cache.writeback,
            ..PassthroughConfig::default()
        },
        mount: MountSettings {
            cache: *cache,
            ..cfg
                .recording
                .serve
                .settings(mnt.to_path_buf(), lower.display().to_string(), "fsprof")
                .map_err(setup)?
        },
        log: fsprof_fuse::daemon::daemon_log::LogSink::Stderr,
        records: cfg.recording.records.clone(),
    })
}

/// Blocks the termination signals and waits for them in a thread of their own (the serving
/// threads started later inherit the mask); returns the mask the workload is to get back.
pub(crate) fn watch_signals() -> Result<sys::SignalMask, Error> {
    let mask = sys::block_termination_signals().map_err(|e| Error::usage("signals", e))?;
    std::thread::spawn(|| {
        loop {
            let sig = sys::wait_for_termination();
            INTERRUPTED.store(sig, Ordering::SeqCst);
            // Ctrl-C and a hang-up reach the workload from the terminal; a SIGTERM sent to
            // fsprof alone (kill, a supervisor) is passed on.
            let pid = WORKLOAD.load(Ordering::SeqCst);
            if sig == libc::SIGTERM && pid != 0 {
                sys::kill(pid, sig);
            }
        }
    });
    Ok(mask)
}

/// What the workload did: a line saying so, the exit code, and its status (for a command).
pub(crate) struct Ran {
    what: String,
    /// The exit code fsprof ends with.
    pub code: u8,
    /// The command's status.
    pub status: Option<std::process::ExitStatus>,
}

/// Runs the workload in the mount at `mnt`: the built-in walk, or the command (under the
/// preload library when `user` is prepared).
pub(crate) fn run_in(
    cfg: &ProfileConfig,
    mnt: &Path,
    profiler: &profile_store::Profiler,
    user: &mut Option<user_trace::Prepared>,
    mask: sys::SignalMask,
) -> Result<Ran, Error> {
    if cfg.command.is_empty() {
        // The walk is fsprof's own work, and the workload: what the mount's checks counted
        // before it is not.
        profiler.reset();
        let w = walk(mnt);
        let sig = interrupted();
        return Ok(Ran {
            what: format!(
                "walked {} directories, read {} files ({} bytes){}",
                w.dirs,
                w.files,
                w.bytes,
                if w.errors > 0 {
                    format!(", {} errors", w.errors)
                } else {
                    String::new()
                }
            ),
            code: if sig != 0 { (128 + sig) as u8 } else { 0 },
            status: None,
        });
    }
    let prog = cfg.command[0].to_string_lossy().into_owned();
    let cmd = match user {
        Some(prepared) => std::mem::replace(
            &mut prepared.command,
            std::process::Command::new(&cfg.command[0]),
        ),
        None => {
            let mut cmd = std::process::Command::new(&cfg.command[0]);
            cmd.args(&cfg.command[1..]);
            crate::sys::named_in_dir(&mut cmd, &cfg.command[0], mnt)
                .map_err(|e| Error::usage("command", format!("{prog}: {e}")))?;
            cmd
        }
    };
    let control = mnt.join(fsprof_fuse::layers::control_files::DEFAULT_NAME);
    let status = run_workload(cmd, &prog, mask, &control)?;
    Ok(Ran {
        what: format!("ran {prog}: {status}"),
        code: exit_code(status),
        status: Some(status),
    })
}

fn profile_at(
    cfg: &ProfileConfig,
    lower: &Path,
    mnt: &Path,
    out: &mut String,
) -> Result<u8, Error> {
    let setup = |e: mount::SetupError| Error::usage("mount", e);
    let mnt = mount::check_mount_point(mnt, &[lower.to_path_buf()], false).map_err(setup)?;
    // With --user, a program that cannot load the preload library is refused before mounting.
    let mut user = if cfg.user {
        Some(
            user_trace::prepare(&user_trace::RunConfig {
                command: cfg.command.clone(),
                dir: Some(mnt.clone()),
                ..user_trace::RunConfig::default()
            })
            .map_err(crate::user_run::error)?,
        )
    } else {
        None
    };
    let mut fc = fuse_config(cfg, lower, &mnt)?;
    let device = fsprof_fuse::sys::fuse::Device::new();
    let app::Served {
        fs,
        profiler,
        kernel,
        policy,
    } = app::build(&mut fc, &device).map_err(setup)?;
    let profiler = profiler.expect("profiling is on");
    profiler
        .set_extra("transport", fc.mount.transport.name())
        .expect("a valid constant key and value");
    profiler
        .set_extra("cache", fc.mount.cache.preset.name())
        .expect("a valid constant key and value");
    // Bound before mounting, so that an address that cannot be had changes nothing.
    let _endpoint = metrics_endpoint(&cfg.recording, &profiler, policy)?;
    let mask = watch_signals()?;
    let live = LiveMount::start(fs, &fc.mount, &device)
        .map_err(|e| Error::usage(format!("mount {}", mnt.display()), mount::plain(&e)))?;
    // Before the workload starts; a failure unmounts (`live` drops).
    if let Some(k) = &kernel {
        k.start(live.path())
            .map_err(|e| Error::usage("--kernel", mount::plain(&e)))?;
    }
    let started = Instant::now();
    let ran = run_in(cfg, live.path(), &profiler, &mut user, mask)?;
    let elapsed = started.elapsed();
    let mut snapshot = profiler.snapshot();
    live.stop();
    if let Some(k) = &kernel {
        // The mount is gone: nothing of the kernel's tracing stays (the syscall level's
        // program is detached), whatever happens next.
        k.close();
    }
    let ignored = add_user_layer(user, ran.status, &mut snapshot)?;
    if let Some(path) = &cfg.save {
        crate::export::save(path, &snapshot)?;
    }
    ran_line(
        cfg,
        lower,
        &ran,
        elapsed,
        ignored.as_deref(),
        &snapshot,
        out,
    );
    let loaded = Loaded {
        name: lower.display().to_string(),
        profile: snapshot,
    };
    show_profile(cfg, &loaded, out)?;
    Ok(ran.code)
}

/// The `--metrics` endpoint of `profiler`, if asked for (said on standard error).
pub(crate) fn metrics_endpoint(
    rec: &Recording,
    profiler: &Arc<profile_store::Profiler>,
    policy: Option<fsprof_fuse::layers::access::Policy>,
) -> Result<Option<fsprof_fuse::daemon::metrics::Endpoint>, Error> {
    let Some(addr) = rec.serve.metrics else {
        return Ok(None);
    };
    let bound =
        fsprof_fuse::daemon::metrics::Bound::new(addr).map_err(|e| Error::usage("--metrics", e))?;
    let e = bound
        .serve(
            profiler.clone(),
            rec.serve.metrics_native,
            policy.unwrap_or_else(|| {
                fsprof_fuse::layers::access::Policy::owner_only(fsprof_fuse::sys::geteuid())
            }),
            rec.serve
                .metrics_token()
                .map_err(|e| Error::usage("--metrics-token-file", e))?,
        )
        .map_err(|e| Error::usage("--metrics", e))?;
    eprintln!("fsprof: metrics at http://{}/metrics", e.addr());
    Ok(Some(e))
}

/// The user layer above the others (`--user`): what the program called. Returns why the
/// dynamic loader ignored the preload library, if it did.
pub(crate) fn add_user_layer(
    user: Option<user_trace::Prepared>,
    status: Option<std::process::ExitStatus>,
    snapshot: &mut profile_store::Profile,
) -> Result<Option<String>, Error> {
    let (Some(prepared), Some(status)) = (user, status) else {
        return Ok(None);
    };
    let run = prepared.finish(status).map_err(crate::user_run::error)?;
    snapshot.layers.splice(0..0, run.profile.layers);
    Ok(run.preload_ignored)
}

/// The report's first line: what ran in `dir`, how long, and a warning when the preload
/// library was `ignored`.
pub(crate) fn ran_line(
    cfg: &ProfileConfig,
    dir: &Path,
    ran: &Ran,
    elapsed: Duration,
    ignored: Option<&str>,
    snapshot: &profile_store::Profile,
    out: &mut String,
) {
    let _ = writeln!(
        out,
        "{}: {} in {:.3} s{}",
        dir.display(),
        ran.what,
        elapsed.as_secs_f64(),
        if interrupted() != 0 {
            " (interrupted)"
        } else {
            ""
        }
    );
    if cfg.user {
        out.push_str(&crate::user_run::not_files(snapshot));
    }
    if let Some(why) = ignored {
        out.push_str(&crate::user_run::preload_ignored(
            &cfg.command[0].to_string_lossy(),
            why,
        ));
    }
}

/// The findings, then (unless `--findings-only`) every recorded layer's histograms: `user`
/// with --user, `fuse`, and `lower` with --lower (the per-caller layers of `--by` are summed
/// up in the findings' callers); and the report, with `--report`.
pub(crate) fn show_profile(
    cfg: &ProfileConfig,
    loaded: &Loaded,
    out: &mut String,
) -> Result<(), Error> {
    let slow = crate::slow::slowest_of(&loaded.profile)
        .map_err(|e| Error::input(&loaded.name, e))?
        .unwrap_or_default();
    let found = crate::findings::find(&loaded.profile, &slow, crate::findings::Limits::default());
    out.push('\n');
    out.push_str(&crate::findings::render(&found));
    if !cfg.findings_only {
        let maxima = crate::maxima::Maxima::of(&loaded.profile);
        for layer in loaded
            .profile
            .layers
            .iter()
            .filter(|l| !profile_store::keyed::is_per_caller(&l.name))
        {
            out.push('\n');
            let ops = input::select_ops(layer, &[], cfg.top, cfg.style.shares)?;
            out.push_str(&show::render(
                layer,
                &ops,
                loaded.clock(),
                false,
                &cfg.style,
                &maxima,
            ));
        }
    }
    if let Some(path) = &cfg.report {
        let html = crate::report::html(loaded, &found, &slow);
        crate::report::write(path, &html)?;
        let _ = writeln!(out, "\nreport written to {}", path.display());
    }
    Ok(())
}
