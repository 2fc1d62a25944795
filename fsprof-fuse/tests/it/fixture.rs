//! Test fixture: a temporary LOWER and MNT, a daemon serving them over a chosen transport, and
//! cleanup that always runs (the daemon handling is [`test_support`]'s, shared with raif's
//! tests).
//!
//! Mount tests run on both transports: a test is a function of the [`Transport`], and
//! `transports!` (from `test_support`) makes it two tests, `NAME::classic` and `NAME::uring`.
//! Where the io_uring transport cannot run (an older kernel, `enable_uring` off) its tests skip
//! with a message, except under `CI=true`, where that is a failure.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use profile_store::Profile;
use tempfile::TempDir;
use test_support::{Daemon, fuse_available, transport_available};

pub use test_support::{
    Transport, drop_caches, drop_caches_alone, drop_caches_now, errno, sh, transport_args,
    unmount_path,
};

/// The daemon under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_fsprof-fuse")
}

/// Whether `path` is a mount point right now.
pub fn is_mounted(path: &Path) -> bool {
    fsprof_fuse::daemon::mount::is_mount_point(path)
}

/// A temporary directory with `lower/` and `mnt/`, and optionally a daemon serving one at the
/// other.
pub struct Fixture {
    pub root: PathBuf,
    pub lower: PathBuf,
    pub mnt: PathBuf,
    /// How the daemon is asked to carry requests.
    pub transport: Transport,
    daemon: Option<Daemon>,
    log: PathBuf,
    /// Removes `root` when dropped (unless the mount could not be undone).
    dir: Option<TempDir>,
}

impl Fixture {
    /// Fresh directories (no mount yet) in the system's temporary directory, for mounts over
    /// transport `t`; `None` when mount tests cannot run.
    pub fn new(name: &str, t: Transport) -> Option<Fixture> {
        Fixture::new_in(name, &std::env::temp_dir(), t)
    }

    /// Fresh directories (no mount yet) inside `base`, so that LOWER lies on `base`'s file
    /// system, for mounts over transport `t`; `None` when mount tests cannot run.
    pub fn new_in(name: &str, base: &Path, t: Transport) -> Option<Fixture> {
        if !fuse_available() || !transport_available(t) {
            return None;
        }
        let dir = tempfile::Builder::new()
            .prefix(&format!("fsprof-it-{name}-"))
            .tempdir_in(base)
            .expect("scratch directory");
        // Open to other users: some tests mount or work as nobody below it.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let root = dir.path().to_path_buf();
        let lower = root.join("lower");
        let mnt = root.join("mnt");
        std::fs::create_dir_all(&lower).unwrap();
        std::fs::create_dir_all(&mnt).unwrap();
        let log = root.join("daemon.log");
        Some(Fixture {
            root,
            lower,
            mnt,
            transport: t,
            daemon: None,
            log,
            dir: Some(dir),
        })
    }

    /// New directories and a daemon started with `args` over transport `t` (foreground, so the
    /// fixture owns it).
    pub fn mounted(name: &str, t: Transport, args: &[&str]) -> Option<Fixture> {
        let mut f = Fixture::new(name, t)?;
        f.mount(args);
        Some(f)
    }

    /// Starts `fsprof-fuse -f LOWER MNT args...` over the fixture's transport, optionally under
    /// a wrapper command (e.g. `prlimit`), and waits until the mount is live.
    pub fn mount_with(&mut self, wrapper: &[&str], args: &[&str]) {
        assert!(self.daemon.is_none(), "already mounted");
        let mut cmd = test_support::wrapped(wrapper, bin());
        cmd.arg("-f").arg(&self.lower).arg(&self.mnt).args(args);
        cmd.args(transport_args(self.transport));
        cmd.env("RUST_LOG", "warn");
        self.daemon = Some(Daemon::start(cmd, &self.mnt, &self.log));
    }

    /// Starts the daemon with `args`.
    pub fn mount(&mut self, args: &[&str]) {
        self.mount_with(&[], args)
    }

    /// The daemon's pid.
    pub fn pid(&self) -> u32 {
        self.daemon.as_ref().expect("mounted").pid()
    }

    /// What the daemon logged.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Unmounts and waits (bounded) for the daemon to exit; returns its exit status code.
    pub fn unmount(&mut self) -> Option<i32> {
        match self.daemon.take() {
            Some(mut d) => d.stop(),
            None => {
                unmount_path(&self.mnt);
                None
            }
        }
    }

    /// `MNT/rel`.
    pub fn m(&self, rel: &str) -> PathBuf {
        self.mnt.join(rel)
    }

    /// `LOWER/rel`.
    pub fn l(&self, rel: &str) -> PathBuf {
        self.lower.join(rel)
    }

    /// The mount's profile (from `.fsprof`).
    pub fn profile(&self) -> Profile {
        test_support::read_profile(&self.mnt)
    }

    /// The mount's profile once `settled` holds for it (see [`test_support::profile_when`]).
    pub fn profile_when(&self, settled: impl Fn(&Profile) -> bool) -> Profile {
        test_support::profile_when(&self.mnt, settled)
    }

    /// The mount's profile once no call is in flight.
    pub fn quiescent_profile(&self) -> Profile {
        test_support::quiescent_profile(&self.mnt)
    }

    /// Resets the profile (a write to `.fsprof`).
    pub fn reset(&self) {
        std::fs::write(self.m(".fsprof"), b"reset\n").expect("reset");
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        drop(self.daemon.take());
        if is_mounted(&self.mnt) {
            unmount_path(&self.mnt);
        }
        if is_mounted(&self.mnt) {
            // Never remove files through a mount that could not be undone: keep the directory.
            if let Some(d) = self.dir.take() {
                eprintln!(
                    "{} is still mounted: keeping {}",
                    self.mnt.display(),
                    d.keep().display()
                );
            }
        }
    }
}

/// A scratch directory on a file system of one type: in the system's temporary directory when
/// that is of the type, else on a small file system made and mounted for the test (unmounted
/// and removed when dropped, also on panic).
pub struct FsDir {
    dir: TempDir,
    /// The file system mounted for the test at `dir/fs`, if one was.
    mounted: Option<PathBuf>,
}

/// `statfs` magic numbers.
const EXT4_MAGIC: i64 = 0xEF53;
const TMPFS_MAGIC: i64 = 0x0102_1994;

impl FsDir {
    /// A directory on ext4 (which wants `O_DIRECT` buffers, offsets and lengths aligned).
    /// `None` (with a message) where none can be had; a failure under `CI=true`.
    pub fn ext4() -> Option<FsDir> {
        FsDir::of_type(EXT4_MAGIC, "ext4", |dir, fs| {
            let img = dir.join("ext4.img");
            std::fs::File::create(&img)
                .and_then(|f| f.set_len(64 << 20))
                .unwrap();
            let (c, _, e) = sh(&format!("mkfs.ext4 -q -F {}", img.display()));
            if c != 0 {
                return Err(format!("mkfs.ext4: {e}"));
            }
            let (c, _, e) = sh(&format!("mount -o loop {} {}", img.display(), fs.display()));
            if c != 0 {
                return Err(format!("mount -o loop: {e}"));
            }
            Ok(())
        })
    }

    /// A directory on tmpfs.
    pub fn tmpfs() -> Option<FsDir> {
        FsDir::of_type(TMPFS_MAGIC, "tmpfs", |_, fs| {
            let (c, _, e) = sh(&format!(
                "mount -t tmpfs -o size=16m tmpfs {}",
                fs.display()
            ));
            if c == 0 { Ok(()) } else { Err(e) }
        })
    }

    fn of_type(
        magic: i64,
        name: &str,
        make: impl FnOnce(&Path, &Path) -> Result<(), String>,
    ) -> Option<FsDir> {
        if !fuse_available() {
            return None;
        }
        let dir = tempfile::Builder::new()
            .prefix(&format!("fsprof-it-{name}-"))
            .tempdir()
            .expect("scratch directory");
        let here = std::fs::File::open(dir.path()).unwrap();
        if fsprof_fuse::sys::fstatfs_type(std::os::fd::AsFd::as_fd(&here)).ok() == Some(magic) {
            return Some(FsDir { dir, mounted: None });
        }
        let fs = dir.path().join("fs");
        std::fs::create_dir(&fs).unwrap();
        match make(dir.path(), &fs) {
            Ok(()) => Some(FsDir {
                dir,
                mounted: Some(fs),
            }),
            Err(e) => {
                let ci = std::env::var("CI").is_ok_and(|v| v == "true");
                assert!(!ci, "no {name} to test on under CI: {e}");
                eprintln!("SKIPPED: no {name} to test on: {e}");
                None
            }
        }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        self.mounted.as_deref().unwrap_or(self.dir.path())
    }
}

impl Drop for FsDir {
    fn drop(&mut self) {
        if let Some(fs) = &self.mounted {
            unmount_path(fs);
        }
    }
}
