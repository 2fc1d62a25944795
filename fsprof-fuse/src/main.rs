//! `fsprof-fuse LOWER MNT`: serve LOWER at MNT and profile every file-system operation.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use fsprof_fuse::app::{self, FuseConfig, Layers};
use fsprof_fuse::control::DEFAULT_NAME;
use fsprof_fuse::inode::InodeMode;
use fsprof_fuse::mount::{self, MountSettings, SetupError, setup_err};
use fsprof_fuse::passthrough::{Flush, PassthroughConfig};
use fuser::InitFlags;
use profile_store::{ClockInfo, RecorderConfig, Resolution};

/// Serve LOWER at MNT unchanged and profile every operation.
///
/// Every FUSE request is timed with the CPU cycle counter and counted in log2 latency buckets.
/// `cat MNT/.fsprof` prints the profile (`MNT/.fsprof.json` as JSON); any write to either file,
/// or `: > MNT/.fsprof`, resets it. The command returns once the mount is live and keeps serving
/// in the background; `umount MNT` (or `fusermount3 -u MNT` as a normal user) ends it.
///
/// Needs /dev/fuse; as a normal user, fusermount3 (Debian package fuse3).
#[derive(Parser, Debug)]
#[command(version, max_term_width = 100)]
struct Args {
    /// Directory to serve.
    lower: PathBuf,
    /// Where to mount it (an existing, empty directory).
    mnt: PathBuf,

    /// Stay in the foreground (Ctrl-C unmounts).
    #[arg(short, long)]
    foreground: bool,
    /// Write the final profile to this file at unmount (JSON if it ends in .json).
    #[arg(long, value_name = "PATH")]
    save: Option<PathBuf>,
    /// Pure passthrough: record nothing and serve no control files (to measure our own cost).
    #[arg(long, conflicts_with_all = ["layers", "epoch", "save"])]
    no_profile: bool,
    /// Layers to record: `fuse` (FUSE requests) and/or `lower` (the lower system calls, under
    /// the FUSE operation that made them; the gap between the two is our own overhead).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "fuse",
        value_name = "LAYER,..."
    )]
    layers: Vec<LayerArg>,
    /// Buckets per power of two (1, 2, 4 or 8).
    #[arg(long, default_value_t = 1, value_parser = parse_resolution)]
    resolution: u32,
    /// Time-lapse: cut the profile into epochs of this length (e.g. 2s, 500ms, 2^32 cycles).
    #[arg(long, value_name = "LENGTH")]
    epoch: Option<String>,
    /// Most epochs kept with --epoch; later samples go into the last one.
    #[arg(long, default_value_t = 256, value_name = "N")]
    max_epochs: usize,
    /// Base name of the control files (NAME and NAME.json at the mount root).
    #[arg(long, default_value = DEFAULT_NAME, value_name = "NAME")]
    control_name: String,

    /// Seconds the kernel may cache names.
    #[arg(long, default_value_t = 1.0, value_name = "SECS")]
    entry_timeout: f64,
    /// Seconds the kernel may cache attributes.
    #[arg(long, default_value_t = 1.0, value_name = "SECS")]
    attr_timeout: f64,
    /// Kernel writeback cache: faster small writes, but the daemon (and the profile) no longer
    /// sees each write(2).
    #[arg(long)]
    writeback: bool,
    /// Kernel FUSE passthrough (Linux 6.9+, root): reads and writes of open files go straight
    /// from the kernel to the lower file. Faster, but the daemon no longer sees them: they are
    /// not profiled (the profile says so).
    #[arg(long, conflicts_with_all = ["writeback", "direct_io"])]
    passthrough: bool,
    /// Bypass the page cache: every read and write reaches the daemon.
    #[arg(long, conflicts_with = "writeback")]
    direct_io: bool,
    /// Drop the page cache of a file at every open (by default it is kept while the lower
    /// file's size and mtime do not change).
    #[arg(long)]
    no_keep_cache: bool,
    /// Forward close(2) as FLUSH: auto (only when LOWER is a network or FUSE file system, where
    /// a close can report errors), always, never.
    #[arg(long, value_enum, default_value = "auto")]
    flush: FlushArg,
    /// Kernel capabilities not to request, comma-separated (for measuring what each buys):
    /// readdirplus, parallel-dirops, killpriv, auto-inval-data, atomic-o-trunc, cache-symlinks.
    #[arg(long, value_delimiter = ',', value_name = "CAP,...", hide = true)]
    caps_off: Vec<CapArg>,
    /// How inodes are located: by file handle (needs root), by parent and name, or auto.
    #[arg(long, value_enum, default_value = "auto")]
    inode_mode: InodeModeArg,
    /// Worker threads (each with its own /dev/fuse descriptor). Default: 2 per CPU, 4 to 16.
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// Let other users use the mount (needs user_allow_other in /etc/fuse.conf for non-root).
    #[arg(long)]
    allow_other: bool,
    /// Have fusermount3 unmount if the daemon dies.
    #[arg(long)]
    auto_unmount: bool,
    /// Allow mounting over a non-empty directory.
    #[arg(long)]
    nonempty: bool,
    /// Daemon log file (background mode; otherwise logs go to stderr).
    #[arg(long, value_name = "PATH")]
    log_file: Option<PathBuf>,
    /// Log level (error, warn, info, debug, trace); RUST_LOG overrides.
    #[arg(long, default_value = "warn", value_name = "LEVEL")]
    log_level: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LayerArg {
    Fuse,
    Lower,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum FlushArg {
    Auto,
    Always,
    Never,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum CapArg {
    Readdirplus,
    ParallelDirops,
    Killpriv,
    AutoInvalData,
    AtomicOTrunc,
    CacheSymlinks,
}

impl CapArg {
    fn flags(self) -> InitFlags {
        match self {
            CapArg::Readdirplus => {
                InitFlags::FUSE_DO_READDIRPLUS | InitFlags::FUSE_READDIRPLUS_AUTO
            }
            CapArg::ParallelDirops => InitFlags::FUSE_PARALLEL_DIROPS,
            CapArg::Killpriv => InitFlags::FUSE_HANDLE_KILLPRIV_V2,
            CapArg::AutoInvalData => InitFlags::FUSE_AUTO_INVAL_DATA,
            CapArg::AtomicOTrunc => InitFlags::FUSE_ATOMIC_O_TRUNC,
            CapArg::CacheSymlinks => InitFlags::FUSE_CACHE_SYMLINKS,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum InodeModeArg {
    Auto,
    Handles,
    Paths,
}

fn parse_resolution(s: &str) -> Result<u32, String> {
    s.parse::<u32>()
        .ok()
        .filter(|r| Resolution::new(*r).is_some())
        .ok_or_else(|| format!("'{s}' is not 1, 2, 4 or 8"))
}

fn secs(v: f64, what: &str) -> Result<Duration, SetupError> {
    Duration::try_from_secs_f64(v)
        .map_err(|_| setup_err(format!("--{what} {v}: not a number of seconds")))
}

fn config(a: Args) -> Result<FuseConfig, SetupError> {
    let lower = mount::absolute_dir(&a.lower, "lower directory")?;
    let mnt = mount::check_mount_point(&a.mnt, std::slice::from_ref(&lower), a.nonempty)?;
    let layers = if a.no_profile {
        Layers::default()
    } else {
        Layers {
            fuse: a.layers.contains(&LayerArg::Fuse),
            lower: a.layers.contains(&LayerArg::Lower),
        }
    };
    let epoch_cycles = match &a.epoch {
        None => 0,
        Some(e) => profile_store::clock::parse_epoch_length(e, ClockInfo::get().cycles_per_sec)
            .map_err(setup_err)?,
    };
    if a.max_epochs == 0 {
        return Err(setup_err("--max-epochs must be at least 1"));
    }
    let control_ok = !a.control_name.is_empty()
        && !a.control_name.contains('/')
        && a.control_name != "."
        && a.control_name != "..";
    if !control_ok {
        return Err(setup_err(format!(
            "--control-name '{}': not a file name",
            a.control_name
        )));
    }
    let threads = a.threads.unwrap_or_else(|| {
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
        (cpus * 2).clamp(4, 16)
    });
    if threads == 0 || threads > 256 {
        return Err(setup_err("--threads must be 1..=256"));
    }
    let passthrough = PassthroughConfig {
        entry_ttl: secs(a.entry_timeout, "entry-timeout")?,
        attr_ttl: secs(a.attr_timeout, "attr-timeout")?,
        writeback: a.writeback,
        keep_cache: !a.no_keep_cache,
        direct_io: a.direct_io,
        inode_mode: match a.inode_mode {
            InodeModeArg::Auto => InodeMode::Auto,
            InodeModeArg::Handles => InodeMode::Handles,
            InodeModeArg::Paths => InodeMode::Paths,
        },
        flush: match a.flush {
            FlushArg::Auto => Flush::Auto,
            FlushArg::Always => Flush::Always,
            FlushArg::Never => Flush::Never,
        },
        caps_off: a
            .caps_off
            .iter()
            .fold(InitFlags::empty(), |acc, c| acc | c.flags()),
        kernel_passthrough: a.passthrough,
        ..PassthroughConfig::default()
    };
    let mount = MountSettings {
        mnt: mnt.clone(),
        fsname: lower.display().to_string(),
        subtype: "fsprof".into(),
        threads,
        allow_other: a.allow_other,
        default_permissions: true,
        auto_unmount: a.auto_unmount,
    };
    let recorder = RecorderConfig {
        resolution: Resolution::new(a.resolution).expect("checked by the parser"),
        epoch_cycles,
        max_epochs: a.max_epochs,
    };
    let save = a.save.map(|p| std::path::absolute(&p).unwrap_or(p));
    let log_file = a.log_file.map(|p| std::path::absolute(&p).unwrap_or(p));
    Ok(FuseConfig {
        lower,
        mnt,
        foreground: a.foreground,
        save,
        layers,
        recorder,
        control_name: a.control_name,
        passthrough,
        mount,
        log_file,
    })
}

/// A clap error as one line (`--help` and `--version` print normally).
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        e.exit();
    }
    eprintln!(
        "fsprof-fuse: {} (see --help)",
        one_line(&e.render().to_string())
    );
    ExitCode::from(2)
}

/// The message part of a rendered clap error, joined into one line.
fn one_line(rendered: &str) -> String {
    rendered
        .lines()
        .take_while(|l| !l.is_empty() && !l.starts_with("Usage:"))
        .map(|l| l.trim().trim_start_matches("error: "))
        .collect::<Vec<_>>()
        .join(" ")
}

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) => return usage_error(e),
    };
    let mut logger = env_logger::Builder::from_env(
        env_logger::Env::default().default_filter_or(&args.log_level),
    );
    if std::env::var_os("RUST_LOG").is_none() {
        // fuser warns when its own unmount-on-drop finds the mount already gone, which is how
        // every clean unmount ends here; its own comment calls this not necessarily an error.
        logger.filter_module("fuser::mnt", log::LevelFilter::Error);
        logger.filter_module("fuser::session", log::LevelFilter::Error);
    }
    logger.format_timestamp_millis().init();
    match config(args).and_then(app::run) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fsprof-fuse: {e}");
            ExitCode::from(2)
        }
    }
}
