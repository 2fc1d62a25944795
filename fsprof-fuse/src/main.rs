//! `fsprof-fuse LOWER MNT`: serve LOWER at MNT and profile every file-system operation.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, ValueEnum};
use fsprof_fuse::daemon::app::{self, FuseConfig, Layers};
use fsprof_fuse::daemon::cli::{self, ControlArgs, DaemonArgs, RecordingArgs};
use fsprof_fuse::daemon::mount::{self, SetupError};
use fsprof_fuse::filesystem::Caps;
use fsprof_fuse::passthrough::inode_store::InodeMode;
use fsprof_fuse::passthrough::{Flush, PassthroughConfig};

/// Serve LOWER at MNT unchanged and profile every operation.
///
/// Every FUSE request is timed with the CPU cycle counter and counted in log2 latency buckets:
/// once, from right before the daemon serves it to the moment its answer is ready, and that
/// one latency is what every request record (--slow, --slowest, --by, --hot-files, the
/// breakdown) gets; they do their own work outside it (what each costs per request:
/// benchmarks/RESULTS.md, docs/guide.md#fidelity).
/// `cat MNT/.fsprof` prints the profile (`MNT/.fsprof.json` as JSON); any write to either file,
/// or `: > MNT/.fsprof`, resets it. The command returns once the mount is live, printing
/// nothing, and keeps serving in the background; `umount MNT` (or `fusermount3 -u MNT` as a
/// normal user) ends it. Its log goes to --log-file, else to syslog where the machine has it
/// (/dev/log), else to /var/log/fsprof/fsprof-fuse.log (root) or
/// ~/.local/state/fsprof/fsprof-fuse.log. A killed daemon leaves a dead mount (every access
/// fails with "Transport endpoint is not connected") until `umount MNT` clears it; mounting
/// there again says so.
///
/// mount(8) and fstab: `mount -t fuse.fsprof-fuse LOWER MNT -o allow_other,cache=exact`, or the
/// fstab line `LOWER MNT fuse.fsprof-fuse allow_other,cache=exact,nofail 0 0` (every long
/// option has a -o form: see -o).
///
/// Files opened with O_DIRECT keep it on LOWER: their reads and writes bypass the page cache of
/// the mount and of LOWER, as they would on LOWER, and LOWER's rules for aligned offsets and
/// lengths apply (the caller's buffer need not be aligned: the daemon copies each direct write
/// into an aligned buffer of its own). ioctl requests are not passed to LOWER: they are
/// answered ENOTTY, so lsattr and chattr do not work through the mount.
///
/// Durations take a unit: 2s, 500ms, 250us (and 4096c, clock cycles, for --epoch).
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
    #[arg(long, conflicts_with_all = ["layers", "save"], conflicts_with_all = RecordingArgs::RECORDING)]
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
    #[command(flatten)]
    rec: RecordingArgs,
    #[command(flatten)]
    control: ControlArgs,
    /// Kernel writeback cache: faster small writes, but the daemon (and the profile) no longer
    /// sees each write(2). On with --cache fast.
    #[arg(long, help_heading = "Data path")]
    writeback: bool,
    /// Bypass the page cache: every read and write reaches the daemon. Shared mmap of files
    /// needs Linux 6.6+ (FUSE_DIRECT_IO_ALLOW_MMAP); older kernels refuse it with ENODEV.
    #[arg(long, help_heading = "Data path", conflicts_with = "writeback")]
    direct_io: bool,
    /// Kernel FUSE passthrough (Linux 6.9+, root): reads and writes of open files go straight
    /// from the kernel to the lower file. Faster, but the daemon no longer sees them: they are
    /// not profiled (the profile says so).
    #[arg(long, help_heading = "Data path", conflicts_with_all = ["writeback", "direct_io"])]
    passthrough: bool,
    /// Drop the page cache of a file at every open (by default it is kept while the lower
    /// file's size and mtime do not change).
    #[arg(long, help_heading = "Data path")]
    no_keep_cache: bool,
    /// Forward close(2) as FLUSH: auto (only when LOWER is a network or FUSE file system, where
    /// a close can report errors), always, never.
    #[arg(long, help_heading = "Data path", value_enum, default_value = "auto")]
    flush: FlushArg,
    /// Kernel capabilities not to request, comma-separated (for measuring what each buys):
    /// readdirplus, parallel-dirops, killpriv, auto-inval-data, atomic-o-trunc, cache-symlinks.
    #[arg(
        long,
        help_heading = "Data path",
        value_delimiter = ',',
        value_name = "CAP,...",
        hide = true
    )]
    caps_off: Vec<CapArg>,
    /// How inodes are located: by file handle (needs root), by parent and name, or auto.
    #[arg(long, help_heading = "Data path", value_enum, default_value = "auto")]
    inode_mode: InodeModeArg,
    #[command(flatten)]
    daemon: DaemonArgs,
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
    fn flags(self) -> Caps {
        match self {
            CapArg::Readdirplus => Caps::DO_READDIRPLUS | Caps::READDIRPLUS_AUTO,
            CapArg::ParallelDirops => Caps::PARALLEL_DIROPS,
            CapArg::Killpriv => Caps::HANDLE_KILLPRIV_V2,
            CapArg::AutoInvalData => Caps::AUTO_INVAL_DATA,
            CapArg::AtomicOTrunc => Caps::ATOMIC_O_TRUNC,
            CapArg::CacheSymlinks => Caps::CACHE_SYMLINKS,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum InodeModeArg {
    Auto,
    Handles,
    Paths,
}

fn config(a: Args) -> Result<FuseConfig, SetupError> {
    let lower = mount::absolute_dir(&a.lower, "lower directory")?;
    let mnt = mount::check_mount_point(&a.mnt, std::slice::from_ref(&lower), a.daemon.nonempty)?;
    let layers = if a.no_profile {
        Layers::default()
    } else {
        Layers {
            fuse: a.layers.contains(&LayerArg::Fuse),
            lower: a.layers.contains(&LayerArg::Lower),
        }
    };
    let recorder = a.rec.profile.recorder()?;
    let mut records = a.rec.records.config(None)?;
    // Nothing is recorded without a profile: not the breakdown either, on by default.
    records.breakdown &= !a.no_profile;
    if !a.no_profile {
        let n = layers.fuse as usize + layers.lower as usize;
        cli::check_recordable(&recorder, n, &records)?;
    }
    let control_name = a.control.control_name()?;
    let cache = a.rec.cache.policy();
    // The fast preset's writeback cache gives way to a data path that excludes it.
    let writeback = a.writeback || (cache.writeback && !a.direct_io && !a.passthrough);
    let passthrough = PassthroughConfig {
        entry_ttl: cache.entry_ttl,
        attr_ttl: cache.attr_ttl,
        readdirplus: cache.readdirplus,
        writeback,
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
            .fold(Caps::empty(), |acc, c| acc | c.flags()),
        kernel_passthrough: a.passthrough,
        ..PassthroughConfig::default()
    };
    let mut mount = a
        .rec
        .settings(mnt.clone(), lower.display().to_string(), "fsprof-fuse")?;
    a.daemon.apply(&mut mount, false)?;
    let save = a.save.map(|p| std::path::absolute(&p).unwrap_or(p));
    Ok(FuseConfig {
        lower,
        mnt,
        foreground: a.foreground,
        save,
        layers,
        recorder,
        control_name,
        list_control: a.control.list_control,
        passthrough,
        mount,
        log: a.daemon.log("fsprof-fuse", a.foreground)?,
        records,
    })
}

fn main() -> ExitCode {
    if let Some(dir) = cli_support::docs_request() {
        return cli_support::docs_main(Args::command(), &dir);
    }
    // mount(8) and fstab give the options as `-o key[=value],...`.
    let argv = match cli::mount_opts::rewrite(&Args::command(), std::env::args_os()) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("fsprof-fuse: {e}");
            return ExitCode::from(2);
        }
    };
    let args = match Args::try_parse_from(argv) {
        Ok(a) => a,
        Err(e) => return cli_support::usage_error("fsprof-fuse", e),
    };
    let level = args.daemon.log_level.clone();
    let cfg = config(args).inspect(|c| {
        fsprof_fuse::daemon::daemon_log::init(&level, "fsprof-fuse", Some(&c.mnt), &c.log)
    });
    match cfg.and_then(app::run) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fsprof-fuse: {e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// clap's own checks of the definition (conflicts and requirements name real options):
    /// run in debug builds only, so a test makes them run under `cargo test --release` too.
    #[test]
    fn the_options_are_consistent() {
        super::Args::command().debug_assert();
    }
}
