//! `raif --branches D0,D1,... MNT`: checks the branch list, opens the volume, builds the
//! profiled file system and serves it (the lifecycle is [`fsprof_fuse::app::Daemon`]'s).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use fsprof_fuse::app::{Daemon, Served};
use fsprof_fuse::control::ControlFiles;
use fsprof_fuse::kernel::Kernel;
use fsprof_fuse::layers::control::Control;
use fsprof_fuse::layers::profiled::{Profiled, profiled};
use fsprof_fuse::layers::records::{Recorded, recorded};
use fsprof_fuse::lower::Lower;
use fsprof_fuse::mount::{self, MountSettings, SetupError, setup_err};
use fsprof_fuse::ops;
use fsprof_fuse::records::{self, RecordConfig};
use fsprof_fuse::sys;
use profile_store::{ClockInfo, Profiler, Recorder, RecorderConfig};

use crate::branch::{BranchSet, State};
use crate::fs::{FsConfig, Raif};
use crate::intent;
use crate::layout::Level;
use crate::policy::Settings;
use crate::status::{self, Status};

/// A checked `raif` configuration.
#[derive(Debug, Clone)]
pub struct RaifConfig {
    /// Branch directories, absolute, in index order.
    pub branches: Vec<PathBuf>,
    /// Mount point (absolute, canonical).
    pub mnt: PathBuf,
    /// Stay in the foreground.
    pub foreground: bool,
    /// Write the final profile here at unmount (`.json` for JSON).
    pub save: Option<PathBuf>,
    /// Record the `fuse` layer and one layer per branch, and serve the control files.
    pub profile: bool,
    /// Bucketing and time-lapse.
    pub recorder: RecorderConfig,
    /// Base name of the profile control files.
    pub control_name: String,
    /// List the control files (`.fsprof`, `.fsprof.json`, `.raif`) in the root directory (by
    /// default they are hidden from `readdir`).
    pub list_control: bool,
    /// File-system settings.
    pub fs: FsConfig,
    /// Mount settings.
    pub mount: MountSettings,
    /// Request records (slow log, inner-call breakdown, injection; branch calls are named
    /// `branchN:call`).
    pub records: RecordConfig,
    /// Daemon log file (background mode).
    pub log_file: Option<PathBuf>,
}

/// Checks a branch list: absolute paths (canonical where they exist), at least two, no
/// duplicates, none inside another. A branch that does not exist is allowed here (it is a
/// failed branch of an existing volume).
pub fn check_branches(list: &[PathBuf]) -> Result<Vec<PathBuf>, SetupError> {
    if list.len() < 2 {
        return Err(setup_err(format!(
            "--branches: at least two branches needed, {} given",
            list.len()
        )));
    }
    if list.len() > crate::layout::MAX_BRANCHES {
        return Err(setup_err(format!(
            "--branches: at most {} branches",
            crate::layout::MAX_BRANCHES
        )));
    }
    let mut out: Vec<PathBuf> = Vec::with_capacity(list.len());
    // The directories themselves: one reached by two paths (a bind mount) is one branch.
    let mut ids: Vec<((u64, u64), PathBuf)> = Vec::new();
    for p in list {
        if p.as_os_str().is_empty() {
            return Err(setup_err("--branches: empty branch name"));
        }
        let abs = std::path::absolute(p)
            .map_err(|e| setup_err(format!("branch {}: {e}", p.display())))?;
        let abs = if abs.exists() {
            mount::absolute_dir(&abs, "branch")?
        } else {
            abs
        };
        for q in &out {
            if *q == abs {
                return Err(setup_err(format!("branch {} given twice", abs.display())));
            }
            let (inner, outer) = if abs.starts_with(q) {
                (&abs, q)
            } else {
                (q, &abs)
            };
            if inner.starts_with(outer) {
                return Err(setup_err(format!(
                    "branch {} lies inside branch {}",
                    inner.display(),
                    outer.display()
                )));
            }
        }
        if let Ok(m) = std::fs::metadata(&abs) {
            use std::os::unix::fs::MetadataExt;
            let id = (m.dev(), m.ino());
            if let Some((_, q)) = ids.iter().find(|(i, _)| *i == id) {
                return Err(setup_err(format!(
                    "branches {} and {} are the same directory",
                    q.display(),
                    abs.display()
                )));
            }
            ids.push((id, abs.clone()));
        }
        out.push(abs);
    }
    Ok(out)
}

/// Checks that every level new files can get fits `n` branches.
pub fn check_levels(s: &FsConfig, n: usize) -> Result<(), SetupError> {
    let mut all: Vec<(String, Settings)> = vec![("the command line".into(), s.defaults)];
    all.push((
        "the policy's default".into(),
        s.policy.default.or(s.defaults),
    ));
    for (i, r) in s.policy.rules.iter().enumerate() {
        all.push((
            format!("policy rule {} ('{}')", i + 1, r.glob),
            r.settings.or(s.policy.default).or(s.defaults),
        ));
    }
    for (what, st) in all {
        let level = st.level.unwrap_or(Level::Raif1);
        if n < level.min_branches() {
            return Err(setup_err(format!(
                "{what}: RAIF{} needs at least {} branches, {n} given",
                level.num(),
                level.min_branches()
            )));
        }
        if let Some(c) = st.copies.filter(|&c| c == 0 || c > n) {
            return Err(setup_err(format!("{what}: {c} copies with {n} branches")));
        }
    }
    if let Some(p) = s.parity_branch.filter(|&p| p >= n) {
        return Err(setup_err(format!(
            "--parity-branch {p}: there are {n} branches"
        )));
    }
    Ok(())
}

/// Opens the volume, then serves it until unmounted. The branches are opened before going to
/// the background, so a volume that cannot be served is refused with exit code 2.
pub fn run(cfg: RaifConfig) -> Result<(), SetupError> {
    let recorders: Vec<Recorder> = if cfg.profile {
        (0..=cfg.branches.len())
            .map(|i| {
                let name = if i == 0 {
                    "fuse".to_string()
                } else {
                    format!("branch{}", i - 1)
                };
                Recorder::new(&name, &ops::NAMES, &cfg.recorder)
            })
            .collect()
    } else {
        Vec::new()
    };
    let records = cfg.records.build(&cfg.recorder, None).map_err(setup_err)?;
    let lowers = (0..cfg.branches.len())
        .map(|i| {
            Lower::new(recorders.get(i + 1).cloned())
                .on_branch(i as u16)
                .injecting(records.inject.clone())
        })
        .collect();
    if let Some(mnt) = mounted_over(&cfg.branches) {
        let dead = std::fs::metadata(&mnt).is_err_and(|e| e.raw_os_error() == Some(libc::ENOTCONN));
        return Err(setup_err(if dead {
            format!("the volume's mount at {mnt} is dead (its daemon is gone): umount {mnt} first")
        } else {
            format!("the volume is already mounted at {mnt}")
        }));
    }
    if let Some((b, mnt)) = inside_raif(&cfg.branches) {
        return Err(setup_err(format!(
            "branch {} lies inside the raif volume at {mnt}: a volume cannot be stacked on \
             another (raif reserves the user.raif* attributes there)",
            b.display()
        )));
    }
    let daemon = Daemon {
        program: "raif",
        foreground: cfg.foreground,
        mount: &cfg.mount,
        log_file: cfg.log_file.as_deref(),
        save: cfg.save.as_deref(),
    };
    // Before the branches are opened (which formats new ones): a bad --log-file, --save or
    // --metrics left them formatted, and a later mount with another branch count refused.
    daemon.preflight()?;
    // Also before: `--kernel` refused leaves nothing formatted.
    let kernel_plan = match (cfg.profile, cfg.records.kernel) {
        (true, true) => {
            let dirs: Vec<&Path> = cfg.branches.iter().map(PathBuf::as_path).collect();
            Some(Kernel::check(&dirs)?)
        }
        _ => None,
    };
    let bs = BranchSet::open(&cfg.branches, lowers, true).map_err(setup_err)?;
    report(&bs);
    daemon.run(|_device| build(&cfg, recorders, bs, records, kernel_plan))
}

/// Logs what opening the volume found.
fn report(bs: &BranchSet) {
    if bs.created {
        log::info!("new volume {:032x} over {} branches", bs.volume(), bs.len());
    }
    if bs.unclean && bs.was_logged {
        log::warn!(
            "the volume was not unmounted cleanly: the rows being written then are \
             resynchronised from the intent log before it is served"
        );
    } else if bs.unclean {
        log::warn!(
            "the volume was not unmounted cleanly, and kept no intent log or a branch that may \
             hold part of it is missing: run `raif scrub` (a crash between a data and a parity \
             write leaves the parity stale)"
        );
    }
    for b in 0..bs.len() {
        if bs.state(b) != State::Online {
            log::warn!("{}", bs.describe(b));
        }
    }
}

/// The stack served by `raif` (below the transport): control files, profiling, request
/// records, RAIF.
type Built = Served<Control<Profiled<Recorded<Raif>>>>;

fn build(
    cfg: &RaifConfig,
    recorders: Vec<Recorder>,
    bs: BranchSet,
    records: records::Built,
    kernel_plan: Option<kernel_trace::Plan>,
) -> Result<Built, SetupError> {
    let limit = sys::raise_nofile_limit().unwrap_or(1024);
    let mut fs = cfg.fs.clone();
    // A quarter of the descriptors for directories; open files hold one per branch.
    fs.dir_cache = fs.dir_cache.min((limit / 4) as usize).max(16);
    let _ = ClockInfo::get();
    let bs = Arc::new(bs);
    let profiler = (!recorders.is_empty()).then(|| Arc::new(Profiler::new(recorders.clone())));
    if let Some(p) = &profiler {
        // Said in every snapshot: the branch layers are not FUSE requests.
        p.set_extra(BRANCH_LAYERS.0, BRANCH_LAYERS.1)
            .expect("a valid constant key and value");
        records.attach(p);
        p.extend_live(Arc::new(status::Health(bs.clone())));
    }
    let kernel = match (&profiler, kernel_plan) {
        (Some(p), Some(plan)) => Some(Kernel::new(plan, p, &cfg.recorder)?),
        _ => None,
    };
    // The rows being written when the volume last stopped, resynchronised before anything is
    // served; then this mount's log.
    let replayed = intent::replay(&bs);
    if replayed.files + replayed.gone + replayed.deferred > 0 {
        log::warn!(
            "intent log: {} files, {} regions resynchronised, {} rows rebuilt from partial \
             parity, {} entries of removed files, {} kept for a mount with every branch",
            replayed.files,
            replayed.regions,
            replayed.parity,
            replayed.gone,
            replayed.deferred
        );
    }
    let journal = intent::Journal::open(&bs, replayed.last_seq)
        .map_err(|e| setup_err(format!("intent log: {}", mount::plain(&e))))?;
    bs.set_logged(replayed.deferred > 0);
    let journal = Arc::new(journal);
    let online = Arc::new(std::sync::OnceLock::new());
    let control = profiler.as_ref().map(|p| {
        let c = ControlFiles::new(
            &cfg.control_name,
            p.clone(),
            sys::geteuid(),
            cfg.mount.allow_other,
        )
        .with_file(
            status::NAME,
            Arc::new(
                Status::new(bs.clone(), fs.new_file_defaults(), fs.parity_branch)
                    .with_intent(journal.clone(), replayed.clone())
                    .with_online(online.clone()),
            ),
        )
        .listed(cfg.list_control);
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
        let branches: Vec<&Path> = cfg.branches.iter().map(PathBuf::as_path).collect();
        fs.hidden_root_names.extend(c.hidden_names(&branches));
    }
    let raif = Raif::new(fs, bs.clone())
        .map_err(|e| setup_err(format!("branches: {}", mount::plain(&e))))?
        .with_journal(journal);
    let _ = online.set(raif.online(&cfg.mnt, &replayed.ids));
    records.paths.set(raif.paths());
    bs.begin_mount();
    log::info!("serving {} branches at {}", bs.len(), cfg.mnt.display());
    // The stack, from the kernel down: transport (in `serve`) → control files → profiling →
    // RAIF (its branch calls timed in the branch layers).
    Ok(Served {
        fs: Control::new(
            profiled(
                recorded(raif, records.set),
                recorders.first().cloned(),
                profiler.as_deref(),
            ),
            control,
        ),
        profiler,
        kernel,
    })
}

/// The global profile key of a RAIF mount's profile saying what its branch layers count:
/// system calls on the branch, each under the FUSE operation that made it.
pub const BRANCH_LAYERS: (&str, &str) = ("branch_layers", "system_calls");

/// The branch paths as shown in `/proc/mounts` (the mount's source; `:`-separated, since mount
/// options are separated by commas).
pub fn fsname(branches: &[PathBuf]) -> String {
    let list: Vec<String> = branches.iter().map(|p| p.display().to_string()).collect();
    format!("raif:{}", list.join(":"))
}

/// The mounted raif volumes, as `(mount point, branch list)` lines of mountinfo: raif mounts
/// without a subtype (`fuse`), and a source of `raif:A:B...` ([`fsname`]) says what it is.
fn raif_mounts(text: &str) -> impl Iterator<Item = (&str, &str)> {
    text.lines().filter_map(|l| {
        let (_, after) = l.split_once(" - ")?;
        let mut f = after.split(' ');
        let (fstype, source) = (f.next()?, f.next()?);
        if fstype != "fuse.raif" && fstype != "fuse" {
            return None;
        }
        let list = source.strip_prefix("raif:")?;
        Some((l.split(' ').nth(4)?, list))
    })
}

/// A branch that lies inside a mounted raif volume, and that volume's mount point: raif
/// reserves the `user.raif*` attributes its records are made of, so a volume cannot be
/// stacked on another (every create would fail with EPERM).
pub fn inside_raif(branches: &[PathBuf]) -> Option<(PathBuf, String)> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    raif_mounts(&text).find_map(|(mnt, _)| {
        let b = branches.iter().find(|b| b.starts_with(mnt))?;
        Some((b.clone(), mnt.to_string()))
    })
}

/// Whether some branch of `branches` is served by a mounted RAIF right now (admin commands
/// refuse to work under a live mount).
pub fn mounted_over(branches: &[PathBuf]) -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    raif_mounts(&text).find_map(|(mnt, list)| {
        let hit = list
            .split(':')
            .any(|s| branches.iter().any(|b| Path::new(s) == b));
        hit.then(|| mnt.to_string())
    })
}
