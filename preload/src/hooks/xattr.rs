//! Extended attributes: set, get, list and remove, by path, by link and by descriptor.

use std::ffi::{c_char, c_int, c_void};

use libc::{size_t, ssize_t};

use super::real;
use crate::abi::id;
use crate::record::{ret, timed};

type SetFn =
    unsafe extern "C" fn(*const c_char, *const c_char, *const c_void, size_t, c_int) -> c_int;
type FsetFn = unsafe extern "C" fn(c_int, *const c_char, *const c_void, size_t, c_int) -> c_int;
type GetFn = unsafe extern "C" fn(*const c_char, *const c_char, *mut c_void, size_t) -> ssize_t;
type FgetFn = unsafe extern "C" fn(c_int, *const c_char, *mut c_void, size_t) -> ssize_t;
type ListFn = unsafe extern "C" fn(*const c_char, *mut c_char, size_t) -> ssize_t;
type FlistFn = unsafe extern "C" fn(c_int, *mut c_char, size_t) -> ssize_t;
type RemoveFn = unsafe extern "C" fn(*const c_char, *const c_char) -> c_int;
type FremoveFn = unsafe extern "C" fn(c_int, *const c_char) -> c_int;

macro_rules! set_hooks {
    ($($hook:ident, $sym:literal, $call:expr;)*) => {$(
        /// # Safety
        /// As `setxattr(2)`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $hook(
            path: *const c_char,
            name: *const c_char,
            value: *const c_void,
            size: size_t,
            flags: c_int,
        ) -> c_int {
            let real = real!($sym, SetFn, -1);
            timed(
                $call,
                // SAFETY: the caller's arguments, passed on.
                || unsafe { real(path, name, value, size, flags) },
                |r, e| ret(r as i64, e),
                |enc, _| {
                    // SAFETY: both are C strings per the call's contract.
                    unsafe {
                        enc.path(path);
                        enc.path(name);
                    }
                    enc.size(size as u64);
                    enc.flags(flags as u32 as u64);
                },
            )
        }
    )*};
}

set_hooks! {
    setxattr, c"setxattr", id::SETXATTR;
    lsetxattr, c"lsetxattr", id::LSETXATTR;
}

/// # Safety
/// As `fsetxattr(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fsetxattr(
    fd: c_int,
    name: *const c_char,
    value: *const c_void,
    size: size_t,
    flags: c_int,
) -> c_int {
    let real = real!(c"fsetxattr", FsetFn, -1);
    timed(
        id::FSETXATTR,
        // SAFETY: the caller's arguments, passed on.
        || unsafe { real(fd, name, value, size, flags) },
        |r, e| ret(r as i64, e),
        |enc, _| {
            enc.fd(fd);
            // SAFETY: a C string per the call's contract.
            unsafe { enc.path(name) };
            enc.size(size as u64);
            enc.flags(flags as u32 as u64);
        },
    )
}

macro_rules! get_hooks {
    ($($hook:ident, $sym:literal, $call:expr;)*) => {$(
        /// # Safety
        /// As `getxattr(2)`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $hook(
            path: *const c_char,
            name: *const c_char,
            value: *mut c_void,
            size: size_t,
        ) -> ssize_t {
            let real = real!($sym, GetFn, -1);
            timed(
                $call,
                // SAFETY: the caller's arguments, passed on.
                || unsafe { real(path, name, value, size) },
                |r, e| ret(r as i64, e),
                |enc, _| {
                    // SAFETY: both are C strings per the call's contract.
                    unsafe {
                        enc.path(path);
                        enc.path(name);
                    }
                    enc.size(size as u64);
                },
            )
        }
    )*};
}

get_hooks! {
    getxattr, c"getxattr", id::GETXATTR;
    lgetxattr, c"lgetxattr", id::LGETXATTR;
}

/// # Safety
/// As `fgetxattr(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fgetxattr(
    fd: c_int,
    name: *const c_char,
    value: *mut c_void,
    size: size_t,
) -> ssize_t {
    let real = real!(c"fgetxattr", FgetFn, -1);
    timed(
        id::FGETXATTR,
        // SAFETY: the caller's arguments, passed on.
        || unsafe { real(fd, name, value, size) },
        |r, e| ret(r as i64, e),
        |enc, _| {
            enc.fd(fd);
            // SAFETY: a C string per the call's contract.
            unsafe { enc.path(name) };
            enc.size(size as u64);
        },
    )
}

macro_rules! list_hooks {
    ($($hook:ident, $sym:literal, $call:expr;)*) => {$(
        /// # Safety
        /// As `listxattr(2)`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $hook(path: *const c_char, list: *mut c_char, size: size_t) -> ssize_t {
            let real = real!($sym, ListFn, -1);
            timed(
                $call,
                // SAFETY: the caller's arguments, passed on.
                || unsafe { real(path, list, size) },
                |r, e| ret(r as i64, e),
                |enc, _| {
                    // SAFETY: a C string per the call's contract.
                    unsafe { enc.path(path) };
                    enc.size(size as u64);
                },
            )
        }
    )*};
}

list_hooks! {
    listxattr, c"listxattr", id::LISTXATTR;
    llistxattr, c"llistxattr", id::LLISTXATTR;
}

/// # Safety
/// As `flistxattr(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn flistxattr(fd: c_int, list: *mut c_char, size: size_t) -> ssize_t {
    let real = real!(c"flistxattr", FlistFn, -1);
    timed(
        id::FLISTXATTR,
        // SAFETY: the caller's arguments, passed on.
        || unsafe { real(fd, list, size) },
        |r, e| ret(r as i64, e),
        |enc, _| {
            enc.fd(fd);
            enc.size(size as u64);
        },
    )
}

macro_rules! remove_hooks {
    ($($hook:ident, $sym:literal, $call:expr;)*) => {$(
        /// # Safety
        /// As `removexattr(2)`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $hook(path: *const c_char, name: *const c_char) -> c_int {
            let real = real!($sym, RemoveFn, -1);
            timed(
                $call,
                // SAFETY: the caller's arguments, passed on.
                || unsafe { real(path, name) },
                |r, e| ret(r as i64, e),
                |enc, _| {
                    // SAFETY: both are C strings per the call's contract.
                    unsafe {
                        enc.path(path);
                        enc.path(name);
                    }
                },
            )
        }
    )*};
}

remove_hooks! {
    removexattr, c"removexattr", id::REMOVEXATTR;
    lremovexattr, c"lremovexattr", id::LREMOVEXATTR;
}

/// # Safety
/// As `fremovexattr(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fremovexattr(fd: c_int, name: *const c_char) -> c_int {
    let real = real!(c"fremovexattr", FremoveFn, -1);
    timed(
        id::FREMOVEXATTR,
        // SAFETY: the caller's arguments, passed on.
        || unsafe { real(fd, name) },
        |r, e| ret(r as i64, e),
        |enc, _| {
            enc.fd(fd);
            // SAFETY: a C string per the call's contract.
            unsafe { enc.path(name) };
        },
    )
}
