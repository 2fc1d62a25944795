//! Test fixture: N temporary branch directories and a mount point, a `raif` daemon serving them
//! (always unmounted: [`test_support::Daemon`]), and helpers to look at branches.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use profile_store::Profile;
use test_support::{
    Daemon, Transport, fuse_available, transport_args, transport_available, unmount_path, wrapped,
};

pub use test_support::errno;

/// The program under test: `$RAIF_BIN` if set (to run these tests against another build of
/// raif, say an older one), else this crate's.
pub fn bin() -> String {
    std::env::var("RAIF_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_raif").to_string())
}

/// A workspace binary next to the test executable (built by `cargo test --workspace`).
/// `None` (with a message) where it is not built, except under `CI=true`, where it must be.
pub fn workspace_bin(name: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let p = exe.parent()?.parent()?.join(name);
    if p.is_file() {
        return Some(p);
    }
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    assert!(
        !ci,
        "{} is not built (cargo test --workspace builds it)",
        p.display()
    );
    eprintln!(
        "SKIPPED: {} is not built (run cargo test --workspace)",
        p.display()
    );
    None
}

/// Temporary branches and a mount point, and optionally a daemon serving them.
pub struct Fixture {
    pub root: PathBuf,
    pub branches: Vec<PathBuf>,
    pub mnt: PathBuf,
    /// The transport every mount of this fixture uses.
    pub transport: Transport,
    daemon: Option<Daemon>,
    log: PathBuf,
    /// File systems mounted under `root` by the test (unmounted after the daemon stops).
    mounts: Vec<PathBuf>,
    /// Branches served by daemons of their own (unmounted after the daemon stops).
    branch_daemons: Vec<Daemon>,
    /// Removes `root` when dropped (kept, not removed, if something is still mounted there).
    dir: Option<tempfile::TempDir>,
}

/// Output of an admin command.
pub struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Fixture {
    /// `n` fresh, empty branch directories and a mount point, for mounts over transport `t`;
    /// `None` when mounts cannot run.
    pub fn new(t: Transport, name: &str, n: usize) -> Option<Fixture> {
        if !fuse_available() || !transport_available(t) {
            return None;
        }
        let dir = tempfile::Builder::new()
            .prefix(&format!("raif-it-{name}-"))
            .tempdir()
            .expect("scratch directory");
        let root = dir.path().to_path_buf();
        let branches: Vec<PathBuf> = (0..n).map(|i| root.join(format!("b{i}"))).collect();
        for b in &branches {
            std::fs::create_dir_all(b).unwrap();
        }
        let mnt = root.join("mnt");
        std::fs::create_dir_all(&mnt).unwrap();
        let log = root.join("daemon.log");
        Some(Fixture {
            root,
            branches,
            mnt,
            transport: t,
            daemon: None,
            log,
            mounts: Vec::new(),
            branch_daemons: Vec::new(),
            dir: Some(dir),
        })
    }

    /// Puts each branch on a tmpfs of its own of the given size (`6m`, `100m`; more options
    /// after a comma, e.g. `100m,nr_inodes=40`), unmounted when the fixture is dropped, after
    /// the daemon. False (with a message) where tmpfs cannot be mounted.
    pub fn tmpfs(&mut self, sizes: &[&str]) -> bool {
        assert_eq!(sizes.len(), self.branches.len());
        for (b, size) in self.branches.clone().iter().zip(sizes) {
            let ok = Command::new("mount")
                .args(["-t", "tmpfs", "-o", &format!("size={size}"), "raif-test"])
                .arg(b)
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                eprintln!("SKIPPED: cannot mount a tmpfs at {}", b.display());
                return false;
            }
            self.mounts.push(b.clone());
        }
        true
    }

    /// Makes every branch an fsprof-fuse mount (of `root/lowerI`) that takes `delay` to answer
    /// each write, so that a kill of the daemon lands between two writes of one operation (a
    /// row's data and its parity) often; unmounted when the fixture is dropped, after the
    /// daemon. Each is a process of its own: a branch served by this process deadlocked a test
    /// process killed by a signal (its writers waited on the daemon, the daemon on a branch
    /// whose server, this process, was gone while its /dev/fuse stayed open). False (with a
    /// message) where fsprof-fuse is not built.
    pub fn slow_branches(&mut self, delay: std::time::Duration) -> bool {
        let Some(fsprof_fuse) = workspace_bin("fsprof-fuse") else {
            return false;
        };
        let rule = format!("op=write,every=1,delay={}us", delay.as_micros());
        for (i, b) in self.branches.clone().iter().enumerate() {
            let lower = self.root.join(format!("lower{i}"));
            std::fs::create_dir_all(&lower).unwrap();
            let mut cmd = Command::new(&fsprof_fuse);
            // Every write reaches the lower file when asked (no page cache kept across
            // opens), as on a local file system.
            cmd.arg("-f")
                .arg(&lower)
                .arg(b)
                .args(["--no-keep-cache", "--inject", &rule])
                .env("RUST_LOG", "warn");
            let log = self.root.join(format!("slow{i}.log"));
            self.branch_daemons.push(Daemon::start(cmd, b, &log));
        }
        true
    }

    /// Mounts the file system image `image` (ext4 or the like) at branch `i` through a loop
    /// device, unmounted when the fixture is dropped. False (with a message) where it cannot.
    pub fn loop_branch(&mut self, i: usize, image: &Path) -> bool {
        let b = self.branches[i].clone();
        let ok = Command::new("mount")
            .args(["-o", "loop"])
            .arg(image)
            .arg(&b)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("SKIPPED: cannot mount {} on a loop device", image.display());
            return false;
        }
        self.mounts.push(b);
        true
    }

    /// New branches and a daemon started with `args`.
    pub fn mounted(t: Transport, name: &str, n: usize, args: &[&str]) -> Option<Fixture> {
        let mut f = Fixture::new(t, name, n)?;
        f.mount(args);
        Some(f)
    }

    /// The `--branches` value.
    pub fn branch_list(&self) -> String {
        let v: Vec<String> = self
            .branches
            .iter()
            .map(|b| b.display().to_string())
            .collect();
        v.join(",")
    }

    /// Starts `raif -f --branches ... MNT --no-keep-cache args...` over the fixture's transport and waits until the mount is
    /// live (tests read through the daemon, not a page cache kept across opens).
    pub fn mount(&mut self, args: &[&str]) {
        self.mount_with(&[], args)
    }

    /// [`Fixture::mount`] under a wrapper command (e.g. `prlimit --nofile=64:64`).
    pub fn mount_with(&mut self, wrapper: &[&str], args: &[&str]) {
        assert!(self.daemon.is_none(), "already mounted");
        let mut cmd = wrapped(wrapper, &bin());
        cmd.arg("-f")
            .arg("--branches")
            .arg(self.branch_list())
            .arg(&self.mnt)
            .arg("--no-keep-cache")
            .args(transport_args(self.transport))
            .args(args);
        cmd.env("RUST_LOG", "warn");
        self.daemon = Some(Daemon::start(cmd, &self.mnt, &self.log));
    }

    /// Unmounts and waits for the daemon; returns its exit code.
    pub fn unmount(&mut self) -> Option<i32> {
        match self.daemon.take() {
            Some(mut d) => {
                let code = d.stop();
                if code != Some(0) {
                    // Shown with the test's output if it fails on the code.
                    eprintln!("daemon exited {code:?}; its log:\n{}", self.log_text());
                }
                code
            }
            None => {
                unmount_path(&self.mnt);
                None
            }
        }
    }

    /// A process ready to kill the daemon with SIGKILL (a crash: nothing is written at
    /// unmount) when [`Fixture::kill`] fires it. Start it before opening files through the
    /// mount: a process started later inherits their descriptors for a moment and closes them
    /// (close-on-exec), which the daemon sees as a close (FLUSH).
    pub fn arm_kill(&self) -> Child {
        let pid = self.daemon.as_ref().expect("mounted").pid();
        Command::new("sh")
            .arg("-c")
            .arg(format!("read _ && kill -9 {pid}"))
            .stdin(Stdio::piped())
            .spawn()
            .expect("sh")
    }

    /// Kills the daemon with SIGKILL now (a crash: nothing is written at unmount), waits for
    /// it to die and removes the dead mount.
    pub fn kill_now(&mut self) {
        let mut d = self.daemon.take().expect("mounted");
        // SAFETY: a plain signal to a child process of this test.
        assert_eq!(unsafe { libc::kill(d.pid() as i32, libc::SIGKILL) }, 0);
        d.stop();
        if fsprof_fuse::daemon::mount::is_mount_point(&self.mnt) {
            let _ = fsprof_fuse::sys::umount(&self.mnt, true);
        }
    }

    /// Fires `armed` (see [`Fixture::arm_kill`]), waits for the daemon to die and removes the
    /// dead mount.
    pub fn kill(&mut self, mut armed: Child) {
        armed
            .stdin
            .take()
            .expect("piped")
            .write_all(b"go\n")
            .expect("fire");
        assert!(armed.wait().expect("kill").success());
        let mut d = self.daemon.take().expect("mounted");
        d.stop();
        if fsprof_fuse::daemon::mount::is_mount_point(&self.mnt) {
            let _ = fsprof_fuse::sys::umount(&self.mnt, true);
        }
    }

    /// `MNT/rel`.
    pub fn m(&self, rel: &str) -> PathBuf {
        self.mnt.join(rel)
    }

    /// Branch `i`'s `rel`.
    /// Waits until every branch's intent log is empty (the mount clears them every two
    /// seconds once the writes they name are on stable storage); panics after a minute.
    pub fn intent_logs_cleared(&self) {
        for _ in 0..6000 {
            let busy = (0..self.branches.len()).any(|b| {
                [".raif-intent", ".raif-intent.1"]
                    .iter()
                    .any(|log| std::fs::metadata(self.b(b, log)).is_ok_and(|m| m.len() > 0))
            });
            if !busy {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        panic!("the intent logs never cleared while mounted");
    }

    pub fn b(&self, i: usize, rel: &str) -> PathBuf {
        self.branches[i].join(rel)
    }

    /// What the daemon logged.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The daemon's pid.
    pub fn pid(&self) -> u32 {
        self.daemon.as_ref().expect("mounted").pid()
    }

    /// `MNT/.raif` (reading it checks the branches first).
    pub fn status(&self) -> String {
        std::fs::read_to_string(self.m(".raif")).expect("read .raif")
    }

    /// The state word of branch `i` in `.raif` (`online`, `failed`, `stale`).
    pub fn state(&self, i: usize) -> String {
        let s = self.status();
        let prefix = format!("branch {i} ");
        s.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|r| r.split(' ').next())
            .unwrap_or("?")
            .to_string()
    }

    /// The mount's profile.
    pub fn profile(&self) -> Profile {
        test_support::read_profile(&self.mnt)
    }

    /// The mount's profile once `settled` holds for it (see `test_support::profile_when`).
    pub fn profile_when(&self, settled: impl Fn(&Profile) -> bool) -> Profile {
        test_support::profile_when(&self.mnt, settled)
    }

    /// Resets the profile.
    pub fn reset(&self) {
        std::fs::write(self.m(".fsprof"), b"reset\n").expect("reset");
    }

    /// Runs `raif ARGS` (an admin command).
    pub fn raif(&self, args: &[&str]) -> Output {
        let o = Command::new(bin()).args(args).output().expect("run raif");
        Output {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }

    /// `raif scrub --branches ...` (with `--repair` if asked).
    pub fn scrub(&self, repair: bool) -> Output {
        let list = self.branch_list();
        let mut args = vec!["scrub", "--branches", &list];
        if repair {
            args.push("--repair");
        }
        self.raif(&args)
    }

    /// Asserts that `raif scrub` (without `--repair`) exits with 0 and finds no mismatch.
    pub fn scrub_is_clean(&self) {
        let out = self.scrub(false);
        assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
        assert!(out.stdout.contains(" 0 mismatches"), "{}", out.stdout);
    }

    /// `raif rebuild --branches ... --replace I DIR`.
    pub fn rebuild(&self, i: usize, dir: &Path) -> Output {
        let list = self.branch_list();
        let idx = i.to_string();
        let d = dir.display().to_string();
        self.raif(&["rebuild", "--branches", &list, "--replace", &idx, &d])
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        drop(self.daemon.take());
        if fsprof_fuse::daemon::mount::is_mount_point(&self.mnt) {
            unmount_path(&self.mnt);
        }
        self.branch_daemons.clear();
        for m in self.mounts.drain(..).rev() {
            if fsprof_fuse::sys::umount(&m, false).is_err() {
                let _ = fsprof_fuse::sys::umount(&m, true);
            }
        }
        let busy = fsprof_fuse::daemon::mount::is_mount_point(&self.mnt)
            || self
                .branches
                .iter()
                .any(|b| fsprof_fuse::daemon::mount::is_mount_point(b));
        if let Some(dir) = self.dir.take() {
            if busy {
                // Never remove files through a mount that is still there.
                let _ = dir.keep();
            }
        }
    }
}

/// A reproducible pseudo-random generator (xorshift64*).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// FNV-1a over a file's bytes (a content hash for comparisons).
pub fn hash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Bytes available to unprivileged users on the file system holding `p` (`statvfs`).
pub fn statvfs_avail(p: &Path) -> u64 {
    let d = fsprof_fuse::sys::open_path(p, libc::O_PATH | libc::O_DIRECTORY).unwrap();
    let s = fsprof_fuse::sys::fstatvfs(std::os::fd::AsFd::as_fd(&d)).unwrap();
    s.f_bavail * s.f_frsize
}

/// Sets extended attribute `name` of `p` (not following a final symlink's target).
pub fn xattr_set_result(p: &Path, name: &str, v: &[u8]) -> std::io::Result<()> {
    use std::os::fd::AsFd;
    let dir = fsprof_fuse::sys::open_path(p.parent().unwrap(), libc::O_PATH).unwrap();
    let o = fsprof_fuse::sys::openat(
        dir.as_fd(),
        p.file_name().unwrap(),
        libc::O_PATH | libc::O_NOFOLLOW,
        0,
    )?;
    fsprof_fuse::sys::setxattr_fd(o.as_fd(), name.as_ref(), v, 0)
}

/// Sets extended attribute `name` of `p`; panics on failure.
pub fn xattr_set(p: &Path, name: &str, v: &[u8]) {
    xattr_set_result(p, name, v).unwrap_or_else(|e| panic!("setxattr {}: {e}", p.display()))
}

/// Extended attribute `name` of `p`, `None` if unset (or unreadable).
pub fn xattr_get(p: &Path, name: &str) -> Option<Vec<u8>> {
    use std::os::fd::AsFd;
    let dir = fsprof_fuse::sys::open_path(p.parent().unwrap(), libc::O_PATH).unwrap();
    let mut buf = vec![0u8; 64 << 10];
    let n =
        fsprof_fuse::sys::getxattr_at(dir.as_fd(), p.file_name().unwrap(), name.as_ref(), &mut buf)
            .ok()?;
    buf.truncate(n);
    Some(buf)
}

/// Runs a command; panics with its output unless it succeeds; returns its stdout.
pub fn run(prog: &str, args: &[&str]) -> String {
    let o = Command::new(prog)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{prog}: {e}"));
    assert!(
        o.status.success(),
        "{prog} {args:?}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Paths made immutable (`chattr +i`, ext4 as root) so that a branch refuses changes to them;
/// made mutable again when dropped, on success, failure and panic.
pub struct Immutable(Vec<PathBuf>);

impl Immutable {
    pub fn new(paths: &[PathBuf]) -> Immutable {
        let g = Immutable(paths.to_vec());
        for p in paths {
            run("chattr", &["+i", &p.display().to_string()]);
        }
        g
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = Command::new("chattr").arg("-i").arg(p).status();
        }
    }
}

/// A directory served by an `fsprof-fuse` daemon (a branch that can be made to fail for real:
/// killing the daemon makes every access answer `ENOTCONN`); lazily unmounted when dropped.
pub struct LowerMount {
    pub mnt: PathBuf,
    daemon: Option<Daemon>,
}

impl LowerMount {
    /// Serves `lower` at `mnt` with the workspace's `fsprof-fuse`; `None` where it is not built.
    pub fn new(lower: &Path, mnt: &Path, log: &Path) -> Option<LowerMount> {
        let exe = workspace_bin("fsprof-fuse")?;
        let mut cmd = Command::new(exe);
        cmd.arg("-f").arg(lower).arg(mnt);
        Some(LowerMount {
            mnt: mnt.to_path_buf(),
            daemon: Some(Daemon::start(cmd, mnt, log)),
        })
    }

    /// Kills the daemon (SIGKILL): the mount stays, and answers `ENOTCONN`.
    pub fn kill(&self) {
        let pid = self.daemon.as_ref().expect("running").pid();
        let st = Command::new("kill")
            .arg("-9")
            .arg(pid.to_string())
            .status()
            .expect("kill");
        assert!(st.success());
    }
}

impl Drop for LowerMount {
    fn drop(&mut self) {
        let _ = fsprof_fuse::sys::umount(&self.mnt, true);
        drop(self.daemon.take());
    }
}

/// Writes a policy file in the fixture's root and returns its path: files named `r0-*`,
/// `r1-*` and `r4-*` get RAIF0, RAIF1 and RAIF4; others the `[default]` level if given, else
/// the command line's `--level`.
pub fn level_policy(f: &Fixture, default: Option<u32>) -> String {
    let mut text = default.map_or(String::new(), |l| format!("[default]\nlevel = {l}\n\n"));
    for (glob, level) in [("r0-*", 0), ("r1-*", 1), ("r4-*", 4)] {
        text += &format!("[[rule]]\nglob = \"{glob}\"\nlevel = {level}\n\n");
    }
    policy_file(f, &text)
}

/// Writes `text` as the policy file `policy.toml` in the fixture's root; returns its path.
pub fn policy_file(f: &Fixture, text: &str) -> String {
    let p = f.root.join("policy.toml");
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

/// Flips the byte at `at` of `p` and puts its modification time back (as bit rot would).
pub fn flip_keeping_time(p: &Path, at: u64) {
    use std::os::unix::fs::FileExt;
    let mtime = std::fs::metadata(p).unwrap().modified().unwrap();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(p)
        .unwrap();
    let mut b = [0u8; 1];
    file.read_at(&mut b, at).unwrap();
    file.write_at(&[b[0] ^ 0x5a], at).unwrap();
    file.set_modified(mtime).unwrap();
}
