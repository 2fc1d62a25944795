//! The few raw system calls std does not expose, each in one small safe wrapper.

use std::fs::File;
use std::io;
use std::os::fd::IntoRawFd;
use std::sync::atomic::{AtomicBool, Ordering};

/// `close(2)` that reports its error (dropping a [`File`] ignores it; a network or FUSE file
/// system may only report a failed write at close).
pub fn close(file: File) -> io::Result<()> {
    let fd = file.into_raw_fd();
    // SAFETY: `fd` was just taken out of a `File`, so it is open and owned by nobody else; it
    // is closed exactly once, here.
    let r = unsafe { libc::close(fd) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_sig: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Catches SIGINT and SIGTERM: instead of dying with mounts left behind, the process notes the
/// signal ([`interrupted`]) and the running code stops at its next check and cleans up.
pub fn catch_interrupts() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed `sigaction` is a valid value (empty mask, no flags); the handler
        // only stores into an atomic, which is async-signal-safe; `sigaction` is given valid
        // pointers for the duration of the call.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// Whether SIGINT or SIGTERM arrived since [`catch_interrupts`].
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Clock ticks per second for `/proc/PID/stat` CPU times.
pub fn clock_ticks_per_sec() -> u64 {
    // SAFETY: `sysconf` only reads a configuration value.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as u64 } else { 100 }
}

/// The effective user id.
pub fn euid() -> u32 {
    // SAFETY: `geteuid` cannot fail and has no side effects.
    unsafe { libc::geteuid() }
}

/// `fstat(2)` of an open file, returning its `st_blksize` (stdio sizes its buffer from it; std's
/// `metadata()` would use `statx` instead, a different call than glibc's).
pub fn fstat_blksize(file: &File) -> io::Result<i64> {
    use std::os::fd::AsRawFd;
    // SAFETY: a zeroed `stat` is a valid value to be overwritten; the descriptor is open for
    // the duration of the call (borrowed from `file`); `fstat` writes only into `st`.
    let (r, st) = unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        let r = libc::fstat(file.as_raw_fd(), &mut st);
        (r, st)
    };
    if r == 0 {
        // `blksize_t` is i64 on x86_64 but i32 on some targets.
        #[allow(clippy::unnecessary_cast)]
        Ok(st.st_blksize as i64)
    } else {
        Err(io::Error::last_os_error())
    }
}
