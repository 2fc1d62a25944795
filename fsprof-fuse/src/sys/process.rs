//! The daemon process: limits, unmounting, forking into the background, signals.

#![allow(unsafe_code)]

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;

use super::{PATH_MAX, cvt, with_cstr};

/// Raises the soft open-file limit to the hard limit; returns the new soft limit.
pub fn raise_nofile_limit() -> io::Result<u64> {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid out-pointer.
    cvt(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) })?;
    if rl.rlim_cur < rl.rlim_max {
        rl.rlim_cur = rl.rlim_max;
        // SAFETY: valid pointer to an rlimit.
        cvt(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &rl) })?;
    }
    Ok(rl.rlim_cur)
}

/// `umount2(2)`.
pub fn umount(path: &std::path::Path, detach: bool) -> io::Result<()> {
    with_cstr(path.as_os_str().as_bytes(), PATH_MAX, |c| {
        let flags = if detach { libc::MNT_DETACH } else { 0 };
        // SAFETY: valid C string.
        cvt(unsafe { libc::umount2(c.as_ptr(), flags) }).map(drop)
    })
}

/// `umount2(2)` with `MNT_FORCE`: on a FUSE mount this aborts the connection first (every
/// request waiting on the daemon fails with `ENOTCONN`), then unmounts unless busy.
pub fn force_unmount(path: &std::path::Path) -> io::Result<()> {
    with_cstr(path.as_os_str().as_bytes(), PATH_MAX, |c| {
        // SAFETY: valid C string.
        cvt(unsafe { libc::umount2(c.as_ptr(), libc::MNT_FORCE) }).map(drop)
    })
}

/// Pins the calling thread to CPU `cpu` (`sched_setaffinity`). A CPU that is possible but
/// offline cannot be pinned to (`EINVAL`).
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let mut set = MaybeUninit::<libc::cpu_set_t>::zeroed();
    // SAFETY: an all-zero cpu_set_t is the empty set; CPU_SET writes inside it (cpu is below
    // CPU_SETSIZE); sched_setaffinity reads it.
    unsafe {
        libc::CPU_SET(cpu, &mut *set.as_mut_ptr());
        cvt(libc::sched_setaffinity(
            0,
            size_of::<libc::cpu_set_t>(),
            set.as_ptr(),
        ))
        .map(drop)
    }
}

/// Outcome of [`fork`].
pub enum Fork {
    /// In the parent, with the child's pid.
    Parent(i32),
    /// In the child.
    Child,
}

/// `fork(2)`, refused (`EBUSY`) unless the calling thread is the process's only one: that is
/// what makes the child's copy of the address space consistent (no lock held by a thread that
/// does not exist in the child), and it is checked, not assumed. With one thread, no other
/// thread can start between the check and the fork.
pub fn fork() -> io::Result<Fork> {
    let threads = std::fs::read_dir("/proc/self/task")?.count();
    if threads != 1 {
        return Err(io::Error::new(
            io::ErrorKind::ResourceBusy,
            format!("cannot fork with {threads} threads running"),
        ));
    }
    // SAFETY: the process has this one thread (checked above).
    let pid = cvt(unsafe { libc::fork() })?;
    Ok(if pid == 0 {
        Fork::Child
    } else {
        Fork::Parent(pid)
    })
}

/// `setsid(2)`: detaches the daemon from the terminal's session.
pub fn setsid() -> io::Result<()> {
    // SAFETY: no arguments.
    cvt(unsafe { libc::setsid() }).map(drop)
}

/// `pipe2(2)` with `O_CLOEXEC`: (read end, write end).
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: valid two-element out-array.
    cvt(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// `dup2(2)`: makes `target` (e.g. 0, 1, 2) refer to what `fd` refers to.
pub fn dup2(fd: BorrowedFd, target: RawFd) -> io::Result<()> {
    // SAFETY: valid descriptor; target is replaced atomically.
    cvt(unsafe { libc::dup2(fd.as_raw_fd(), target) }).map(drop)
}

/// Blocks `SIGINT`, `SIGTERM` and `SIGHUP` in the calling thread (threads started later inherit
/// the mask), so one thread can wait for them with [`wait_for_termination`].
pub fn block_termination_signals() -> io::Result<()> {
    let set = termination_set();
    // SAFETY: valid signal set; null old-set pointer is allowed.
    let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if r != 0 {
        Err(io::Error::from_raw_os_error(r))
    } else {
        Ok(())
    }
}

/// Runs `f` with the termination signals blocked in the calling thread, then puts its mask
/// back: the threads `f` starts inherit the block, so a helper thread started before a program
/// blocks them for good (`fsprof profile` starts its mount before it waits for Ctrl-C) never
/// takes a signal meant for the program's own handling.
pub fn with_termination_blocked<R>(f: impl FnOnce() -> R) -> R {
    let set = termination_set();
    let mut old = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: valid signal set and out-pointer; pthread_sigmask fills `old` on success.
    let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, old.as_mut_ptr()) };
    let out = f();
    if r == 0 {
        // SAFETY: `old` was filled by the successful call above.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, old.as_ptr(), std::ptr::null_mut()) };
    }
    out
}

fn termination_set() -> libc::sigset_t {
    let mut set = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigemptyset initializes the set; sigaddset with valid signal numbers.
    unsafe {
        libc::sigemptyset(set.as_mut_ptr());
        libc::sigaddset(set.as_mut_ptr(), libc::SIGINT);
        libc::sigaddset(set.as_mut_ptr(), libc::SIGTERM);
        libc::sigaddset(set.as_mut_ptr(), libc::SIGHUP);
        set.assume_init()
    }
}

/// Waits for one of the signals blocked by [`block_termination_signals`]; returns its number.
pub fn wait_for_termination() -> i32 {
    let set = termination_set();
    let mut sig = 0;
    // SAFETY: valid set and out-pointer; the signals are blocked so sigwait receives them.
    unsafe { libc::sigwait(&set, &mut sig) };
    sig
}

/// Ignores `SIGXFSZ` in this process: a write past its file-size limit (`RLIMIT_FSIZE`, e.g.
/// `ulimit -f` or systemd's `LimitFSIZE`) then fails with `EFBIG` instead of killing it. For a
/// daemon whose writes are made for its callers (they get `EFBIG`); not for a process that
/// starts other programs, which would inherit the disposition.
pub fn ignore_file_size_signal() -> io::Result<()> {
    // SAFETY: installs SIG_IGN for a valid signal number; no handler code of ours runs.
    if unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) } == libc::SIG_ERR {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Sends `sig` to this process.
pub fn raise_signal(sig: i32) {
    // SAFETY: kill on our own pid with a valid signal number.
    unsafe { libc::kill(libc::getpid(), sig) };
}

/// `waitpid(2)` without blocking: `Some(status)` if the child exited.
pub fn try_wait(pid: i32) -> Option<i32> {
    let mut status = 0;
    // SAFETY: valid out-pointer.
    let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    (r == pid).then_some(status)
}

/// A descriptor that becomes readable when thread `tid` ends (`pidfd_open` with
/// `PIDFD_THREAD`, Linux 6.9+; on older kernels, of the process `tid` leads, which fails for
/// another thread). `Ok(None)` for the kernel's own requests (`tid` 0) or when none can be
/// had; `ESRCH` when the thread has ended already.
pub fn thread_fd(tid: u32) -> io::Result<Option<OwnedFd>> {
    if tid == 0 {
        return Ok(None);
    }
    const PIDFD_THREAD: libc::c_int = libc::O_EXCL;
    for flags in [PIDFD_THREAD, 0] {
        // SAFETY: pidfd_open takes no pointers; a non-negative result is a new descriptor.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, tid as libc::pid_t, flags) };
        if fd >= 0 {
            // SAFETY: the descriptor was just opened and is owned by nothing else.
            return Ok(Some(unsafe { OwnedFd::from_raw_fd(fd as i32) }));
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ESRCH) {
            return Err(e);
        }
    }
    Ok(None)
}

/// Whether thread `tid` has a signal pending that it does not block (`/proc/TID/status`:
/// `SigPnd` or `ShdPnd`, less `SigBlk`): a signal the kernel would interrupt a wait with. An
/// ignored signal is never pending (the kernel drops it when sent).
pub fn signal_pending(tid: u32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{tid}/status")) else {
        return false;
    };
    let mask = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .unwrap_or(0)
    };
    (mask("SigPnd:") | mask("ShdPnd:")) & !mask("SigBlk:") != 0
}

/// Whether the thread of `fd` ([`thread_fd`]) has ended.
pub fn thread_ended(fd: BorrowedFd) -> bool {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, no wait.
    unsafe { libc::poll(&mut p, 1, 0) > 0 && p.revents & libc::POLLIN != 0 }
}

/// Gives the heap's free memory back to the system: glibc's `malloc_trim(0)`, which returns
/// the free pages of every arena, in the middle of the heap too (a freed snapshot of a
/// control file would otherwise stay in the process's resident memory).
pub fn trim_heap() {
    #[cfg(target_env = "gnu")]
    // SAFETY: takes no pointer; glibc locks each arena while it trims.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Holds glibc's allocation thresholds at their starting values: an allocation of 128 KiB or
/// more is a mapping of its own, unmapped at its free, and an arena gives back a free top
/// larger than 128 KiB. Left alone, glibc raises both after each large free (up to 32 and
/// 64 MiB); a control file's multi-MiB snapshots then come from the threads' arenas, whose
/// free tops `malloc_trim` does not return, and a daemon that served a few large profiles
/// kept 100 MiB and more that it no longer used. fsprof-fuse's requests allocate no large
/// buffers (each thread reuses its own), so no request pays a mapping.
pub fn hold_heap_thresholds() {
    #[cfg(target_env = "gnu")]
    // SAFETY: takes no pointer; glibc sets two process-wide parameters under its lock.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 << 10);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 128 << 10);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fork_is_refused_while_another_thread_runs() {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || rx.recv());
        let e = match fork() {
            Err(e) => e,
            Ok(Fork::Child) => std::process::exit(3),
            Ok(Fork::Parent(pid)) => panic!("forked child {pid} with two threads running"),
        };
        assert_eq!(e.kind(), io::ErrorKind::ResourceBusy, "{e}");
        drop(tx);
        let _ = other.join();
    }
}
