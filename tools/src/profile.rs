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
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use fsprof_fuse::app::{self, FuseConfig, Layers};
use fsprof_fuse::mount::{self, LiveMount, MountSettings};
use fsprof_fuse::passthrough::PassthroughConfig;
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
    /// Write the profile here too (JSON if it ends in `.json`).
    pub save: Option<PathBuf>,
    /// Show at most this many operations.
    pub top: Option<usize>,
    /// How to draw the histograms.
    pub style: ShowStyle,
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
    let dir_name = cfg.dir.display().to_string();
    let lower =
        mount::absolute_dir(&cfg.dir, "directory").map_err(|e| Error::usage(&dir_name, e))?;
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
/// with; returns its exit status (and passes a `SIGTERM` fsprof receives on to it while it
/// runs).
fn run_workload(
    mut cmd: std::process::Command,
    prog: &str,
    mask: sys::SignalMask,
) -> Result<std::process::ExitStatus, Error> {
    sys::restore_on_exec(&mut cmd, mask);
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
    let mut fc = FuseConfig {
        lower: lower.to_path_buf(),
        mnt: mnt.clone(),
        foreground: true,
        save: None,
        layers: Layers {
            fuse: true,
            lower: cfg.lower_layer,
        },
        recorder: RecorderConfig::default(),
        control_name: fsprof_fuse::control::DEFAULT_NAME.into(),
        list_control: false,
        passthrough: PassthroughConfig::default(),
        mount: MountSettings {
            mnt: mnt.clone(),
            fsname: lower.display().to_string(),
            subtype: "fsprof".into(),
            threads: 4,
            max_threads: fsprof_fuse::transport::settings::DEFAULT_MAX_THREADS,
            allow_other: false,
            auto_unmount: false,
            transport: fsprof_fuse::transport::Transport::Classic,
            metrics: None,
            metrics_native: false,
        },
        log_file: None,
        records: Default::default(),
    };
    let device = fsprof_fuse::sys::fuse::Device::new();
    let (fs, profiler) = app::build(&mut fc, &device).map_err(setup)?;
    let profiler = profiler.expect("profiling is on");
    // The termination signals are waited for in one thread (the serving threads started below
    // inherit the mask); the workload gets the mask from before.
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
    let live = LiveMount::start(fs, &fc.mount, &device)
        .map_err(|e| Error::usage(format!("mount {}", mnt.display()), mount::plain(&e)))?;
    let started = Instant::now();
    let mut workload_status = None;
    let (workload, code) = if cfg.command.is_empty() {
        let w = walk(live.path());
        let sig = interrupted();
        (
            format!(
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
            if sig != 0 { (128 + sig) as u8 } else { 0 },
        )
    } else {
        let prog = cfg.command[0].to_string_lossy().into_owned();
        let cmd = match &mut user {
            Some(prepared) => std::mem::replace(
                &mut prepared.command,
                std::process::Command::new(&cfg.command[0]),
            ),
            None => {
                let mut cmd = std::process::Command::new(&cfg.command[0]);
                cmd.args(&cfg.command[1..]).current_dir(live.path());
                cmd
            }
        };
        let status = run_workload(cmd, &prog, mask)?;
        workload_status = Some(status);
        (format!("ran {prog}: {status}"), exit_code(status))
    };
    let elapsed = started.elapsed();
    let mut snapshot = profiler.snapshot();
    live.stop();
    // The user layer above the daemon's: what the program called, then what reached it.
    let mut ignored = None;
    if let (Some(prepared), Some(status)) = (user, workload_status) {
        let run = prepared.finish(status).map_err(crate::user_run::error)?;
        snapshot.layers.splice(0..0, run.profile.layers);
        ignored = run.preload_ignored;
    }
    if let Some(path) = &cfg.save {
        crate::export::save(path, &snapshot)?;
    }
    let _ = writeln!(
        out,
        "{}: {workload} in {:.3} s{}",
        lower.display(),
        elapsed.as_secs_f64(),
        if interrupted() != 0 {
            " (interrupted)"
        } else {
            ""
        }
    );
    if let Some(why) = &ignored {
        out.push_str(&crate::user_run::preload_ignored(
            &cfg.command[0].to_string_lossy(),
            why,
        ));
    }
    let loaded = Loaded {
        name: lower.display().to_string(),
        profile: snapshot,
    };
    // Every recorded layer: `user` with --user, `fuse`, and `lower` with --lower.
    for (i, layer) in loaded.profile.layers.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let ops = input::select_ops(layer, &[], cfg.top)?;
        out.push_str(&show::render(
            layer,
            &ops,
            loaded.clock(),
            false,
            &cfg.style,
        ));
    }
    Ok(code)
}
