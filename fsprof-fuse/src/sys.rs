//! Safe wrappers around the raw system calls the file systems use: one function per call, each
//! returning `io::Result` with the OS errno intact (see [`crate::errno`] for the one place it
//! becomes a FUSE reply). This is the only module with `unsafe`.
//!
//! Names passed to the kernel are copied into stack buffers (no allocation per call); names
//! longer than `NAME_MAX` fail with `ENAMETOOLONG` as they would on the lower file system.

#![allow(unsafe_code)]

use std::ffi::{CStr, OsStr};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;

/// Longest name component (bytes) accepted, as on Linux.
pub const NAME_MAX: usize = 255;
/// Longest path (bytes, with the terminating NUL) accepted for symlink targets.
pub const PATH_MAX: usize = 4096;

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn cvt_size(r: isize) -> io::Result<usize> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// Runs `f` with `bytes` as a NUL-terminated C string held on the stack (a name-sized buffer
/// for short strings, so the common case fills 256 bytes, not 4 KiB).
fn with_cstr<R>(bytes: &[u8], max: usize, f: impl FnOnce(&CStr) -> io::Result<R>) -> io::Result<R> {
    if bytes.len() > max || bytes.len() > PATH_MAX {
        return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
    }
    if bytes.len() <= NAME_MAX {
        cstr_in(&mut [0u8; NAME_MAX + 1], bytes, f)
    } else {
        cstr_in(&mut [0u8; PATH_MAX + 1], bytes, f)
    }
}

fn cstr_in<R>(
    buf: &mut [u8],
    bytes: &[u8],
    f: impl FnOnce(&CStr) -> io::Result<R>,
) -> io::Result<R> {
    buf[..bytes.len()].copy_from_slice(bytes);
    let c = CStr::from_bytes_until_nul(&buf[..=bytes.len()])
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    if c.to_bytes().len() != bytes.len() {
        // An interior NUL: no such name can exist.
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    f(c)
}

/// Runs `f` with a directory entry name as a C string (at most `NAME_MAX` bytes, no `/`).
pub fn with_name<R>(name: &OsStr, f: impl FnOnce(&CStr) -> io::Result<R>) -> io::Result<R> {
    let b = name.as_bytes();
    if b.contains(&b'/') {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    with_cstr(b, NAME_MAX, f)
}

/// Runs `f` with `/proc/self/fd/N` for `fd`: re-opens an `O_PATH` descriptor with real access
/// modes, or reaches the object for calls that have no descriptor-relative form.
pub fn with_proc_path<R>(fd: BorrowedFd, f: impl FnOnce(&CStr) -> io::Result<R>) -> io::Result<R> {
    let mut buf = [0u8; 32];
    let prefix = b"/proc/self/fd/";
    buf[..prefix.len()].copy_from_slice(prefix);
    let mut n = fd.as_raw_fd() as u32;
    let mut digits = [0u8; 10];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let d = &digits[i..];
    buf[prefix.len()..prefix.len() + d.len()].copy_from_slice(d);
    let c = CStr::from_bytes_until_nul(&buf).expect("NUL-terminated");
    f(c)
}

/// `open(2)` of an absolute or relative path (start-up only).
pub fn open_path(path: &std::path::Path, flags: i32) -> io::Result<OwnedFd> {
    with_cstr(path.as_os_str().as_bytes(), PATH_MAX, |c| {
        // SAFETY: `c` is a valid C string; the returned descriptor is new and owned by us.
        let fd = cvt(unsafe { libc::open(c.as_ptr(), flags | libc::O_CLOEXEC) })?;
        // SAFETY: `fd` was just returned by open and is not owned elsewhere.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    })
}

/// `openat(2)`: opens `name` in directory `dir`.
pub fn openat(dir: BorrowedFd, name: &OsStr, flags: i32, mode: u32) -> io::Result<OwnedFd> {
    with_name(name, |c| openat_c(dir, c, flags, mode))
}

fn openat_c(dir: BorrowedFd, c: &CStr, flags: i32, mode: u32) -> io::Result<OwnedFd> {
    // SAFETY: valid descriptor and C string; the result is a new descriptor we own.
    let fd = cvt(unsafe {
        libc::openat(
            dir.as_raw_fd(),
            c.as_ptr(),
            flags | libc::O_CLOEXEC,
            mode as libc::c_uint,
        )
    })?;
    // SAFETY: `fd` was just returned by openat and is not owned elsewhere.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Re-opens the object behind `fd` (typically `O_PATH`) with `flags`, through `/proc/self/fd`.
pub fn reopen(fd: BorrowedFd, flags: i32) -> io::Result<OwnedFd> {
    with_proc_path(fd, |p| {
        // SAFETY: valid C string; the result is a new descriptor we own.
        let r =
            cvt(unsafe { libc::open(p.as_ptr(), (flags & !libc::O_NOFOLLOW) | libc::O_CLOEXEC) })?;
        // SAFETY: `r` was just returned by open.
        Ok(unsafe { OwnedFd::from_raw_fd(r) })
    })
}

/// What `statx` tells us about an object.
#[derive(Debug, Clone, Copy)]
pub struct Stat {
    /// Device of the file system holding the object.
    pub dev: u64,
    /// Inode number on that device.
    pub ino: u64,
    /// Birth time in ns since the epoch, 0 when the file system does not report it.
    pub btime_ns: i128,
    /// `st_mode`.
    pub mode: u32,
    /// Link count.
    pub nlink: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Device number of a device file (new encoding, as FUSE wants it).
    pub rdev: u32,
    /// Size in bytes.
    pub size: u64,
    /// 512-byte blocks allocated.
    pub blocks: u64,
    /// Preferred I/O size.
    pub blksize: u32,
    /// Access time (s, ns).
    pub atime: (i64, u32),
    /// Modification time.
    pub mtime: (i64, u32),
    /// Status change time.
    pub ctime: (i64, u32),
}

fn new_encode_dev(major: u32, minor: u32) -> u32 {
    (minor & 0xff) | ((major & 0xfff) << 8) | ((minor & !0xff) << 12)
}

fn statx_c(dir: RawFd, c: &CStr, flags: i32) -> io::Result<Stat> {
    let mut sx = MaybeUninit::<libc::statx>::uninit();
    // SAFETY: valid C string and an out-pointer to a statx buffer of the right size.
    cvt(unsafe {
        libc::statx(
            dir,
            c.as_ptr(),
            flags | libc::AT_SYMLINK_NOFOLLOW | libc::AT_STATX_SYNC_AS_STAT,
            libc::STATX_BASIC_STATS | libc::STATX_BTIME,
            sx.as_mut_ptr(),
        )
    })?;
    // SAFETY: statx succeeded, so it filled the buffer.
    let sx = unsafe { sx.assume_init() };
    let t = |t: libc::statx_timestamp| (t.tv_sec, t.tv_nsec);
    let btime_ns = if sx.stx_mask & libc::STATX_BTIME != 0 {
        sx.stx_btime.tv_sec as i128 * 1_000_000_000 + sx.stx_btime.tv_nsec as i128
    } else {
        0
    };
    Ok(Stat {
        dev: libc::makedev(sx.stx_dev_major, sx.stx_dev_minor),
        ino: sx.stx_ino,
        btime_ns,
        mode: sx.stx_mode as u32,
        nlink: sx.stx_nlink,
        uid: sx.stx_uid,
        gid: sx.stx_gid,
        rdev: new_encode_dev(sx.stx_rdev_major, sx.stx_rdev_minor),
        size: sx.stx_size,
        blocks: sx.stx_blocks,
        blksize: sx.stx_blksize,
        atime: t(sx.stx_atime),
        mtime: t(sx.stx_mtime),
        ctime: t(sx.stx_ctime),
    })
}

/// `statx(2)` of `name` in `dir`, not following a final symlink.
pub fn statat(dir: BorrowedFd, name: &OsStr) -> io::Result<Stat> {
    with_name(name, |c| statx_c(dir.as_raw_fd(), c, 0))
}

/// `statx(2)` of the object `fd` refers to (works on `O_PATH` descriptors).
pub fn fstat(fd: BorrowedFd) -> io::Result<Stat> {
    statx_c(fd.as_raw_fd(), c"", libc::AT_EMPTY_PATH)
}

/// Largest file handle we keep (the kernel's `MAX_HANDLE_SZ`).
pub const MAX_HANDLE_SZ: usize = 128;

/// A file handle from `name_to_handle_at`, stored inline.
#[derive(Clone, PartialEq, Eq)]
pub struct FileHandle {
    handle_type: i32,
    len: u8,
    bytes: [u8; MAX_HANDLE_SZ],
}

impl std::fmt::Debug for FileHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "FileHandle(type {}, {} bytes)",
            self.handle_type, self.len
        )
    }
}

#[repr(C)]
struct RawHandle {
    handle_bytes: libc::c_uint,
    handle_type: libc::c_int,
    f_handle: [u8; MAX_HANDLE_SZ],
}

/// `name_to_handle_at(2)` of `name` in `dir` (not following symlinks): the handle and the mount
/// id it belongs to. `EOPNOTSUPP`/`EOVERFLOW` mean the file system cannot give one.
pub fn name_to_handle_at(dir: BorrowedFd, name: &OsStr) -> io::Result<(FileHandle, i32)> {
    with_name(name, |c| {
        let mut raw = RawHandle {
            handle_bytes: MAX_HANDLE_SZ as libc::c_uint,
            handle_type: 0,
            f_handle: [0; MAX_HANDLE_SZ],
        };
        let mut mount_id: libc::c_int = 0;
        let flags = if c.is_empty() { libc::AT_EMPTY_PATH } else { 0 };
        // SAFETY: `raw` is laid out like `struct file_handle` with MAX_HANDLE_SZ bytes of room,
        // as `handle_bytes` says; `mount_id` is a valid out-pointer.
        cvt(unsafe {
            libc::name_to_handle_at(
                dir.as_raw_fd(),
                c.as_ptr(),
                (&mut raw as *mut RawHandle).cast::<libc::file_handle>(),
                &mut mount_id,
                flags,
            )
        })?;
        let len = (raw.handle_bytes as usize).min(MAX_HANDLE_SZ);
        Ok((
            FileHandle {
                handle_type: raw.handle_type,
                len: len as u8,
                bytes: raw.f_handle,
            },
            mount_id,
        ))
    })
}

/// `open_by_handle_at(2)`: opens the object of `handle` on the file system of `mount_fd`.
/// Needs `CAP_DAC_READ_SEARCH`; `ESTALE` when the object no longer exists.
pub fn open_by_handle_at(
    mount_fd: BorrowedFd,
    handle: &FileHandle,
    flags: i32,
) -> io::Result<OwnedFd> {
    let mut raw = RawHandle {
        handle_bytes: handle.len as libc::c_uint,
        handle_type: handle.handle_type,
        f_handle: handle.bytes,
    };
    // SAFETY: `raw` is a valid `struct file_handle` of `handle_bytes` bytes; the result is a new
    // descriptor we own.
    let fd = cvt(unsafe {
        libc::open_by_handle_at(
            mount_fd.as_raw_fd(),
            (&mut raw as *mut RawHandle).cast::<libc::file_handle>(),
            flags | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: just returned by open_by_handle_at.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `mkdirat(2)`.
pub fn mkdirat(dir: BorrowedFd, name: &OsStr, mode: u32) -> io::Result<()> {
    // SAFETY: valid descriptor and C string.
    with_name(name, |c| {
        cvt(unsafe { libc::mkdirat(dir.as_raw_fd(), c.as_ptr(), mode) }).map(drop)
    })
}

/// `mknodat(2)`.
pub fn mknodat(dir: BorrowedFd, name: &OsStr, mode: u32, rdev: u64) -> io::Result<()> {
    with_name(name, |c| {
        // SAFETY: valid descriptor and C string.
        cvt(unsafe { libc::mknodat(dir.as_raw_fd(), c.as_ptr(), mode, rdev as libc::dev_t) })
            .map(drop)
    })
}

/// `symlinkat(2)`: creates `name` in `dir` pointing at `target`.
pub fn symlinkat(target: &[u8], dir: BorrowedFd, name: &OsStr) -> io::Result<()> {
    with_cstr(target, PATH_MAX - 1, |t| {
        with_name(name, |c| {
            // SAFETY: valid descriptor and C strings.
            cvt(unsafe { libc::symlinkat(t.as_ptr(), dir.as_raw_fd(), c.as_ptr()) }).map(drop)
        })
    })
}

/// `unlinkat(2)`; `dir_flag` removes a directory.
pub fn unlinkat(dir: BorrowedFd, name: &OsStr, dir_flag: bool) -> io::Result<()> {
    let flags = if dir_flag { libc::AT_REMOVEDIR } else { 0 };
    // SAFETY: valid descriptor and C string.
    with_name(name, |c| {
        cvt(unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), flags) }).map(drop)
    })
}

/// `renameat2(2)` with `RENAME_*` flags.
pub fn renameat2(
    olddir: BorrowedFd,
    oldname: &OsStr,
    newdir: BorrowedFd,
    newname: &OsStr,
    flags: u32,
) -> io::Result<()> {
    with_name(oldname, |o| {
        with_name(newname, |n| {
            // SAFETY: valid descriptors and C strings.
            cvt(unsafe {
                libc::renameat2(
                    olddir.as_raw_fd(),
                    o.as_ptr(),
                    newdir.as_raw_fd(),
                    n.as_ptr(),
                    flags,
                )
            })
            .map(drop)
        })
    })
}

/// `linkat(2)`: a new name `newname` in `newdir` for the object `fd` refers to. Uses
/// `AT_EMPTY_PATH` when `privileged` (needs `CAP_DAC_READ_SEARCH`), else `/proc/self/fd`.
pub fn link_fd(
    fd: BorrowedFd,
    newdir: BorrowedFd,
    newname: &OsStr,
    privileged: bool,
) -> io::Result<()> {
    with_name(newname, |n| {
        if privileged {
            // SAFETY: valid descriptors and C strings.
            cvt(unsafe {
                libc::linkat(
                    fd.as_raw_fd(),
                    c"".as_ptr(),
                    newdir.as_raw_fd(),
                    n.as_ptr(),
                    libc::AT_EMPTY_PATH,
                )
            })
            .map(drop)
        } else {
            with_proc_path(fd, |p| {
                // SAFETY: valid descriptors and C strings.
                cvt(unsafe {
                    libc::linkat(
                        libc::AT_FDCWD,
                        p.as_ptr(),
                        newdir.as_raw_fd(),
                        n.as_ptr(),
                        libc::AT_SYMLINK_FOLLOW,
                    )
                })
                .map(drop)
            })
        }
    })
}

/// `readlinkat(2)` of the symlink `fd` refers to, into `buf`; returns the length.
pub fn readlink_fd(fd: BorrowedFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: valid descriptor, empty path (the fd itself) and a writable buffer of its length.
    cvt_size(unsafe {
        libc::readlinkat(
            fd.as_raw_fd(),
            c"".as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    })
}

/// Changes the mode of the object `fd` refers to (via `/proc/self/fd`, which works for `O_PATH`).
pub fn chmod_fd(fd: BorrowedFd, mode: u32) -> io::Result<()> {
    // SAFETY: valid C string.
    with_proc_path(fd, |p| {
        cvt(unsafe { libc::chmod(p.as_ptr(), mode) }).map(drop)
    })
}

/// `fchmod(2)` on an open (non-`O_PATH`) descriptor.
pub fn fchmod(fd: BorrowedFd, mode: u32) -> io::Result<()> {
    // SAFETY: valid descriptor.
    cvt(unsafe { libc::fchmod(fd.as_raw_fd(), mode) }).map(drop)
}

/// `fchownat(2)` with `AT_EMPTY_PATH`: owner and group of the object `fd` refers to
/// (`u32::MAX` leaves one unchanged).
pub fn chown_fd(fd: BorrowedFd, uid: u32, gid: u32) -> io::Result<()> {
    // SAFETY: valid descriptor and C string.
    cvt(unsafe {
        libc::fchownat(
            fd.as_raw_fd(),
            c"".as_ptr(),
            uid,
            gid,
            libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
        )
    })
    .map(drop)
}

/// Truncates the object `fd` refers to (via `/proc/self/fd`; works for `O_PATH`).
pub fn truncate_fd(fd: BorrowedFd, size: u64) -> io::Result<()> {
    with_proc_path(fd, |p| {
        // SAFETY: valid C string.
        cvt(unsafe { libc::truncate(p.as_ptr(), size as libc::off_t) }).map(drop)
    })
}

/// `ftruncate(2)`.
pub fn ftruncate(fd: BorrowedFd, size: u64) -> io::Result<()> {
    // SAFETY: valid descriptor.
    cvt(unsafe { libc::ftruncate(fd.as_raw_fd(), size as libc::off_t) }).map(drop)
}

/// A time for [`utimens_fd`].
#[derive(Debug, Clone, Copy)]
pub enum SetTime {
    /// Leave unchanged (`UTIME_OMIT`).
    Omit,
    /// The current time (`UTIME_NOW`).
    Now,
    /// Seconds and nanoseconds since the epoch.
    At(i64, u32),
}

fn timespec(t: SetTime) -> libc::timespec {
    match t {
        SetTime::Omit => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_OMIT,
        },
        SetTime::Now => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_NOW,
        },
        SetTime::At(s, ns) => libc::timespec {
            tv_sec: s,
            tv_nsec: ns as libc::c_long,
        },
    }
}

/// `utimensat(2)` with `AT_EMPTY_PATH` on the object `fd` refers to.
pub fn utimens_fd(fd: BorrowedFd, atime: SetTime, mtime: SetTime) -> io::Result<()> {
    let ts = [timespec(atime), timespec(mtime)];
    // SAFETY: valid descriptor, C string and a two-element timespec array.
    cvt(unsafe {
        libc::utimensat(
            fd.as_raw_fd(),
            c"".as_ptr(),
            ts.as_ptr(),
            libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
        )
    })
    .map(drop)
}

/// `futimens(2)` on an open descriptor.
pub fn futimens(fd: BorrowedFd, atime: SetTime, mtime: SetTime) -> io::Result<()> {
    let ts = [timespec(atime), timespec(mtime)];
    // SAFETY: valid descriptor and a two-element timespec array.
    cvt(unsafe { libc::futimens(fd.as_raw_fd(), ts.as_ptr()) }).map(drop)
}

/// `pread(2)`.
pub fn pread(fd: BorrowedFd, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    // SAFETY: valid descriptor and a writable buffer of its length.
    cvt_size(unsafe {
        libc::pread(
            fd.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            offset as libc::off_t,
        )
    })
}

/// `pwrite(2)`.
pub fn pwrite(fd: BorrowedFd, buf: &[u8], offset: u64) -> io::Result<usize> {
    // SAFETY: valid descriptor and a readable buffer of its length.
    cvt_size(unsafe {
        libc::pwrite(
            fd.as_raw_fd(),
            buf.as_ptr().cast(),
            buf.len(),
            offset as libc::off_t,
        )
    })
}

/// `fsync(2)` or `fdatasync(2)`.
pub fn fsync(fd: BorrowedFd, datasync: bool) -> io::Result<()> {
    // SAFETY: valid descriptor.
    cvt(unsafe {
        if datasync {
            libc::fdatasync(fd.as_raw_fd())
        } else {
            libc::fsync(fd.as_raw_fd())
        }
    })
    .map(drop)
}

/// `fallocate(2)`.
pub fn fallocate(fd: BorrowedFd, mode: i32, offset: u64, len: u64) -> io::Result<()> {
    // SAFETY: valid descriptor.
    cvt(unsafe {
        libc::fallocate(
            fd.as_raw_fd(),
            mode,
            offset as libc::off_t,
            len as libc::off_t,
        )
    })
    .map(drop)
}

/// `lseek(2)`.
pub fn lseek(fd: BorrowedFd, offset: i64, whence: i32) -> io::Result<i64> {
    // SAFETY: valid descriptor.
    let r = unsafe { libc::lseek(fd.as_raw_fd(), offset, whence) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// `copy_file_range(2)`.
pub fn copy_file_range(
    fd_in: BorrowedFd,
    off_in: u64,
    fd_out: BorrowedFd,
    off_out: u64,
    len: u64,
    flags: u32,
) -> io::Result<usize> {
    let mut i = off_in as libc::loff_t;
    let mut o = off_out as libc::loff_t;
    // SAFETY: valid descriptors and offset out-pointers.
    cvt_size(unsafe {
        libc::copy_file_range(
            fd_in.as_raw_fd(),
            &mut i,
            fd_out.as_raw_fd(),
            &mut o,
            len as usize,
            flags,
        )
    })
}

/// `dup(2)`.
pub fn dup(fd: BorrowedFd) -> io::Result<OwnedFd> {
    fd.try_clone_to_owned()
}

/// Borrows the descriptor behind a FUSE file handle of an open file.
///
/// The file systems here hand out an open file's lower descriptor number as its FUSE handle
/// (`open`, `create`) and close it only in [`fh_take`] from `release`. The kernel passes a file
/// handle back only while the file is open and sends nothing on it after its release, so the
/// descriptor is open for as long as the request that carries the handle runs. Callers must
/// route only file (not directory or control-file) handles here.
#[inline]
pub fn fh_fd(fh: u64) -> BorrowedFd<'static> {
    // SAFETY: per the FUSE protocol argument above, `fh` is an open descriptor of ours for the
    // duration of the request; 'static only stands for "the request".
    unsafe { BorrowedFd::borrow_raw(fh as RawFd) }
}

/// Takes back ownership of the descriptor behind a released FUSE file handle, to close it.
pub fn fh_take(fh: u64) -> OwnedFd {
    // SAFETY: `release` is sent exactly once per handle, after every other request on it; the
    // descriptor is ours (see `fh_fd`) and nothing else owns it.
    unsafe { OwnedFd::from_raw_fd(fh as RawFd) }
}

/// `getdents64(2)` into `buf`; returns the bytes filled (0 at the end of the directory).
pub fn getdents64(fd: BorrowedFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: valid descriptor and a writable buffer of its length.
    let r = unsafe {
        libc::syscall(
            libc::SYS_getdents64,
            fd.as_raw_fd(),
            buf.as_mut_ptr(),
            buf.len(),
        )
    };
    cvt_size(r as isize)
}

/// One record of a `getdents64` buffer.
#[derive(Debug, Clone, Copy)]
pub struct DirEntry<'a> {
    /// Inode number.
    pub ino: u64,
    /// Offset of the next entry (for seeking back here later).
    pub next_off: i64,
    /// `DT_*` type.
    pub d_type: u8,
    /// Name (no NUL).
    pub name: &'a [u8],
}

/// Parses the record at `pos` of a `getdents64` buffer; returns it and the next position.
pub fn parse_dirent(buf: &[u8], pos: usize) -> Option<(DirEntry<'_>, usize)> {
    // struct linux_dirent64 { u64 d_ino; i64 d_off; u16 d_reclen; u8 d_type; char d_name[]; }
    let rec = buf.get(pos..pos + 19)?;
    let ino = u64::from_ne_bytes(rec[0..8].try_into().ok()?);
    let next_off = i64::from_ne_bytes(rec[8..16].try_into().ok()?);
    let reclen = u16::from_ne_bytes(rec[16..18].try_into().ok()?) as usize;
    let d_type = rec[18];
    if reclen < 19 {
        return None;
    }
    let name_area = buf.get(pos + 19..pos + reclen)?;
    let len = name_area
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(name_area.len());
    Some((
        DirEntry {
            ino,
            next_off,
            d_type,
            name: &name_area[..len],
        },
        pos + reclen,
    ))
}

/// `fstatvfs(3)`.
pub fn fstatvfs(fd: BorrowedFd) -> io::Result<libc::statvfs> {
    let mut st = MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: valid descriptor and out-pointer; works on O_PATH descriptors.
    cvt(unsafe { libc::fstatvfs(fd.as_raw_fd(), st.as_mut_ptr()) })?;
    // SAFETY: fstatvfs succeeded and filled it.
    Ok(unsafe { st.assume_init() })
}

/// A POSIX record lock over a whole file (`fcntl(F_SETLK)`, non-blocking): `write` for
/// `F_WRLCK`, else `F_RDLCK`; `EAGAIN`/`EACCES` when another process holds a conflicting lock.
pub fn posix_lock(fd: BorrowedFd, write: bool) -> io::Result<()> {
    // SAFETY: a zeroed flock is a valid "whole file from offset 0" request once l_type and
    // l_whence are set.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = if write { libc::F_WRLCK } else { libc::F_RDLCK } as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    // SAFETY: valid descriptor and pointer to an initialized flock.
    cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETLK, &fl) }).map(drop)
}

/// `poll(2)` of one descriptor for `events` (`POLLIN`...), waiting at most `timeout_ms`;
/// returns the events that are ready (0 on time-out).
pub fn poll(fd: BorrowedFd, events: i16, timeout_ms: i32) -> io::Result<i16> {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events,
        revents: 0,
    };
    // SAFETY: one valid pollfd, as the count says.
    cvt(unsafe { libc::poll(&mut p, 1, timeout_ms) })?;
    Ok(p.revents)
}

/// `ioctl(fd, TCGETS)`: what `isatty(3)` asks. `Ok` for a terminal; a file answers `ENOTTY`.
pub fn tcgets(fd: BorrowedFd) -> io::Result<()> {
    let mut t = MaybeUninit::<libc::termios>::uninit();
    // SAFETY: valid descriptor; TCGETS writes at most one termios into the out-pointer.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TCGETS, t.as_mut_ptr()) }).map(drop)
}

/// `fstatfs(2)`'s file-system type (`f_type` magic number).
#[allow(clippy::unnecessary_cast)] // `f_type` is i64 on x86_64 but narrower elsewhere
pub fn fstatfs_type(fd: BorrowedFd) -> io::Result<i64> {
    let mut st = MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: valid descriptor and out-pointer; works on O_PATH descriptors.
    cvt(unsafe { libc::fstatfs(fd.as_raw_fd(), st.as_mut_ptr()) })?;
    // SAFETY: fstatfs succeeded and filled it.
    Ok(unsafe { st.assume_init() }.f_type as i64)
}

/// `getxattr(2)` on the object `fd` refers to (via `/proc/self/fd`); an empty `buf` asks for
/// the size.
pub fn getxattr_fd(fd: BorrowedFd, name: &OsStr, buf: &mut [u8]) -> io::Result<usize> {
    with_proc_path(fd, |p| getxattr_path(p, name, buf, true))
}

/// `getxattr(2)` (`follow`) or `lgetxattr(2)` of `path`.
fn getxattr_path(path: &CStr, name: &OsStr, buf: &mut [u8], follow: bool) -> io::Result<usize> {
    with_cstr(name.as_bytes(), 255, |n| {
        let (p, n, b, len) = (path.as_ptr(), n.as_ptr(), buf_ptr(buf), buf.len());
        // SAFETY: valid C strings and a writable buffer of its length (or null for size 0).
        cvt_size(unsafe {
            if follow {
                libc::getxattr(p, n, b, len)
            } else {
                libc::lgetxattr(p, n, b, len)
            }
        })
    })
}

/// `setxattr(2)` (`follow`) or `lsetxattr(2)` of `path`.
fn setxattr_path(
    path: &CStr,
    name: &OsStr,
    value: &[u8],
    flags: i32,
    follow: bool,
) -> io::Result<()> {
    with_cstr(name.as_bytes(), 255, |n| {
        let (p, n, v, len) = (
            path.as_ptr(),
            n.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
        );
        // SAFETY: valid C strings and a readable value buffer of its length.
        cvt(unsafe {
            if follow {
                libc::setxattr(p, n, v, len, flags)
            } else {
                libc::lsetxattr(p, n, v, len, flags)
            }
        })
        .map(drop)
    })
}

fn buf_ptr(buf: &mut [u8]) -> *mut libc::c_void {
    if buf.is_empty() {
        std::ptr::null_mut()
    } else {
        buf.as_mut_ptr().cast()
    }
}

/// `listxattr(2)` on the object `fd` refers to; an empty `buf` asks for the size.
pub fn listxattr_fd(fd: BorrowedFd, buf: &mut [u8]) -> io::Result<usize> {
    with_proc_path(fd, |p| {
        // SAFETY: valid C string and buffer.
        cvt_size(unsafe { libc::listxattr(p.as_ptr(), buf_ptr(buf).cast(), buf.len()) })
    })
}

/// `setxattr(2)` on the object `fd` refers to.
pub fn setxattr_fd(fd: BorrowedFd, name: &OsStr, value: &[u8], flags: i32) -> io::Result<()> {
    with_proc_path(fd, |p| setxattr_path(p, name, value, flags, true))
}

/// `removexattr(2)` on the object `fd` refers to.
pub fn removexattr_fd(fd: BorrowedFd, name: &OsStr) -> io::Result<()> {
    with_proc_path(fd, |p| {
        with_cstr(name.as_bytes(), 255, |n| {
            // SAFETY: valid C strings.
            cvt(unsafe { libc::removexattr(p.as_ptr(), n.as_ptr()) }).map(drop)
        })
    })
}

/// Runs `f` with `/proc/self/fd/DIR/NAME`: reaches an entry of a directory for calls that have
/// no descriptor-relative form (the `l*xattr` family), without opening it.
fn with_proc_child<R>(
    dir: BorrowedFd,
    name: &OsStr,
    f: impl FnOnce(&CStr) -> io::Result<R>,
) -> io::Result<R> {
    let nb = name.as_bytes();
    if nb.contains(&b'/') {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    if nb.len() > NAME_MAX {
        return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
    }
    with_proc_path(dir, |p| {
        let pb = p.to_bytes();
        let mut path = [0u8; 32 + 1 + NAME_MAX];
        path[..pb.len()].copy_from_slice(pb);
        path[pb.len()] = b'/';
        path[pb.len() + 1..pb.len() + 1 + nb.len()].copy_from_slice(nb);
        with_cstr(&path[..pb.len() + 1 + nb.len()], PATH_MAX, f)
    })
}

/// `lgetxattr(2)` of the entry `name` in directory `dir` (a final symlink is not followed);
/// an empty `buf` asks for the size.
pub fn getxattr_at(
    dir: BorrowedFd,
    name: &OsStr,
    attr: &OsStr,
    buf: &mut [u8],
) -> io::Result<usize> {
    with_proc_child(dir, name, |p| getxattr_path(p, attr, buf, false))
}

/// `lsetxattr(2)` of the entry `name` in directory `dir`.
pub fn setxattr_at(
    dir: BorrowedFd,
    name: &OsStr,
    attr: &OsStr,
    value: &[u8],
    flags: i32,
) -> io::Result<()> {
    with_proc_child(dir, name, |p| setxattr_path(p, attr, value, flags, false))
}

/// `fgetxattr(2)` on an open (not `O_PATH`) descriptor; an empty `buf` asks for the size.
pub fn fgetxattr(fd: BorrowedFd, attr: &OsStr, buf: &mut [u8]) -> io::Result<usize> {
    with_cstr(attr.as_bytes(), 255, |n| {
        // SAFETY: valid descriptor, C string and a writable buffer of its length (or null).
        cvt_size(unsafe { libc::fgetxattr(fd.as_raw_fd(), n.as_ptr(), buf_ptr(buf), buf.len()) })
    })
}

/// `fsetxattr(2)` on an open (not `O_PATH`) descriptor.
pub fn fsetxattr(fd: BorrowedFd, attr: &OsStr, value: &[u8], flags: i32) -> io::Result<()> {
    with_cstr(attr.as_bytes(), 255, |n| {
        // SAFETY: valid descriptor, C string and a readable value buffer of its length.
        cvt(unsafe {
            libc::fsetxattr(
                fd.as_raw_fd(),
                n.as_ptr(),
                value.as_ptr().cast(),
                value.len(),
                flags,
            )
        })
        .map(drop)
    })
}

/// Sets the calling thread's umask to `mask`. The first call gives the thread its own
/// file-system context (cwd, root, umask; `unshare(CLONE_FS)`), so the rest of the process is
/// not touched; the mask is remembered per thread and `umask(2)` runs only when it changes
/// (callers nearly always pass the same one).
pub fn set_thread_umask(mask: u32) -> io::Result<()> {
    thread_local! {
        /// This thread's umask once its context is private; `u32::MAX` before.
        static UMASK: std::cell::Cell<u32> = const { std::cell::Cell::new(u32::MAX) };
    }
    let current = UMASK.with(|u| u.get());
    if current == mask {
        return Ok(());
    }
    if current == u32::MAX {
        // SAFETY: unshare with CLONE_FS only copies this thread's fs_struct; no memory arguments.
        cvt(unsafe { libc::unshare(libc::CLONE_FS) })?;
    }
    umask(mask);
    UMASK.with(|u| u.set(mask));
    Ok(())
}

/// The supplementary groups of process `pid` (from `/proc/PID/status`).
pub fn process_groups(pid: u32) -> io::Result<Vec<u32>> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("Groups:"))
        .ok_or_else(|| io::Error::from_raw_os_error(libc::ESRCH))?;
    Ok(line
        .split_whitespace()
        .filter_map(|g| g.parse().ok())
        .collect())
}

/// This thread's supplementary groups replaced for as long as the guard lives (the raw
/// `setgroups` system call is per-thread; glibc's wrapper would change every thread).
pub struct ThreadGroups {
    old: Vec<libc::gid_t>,
}

impl ThreadGroups {
    /// Sets `groups` on this thread; needs `CAP_SETGID`.
    pub fn set(groups: &[u32]) -> io::Result<ThreadGroups> {
        let mut old = vec![0 as libc::gid_t; 1024];
        // SAFETY: valid buffer of the stated length.
        let n = cvt(unsafe { libc::getgroups(old.len() as libc::c_int, old.as_mut_ptr()) })?;
        old.truncate(n as usize);
        // SAFETY: raw per-thread setgroups with a valid array of the stated length.
        let r = unsafe { libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(ThreadGroups { old })
    }
}

impl Drop for ThreadGroups {
    fn drop(&mut self) {
        // SAFETY: as in `set`, restoring the list read then.
        unsafe { libc::syscall(libc::SYS_setgroups, self.old.len(), self.old.as_ptr()) };
    }
}

/// This thread's file-system uid and gid switched to a caller's for as long as the guard lives
/// (`setfsuid`/`setfsgid` are per-thread system calls). Used while creating objects so they
/// belong to the caller, as on a local file system.
pub struct FsCreds {
    uid: u32,
    gid: u32,
}

impl FsCreds {
    /// Switches to `uid`/`gid` (no-op when they are already ours).
    pub fn switch(uid: u32, gid: u32) -> FsCreds {
        // SAFETY: raw per-thread syscalls without memory arguments. The gid goes first: after
        // the uid changes, changing the gid may no longer be allowed.
        unsafe {
            let old_gid = libc::syscall(libc::SYS_setfsgid, gid) as u32;
            let old_uid = libc::syscall(libc::SYS_setfsuid, uid) as u32;
            FsCreds {
                uid: old_uid,
                gid: old_gid,
            }
        }
    }
}

impl Drop for FsCreds {
    fn drop(&mut self) {
        // SAFETY: as in `switch`; the uid goes back first so the gid change is allowed again.
        unsafe {
            libc::syscall(libc::SYS_setfsuid, self.uid);
            libc::syscall(libc::SYS_setfsgid, self.gid);
        }
    }
}

/// Effective uid of the process.
pub fn geteuid() -> u32 {
    // SAFETY: no arguments, cannot fail.
    unsafe { libc::geteuid() }
}

/// Effective gid of the process.
pub fn getegid() -> u32 {
    // SAFETY: no arguments, cannot fail.
    unsafe { libc::getegid() }
}

/// Sets the process umask; returns the old one.
pub fn umask(mask: u32) -> u32 {
    // SAFETY: cannot fail.
    unsafe { libc::umask(mask) }
}

/// Raises the soft open-file limit to the hard limit; returns the new soft limit.
pub fn raise_nofile_limit() -> io::Result<u64> {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid out-pointer.
    cvt(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) })?;
    if rl.rlim_cur < rl.rlim_max {
        rl.rlim_cur = rl.rlim_max;
        // SAFETY: valid pointer to an rlimit.
        cvt(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &rl) })?;
    }
    Ok(rl.rlim_cur)
}

/// `umount2(2)`.
pub fn umount(path: &std::path::Path, detach: bool) -> io::Result<()> {
    with_cstr(path.as_os_str().as_bytes(), PATH_MAX, |c| {
        let flags = if detach { libc::MNT_DETACH } else { 0 };
        // SAFETY: valid C string.
        cvt(unsafe { libc::umount2(c.as_ptr(), flags) }).map(drop)
    })
}

/// Outcome of [`fork`].
pub enum Fork {
    /// In the parent, with the child's pid.
    Parent(i32),
    /// In the child.
    Child,
}

/// `fork(2)`. Call only while the process has a single thread.
pub fn fork() -> io::Result<Fork> {
    // SAFETY: the caller guarantees the process is single-threaded, so the child inherits a
    // consistent address space (no lock held by a thread that does not exist in the child).
    let pid = cvt(unsafe { libc::fork() })?;
    Ok(if pid == 0 {
        Fork::Child
    } else {
        Fork::Parent(pid)
    })
}

/// `setsid(2)`: detaches the daemon from the terminal's session.
pub fn setsid() -> io::Result<()> {
    // SAFETY: no arguments.
    cvt(unsafe { libc::setsid() }).map(drop)
}

/// `pipe2(2)` with `O_CLOEXEC`: (read end, write end).
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: valid two-element out-array.
    cvt(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// `dup2(2)`: makes `target` (e.g. 0, 1, 2) refer to what `fd` refers to.
pub fn dup2(fd: BorrowedFd, target: RawFd) -> io::Result<()> {
    // SAFETY: valid descriptor; target is replaced atomically.
    cvt(unsafe { libc::dup2(fd.as_raw_fd(), target) }).map(drop)
}

/// Blocks `SIGINT`, `SIGTERM` and `SIGHUP` in the calling thread (threads started later inherit
/// the mask), so one thread can wait for them with [`wait_for_termination`].
pub fn block_termination_signals() -> io::Result<()> {
    let set = termination_set();
    // SAFETY: valid signal set; null old-set pointer is allowed.
    let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if r != 0 {
        Err(io::Error::from_raw_os_error(r))
    } else {
        Ok(())
    }
}

fn termination_set() -> libc::sigset_t {
    let mut set = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigemptyset initializes the set; sigaddset with valid signal numbers.
    unsafe {
        libc::sigemptyset(set.as_mut_ptr());
        libc::sigaddset(set.as_mut_ptr(), libc::SIGINT);
        libc::sigaddset(set.as_mut_ptr(), libc::SIGTERM);
        libc::sigaddset(set.as_mut_ptr(), libc::SIGHUP);
        set.assume_init()
    }
}

/// Waits for one of the signals blocked by [`block_termination_signals`]; returns its number.
pub fn wait_for_termination() -> i32 {
    let set = termination_set();
    let mut sig = 0;
    // SAFETY: valid set and out-pointer; the signals are blocked so sigwait receives them.
    unsafe { libc::sigwait(&set, &mut sig) };
    sig
}

/// Ignores `SIGXFSZ` in this process: a write past its file-size limit (`RLIMIT_FSIZE`, e.g.
/// `ulimit -f` or systemd's `LimitFSIZE`) then fails with `EFBIG` instead of killing it. For a
/// daemon whose writes are made for its callers (they get `EFBIG`); not for a process that
/// starts other programs, which would inherit the disposition.
pub fn ignore_file_size_signal() -> io::Result<()> {
    // SAFETY: installs SIG_IGN for a valid signal number; no handler code of ours runs.
    if unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) } == libc::SIG_ERR {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Sends `sig` to this process.
pub fn raise_signal(sig: i32) {
    // SAFETY: kill on our own pid with a valid signal number.
    unsafe { libc::kill(libc::getpid(), sig) };
}

/// `waitpid(2)` without blocking: `Some(status)` if the child exited.
pub fn try_wait(pid: i32) -> Option<i32> {
    let mut status = 0;
    // SAFETY: valid out-pointer.
    let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    (r == pid).then_some(status)
}

/// A `MAP_SHARED` read-write mapping of a file, unmapped on drop: used by the tests of `mmap`
/// through a mount. Bytes are copied in and out; no reference into the mapping is handed out,
/// since another mapping or a `write(2)` may change them at any time.
#[doc(hidden)]
pub struct SharedMapping {
    ptr: *mut u8,
    len: usize,
}

impl SharedMapping {
    /// Maps the first `len` bytes of `file` (open for reading and writing). The mapping holds
    /// its own reference to the file, so `file` may be closed before the mapping is dropped.
    pub fn new(file: &std::fs::File, len: usize) -> io::Result<SharedMapping> {
        // SAFETY: a new mapping at an address the kernel picks, of an open descriptor; nothing
        // else in this process refers to that range until this value unmaps it.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(SharedMapping {
            ptr: ptr.cast(),
            len,
        })
    }

    /// A copy of the mapped bytes (loads through the page tables: may fault in pages).
    pub fn read(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.len];
        // SAFETY: `ptr` maps `len` readable bytes for the life of `self`; `out` has `len`
        // bytes and is not part of the mapping.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr, out.as_mut_ptr(), self.len) };
        out
    }

    /// Stores `data` at the start of the mapping (at most its length).
    pub fn write(&mut self, data: &[u8]) {
        let n = data.len().min(self.len);
        // SAFETY: `ptr` maps `len` >= `n` writable bytes for the life of `self`; `data` is
        // not part of the mapping.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr, n) };
    }

    /// `msync(MS_SYNC)`: written back through the file system before it returns.
    pub fn sync(&self) -> io::Result<()> {
        // SAFETY: the range is exactly this mapping.
        if unsafe { libc::msync(self.ptr.cast(), self.len, libc::MS_SYNC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for SharedMapping {
    fn drop(&mut self) {
        // SAFETY: the range is exactly this mapping; no reference into it exists.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_path_formats_fd_numbers() {
        let f = std::fs::File::open("/").unwrap();
        let fd = std::os::fd::AsFd::as_fd(&f);
        let s = with_proc_path(fd, |p| Ok(p.to_str().unwrap().to_string())).unwrap();
        assert_eq!(s, format!("/proc/self/fd/{}", fd.as_raw_fd()));
    }

    #[test]
    fn names_are_checked() {
        let long = OsStr::from_bytes(&[b'a'; 256]);
        let e = with_name(long, |_| Ok(())).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENAMETOOLONG));
        assert_eq!(
            with_name(OsStr::new("a/b"), |_| Ok(()))
                .unwrap_err()
                .raw_os_error(),
            Some(libc::EINVAL)
        );
        assert_eq!(
            with_name(OsStr::from_bytes(b"a\0b"), |_| Ok(()))
                .unwrap_err()
                .raw_os_error(),
            Some(libc::EINVAL)
        );
        with_name(OsStr::from_bytes(&[b'a'; 255]), |c| {
            assert_eq!(c.to_bytes().len(), 255);
            Ok(())
        })
        .unwrap();
    }

    #[test]
    fn xattrs_by_name_and_by_descriptor() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path();
        std::fs::write(dir.join("f"), b"x").unwrap();
        let d = std::fs::File::open(dir).unwrap();
        let d = std::os::fd::AsFd::as_fd(&d);
        let (name, attr) = (OsStr::new("f"), OsStr::new("user.fsprof.test"));
        match setxattr_at(d, name, attr, b"v1", 0) {
            // tmpfs before 6.6 and some others have no user xattrs.
            Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {}
            r => {
                r.unwrap();
                let mut buf = [0u8; 8];
                assert_eq!(getxattr_at(d, name, attr, &mut []).unwrap(), 2);
                assert_eq!(getxattr_at(d, name, attr, &mut buf).unwrap(), 2);
                assert_eq!(&buf[..2], b"v1");
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(dir.join("f"))
                    .unwrap();
                let f = std::os::fd::AsFd::as_fd(&f);
                fsetxattr(f, attr, b"v22", 0).unwrap();
                assert_eq!(fgetxattr(f, attr, &mut buf).unwrap(), 3);
                assert_eq!(&buf[..3], b"v22");
                let e = getxattr_at(d, OsStr::new("a/b"), attr, &mut buf).unwrap_err();
                assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
            }
        }
    }

    #[test]
    fn dirents_parse() {
        let dir = std::fs::File::open("/").unwrap();
        let mut buf = vec![0u8; 32768];
        let n = getdents64(std::os::fd::AsFd::as_fd(&dir), &mut buf).unwrap();
        let mut pos = 0;
        let mut names = Vec::new();
        while pos < n {
            let (e, next) = parse_dirent(&buf[..n], pos).unwrap();
            names.push(String::from_utf8_lossy(e.name).to_string());
            pos = next;
        }
        assert!(names.contains(&".".to_string()));
        assert!(names.contains(&"proc".to_string()));
    }
}
