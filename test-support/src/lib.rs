//! Helpers for integration tests that mount real file systems (used by the mount tests of
//! `fsprof-fuse` and `raif`): whether mounts can run here, a daemon that is always unmounted,
//! small shell and errno helpers, and the checks on an open file whose name is gone.
//!
//! Mount tests need `/dev/fuse` and root. Where either is missing they skip with a visible
//! message, except under `CI=true`, where that is a failure (CI must really run them).
//!
//! Dev-only: no library of the workspace depends on it.
//!
//! The modules depend on each other in one direction only, from the bottom up: [`attack`],
//! [`exerciser`], [`fidelity`], [`namespace`], [`privs`], [`prometheus`], [`strace`] (none imports
//! another).

#![allow(unsafe_code)]
#![warn(missing_docs)]

use std::ffi::OsStr;
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fsprof_fuse::daemon::mount::is_mount_point;

pub mod attack;
pub mod exerciser;
pub mod fidelity;
pub mod namespace;
pub mod privs;
pub mod prometheus;
pub mod strace;
use fsprof_fuse::sys;

/// Whether mount tests can run here; prints why not, and panics under `CI=true`.
pub fn fuse_available() -> bool {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    let why = if !Path::new("/dev/fuse").exists() {
        Some("no /dev/fuse")
    } else if sys::geteuid() != 0 {
        Some("not root")
    } else {
        None
    };
    match why {
        None => true,
        Some(w) if ci => panic!("mount tests cannot run under CI: {w}"),
        Some(w) => {
            eprintln!("SKIPPED: mount test needs /dev/fuse and root ({w})");
            false
        }
    }
}

pub use fsprof_fuse::transport::Transport;

/// How long a test waits for something that must happen before it calls it a hang. Waits
/// return as soon as their condition holds, so this costs nothing when a test passes; it is
/// long so that a machine that stalls threads (CI's two shared vCPUs, other builds, `stress-ng`)
/// never reaches it, and a minute so that a real hang still fails well within a test's time.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// Waits until `done` holds, looking every 10 ms; panics naming `what` after [`PATIENCE`].
pub fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "{what}: still not so after {PATIENCE:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Makes each test function `fn NAME(t: Transport)` two tests, `NAME::classic` and `NAME::uring`,
/// so that a mount test runs on both transports.
#[macro_export]
macro_rules! transports {
    ($($name:ident),+ $(,)?) => {$(
        mod $name {
            #[test]
            fn classic() {
                super::$name($crate::Transport::Classic)
            }

            #[test]
            fn uring() {
                super::$name($crate::Transport::Uring)
            }
        }
    )+};
}

/// Whether mount tests can run over transport `t` here (the io_uring transport needs Linux
/// 6.14+ and `enable_uring`); says why not, and panics under `CI=true`.
pub fn transport_available(t: Transport) -> bool {
    if t == Transport::Classic {
        return true;
    }
    match fsprof_fuse::transport::uring::check() {
        Ok(()) => true,
        Err(e) => {
            let ci = std::env::var("CI").is_ok_and(|v| v == "true");
            assert!(!ci, "the io_uring transport cannot run under CI: {e}");
            eprintln!("SKIPPED: io_uring transport: {e}");
            false
        }
    }
}

/// The options that select transport `t` (the same for fsprof-fuse and raif).
pub fn transport_args(t: Transport) -> &'static [&'static str] {
    match t {
        Transport::Classic => &[],
        Transport::Uring => &["--uring"],
    }
}

/// Held shared by tests that make the kernel drop its caches, exclusively by tests whose counts
/// that would change.
static CACHES: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// Makes the kernel drop its dentry and inode caches (`drop_caches` 2): every inode it no longer
/// uses is forgotten, and the daemons are told. Waits while a test of this binary runs that
/// needs the caches kept ([`drop_caches_alone`]).
pub fn drop_caches() {
    let _shared = CACHES.read().unwrap_or_else(|e| e.into_inner());
    std::fs::write("/proc/sys/vm/drop_caches", b"2").expect("drop_caches");
}

/// Makes the kernel drop its page cache too (`drop_caches` 3), so that reads reach the daemon;
/// waits as [`drop_caches`] does.
pub fn drop_all_caches() {
    let _shared = CACHES.read().unwrap_or_else(|e| e.into_inner());
    std::fs::write("/proc/sys/vm/drop_caches", b"3").expect("drop_caches");
}

/// Keeps the other tests of this binary from dropping the kernel's caches while the guard
/// lives.
pub fn drop_caches_alone() -> std::sync::RwLockWriteGuard<'static, ()> {
    CACHES.write().unwrap_or_else(|e| e.into_inner())
}

/// [`drop_caches`] for the test that holds `_alone`.
pub fn drop_caches_now(_alone: &std::sync::RwLockWriteGuard<'static, ()>) {
    std::fs::write("/proc/sys/vm/drop_caches", b"2").expect("drop_caches");
}

/// Unmounts `mnt` with bounded retries (it may be busy for a moment), then lazily.
pub fn unmount_path(mnt: &Path) {
    for _ in 0..50 {
        if !is_mount_point(mnt) || sys::umount(mnt, false).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = sys::umount(mnt, true);
}

/// A command running `program`, under `wrapper` (a command and its arguments, e.g.
/// `["prlimit", "--nofile=64:64"]`) unless that is empty.
pub fn wrapped(wrapper: &[&str], program: &str) -> Command {
    match wrapper.split_first() {
        Some((w, rest)) => {
            let mut c = Command::new(w);
            c.args(rest).arg(program);
            c
        }
        None => Command::new(program),
    }
}

/// A file-system daemon running in the foreground and serving a mount point; unmounted and
/// reaped when dropped (on success, failure and panic).
pub struct Daemon {
    mnt: PathBuf,
    log: PathBuf,
    child: Option<Child>,
}

impl Daemon {
    /// Runs `cmd` (a foreground daemon mounting at `mnt`) with stderr going to `log`, and
    /// waits until the mount is live; panics with the log if the daemon exits first.
    pub fn start(mut cmd: Command, mnt: &Path, log: &Path) -> Daemon {
        let log_file = std::fs::File::create(log).expect("daemon log");
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file);
        // The daemon goes with the test that started it, also when the test process is killed
        // and no Drop runs: SIGTERM when the starting thread dies, on which the daemons unmount
        // and exit (a killed test run used to leave its daemons and mounts behind).
        // SAFETY: prctl is async-signal-safe, and the closure touches nothing else of the
        // parent's state between fork and exec.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().unwrap_or_else(|e| panic!("start {cmd:?}: {e}"));
        let mut d = Daemon {
            mnt: mnt.to_path_buf(),
            log: log.to_path_buf(),
            child: Some(child),
        };
        let deadline = Instant::now() + PATIENCE;
        while !is_mount_point(mnt) {
            if let Some(status) = d.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                d.child = None;
                panic!(
                    "daemon exited ({status}) before mounting:\n{}",
                    d.log_text()
                );
            }
            assert!(
                Instant::now() < deadline,
                "mount did not come up:\n{}",
                d.log_text()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        d
    }

    /// The daemon's pid.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// What the daemon logged so far.
    pub fn log_text(&self) -> String {
        let mut s = String::new();
        if let Ok(mut f) = std::fs::File::open(&self.log) {
            let _ = f.read_to_string(&mut s);
        }
        s
    }

    /// Unmounts and waits (bounded) for the daemon to exit; returns its exit code.
    pub fn stop(&mut self) -> Option<i32> {
        unmount_path(&self.mnt);
        let mut child = self.child.take()?;
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(s) = child.try_wait().ok().flatten() {
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
}

impl Drop for Daemon {
    fn drop(&mut self) {
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
}

/// Runs a shell command (`sh -c`); returns (exit code, stdout, stderr).
pub fn sh(cmd: &str) -> (i32, String, String) {
    let o = Command::new("sh").arg("-c").arg(cmd).output().expect("sh");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The errno of an I/O result's error (panics if it succeeded).
pub fn errno<T: std::fmt::Debug>(r: io::Result<T>) -> i32 {
    r.expect_err("expected an error")
        .raw_os_error()
        .expect("an OS error")
}

/// The profile of the mount at `mnt` (its `.fsprof`).
///
/// # Panics
/// If the file cannot be read or does not parse (with the text in the message).
pub fn read_profile(mnt: &Path) -> profile_store::Profile {
    let text = std::fs::read_to_string(mnt.join(".fsprof")).expect("read .fsprof");
    profile_store::text::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// The per-operation counts of `layer` in `p`, sorted by name, without `OP_FORGET` (which the
/// kernel sends without the send tracepoint): what the `--kernel` tests compare between the
/// `kernel` and `fuse` layers.
pub fn op_counts(p: &profile_store::Profile, layer: &str) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = p
        .layer(layer)
        .map(|l| {
            l.ops
                .iter()
                .filter(|o| o.name != "OP_FORGET")
                .map(|o| (o.name.clone(), o.count))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// The first profile of the mount at `mnt` for which `settled` holds, reading it again for up to
/// [`PATIENCE`]; after that the last one read, for the caller's assertions to judge.
///
/// A snapshot taken right after a call returns may not hold all of it: a request's latency is
/// recorded after its reply has gone out, and the kernel sends RELEASE after `close(2)` has
/// returned. Waiting for the condition, not for a fixed time, keeps such tests exact and
/// independent of the machine's load.
pub fn profile_when(
    mnt: &Path,
    settled: impl Fn(&profile_store::Profile) -> bool,
) -> profile_store::Profile {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let p = read_profile(mnt);
        if settled(&p) || Instant::now() >= deadline {
            return p;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The profile of the mount at `mnt` once no call is in flight (every operation's bucket sum
/// equals its count), or after [`PATIENCE`] the last one read.
pub fn quiescent_profile(mnt: &Path) -> profile_store::Profile {
    profile_when(mnt, |p| profile_store::views::check(p, 0).is_empty())
}

/// Makes the file `path` (through a mount): "0123456789", then dots up to `len` (at least 10)
/// bytes, with the attribute `user.k=v`; returns it opened for reading and writing. See
/// [`held_file_operations_work`].
pub fn open_held(path: &Path, len: usize) -> std::fs::File {
    let mut data = b"0123456789".to_vec();
    data.resize(len.max(10), b'.');
    std::fs::write(path, &data).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let held = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    sys::setxattr_fd(held.as_fd(), OsStr::new("user.k"), b"v", 0).expect("fsetxattr user.k");
    held
}

/// Checks that an open directory whose name was removed still answers fstat, as on the lower
/// file system: a directory with no links.
pub fn removed_dir_answers_fstat(dir: &std::fs::File) {
    use std::os::unix::fs::MetadataExt;
    let m = dir
        .metadata()
        .expect("fstat on an open directory that was removed");
    assert!(m.is_dir());
    assert_eq!(m.nlink(), 0);
}

/// Checks that every operation on the descriptor `held` (made by [`open_held`] with `len`
/// bytes) works and changes the held file, whatever became of its name: fstat, ftruncate,
/// fchmod, futimens, the xattr calls, write, read, and a new open of it through `/proc`. Leaves
/// it holding "012abc", mode 0600, mtime 2,000,000 and `user.k2=w`.
///
/// # Panics
/// Naming the operation that failed, or the check that did not hold.
pub fn held_file_operations_work(held: &mut std::fs::File, len: u64) {
    use std::io::{Read, Seek, SeekFrom, Write};
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    fn works<T>(op: &str, r: io::Result<T>) -> T {
        r.unwrap_or_else(|e| panic!("{op} on an open file whose name is gone: {e}"))
    }
    assert_eq!(works("fstat", held.metadata()).len(), len.max(10));
    works("ftruncate", held.set_len(3));
    assert_eq!(held.metadata().unwrap().len(), 3);
    let mode = std::fs::Permissions::from_mode(0o600);
    works("fchmod", held.set_permissions(mode));
    assert_eq!(held.metadata().unwrap().mode() & 0o7777, 0o600);
    let (atime, mtime) = (
        sys::SetTime::At(1_000_000, 0),
        sys::SetTime::At(2_000_000, 0),
    );
    works("futimens", sys::futimens(held.as_fd(), atime, mtime));
    let m = held.metadata().unwrap();
    assert_eq!((m.atime(), m.mtime()), (1_000_000, 2_000_000));
    let mut buf = [0u8; 256];
    let n = works("flistxattr", sys::listxattr_fd(held.as_fd(), &mut buf));
    assert!(
        buf[..n].split(|&b| b == 0).any(|s| s == b"user.k"),
        "{:?}",
        &buf[..n]
    );
    let n = works(
        "fgetxattr",
        sys::getxattr_fd(held.as_fd(), OsStr::new("user.k"), &mut buf),
    );
    assert_eq!(&buf[..n], b"v");
    let set = sys::setxattr_fd(held.as_fd(), OsStr::new("user.k2"), b"w", 0);
    works("fsetxattr", set);
    let n = works(
        "fgetxattr",
        sys::getxattr_fd(held.as_fd(), OsStr::new("user.k2"), &mut buf),
    );
    assert_eq!(&buf[..n], b"w");
    let written = held
        .seek(SeekFrom::End(0))
        .and_then(|_| held.write_all(b"abc"));
    works("write", written);
    let mut s = String::new();
    held.seek(SeekFrom::Start(0)).unwrap();
    works("read", held.read_to_string(&mut s));
    assert_eq!(s, "012abc");
    // Opened again through /proc (a new FUSE open of the same inode): the same file.
    let path = format!("/proc/self/fd/{}", held.as_raw_fd());
    assert_eq!(works("open again", std::fs::read(&path)), b"012abc");
    assert_eq!(held.metadata().unwrap().len(), 6);
}

/// A `MAP_SHARED` read-write mapping of a file, unmapped on drop: used by the tests of `mmap`
/// through a mount. Bytes are copied in and out; no reference into the mapping is handed out,
/// since another mapping or a `write(2)` may change them at any time.
pub struct SharedMapping {
    ptr: *mut u8,
    len: usize,
}

impl SharedMapping {
    /// Maps the first `len` bytes of `file` (open for reading and writing). The mapping holds
    /// its own reference to the file, so `file` may be closed before the mapping is dropped.
    pub fn new(file: &std::fs::File, len: usize) -> io::Result<SharedMapping> {
        // SAFETY: a new mapping at an address the kernel picks, of an open descriptor; nothing
        // else in this process refers to that range until this value unmaps it.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(SharedMapping {
            ptr: ptr.cast(),
            len,
        })
    }

    /// A copy of the mapped bytes (loads through the page tables: may fault in pages).
    pub fn read(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.len];
        // SAFETY: `ptr` maps `len` readable bytes for the life of `self`; `out` has `len`
        // bytes and is not part of the mapping.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr, out.as_mut_ptr(), self.len) };
        out
    }

    /// Stores `data` at the start of the mapping (at most its length).
    pub fn write(&mut self, data: &[u8]) {
        let n = data.len().min(self.len);
        // SAFETY: `ptr` maps `len` >= `n` writable bytes for the life of `self`; `data` is
        // not part of the mapping.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr, n) };
    }

    /// `msync(MS_SYNC)`: written back through the file system before it returns.
    pub fn sync(&self) -> io::Result<()> {
        // SAFETY: the range is exactly this mapping.
        if unsafe { libc::msync(self.ptr.cast(), self.len, libc::MS_SYNC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for SharedMapping {
    fn drop(&mut self) {
        // SAFETY: the range is exactly this mapping; no reference into it exists.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// Compiles the C program `source` into `dir/name` with `gcc` and `flags` (e.g. `-static`,
/// for a program no preload library can see); returns the program.
pub fn compile_c(dir: &Path, name: &str, source: &str, flags: &[&str]) -> PathBuf {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, source).expect("write the C source");
    let bin = dir.join(name);
    let st = Command::new("gcc")
        .args(["-O1", "-o"])
        .arg(&bin)
        .arg(&c)
        .args(flags)
        .status()
        .expect("gcc runs");
    assert!(st.success(), "gcc {flags:?} {name}.c");
    bin
}

/// The ids of the BPF programs process `pid` holds open (its `anon_inode:bpf-prog`
/// descriptors' `prog_id`): a daemon's `--syscalls` programs.
pub fn bpf_programs_of(pid: u32) -> Vec<u32> {
    let mut ids = Vec::new();
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return ids;
    };
    for fd in fds.flatten() {
        let is_prog = std::fs::read_link(fd.path())
            .is_ok_and(|t| t.to_string_lossy() == "anon_inode:bpf-prog");
        if !is_prog {
            continue;
        }
        let info = std::fs::read_to_string(format!(
            "/proc/{pid}/fdinfo/{}",
            fd.file_name().to_string_lossy()
        ))
        .unwrap_or_default();
        if let Some(id) = info
            .lines()
            .find_map(|l| l.strip_prefix("prog_id:"))
            .and_then(|v| v.trim().parse().ok())
        {
            ids.push(id);
        }
    }
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// Whether the kernel still has BPF program `id` (`bpftool prog show id N`).
pub fn bpf_program_loaded(id: u32) -> bool {
    Command::new("bpftool")
        .args(["prog", "show", "id", &id.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Waits (up to 20 s) until none of the programs `ids` is loaded: the kernel frees a detached
/// program from a work queue, after an RCU grace period. Returns those still loaded.
pub fn bpf_programs_gone(ids: &[u32]) -> Vec<u32> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left: Vec<u32> = ids
            .iter()
            .copied()
            .filter(|&i| bpf_program_loaded(i))
            .collect();
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
