//! Directories: opendir, fdopendir, readdir, closedir, getdents64.

use std::ffi::{c_char, c_int, c_void};

use libc::{DIR, dirent, size_t, ssize_t};

use super::real;
use crate::abi::id;
use crate::fds;
use crate::record::{ret, timed};
use crate::sys;

type OpendirFn = unsafe extern "C" fn(*const c_char) -> *mut DIR;
type FdopendirFn = unsafe extern "C" fn(c_int) -> *mut DIR;
type ReaddirFn = unsafe extern "C" fn(*mut DIR) -> *mut dirent;
type ClosedirFn = unsafe extern "C" fn(*mut DIR) -> c_int;
type GetdentsFn = unsafe extern "C" fn(c_int, *mut c_void, size_t) -> ssize_t;

/// The trace result of a function returning a directory stream.
fn dir_result(d: *mut DIR, err: i32) -> i64 {
    if d.is_null() {
        -(err as i64)
    } else {
        // SAFETY: a stream the C library just returned.
        unsafe { sys::dir_fd(d) as i64 }
    }
}

/// # Safety
/// As `opendir(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn opendir(path: *const c_char) -> *mut DIR {
    let real = real!(c"opendir", OpendirFn, std::ptr::null_mut());
    let d = timed(
        id::OPENDIR,
        // SAFETY: the caller's argument, passed on.
        || unsafe { real(path) },
        dir_result,
        // SAFETY: `path` is a C string per `opendir`'s contract.
        |enc, _| unsafe { enc.path(path) },
    );
    if !d.is_null() {
        // SAFETY: a stream the C library just returned.
        fds::forget(unsafe { sys::dir_fd(d) });
    }
    d
}

/// # Safety
/// As `fdopendir(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fdopendir(fd: c_int) -> *mut DIR {
    let real = real!(c"fdopendir", FdopendirFn, std::ptr::null_mut());
    timed(
        id::FDOPENDIR,
        // SAFETY: the caller's argument, passed on.
        || unsafe { real(fd) },
        dir_result,
        |enc, _| enc.fd(fd),
    )
}

/// `readdir`: 1 for an entry, 0 at the end, `-errno` on error (told apart from the end by
/// clearing `errno` first, as callers do; the caller's `errno` is kept when there is none).
fn readdir_as(real: ReaddirFn, d: *mut DIR) -> *mut dirent {
    let saved = sys::errno();
    sys::set_errno(0);
    let r = timed(
        id::READDIR,
        // SAFETY: the caller's argument, passed on.
        || unsafe { real(d) },
        |e, err| {
            if !e.is_null() { 1 } else { -(err as i64) }
        },
        // SAFETY: an open stream per `readdir`'s contract.
        |enc, _| enc.fd(unsafe { sys::dir_fd(d) }),
    );
    if sys::errno() == 0 {
        sys::set_errno(saved);
    }
    r
}

/// # Safety
/// As `readdir(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn readdir(d: *mut DIR) -> *mut dirent {
    readdir_as(real!(c"readdir", ReaddirFn, std::ptr::null_mut()), d)
}

/// # Safety
/// As `readdir(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn readdir64(d: *mut DIR) -> *mut dirent {
    readdir_as(real!(c"readdir64", ReaddirFn, std::ptr::null_mut()), d)
}

/// # Safety
/// As `closedir(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn closedir(d: *mut DIR) -> c_int {
    let real = real!(c"closedir", ClosedirFn, -1);
    // SAFETY: an open stream per `closedir`'s contract; read before it is freed.
    let fd = unsafe { sys::dir_fd(d) };
    let r = timed(
        id::CLOSEDIR,
        // SAFETY: the caller's argument, passed on.
        || unsafe { real(d) },
        |r, e| ret(r as i64, e),
        |enc, _| enc.fd(fd),
    );
    fds::forget(fd);
    r
}

/// # Safety
/// As `getdents64(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn getdents64(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t {
    let real = real!(c"getdents64", GetdentsFn, -1);
    timed(
        id::GETDENTS64,
        // SAFETY: the caller's arguments, passed on.
        || unsafe { real(fd, buf, n) },
        |r, e| ret(r as i64, e),
        |enc, _| {
            enc.fd(fd);
            enc.size(n as u64);
        },
    )
}
