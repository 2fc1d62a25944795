//! Files, directories and their data: open, stat, handles, names, reads and writes, listings.

#![allow(unsafe_code)]

use std::ffi::{CStr, OsStr};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;

use super::{PATH_MAX, cvt, cvt_size, with_cstr, with_name, with_proc_path};

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

/// The file status flags of an open descriptor (`fcntl(F_GETFL)`: `O_APPEND`, `O_DIRECT`...).
pub fn status_flags(fd: BorrowedFd) -> io::Result<i32> {
    // SAFETY: F_GETFL takes no argument.
    cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) })
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

/// `faccessat2(2)` of the relative path `path` (several components, no leading `/`) in `dir`
/// with `mode` (`X_OK`...), checked with this thread's effective ids (`AT_EACCESS`: its fs uid
/// and gid, supplementary groups and capabilities), not following a final symlink. Resolving
/// the path itself needs search permission on each directory in it.
pub fn access_at(dir: BorrowedFd, path: &[u8], mode: i32) -> io::Result<()> {
    super::with_cstr(path, super::PATH_MAX, |c| {
        // SAFETY: a valid descriptor and C string; no memory is written.
        let r = unsafe {
            libc::syscall(
                libc::SYS_faccessat2,
                dir.as_raw_fd(),
                c.as_ptr(),
                mode,
                libc::AT_EACCESS | libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    })
}

/// `statx(2)` of the relative path `path` (several components) in `dir`, not following a
/// final symlink.
pub fn stat_path_at(dir: BorrowedFd, path: &[u8]) -> io::Result<Stat> {
    super::with_cstr(path, super::PATH_MAX, |c| {
        statx_c(dir.as_raw_fd(), c, libc::AT_SYMLINK_NOFOLLOW)
    })
}

/// `statx(2)` of the object `fd` refers to (works on `O_PATH` descriptors).
pub fn fstat(fd: BorrowedFd) -> io::Result<Stat> {
    statx_c(fd.as_raw_fd(), c"", libc::AT_EMPTY_PATH)
}

/// The alignment `O_DIRECT` reads and writes of the file `fd` need, of their file offset and
/// length (`statx`'s `STATX_DIOALIGN`): `Some(0)` where the file system says the file takes
/// no direct I/O, `None` where it says nothing (older kernels, some file systems).
pub fn dio_offset_align(fd: BorrowedFd) -> io::Result<Option<u32>> {
    let mut sx = MaybeUninit::<libc::statx>::uninit();
    // SAFETY: an empty C string with AT_EMPTY_PATH (the object of `fd`) and an out-pointer to
    // a statx buffer of the right size.
    cvt(unsafe {
        libc::statx(
            fd.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH | libc::AT_STATX_SYNC_AS_STAT,
            libc::STATX_DIOALIGN,
            sx.as_mut_ptr(),
        )
    })?;
    // SAFETY: statx succeeded, so it filled the buffer.
    let sx = unsafe { sx.assume_init() };
    Ok((sx.stx_mask & libc::STATX_DIOALIGN != 0).then_some(sx.stx_dio_offset_align))
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

impl FileHandle {
    /// The handle's type (`handle_type`: which of its file system's encodings).
    pub fn handle_type(&self) -> i32 {
        self.handle_type
    }

    /// The handle's bytes (`f_handle`, as long as `handle_bytes` says).
    pub fn bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }

    /// The handle of type `handle_type` made of `bytes` (at most [`MAX_HANDLE_SZ`]: longer is
    /// `None`), as [`FileHandle::handle_type`] and [`FileHandle::bytes`] gave them.
    pub fn from_parts(handle_type: i32, bytes: &[u8]) -> Option<FileHandle> {
        let mut h = FileHandle {
            handle_type,
            len: u8::try_from(bytes.len()).ok()?,
            bytes: [0; MAX_HANDLE_SZ],
        };
        h.bytes.get_mut(..bytes.len())?.copy_from_slice(bytes);
        Some(h)
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

/// `flock(2)`: `op` is `LOCK_SH`, `LOCK_EX` or `LOCK_UN`, with `LOCK_NB` or not.
pub fn flock(fd: BorrowedFd, op: libc::c_int) -> io::Result<()> {
    // SAFETY: valid descriptor; no pointer is passed.
    cvt(unsafe { libc::flock(fd.as_raw_fd(), op) }).map(drop)
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

/// `syncfs(2)`: commits everything of the file system holding `fd` to stable storage.
pub fn syncfs(fd: BorrowedFd) -> io::Result<()> {
    // SAFETY: valid descriptor.
    cvt(unsafe { libc::syncfs(fd.as_raw_fd()) }).map(drop)
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

/// An open lower file as a FUSE file handle: owns its descriptor, whose number is what the
/// kernel keeps between requests (so reads and writes need no table lookup).
#[derive(Debug)]
pub struct FdHandle(OwnedFd);

impl FdHandle {
    /// The handle of the open file `fd`.
    pub fn new(fd: OwnedFd) -> FdHandle {
        FdHandle(fd)
    }

    /// The descriptor.
    #[inline]
    pub fn fd(&self) -> BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.0.as_fd()
    }

    /// The number the kernel keeps (the descriptor's).
    #[inline]
    pub fn number(&self) -> u64 {
        self.0.as_raw_fd() as u64
    }

    /// The descriptor, given up (as a FUSE handle, [`crate::filesystem::Handle`]).
    #[inline]
    pub fn into_fd(self) -> OwnedFd {
        self.0
    }
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

#[cfg(test)]
mod tests {
    use super::*;

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
