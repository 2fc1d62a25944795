//! Standard I/O streams: fopen, fdopen, freopen, fclose, fread, fwrite, fgets, fputs, fflush,
//! fseek, fseeko, ftell, ftello (and their `64`, `_unlocked` and fortified forms, under the same
//! names). A stream is traced by its descriptor. The reads and writes the C library makes to
//! fill and drain stream buffers are its own and not seen: the user layer is what the program
//! called.

use std::ffi::{c_char, c_int, c_long, c_void};

use libc::{FILE, off_t, size_t};

use super::real;
use crate::abi::id;
use crate::fds;
use crate::record::{ret, timed, timed_fd};
use crate::sys;

type FopenFn = unsafe extern "C" fn(*const c_char, *const c_char) -> *mut FILE;
type FdopenFn = unsafe extern "C" fn(c_int, *const c_char) -> *mut FILE;
type FreopenFn = unsafe extern "C" fn(*const c_char, *const c_char, *mut FILE) -> *mut FILE;
type StreamFn = unsafe extern "C" fn(*mut FILE) -> c_int;
type FreadFn = unsafe extern "C" fn(*mut c_void, size_t, size_t, *mut FILE) -> size_t;
type FreadChkFn = unsafe extern "C" fn(*mut c_void, size_t, size_t, size_t, *mut FILE) -> size_t;
type FwriteFn = unsafe extern "C" fn(*const c_void, size_t, size_t, *mut FILE) -> size_t;
type FgetsFn = unsafe extern "C" fn(*mut c_char, c_int, *mut FILE) -> *mut c_char;
type FgetsChkFn = unsafe extern "C" fn(*mut c_char, size_t, c_int, *mut FILE) -> *mut c_char;
type FputsFn = unsafe extern "C" fn(*const c_char, *mut FILE) -> c_int;
type FseekFn = unsafe extern "C" fn(*mut FILE, c_long, c_int) -> c_int;
type FseekoFn = unsafe extern "C" fn(*mut FILE, off_t, c_int) -> c_int;
type FtellFn = unsafe extern "C" fn(*mut FILE) -> c_long;
type FtelloFn = unsafe extern "C" fn(*mut FILE) -> off_t;

/// The trace result of a function returning a stream.
fn stream_result(fp: *mut FILE, err: i32) -> i64 {
    if fp.is_null() {
        -(err as i64)
    } else {
        // SAFETY: a stream the C library just returned.
        unsafe { sys::stream_fd(fp) as i64 }
    }
}

/// Forgets the kind of a new stream's descriptor ([`fds`]).
fn forget_stream(fp: *mut FILE) {
    if !fp.is_null() {
        fds::forget(fd_of(fp));
    }
}

/// The descriptor of a stream the caller passes (valid per the function's contract).
fn fd_of(fp: *mut FILE) -> c_int {
    // SAFETY: callers pass open streams (or null where the function allows it).
    unsafe { sys::stream_fd(fp) }
}

fn fopen_as(real: FopenFn, path: *const c_char, mode: *const c_char) -> *mut FILE {
    let r = timed(
        id::FOPEN,
        // SAFETY: the caller's arguments, passed on.
        || unsafe { real(path, mode) },
        stream_result,
        |enc, _| {
            // SAFETY: both are C strings per `fopen`'s contract.
            unsafe {
                enc.path(path);
                enc.path(mode);
            }
        },
    );
    forget_stream(r);
    r
}

/// # Safety
/// As `fopen(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fopen(path: *const c_char, mode: *const c_char) -> *mut FILE {
    fopen_as(real!(c"fopen", FopenFn, std::ptr::null_mut()), path, mode)
}

/// # Safety
/// As `fopen(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fopen64(path: *const c_char, mode: *const c_char) -> *mut FILE {
    fopen_as(real!(c"fopen64", FopenFn, std::ptr::null_mut()), path, mode)
}

/// # Safety
/// As `fdopen(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fdopen(fd: c_int, mode: *const c_char) -> *mut FILE {
    let real = real!(c"fdopen", FdopenFn, std::ptr::null_mut());
    let r = timed(
        id::FDOPEN,
        // SAFETY: the caller's arguments, passed on.
        || unsafe { real(fd, mode) },
        stream_result,
        |enc, _| {
            enc.fd(fd);
            // SAFETY: a C string per `fdopen`'s contract.
            unsafe { enc.path(mode) };
        },
    );
    forget_stream(r);
    r
}

fn freopen_as(
    real: FreopenFn,
    path: *const c_char,
    mode: *const c_char,
    fp: *mut FILE,
) -> *mut FILE {
    let old = fd_of(fp);
    let r = timed(
        id::FREOPEN,
        // SAFETY: the caller's arguments, passed on.
        || unsafe { real(path, mode, fp) },
        stream_result,
        |enc, _| {
            // SAFETY: `path` is null or a C string, `mode` a C string, per the contract.
            unsafe {
                enc.path(path);
                enc.path(mode);
            }
            enc.fd(old);
        },
    );
    forget_stream(r);
    r
}

/// # Safety
/// As `freopen(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn freopen(
    path: *const c_char,
    mode: *const c_char,
    fp: *mut FILE,
) -> *mut FILE {
    freopen_as(
        real!(c"freopen", FreopenFn, std::ptr::null_mut()),
        path,
        mode,
        fp,
    )
}

/// # Safety
/// As `freopen(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn freopen64(
    path: *const c_char,
    mode: *const c_char,
    fp: *mut FILE,
) -> *mut FILE {
    freopen_as(
        real!(c"freopen64", FreopenFn, std::ptr::null_mut()),
        path,
        mode,
        fp,
    )
}

/// A stream function returning 0 or `EOF` (with `errno`).
fn stream_call(call: u8, fd: c_int, real: impl FnOnce() -> c_int) -> c_int {
    timed_fd(
        call,
        fd,
        real,
        |r, e| if r == 0 { 0 } else { -(e as i64) },
        |enc, _| enc.fd(fd),
    )
}

/// # Safety
/// As `fclose(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fclose(fp: *mut FILE) -> c_int {
    let real = real!(c"fclose", StreamFn, libc::EOF);
    // Read before the stream is freed.
    let fd = fd_of(fp);
    // SAFETY: the caller's argument, passed on.
    let r = stream_call(id::FCLOSE, fd, || unsafe { real(fp) });
    fds::forget(fd);
    r
}

/// # Safety
/// As `fflush(3)` (`fp` may be null: every stream).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fflush(fp: *mut FILE) -> c_int {
    let real = real!(c"fflush", StreamFn, libc::EOF);
    // SAFETY: the caller's argument, passed on.
    stream_call(id::FFLUSH, fd_of(fp), || unsafe { real(fp) })
}

/// `fread`/`fwrite`: bytes asked and bytes transferred.
fn transfer(
    call: u8,
    fp: *mut FILE,
    size: size_t,
    n: size_t,
    real: impl FnOnce() -> size_t,
) -> size_t {
    let fd = fd_of(fp);
    timed_fd(
        call,
        fd,
        real,
        |items, _| (items as u64).saturating_mul(size as u64) as i64,
        |enc, _| {
            enc.fd(fd);
            enc.size((size as u64).saturating_mul(n as u64));
        },
    )
}

macro_rules! fread_hooks {
    ($($hook:ident, $sym:literal;)*) => {$(
        /// # Safety
        /// As `fread(3)`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $hook(ptr: *mut c_void, size: size_t, n: size_t, fp: *mut FILE) -> size_t {
            let real = real!($sym, FreadFn, 0);
            // SAFETY: the caller's arguments, passed on.
            transfer(id::FREAD, fp, size, n, || unsafe { real(ptr, size, n, fp) })
        }
    )*};
}

fread_hooks! {
    fread, c"fread";
    fread_unlocked, c"fread_unlocked";
}

macro_rules! fread_chk_hooks {
    ($($hook:ident, $sym:literal;)*) => {$(
        /// # Safety
        /// As `fread(3)`, with the fortified buffer check.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $hook(
            ptr: *mut c_void,
            len: size_t,
            size: size_t,
            n: size_t,
            fp: *mut FILE,
        ) -> size_t {
            let real = real!($sym, FreadChkFn, 0);
            // SAFETY: the caller's arguments, passed on.
            transfer(id::FREAD, fp, size, n, || unsafe { real(ptr, len, size, n, fp) })
        }
    )*};
}

fread_chk_hooks! {
    __fread_chk, c"__fread_chk";
    __fread_unlocked_chk, c"__fread_unlocked_chk";
}

macro_rules! fwrite_hooks {
    ($($hook:ident, $sym:literal;)*) => {$(
        /// # Safety
        /// As `fwrite(3)`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $hook(ptr: *const c_void, size: size_t, n: size_t, fp: *mut FILE) -> size_t {
            let real = real!($sym, FwriteFn, 0);
            // SAFETY: the caller's arguments, passed on.
            transfer(id::FWRITE, fp, size, n, || unsafe { real(ptr, size, n, fp) })
        }
    )*};
}

fwrite_hooks! {
    fwrite, c"fwrite";
    fwrite_unlocked, c"fwrite_unlocked";
}

/// `fgets`: the line's length, 0 at end of file, `-errno` on error.
fn fgets_call(fp: *mut FILE, n: c_int, real: impl FnOnce() -> *mut c_char) -> *mut c_char {
    let saved = sys::errno();
    sys::set_errno(0);
    let fd = fd_of(fp);
    let r = timed_fd(
        id::FGETS,
        fd,
        real,
        |s, e| {
            if s.is_null() {
                -(e as i64)
            } else {
                // SAFETY: a non-null result is the caller's buffer holding a C string.
                unsafe { sys::strnlen(s, n.max(0) as usize) as i64 }
            }
        },
        |enc, _| {
            enc.fd(fd);
            enc.size(n.max(0) as u64);
        },
    );
    if sys::errno() == 0 {
        sys::set_errno(saved);
    }
    r
}

macro_rules! fgets_hooks {
    ($($hook:ident, $sym:literal;)*) => {$(
        /// # Safety
        /// As `fgets(3)`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $hook(s: *mut c_char, n: c_int, fp: *mut FILE) -> *mut c_char {
            let real = real!($sym, FgetsFn, std::ptr::null_mut());
            // SAFETY: the caller's arguments, passed on.
            fgets_call(fp, n, || unsafe { real(s, n, fp) })
        }
    )*};
}

fgets_hooks! {
    fgets, c"fgets";
    fgets_unlocked, c"fgets_unlocked";
}

macro_rules! fgets_chk_hooks {
    ($($hook:ident, $sym:literal;)*) => {$(
        /// # Safety
        /// As `fgets(3)`, with the fortified buffer check.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $hook(s: *mut c_char, len: size_t, n: c_int, fp: *mut FILE) -> *mut c_char {
            let real = real!($sym, FgetsChkFn, std::ptr::null_mut());
            // SAFETY: the caller's arguments, passed on.
            fgets_call(fp, n, || unsafe { real(s, len, n, fp) })
        }
    )*};
}

fgets_chk_hooks! {
    __fgets_chk, c"__fgets_chk";
    __fgets_unlocked_chk, c"__fgets_unlocked_chk";
}

macro_rules! fputs_hooks {
    ($($hook:ident, $sym:literal;)*) => {$(
        /// # Safety
        /// As `fputs(3)`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $hook(s: *const c_char, fp: *mut FILE) -> c_int {
            let real = real!($sym, FputsFn, libc::EOF);
            timed_fd(
                id::FPUTS,
                fd_of(fp),
                // SAFETY: the caller's arguments, passed on.
                || unsafe { real(s, fp) },
                |r, e| if r >= 0 { 0 } else { -(e as i64) },
                |enc, _| {
                    enc.fd(fd_of(fp));
                    // SAFETY: `s` is a C string per `fputs`'s contract.
                    enc.size(unsafe { sys::strnlen(s, usize::MAX) } as u64);
                },
            )
        }
    )*};
}

fputs_hooks! {
    fputs, c"fputs";
    fputs_unlocked, c"fputs_unlocked";
}

/// `fseek`-like: descriptor, offset, whence; 0 or `-errno`.
fn seek_call(
    call: u8,
    fp: *mut FILE,
    off: i64,
    whence: c_int,
    real: impl FnOnce() -> c_int,
) -> c_int {
    let fd = fd_of(fp);
    timed_fd(
        call,
        fd,
        real,
        |r, e| if r == 0 { 0 } else { -(e as i64) },
        |enc, _| {
            enc.fd(fd);
            enc.off(off);
            enc.int(whence as i64);
        },
    )
}

/// # Safety
/// As `fseek(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fseek(fp: *mut FILE, off: c_long, whence: c_int) -> c_int {
    let real = real!(c"fseek", FseekFn, -1);
    // SAFETY: the caller's arguments, passed on.
    seek_call(id::FSEEK, fp, off, whence, || unsafe {
        real(fp, off, whence)
    })
}

/// # Safety
/// As `fseeko(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fseeko(fp: *mut FILE, off: off_t, whence: c_int) -> c_int {
    let real = real!(c"fseeko", FseekoFn, -1);
    // SAFETY: the caller's arguments, passed on.
    seek_call(id::FSEEKO, fp, off, whence, || unsafe {
        real(fp, off, whence)
    })
}

/// # Safety
/// As `fseeko(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fseeko64(fp: *mut FILE, off: off_t, whence: c_int) -> c_int {
    let real = real!(c"fseeko64", FseekoFn, -1);
    // SAFETY: the caller's arguments, passed on.
    seek_call(id::FSEEKO, fp, off, whence, || unsafe {
        real(fp, off, whence)
    })
}

/// # Safety
/// As `ftell(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ftell(fp: *mut FILE) -> c_long {
    let real = real!(c"ftell", FtellFn, -1);
    timed_fd(
        id::FTELL,
        fd_of(fp),
        // SAFETY: the caller's argument, passed on.
        || unsafe { real(fp) },
        ret,
        |enc, _| enc.fd(fd_of(fp)),
    )
}

fn ftello_as(real: FtelloFn, fp: *mut FILE) -> off_t {
    timed_fd(
        id::FTELLO,
        fd_of(fp),
        // SAFETY: the caller's argument, passed on.
        || unsafe { real(fp) },
        ret,
        |enc, _| enc.fd(fd_of(fp)),
    )
}

/// # Safety
/// As `ftello(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ftello(fp: *mut FILE) -> off_t {
    ftello_as(real!(c"ftello", FtelloFn, -1), fp)
}

/// # Safety
/// As `ftello(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ftello64(fp: *mut FILE) -> off_t {
    ftello_as(real!(c"ftello64", FtelloFn, -1), fp)
}
