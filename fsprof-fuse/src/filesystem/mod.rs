//! The operation trait: the one interface between the kernel transports below and the file
//! systems and layers above.
//!
//! ```text
//!   transport (classic /dev/fuse, or io_uring)   decodes requests, builds replies, one errno
//!       │                                        conversion, contains panics (EIO)
//!   Control                                      the control files; never counted
//!       │
//!   Profiled                                     times each request into the `fuse` layer
//!       │
//!   Passthrough / Raif                           the file system (lower or branch calls timed
//!                                                under the request's operation)
//! ```
//!
//! Each method takes the request's context ([`Request`]: operation, request id, pid, uid, gid,
//! umask, node) and typed arguments, and returns `io::Result` of a typed reply; errors stay raw
//! `io::Error`s carrying the OS errno until a transport turns them into the reply's errno.
//! Reads, `readlink` and the xattr calls fill a buffer the transport lends (its reply buffer,
//! where it has one), and directory listings add to the transport's reply ([`DirSink`],
//! [`DirPlusSink`]), so data is copied once. A layer is a type that implements this trait over
//! an inner one and forwards what it does not handle (see [`crate::layers`]).
//!
//! Open files and directories are typed handles of the file system's choosing
//! ([`FileSystem::File`], [`FileSystem::Dir`]; see [`handle`]). Requests on an open object
//! borrow its handle; `release` and `releasedir` take it back by value.
//!
//! Every method but `init`, `destroy`, `interrupt`, `disconnected` and `forget` answers
//! `ENOSYS` by default, as the kernel
//! expects of an operation a file system does not serve (for some it then stops asking).

pub mod handle;
pub mod init;
pub mod reply;
pub mod request;
pub mod trace;

#[cfg(test)]
pub mod fake;

use std::ffi::OsStr;
use std::io;
use std::path::Path;

pub use handle::{Handle, Key, Layered, Lent};
pub use init::{Caps, Init};
pub use reply::{
    Attr, AttrOut, DirPlusSink, DirSink, Entry, FileType, FopenFlags, IoctlOut, Opened, SetAttr,
    SetTime, Statfs, Timespec, WriteFlags,
};
pub use request::{Ino, Request};

/// `ENOSYS`: the default answer of an operation not served.
#[inline]
pub fn enosys<T>() -> io::Result<T> {
    Err(io::Error::from_raw_os_error(libc::ENOSYS))
}

/// A byte-range lock as `getlk` and `setlk` see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lock {
    /// First byte.
    pub start: u64,
    /// Last byte (inclusive; `u64::MAX` for "to the end").
    pub end: u64,
    /// `F_RDLCK`, `F_WRLCK` or `F_UNLCK`.
    pub typ: i32,
    /// The holder's pid.
    pub pid: u32,
}

/// A file system served through a transport (see the module documentation).
#[allow(unused_variables)]
pub trait FileSystem: Send + Sync {
    /// An open file's handle.
    type File: Handle;
    /// An open directory's handle.
    type Dir: Handle;

    /// Negotiates with the kernel before the first request.
    fn init(&self, init: &mut Init) -> io::Result<()> {
        Ok(())
    }

    /// The session ends (after the last request).
    fn destroy(&self) {}

    /// The kernel asks that request `unique` end early: its caller got a signal
    /// (`FUSE_INTERRUPT`). Best effort, with no reply of its own: a request that can stop (an
    /// injected delay) answers `EINTR` at once, any other simply finishes. Comes on another
    /// thread than the request's, possibly before the request reaches the file system.
    fn interrupt(&self, unique: u64) {}

    /// The connection has ended (unmounted or aborted) while requests may still be running:
    /// whatever waits should stop waiting, since nobody will read the answer. Called once,
    /// before [`FileSystem::destroy`].
    fn disconnected(&self) {}

    /// The object `name` in directory `parent`; counts one lookup of it.
    fn lookup(&self, req: &Request, parent: Ino, name: &OsStr) -> io::Result<Entry> {
        enosys()
    }

    /// The kernel dropped `nlookup` lookups of `ino` (no reply).
    fn forget(&self, req: &Request, ino: Ino, nlookup: u64) {}

    /// Attributes of `ino` (through the open handle `fh` where the kernel passes one).
    fn getattr(&self, req: &Request, ino: Ino, fh: Option<&Self::File>) -> io::Result<AttrOut> {
        enosys()
    }

    /// Changes the attributes of `ino` as `set` says; returns the new ones.
    fn setattr(
        &self,
        req: &Request,
        ino: Ino,
        set: &SetAttr,
        fh: Option<&Self::File>,
    ) -> io::Result<AttrOut> {
        enosys()
    }

    /// The target of symlink `ino`, into `buf` (`PATH_MAX` bytes); returns its length.
    fn readlink(&self, req: &Request, ino: Ino, buf: &mut [u8]) -> io::Result<usize> {
        enosys()
    }

    /// Creates the special file `name` (mode with type bits, device `rdev`) with the caller's
    /// umask ([`Request::umask`]).
    fn mknod(
        &self,
        req: &Request,
        parent: Ino,
        name: &OsStr,
        mode: u32,
        rdev: u32,
    ) -> io::Result<Entry> {
        enosys()
    }

    /// Creates directory `name` with the caller's umask.
    fn mkdir(&self, req: &Request, parent: Ino, name: &OsStr, mode: u32) -> io::Result<Entry> {
        enosys()
    }

    /// Removes the non-directory `name`.
    fn unlink(&self, req: &Request, parent: Ino, name: &OsStr) -> io::Result<()> {
        enosys()
    }

    /// Removes the empty directory `name`.
    fn rmdir(&self, req: &Request, parent: Ino, name: &OsStr) -> io::Result<()> {
        enosys()
    }

    /// Creates symlink `name` pointing to `target`.
    fn symlink(
        &self,
        req: &Request,
        parent: Ino,
        name: &OsStr,
        target: &Path,
    ) -> io::Result<Entry> {
        enosys()
    }

    /// Renames `parent/name` to `newparent/newname` (`RENAME_*` flags).
    fn rename(
        &self,
        req: &Request,
        parent: Ino,
        name: &OsStr,
        newparent: Ino,
        newname: &OsStr,
        flags: u32,
    ) -> io::Result<()> {
        enosys()
    }

    /// Makes `newparent/newname` a hard link to `ino`.
    fn link(&self, req: &Request, ino: Ino, newparent: Ino, newname: &OsStr) -> io::Result<Entry> {
        enosys()
    }

    /// Opens `ino` with `open(2)` flags.
    fn open(&self, req: &Request, ino: Ino, flags: i32) -> io::Result<Opened<Self::File>> {
        enosys()
    }

    /// Reads from `offset` into `buf` (the size asked for); returns the bytes read.
    fn read(
        &self,
        req: &Request,
        ino: Ino,
        fh: &Self::File,
        offset: u64,
        buf: &mut [u8],
    ) -> io::Result<usize> {
        enosys()
    }

    /// Writes `data` at `offset`; returns the bytes written.
    fn write(
        &self,
        req: &Request,
        ino: Ino,
        fh: &Self::File,
        offset: u64,
        data: &[u8],
        flags: WriteFlags,
    ) -> io::Result<u32> {
        enosys()
    }

    /// A `close(2)` of one descriptor of the open file.
    fn flush(&self, req: &Request, ino: Ino, fh: &Self::File) -> io::Result<()> {
        enosys()
    }

    /// The last descriptor of the open file is gone: the handle comes back.
    fn release(&self, req: &Request, ino: Ino, fh: Self::File) -> io::Result<()> {
        enosys()
    }

    /// Flushes the file's data (and metadata unless `datasync`) to stable storage.
    fn fsync(&self, req: &Request, ino: Ino, fh: &Self::File, datasync: bool) -> io::Result<()> {
        enosys()
    }

    /// Opens directory `ino`.
    fn opendir(&self, req: &Request, ino: Ino, flags: i32) -> io::Result<Opened<Self::Dir>> {
        enosys()
    }

    /// Lists the directory from `offset` into `out` until it is full or the listing ends.
    fn readdir(
        &self,
        req: &Request,
        ino: Ino,
        dh: &Self::Dir,
        offset: u64,
        out: &mut dyn DirSink,
    ) -> io::Result<()> {
        enosys()
    }

    /// Lists the directory with each entry's attributes (each added entry counts a lookup).
    fn readdirplus(
        &self,
        req: &Request,
        ino: Ino,
        dh: &Self::Dir,
        offset: u64,
        out: &mut dyn DirPlusSink,
    ) -> io::Result<()> {
        enosys()
    }

    /// The directory is closed: the handle comes back.
    fn releasedir(&self, req: &Request, ino: Ino, dh: Self::Dir) -> io::Result<()> {
        enosys()
    }

    /// Flushes the directory to stable storage.
    fn fsyncdir(&self, req: &Request, ino: Ino, dh: &Self::Dir, datasync: bool) -> io::Result<()> {
        enosys()
    }

    /// Statistics of the file system holding `ino`.
    fn statfs(&self, req: &Request, ino: Ino) -> io::Result<Statfs> {
        enosys()
    }

    /// Sets extended attribute `name` (`XATTR_CREATE`/`XATTR_REPLACE` flags).
    fn setxattr(
        &self,
        req: &Request,
        ino: Ino,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        position: u32,
    ) -> io::Result<()> {
        enosys()
    }

    /// The value of extended attribute `name`, into `buf`: with an empty `buf` the value's
    /// length only; `ERANGE` if it does not fit. Returns the length.
    fn getxattr(&self, req: &Request, ino: Ino, name: &OsStr, buf: &mut [u8]) -> io::Result<usize> {
        enosys()
    }

    /// The NUL-separated names of the extended attributes the caller may see, into `buf` (as
    /// [`FileSystem::getxattr`]).
    fn listxattr(&self, req: &Request, ino: Ino, buf: &mut [u8]) -> io::Result<usize> {
        enosys()
    }

    /// Removes extended attribute `name`.
    fn removexattr(&self, req: &Request, ino: Ino, name: &OsStr) -> io::Result<()> {
        enosys()
    }

    /// Checks access (never sent with `default_permissions`, which fsprof always uses).
    fn access(&self, req: &Request, ino: Ino, mask: i32) -> io::Result<()> {
        enosys()
    }

    /// Creates and opens the regular file `name` (`open(2)` flags) with the caller's umask.
    fn create(
        &self,
        req: &Request,
        parent: Ino,
        name: &OsStr,
        mode: u32,
        flags: i32,
    ) -> io::Result<(Entry, Opened<Self::File>)> {
        enosys()
    }

    /// Tests for a lock (only sent when locks are forwarded, which fsprof does not ask for).
    fn getlk(
        &self,
        req: &Request,
        ino: Ino,
        fh: &Self::File,
        owner: u64,
        lock: &Lock,
    ) -> io::Result<Lock> {
        enosys()
    }

    /// Takes or releases a lock (likewise never sent to fsprof's file systems).
    fn setlk(
        &self,
        req: &Request,
        ino: Ino,
        fh: &Self::File,
        owner: u64,
        lock: &Lock,
        sleep: bool,
    ) -> io::Result<()> {
        enosys()
    }

    /// Maps block `idx` of the file to a device block (block-device-backed file systems).
    fn bmap(&self, req: &Request, ino: Ino, blocksize: u32, idx: u64) -> io::Result<u64> {
        enosys()
    }

    /// An `ioctl(2)` on the open file.
    #[allow(clippy::too_many_arguments)]
    fn ioctl(
        &self,
        req: &Request,
        ino: Ino,
        fh: &Self::File,
        flags: u32,
        cmd: u32,
        in_data: &[u8],
        out_size: u32,
    ) -> io::Result<IoctlOut> {
        enosys()
    }

    /// Readiness of the open file for `events` (`POLL*` bits); returns the ready ones.
    fn poll(
        &self,
        req: &Request,
        ino: Ino,
        fh: &Self::File,
        events: u32,
        flags: u32,
    ) -> io::Result<u32> {
        enosys()
    }

    /// `fallocate(2)` on the open file.
    fn fallocate(
        &self,
        req: &Request,
        ino: Ino,
        fh: &Self::File,
        offset: u64,
        length: u64,
        mode: i32,
    ) -> io::Result<()> {
        enosys()
    }

    /// `lseek(2)` for `SEEK_DATA`/`SEEK_HOLE` (the kernel keeps file positions itself).
    fn lseek(
        &self,
        req: &Request,
        ino: Ino,
        fh: &Self::File,
        offset: i64,
        whence: i32,
    ) -> io::Result<i64> {
        enosys()
    }

    /// Copies `len` bytes between two open files; returns the bytes copied.
    #[allow(clippy::too_many_arguments)]
    fn copy_file_range(
        &self,
        req: &Request,
        ino_in: Ino,
        fh_in: &Self::File,
        offset_in: u64,
        ino_out: Ino,
        fh_out: &Self::File,
        offset_out: u64,
        len: u64,
        flags: u32,
    ) -> io::Result<u32> {
        enosys()
    }
}
