//! The few system calls `fsprof profile` needs beyond std: the signal mask a workload is
//! started with, its name and directory before exec, the reset of the profile just before
//! exec, and passing a signal on to it. Each unsafe block is a plain libc call on
//! values owned here.

use std::io;
use std::mem::MaybeUninit;
use std::os::unix::process::CommandExt as _;
use std::process::Command;

/// A thread's signal mask as it was before [`block_termination_signals`].
#[derive(Clone, Copy)]
pub struct SignalMask(libc::sigset_t);

/// `SIGINT`, `SIGTERM` and `SIGHUP`: the signals `fsprof profile` waits for in one thread.
fn termination_set() -> libc::sigset_t {
    let mut set = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigemptyset initializes the set; sigaddset takes valid signal numbers.
    unsafe {
        libc::sigemptyset(set.as_mut_ptr());
        libc::sigaddset(set.as_mut_ptr(), libc::SIGINT);
        libc::sigaddset(set.as_mut_ptr(), libc::SIGTERM);
        libc::sigaddset(set.as_mut_ptr(), libc::SIGHUP);
        set.assume_init()
    }
}

/// Blocks `SIGINT`, `SIGTERM` and `SIGHUP` in the calling thread (threads started later
/// inherit the mask, so one thread can wait for them) and returns the mask before, for the
/// workload ([`restore_on_exec`]).
pub fn block_termination_signals() -> io::Result<SignalMask> {
    let set = termination_set();
    let mut old = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: valid set and out-pointer; pthread_sigmask fills `old` on success.
    let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, old.as_mut_ptr()) };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    // SAFETY: initialized by the successful call above.
    Ok(SignalMask(unsafe { old.assume_init() }))
}

/// Makes `cmd`'s process start with `mask` as its signal mask, as it would have without fsprof
/// (a blocked mask survives exec: the workload would ignore Ctrl-C). Dispositions need nothing:
/// fsprof changes none (it blocks and waits), so the workload inherits the ones fsprof was
/// started with, an ignored `SIGINT` of a background job included.
pub fn restore_on_exec(cmd: &mut Command, mask: SignalMask) {
    let set = mask.0;
    // SAFETY: the closure runs in the child between fork and exec, where only async-signal-safe
    // calls are allowed: it makes one, pthread_sigmask (sigprocmask), on a copied set.
    unsafe {
        cmd.pre_exec(move || {
            let r = libc::pthread_sigmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
            if r == 0 {
                Ok(())
            } else {
                Err(io::Error::from_raw_os_error(r))
            }
        });
    }
}

/// Makes `cmd`'s process take the command name its program will have after `exec` (the
/// file name, cut to 15 bytes, as the kernel sets it) and then enter `dir`, in that order, so
/// that the requests of its `chdir` into a profiled mount are counted for the program and not
/// for `fsprof` (a child is named after its parent until it execs). Replaces
/// `Command::current_dir`, which changes directory before any `pre_exec` step runs.
pub fn named_in_dir(
    cmd: &mut Command,
    program: &std::ffi::OsStr,
    dir: &std::path::Path,
) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt as _;
    let base = std::path::Path::new(program)
        .file_name()
        .unwrap_or(program)
        .as_bytes();
    let name = std::ffi::CString::new(&base[..base.len().min(15)])
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let dir = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: the closure runs in the child between fork and exec, where only
    // async-signal-safe calls are allowed: it makes two, prctl(PR_SET_NAME) and chdir, on
    // strings made before the fork.
    unsafe {
        cmd.pre_exec(move || {
            libc::prctl(libc::PR_SET_NAME, name.as_ptr());
            if libc::chdir(dir.as_ptr()) == 0 {
                Ok(())
            } else {
                Err(io::Error::last_os_error())
            }
        });
    }
    Ok(())
}

/// Makes `cmd`'s process reset the profile of the mount whose profile file is `control` (an
/// open with `O_TRUNC`) as its last step before `exec`: what was counted until then (the
/// mount's own checks, the `chdir` into it, this very open) is fsprof's, not the program's.
/// Added after [`named_in_dir`], so that it runs after the `chdir`. A failed open leaves the
/// profile as it is.
pub fn reset_on_exec(cmd: &mut Command, control: &std::path::Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt as _;
    let path = std::ffi::CString::new(control.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: the closure runs in the child between fork and exec, where only
    // async-signal-safe calls are allowed: it makes two, open and close, on a string made
    // before the fork.
    unsafe {
        cmd.pre_exec(move || {
            let fd = libc::open(
                path.as_ptr(),
                libc::O_WRONLY | libc::O_TRUNC | libc::O_CLOEXEC,
            );
            if fd >= 0 {
                libc::close(fd);
            }
            Ok(())
        });
    }
    Ok(())
}

/// Waits for one of the signals blocked by [`block_termination_signals`]; returns its number.
pub fn wait_for_termination() -> i32 {
    let set = termination_set();
    let mut sig = 0;
    // SAFETY: valid set and out-pointer; the signals are blocked so sigwait receives them.
    unsafe { libc::sigwait(&set, &mut sig) };
    sig
}

/// Sends `sig` to process `pid` (a workload fsprof started); errors are ignored (it may have
/// ended already).
pub fn kill(pid: u32, sig: i32) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    // SAFETY: kill with a positive pid (never a group) and a valid signal number.
    unsafe { libc::kill(pid, sig) };
}
