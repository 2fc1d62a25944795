//! Mount lifecycle shared by `fsprof-fuse` and `raif`: checking the mount point, going to the
//! background, serving until unmounted or signalled, and reporting the outcome.
//!
//! * Paths are made absolute first. The mount point must be an existing, empty (unless allowed)
//!   directory that is not already a mount point, and must not lie inside a lower directory nor
//!   contain one.
//! * In background mode the process forks before any thread starts; the parent waits on a pipe
//!   and exits 0 once the child reports the mount live, or prints the child's one-line error and
//!   exits non-zero. The child starts a new session and detaches its standard streams.
//! * `SIGINT`, `SIGTERM` and `SIGHUP` unmount cleanly (lazily if the mount is busy, so the daemon
//!   keeps serving open files until they close); `umount MNT` / `fusermount3 -u MNT` end the
//!   daemon too.

use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

use std::sync::Arc;

use crate::filesystem::FileSystem;
use crate::sys;
use crate::sys::fuse::Device;
use crate::transport::Mounted;

// Kept here for the programs and tests that name them from their old place.
pub use crate::daemon::setup::{SetupError, setup_err};
pub use crate::protocol::errno::plain;
pub use crate::transport::MountSettings;

/// `path` made absolute and canonical; `what` names it in errors.
pub fn absolute_dir(path: &Path, what: &str) -> Result<PathBuf, SetupError> {
    let abs = std::path::absolute(path)
        .map_err(|e| setup_err(format!("{what} {}: {e}", path.display())))?;
    let meta = std::fs::metadata(&abs).map_err(|e| path_error(what, &abs, &e))?;
    if !meta.is_dir() {
        return Err(setup_err(format!(
            "{what} {}: not a directory",
            abs.display()
        )));
    }
    abs.canonicalize().map_err(|e| path_error(what, &abs, &e))
}

/// `WHAT PATH: CAUSE`, where the cause of `ENOTCONN` is said in words
/// ([`explain_not_connected`]).
fn path_error(what: &str, path: &Path, e: &io::Error) -> SetupError {
    let cause = if e.raw_os_error() == Some(libc::ENOTCONN) {
        explain_not_connected(path)
    } else {
        plain(e)
    };
    setup_err(format!("{what} {}: {cause}", path.display()))
}

/// What `ENOTCONN` ("Transport endpoint is not connected") on `path` means when `path` is,
/// or lies inside, a FUSE mount: the daemon that served it has died (killed, or crashed) and
/// the kernel keeps the dead mount until it is unmounted. One line, naming the mount point and
/// the fix, e.g. "the daemon of /mnt/prof has died (its FUSE connection is gone); `umount
/// /mnt/prof` (or `fusermount3 -u /mnt/prof`) clears it". For use in any message about a
/// path that failed with `ENOTCONN` (mounting over it, reading its profile).
pub fn explain_not_connected(path: &Path) -> String {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    // The mount point is the longest FUSE mount that holds the path (it cannot be resolved
    // through the dead mount, so compare names).
    let (mnt, fstype) = mounts()
        .into_iter()
        .filter(|(m, t)| (t == "fuse" || t.starts_with("fuse.")) && abs.starts_with(m))
        .max_by_key(|(m, _)| m.as_os_str().len())
        .unwrap_or_else(|| (abs.clone(), String::new()));
    let daemon = match fstype.strip_prefix("fuse.") {
        Some(sub) => format!("the {sub} daemon"),
        None => "the daemon".to_string(),
    };
    let m = mnt.display();
    format!(
        "{daemon} of {m} has died (its FUSE connection is gone); `umount {m}` (or \
         `fusermount3 -u {m}`) clears it"
    )
}

/// Mount points and their file-system types from `/proc/self/mountinfo` (unescaped).
fn mounts() -> Vec<(PathBuf, String)> {
    use kernel_trace::mountinfo;
    mountinfo::parse(&mountinfo::read())
        .map(|m| (m.point, m.fstype.to_string()))
        .collect()
}

/// Whether `path` (absolute, canonical) is a mount point.
pub fn is_mount_point(path: &Path) -> bool {
    mounts().iter().any(|(m, _)| m == path)
}

/// Refuses a mount point `m` (absolute) inside one of `lowers` or one of them inside it;
/// `noun` names a lower directory in the message ("lower directory", "branch").
pub fn check_nesting(m: &Path, lowers: &[PathBuf], noun: &str) -> Result<(), SetupError> {
    for l in lowers {
        if m.starts_with(l) {
            return Err(setup_err(format!(
                "mount point {} lies inside {noun} {}",
                m.display(),
                l.display()
            )));
        }
        if l.starts_with(m) {
            return Err(setup_err(format!(
                "{noun} {} lies inside mount point {}",
                l.display(),
                m.display()
            )));
        }
    }
    Ok(())
}

/// Refuses a mount point of `/dev/fd/N`: what `mount.fuse3 -o drop_privileges` passes (it
/// mounts, then runs the program with the open `/dev/fuse`), which the daemons do not take.
pub fn not_a_descriptor(mnt: &Path) -> Result<(), SetupError> {
    if !mnt.starts_with("/dev/fd") {
        return Ok(());
    }
    Err(setup_err(format!(
        "mount point {}: an open /dev/fuse from mount.fuse3's drop_privileges, which is not \
         supported (the daemon mounts itself: leave the option out; setuid=USER runs it as \
         USER); umount the mount mount.fuse3 made",
        mnt.display()
    )))
}

/// Checks the mount point against the lower directories: returns it absolute and canonical.
pub fn check_mount_point(
    mnt: &Path,
    lowers: &[PathBuf],
    nonempty: bool,
) -> Result<PathBuf, SetupError> {
    not_a_descriptor(mnt)?;
    let m = absolute_dir(mnt, "mount point")?;
    if is_mount_point(&m) {
        return Err(setup_err(format!(
            "mount point {}: already mounted",
            m.display()
        )));
    }
    check_nesting(&m, lowers, "lower directory")?;
    if !nonempty {
        let mut rd = std::fs::read_dir(&m).map_err(|e| path_error("mount point", &m, &e))?;
        if rd.next().is_some() {
            return Err(setup_err(format!(
                "mount point {}: not empty (use --nonempty)",
                m.display()
            )));
        }
    }
    Ok(m)
}

/// A normal user needs to open `/dev/fuse` (fusermount3 opens it with the user's rights too).
fn check_fuse_device() -> io::Result<()> {
    if sys::geteuid() == 0 {
        return Ok(());
    }
    match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => Err(io::Error::new(
            e.kind(),
            "/dev/fuse is not open to normal users here (distributions make it mode 0666); run as root or ask root to `chmod 0666 /dev/fuse`",
        )),
        Err(e) => Err(io::Error::new(
            e.kind(),
            format!("/dev/fuse: {}", plain(&e)),
        )),
    }
}

/// Reports readiness from the daemon to the waiting parent.
pub struct Readiness {
    pipe: Option<OwnedFd>,
}

impl Readiness {
    /// Foreground: nobody waits.
    pub fn none() -> Readiness {
        Readiness { pipe: None }
    }

    /// The mount is live: the parent exits 0 and says nothing, as mount(8) expects.
    pub fn ok(&mut self) {
        if let Some(p) = self.pipe.take() {
            let mut f = std::fs::File::from(p);
            let _ = writeln!(f, "OK");
        }
    }

    /// Setup failed with `msg`. In a daemon (a parent is waiting) the parent prints it and the
    /// daemon exits here, so the message appears once.
    pub fn fail(&mut self, msg: &str) {
        if let Some(p) = self.pipe.take() {
            let mut f = std::fs::File::from(p);
            let _ = writeln!(f, "ERR {msg}");
            drop(f);
            std::process::exit(2);
        }
    }
}

/// Goes to the background: returns in the child with its [`Readiness`]; in the parent, waits for
/// the child's report and exits the process: 0 and silent when mounted, 2 with the child's
/// one-line error, 1 when the child died without a word.
///
/// Must be called before any thread is started (it is refused otherwise).
pub fn daemonize(program: &str) -> io::Result<Readiness> {
    let (r, w) = sys::pipe()?;
    match sys::fork()? {
        sys::Fork::Child => {
            drop(r);
            sys::setsid()?;
            Ok(Readiness { pipe: Some(w) })
        }
        sys::Fork::Parent(pid) => {
            drop(w);
            let mut msg = String::new();
            let _ = std::fs::File::from(r).read_to_string(&mut msg);
            if msg.starts_with("OK") {
                std::process::exit(0);
            }
            if let Some(e) = msg.strip_prefix("ERR ") {
                eprintln!("{program}: {}", e.trim_end());
                std::process::exit(2);
            } else {
                let status = (0..50).find_map(|_| {
                    let s = sys::try_wait(pid);
                    if s.is_none() {
                        std::thread::sleep(std::time::Duration::from_millis(10));
                    }
                    s
                });
                eprintln!("{program}: daemon exited before the mount was live (status {status:?})");
            }
            std::process::exit(1);
        }
    }
}

/// Points the daemon's standard streams at `/dev/null` (and stderr at `log` when given).
pub fn detach_stdio(log: Option<&Path>) -> io::Result<()> {
    let null = sys::open_path(Path::new("/dev/null"), libc::O_RDWR)?;
    sys::dup2(null.as_fd(), 0)?;
    sys::dup2(null.as_fd(), 1)?;
    match log {
        Some(p) => {
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)?;
            sys::dup2(f.as_fd(), 2)?;
        }
        None => sys::dup2(null.as_fd(), 2)?,
    }
    Ok(())
}

/// Mounts `fs` at `settings.mnt`, runs `after_mount`, reports readiness, serves until
/// unmounted or signalled. `device` learns the session's `/dev/fuse`.
pub fn serve<F: FileSystem + 'static>(
    fs: F,
    settings: &MountSettings,
    device: &Device,
    ready: &mut Readiness,
    after_mount: impl FnOnce() -> io::Result<()>,
) -> io::Result<()> {
    check_fuse_device()?;
    // Signals are blocked before the workers start so that only the signal thread sees them.
    sys::block_termination_signals()?;
    let mut session = match Mounted::mount(Arc::new(fs), settings, device) {
        Ok(s) => s,
        // Unmounted before the kernel's first request was read (a `umount` right after the
        // mount): the end that was asked for, as libfuse takes it, not a failed mount.
        Err(e) if e.kind() == io::ErrorKind::NotConnected => {
            log::info!(
                "{} was unmounted before its first request",
                settings.mnt.display()
            );
            ready.ok();
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    // Before any request is served and before the mount is announced (`--kernel` starts
    // tracing the new connection here); a failure unmounts (the session drops) and is the
    // mount's error.
    after_mount()?;
    let mut unmounter = session.unmounter();
    let mnt = settings.mnt.clone();
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            loop {
                // Every signal tries again: a busy mount is detached lazily, a failed unmount retried.
                let sig = sys::wait_for_termination();
                log::info!("signal {sig}: unmounting {}", mnt.display());
                if let Err(e) = unmounter.unmount() {
                    log::warn!("unmount {}: {e}; detaching lazily", mnt.display());
                    if let Err(e) = sys::umount(&mnt, true) {
                        log::error!("lazy unmount {}: {e}", mnt.display());
                    }
                }
            }
        })?;
    // The daemon's standard streams were pointed at its log when it went to the background;
    // the mount command prints nothing (scripts compare its output).
    ready.ok();
    log::info!(
        "serving {} with {} threads",
        settings.mnt.display(),
        settings.threads
    );
    session.run()
}

/// A file system mounted and served by threads of this process; unmounted when dropped (on
/// success, error and panic), with bounded retries and a lazy detach as the last resort.
pub struct LiveMount {
    mnt: PathBuf,
    session: Option<crate::transport::Background>,
}

impl LiveMount {
    /// Mounts `fs` at `settings.mnt` and serves it in background threads; `device` learns the
    /// session's `/dev/fuse`.
    pub fn start<F: FileSystem + 'static>(
        fs: F,
        settings: &MountSettings,
        device: &Device,
    ) -> io::Result<LiveMount> {
        check_fuse_device()?;
        let session = Mounted::mount(Arc::new(fs), settings, device)?.spawn()?;
        Ok(LiveMount {
            mnt: settings.mnt.clone(),
            session: Some(session),
        })
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        &self.mnt
    }

    /// Unmounts and waits for the serving threads.
    pub fn stop(mut self) {
        self.unmount();
    }

    fn unmount(&mut self) {
        let Some(session) = self.session.take() else {
            return;
        };
        // fuser's own unmount: umount(2) as root, fusermount3 -u for a normal user; then the
        // serving threads are joined, for a bounded time.
        if let Err(e) = bounded(UNMOUNT_WAIT, move || session.umount_and_join()) {
            // Busy (files still open on it): detach it; the threads end when the files close.
            log::warn!("unmount {}: {e}; detaching lazily", self.mnt.display());
            let detached = if sys::geteuid() == 0 {
                sys::umount(&self.mnt, true).is_ok()
            } else {
                std::process::Command::new("fusermount3")
                    .args(["-u", "-z"])
                    .arg(&self.mnt)
                    .status()
                    .is_ok_and(|s| s.success())
            };
            if !detached {
                log::error!("{} is still mounted", self.mnt.display());
            }
        }
    }
}

impl Drop for LiveMount {
    fn drop(&mut self) {
        self.unmount();
    }
}

/// How long [`LiveMount`] waits for its unmount and serving threads.
const UNMOUNT_WAIT: Duration = Duration::from_secs(10);

/// Runs `f` in a thread of its own and waits for it at most `limit`; past that the thread is
/// left to finish on its own and the wait fails with `TimedOut`.
pub fn bounded<T: Send + 'static>(
    limit: Duration,
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("bounded-wait".into())
        .spawn(move || {
            let _ = tx.send(f());
        })?;
    rx.recv_timeout(limit).unwrap_or_else(|_| {
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("no answer within {} s", limit.as_secs_f64()),
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_waits_return_results_and_give_up_in_time() {
        assert_eq!(bounded(Duration::from_secs(10), || Ok(7)).unwrap(), 7);
        // A call that cannot end until released: the wait gives up.
        let (release, wait) = std::sync::mpsc::channel::<()>();
        let r = bounded(Duration::from_millis(50), move || {
            let _ = wait.recv();
            Ok(())
        });
        assert_eq!(r.unwrap_err().kind(), io::ErrorKind::TimedOut);
        drop(release);
    }

    #[test]
    fn root_is_a_mount_point() {
        assert!(is_mount_point(Path::new("/")));
    }

    #[test]
    fn nesting_and_emptiness_are_refused() {
        let scratch = tempfile::tempdir().unwrap();
        let t = scratch.path().canonicalize().unwrap();
        let lower = t.join("lower");
        let inside = lower.join("mnt");
        let full = t.join("full");
        let empty = t.join("empty");
        for d in [&inside, &full, &empty] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(full.join("f"), b"x").unwrap();
        let l = vec![lower.canonicalize().unwrap()];
        assert!(
            check_mount_point(&inside, &l, false)
                .unwrap_err()
                .0
                .contains("inside lower")
        );
        assert!(
            check_mount_point(&t, &l, true)
                .unwrap_err()
                .0
                .contains("inside mount point")
        );
        assert!(
            check_mount_point(&full, &l, false)
                .unwrap_err()
                .0
                .contains("not empty")
        );
        assert!(check_mount_point(&full, &l, true).is_ok());
        assert!(check_mount_point(&empty, &l, false).is_ok());
        assert!(
            check_mount_point(&t.join("missing"), &l, false)
                .unwrap_err()
                .0
                .contains("No such file")
        );
        // mount.fuse3's drop_privileges hands over /dev/fd/N: refused in words.
        assert!(
            check_mount_point(Path::new("/dev/fd/3"), &l, false)
                .unwrap_err()
                .0
                .contains("drop_privileges")
        );
    }

    /// Outside any FUSE mount the path itself is named as the mount to clear.
    #[test]
    fn not_connected_is_explained_with_the_fix() {
        let m = explain_not_connected(Path::new("/nonexistent/fsprof-mnt"));
        assert_eq!(
            m,
            "the daemon of /nonexistent/fsprof-mnt has died (its FUSE connection is gone); \
             `umount /nonexistent/fsprof-mnt` (or `fusermount3 -u /nonexistent/fsprof-mnt`) \
             clears it"
        );
    }
}
