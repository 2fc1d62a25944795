//! File data operations: open, create, read, write, flush, release, fsync, fallocate, lseek,
//! copy_file_range.
//!
//! An open file's FUSE handle is its lower descriptor number: read and write need no table
//! lookup. The descriptor is closed in `release` only, and the kernel sends no request on a handle
//! after releasing it.
//!
//! `O_DIRECT` stays on the lower descriptor, so direct I/O through the mount bypasses LOWER's
//! page cache as it would on LOWER (the kernel sends such reads and writes to the daemon as
//! they come, bypassing the mount's page cache too). The lower file system then wants the
//! buffer aligned: reads land in the per-thread buffer of [`with_buf`], which is aligned; a
//! write's data sits in the kernel's request buffer at no useful alignment, so a write on a
//! file opened `O_DIRECT` is copied into the aligned buffer first (one `memcpy`, no
//! allocation). Offsets and lengths are the caller's: what LOWER refuses, the mount refuses.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, IntoRawFd};
use std::sync::Arc;

use fuser::{FileAttr, FileHandle, FopenFlags, Generation, INodeNo, ReplyData, Request};

use super::{Passthrough, with_buf};
use crate::attr::to_attr;
use crate::errno::errno;
use crate::inode::Inode;
use crate::ops::Op;
use crate::profiled::ready;
use crate::sys;

impl Passthrough {
    /// The lower descriptor of an open file's handle.
    #[inline]
    pub(crate) fn file(fh: FileHandle) -> BorrowedFd<'static> {
        sys::fh_fd(fh.0)
    }

    /// Flags for opening the lower file: creation flags are the kernel's business; with the
    /// writeback cache the kernel may read to fill pages of write-only files and handles appends
    /// itself.
    fn lower_flags(&self, flags: i32) -> i32 {
        let mut f = flags & !(libc::O_CREAT | libc::O_EXCL | libc::O_NOCTTY);
        if self.cfg.writeback {
            if f & libc::O_ACCMODE == libc::O_WRONLY {
                f = (f & !libc::O_ACCMODE) | libc::O_RDWR;
            }
            f &= !libc::O_APPEND;
        }
        f
    }

    fn fopen_flags(&self) -> FopenFlags {
        // Kernel passthrough refuses opens with flags outside FOPEN_PASSTHROUGH_MASK (a kept
        // cache among them: the backing file has its own).
        let mut f = if self.passthrough {
            FopenFlags::empty()
        } else if self.cfg.direct_io {
            FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_PARALLEL_DIRECT_WRITES
        } else if self.cfg.keep_cache {
            FopenFlags::FOPEN_KEEP_CACHE
        } else {
            FopenFlags::empty()
        };
        if self.noflush {
            f |= FopenFlags::FOPEN_NOFLUSH;
        }
        f
    }

    pub(crate) fn do_open(
        &self,
        req: &Request,
        ino: INodeNo,
        flags: i32,
    ) -> io::Result<(Arc<Inode>, FileHandle, FopenFlags)> {
        let inode = self.store.get(ino.0)?;
        let f = self.lower_flags(flags);
        let fd = self
            .lower
            .call(Op::Open, || self.store.open_pinned(&inode, f))?;
        if flags & libc::O_TRUNC != 0 && req.uid() != 0 {
            if let Err(e) = self.kill_suid(Op::Open, fd.as_fd()) {
                self.store.unpin(&inode);
                return Err(e);
            }
        }
        Ok((
            inode,
            FileHandle(fd.into_raw_fd() as u64),
            self.fopen_flags(),
        ))
    }

    /// The kernel-passthrough backing file of `inode` (shared by all its open handles), kept
    /// alive by handle `fh` until its release. `register` makes a new one from a descriptor.
    pub(crate) fn backing(
        &self,
        inode: &Inode,
        fh: FileHandle,
        register: impl FnOnce(BorrowedFd) -> io::Result<fuser::BackingId>,
    ) -> io::Result<Arc<fuser::BackingId>> {
        let mut slot = inode.backing.lock();
        let b = match slot.upgrade() {
            Some(b) => b,
            None => {
                let b = Arc::new(register(Self::file(fh))?);
                *slot = Arc::downgrade(&b);
                b
            }
        };
        self.backings.insert_at(fh.0, b.clone());
        Ok(b)
    }

    /// Clears setuid/setgid bits as the kernel does when a file is modified by a caller without
    /// `CAP_FSETID` (we asked for `FUSE_HANDLE_KILLPRIV_V2`; the daemon's own writes as root would
    /// keep the bits). fuser 0.18 passes the kernel's kill flag for writes only; for truncation a
    /// caller other than root stands for "without `CAP_FSETID`".
    pub(crate) fn kill_suid(&self, op: Op, fd: BorrowedFd) -> io::Result<()> {
        let st = self.lower.call(op, || sys::fstat(fd))?;
        self.kill_suid_of(op, fd, &st).map(drop)
    }

    /// [`Passthrough::kill_suid`] of `fd` already `fstat`ed as `st`; returns the mode set, if
    /// it changed.
    pub(crate) fn kill_suid_of(
        &self,
        op: Op,
        fd: BorrowedFd,
        st: &sys::Stat,
    ) -> io::Result<Option<u32>> {
        match crate::attr::mode_without_privs(st.mode) {
            Some(mode) => {
                self.lower.call(op, || sys::chmod_fd(fd, mode))?;
                Ok(Some(mode))
            }
            None => Ok(None),
        }
    }

    pub(crate) fn do_create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
    ) -> io::Result<(Arc<Inode>, FileAttr, Generation, FileHandle, FopenFlags)> {
        let (p, pfd) = self.node(parent)?;
        let f = self.lower_flags(flags) | libc::O_CREAT | (flags & libc::O_EXCL);
        let fd = self.create_as(req, umask, || {
            self.store.retry_emfile(|| {
                self.lower
                    .call(Op::Create, || sys::openat(pfd.as_fd(), name, f, mode))
            })
        })?;
        let mut st = self.lower.call(Op::Create, || sys::fstat(fd.as_fd()))?;
        if flags & libc::O_TRUNC != 0 && req.uid() != 0 {
            // An existing file truncated by a caller without CAP_FSETID.
            if self.kill_suid_of(Op::Create, fd.as_fd(), &st)?.is_some() {
                st = self.lower.call(Op::Create, || sys::fstat(fd.as_fd()))?;
            }
        }
        // Pinned for the new handle (see `InodeStore::open_pinned`), released in `release`.
        let inode = self.store.pin_created(
            &p,
            pfd.as_fd(),
            name,
            &st,
            flags & libc::O_EXCL != 0,
            fd.as_fd(),
        )?;
        let attr = to_attr(inode.nodeid, &st);
        let generation = Generation(inode.generation());
        Ok((
            inode,
            attr,
            generation,
            FileHandle(fd.into_raw_fd() as u64),
            self.fopen_flags(),
        ))
    }

    pub(crate) fn do_read(&self, fh: FileHandle, offset: u64, size: u32, reply: ReplyData) {
        let fd = Self::file(fh);
        with_buf(size as usize, |buf| {
            match ready(self.lower.call(Op::Read, || sys::pread(fd, buf, offset))) {
                Ok(n) => reply.data(&buf[..n]),
                Err(e) => reply.error(errno(&e)),
            }
        })
    }

    /// Writes `data` at `offset`; `direct` when the file was opened with `O_DIRECT` (the
    /// request's open flags say so), which needs an aligned buffer.
    pub(crate) fn do_write(
        &self,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        direct: bool,
        kill_suid: bool,
    ) -> io::Result<usize> {
        let fd = Self::file(fh);
        let n = if direct {
            self.pwrite_aligned(fd, data, offset)?
        } else {
            match self.lower.call(Op::Write, || sys::pwrite(fd, data, offset)) {
                // The lower descriptor has `O_DIRECT` though the request does not say so (it
                // was cleared with fcntl(2) on the mount's descriptor, or the kernel writes
                // back its cache through this handle): the same write from an aligned buffer.
                Err(e)
                    if e.raw_os_error() == Some(libc::EINVAL)
                        && data.as_ptr().addr() % super::DIO_ALIGN != 0 =>
                {
                    self.pwrite_aligned(fd, data, offset)?
                }
                r => r?,
            }
        };
        if kill_suid {
            self.kill_suid(Op::Write, fd)?;
        }
        Ok(n)
    }

    /// `pwrite(2)` of `data` copied into this thread's aligned buffer (for `O_DIRECT`).
    fn pwrite_aligned(&self, fd: BorrowedFd, data: &[u8], offset: u64) -> io::Result<usize> {
        with_buf(data.len(), |buf| {
            buf.copy_from_slice(data);
            self.lower.call(Op::Write, || sys::pwrite(fd, buf, offset))
        })
    }

    /// `close(2)` semantics on the lower file (errors of delayed writes on network file systems
    /// surface here) without closing our descriptor: close a duplicate.
    pub(crate) fn do_flush(&self, fh: FileHandle) -> io::Result<()> {
        let fd = Self::file(fh);
        self.lower.call(Op::Flush, || sys::dup(fd).map(drop))
    }

    pub(crate) fn do_release(&self, ino: INodeNo, fh: FileHandle) {
        if self.passthrough {
            self.backings.remove(fh.0);
        }
        let fd = sys::fh_take(fh.0);
        self.lower.call(Op::Release, || drop(fd));
        if let Ok(inode) = self.store.get(ino.0) {
            self.store.unpin(&inode);
        }
    }

    pub(crate) fn do_fsync(&self, fh: FileHandle, datasync: bool) -> io::Result<()> {
        let fd = Self::file(fh);
        self.lower.call(Op::Fsync, || sys::fsync(fd, datasync))
    }

    pub(crate) fn do_fallocate(
        &self,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
    ) -> io::Result<()> {
        let fd = Self::file(fh);
        self.lower
            .call(Op::Fallocate, || sys::fallocate(fd, mode, offset, length))
    }

    pub(crate) fn do_lseek(&self, fh: FileHandle, offset: i64, whence: i32) -> io::Result<i64> {
        let fd = Self::file(fh);
        self.lower
            .call(Op::Lseek, || sys::lseek(fd, offset, whence))
    }

    pub(crate) fn do_copy_file_range(
        &self,
        fh_in: FileHandle,
        off_in: u64,
        fh_out: FileHandle,
        off_out: u64,
        len: u64,
        flags: u32,
    ) -> io::Result<usize> {
        let (i, o) = (Self::file(fh_in), Self::file(fh_out));
        // The reply carries a 32-bit count: copy at most that much (callers loop on short copies).
        let len = len.min(u32::MAX as u64 & !0xfff);
        self.lower.call(Op::CopyFileRange, || {
            sys::copy_file_range(i, off_in, o, off_out, len, flags)
        })
    }
}
