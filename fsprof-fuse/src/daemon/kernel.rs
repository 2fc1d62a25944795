//! `--kernel` and `--syscalls`: the kernel's layers of a mount (crates `kernel-trace` and
//! `syscall-trace`), wired in. Checked before the mount, so that what is missing (tracefs, a
//! tracepoint, the right to open it, the right to load BPF) is refused in one line and nothing
//! is mounted; started before the mount exists and told its connection (its device) once it
//! does, before it is announced, so no request is missed; added to the profile as extensions
//! read at every snapshot and reset with it.
//!
//! The control files' requests are left out of the `kernel` layer as they are of `fuse`: the
//! control layer notes their `unique`s ([`crate::layers::control_files::ControlFiles::excluding`]); the
//! `syscall` layer leaves out calls on their names and node ids itself.

use std::io;
use std::path::Path;
use std::sync::Arc;

use kernel_trace::devices::Dev;
use kernel_trace::{Excluded, Plan, Tracer};
use profile_store::{Profiler, RecorderConfig};

use crate::daemon::mount::{SetupError, setup_err};
use crate::records::RecordConfig;
use crate::records::slow::SlowLog;

/// The kernel layers of one mount: tracing from before the mount, told its connection once
/// the mount exists.
pub struct Kernel {
    excluded: Arc<Excluded>,
    tracer: Option<Arc<Tracer>>,
    syscalls: Option<Arc<syscall_trace::Tracer>>,
}

/// The syscall level's slow calls, into the mount's slow log.
struct SlowSink(Arc<SlowLog>);

impl syscall_trace::SlowSink for SlowSink {
    fn push(&self, rec: &syscall_trace::SlowRecord) {
        self.0.push_line(|seq| rec.line(seq));
    }
}

/// What `--syscalls` needs to know of the mount.
pub struct SyscallScope<'a> {
    /// The mount point.
    pub mnt: &'a Path,
    /// The control files' names at its root.
    pub control_names: Vec<String>,
    /// The records asked for (`--by`, `--hot-files`, `--slowest`, `--slow`).
    pub records: &'a RecordConfig,
    /// The slow log, with `--slow`.
    pub slow: Option<Arc<SlowLog>>,
}

impl Kernel {
    /// Checks everything `--kernel` needs for a file system over `dirs` (LOWER, or RAIF's
    /// branches): a refusal is one line.
    pub fn check(dirs: &[&Path]) -> Result<Plan, SetupError> {
        let plan =
            kernel_trace::preflight(dirs).map_err(|e| setup_err(format!("--kernel: {e}")))?;
        if let Err(why) = &plan.block {
            log::warn!("--kernel: no block layer: {why}");
        }
        Ok(plan)
    }

    /// Starts tracing as `plan` says (before the mount exists, so that no request is
    /// missed: the FUSE records wait for [`Kernel::start`] to name the connection), recorded
    /// as `config` says into `profiler`'s snapshots.
    pub fn new(
        plan: Plan,
        profiler: &Profiler,
        config: &RecorderConfig,
    ) -> Result<Arc<Kernel>, SetupError> {
        Kernel::levels(Some(plan), None, profiler, config)
    }

    /// Starts the levels asked for: the `kernel` and block layers as `plan` says, the
    /// `syscall` layer of the mount `syscalls` names (loaded and attached now, counting once
    /// [`Kernel::start`] names the mount's device); a refusal is one line.
    pub fn levels(
        plan: Option<Plan>,
        syscalls: Option<SyscallScope<'_>>,
        profiler: &Profiler,
        config: &RecorderConfig,
    ) -> Result<Arc<Kernel>, SetupError> {
        let excluded = Arc::new(Excluded::default());
        let syscalls = syscalls.map(|s| start_syscalls(s, config)).transpose()?;
        let tracer = plan
            .map(|plan| {
                plan.start(None, &crate::protocol::ops::NAMES, config, excluded.clone())
                    .map_err(|e| setup_err(format!("--kernel: {e}")))
            })
            .transpose()?;
        if let Some(s) = &syscalls {
            profiler.extend(s.clone());
        }
        if let Some(t) = &tracer {
            profiler.extend(t.clone());
        }
        Ok(Arc::new(Kernel {
            excluded,
            tracer,
            syscalls,
        }))
    }

    /// Where the control files note the requests they answer.
    pub fn excluded(&self) -> Arc<Excluded> {
        self.excluded.clone()
    }

    /// Names the FUSE connection mounted at `mnt` as the one traced.
    pub fn start(&self, mnt: &Path) -> io::Result<()> {
        let conn = connection(mnt)?;
        if let Some(t) = &self.tracer {
            t.set_connection(conn)
                .map_err(|e| io::Error::other(format!("--kernel: {e}")))?;
            log::info!("kernel trace: FUSE connection {conn} of {}", mnt.display());
        }
        if let Some(s) = &self.syscalls {
            s.set_mount(conn)
                .map_err(|e| io::Error::other(format!("--syscalls: {e}")))?;
            log::info!("syscall trace: device {conn} of {}", mnt.display());
        }
        Ok(())
    }
}

/// Loads the syscall level's program for the mount `s` names.
fn start_syscalls(
    s: SyscallScope<'_>,
    config: &RecorderConfig,
) -> Result<Arc<syscall_trace::Tracer>, SetupError> {
    let r = s.records;
    let clock = profile_store::ClockInfo::get();
    let cfg = syscall_trace::Config {
        scope: syscall_trace::Scope::Mount {
            mnt: s.mnt.to_path_buf(),
            control_names: s.control_names,
            control_ino_min: crate::filesystem::request::RESERVED_BASE,
        },
        resolution: config.resolution,
        by: r.by.map(|k| match k {
            crate::records::by::KeyKind::Pid => syscall_trace::By::Pid,
            crate::records::by::KeyKind::Uid => syscall_trace::By::Uid,
            crate::records::by::KeyKind::Comm => syscall_trace::By::Comm,
        }),
        by_max: r.by_max,
        hot_files: r.hot_files,
        slow_cycles: r.slow.map(|t| clock.secs_to_cycles(t.as_secs_f64())),
        slowest: r.slowest,
    };
    let sink = s
        .slow
        .map(|l| Arc::new(SlowSink(l)) as Arc<dyn syscall_trace::SlowSink>);
    syscall_trace::Tracer::start(cfg, sink).map_err(|e| setup_err(format!("--syscalls: {e}")))
}

impl Kernel {
    /// The mount is over (or failed): stops tracing and removes the tracer's ftrace instance,
    /// and detaches the syscall level's program, whoever still holds the tracers; the layers
    /// keep what they recorded.
    pub fn close(&self) {
        if let Some(t) = &self.tracer {
            t.close();
        }
        if let Some(s) = &self.syscalls {
            s.close();
        }
    }
}

impl Drop for Kernel {
    fn drop(&mut self) {
        self.close();
    }
}

/// The device number of the FUSE mount at `mnt` (its connection), from
/// `/proc/self/mountinfo` (the last mount there, the one on top).
pub fn connection(mnt: &Path) -> io::Result<Dev> {
    let info = std::fs::read_to_string("/proc/self/mountinfo")?;
    connection_in(&info, mnt).ok_or_else(|| {
        io::Error::other(format!(
            "--kernel: no FUSE mount at {} in /proc/self/mountinfo",
            mnt.display()
        ))
    })
}

fn connection_in(mountinfo: &str, mnt: &Path) -> Option<Dev> {
    kernel_trace::mountinfo::parse(mountinfo)
        .rev()
        .find(|m| m.point == mnt && (m.fstype == "fuse" || m.fstype.starts_with("fuse.")))
        .and_then(|m| Dev::parse(m.dev))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connection_is_the_top_fuse_mount_at_the_point() {
        let info = "30 1 0:40 / /mnt/p rw - tmpfs tmpfs rw\n\
                    31 30 0:300 / /mnt/p rw,nosuid - fuse.fsprof-fuse /srv rw\n\
                    32 1 0:301 / /mnt/q\\040r rw - fuse fsprof rw\n";
        assert_eq!(
            connection_in(info, Path::new("/mnt/p")),
            Some(Dev {
                major: 0,
                minor: 300
            })
        );
        assert_eq!(
            connection_in(info, Path::new("/mnt/q r")).map(|d| d.minor),
            Some(301)
        );
        assert_eq!(connection_in(info, Path::new("/mnt/x")), None);
    }
}
