//! Mount bookkeeping: the mount table, unmounting with bounded retries, and a guard that
//! unmounts on every path (normal return, error, panic, interrupt).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One mount of the mount table.
struct MountEntry {
    source: String,
    point: PathBuf,
    fstype: String,
}

fn mount_entries() -> Vec<MountEntry> {
    use kernel_trace::mountinfo;
    mountinfo::parse(&mountinfo::read())
        .map(|m| MountEntry {
            source: m.source.to_string_lossy().into_owned(),
            point: m.point,
            fstype: m.fstype.to_string(),
        })
        .collect()
}

/// Every mount point listed in `/proc/self/mountinfo`, with its file-system type.
pub fn mount_table() -> Vec<(PathBuf, String)> {
    mount_entries()
        .into_iter()
        .map(|e| (e.point, e.fstype))
        .collect()
}

/// The mount holding `path` (longest matching mount point).
fn mount_of(path: &Path) -> Option<MountEntry> {
    mount_entries()
        .into_iter()
        .filter(|e| path.starts_with(&e.point))
        .max_by_key(|e| e.point.as_os_str().len())
}

/// Whether `path` is a mount point now.
pub fn is_mounted(path: &Path) -> bool {
    mount_table().iter().any(|(m, _)| m == path)
}

/// FUSE mount points strictly below `dir`: what a killed run of the harness (whose targets
/// mount in run directories inside the work directory) can have left. The work directory's own
/// file system, and anything not FUSE that someone mounted there, are not the harness's.
pub fn fuse_mounts_below(dir: &Path) -> Vec<PathBuf> {
    mount_table()
        .into_iter()
        .filter(|(m, t)| m != dir && m.starts_with(dir) && (t == "fuse" || t.starts_with("fuse.")))
        .map(|(m, _)| m)
        .collect()
}

/// Mount points at or below `dir`.
pub fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    mount_table()
        .into_iter()
        .map(|(m, _)| m)
        .filter(|m| m.starts_with(dir))
        .collect()
}

/// The file-system type of the mount holding `path` (longest matching mount point).
pub fn fs_type_of(path: &Path) -> Option<String> {
    mount_of(path).map(|e| e.fstype)
}

/// Whether `path` is on an ext4 file system mounted without a journal. Such an ext4 does not
/// reuse an inode freed in the last 60 seconds (300 while its inode-table block is dirty), and
/// checks every candidate against that rule: creating files soon after many were deleted scans
/// the freed ones one by one, so a create-heavy measurement pays for what the previous run
/// deleted (see `--settle`). ext4 reports the journal thread in sysfs, `<none>` without one.
pub fn ext4_without_journal(path: &Path) -> bool {
    let Some(e) = mount_of(path).filter(|e| e.fstype == "ext4") else {
        return false;
    };
    // The sysfs directory is named after the device (`/dev/vda` → `vda`), symlinks resolved.
    let dev = std::fs::canonicalize(&e.source).unwrap_or_else(|_| PathBuf::from(&e.source));
    let Some(name) = dev.file_name() else {
        return false;
    };
    let task = Path::new("/sys/fs/ext4").join(name).join("journal_task");
    std::fs::read_to_string(task).is_ok_and(|t| t.trim() == "<none>")
}

fn quiet(cmd: &mut Command) -> bool {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Unmounts `path`: `umount` as root, `fusermount3 -u` otherwise, up to `attempts` times with
/// a growing pause (a file system is busy while a process still has a file open in it), then a
/// lazy unmount as the last resort. Returns whether the path is no longer mounted.
pub fn unmount(path: &Path, attempts: u32) -> bool {
    let root = crate::sys::euid() == 0;
    for attempt in 0..attempts {
        if !is_mounted(path) {
            return true;
        }
        let ok = if root {
            quiet(Command::new("umount").arg(path))
        } else {
            quiet(Command::new("fusermount3").arg("-u").arg(path))
        };
        if ok && !is_mounted(path) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100 * (attempt as u64 + 1)));
    }
    if is_mounted(path) {
        log::error!(
            "'{}' is still busy after {attempts} attempts: detaching it lazily",
            path.display()
        );
        if root {
            quiet(Command::new("umount").arg("-l").arg(path));
        } else {
            quiet(Command::new("fusermount3").arg("-u").arg("-z").arg(path));
        }
    }
    !is_mounted(path)
}

/// Waits up to `limit` for process `pid` to exit.
pub fn wait_exit(pid: u32, limit: Duration) -> bool {
    let t = Instant::now();
    while Path::new(&format!("/proc/{pid}")).exists() {
        // A zombie child of ours counts as gone.
        if crate::harness::procfs::state(pid) == Some('Z') {
            return true;
        }
        if t.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// Unmounts its mount point when dropped (also while unwinding from a panic), then waits for
/// the daemon to exit.
#[derive(Debug)]
pub struct MountGuard {
    path: PathBuf,
    daemon: Option<u32>,
    done: bool,
}

impl MountGuard {
    /// Guards the mount at `path` served by process `daemon`.
    pub fn new(path: PathBuf, daemon: Option<u32>) -> MountGuard {
        MountGuard {
            path,
            daemon,
            done: false,
        }
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The daemon serving the mount, when found.
    pub fn daemon(&self) -> Option<u32> {
        self.daemon
    }

    /// Unmounts now; returns whether it worked. Safe to call more than once.
    pub fn unmount(&mut self) -> bool {
        if self.done {
            return true;
        }
        let ok = unmount(&self.path, 10);
        if let Some(pid) = self.daemon {
            if ok && !wait_exit(pid, Duration::from_secs(10)) {
                log::warn!("daemon {pid} of '{}' did not exit", self.path.display());
            }
        }
        self.done = ok;
        ok
    }
}

impl Drop for MountGuard {
    fn drop(&mut self) {
        if !self.unmount() {
            log::error!(
                "could not unmount '{}': unmount it by hand",
                self.path.display()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_is_mounted() {
        assert!(is_mounted(Path::new("/")));
        assert!(fs_type_of(Path::new("/proc/self")).as_deref() == Some("proc"));
        assert!(!ext4_without_journal(Path::new("/proc/self")));
    }
}
