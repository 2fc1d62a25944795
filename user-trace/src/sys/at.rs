//! The calls a replay makes relative to a directory descriptor, so that no path it hands the
//! kernel is walked from anywhere but a directory it resolved itself: `openat2(2)` (through
//! `syscall`: glibc has no wrapper), the `*at` calls that act on one name in a directory, and
//! the calls on a descriptor opened with `O_PATH`. Each returns what a trace records (the
//! result, or `-errno`) or, for `openat2`, the owned descriptor.

use std::ffi::{CStr, CString, c_int};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use super::calls::StatInfo;

fn errno() -> i64 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO) as i64
}

/// The return value, or `-errno` when it is -1.
fn r(v: i64) -> i64 {
    if v == -1 { -errno() } else { v }
}

/// `openat2(dir, path, {flags, mode, resolve})`: the new descriptor, or `-errno`.
pub fn openat2(
    dir: BorrowedFd<'_>,
    path: &CStr,
    flags: u64,
    mode: u64,
    resolve: u64,
) -> Result<OwnedFd, i64> {
    // SAFETY: `open_how` is three integers, for which zero is valid.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = flags;
    how.mode = mode;
    how.resolve = resolve;
    // SAFETY: a valid C string and a valid `open_how` of the size passed; the call creates a
    // new descriptor and touches no other memory.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            path.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        return Err(-errno());
    }
    // SAFETY: the descriptor was just created and is owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as c_int) })
}

/// `open(path, O_PATH | O_DIRECTORY | O_CLOEXEC)`: a handle on a directory to resolve
/// beneath.
pub fn open_dir_path(path: &CStr) -> Result<OwnedFd, i64> {
    let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC;
    // SAFETY: a valid C string; the call creates a new descriptor.
    let fd = unsafe { libc::open(path.as_ptr(), flags) };
    if fd < 0 {
        return Err(-errno());
    }
    // SAFETY: the descriptor was just created and is owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `mkdirat(dir, name, mode)`.
pub fn mkdirat(dir: BorrowedFd<'_>, name: &CStr, mode: u32) -> i64 {
    // SAFETY: a valid C string.
    r(unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), mode) } as i64)
}

/// `unlinkat(dir, name, flags)`.
pub fn unlinkat(dir: BorrowedFd<'_>, name: &CStr, flags: c_int) -> i64 {
    // SAFETY: a valid C string.
    r(unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), flags) } as i64)
}

/// `renameat2(old_dir, old, new_dir, new, flags)`.
pub fn renameat2(
    old_dir: BorrowedFd<'_>,
    old: &CStr,
    new_dir: BorrowedFd<'_>,
    new: &CStr,
    flags: u32,
) -> i64 {
    // SAFETY: valid C strings.
    r(unsafe {
        libc::renameat2(
            old_dir.as_raw_fd(),
            old.as_ptr(),
            new_dir.as_raw_fd(),
            new.as_ptr(),
            flags,
        )
    } as i64)
}

/// `linkat(old_dir, old, new_dir, new, flags)`; `old_dir` `None` is `AT_FDCWD` (for a
/// `/proc/self/fd` path with `AT_SYMLINK_FOLLOW`).
pub fn linkat(
    old_dir: Option<BorrowedFd<'_>>,
    old: &CStr,
    new_dir: BorrowedFd<'_>,
    new: &CStr,
    flags: c_int,
) -> i64 {
    let od = old_dir.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
    // SAFETY: valid C strings.
    r(unsafe { libc::linkat(od, old.as_ptr(), new_dir.as_raw_fd(), new.as_ptr(), flags) } as i64)
}

/// `symlinkat(target, dir, name)`.
pub fn symlinkat(target: &CStr, dir: BorrowedFd<'_>, name: &CStr) -> i64 {
    // SAFETY: valid C strings.
    r(unsafe { libc::symlinkat(target.as_ptr(), dir.as_raw_fd(), name.as_ptr()) } as i64)
}

/// `readlinkat(dir, name)` into `buf`.
pub fn readlinkat(dir: BorrowedFd<'_>, name: &CStr, buf: &mut [u8]) -> i64 {
    // SAFETY: a valid C string and a writable buffer of its length.
    r(unsafe {
        libc::readlinkat(
            dir.as_raw_fd(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    } as i64)
}

/// `fstatat(dir, name, flags)`.
pub fn fstatat(dir: BorrowedFd<'_>, name: &CStr, flags: c_int) -> (i64, Option<StatInfo>) {
    // SAFETY: a zeroed stat is a valid output buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a valid C string and output buffer.
    let v = r(unsafe { libc::fstatat(dir.as_raw_fd(), name.as_ptr(), &mut st, flags) } as i64);
    (
        v,
        (v == 0).then_some((st.st_mode as u64, st.st_size as u64)),
    )
}

/// `fchownat(fd, "", uid, gid, AT_EMPTY_PATH)`: the owner of what `fd` (`O_PATH` will do)
/// refers to, a symbolic link itself included.
pub fn fchown_empty(fd: BorrowedFd<'_>, uid: u32, gid: u32) -> i64 {
    // SAFETY: a valid (empty) C string.
    r(
        unsafe { libc::fchownat(fd.as_raw_fd(), c"".as_ptr(), uid, gid, libc::AT_EMPTY_PATH) }
            as i64,
    )
}

/// `/proc/self/fd/N` for `fd`: a path that names exactly what `fd` refers to (the kernel
/// jumps to it without walking any name, and a symbolic link `fd` refers to is not followed
/// further), for the calls that have no descriptor form that takes an `O_PATH` descriptor.
pub fn proc_path(fd: BorrowedFd<'_>) -> CString {
    CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).expect("no NUL in a number")
}
