//! `fcntl` (every command: locks, descriptor duplication and flags) and `flock`.

use std::ffi::c_int;

use super::real;
use crate::abi::{id, is_lock_cmd};
use crate::fds;
use crate::record::{ret, timed_fd};

type FcntlFn = unsafe extern "C" fn(c_int, c_int, ...) -> c_int;
type FlockFn = unsafe extern "C" fn(c_int, c_int) -> c_int;

/// `F_SETSIG` (Linux), missing from the libc crate.
const F_SETSIG: c_int = 10;

/// Commands whose third argument is an `int` (the others take none or a pointer).
fn takes_int(cmd: c_int) -> bool {
    matches!(
        cmd,
        libc::F_DUPFD
            | libc::F_DUPFD_CLOEXEC
            | libc::F_SETFD
            | libc::F_SETFL
            | libc::F_SETOWN
            | F_SETSIG
            | libc::F_SETLEASE
            | libc::F_NOTIFY
            | libc::F_SETPIPE_SZ
            | libc::F_ADD_SEALS
    )
}

/// # Safety
/// As `fcntl(2)`: `arg` is what the command requires (an `int`, a pointer, or nothing).
unsafe fn fcntl_as(real: FcntlFn, fd: c_int, cmd: c_int, arg: usize) -> c_int {
    // The lock request as the caller made it (F_GETLK overwrites it).
    let lock = if is_lock_cmd(cmd as i64) && arg != 0 {
        // SAFETY: lock commands take a valid `struct flock` pointer.
        let l = unsafe { &*(arg as *const libc::flock) };
        Some([l.l_type as i64, l.l_whence as i64, l.l_start, l.l_len])
    } else {
        None
    };
    let r = timed_fd(
        id::FCNTL,
        fd,
        // SAFETY: the caller's arguments, passed on (the optional one as the same register
        // value, which the command interprets).
        || unsafe { real(fd, cmd, arg) },
        |r, e| ret(r as i64, e),
        |enc, _| {
            enc.fd(fd);
            enc.int(cmd as i64);
            match lock {
                Some(l) => l.iter().for_each(|&v| enc.int(v)),
                None if is_lock_cmd(cmd as i64) => (0..4).for_each(|_| enc.int(0)),
                None => enc.int(if takes_int(cmd) {
                    arg as c_int as i64
                } else {
                    0
                }),
            }
        },
    );
    if cmd == libc::F_DUPFD || cmd == libc::F_DUPFD_CLOEXEC {
        fds::forget_returned(r);
    }
    r
}

/// # Safety
/// As `fcntl(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fcntl(fd: c_int, cmd: c_int, arg: usize) -> c_int {
    let real = real!(c"fcntl", FcntlFn, -1);
    // SAFETY: forwarded contract.
    unsafe { fcntl_as(real, fd, cmd, arg) }
}

/// # Safety
/// As `fcntl(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fcntl64(fd: c_int, cmd: c_int, arg: usize) -> c_int {
    let real = real!(c"fcntl64", FcntlFn, -1);
    // SAFETY: forwarded contract.
    unsafe { fcntl_as(real, fd, cmd, arg) }
}

/// # Safety
/// As `flock(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn flock(fd: c_int, op: c_int) -> c_int {
    let real = real!(c"flock", FlockFn, -1);
    timed_fd(
        id::FLOCK,
        fd,
        // SAFETY: the caller's arguments, passed on.
        || unsafe { real(fd, op) },
        |r, e| ret(r as i64, e),
        |enc, _| {
            enc.fd(fd);
            enc.int(op as i64);
        },
    )
}
