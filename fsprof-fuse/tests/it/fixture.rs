//! Test fixture: a temporary LOWER and MNT, a daemon serving them, and cleanup that always runs.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use profile_store::Profile;

static SEQ: AtomicUsize = AtomicUsize::new(0);

/// The daemon under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_fsprof-fuse")
}

/// Whether mount tests can run here (see `fsprof_fuse::testing`).
pub fn fuse_available() -> bool {
    fsprof_fuse::testing::fuse_available()
}

/// Whether `path` is a mount point right now.
pub fn is_mounted(path: &Path) -> bool {
    fsprof_fuse::mount::is_mount_point(path)
}

/// A temporary directory with `lower/` and `mnt/`, and optionally a daemon serving one at the
/// other.
pub struct Fixture {
    pub root: PathBuf,
    pub lower: PathBuf,
    pub mnt: PathBuf,
    child: Option<Child>,
    log: PathBuf,
}

impl Fixture {
    /// Fresh directories (no mount yet); `None` when mount tests cannot run.
    pub fn new(name: &str) -> Option<Fixture> {
        if !fuse_available() {
            return None;
        }
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let root =
            std::env::temp_dir().join(format!("fsprof-it-{}-{n}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let lower = root.join("lower");
        let mnt = root.join("mnt");
        std::fs::create_dir_all(&lower).unwrap();
        std::fs::create_dir_all(&mnt).unwrap();
        let log = root.join("daemon.log");
        Some(Fixture {
            root,
            lower,
            mnt,
            child: None,
            log,
        })
    }

    /// New directories and a daemon started with `args` (foreground, so the fixture owns it).
    pub fn mounted(name: &str, args: &[&str]) -> Option<Fixture> {
        let mut f = Fixture::new(name)?;
        f.mount(args);
        Some(f)
    }

    /// Starts `fsprof-fuse -f LOWER MNT args...`, optionally under a wrapper command
    /// (e.g. `prlimit`), and waits until the mount is live.
    pub fn mount_with(&mut self, wrapper: &[&str], args: &[&str]) {
        assert!(self.child.is_none(), "already mounted");
        let log = std::fs::File::create(&self.log).unwrap();
        let mut cmd = match wrapper.split_first() {
            Some((w, rest)) => {
                let mut c = Command::new(w);
                c.args(rest).arg(bin());
                c
            }
            None => Command::new(bin()),
        };
        cmd.arg("-f").arg(&self.lower).arg(&self.mnt).args(args);
        cmd.env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        let child = cmd.spawn().expect("start fsprof-fuse");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while !is_mounted(&self.mnt) {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                self.child = None;
                panic!(
                    "fsprof-fuse exited ({status}) before mounting:\n{}",
                    self.log_text()
                );
            }
            assert!(
                Instant::now() < deadline,
                "mount did not come up:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Starts the daemon with `args`.
    pub fn mount(&mut self, args: &[&str]) {
        self.mount_with(&[], args)
    }

    /// The daemon's pid.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("mounted").id()
    }

    /// What the daemon logged.
    pub fn log_text(&self) -> String {
        let mut s = String::new();
        if let Ok(mut f) = std::fs::File::open(&self.log) {
            let _ = f.read_to_string(&mut s);
        }
        s
    }

    /// Unmounts and waits (bounded) for the daemon to exit; returns its exit status code.
    pub fn unmount(&mut self) -> Option<i32> {
        unmount_path(&self.mnt);
        let mut child = self.child.take()?;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(s) = child.try_wait().unwrap() {
                return s.code();
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("daemon did not exit after unmount:\n{}", self.log_text());
            }
            std::thread::sleep(Duration::from_millis(10));
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
        let text = std::fs::read_to_string(self.m(".fsprof")).expect("read .fsprof");
        profile_store::text::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
    }

    /// Resets the profile (a write to `.fsprof`).
    pub fn reset(&self) {
        std::fs::write(self.m(".fsprof"), b"reset\n").expect("reset");
    }
}

/// Unmounts `mnt` with bounded retries, then lazily.
pub fn unmount_path(mnt: &Path) {
    fsprof_fuse::testing::unmount(mnt)
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if self.child.is_some() || is_mounted(&self.mnt) {
            unmount_path(&self.mnt);
            if let Some(mut c) = self.child.take() {
                let deadline = Instant::now() + Duration::from_secs(10);
                while c.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(10));
                }
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        if !is_mounted(&self.mnt) {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }
}

/// Runs a shell command (as `sh -c`), returning (status, stdout, stderr).
pub fn sh(cmd: &str) -> (i32, String, String) {
    let o = Command::new("sh").arg("-c").arg(cmd).output().expect("sh");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The errno of an I/O result's error.
pub fn errno<T: std::fmt::Debug>(r: std::io::Result<T>) -> i32 {
    r.expect_err("expected an error")
        .raw_os_error()
        .expect("an OS error")
}
