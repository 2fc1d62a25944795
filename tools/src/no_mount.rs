//! `fsprof profile --no-mount DIR -- CMD`: profile a command at close to native speed, with no
//! FUSE mount at all.
//!
//! CMD runs in DIR; the `syscall` layer (crate `syscall-trace`, process scope) holds every
//! file-system system call of CMD and of its descendants, followed in the kernel at fork,
//! whatever file system they reach, timed in the kernel by a BPF program. `--kernel` adds the
//! block layers of DIR's devices, `--user` the program's C-library calls (the preload
//! library), and `--by`, `--hot-files`, `--slowest` and `--slow` (with `--slow-log`) work on
//! the syscall level as on a mount. The findings, report and every analysis command read the
//! profile as they read a mount's.
//!
//! Refused in one line, before CMD runs: without CAP_BPF and CAP_PERFMON (or root), without
//! the kernel's BTF, and without a command (there is no walk to run in another process).

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use fsprof_fuse::daemon::mount;
use fsprof_fuse::records::slow::SlowLog;
use profile_store::{ClockInfo, Extension, Profiler};

use crate::error::Error;
use crate::input::Loaded;
use crate::profile::{ProfileConfig, run_in, show_profile, watch_signals};

/// The slow calls, into the `--slow-log` file.
struct SlowFile(Arc<SlowLog>);

impl syscall_trace::SlowSink for SlowFile {
    fn push(&self, rec: &syscall_trace::SlowRecord) {
        self.0.push_line(|seq| rec.line(seq));
    }
}

/// The syscall level's configuration from the recording options.
fn syscall_config(cfg: &ProfileConfig) -> syscall_trace::Config {
    let r = &cfg.recording.records;
    let clock = ClockInfo::get();
    syscall_trace::Config {
        scope: syscall_trace::Scope::Processes,
        resolution: cfg.recording.recorder.resolution,
        by: r.by.map(|k| match k {
            fsprof_fuse::records::by::KeyKind::Pid => syscall_trace::By::Pid,
            fsprof_fuse::records::by::KeyKind::Uid => syscall_trace::By::Uid,
            fsprof_fuse::records::by::KeyKind::Comm => syscall_trace::By::Comm,
        }),
        by_max: r.by_max,
        hot_files: r.hot_files,
        slow_cycles: r.slow.map(|t| clock.secs_to_cycles(t.as_secs_f64())),
        slowest: r.slowest,
    }
}

/// `--kernel` without a mount: the block layers of `dir`'s devices, or a warning saying why
/// there are none.
fn block_layers(
    cfg: &ProfileConfig,
    dir: &Path,
    out: &mut String,
) -> Result<Option<Arc<kernel_trace::Tracer>>, Error> {
    if !cfg.recording.records.kernel {
        return Ok(None);
    }
    let plan = kernel_trace::preflight_block(&[dir]).map_err(|e| Error::usage("--kernel", e))?;
    if let Err(why) = &plan.block {
        let _ = writeln!(out, "fsprof: --kernel: no block layer: {why}");
        return Ok(None);
    }
    plan.start(
        None,
        &fsprof_fuse::protocol::ops::NAMES,
        &cfg.recording.recorder,
        Arc::new(kernel_trace::Excluded::default()),
    )
    .map(Some)
    .map_err(|e| Error::usage("--kernel", e))
}

/// `fsprof profile --no-mount`: runs the command in `cfg.dir` with the syscall level on,
/// appending the report to `out`; returns the command's exit code.
pub fn run(cfg: &ProfileConfig, out: &mut String) -> Result<u8, Error> {
    let dir_name = cfg.dir.display().to_string();
    let dir = mount::absolute_dir(&cfg.dir, "directory").map_err(|e| Error::usage(&dir_name, e))?;
    if cfg.command.is_empty() {
        return Err(Error::usage(
            "--no-mount",
            "needs a COMMAND (after --): the calls of a command and its descendants are counted",
        ));
    }
    let rec = &cfg.recording.records;
    if rec.slow.is_some() && rec.slow_log.is_none() {
        return Err(Error::usage(
            "--slow",
            "with --no-mount there is no MNT/.fsprof.slow: give --slow-log FILE for the records",
        ));
    }
    // Everything that may be refused, before the command runs.
    syscall_trace::preflight().map_err(|e| Error::usage("--no-mount", e))?;
    let mut user = match cfg.user {
        true => Some(
            user_trace::prepare(&user_trace::RunConfig {
                command: cfg.command.clone(),
                dir: Some(dir.clone()),
                ..user_trace::RunConfig::default()
            })
            .map_err(crate::user_run::error)?,
        ),
        false => None,
    };
    let slow = match (rec.slow, &rec.slow_log) {
        (Some(t), Some(path)) => Some(Arc::new(
            SlowLog::new(
                ClockInfo::get().secs_to_cycles(t.as_secs_f64()),
                rec.slow_ring,
                Some(path),
                None,
            )
            .map_err(|e| Error::output(path.display().to_string(), e))?,
        )),
        _ => None,
    };
    let sink = slow
        .clone()
        .map(|s| Arc::new(SlowFile(s)) as Arc<dyn syscall_trace::SlowSink>);
    let tracer = syscall_trace::Tracer::start(syscall_config(cfg), sink)
        .map_err(|e| Error::usage("--no-mount", e))?;
    let profiler = Arc::new(Profiler::new(Vec::new()));
    profiler.extend(tracer.clone());
    if let Some(s) = &slow {
        profiler.extend(s.clone() as Arc<dyn Extension>);
    }
    let blocks = block_layers(cfg, &dir, out)?;
    if let Some(b) = &blocks {
        profiler.extend(b.clone());
    }
    let _endpoint = crate::profile::metrics_endpoint(&cfg.recording, &profiler, None)?;
    let mask = watch_signals()?;
    tracer.follow_next_child();
    let started = Instant::now();
    let ran = run_in(cfg, &dir, &profiler, &mut user, mask);
    tracer.stop_following_children();
    let ran = ran?;
    let elapsed = started.elapsed();
    let mut snapshot = profiler.snapshot();
    tracer.close();
    if let Some(b) = &blocks {
        b.close();
    }
    let ignored = crate::profile::add_user_layer(user, ran.status, &mut snapshot)?;
    if let Some(path) = &cfg.save {
        crate::export::save(path, &snapshot)?;
    }
    crate::profile::ran_line(cfg, &dir, &ran, elapsed, ignored.as_deref(), &snapshot, out);
    let loaded = Loaded {
        name: dir.display().to_string(),
        profile: snapshot,
    };
    show_profile(cfg, &loaded, out)?;
    Ok(ran.code)
}
