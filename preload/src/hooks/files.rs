//! Descriptors and data: open, close, dup, read and write in all their forms, lseek, sync,
//! size and space.

use std::ffi::{c_char, c_int, c_uint, c_void};

use libc::{iovec, mode_t, off_t, size_t, ssize_t};

use super::{has_mode, iov_len, real};
use crate::abi::id;
use crate::fds;
use crate::record::{ret, timed, timed_fd};

type OpenFn = unsafe extern "C" fn(*const c_char, c_int, ...) -> c_int;
type Open2Fn = unsafe extern "C" fn(*const c_char, c_int) -> c_int;
type OpenatFn = unsafe extern "C" fn(c_int, *const c_char, c_int, ...) -> c_int;
type Openat2Fn = unsafe extern "C" fn(c_int, *const c_char, c_int) -> c_int;
type CreatFn = unsafe extern "C" fn(*const c_char, mode_t) -> c_int;
type FdFn = unsafe extern "C" fn(c_int) -> c_int;
type Dup2Fn = unsafe extern "C" fn(c_int, c_int) -> c_int;
type Dup3Fn = unsafe extern "C" fn(c_int, c_int, c_int) -> c_int;
type ReadFn = unsafe extern "C" fn(c_int, *mut c_void, size_t) -> ssize_t;
type ReadChkFn = unsafe extern "C" fn(c_int, *mut c_void, size_t, size_t) -> ssize_t;
type PreadFn = unsafe extern "C" fn(c_int, *mut c_void, size_t, off_t) -> ssize_t;
type PreadChkFn = unsafe extern "C" fn(c_int, *mut c_void, size_t, off_t, size_t) -> ssize_t;
type WriteFn = unsafe extern "C" fn(c_int, *const c_void, size_t) -> ssize_t;
type PwriteFn = unsafe extern "C" fn(c_int, *const c_void, size_t, off_t) -> ssize_t;
type VecFn = unsafe extern "C" fn(c_int, *const iovec, c_int) -> ssize_t;
type PvecFn = unsafe extern "C" fn(c_int, *const iovec, c_int, off_t) -> ssize_t;
type Pvec2Fn = unsafe extern "C" fn(c_int, *const iovec, c_int, off_t, c_int) -> ssize_t;
type LseekFn = unsafe extern "C" fn(c_int, off_t, c_int) -> off_t;
type TruncateFn = unsafe extern "C" fn(*const c_char, off_t) -> c_int;
type FtruncateFn = unsafe extern "C" fn(c_int, off_t) -> c_int;
type FallocateFn = unsafe extern "C" fn(c_int, c_int, off_t, off_t) -> c_int;
type PosixFallocateFn = unsafe extern "C" fn(c_int, off_t, off_t) -> c_int;
type CopyRangeFn =
    unsafe extern "C" fn(c_int, *mut off_t, c_int, *mut off_t, size_t, c_uint) -> ssize_t;
type SendfileFn = unsafe extern "C" fn(c_int, c_int, *mut off_t, size_t) -> ssize_t;

/// `open` and its aliases: `SYS_OPEN`.
///
/// # Safety
/// As `open(2)`.
unsafe fn open_as(real: OpenFn, path: *const c_char, flags: c_int, mode: mode_t) -> c_int {
    let m = if has_mode(flags) { mode } else { 0 };
    let r = timed(
        id::OPEN,
        // SAFETY: the caller's arguments, passed on.
        || unsafe { real(path, flags, m as c_uint) },
        |r, e| ret(r as i64, e),
        |enc, _| {
            // SAFETY: `path` is a C string per `open`'s contract.
            unsafe { enc.path(path) };
            enc.flags(flags as u32 as u64);
            enc.mode(m as u64);
        },
    );
    fds::forget_returned(r);
    r
}

/// # Safety
/// As `open(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn open(path: *const c_char, flags: c_int, mode: mode_t) -> c_int {
    let real = real!(c"open", OpenFn, -1);
    // SAFETY: forwarded contract.
    unsafe { open_as(real, path, flags, mode) }
}

/// # Safety
/// As `open(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn open64(path: *const c_char, flags: c_int, mode: mode_t) -> c_int {
    let real = real!(c"open64", OpenFn, -1);
    // SAFETY: forwarded contract.
    unsafe { open_as(real, path, flags, mode) }
}

/// # Safety
/// As `open(2)` without a mode (the fortified entry point).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __open_2(path: *const c_char, flags: c_int) -> c_int {
    let real = real!(c"__open_2", Open2Fn, -1);
    fortified_open(real, path, flags)
}

/// # Safety
/// As `open(2)` without a mode (the fortified entry point).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __open64_2(path: *const c_char, flags: c_int) -> c_int {
    let real = real!(c"__open64_2", Open2Fn, -1);
    fortified_open(real, path, flags)
}

fn fortified_open(real: Open2Fn, path: *const c_char, flags: c_int) -> c_int {
    let r = timed(
        id::OPEN,
        // SAFETY: the caller's arguments, passed on.
        || unsafe { real(path, flags) },
        |r, e| ret(r as i64, e),
        |enc, _| {
            // SAFETY: `path` is a C string per `open`'s contract.
            unsafe { enc.path(path) };
            enc.flags(flags as u32 as u64);
            enc.mode(0);
        },
    );
    fds::forget_returned(r);
    r
}

/// # Safety
/// As `openat(2)`.
unsafe fn openat_as(
    real: OpenatFn,
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mode: mode_t,
) -> c_int {
    let m = if has_mode(flags) { mode } else { 0 };
    let r = timed(
        id::OPENAT,
        // SAFETY: the caller's arguments, passed on.
        || unsafe { real(dirfd, path, flags, m as c_uint) },
        |r, e| ret(r as i64, e),
        |enc, _| {
            enc.fd(dirfd);
            // SAFETY: `path` is a C string per `openat`'s contract.
            unsafe { enc.path(path) };
            enc.flags(flags as u32 as u64);
            enc.mode(m as u64);
        },
    );
    fds::forget_returned(r);
    r
}

/// # Safety
/// As `openat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn openat(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mode: mode_t,
) -> c_int {
    let real = real!(c"openat", OpenatFn, -1);
    // SAFETY: forwarded contract.
    unsafe { openat_as(real, dirfd, path, flags, mode) }
}

/// # Safety
/// As `openat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn openat64(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mode: mode_t,
) -> c_int {
    let real = real!(c"openat64", OpenatFn, -1);
    // SAFETY: forwarded contract.
    unsafe { openat_as(real, dirfd, path, flags, mode) }
}

/// # Safety
/// As `openat(2)` without a mode (the fortified entry point).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __openat_2(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    let real = real!(c"__openat_2", Openat2Fn, -1);
    fortified_openat(real, dirfd, path, flags)
}

/// # Safety
/// As `openat(2)` without a mode (the fortified entry point).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __openat64_2(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    let real = real!(c"__openat64_2", Openat2Fn, -1);
    fortified_openat(real, dirfd, path, flags)
}

fn fortified_openat(real: Openat2Fn, dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    let r = timed(
        id::OPENAT,
        // SAFETY: the caller's arguments, passed on.
        || unsafe { real(dirfd, path, flags) },
        |r, e| ret(r as i64, e),
        |enc, _| {
            enc.fd(dirfd);
            // SAFETY: `path` is a C string per `openat`'s contract.
            unsafe { enc.path(path) };
            enc.flags(flags as u32 as u64);
            enc.mode(0);
        },
    );
    fds::forget_returned(r);
    r
}

fn creat_as(real: CreatFn, path: *const c_char, mode: mode_t) -> c_int {
    let r = timed(
        id::CREAT,
        // SAFETY: the caller's arguments, passed on.
        || unsafe { real(path, mode) },
        |r, e| ret(r as i64, e),
        |enc, _| {
            // SAFETY: `path` is a C string per `creat`'s contract.
            unsafe { enc.path(path) };
            enc.mode(mode as u64);
        },
    );
    fds::forget_returned(r);
    r
}

/// # Safety
/// As `creat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn creat(path: *const c_char, mode: mode_t) -> c_int {
    creat_as(real!(c"creat", CreatFn, -1), path, mode)
}

/// # Safety
/// As `creat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn creat64(path: *const c_char, mode: mode_t) -> c_int {
    creat_as(real!(c"creat64", CreatFn, -1), path, mode)
}

/// A call on one descriptor that returns `int`, counted under the descriptor's kind; `close`
/// forgets the kind, `dup` that of the descriptor it returns.
fn fd_call(call: u8, real: FdFn, fd: c_int) -> c_int {
    let r = timed_fd(
        call,
        fd,
        // SAFETY: the caller's argument, passed on.
        || unsafe { real(fd) },
        |r, e| ret(r as i64, e),
        |enc, _| enc.fd(fd),
    );
    match call {
        // Released even when close fails (Linux).
        id::CLOSE => fds::forget(fd),
        id::DUP => fds::forget_returned(r),
        _ => {}
    }
    r
}

/// # Safety
/// As `close(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    fd_call(id::CLOSE, real!(c"close", FdFn, -1), fd)
}

/// # Safety
/// As `fsync(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fsync(fd: c_int) -> c_int {
    fd_call(id::FSYNC, real!(c"fsync", FdFn, -1), fd)
}

/// # Safety
/// As `fdatasync(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fdatasync(fd: c_int) -> c_int {
    fd_call(id::FDATASYNC, real!(c"fdatasync", FdFn, -1), fd)
}

/// # Safety
/// As `dup(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dup(fd: c_int) -> c_int {
    fd_call(id::DUP, real!(c"dup", FdFn, -1), fd)
}

/// # Safety
/// As `dup2(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    let real = real!(c"dup2", Dup2Fn, -1);
    let r = timed_fd(
        id::DUP2,
        old,
        // SAFETY: the caller's arguments, passed on.
        || unsafe { real(old, new) },
        |r, e| ret(r as i64, e),
        |enc, _| {
            enc.fd(old);
            enc.fd(new);
        },
    );
    fds::forget_returned(r);
    r
}

/// # Safety
/// As `dup3(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    let real = real!(c"dup3", Dup3Fn, -1);
    let r = timed_fd(
        id::DUP3,
        old,
        // SAFETY: the caller's arguments, passed on.
        || unsafe { real(old, new, flags) },
        |r, e| ret(r as i64, e),
        |enc, _| {
            enc.fd(old);
            enc.fd(new);
            enc.flags(flags as u32 as u64);
        },
    );
    fds::forget_returned(r);
    r
}

/// `read`-like: descriptor and size.
fn rw_call(call: u8, fd: c_int, n: size_t, real: impl FnOnce() -> ssize_t) -> ssize_t {
    timed_fd(
        call,
        fd,
        real,
        |r, e| ret(r as i64, e),
        |enc, _| {
            enc.fd(fd);
            enc.size(n as u64);
        },
    )
}

/// `pread`-like: descriptor, size and offset.
fn prw_call(call: u8, fd: c_int, n: size_t, off: off_t, real: impl FnOnce() -> ssize_t) -> ssize_t {
    timed_fd(
        call,
        fd,
        real,
        |r, e| ret(r as i64, e),
        |enc, _| {
            enc.fd(fd);
            enc.size(n as u64);
            enc.off(off);
        },
    )
}

/// # Safety
/// As `read(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t {
    let real = real!(c"read", ReadFn, -1);
    // SAFETY: the caller's arguments, passed on.
    rw_call(id::READ, fd, n, || unsafe { real(fd, buf, n) })
}

/// # Safety
/// As `read(2)`, with the fortified buffer check.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __read_chk(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    len: size_t,
) -> ssize_t {
    let real = real!(c"__read_chk", ReadChkFn, -1);
    // SAFETY: the caller's arguments, passed on.
    rw_call(id::READ, fd, n, || unsafe { real(fd, buf, n, len) })
}

/// # Safety
/// As `write(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t {
    let real = real!(c"write", WriteFn, -1);
    // SAFETY: the caller's arguments, passed on.
    rw_call(id::WRITE, fd, n, || unsafe { real(fd, buf, n) })
}

/// # Safety
/// As `pread(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pread(fd: c_int, buf: *mut c_void, n: size_t, off: off_t) -> ssize_t {
    let real = real!(c"pread", PreadFn, -1);
    // SAFETY: the caller's arguments, passed on.
    prw_call(id::PREAD, fd, n, off, || unsafe { real(fd, buf, n, off) })
}

/// # Safety
/// As `pread(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pread64(fd: c_int, buf: *mut c_void, n: size_t, off: off_t) -> ssize_t {
    let real = real!(c"pread64", PreadFn, -1);
    // SAFETY: the caller's arguments, passed on.
    prw_call(id::PREAD, fd, n, off, || unsafe { real(fd, buf, n, off) })
}

/// # Safety
/// As `pread(2)`, with the fortified buffer check.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __pread_chk(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    off: off_t,
    len: size_t,
) -> ssize_t {
    let real = real!(c"__pread_chk", PreadChkFn, -1);
    // SAFETY: the caller's arguments, passed on.
    prw_call(id::PREAD, fd, n, off, || unsafe {
        real(fd, buf, n, off, len)
    })
}

/// # Safety
/// As `pread(2)`, with the fortified buffer check.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __pread64_chk(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    off: off_t,
    len: size_t,
) -> ssize_t {
    let real = real!(c"__pread64_chk", PreadChkFn, -1);
    // SAFETY: the caller's arguments, passed on.
    prw_call(id::PREAD, fd, n, off, || unsafe {
        real(fd, buf, n, off, len)
    })
}

/// # Safety
/// As `pwrite(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pwrite(fd: c_int, buf: *const c_void, n: size_t, off: off_t) -> ssize_t {
    let real = real!(c"pwrite", PwriteFn, -1);
    // SAFETY: the caller's arguments, passed on.
    prw_call(id::PWRITE, fd, n, off, || unsafe { real(fd, buf, n, off) })
}

/// # Safety
/// As `pwrite(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pwrite64(fd: c_int, buf: *const c_void, n: size_t, off: off_t) -> ssize_t {
    let real = real!(c"pwrite64", PwriteFn, -1);
    // SAFETY: the caller's arguments, passed on.
    prw_call(id::PWRITE, fd, n, off, || unsafe { real(fd, buf, n, off) })
}

/// `readv`/`writev`.
///
/// # Safety
/// As `readv(2)`.
unsafe fn vec_call(call: u8, real: VecFn, fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t {
    timed_fd(
        call,
        fd,
        // SAFETY: the caller's arguments, passed on.
        || unsafe { real(fd, iov, cnt) },
        |r, e| ret(r as i64, e),
        |enc, r| {
            enc.fd(fd);
            // SAFETY: per `readv`'s contract; read only after the kernel accepted it.
            enc.size(unsafe { iov_len(r >= 0, iov, cnt) });
        },
    )
}

/// # Safety
/// As `readv(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn readv(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t {
    let real = real!(c"readv", VecFn, -1);
    // SAFETY: forwarded contract.
    unsafe { vec_call(id::READV, real, fd, iov, cnt) }
}

/// # Safety
/// As `writev(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn writev(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t {
    let real = real!(c"writev", VecFn, -1);
    // SAFETY: forwarded contract.
    unsafe { vec_call(id::WRITEV, real, fd, iov, cnt) }
}

/// `preadv`/`pwritev`.
///
/// # Safety
/// As `preadv(2)`.
unsafe fn pvec_call(
    call: u8,
    real: PvecFn,
    fd: c_int,
    iov: *const iovec,
    cnt: c_int,
    off: off_t,
) -> ssize_t {
    timed_fd(
        call,
        fd,
        // SAFETY: the caller's arguments, passed on.
        || unsafe { real(fd, iov, cnt, off) },
        |r, e| ret(r as i64, e),
        |enc, r| {
            enc.fd(fd);
            // SAFETY: per `preadv`'s contract; read only after the kernel accepted it.
            enc.size(unsafe { iov_len(r >= 0, iov, cnt) });
            enc.off(off);
        },
    )
}

/// # Safety
/// As `preadv(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preadv(fd: c_int, iov: *const iovec, cnt: c_int, off: off_t) -> ssize_t {
    let real = real!(c"preadv", PvecFn, -1);
    // SAFETY: forwarded contract.
    unsafe { pvec_call(id::PREADV, real, fd, iov, cnt, off) }
}

/// # Safety
/// As `preadv(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preadv64(fd: c_int, iov: *const iovec, cnt: c_int, off: off_t) -> ssize_t {
    let real = real!(c"preadv64", PvecFn, -1);
    // SAFETY: forwarded contract.
    unsafe { pvec_call(id::PREADV, real, fd, iov, cnt, off) }
}

/// # Safety
/// As `pwritev(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pwritev(fd: c_int, iov: *const iovec, cnt: c_int, off: off_t) -> ssize_t {
    let real = real!(c"pwritev", PvecFn, -1);
    // SAFETY: forwarded contract.
    unsafe { pvec_call(id::PWRITEV, real, fd, iov, cnt, off) }
}

/// # Safety
/// As `pwritev(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pwritev64(
    fd: c_int,
    iov: *const iovec,
    cnt: c_int,
    off: off_t,
) -> ssize_t {
    let real = real!(c"pwritev64", PvecFn, -1);
    // SAFETY: forwarded contract.
    unsafe { pvec_call(id::PWRITEV, real, fd, iov, cnt, off) }
}

/// `preadv2`/`pwritev2`.
///
/// # Safety
/// As `preadv2(2)`.
unsafe fn pvec2_call(
    call: u8,
    real: Pvec2Fn,
    fd: c_int,
    iov: *const iovec,
    cnt: c_int,
    off: off_t,
    flags: c_int,
) -> ssize_t {
    timed_fd(
        call,
        fd,
        // SAFETY: the caller's arguments, passed on.
        || unsafe { real(fd, iov, cnt, off, flags) },
        |r, e| ret(r as i64, e),
        |enc, r| {
            enc.fd(fd);
            // SAFETY: per `preadv2`'s contract; read only after the kernel accepted it.
            enc.size(unsafe { iov_len(r >= 0, iov, cnt) });
            enc.off(off);
            enc.flags(flags as u32 as u64);
        },
    )
}

/// # Safety
/// As `preadv2(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preadv2(
    fd: c_int,
    iov: *const iovec,
    cnt: c_int,
    off: off_t,
    flags: c_int,
) -> ssize_t {
    let real = real!(c"preadv2", Pvec2Fn, -1);
    // SAFETY: forwarded contract.
    unsafe { pvec2_call(id::PREADV2, real, fd, iov, cnt, off, flags) }
}

/// # Safety
/// As `preadv2(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preadv64v2(
    fd: c_int,
    iov: *const iovec,
    cnt: c_int,
    off: off_t,
    flags: c_int,
) -> ssize_t {
    let real = real!(c"preadv64v2", Pvec2Fn, -1);
    // SAFETY: forwarded contract.
    unsafe { pvec2_call(id::PREADV2, real, fd, iov, cnt, off, flags) }
}

/// # Safety
/// As `pwritev2(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pwritev2(
    fd: c_int,
    iov: *const iovec,
    cnt: c_int,
    off: off_t,
    flags: c_int,
) -> ssize_t {
    let real = real!(c"pwritev2", Pvec2Fn, -1);
    // SAFETY: forwarded contract.
    unsafe { pvec2_call(id::PWRITEV2, real, fd, iov, cnt, off, flags) }
}

/// # Safety
/// As `pwritev2(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pwritev64v2(
    fd: c_int,
    iov: *const iovec,
    cnt: c_int,
    off: off_t,
    flags: c_int,
) -> ssize_t {
    let real = real!(c"pwritev64v2", Pvec2Fn, -1);
    // SAFETY: forwarded contract.
    unsafe { pvec2_call(id::PWRITEV2, real, fd, iov, cnt, off, flags) }
}

fn lseek_as(real: LseekFn, fd: c_int, off: off_t, whence: c_int) -> off_t {
    timed_fd(
        id::LSEEK,
        fd,
        // SAFETY: the caller's arguments, passed on.
        || unsafe { real(fd, off, whence) },
        ret,
        |enc, _| {
            enc.fd(fd);
            enc.off(off);
            enc.int(whence as i64);
        },
    )
}

/// # Safety
/// As `lseek(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lseek(fd: c_int, off: off_t, whence: c_int) -> off_t {
    lseek_as(real!(c"lseek", LseekFn, -1), fd, off, whence)
}

/// # Safety
/// As `lseek(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lseek64(fd: c_int, off: off_t, whence: c_int) -> off_t {
    lseek_as(real!(c"lseek64", LseekFn, -1), fd, off, whence)
}

fn truncate_as(real: TruncateFn, path: *const c_char, len: off_t) -> c_int {
    timed(
        id::TRUNCATE,
        // SAFETY: the caller's arguments, passed on.
        || unsafe { real(path, len) },
        |r, e| ret(r as i64, e),
        |enc, _| {
            // SAFETY: `path` is a C string per `truncate`'s contract.
            unsafe { enc.path(path) };
            enc.off(len);
        },
    )
}

/// # Safety
/// As `truncate(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn truncate(path: *const c_char, len: off_t) -> c_int {
    truncate_as(real!(c"truncate", TruncateFn, -1), path, len)
}

/// # Safety
/// As `truncate(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn truncate64(path: *const c_char, len: off_t) -> c_int {
    truncate_as(real!(c"truncate64", TruncateFn, -1), path, len)
}

fn ftruncate_as(real: FtruncateFn, fd: c_int, len: off_t) -> c_int {
    timed_fd(
        id::FTRUNCATE,
        fd,
        // SAFETY: the caller's arguments, passed on.
        || unsafe { real(fd, len) },
        |r, e| ret(r as i64, e),
        |enc, _| {
            enc.fd(fd);
            enc.off(len);
        },
    )
}

/// # Safety
/// As `ftruncate(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ftruncate(fd: c_int, len: off_t) -> c_int {
    ftruncate_as(real!(c"ftruncate", FtruncateFn, -1), fd, len)
}

/// # Safety
/// As `ftruncate(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ftruncate64(fd: c_int, len: off_t) -> c_int {
    ftruncate_as(real!(c"ftruncate64", FtruncateFn, -1), fd, len)
}

fn fallocate_as(real: FallocateFn, fd: c_int, mode: c_int, off: off_t, len: off_t) -> c_int {
    timed_fd(
        id::FALLOCATE,
        fd,
        // SAFETY: the caller's arguments, passed on.
        || unsafe { real(fd, mode, off, len) },
        |r, e| ret(r as i64, e),
        |enc, _| {
            enc.fd(fd);
            enc.int(mode as i64);
            enc.off(off);
            enc.off(len);
        },
    )
}

/// # Safety
/// As `fallocate(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fallocate(fd: c_int, mode: c_int, off: off_t, len: off_t) -> c_int {
    fallocate_as(real!(c"fallocate", FallocateFn, -1), fd, mode, off, len)
}

/// # Safety
/// As `fallocate(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fallocate64(fd: c_int, mode: c_int, off: off_t, len: off_t) -> c_int {
    fallocate_as(real!(c"fallocate64", FallocateFn, -1), fd, mode, off, len)
}

fn posix_fallocate_as(real: PosixFallocateFn, fd: c_int, off: off_t, len: off_t) -> c_int {
    timed_fd(
        id::POSIX_FALLOCATE,
        fd,
        // SAFETY: the caller's arguments, passed on.
        || unsafe { real(fd, off, len) },
        // It returns the error number instead of setting errno.
        |r, _| -(r as i64),
        |enc, _| {
            enc.fd(fd);
            enc.off(off);
            enc.off(len);
        },
    )
}

/// # Safety
/// As `posix_fallocate(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn posix_fallocate(fd: c_int, off: off_t, len: off_t) -> c_int {
    posix_fallocate_as(
        real!(c"posix_fallocate", PosixFallocateFn, libc::ENOSYS),
        fd,
        off,
        len,
    )
}

/// # Safety
/// As `posix_fallocate(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn posix_fallocate64(fd: c_int, off: off_t, len: off_t) -> c_int {
    let real = real!(c"posix_fallocate64", PosixFallocateFn, libc::ENOSYS);
    posix_fallocate_as(real, fd, off, len)
}

/// The value behind an optional offset pointer, -1 for none.
///
/// # Safety
/// `p` must be null or valid for reads.
unsafe fn opt_off(p: *const off_t) -> i64 {
    if p.is_null() {
        -1
    } else {
        // SAFETY: per the caller.
        unsafe { *p }
    }
}

/// # Safety
/// As `copy_file_range(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn copy_file_range(
    fd_in: c_int,
    off_in: *mut off_t,
    fd_out: c_int,
    off_out: *mut off_t,
    len: size_t,
    flags: c_uint,
) -> ssize_t {
    let real = real!(c"copy_file_range", CopyRangeFn, -1);
    // SAFETY: offset pointers are null or valid per the call's contract; read before the
    // call updates them.
    let (oi, oo) = unsafe { (opt_off(off_in), opt_off(off_out)) };
    timed(
        id::COPY_FILE_RANGE,
        // SAFETY: the caller's arguments, passed on.
        || unsafe { real(fd_in, off_in, fd_out, off_out, len, flags) },
        |r, e| ret(r as i64, e),
        |enc, _| {
            enc.fd(fd_in);
            enc.off(oi);
            enc.fd(fd_out);
            enc.off(oo);
            enc.size(len as u64);
            enc.flags(flags as u64);
        },
    )
}

fn sendfile_as(real: SendfileFn, out: c_int, inp: c_int, off: *mut off_t, n: size_t) -> ssize_t {
    // SAFETY: the offset pointer is null or valid per the call's contract.
    let o = unsafe { opt_off(off) };
    timed(
        id::SENDFILE,
        // SAFETY: the caller's arguments, passed on.
        || unsafe { real(out, inp, off, n) },
        |r, e| ret(r as i64, e),
        |enc, _| {
            enc.fd(out);
            enc.fd(inp);
            enc.off(o);
            enc.size(n as u64);
        },
    )
}

/// # Safety
/// As `sendfile(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sendfile(out: c_int, inp: c_int, off: *mut off_t, n: size_t) -> ssize_t {
    sendfile_as(real!(c"sendfile", SendfileFn, -1), out, inp, off, n)
}

/// # Safety
/// As `sendfile(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sendfile64(out: c_int, inp: c_int, off: *mut off_t, n: size_t) -> ssize_t {
    sendfile_as(real!(c"sendfile64", SendfileFn, -1), out, inp, off, n)
}
