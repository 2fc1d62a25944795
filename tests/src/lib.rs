//! Helpers for the cross-crate integration tests in `tests/`: locating the workspace's binaries
//! (built by `cargo test --workspace`, which builds every package's binaries for its own
//! integration tests) and a mount that always unmounts (fsprof-fuse's test daemon guard).

use std::path::{Path, PathBuf};
use std::process::Command;

use test_support::Daemon;
pub use test_support::fuse_available;

/// A binary of the workspace, from the target directory these tests were built into.
pub fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/<test> -> target/<profile>/<name>
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target directory");
    let p = dir.join(name);
    assert!(
        p.exists(),
        "{} is not built: run the tests with `cargo test --workspace --release`, which builds it",
        p.display()
    );
    p
}

/// A temporary directory with `lower/` and `mnt/` and a foreground daemon serving one at the
/// other; unmounted and removed on drop.
pub struct Mounted {
    /// Temporary root.
    pub root: PathBuf,
    /// The served directory.
    pub lower: PathBuf,
    /// The mount point.
    pub mnt: PathBuf,
    daemon: Option<Daemon>,
}

impl Mounted {
    /// Starts `program -f LOWER MNT args...` (fsprof-fuse style); `None` if mounts cannot run.
    pub fn start(name: &str, program: &str, args: &[&str]) -> Option<Mounted> {
        if !fuse_available() {
            return None;
        }
        let root = scratch(name);
        let (lower, mnt) = (root.join("lower"), root.join("mnt"));
        std::fs::create_dir_all(&lower).unwrap();
        std::fs::create_dir_all(&mnt).unwrap();
        let mut cmd = Command::new(bin(program));
        cmd.arg("-f").arg(&lower).arg(&mnt).args(args);
        let daemon = Daemon::start(cmd, &mnt, &root.join("daemon.log"));
        Some(Mounted {
            root,
            lower,
            mnt,
            daemon: Some(daemon),
        })
    }
}

impl Mounted {
    /// The daemon's process id.
    pub fn pid(&self) -> u32 {
        self.daemon.as_ref().expect("mounted").pid()
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        drop(self.daemon.take());
        if !fsprof_fuse::daemon::mount::is_mount_point(&self.mnt) {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }
}

/// A new private directory (mode 0700, an unpredictable name under the temporary directory)
/// for test `name`; the caller removes it.
pub fn scratch(name: &str) -> PathBuf {
    tempfile::Builder::new()
        .prefix(&format!("fsprof-x-{name}-"))
        .tempdir()
        .expect("a scratch directory")
        .keep()
}

/// Runs a workspace binary; returns (exit code, stdout, stderr).
pub fn run(program: &str, args: &[&std::ffi::OsStr]) -> (i32, String, String) {
    let o = Command::new(bin(program)).args(args).output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}
