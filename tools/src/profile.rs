//! `fsprof profile DIR [-- CMD...]`: profile a directory in one step.
//!
//! Mounts DIR with the profiling passthrough of fsprof-fuse at a temporary mount point (served by
//! this process), runs CMD there (default: read every file and stat every entry), unmounts, and
//! shows the profile. The mount is removed on every path: normal end, error, panic, and
//! Ctrl-C (which stops the walk or reaches CMD, after which the profile so far is shown).

use std::ffi::OsString;
use std::fmt::Write as _;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use fsprof_fuse::app::{self, FuseConfig, Layers};
use fsprof_fuse::mount::{self, LiveMount, MountSettings};
use fsprof_fuse::passthrough::PassthroughConfig;
use profile_store::RecorderConfig;

use crate::error::Error;
use crate::input::{self, Loaded};
use crate::show::{self, ShowStyle};

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
    /// Write the profile here too (JSON if it ends in `.json`).
    pub save: Option<PathBuf>,
    /// Show at most this many operations.
    pub top: Option<usize>,
    /// How to draw the histograms.
    pub style: ShowStyle,
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// What the built-in walk did.
#[derive(Debug, Default)]
struct Walked {
    dirs: u64,
    files: u64,
    bytes: u64,
    errors: u64,
}

/// Reads every file and stats every entry under `root` (not following symlinks).
fn walk(root: &Path) -> Walked {
    let mut w = Walked::default();
    let mut stack = vec![root.to_path_buf()];
    let mut buf = vec![0u8; 1 << 16];
    while let Some(dir) = stack.pop() {
        if INTERRUPTED.load(Ordering::Relaxed) {
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
                match std::fs::File::open(&path) {
                    Ok(mut f) => loop {
                        match f.read(&mut buf) {
                            Ok(0) => break,
                            Ok(n) => w.bytes += n as u64,
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
    w
}

/// `fsprof profile`: profiles `cfg.dir`, appending the report to `out`.
pub fn run(cfg: &ProfileConfig, out: &mut String) -> Result<(), Error> {
    let dir_name = cfg.dir.display().to_string();
    let lower =
        mount::absolute_dir(&cfg.dir, "directory").map_err(|e| Error::usage(&dir_name, e))?;
    let mnt = std::env::temp_dir().join(format!("fsprof-profile-{}", std::process::id()));
    std::fs::create_dir_all(&mnt).map_err(|e| Error::output(mnt.display().to_string(), e))?;
    let result = profile_at(cfg, &lower, &mnt, out);
    let _ = std::fs::remove_dir(&mnt);
    result
}

fn profile_at(
    cfg: &ProfileConfig,
    lower: &Path,
    mnt: &Path,
    out: &mut String,
) -> Result<(), Error> {
    let setup = |e: mount::SetupError| Error::usage("mount", e);
    let mnt = mount::check_mount_point(mnt, &[lower.to_path_buf()], false).map_err(setup)?;
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
            allow_other: false,
            auto_unmount: false,
        },
        log_file: None,
    };
    let (fs, profiler) = app::build(&mut fc).map_err(setup)?;
    let profiler = profiler.expect("profiling is on");
    // Ctrl-C and friends stop the walk (a command gets them from the terminal itself); the
    // mount is then removed as on a normal end.
    fsprof_fuse::sys::block_termination_signals().map_err(|e| Error::usage("signals", e))?;
    std::thread::spawn(|| {
        loop {
            fsprof_fuse::sys::wait_for_termination();
            INTERRUPTED.store(true, Ordering::Relaxed);
        }
    });
    let live = LiveMount::start(fs, &fc.mount)
        .map_err(|e| Error::usage(format!("mount {}", mnt.display()), mount::plain(&e)))?;
    let started = Instant::now();
    let workload = if cfg.command.is_empty() {
        let w = walk(live.path());
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
        )
    } else {
        let prog = cfg.command[0].to_string_lossy().into_owned();
        let status = std::process::Command::new(&cfg.command[0])
            .args(&cfg.command[1..])
            .current_dir(live.path())
            .status()
            .map_err(|e| Error::usage(&prog, e))?;
        format!("ran {prog}: {status}")
    };
    let elapsed = started.elapsed();
    let snapshot = profiler.snapshot();
    live.stop();
    if let Some(path) = &cfg.save {
        let body = if path.extension().is_some_and(|e| e == "json") {
            profile_store::json::write(&snapshot)
        } else {
            profile_store::text::write(&snapshot)
        };
        std::fs::write(path, body).map_err(|e| Error::output(path.display().to_string(), e))?;
    }
    let _ = writeln!(
        out,
        "{}: {workload} in {:.3} s{}",
        lower.display(),
        elapsed.as_secs_f64(),
        if INTERRUPTED.load(Ordering::Relaxed) {
            " (interrupted)"
        } else {
            ""
        }
    );
    let loaded = Loaded {
        name: lower.display().to_string(),
        profile: snapshot,
    };
    let layer = loaded.layer(None)?;
    let ops = input::select_ops(layer, &[], cfg.top)?;
    out.push_str(&show::render(
        layer,
        &ops,
        loaded.clock(),
        false,
        &cfg.style,
    ));
    Ok(())
}
