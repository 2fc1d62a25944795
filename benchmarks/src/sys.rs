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

/// Restricts the calling thread, and every thread and process it creates afterwards, to CPU
/// `cpu` (`sched_setaffinity(2)`).
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: a zeroed `cpu_set_t` is an empty set; CPU_SET writes inside it (cpu is below
    // CPU_SETSIZE); sched_setaffinity reads `size_of::<cpu_set_t>()` bytes from a valid pointer.
    let r = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CPUs this thread may run on, as `/proc` lists them.
    fn allowed(status: &str) -> String {
        status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .expect("Cpus_allowed_list in status")
            .trim()
            .to_string()
    }

    #[test]
    fn pinning_holds_for_the_thread_and_its_children() {
        // The first CPU this process may use (a cpuset may leave out CPU 0).
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let first: usize = allowed(&status)
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap();
        std::thread::spawn(move || {
            pin_to_cpu(first).unwrap();
            let own = std::fs::read_to_string("/proc/thread-self/status").unwrap();
            assert_eq!(allowed(&own), first.to_string());
            let child = std::process::Command::new("cat")
                .arg("/proc/self/status")
                .output()
                .unwrap();
            assert_eq!(
                allowed(&String::from_utf8_lossy(&child.stdout)),
                first.to_string()
            );
        })
        .join()
        .unwrap();
        let e = pin_to_cpu(1 << 20).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
    }
}
