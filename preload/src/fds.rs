//! What each descriptor is ([`crate::abi::KINDS`]: a file, a pipe, a socket, a character
//! device, or something without a file type), so that a call on it is counted under its kind:
//! reads of a pipe by a shell wrapper are not file-system time.
//!
//! A process-wide table remembers the kind of descriptors below [`TABLE`], found with one raw
//! `fstat` at a descriptor's first timed call after it was made, and forgotten when a hooked
//! call closes or replaces it (`close`, `dup2`, `dup3`, `fclose`, `closedir`) or returns it new
//! (`open`, `openat`, `creat`, `dup`, `fcntl(F_DUPFD)`, `fopen`, `fdopen`, `opendir`...). So a
//! call costs one table load, and a system call only once per descriptor. A descriptor above
//! the table is looked up at every call. Fork children inherit the table with the descriptors;
//! an exec'd image starts with an empty one.
//!
//! What the table cannot see: a descriptor closed by a path that is not hooked (glibc's own
//! `close` inside `popen`, `close_range`) whose number a call that is not hooked (`pipe`,
//! `socket`, `accept`) then reuses keeps its old kind until a hooked call closes it.

use std::sync::atomic::{AtomicU8, Ordering};

use crate::abi;
use crate::sys;

/// Descriptors whose kind is remembered.
const TABLE: usize = 4096;

/// Per descriptor: 0 not known, else the kind + 1.
static KNOWN: [AtomicU8; TABLE] = [const { AtomicU8::new(0) }; TABLE];

/// The kind of `fd` (an index into [`abi::KINDS`]; 0, a file, when it cannot be told).
#[inline(always)]
pub fn kind(fd: libc::c_int) -> u8 {
    let Ok(i) = usize::try_from(fd) else {
        return 0;
    };
    match KNOWN.get(i).map(|k| k.load(Ordering::Relaxed)) {
        Some(0) => {
            let k = look_up(fd);
            KNOWN[i].store(k + 1, Ordering::Relaxed);
            k
        }
        Some(k) => k - 1,
        None => look_up(fd),
    }
}

#[cold]
fn look_up(fd: libc::c_int) -> u8 {
    sys::file_mode(fd).map_or(0, abi::kind_of_mode)
}

/// Forgets what `fd` was: it was closed, replaced or made anew.
#[inline(always)]
pub fn forget(fd: libc::c_int) {
    if let Some(k) = usize::try_from(fd).ok().and_then(|i| KNOWN.get(i)) {
        k.store(0, Ordering::Relaxed);
    }
}

/// [`forget`] for the descriptor a call returned, if it returned one (`r >= 0`).
#[inline(always)]
pub fn forget_returned(r: libc::c_int) {
    if r >= 0 {
        forget(r);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipes_and_files_are_told_apart_and_forgotten_when_replaced() {
        let mut p = [0; 2];
        // SAFETY: a valid array of two descriptors.
        assert_eq!(unsafe { libc::pipe(p.as_mut_ptr()) }, 0);
        assert_eq!(abi::KINDS[kind(p[0]) as usize], "pipe");
        let f = std::fs::File::open("/proc/self/status").unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&f);
        assert_eq!(abi::KINDS[kind(fd) as usize], "file");
        // The pipe's number now names the file: once forgotten, it is looked up again.
        // A raw dup3: the hooked dup2 would forget it itself.
        // SAFETY: both descriptors are this test's.
        assert!(unsafe { libc::syscall(libc::SYS_dup3, fd, p[0], 0) } >= 0);
        assert_eq!(
            abi::KINDS[kind(p[0]) as usize],
            "pipe",
            "remembered until forgotten"
        );
        forget(p[0]);
        assert_eq!(abi::KINDS[kind(p[0]) as usize], "file");
        let null = std::fs::File::open("/dev/null").unwrap();
        assert_eq!(
            abi::KINDS[kind(std::os::fd::AsRawFd::as_raw_fd(&null)) as usize],
            "chr"
        );
        assert_eq!(kind(-1), 0);
        // SAFETY: closing this test's descriptors.
        unsafe {
            libc::close(p[0]);
            libc::close(p[1]);
        }
    }
}
