//! `raif --branches D0,D1,... MNT`: checks the branch list, opens the volume, builds the
//! profiled file system and serves it (the lifecycle is [`fsprof_fuse::daemon::app::Daemon`]'s).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use fsprof_fuse::daemon::app::{Daemon, Served};
use fsprof_fuse::daemon::kernel::{Kernel, SyscallScope};
use fsprof_fuse::daemon::mount::{self, MountSettings, SetupError, setup_err};
use fsprof_fuse::layers::control::Control;
use fsprof_fuse::layers::control_files::ControlFiles;
use fsprof_fuse::layers::profiled::{Profiled, profiled};
use fsprof_fuse::protocol::ops;
use fsprof_fuse::records::{self, RecordConfig};
use fsprof_fuse::sys;
use fsprof_fuse::sys::fuse::Device;
use fsprof_fuse::toolkit::lower::Lower;
use profile_store::{ClockInfo, Profiler, Recorder, RecorderConfig};

use crate::branch::{Admit, BranchSet, State, inside_raif, mounted_over};
use crate::fs::{FsConfig, Raif};
use crate::gate::{Gate, Gated, gated};
use crate::intent;
use crate::online::Online;
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
    /// Where the daemon's log goes.
    pub log: fsprof_fuse::daemon::daemon_log::LogSink,
    /// Take a branch that is not the member it is given as in as failed (an old copy of its
    /// member is then rebuilt in place) rather than refuse the volume.
    pub take_failed: bool,
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
        log: &cfg.log,
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
    if cfg.profile && cfg.records.syscalls {
        syscall_trace::preflight().map_err(|e| setup_err(format!("--syscalls: {e}")))?;
    }
    let admit = if cfg.take_failed {
        Admit::AsFailed
    } else {
        Admit::Refuse
    };
    let bs = BranchSet::open(&cfg.branches, lowers, true, admit).map_err(setup_err)?;
    let mut fs = cfg.fs.clone();
    crate::volume::apply(&mut fs, &bs)?;
    report(&bs);
    daemon.run(|device| build(&cfg, fs, recorders, bs, records, kernel_plan, device))
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

/// The stack served by `raif` (below the transport): control files, profiling (each request
/// timed once, its latency given to every request record), the gate, RAIF.
type Built = Served<Control<Profiled<Gated<Raif>>>>;

fn build(
    cfg: &RaifConfig,
    mut fs: FsConfig,
    recorders: Vec<Recorder>,
    bs: BranchSet,
    records: records::Built,
    kernel_plan: Option<kernel_trace::Plan>,
    device: &Device,
) -> Result<Built, SetupError> {
    let limit = sys::raise_nofile_limit().unwrap_or(1024);
    // Half of the descriptors for the cache (directories, open files' parts, sum files); the
    // rest for what requests open on their way and the daemon's own files.
    fs.dir_cache = fs.dir_cache.min((limit / 2) as usize).max(16);
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
    let kernel = match &profiler {
        Some(p) if kernel_plan.is_some() || cfg.records.syscalls => {
            let syscalls = cfg.records.syscalls.then(|| SyscallScope {
                mnt: &cfg.mnt,
                control_names: fsprof_fuse::layers::control_files::names(
                    &cfg.control_name,
                    Some(status::NAME),
                ),
                records: &cfg.records,
                slow: records.set.slow.clone(),
            });
            Some(Kernel::levels(kernel_plan, syscalls, p, &cfg.recorder)?)
        }
        _ => None,
    };
    // The rows being written when the volume last stopped, resynchronised before anything is
    // served; then this mount's log.
    let replayed = intent::replay(&bs, cfg.fs.checksums);
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
        .listed(cfg.list_control)
        .sharing(
            cfg.mount.share_records,
            Some(records.paths.clone() as Arc<dyn fsprof_fuse::records::Paths>),
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
        let branches: Vec<&Path> = cfg.branches.iter().map(PathBuf::as_path).collect();
        fs.hidden_root_names.extend(c.hidden_names(&branches));
    }
    let raif = Raif::new(fs, bs.clone())
        .map_err(|e| setup_err(format!("branches: {}", mount::plain(&e))))?
        .with_journal(journal)
        .with_device(device.clone());
    // Every request passes it; a rebuild while mounted closes it for a step.
    let gate = Gate::default();
    // The handle through which a failed branch is rebuilt while mounted (a new branch may not
    // lie in the mount; the files the replay named may have torn parts on a branch that was
    // being rebuilt).
    let _ = online.set(Arc::new(Online::new(
        raif.shared(),
        gate.clone(),
        cfg.mnt.clone(),
        replayed.ids.iter().copied().collect(),
    )));
    records.paths.set(raif.paths());
    bs.begin_mount();
    if let Some(o) = online.get() {
        take_in(&bs, o);
    }
    log::info!("serving {} branches at {}", bs.len(), cfg.mnt.display());
    let policy = control.as_ref().map(|c| c.policy().clone());
    // The stack, from the kernel down: transport (in `serve`) → control files → profiling and
    // request records → gate → RAIF (its branch calls timed in the branch layers).
    Ok(Served {
        fs: Control::new(
            profiled(
                gated(raif, gate),
                recorders.first().cloned(),
                profiler.as_deref(),
                records.set,
            ),
            control,
        ),
        profiler,
        kernel,
        policy,
    })
}

/// Starts rebuilding in place the old copies taken in as failed (`--take-failed`), one at a
/// time: the first now, the others (on a volume that can lose more than one branch) by hand.
fn take_in(bs: &BranchSet, online: &Arc<Online>) {
    let Some(n) = (0..bs.len()).find(|&i| bs.take_in & (1 << i) != 0) else {
        return;
    };
    let dir = bs.get(n).path();
    match online.start(n, &dir) {
        Ok(()) => log::warn!(
            "branch {n} ({}): taken in as failed; rebuilding it in place",
            dir.display()
        ),
        Err(e) => log::error!(
            "branch {n} ({}): taken in as failed; its rebuild could not start: {e}",
            dir.display()
        ),
    }
}

/// The global profile key of a RAIF mount's profile saying what its branch layers count:
/// system calls on the branch, each under the FUSE operation that made it.
pub const BRANCH_LAYERS: (&str, &str) = ("branch_layers", "system_calls");
