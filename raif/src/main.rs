//! `raif`: serve several branch directories as one RAID-like file system, and its admin
//! commands (`raif status`, `raif fail`, `raif replace`, `raif rebuild`, `raif scrub`,
//! `raif split`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{CommandFactory, Parser, Subcommand};
use fsprof_fuse::daemon::cli::{ControlArgs, DaemonArgs, RecordingArgs};
use fsprof_fuse::daemon::mount::{self, SetupError, setup_err};
use raif::admin;
use raif::app::{self, RaifConfig};
use raif::fs::FsConfig;
use raif::layout::Level;
use raif::policy::{self, Policy, Settings};

/// Serve several branch directories as one RAID-like file system (RAIF) at MNT.
///
/// Files are stored per file at RAID level 0 (striped), 1 (mirrored), 4 (striped, parity on
/// one branch) or 5 (striped, rotating parity); each branch holds its part of every file at
/// the same path, as an ordinary file. A policy file can give each file name its own level.
/// A missing, replaced or failing branch is taken out of service and the volume keeps being
/// served from the others (RAIF1/4/5 files stay readable and writable).
///
/// `cat MNT/.raif` shows branch health; `cat MNT/.fsprof` the profile: the `fuse` layer (FUSE
/// requests) and one layer per branch (`branch0`, ...), which counts the system calls made on
/// that branch, each under the FUSE operation that made it (so a create counts two on every
/// branch: the file and its record). The command returns once the mount is live, printing
/// nothing; `umount MNT` ends it. Its log goes to --log-file, else to syslog where the machine
/// has it (/dev/log), else to /var/log/fsprof/raif.log (root) or
/// ~/.local/state/fsprof/raif.log.
///
/// mount(8) and fstab give the branches joined by ':' and the options as -o: `mount -t
/// fuse.raif /d0:/d1:/d2 MNT -o level=5,stripe=64K`, or the fstab line `/d0:/d1:/d2 MNT
/// fuse.raif level=5,nofail 0 0` (every long option has a -o form: see -o).
///
/// A branch that runs out of room (ENOSPC, EDQUOT, EFBIG) is not failed: the caller gets its
/// error, and what the refused write changed is put back.
///
/// The volume remembers the settings of new files (--level, --stripe, --copies,
/// --parity-branch, and the digest of the --policy file): a mount that gives none of them uses
/// the volume's; one that gives others changes them for new files only, and says so in one
/// line. A directory that is not the member it is given as (an old copy of its member, say the
/// directory a member was rebuilt away from, or another volume's) is refused with one line
/// naming it, unless --take-failed.
///
/// The control file MNT/.raif. Reading it shows the volume; its first lines are stable:
/// `volume ID`, `default level=L ...`, `epoch N`, `mount N`, `branches N online M`, and
/// `branch I STATE PATH [since_unix=T] [reason="..."]` for each branch (STATE: online, failed,
/// stale, rebuilding). Then: `generations G0 G1 ...` (each member's generation, raised when it
/// is rebuilt), `settings level= stripe= copies= parity= policy=`, `error T "..."` (the last
/// errors), `refused "..."` (the last command refused, and why), the degraded and checksum
/// counters, the intent log's, and `rebuild branch N ...` (progress of a rebuild while
/// mounted). Writing a line to it runs a command: `check` (check every branch now), `fail N`
/// (take branch N out of service, as `raif fail`), `rebuild N NEWDIR` (as `raif replace`). A
/// refused command answers EINVAL or EBUSY and says why in the `refused` line; `raif fail`
/// and `raif replace` print it.
#[derive(Parser, Debug)]
#[command(
    version,
    max_term_width = 100,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    override_usage = "raif [OPTIONS] --branches DIR,DIR,... MNT\n       \
                      raif [OPTIONS] DIR:DIR:... MNT\n       raif <COMMAND>"
)]
struct Args {
    /// Branch directories, comma-separated, in order (the order is each branch's index).
    #[arg(long = "branches", value_delimiter = ',', value_name = "DIR,DIR,...")]
    branches: Vec<PathBuf>,
    /// The branch directories joined by ':', in order, as mount(8) and fstab give them
    /// (`mount -t fuse.raif B0:B1:B2 MNT -o level=5`), when --branches is not given; with
    /// --branches, the mount point.
    #[arg(value_name = "DIR:DIR:...")]
    source: Option<std::ffi::OsString>,
    /// Where to mount (an existing, empty directory).
    #[arg(value_name = "MNT")]
    mnt: Option<PathBuf>,

    /// RAID level of new files where the policy says nothing: 0, 1, 4 or 5 (default: the
    /// volume's; 1 for a new volume).
    #[arg(long, value_parser = parse_level)]
    level: Option<u32>,
    /// Stripe unit of new striped files, a power of two, e.g. 4K, 64K, 1M (default: the
    /// volume's; 64K for a new volume).
    #[arg(long, value_parser = parse_stripe)]
    stripe: Option<u32>,
    /// RAIF1: number of copies of new files (default: the volume's; one per branch for a new
    /// volume).
    #[arg(long, value_name = "N")]
    copies: Option<usize>,
    /// RAIF4: the parity branch (default: the volume's; the last for a new volume).
    #[arg(long, value_name = "N")]
    parity_branch: Option<usize>,
    /// Take a branch that is not the member it is given as (an old copy of its member,
    /// another volume's, another member) in as failed, rather than refuse the volume: it is
    /// never read or written, and an old copy of its member is rebuilt in place at once.
    #[arg(long)]
    take_failed: bool,
    /// Per-file policy (TOML: ordered [[rule]] glob -> level/stripe/copies, and [default]).
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// How often to check that every branch is still in place: a number and a unit (ns, us,
    /// ms, s, m), e.g. 2s or 500ms; 0s checks only when .raif is read and on errors. A bare
    /// number is refused.
    #[arg(long, default_value = "2s", value_name = "DURATION", value_parser = parse_interval)]
    check_interval: Duration,

    /// Stay in the foreground (Ctrl-C unmounts).
    #[arg(short, long)]
    foreground: bool,
    /// Write the final profile to this file at unmount (JSON if it ends in .json).
    #[arg(long, value_name = "PATH")]
    save: Option<PathBuf>,
    /// Record nothing and serve no control files (.fsprof, .raif).
    #[arg(long, conflicts_with = "save", conflicts_with_all = RecordingArgs::RECORDING)]
    no_profile: bool,
    #[command(flatten)]
    rec: RecordingArgs,
    #[command(flatten)]
    control: ControlArgs,
    /// Drop the page cache of a file at every open.
    #[arg(long, help_heading = "Data path")]
    no_keep_cache: bool,
    /// Give new (and emptied) files no block checksums (files that have them keep them up to
    /// date and verified). By default every 4 KiB block of every part of a RAIF1, RAIF4 or
    /// RAIF5 file has a CRC-32C, kept on the next branch and verified on every read; a block
    /// that fails is rewritten from redundancy. RAIF0 files have none (with nothing to rebuild
    /// from, a check could only turn bad bytes into EIO).
    #[arg(long, help_heading = "Data path")]
    no_checksums: bool,
    #[command(flatten)]
    daemon: DaemonArgs,

    #[command(subcommand)]
    command: Option<Command>,
}

/// The volume's branches.
#[derive(clap::Args, Debug)]
struct BranchList {
    /// Branch directories, comma-separated, in order (the order is each branch's index).
    #[arg(
        long = "branches",
        value_delimiter = ',',
        required = true,
        value_name = "DIR,DIR,..."
    )]
    list: Vec<PathBuf>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Show the volume: its settings, each member's state, directory and generation, why a
    /// member is out of service, a rebuild under way and its progress, the degraded and
    /// checksum counters, and the last errors. From a mount (MNT), or from the branches of a
    /// volume that is not mounted (--branches; a mounted one is read through its mount).
    /// Exit code 1 while a member is not online.
    Status {
        /// The raif mount point.
        #[arg(required_unless_present = "branches", conflicts_with = "branches")]
        mnt: Option<PathBuf>,
        /// Branch directories, comma-separated, in order.
        #[arg(long = "branches", value_delimiter = ',', value_name = "DIR,DIR,...")]
        branches: Vec<PathBuf>,
        /// Print it as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Take branch N of the volume mounted at MNT out of service, as a failure: it is never
    /// read or written again until rebuilt (`raif replace`). Refused, with the reason, while
    /// another branch is out of service (a second failure would leave RAIF4/5 files
    /// unreadable). Failing a failed branch again is no error.
    Fail {
        /// The raif mount point.
        mnt: PathBuf,
        /// The branch.
        n: usize,
    },
    /// Rebuild branch N of the volume mounted at MNT onto NEWDIR while it serves: NEWDIR (an
    /// empty directory, or the branch itself come back) becomes member N at once, is written
    /// for each file rebuilt, and is online when complete; the member's generation is raised,
    /// so its old directory is refused by later mounts. A rebuild cut short by an unmount or
    /// a kill resumes when asked again. Shows progress on a terminal; prints the summary.
    Replace {
        /// The raif mount point.
        mnt: PathBuf,
        /// The branch.
        n: usize,
        /// The directory that becomes it.
        newdir: PathBuf,
    },
    /// Rebuild branch N onto NEWDIR (an empty directory, or the branch itself come back)
    /// from the other branches: offline (--branches), or while the volume serves
    /// (--mounted MNT, the same as `raif replace MNT N NEWDIR`: the branch, failed or stale,
    /// is written for each file rebuilt, and rejoins when complete; a rebuild cut short by an
    /// unmount or a kill resumes when asked again). The member's generation is raised: its
    /// other directories are old copies from now on. Lists the RAIF0 files whose part there is lost; exit code 1 if there are any.
    /// On a terminal, progress (files, bytes, rate, time left) is shown on standard error.
    Rebuild {
        /// Branch directories, comma-separated, in order (offline).
        #[arg(
            long = "branches",
            value_delimiter = ',',
            value_name = "DIR,DIR,...",
            required_unless_present = "mounted",
            conflicts_with = "mounted"
        )]
        branches: Vec<PathBuf>,
        /// Rebuild through the raif mount at MNT, which keeps serving.
        #[arg(long, value_name = "MNT")]
        mounted: Option<PathBuf>,
        /// The branch to rebuild and the directory that becomes it.
        #[arg(long, num_args = 2, value_names = ["N", "NEWDIR"], required = true)]
        replace: Vec<String>,
    },
    /// Verify every block checksum, every mirror copy and parity block, offline; report
    /// mismatches with path, branch and offset. Exit code 1 if mismatches remain, or if any
    /// block could not be verified against its redundancy (a member out of service, a part
    /// missing: scrub says how many bytes); 0 means all was verified and found right. On a
    /// terminal, progress (files, bytes, rate, time left) is shown on standard error.
    Scrub {
        #[command(flatten)]
        branches: BranchList,
        /// Repair what the evidence decides: a block that fails its checksum (rewritten from
        /// another copy or from the rest of its row, whose blocks check out), a copy outvoted
        /// by a strict majority of three or more, a file's RAIF record outvoted by a strict
        /// majority of its parts', or a part changed after the others (its modification time
        /// stands out); parts recorded out of date after a write refused for
        /// lack of room are rebuilt; sum files of deleted files are removed. Anything else (a
        /// file without checksums, an unclean stop of a volume without an intent log) is
        /// reported ambiguous (naming the branches that could hold the bad byte) and left as it
        /// is (exit code 1). A volume with an intent log resynchronises at mount the rows a
        /// crash was writing.
        #[arg(long)]
        repair: bool,
        /// Give block checksums to the files that have none (made with --no-checksums, or by
        /// the development tree, whose sum files and user.raif.sums attributes are no longer
        /// read: this upgrades such a volume once, and finds nothing to do when run again),
        /// and to data a file's checksums do not cover (reported as
        /// "unprotected": an attribute removed or cut behind RAIF's back, writes made while
        /// the branch that keeps them was unusable), once their copies or parity are found
        /// consistent.
        #[arg(long)]
        add_checksums: bool,
    },
    /// Write each layer of a profile to DIR/LAYER.fsprof as a profile of its own, under its
    /// own name, so that `fsprof compare DIR/branch0.fsprof DIR/branch1.fsprof --method totops`
    /// compares two branches (profiles without a layer name in common compare their primary
    /// layers). Branch layers count system calls on the branch, not FUSE requests; their files
    /// say so in the layer's metadata (counts=system_calls).
    Split {
        /// A profile file, or a RAIF mount point (its .fsprof).
        profile: PathBuf,
        /// Where to write the layers.
        dir: PathBuf,
    },
}

fn parse_level(s: &str) -> Result<u32, String> {
    s.parse::<u32>()
        .ok()
        .filter(|l| Level::from_num(*l).is_some())
        .ok_or_else(|| format!("'{s}' is not 0, 1, 4 or 5"))
}

fn parse_interval(s: &str) -> Result<Duration, String> {
    profile_store::duration::parse_time(s).map_err(|e| e.to_string())
}

fn parse_stripe(s: &str) -> Result<u32, String> {
    policy::check_stripe(policy::parse_size(s)?)
}

/// The branch list and the mount point, given as `--branches A,B,C MNT` or `A:B:C MNT`.
fn branches_and_mount_point(
    branches: Vec<PathBuf>,
    source: Option<std::ffi::OsString>,
    mnt: Option<PathBuf>,
    argv: &[String],
) -> Result<(Vec<PathBuf>, PathBuf), SetupError> {
    use std::os::unix::ffi::OsStrExt as _;
    let usage = "give the branches and the mount point: raif --branches B0,B1,B2 MNT, or \
                 raif B0:B1:B2 MNT";
    match (branches.is_empty(), source, mnt) {
        (false, Some(m), None) => Ok((branches, PathBuf::from(m))),
        (false, Some(_), Some(_)) => {
            Err(setup_err(branches_hint(argv).unwrap_or_else(|| {
                format!("the branches are given twice: {usage}")
            })))
        }
        (true, Some(src), Some(m)) => {
            let list = src
                .as_bytes()
                .split(|&b| b == b':')
                .map(|p| PathBuf::from(std::ffi::OsStr::from_bytes(p)))
                .collect();
            Ok((list, m))
        }
        (true, Some(_), None) => Err(setup_err(format!("the mount point is missing: {usage}"))),
        (_, None, _) => Err(setup_err(format!("nothing to mount: {usage}"))),
    }
}

fn config(a: Args, argv: &[String]) -> Result<RaifConfig, SetupError> {
    let (list, mnt) = branches_and_mount_point(a.branches, a.source, a.mnt, argv)?;
    let branches = raif::branch::check_branches(&list)?;
    let existing: Vec<PathBuf> = branches.iter().filter(|b| b.exists()).cloned().collect();
    // The nesting checks first, in raif's words (the shared check says "lower directory").
    mount::not_a_descriptor(&mnt)?;
    let m = mount::absolute_dir(&mnt, "mount point")?;
    mount::check_nesting(&m, &branches, "branch")?;
    let mnt = mount::check_mount_point(&m, &existing, a.daemon.nonempty)?;
    let policy = match &a.policy {
        Some(p) => Policy::load(p).map_err(setup_err)?,
        None => Policy::default(),
    };
    let recorder = a.rec.profile.recorder()?;
    let mut records = a.rec.records.config(Some(branches.len()))?;
    // Nothing is recorded without a profile: not the breakdown either, on by default.
    records.breakdown &= !a.no_profile;
    if !a.no_profile {
        fsprof_fuse::daemon::cli::check_recordable(&recorder, 1 + branches.len(), &records)?;
    }
    let control_name = a.control.control_name()?;
    // RAIF lists names only and has no writeback cache: of a preset, it takes the time-outs.
    let cache = a.rec.cache.policy();
    let fs = FsConfig {
        entry_ttl: cache.entry_ttl,
        attr_ttl: cache.attr_ttl,
        // What the command line gives; the rest comes from the volume (raif::volume).
        defaults: Settings {
            level: a.level.and_then(Level::from_num),
            stripe: a.stripe,
            copies: a.copies,
        },
        parity_branch: a.parity_branch,
        policy,
        keep_cache: !a.no_keep_cache,
        checksums: !a.no_checksums,
        check_interval: a.check_interval,
        ..FsConfig::default()
    };
    raif::volume::check_levels(&fs, branches.len())?;
    let mut mount = a
        .rec
        .settings(mnt.clone(), raif::branch::fsname(&branches), "raif")?;
    // raif names its mount after its branches (B0:B1..., type fuse.raif), by which it finds
    // the volumes already mounted: fsname= and subtype= are logged and ignored (main).
    a.daemon.apply(&mut mount, true)?;
    Ok(RaifConfig {
        branches,
        mnt,
        foreground: a.foreground,
        save: a.save.map(|p| std::path::absolute(&p).unwrap_or(p)),
        profile: !a.no_profile,
        recorder,
        control_name,
        list_control: a.control.list_control,
        fs,
        mount,
        log: a.daemon.log("raif", a.foreground)?,
        records,
        take_failed: a.take_failed,
    })
}

fn admin_command(c: Command) -> Result<ExitCode, SetupError> {
    let clean = match c {
        Command::Status {
            mnt,
            branches,
            json,
        } => {
            let src = match &mnt {
                Some(m) => admin::Source::Mount(m),
                None => admin::Source::Branches(&branches),
            };
            admin::status(src, json)?
        }
        Command::Fail { mnt, n } => {
            admin::fail_mounted(&mnt, n)?;
            true
        }
        Command::Replace { mnt, n, newdir } => admin::rebuild_while_mounted(&mnt, n, &newdir)?,
        Command::Rebuild {
            branches,
            mounted,
            replace,
        } => {
            let n: usize = replace[0]
                .parse()
                .map_err(|_| setup_err(format!("--replace {}: not a branch number", replace[0])))?;
            let newdir = PathBuf::from(&replace[1]);
            match mounted {
                Some(mnt) => admin::rebuild_while_mounted(&mnt, n, &newdir)?,
                None => admin::rebuild(&branches, n, &newdir)?,
            }
        }
        Command::Scrub {
            branches,
            repair,
            add_checksums,
        } => admin::scrub(&branches.list, repair, add_checksums)?,
        Command::Split { profile, dir } => {
            for p in admin::split(&profile, &dir)? {
                println!("{}", p.display());
            }
            true
        }
    };
    Ok(if clean {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn main() -> ExitCode {
    if let Some(dir) = cli_support::docs_request() {
        return cli_support::docs_main(Args::command(), &dir);
    }
    let argv: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    // mount(8) and fstab give the options as `-o key[=value],...`.
    let rewritten = match fsprof_fuse::daemon::cli::mount_opts::rewrite(
        &Args::command(),
        std::env::args_os(),
    ) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("raif: {e}");
            return ExitCode::from(2);
        }
    };
    let mut args = match Args::try_parse_from(rewritten) {
        Ok(a) => a,
        Err(e) => {
            if let Some(hint) = branches_hint(&argv) {
                eprintln!("raif: {hint}");
                return ExitCode::from(2);
            }
            return cli_support::usage_error("raif", e);
        }
    };
    let level = args.daemon.log_level.clone();
    let r = match args.command.take() {
        Some(c) => {
            let stderr = fsprof_fuse::daemon::daemon_log::LogSink::Stderr;
            fsprof_fuse::daemon::daemon_log::init(&level, "raif", None, &stderr);
            admin_command(c)
        }
        None => {
            let names = args.daemon.fsname.is_some() || args.daemon.subtype.is_some();
            config(args, &argv)
                .inspect(|c| {
                    fsprof_fuse::daemon::daemon_log::init(&level, "raif", Some(&c.mnt), &c.log);
                    if names {
                        log::warn!(
                            "fsname= and subtype= ignored: a raif mount is {} of type fuse.{} \
                             (raif finds its mounted volumes by them)",
                            c.mount.fsname,
                            c.mount.subtype
                        );
                    }
                })
                .and_then(app::run)
                .map(|()| ExitCode::SUCCESS)
        }
    };
    match r {
        Ok(code) => code,
        Err(e) => {
            eprintln!("raif: {e}");
            ExitCode::from(2)
        }
    }
}

/// The hint for a branch list given as separate words (`--branches a b c MNT`): `--branches`
/// takes one comma-separated list, so the words after its value are taken for the mount point
/// and a subcommand, and clap's own error names neither.
fn branches_hint(argv: &[String]) -> Option<String> {
    let at = argv.iter().position(|a| a == "--branches")?;
    let value = argv.get(at + 1)?;
    let words: Vec<&String> = argv[at + 2..]
        .iter()
        .take_while(|w| !w.starts_with('-'))
        .collect();
    if value.contains(',') || words.len() < 2 {
        return None;
    }
    let (list, mnt) = words.split_at(words.len() - 1);
    let list: Vec<&str> = std::iter::once(value.as_str())
        .chain(list.iter().map(|w| w.as_str()))
        .collect();
    Some(format!(
        "--branches takes one comma-separated list: --branches {} {} (the words {} were \
         taken for the mount point and a subcommand)",
        list.join(","),
        mnt[0],
        words
            .iter()
            .map(|w| format!("'{w}'"))
            .collect::<Vec<_>>()
            .join(" ")
    ))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn a_branch_list_in_separate_words_gets_a_hint() {
        let argv = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        let hint = super::branches_hint(&argv("--branches a b c m -f")).expect("a hint");
        assert!(hint.contains("--branches a,b,c m"), "{hint}");
        assert_eq!(super::branches_hint(&argv("--branches a,b,c m")), None);
        assert_eq!(super::branches_hint(&argv("status m")), None);
    }

    /// clap's own checks of the definition (conflicts and requirements name real options):
    /// run in debug builds only, so a test makes them run under `cargo test --release` too.
    #[test]
    fn the_options_are_consistent() {
        super::Args::command().debug_assert();
    }
}
