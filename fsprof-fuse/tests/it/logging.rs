//! A background daemon never throws its log away: without `--log-file` it logs to syslog where
//! the machine has it, else to a file of its own; every line names the mount point, and the
//! mount command prints nothing (as mount(8) expects: scripts compare its output).

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::fixture::{bin, is_mounted, unmount_path};

/// A LOWER holding a `.fsprof` (hidden by the control file: the daemon warns about it) and a
/// mount point; the mount is undone on drop.
struct Scene {
    dir: tempfile::TempDir,
}

impl Scene {
    fn new() -> Option<Scene> {
        if !test_support::fuse_available() {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("lower")).unwrap();
        std::fs::create_dir(dir.path().join("mnt")).unwrap();
        std::fs::write(dir.path().join("lower/.fsprof"), "mine").unwrap();
        Some(Scene { dir })
    }

    fn mnt(&self) -> PathBuf {
        self.dir.path().join("mnt")
    }

    /// Mounts in the background with `args`; returns the mount command's standard error.
    fn mount(&self, args: &[&str]) -> String {
        let o = Command::new(bin())
            .arg(self.dir.path().join("lower"))
            .arg(self.mnt())
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(o.status.success(), "{err}");
        assert!(o.stdout.is_empty(), "a mount prints nothing");
        assert!(is_mounted(&self.mnt()));
        err
    }
}

impl Drop for Scene {
    fn drop(&mut self) {
        unmount_path(&self.mnt());
    }
}

/// Waits (at most 30 s: a guard against a hang) until `f` finds what it looks for.
fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let t = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "never saw {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn without_a_log_file_or_syslog_the_log_goes_to_a_file_of_the_program() {
    let Some(s) = Scene::new() else { return };
    // Mount tests run as root (fuse_available says so): root's log directory.
    let none = s.dir.path().join("no-syslog-here");
    let err = s.mount(&["--syslog-socket", none.to_str().unwrap()]);
    let file = Path::new("/var/log/fsprof/fsprof-fuse.log");
    assert_eq!(err, "", "a mount is silent");
    let mnt = s.mnt().display().to_string();
    let line = wait_for("the warning in the log file", || {
        let text = std::fs::read_to_string(file).ok()?;
        text.lines()
            .find(|l| l.contains(&format!(" {mnt}: .fsprof exists in")))
            .map(str::to_string)
    });
    assert!(line.contains(" WARN fsprof-fuse["), "{line}");
}

#[test]
fn with_syslog_each_line_is_one_datagram_naming_the_mount() {
    let Some(s) = Scene::new() else { return };
    let sock = s.dir.path().join("log");
    let rx = UnixDatagram::bind(&sock).unwrap();
    rx.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let err = s.mount(&["--syslog-socket", sock.to_str().unwrap()]);
    assert_eq!(err, "", "a mount is silent");
    let mut buf = vec![0u8; 4096];
    let n = rx.recv(&mut buf).expect("a syslog datagram");
    let msg = String::from_utf8_lossy(&buf[..n]);
    let mnt = s.mnt().display().to_string();
    assert!(msg.starts_with("<28>fsprof-fuse["), "{msg}");
    assert!(
        msg.contains(&format!("]: {mnt}: .fsprof exists in")),
        "{msg}"
    );
}

#[test]
fn a_given_log_file_wins_and_the_foreground_logs_to_stderr() {
    let Some(s) = Scene::new() else { return };
    let log = s.dir.path().join("my.log");
    let err = s.mount(&["--log-file", log.to_str().unwrap()]);
    assert_eq!(err, "", "a mount is silent");
    let mnt = s.mnt().display().to_string();
    wait_for("the warning", || {
        std::fs::read_to_string(&log)
            .ok()
            .filter(|t| t.contains(&format!(" {mnt}: .fsprof exists")))
    });
}
