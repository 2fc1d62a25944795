//! `--kernel`: the kernel's layers of a mount (crate `kernel-trace`), wired in. Checked before
//! the mount, so that what is missing (tracefs, a tracepoint, the right to open it) is refused
//! in one line and nothing is mounted; started once the mount's FUSE connection is known and
//! before the mount is announced, so no request is missed; added to the profile as an
//! extension that drains the rings before every snapshot and is reset with it.
//!
//! The control files' requests are left out of the `kernel` layer as they are of `fuse`: the
//! control layer notes their `unique`s ([`crate::control::ControlFiles::excluding`]).

use std::io;
use std::path::Path;
use std::sync::Arc;

use kernel_trace::devices::Dev;
use kernel_trace::{Excluded, Plan, Tracer};
use profile_store::{Profiler, RecorderConfig};

use crate::mount::{SetupError, setup_err};

/// The kernel layers of one mount: tracing from before the mount, told its connection once
/// the mount exists.
pub struct Kernel {
    excluded: Arc<Excluded>,
    tracer: Arc<Tracer>,
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
        let excluded = Arc::new(Excluded::default());
        let tracer = plan
            .start(None, &crate::ops::NAMES, config, excluded.clone())
            .map_err(|e| setup_err(format!("--kernel: {e}")))?;
        profiler.extend(tracer.clone());
        Ok(Arc::new(Kernel { excluded, tracer }))
    }

    /// Where the control files note the requests they answer.
    pub fn excluded(&self) -> Arc<Excluded> {
        self.excluded.clone()
    }

    /// Names the FUSE connection mounted at `mnt` as the one traced.
    pub fn start(&self, mnt: &Path) -> io::Result<()> {
        let conn = connection(mnt)?;
        self.tracer
            .set_connection(conn)
            .map_err(|e| io::Error::other(format!("--kernel: {e}")))?;
        log::info!("kernel trace: FUSE connection {conn} of {}", mnt.display());
        Ok(())
    }
}

impl Kernel {
    /// The mount is over (or failed): stops tracing and removes the tracer's ftrace instance,
    /// whoever still holds the tracer; the layers keep what they recorded.
    pub fn close(&self) {
        self.tracer.close();
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
