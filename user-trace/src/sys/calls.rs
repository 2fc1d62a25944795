//! The file-system calls a replay issues, one thin wrapper per C function, each returning what
//! a trace records: the return value, or `-errno`. Descriptors are plain integers here: the
//! replay's descriptor table owns them and closes them through [`close`]. The calls that take
//! a path are given one that walks no name the trace chose (`/proc/self/fd/N` of a descriptor
//! opened beneath the replay directory, made by the `at` module), or an empty one with
//! `AT_EMPTY_PATH`.

use std::ffi::{CStr, c_int, c_void};

/// The return value, or `-errno` when it is -1.
fn r(v: i64) -> i64 {
    if v == -1 {
        -(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO) as i64)
    } else {
        v
    }
}

/// A C string pointer or null.
fn opt(p: Option<&CStr>) -> *const libc::c_char {
    p.map_or(std::ptr::null(), CStr::as_ptr)
}

/// `close(fd)` of a descriptor the replay owns.
pub fn close(fd: c_int) -> i64 {
    // SAFETY: the caller owns `fd` and forgets it.
    r(unsafe { libc::close(fd) } as i64)
}

/// `fcntl(fd, F_DUPFD_CLOEXEC, min)`.
pub fn dup_min(fd: c_int, min: c_int) -> i64 {
    // SAFETY: no memory is involved.
    r(unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, min) } as i64)
}

/// The kind of transfer a replayed read or write uses.
#[derive(Debug, Clone, Copy)]
pub enum Io {
    /// `read`/`write`.
    Plain,
    /// `pread`/`pwrite` at an offset.
    At(i64),
    /// `readv`/`writev` with one vector.
    Vec,
    /// `preadv`/`pwritev` with one vector.
    VecAt(i64),
    /// `preadv2`/`pwritev2` with one vector and flags.
    VecAt2(i64, c_int),
}

/// Reads into `buf` the way `io` says.
pub fn read(fd: c_int, buf: &mut [u8], io: Io) -> i64 {
    let p = buf.as_mut_ptr().cast::<c_void>();
    let iov = libc::iovec {
        iov_base: p,
        iov_len: buf.len(),
    };
    // SAFETY: `buf` is valid for writes of its length; the iovec describes it.
    let v = unsafe {
        match io {
            Io::Plain => libc::read(fd, p, buf.len()),
            Io::At(o) => libc::pread(fd, p, buf.len(), o),
            Io::Vec => libc::readv(fd, &iov, 1),
            Io::VecAt(o) => libc::preadv(fd, &iov, 1, o),
            Io::VecAt2(o, f) => libc::preadv2(fd, &iov, 1, o, f),
        }
    };
    r(v as i64)
}

/// Writes `buf` the way `io` says.
pub fn write(fd: c_int, buf: &[u8], io: Io) -> i64 {
    let p = buf.as_ptr().cast::<c_void>();
    let iov = libc::iovec {
        iov_base: p as *mut c_void,
        iov_len: buf.len(),
    };
    // SAFETY: `buf` is valid for reads of its length; the iovec describes it.
    let v = unsafe {
        match io {
            Io::Plain => libc::write(fd, p, buf.len()),
            Io::At(o) => libc::pwrite(fd, p, buf.len(), o),
            Io::Vec => libc::writev(fd, &iov, 1),
            Io::VecAt(o) => libc::pwritev(fd, &iov, 1, o),
            Io::VecAt2(o, f) => libc::pwritev2(fd, &iov, 1, o, f),
        }
    };
    r(v as i64)
}

/// `lseek(fd, off, whence)`.
pub fn lseek(fd: c_int, off: i64, whence: c_int) -> i64 {
    // SAFETY: no memory is involved.
    r(unsafe { libc::lseek(fd, off, whence) })
}

/// File type and permission bits, and size, of a stat result.
pub type StatInfo = (u64, u64);

fn stat_out(v: c_int, st: &libc::stat) -> (i64, Option<StatInfo>) {
    let v = r(v as i64);
    (
        v,
        (v == 0).then_some((st.st_mode as u64, st.st_size as u64)),
    )
}

/// `fstat(fd)`.
pub fn fstat(fd: c_int) -> (i64, Option<StatInfo>) {
    // SAFETY: a zeroed stat is a valid output buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a valid output buffer.
    let v = unsafe { libc::fstat(fd, &mut st) };
    stat_out(v, &st)
}

/// `statx(dirfd, path, flags, mask)` (`path` may be empty with `AT_EMPTY_PATH`).
pub fn statx(dirfd: c_int, path: &CStr, flags: c_int, mask: u32) -> (i64, Option<StatInfo>) {
    // SAFETY: a zeroed statx is a valid output buffer.
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: a valid C string and output buffer.
    let v = r(unsafe { libc::statx(dirfd, path.as_ptr(), flags, mask, &mut st) } as i64);
    (v, (v == 0).then_some((st.stx_mode as u64, st.stx_size)))
}

/// `fstatfs(fd)` (an `O_PATH` descriptor will do).
pub fn fstatfs(fd: c_int) -> i64 {
    // SAFETY: a zeroed statfs is a valid output buffer.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid output buffer.
    r(unsafe { libc::fstatfs(fd, &mut st) } as i64)
}

/// `faccessat(AT_FDCWD, path, how, flags)`.
pub fn access(path: &CStr, how: c_int, flags: c_int) -> i64 {
    // SAFETY: a valid C string.
    r(unsafe { libc::faccessat(libc::AT_FDCWD, path.as_ptr(), how, flags) } as i64)
}

/// `truncate(path, len)` or `ftruncate(fd, len)`.
pub fn truncate(path: Option<&CStr>, fd: c_int, len: i64) -> i64 {
    // SAFETY: a valid C string or descriptor.
    let v = unsafe {
        match path {
            Some(p) => libc::truncate(p.as_ptr(), len),
            None => libc::ftruncate(fd, len),
        }
    };
    r(v as i64)
}

/// `fsync(fd)`, or `fdatasync(fd)` when `data_only`.
pub fn fsync(fd: c_int, data_only: bool) -> i64 {
    // SAFETY: no memory is involved.
    r(unsafe {
        if data_only {
            libc::fdatasync(fd)
        } else {
            libc::fsync(fd)
        }
    } as i64)
}

/// `fallocate(fd, mode, off, len)`.
pub fn fallocate(fd: c_int, mode: c_int, off: i64, len: i64) -> i64 {
    // SAFETY: no memory is involved.
    r(unsafe { libc::fallocate(fd, mode, off, len) } as i64)
}

/// `posix_fallocate(fd, off, len)`: 0 or `-errno`.
pub fn posix_fallocate(fd: c_int, off: i64, len: i64) -> i64 {
    // SAFETY: no memory is involved.
    -(unsafe { libc::posix_fallocate(fd, off, len) } as i64)
}

/// `copy_file_range(fd_in, off_in, fd_out, off_out, len, flags)`; offsets below 0 mean none.
pub fn copy_file_range(
    fd_in: c_int,
    off_in: i64,
    fd_out: c_int,
    off_out: i64,
    len: usize,
    flags: u32,
) -> i64 {
    let (mut oi, mut oo) = (off_in, off_out);
    let pi: *mut i64 = if off_in >= 0 {
        &mut oi
    } else {
        std::ptr::null_mut()
    };
    let po: *mut i64 = if off_out >= 0 {
        &mut oo
    } else {
        std::ptr::null_mut()
    };
    // SAFETY: the offset pointers are null or point to locals.
    r(unsafe { libc::copy_file_range(fd_in, pi, fd_out, po, len, flags) } as i64)
}

/// `sendfile(out, in, off, n)`; an offset below 0 means none.
pub fn sendfile(out: c_int, inp: c_int, off: i64, n: usize) -> i64 {
    let mut o = off;
    let p: *mut i64 = if off >= 0 {
        &mut o
    } else {
        std::ptr::null_mut()
    };
    // SAFETY: the offset pointer is null or points to a local.
    r(unsafe { libc::sendfile(out, inp, p, n) } as i64)
}

/// `getdents64(fd, buf)`.
pub fn getdents64(fd: c_int, buf: &mut [u8]) -> i64 {
    // SAFETY: a writable buffer of its length.
    r(unsafe { libc::syscall(libc::SYS_getdents64, fd, buf.as_mut_ptr(), buf.len()) })
}

/// `fchmodat(AT_FDCWD, path, mode, flags)` or `fchmod(fd, mode)`.
pub fn chmod(path: Option<&CStr>, fd: c_int, mode: u32, flags: c_int) -> i64 {
    // SAFETY: a valid C string or descriptor.
    let v = unsafe {
        match path {
            Some(p) => libc::fchmodat(libc::AT_FDCWD, p.as_ptr(), mode, flags),
            None => libc::fchmod(fd, mode),
        }
    };
    r(v as i64)
}

/// `fchown(fd, uid, gid)`.
pub fn fchown(fd: c_int, uid: u32, gid: u32) -> i64 {
    // SAFETY: no memory is involved.
    r(unsafe { libc::fchown(fd, uid, gid) } as i64)
}

/// `utimensat(dirfd, path, NULL, flags)`, or `futimens(dirfd, NULL)` without a path: times
/// set to now (traces hold no times). glibc's `utimensat` refuses a null path (`EINVAL`).
pub fn utimens(dirfd: c_int, path: Option<&CStr>, flags: c_int) -> i64 {
    // SAFETY: a valid C string, and a null times pointer (both times: now).
    let v = unsafe {
        match path {
            Some(p) => libc::utimensat(dirfd, p.as_ptr(), std::ptr::null(), flags),
            None => libc::futimens(dirfd, std::ptr::null()),
        }
    };
    r(v as i64)
}

/// Which xattr call to make.
#[derive(Debug, Clone, Copy)]
pub enum Xattr {
    /// `setxattr` family, with flags.
    Set(c_int),
    /// `getxattr` family.
    Get,
    /// `listxattr` family.
    List,
    /// `removexattr` family.
    Remove,
}

/// An xattr call on a path (following links unless `nofollow`) or a descriptor; `buf` is the
/// value (set) or the buffer (get, list).
pub fn xattr(
    path: Option<&CStr>,
    nofollow: bool,
    fd: c_int,
    name: Option<&CStr>,
    buf: &mut [u8],
    op: Xattr,
) -> i64 {
    let (n, b) = (opt(name), buf.as_mut_ptr().cast::<c_void>());
    let len = buf.len();
    // SAFETY: valid C strings (or null where the call takes none) and a buffer of `len` bytes.
    let v = unsafe {
        match (path, nofollow, op) {
            (Some(p), false, Xattr::Set(f)) => libc::setxattr(p.as_ptr(), n, b, len, f) as isize,
            (Some(p), true, Xattr::Set(f)) => libc::lsetxattr(p.as_ptr(), n, b, len, f) as isize,
            (None, _, Xattr::Set(f)) => libc::fsetxattr(fd, n, b, len, f) as isize,
            (Some(p), false, Xattr::Get) => libc::getxattr(p.as_ptr(), n, b, len),
            (Some(p), true, Xattr::Get) => libc::lgetxattr(p.as_ptr(), n, b, len),
            (None, _, Xattr::Get) => libc::fgetxattr(fd, n, b, len),
            (Some(p), false, Xattr::List) => libc::listxattr(p.as_ptr(), b.cast(), len),
            (Some(p), true, Xattr::List) => libc::llistxattr(p.as_ptr(), b.cast(), len),
            (None, _, Xattr::List) => libc::flistxattr(fd, b.cast(), len),
            (Some(p), false, Xattr::Remove) => libc::removexattr(p.as_ptr(), n) as isize,
            (Some(p), true, Xattr::Remove) => libc::lremovexattr(p.as_ptr(), n) as isize,
            (None, _, Xattr::Remove) => libc::fremovexattr(fd, n) as isize,
        }
    };
    r(v as i64)
}

/// `fcntl(fd, cmd, lock)` for a lock command, with the traced request.
pub fn fcntl_lock(fd: c_int, cmd: c_int, lock: [i64; 4]) -> i64 {
    // SAFETY: a zeroed flock is valid; the fields are set below.
    let mut l: libc::flock = unsafe { std::mem::zeroed() };
    l.l_type = lock[0] as libc::c_short;
    l.l_whence = lock[1] as libc::c_short;
    l.l_start = lock[2];
    l.l_len = lock[3];
    // SAFETY: a valid flock for a lock command.
    r(unsafe { libc::fcntl(fd, cmd, &mut l) } as i64)
}

/// `fcntl(fd, cmd, arg)` for a command with an integer argument (or none).
pub fn fcntl_int(fd: c_int, cmd: c_int, arg: c_int) -> i64 {
    // SAFETY: commands with an integer (or no) argument read no memory.
    r(unsafe { libc::fcntl(fd, cmd, arg) } as i64)
}

/// `flock(fd, op)`.
pub fn flock(fd: c_int, op: c_int) -> i64 {
    // SAFETY: no memory is involved.
    r(unsafe { libc::flock(fd, op) } as i64)
}

/// Raises the soft limit of open descriptors to the hard limit (a replay may hold as many as
/// every traced process together).
pub fn raise_fd_limit() {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid rlimit buffers.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0 && l.rlim_cur < l.rlim_max {
            l.rlim_cur = l.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &l);
        }
    }
}
