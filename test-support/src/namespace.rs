//! A private mount namespace, for tests that mount as an administrator does: through mount(8),
//! `mount.fuse3` and fstab, which find the file system's program on the fixed helper path
//! (mount(8) gives helpers no `PATH` of its own: `/bin/sh` then searches `/usr/local/sbin`,
//! `/usr/local/bin`, `/usr/sbin`, `/usr/bin`, `/sbin`, `/bin`).
//!
//! [`PrivateMounts::new`] starts a process in a new mount namespace whose mounts propagate
//! nowhere, and binds a directory of the test's programs over `/usr/local/sbin` and an empty
//! one over `/usr/local/bin` there, so that `mount -t fuse.fsprof-fuse` runs the binaries under
//! test (or, with no programs, the installed ones in `/usr/bin`) and the machine's own
//! `/usr/local` and `/etc/fstab` are neither used nor touched. Commands run inside with
//! [`PrivateMounts::sh`] (`nsenter`); paths inside are read from outside through
//! `/proc/PID/root`. On drop (success, failure, panic) every mount point the test named with
//! [`PrivateMounts::unmount_on_drop`] is unmounted (its daemon then ends) and the namespace's
//! process is killed; if the test process itself is killed, that process gets SIGKILL with it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::PATIENCE;

/// A mount namespace of the test's own (see the module documentation).
pub struct PrivateMounts {
    holder: Child,
    unmount: Vec<PathBuf>,
}

impl PrivateMounts {
    /// A new namespace where `programs` (name and path) are first on mount(8)'s helper path;
    /// `scratch` is a directory of the test's (the bound directories are made there).
    pub fn new(programs: &[(&str, &Path)], scratch: &Path) -> PrivateMounts {
        let sbin = scratch.join("ns-sbin");
        let empty = scratch.join("ns-empty");
        for d in [&sbin, &empty] {
            std::fs::create_dir_all(d).unwrap();
        }
        for (name, path) in programs {
            std::os::unix::fs::symlink(path, sbin.join(name)).unwrap();
        }
        let mut cmd = Command::new("unshare");
        cmd.args(["--mount", "--propagation", "private", "sleep", "infinity"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: prctl is async-signal-safe, and the closure touches nothing else of the
        // parent's state between fork and exec.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let holder = cmd.spawn().expect("unshare (util-linux)");
        let ns = PrivateMounts {
            holder,
            unmount: Vec::new(),
        };
        let ours = std::fs::read_link("/proc/self/ns/mnt").unwrap();
        let theirs = format!("/proc/{}/ns/mnt", ns.holder.id());
        crate::wait_until("the private mount namespace", || {
            std::fs::read_link(&theirs).is_ok_and(|l| l != ours)
                && std::fs::read_to_string(format!("/proc/{}/comm", ns.holder.id()))
                    .is_ok_and(|c| c.trim() == "sleep")
        });
        for (dir, over) in [(&sbin, "/usr/local/sbin"), (&empty, "/usr/local/bin")] {
            let (code, out, err) = ns.sh(&format!(
                "mkdir -p {over} && mount --bind '{}' {over}",
                dir.display()
            ));
            assert_eq!(code, 0, "bind {over}: {out}{err}");
        }
        ns
    }

    /// Runs `cmd` with `sh -c` in the namespace; returns (exit code, stdout, stderr).
    pub fn sh(&self, cmd: &str) -> (i32, String, String) {
        let o = Command::new("nsenter")
            .arg(format!("--mount=/proc/{}/ns/mnt", self.holder.id()))
            .args(["--", "sh", "-c", cmd])
            .stdin(Stdio::null())
            .output()
            .expect("nsenter (util-linux)");
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }

    /// `path` (absolute) as the namespace sees it, for reading and writing from outside.
    pub fn path(&self, path: &Path) -> PathBuf {
        let rel = path.strip_prefix("/").unwrap_or(path);
        PathBuf::from(format!("/proc/{}/root", self.holder.id())).join(rel)
    }

    /// The namespace's mount table line of mount point `mnt`, if mounted.
    pub fn mount_line(&self, mnt: &Path) -> Option<String> {
        let text = std::fs::read_to_string(format!("/proc/{}/mountinfo", self.holder.id()))
            .expect("the namespace's mountinfo");
        let want = mnt.display().to_string();
        text.lines()
            .find(|l| l.split(' ').nth(4) == Some(want.as_str()))
            .map(str::to_string)
    }

    /// Unmounts `mnt` (in the namespace) when dropped, if it is still mounted then.
    pub fn unmount_on_drop(&mut self, mnt: &Path) {
        self.unmount.push(mnt.to_path_buf());
    }

    /// The pids of the processes in the namespace running `exe` (the daemons a mount started).
    pub fn pids_of(&self, exe: &Path) -> Vec<u32> {
        let ns = std::fs::read_link(format!("/proc/{}/ns/mnt", self.holder.id())).ok();
        let mut pids = Vec::new();
        for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let same_ns = std::fs::read_link(format!("/proc/{pid}/ns/mnt")).ok() == ns;
            let same_exe = std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|p| p == exe);
            if same_ns && same_exe && pid != self.holder.id() {
                pids.push(pid);
            }
        }
        pids
    }
}

impl Drop for PrivateMounts {
    fn drop(&mut self) {
        for mnt in std::mem::take(&mut self.unmount) {
            let deadline = Instant::now() + PATIENCE;
            while self.mount_line(&mnt).is_some() && Instant::now() < deadline {
                let (code, ..) = self.sh(&format!("umount '{}'", mnt.display()));
                if code != 0 {
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
            if self.mount_line(&mnt).is_some() {
                let _ = self.sh(&format!("umount -l '{}'", mnt.display()));
            }
        }
        let _ = self.holder.kill();
        let _ = self.holder.wait();
    }
}
