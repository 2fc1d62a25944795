//! Names and attributes: the stat family, access, mkdir/rmdir, unlink, rename, link, symlink,
//! readlink, remove, chmod/chown/utimes, chdir, statfs.

use std::ffi::{c_char, c_int, c_uint};

use libc::{gid_t, mode_t, size_t, ssize_t, uid_t};

use super::real;
use crate::abi::id;
use crate::record::{Encoder, ret, timed, timed_fd};

type StatFn = unsafe extern "C" fn(*const c_char, *mut libc::stat) -> c_int;
type FstatFn = unsafe extern "C" fn(c_int, *mut libc::stat) -> c_int;
type FstatatFn = unsafe extern "C" fn(c_int, *const c_char, *mut libc::stat, c_int) -> c_int;
type XstatFn = unsafe extern "C" fn(c_int, *const c_char, *mut libc::stat) -> c_int;
type FxstatFn = unsafe extern "C" fn(c_int, c_int, *mut libc::stat) -> c_int;
type FxstatatFn =
    unsafe extern "C" fn(c_int, c_int, *const c_char, *mut libc::stat, c_int) -> c_int;
type StatxFn = unsafe extern "C" fn(c_int, *const c_char, c_int, c_uint, *mut libc::statx) -> c_int;
type StatfsFn = unsafe extern "C" fn(*const c_char, *mut libc::statfs) -> c_int;
type FstatfsFn = unsafe extern "C" fn(c_int, *mut libc::statfs) -> c_int;
type PathFn = unsafe extern "C" fn(*const c_char) -> c_int;
type PathIntFn = unsafe extern "C" fn(*const c_char, c_int) -> c_int;
type FaccessatFn = unsafe extern "C" fn(c_int, *const c_char, c_int, c_int) -> c_int;
type PathModeFn = unsafe extern "C" fn(*const c_char, mode_t) -> c_int;
type FdModeFn = unsafe extern "C" fn(c_int, mode_t) -> c_int;
type AtModeFn = unsafe extern "C" fn(c_int, *const c_char, mode_t) -> c_int;
type AtModeFlagsFn = unsafe extern "C" fn(c_int, *const c_char, mode_t, c_int) -> c_int;
type AtFlagsFn = unsafe extern "C" fn(c_int, *const c_char, c_int) -> c_int;
type TwoPathsFn = unsafe extern "C" fn(*const c_char, *const c_char) -> c_int;
type RenameatFn = unsafe extern "C" fn(c_int, *const c_char, c_int, *const c_char) -> c_int;
type Renameat2Fn =
    unsafe extern "C" fn(c_int, *const c_char, c_int, *const c_char, c_uint) -> c_int;
type LinkatFn = unsafe extern "C" fn(c_int, *const c_char, c_int, *const c_char, c_int) -> c_int;
type SymlinkatFn = unsafe extern "C" fn(*const c_char, c_int, *const c_char) -> c_int;
type ReadlinkFn = unsafe extern "C" fn(*const c_char, *mut c_char, size_t) -> ssize_t;
type ReadlinkChkFn = unsafe extern "C" fn(*const c_char, *mut c_char, size_t, size_t) -> ssize_t;
type ReadlinkatFn = unsafe extern "C" fn(c_int, *const c_char, *mut c_char, size_t) -> ssize_t;
type ReadlinkatChkFn =
    unsafe extern "C" fn(c_int, *const c_char, *mut c_char, size_t, size_t) -> ssize_t;
type ChownFn = unsafe extern "C" fn(*const c_char, uid_t, gid_t) -> c_int;
type FchownFn = unsafe extern "C" fn(c_int, uid_t, gid_t) -> c_int;
type FchownatFn = unsafe extern "C" fn(c_int, *const c_char, uid_t, gid_t, c_int) -> c_int;
type UtimensatFn =
    unsafe extern "C" fn(c_int, *const c_char, *const libc::timespec, c_int) -> c_int;
type FutimensFn = unsafe extern "C" fn(c_int, *const libc::timespec) -> c_int;
type FdFn = unsafe extern "C" fn(c_int) -> c_int;

/// The `t` item of a `struct stat` filled by a successful call.
///
/// # Safety
/// When `ok`, `st` must point to a filled `struct stat`.
unsafe fn stat_item(enc: &mut Encoder, ok: bool, st: *const libc::stat) {
    if ok && !st.is_null() {
        // SAFETY: per the caller.
        let st = unsafe { &*st };
        enc.stat(true, st.st_mode as u64, st.st_size as u64);
    }
}

/// `SYS_STAT`/`SYS_LSTAT` of a path.
fn path_stat(
    call: u8,
    path: *const c_char,
    st: *mut libc::stat,
    real: impl FnOnce() -> c_int,
) -> c_int {
    timed(
        call,
        real,
        |r, e| ret(r as i64, e),
        |enc, r| {
            // SAFETY: `path` is a C string and `st` was filled when the call succeeded.
            unsafe {
                enc.path(path);
                stat_item(enc, r == 0, st);
            }
        },
    )
}

/// `SYS_FSTAT`.
fn fd_stat(fd: c_int, st: *mut libc::stat, real: impl FnOnce() -> c_int) -> c_int {
    timed_fd(
        id::FSTAT,
        fd,
        real,
        |r, e| ret(r as i64, e),
        |enc, r| {
            enc.fd(fd);
            // SAFETY: `st` was filled when the call succeeded.
            unsafe { stat_item(enc, r == 0, st) };
        },
    )
}

/// `SYS_FSTATAT`.
fn at_stat(
    dirfd: c_int,
    path: *const c_char,
    st: *mut libc::stat,
    flags: c_int,
    real: impl FnOnce() -> c_int,
) -> c_int {
    timed_fd(
        id::FSTATAT,
        // SAFETY: `path` is a C string per the call's contract.
        unsafe { on_descriptor(dirfd, path, flags) },
        real,
        |r, e| ret(r as i64, e),
        |enc, r| {
            enc.fd(dirfd);
            // SAFETY: `path` is a C string and `st` was filled when the call succeeded.
            unsafe {
                enc.path(path);
                enc.flags(flags as u32 as u64);
                stat_item(enc, r == 0, st);
            }
        },
    )
}

macro_rules! stat_hooks {
    ($($hook:ident, $sym:literal, $call:expr;)*) => {$(
        /// # Safety
        /// As `stat(2)`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $hook(path: *const c_char, st: *mut libc::stat) -> c_int {
            let real = real!($sym, StatFn, -1);
            // SAFETY: the caller's arguments, passed on.
            path_stat($call, path, st, || unsafe { real(path, st) })
        }
    )*};
}

stat_hooks! {
    stat, c"stat", id::STAT;
    stat64, c"stat64", id::STAT;
    lstat, c"lstat", id::LSTAT;
    lstat64, c"lstat64", id::LSTAT;
}

/// # Safety
/// As `fstat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fstat(fd: c_int, st: *mut libc::stat) -> c_int {
    let real = real!(c"fstat", FstatFn, -1);
    // SAFETY: the caller's arguments, passed on.
    fd_stat(fd, st, || unsafe { real(fd, st) })
}

/// # Safety
/// As `fstat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fstat64(fd: c_int, st: *mut libc::stat) -> c_int {
    let real = real!(c"fstat64", FstatFn, -1);
    // SAFETY: the caller's arguments, passed on.
    fd_stat(fd, st, || unsafe { real(fd, st) })
}

/// # Safety
/// As `fstatat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fstatat(
    dirfd: c_int,
    path: *const c_char,
    st: *mut libc::stat,
    flags: c_int,
) -> c_int {
    let real = real!(c"fstatat", FstatatFn, -1);
    // SAFETY: the caller's arguments, passed on.
    at_stat(dirfd, path, st, flags, || unsafe {
        real(dirfd, path, st, flags)
    })
}

/// # Safety
/// As `fstatat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fstatat64(
    dirfd: c_int,
    path: *const c_char,
    st: *mut libc::stat,
    flags: c_int,
) -> c_int {
    let real = real!(c"fstatat64", FstatatFn, -1);
    // SAFETY: the caller's arguments, passed on.
    at_stat(dirfd, path, st, flags, || unsafe {
        real(dirfd, path, st, flags)
    })
}

// The stat entry points of programs built against a C library before 2.33.
macro_rules! xstat_hooks {
    ($($hook:ident, $sym:literal, $call:expr;)*) => {$(
        /// # Safety
        /// As `stat(2)` with a version number.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $hook(ver: c_int, path: *const c_char, st: *mut libc::stat) -> c_int {
            let real = real!($sym, XstatFn, -1);
            // SAFETY: the caller's arguments, passed on.
            path_stat($call, path, st, || unsafe { real(ver, path, st) })
        }
    )*};
}

xstat_hooks! {
    __xstat, c"__xstat", id::STAT;
    __xstat64, c"__xstat64", id::STAT;
    __lxstat, c"__lxstat", id::LSTAT;
    __lxstat64, c"__lxstat64", id::LSTAT;
}

/// # Safety
/// As `fstat(2)` with a version number.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __fxstat(ver: c_int, fd: c_int, st: *mut libc::stat) -> c_int {
    let real = real!(c"__fxstat", FxstatFn, -1);
    // SAFETY: the caller's arguments, passed on.
    fd_stat(fd, st, || unsafe { real(ver, fd, st) })
}

/// # Safety
/// As `fstat(2)` with a version number.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __fxstat64(ver: c_int, fd: c_int, st: *mut libc::stat) -> c_int {
    let real = real!(c"__fxstat64", FxstatFn, -1);
    // SAFETY: the caller's arguments, passed on.
    fd_stat(fd, st, || unsafe { real(ver, fd, st) })
}

/// # Safety
/// As `fstatat(2)` with a version number.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __fxstatat(
    ver: c_int,
    dirfd: c_int,
    path: *const c_char,
    st: *mut libc::stat,
    flags: c_int,
) -> c_int {
    let real = real!(c"__fxstatat", FxstatatFn, -1);
    // SAFETY: the caller's arguments, passed on.
    at_stat(dirfd, path, st, flags, || unsafe {
        real(ver, dirfd, path, st, flags)
    })
}

/// # Safety
/// As `fstatat(2)` with a version number.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __fxstatat64(
    ver: c_int,
    dirfd: c_int,
    path: *const c_char,
    st: *mut libc::stat,
    flags: c_int,
) -> c_int {
    let real = real!(c"__fxstatat64", FxstatatFn, -1);
    // SAFETY: the caller's arguments, passed on.
    at_stat(dirfd, path, st, flags, || unsafe {
        real(ver, dirfd, path, st, flags)
    })
}

/// # Safety
/// As `statx(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn statx(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mask: c_uint,
    buf: *mut libc::statx,
) -> c_int {
    let real = real!(c"statx", StatxFn, -1);
    timed_fd(
        id::STATX,
        // SAFETY: `path` is a C string per `statx`'s contract.
        unsafe { on_descriptor(dirfd, path, flags) },
        // SAFETY: the caller's arguments, passed on.
        || unsafe { real(dirfd, path, flags, mask, buf) },
        |r, e| ret(r as i64, e),
        |enc, r| {
            enc.fd(dirfd);
            // SAFETY: `path` is a C string; `buf` was filled when the call succeeded.
            unsafe {
                enc.path(path);
                enc.flags(flags as u32 as u64);
                enc.mode(mask as u64);
                if r == 0 && !buf.is_null() {
                    let b = &*buf;
                    enc.stat(true, b.stx_mode as u64, b.stx_size);
                }
            }
        },
    )
}

/// # Safety
/// As `statfs(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn statfs(path: *const c_char, buf: *mut libc::statfs) -> c_int {
    let real = real!(c"statfs", StatfsFn, -1);
    // SAFETY: the caller's arguments, passed on.
    path_call(id::STATFS, path, || unsafe { real(path, buf) })
}

/// # Safety
/// As `statfs(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn statfs64(path: *const c_char, buf: *mut libc::statfs) -> c_int {
    let real = real!(c"statfs64", StatfsFn, -1);
    // SAFETY: the caller's arguments, passed on.
    path_call(id::STATFS, path, || unsafe { real(path, buf) })
}

/// # Safety
/// As `fstatfs(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fstatfs(fd: c_int, buf: *mut libc::statfs) -> c_int {
    let real = real!(c"fstatfs", FstatfsFn, -1);
    // SAFETY: the caller's arguments, passed on.
    fd_call(id::FSTATFS, fd, || unsafe { real(fd, buf) })
}

/// # Safety
/// As `fstatfs(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fstatfs64(fd: c_int, buf: *mut libc::statfs) -> c_int {
    let real = real!(c"fstatfs64", FstatfsFn, -1);
    // SAFETY: the caller's arguments, passed on.
    fd_call(id::FSTATFS, fd, || unsafe { real(fd, buf) })
}

/// A call whose trace is one path.
fn path_call(call: u8, path: *const c_char, real: impl FnOnce() -> c_int) -> c_int {
    timed(
        call,
        real,
        |r, e| ret(r as i64, e),
        // SAFETY: `path` is a C string per the call's contract.
        |enc, _| unsafe { enc.path(path) },
    )
}

/// A call whose trace is one descriptor (counted under its kind).
fn fd_call(call: u8, fd: c_int, real: impl FnOnce() -> c_int) -> c_int {
    timed_fd(call, fd, real, |r, e| ret(r as i64, e), |enc, _| enc.fd(fd))
}

/// The descriptor a `*at` call is about: `dirfd` itself with `AT_EMPTY_PATH` and an empty path
/// (how glibc and Rust's std stat a descriptor), else none (-1: a file, by a path).
///
/// # Safety
/// `path` is null or a C string.
unsafe fn on_descriptor(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: per the contract, the first byte of a non-null path is readable.
    if flags & libc::AT_EMPTY_PATH != 0 && !path.is_null() && unsafe { *path } == 0 {
        dirfd
    } else {
        -1
    }
}

/// # Safety
/// As `access(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn access(path: *const c_char, how: c_int) -> c_int {
    let real = real!(c"access", PathIntFn, -1);
    timed(
        id::ACCESS,
        // SAFETY: the caller's arguments, passed on.
        || unsafe { real(path, how) },
        |r, e| ret(r as i64, e),
        |enc, _| {
            // SAFETY: `path` is a C string per `access`'s contract.
            unsafe { enc.path(path) };
            enc.int(how as i64);
        },
    )
}

/// # Safety
/// As `faccessat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn faccessat(
    dirfd: c_int,
    path: *const c_char,
    how: c_int,
    flags: c_int,
) -> c_int {
    let real = real!(c"faccessat", FaccessatFn, -1);
    timed(
        id::FACCESSAT,
        // SAFETY: the caller's arguments, passed on.
        || unsafe { real(dirfd, path, how, flags) },
        |r, e| ret(r as i64, e),
        |enc, _| {
            enc.fd(dirfd);
            // SAFETY: `path` is a C string per `faccessat`'s contract.
            unsafe { enc.path(path) };
            enc.int(how as i64);
            enc.flags(flags as u32 as u64);
        },
    )
}

/// A call with a path and a mode.
fn path_mode(call: u8, real: PathModeFn, path: *const c_char, mode: mode_t) -> c_int {
    timed(
        call,
        // SAFETY: the caller's arguments, passed on.
        || unsafe { real(path, mode) },
        |r, e| ret(r as i64, e),
        |enc, _| {
            // SAFETY: `path` is a C string per the call's contract.
            unsafe { enc.path(path) };
            enc.mode(mode as u64);
        },
    )
}

/// # Safety
/// As `mkdir(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mkdir(path: *const c_char, mode: mode_t) -> c_int {
    path_mode(id::MKDIR, real!(c"mkdir", PathModeFn, -1), path, mode)
}

/// # Safety
/// As `chmod(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn chmod(path: *const c_char, mode: mode_t) -> c_int {
    path_mode(id::CHMOD, real!(c"chmod", PathModeFn, -1), path, mode)
}

/// # Safety
/// As `mkdirat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mkdirat(dirfd: c_int, path: *const c_char, mode: mode_t) -> c_int {
    let real = real!(c"mkdirat", AtModeFn, -1);
    timed(
        id::MKDIRAT,
        // SAFETY: the caller's arguments, passed on.
        || unsafe { real(dirfd, path, mode) },
        |r, e| ret(r as i64, e),
        |enc, _| {
            enc.fd(dirfd);
            // SAFETY: `path` is a C string per `mkdirat`'s contract.
            unsafe { enc.path(path) };
            enc.mode(mode as u64);
        },
    )
}

/// # Safety
/// As `fchmod(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fchmod(fd: c_int, mode: mode_t) -> c_int {
    let real = real!(c"fchmod", FdModeFn, -1);
    timed(
        id::FCHMOD,
        // SAFETY: the caller's arguments, passed on.
        || unsafe { real(fd, mode) },
        |r, e| ret(r as i64, e),
        |enc, _| {
            enc.fd(fd);
            enc.mode(mode as u64);
        },
    )
}

/// # Safety
/// As `fchmodat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fchmodat(
    dirfd: c_int,
    path: *const c_char,
    mode: mode_t,
    flags: c_int,
) -> c_int {
    let real = real!(c"fchmodat", AtModeFlagsFn, -1);
    timed(
        id::FCHMODAT,
        // SAFETY: the caller's arguments, passed on.
        || unsafe { real(dirfd, path, mode, flags) },
        |r, e| ret(r as i64, e),
        |enc, _| {
            enc.fd(dirfd);
            // SAFETY: `path` is a C string per `fchmodat`'s contract.
            unsafe { enc.path(path) };
            enc.mode(mode as u64);
            enc.flags(flags as u32 as u64);
        },
    )
}

/// # Safety
/// As `rmdir(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rmdir(path: *const c_char) -> c_int {
    let real = real!(c"rmdir", PathFn, -1);
    // SAFETY: the caller's argument, passed on.
    path_call(id::RMDIR, path, || unsafe { real(path) })
}

/// # Safety
/// As `unlink(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unlink(path: *const c_char) -> c_int {
    let real = real!(c"unlink", PathFn, -1);
    // SAFETY: the caller's argument, passed on.
    path_call(id::UNLINK, path, || unsafe { real(path) })
}

/// # Safety
/// As `remove(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn remove(path: *const c_char) -> c_int {
    let real = real!(c"remove", PathFn, -1);
    // SAFETY: the caller's argument, passed on.
    path_call(id::REMOVE, path, || unsafe { real(path) })
}

/// # Safety
/// As `chdir(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn chdir(path: *const c_char) -> c_int {
    let real = real!(c"chdir", PathFn, -1);
    // SAFETY: the caller's argument, passed on.
    path_call(id::CHDIR, path, || unsafe { real(path) })
}

/// # Safety
/// As `fchdir(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fchdir(fd: c_int) -> c_int {
    let real = real!(c"fchdir", FdFn, -1);
    // SAFETY: the caller's argument, passed on.
    fd_call(id::FCHDIR, fd, || unsafe { real(fd) })
}

/// # Safety
/// As `unlinkat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unlinkat(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    let real = real!(c"unlinkat", AtFlagsFn, -1);
    timed(
        id::UNLINKAT,
        // SAFETY: the caller's arguments, passed on.
        || unsafe { real(dirfd, path, flags) },
        |r, e| ret(r as i64, e),
        |enc, _| {
            enc.fd(dirfd);
            // SAFETY: `path` is a C string per `unlinkat`'s contract.
            unsafe { enc.path(path) };
            enc.flags(flags as u32 as u64);
        },
    )
}

/// A call with two paths.
fn two_paths(call: u8, real: TwoPathsFn, a: *const c_char, b: *const c_char) -> c_int {
    timed(
        call,
        // SAFETY: the caller's arguments, passed on.
        || unsafe { real(a, b) },
        |r, e| ret(r as i64, e),
        |enc, _| {
            // SAFETY: both are C strings per the call's contract.
            unsafe {
                enc.path(a);
                enc.path(b);
            }
        },
    )
}

/// # Safety
/// As `rename(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rename(old: *const c_char, new: *const c_char) -> c_int {
    two_paths(id::RENAME, real!(c"rename", TwoPathsFn, -1), old, new)
}

/// # Safety
/// As `link(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn link(old: *const c_char, new: *const c_char) -> c_int {
    two_paths(id::LINK, real!(c"link", TwoPathsFn, -1), old, new)
}

/// # Safety
/// As `symlink(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn symlink(target: *const c_char, path: *const c_char) -> c_int {
    two_paths(id::SYMLINK, real!(c"symlink", TwoPathsFn, -1), target, path)
}

/// # Safety
/// As `renameat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn renameat(
    olddir: c_int,
    old: *const c_char,
    newdir: c_int,
    new: *const c_char,
) -> c_int {
    let real = real!(c"renameat", RenameatFn, -1);
    timed(
        id::RENAMEAT,
        // SAFETY: the caller's arguments, passed on.
        || unsafe { real(olddir, old, newdir, new) },
        |r, e| ret(r as i64, e),
        |enc, _| {
            enc.fd(olddir);
            // SAFETY: both are C strings per the call's contract.
            unsafe { enc.path(old) };
            enc.fd(newdir);
            // SAFETY: as above.
            unsafe { enc.path(new) };
        },
    )
}

/// # Safety
/// As `renameat2(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn renameat2(
    olddir: c_int,
    old: *const c_char,
    newdir: c_int,
    new: *const c_char,
    flags: c_uint,
) -> c_int {
    let real = real!(c"renameat2", Renameat2Fn, -1);
    timed(
        id::RENAMEAT2,
        // SAFETY: the caller's arguments, passed on.
        || unsafe { real(olddir, old, newdir, new, flags) },
        |r, e| ret(r as i64, e),
        |enc, _| {
            enc.fd(olddir);
            // SAFETY: both are C strings per the call's contract.
            unsafe { enc.path(old) };
            enc.fd(newdir);
            // SAFETY: as above.
            unsafe { enc.path(new) };
            enc.flags(flags as u64);
        },
    )
}

/// # Safety
/// As `linkat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn linkat(
    olddir: c_int,
    old: *const c_char,
    newdir: c_int,
    new: *const c_char,
    flags: c_int,
) -> c_int {
    let real = real!(c"linkat", LinkatFn, -1);
    timed(
        id::LINKAT,
        // SAFETY: the caller's arguments, passed on.
        || unsafe { real(olddir, old, newdir, new, flags) },
        |r, e| ret(r as i64, e),
        |enc, _| {
            enc.fd(olddir);
            // SAFETY: both are C strings per the call's contract.
            unsafe { enc.path(old) };
            enc.fd(newdir);
            // SAFETY: as above.
            unsafe { enc.path(new) };
            enc.flags(flags as u32 as u64);
        },
    )
}

/// # Safety
/// As `symlinkat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn symlinkat(
    target: *const c_char,
    dirfd: c_int,
    path: *const c_char,
) -> c_int {
    let real = real!(c"symlinkat", SymlinkatFn, -1);
    timed(
        id::SYMLINKAT,
        // SAFETY: the caller's arguments, passed on.
        || unsafe { real(target, dirfd, path) },
        |r, e| ret(r as i64, e),
        |enc, _| {
            // SAFETY: both are C strings per the call's contract.
            unsafe { enc.path(target) };
            enc.fd(dirfd);
            // SAFETY: as above.
            unsafe { enc.path(path) };
        },
    )
}

/// `readlink`: path and buffer size.
fn readlink_call(path: *const c_char, n: size_t, real: impl FnOnce() -> ssize_t) -> ssize_t {
    timed(
        id::READLINK,
        real,
        |r, e| ret(r as i64, e),
        |enc, _| {
            // SAFETY: `path` is a C string per `readlink`'s contract.
            unsafe { enc.path(path) };
            enc.size(n as u64);
        },
    )
}

/// # Safety
/// As `readlink(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn readlink(path: *const c_char, buf: *mut c_char, n: size_t) -> ssize_t {
    let real = real!(c"readlink", ReadlinkFn, -1);
    // SAFETY: the caller's arguments, passed on.
    readlink_call(path, n, || unsafe { real(path, buf, n) })
}

/// # Safety
/// As `readlink(2)`, with the fortified buffer check.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __readlink_chk(
    path: *const c_char,
    buf: *mut c_char,
    n: size_t,
    len: size_t,
) -> ssize_t {
    let real = real!(c"__readlink_chk", ReadlinkChkFn, -1);
    // SAFETY: the caller's arguments, passed on.
    readlink_call(path, n, || unsafe { real(path, buf, n, len) })
}

/// `readlinkat`: directory, path and buffer size.
fn readlinkat_call(
    dirfd: c_int,
    path: *const c_char,
    n: size_t,
    real: impl FnOnce() -> ssize_t,
) -> ssize_t {
    timed(
        id::READLINKAT,
        real,
        |r, e| ret(r as i64, e),
        |enc, _| {
            enc.fd(dirfd);
            // SAFETY: `path` is a C string per `readlinkat`'s contract.
            unsafe { enc.path(path) };
            enc.size(n as u64);
        },
    )
}

/// # Safety
/// As `readlinkat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn readlinkat(
    dirfd: c_int,
    path: *const c_char,
    buf: *mut c_char,
    n: size_t,
) -> ssize_t {
    let real = real!(c"readlinkat", ReadlinkatFn, -1);
    // SAFETY: the caller's arguments, passed on.
    readlinkat_call(dirfd, path, n, || unsafe { real(dirfd, path, buf, n) })
}

/// # Safety
/// As `readlinkat(2)`, with the fortified buffer check.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __readlinkat_chk(
    dirfd: c_int,
    path: *const c_char,
    buf: *mut c_char,
    n: size_t,
    len: size_t,
) -> ssize_t {
    let real = real!(c"__readlinkat_chk", ReadlinkatChkFn, -1);
    // SAFETY: the caller's arguments, passed on.
    readlinkat_call(dirfd, path, n, || unsafe { real(dirfd, path, buf, n, len) })
}

/// `chown`/`lchown`.
fn chown_as(call: u8, real: ChownFn, path: *const c_char, uid: uid_t, gid: gid_t) -> c_int {
    timed(
        call,
        // SAFETY: the caller's arguments, passed on.
        || unsafe { real(path, uid, gid) },
        |r, e| ret(r as i64, e),
        |enc, _| {
            // SAFETY: `path` is a C string per the call's contract.
            unsafe { enc.path(path) };
            enc.int(uid as i64);
            enc.int(gid as i64);
        },
    )
}

/// # Safety
/// As `chown(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn chown(path: *const c_char, uid: uid_t, gid: gid_t) -> c_int {
    chown_as(id::CHOWN, real!(c"chown", ChownFn, -1), path, uid, gid)
}

/// # Safety
/// As `lchown(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lchown(path: *const c_char, uid: uid_t, gid: gid_t) -> c_int {
    chown_as(id::LCHOWN, real!(c"lchown", ChownFn, -1), path, uid, gid)
}

/// # Safety
/// As `fchown(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fchown(fd: c_int, uid: uid_t, gid: gid_t) -> c_int {
    let real = real!(c"fchown", FchownFn, -1);
    timed(
        id::FCHOWN,
        // SAFETY: the caller's arguments, passed on.
        || unsafe { real(fd, uid, gid) },
        |r, e| ret(r as i64, e),
        |enc, _| {
            enc.fd(fd);
            enc.int(uid as i64);
            enc.int(gid as i64);
        },
    )
}

/// # Safety
/// As `fchownat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fchownat(
    dirfd: c_int,
    path: *const c_char,
    uid: uid_t,
    gid: gid_t,
    flags: c_int,
) -> c_int {
    let real = real!(c"fchownat", FchownatFn, -1);
    timed(
        id::FCHOWNAT,
        // SAFETY: the caller's arguments, passed on.
        || unsafe { real(dirfd, path, uid, gid, flags) },
        |r, e| ret(r as i64, e),
        |enc, _| {
            enc.fd(dirfd);
            // SAFETY: `path` is a C string per `fchownat`'s contract.
            unsafe { enc.path(path) };
            enc.int(uid as i64);
            enc.int(gid as i64);
            enc.flags(flags as u32 as u64);
        },
    )
}

/// # Safety
/// As `utimensat(2)` (`path` may be null).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn utimensat(
    dirfd: c_int,
    path: *const c_char,
    times: *const libc::timespec,
    flags: c_int,
) -> c_int {
    let real = real!(c"utimensat", UtimensatFn, -1);
    timed(
        id::UTIMENSAT,
        // SAFETY: the caller's arguments, passed on.
        || unsafe { real(dirfd, path, times, flags) },
        |r, e| ret(r as i64, e),
        |enc, _| {
            enc.fd(dirfd);
            // SAFETY: `path` is null or a C string per `utimensat`'s contract.
            unsafe { enc.path(path) };
            enc.flags(flags as u32 as u64);
        },
    )
}

/// # Safety
/// As `futimens(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn futimens(fd: c_int, times: *const libc::timespec) -> c_int {
    let real = real!(c"futimens", FutimensFn, -1);
    // SAFETY: the caller's arguments, passed on.
    fd_call(id::FUTIMENS, fd, || unsafe { real(fd, times) })
}
