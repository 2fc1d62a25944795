//! File data operations: open, create, write, release, and the kernel-passthrough backing
//! files. (Read, flush, fsync, fallocate, lseek and copy_file_range are one system call each,
//! in the [`FileSystem`](crate::filesystem::FileSystem) implementation.)
//!
//! An open file's handle owns its lower descriptor ([`FdHandle`]); the kernel keeps the
//! descriptor's number, so read and write need no table lookup. The descriptor is closed in
//! `release` only, and the kernel sends no request on a handle after releasing it.
//!
//! `O_DIRECT` stays on the lower descriptor, so direct I/O through the mount bypasses LOWER's
//! page cache as it would on LOWER (the kernel sends such reads and writes to the daemon as
//! they come, bypassing the mount's page cache too). The lower file system then wants the
//! buffer aligned: reads land in the buffer the transport lends, which is aligned
//! ([`crate::toolkit::buffer`]); a write's data sits in the transport's request buffer at no useful
//! alignment, so a write on a file opened `O_DIRECT` is copied into an aligned buffer first (one
//! `memcpy`, no allocation). Offsets and lengths are the caller's: what LOWER refuses, the
//! mount refuses.

use std::cell::RefCell;
use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::Passthrough;
use crate::filesystem::{Entry, FopenFlags, Ino, Opened, Request, WriteFlags};
use crate::passthrough::inode_store::Inode;
use crate::protocol::ops::Sys;
use crate::sys::fuse::BackingId;
use crate::sys::{self, FdHandle};
use crate::toolkit::buffer::{Aligned, is_aligned};

thread_local! {
    /// This thread's aligned copy of a direct write's data.
    static WRITE_BUF: RefCell<Aligned> = const { RefCell::new(Aligned::new()) };
}

impl Passthrough {
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
        let mut f = if self.passthrough.load(Ordering::Relaxed) {
            FopenFlags::empty()
        } else if self.cfg.direct_io {
            FopenFlags::DIRECT_IO | FopenFlags::PARALLEL_DIRECT_WRITES
        } else if self.cfg.keep_cache {
            FopenFlags::KEEP_CACHE
        } else {
            FopenFlags::empty()
        };
        if self.noflush {
            f |= FopenFlags::NOFLUSH;
        }
        f
    }

    pub(crate) fn do_open(
        &self,
        req: &Request,
        ino: Ino,
        flags: i32,
    ) -> io::Result<(Arc<Inode>, FdHandle, FopenFlags)> {
        let inode = self.store.get(ino.0)?;
        let f = self.lower_flags(flags);
        let fd = self.store.open_pinned(self.lower.via(req), &inode, f)?;
        if req.kill_suidgid {
            // Truncated by a caller without CAP_FSETID.
            self.privileges_dropped(req, ino, fd.as_fd(), |g| {
                crate::toolkit::create_as::in_group(req, g)
            });
        }
        Ok((inode, FdHandle::new(fd), self.fopen_flags()))
    }

    /// The open reply for handle `fh` of `inode`: with kernel passthrough, the inode's backing
    /// file (registered at its first open, shared by all its open handles); a file the kernel
    /// refuses to pass through (e.g. on a stacked file system: `ELOOP`) is served by the
    /// daemon.
    pub(crate) fn opened(
        &self,
        inode: &Inode,
        fh: FdHandle,
        flags: FopenFlags,
    ) -> Opened<FdHandle> {
        if !self.passthrough.load(Ordering::Relaxed) {
            return Opened::new(fh, flags);
        }
        match self.backing(inode, &fh) {
            Ok(b) => Opened {
                backing: Some(b.id()),
                fh,
                flags,
            },
            Err(e) => {
                log::warn!("kernel passthrough refused for inode {}: {e}", inode.nodeid);
                Opened::new(fh, flags)
            }
        }
    }

    /// The kernel-passthrough backing file of `inode`, kept alive by handle `fh` until its
    /// release.
    fn backing(&self, inode: &Inode, fh: &FdHandle) -> io::Result<Arc<BackingId>> {
        let mut slot = inode.backing.lock();
        let b = match slot.upgrade() {
            Some(b) => b,
            None => {
                let b = Arc::new(BackingId::register(&self.device, fh.fd())?);
                *slot = Arc::downgrade(&b);
                b
            }
        };
        self.backings.insert_at(fh.number(), b.clone());
        Ok(b)
    }

    pub(crate) fn do_create(
        &self,
        req: &Request,
        parent: Ino,
        name: &OsStr,
        mode: u32,
        flags: i32,
    ) -> io::Result<(Arc<Inode>, Entry, FdHandle, FopenFlags)> {
        let (p, pfd) = self.node(req, parent)?;
        let f = self.lower_flags(flags);
        let open = |f: i32| {
            self.create_as(req, || {
                self.store.retry_emfile(|| {
                    self.lower
                        .call(req, Sys::Openat, || sys::openat(pfd.as_fd(), name, f, mode))
                })
            })
        };
        // With O_EXCL first, so that a new file is known as new (its setgid bit, a new
        // generation for a reused inode number) and no symbolic link put at the name behind
        // the kernel's back is followed; the kernel asks to create a name it did not find, so
        // the second open is for a race.
        let (fd, created) = match open(f | libc::O_CREAT | libc::O_EXCL) {
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) && flags & libc::O_EXCL == 0 => {
                (open(f)?, false)
            }
            r => (r?, true),
        };
        let mut st = self
            .lower
            .call(req, Sys::Statx, || sys::fstat(fd.as_fd()))?;
        let changed = if created {
            self.keep_setgid(req, fd.as_fd(), &st, mode)?
        } else if req.kill_suidgid && self.privileged {
            // An existing file truncated by a caller without CAP_FSETID.
            let in_group = |g| crate::toolkit::create_as::in_group(req, g);
            self.clear_privileges(req, fd.as_fd(), Some(&st), in_group)?
        } else {
            None
        };
        if let Some(new) = changed {
            st = new;
        }
        // Pinned for the new handle (see `InodeStore::open_pinned`), released in `release`.
        let inode = self.store.pin_created(
            self.lower.via(req),
            &p,
            pfd.as_fd(),
            name,
            &st,
            created,
            fd.as_fd(),
        )?;
        let entry = self.entry_of(&inode, &st);
        Ok((inode, entry, FdHandle::new(fd), self.fopen_flags()))
    }

    /// Writes `data` at `offset`; `flags.direct` when the file was opened with `O_DIRECT` (the
    /// request's open flags say so), which needs an aligned buffer.
    pub(crate) fn do_write(
        &self,
        req: &Request,
        ino: Ino,
        fh: &FdHandle,
        offset: u64,
        data: &[u8],
        flags: WriteFlags,
    ) -> io::Result<usize> {
        let fd = fh.fd();
        let n = if flags.direct {
            self.pwrite_aligned(req, fd, data, offset)?
        } else if flags.cache {
            self.write_back(req, fd, data, offset)?
        } else {
            match self
                .lower
                .call(req, Sys::Pwrite, || sys::pwrite(fd, data, offset))
            {
                // The lower descriptor has `O_DIRECT` though the request does not say so (it
                // was cleared with fcntl(2) on the mount's descriptor): the same write from an
                // aligned buffer.
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) && !is_aligned(data) => {
                    self.pwrite_aligned(req, fd, data, offset)?
                }
                r => r?,
            }
        };
        if flags.kill_suidgid {
            self.privileges_dropped(req, ino, fd, |g| {
                crate::toolkit::create_as::in_group(req, g)
            });
        }
        Ok(n)
    }

    /// A write-back of the page cache (pages dirtied through a shared mapping, or any write with
    /// `--writeback`), through a handle the kernel picked among the file's writable ones. It is
    /// no caller's `write(2)`: where that handle's lower descriptor has `O_APPEND` (where
    /// `pwrite` appends, whatever the offset) or `O_DIRECT` (whose alignment the last page of a
    /// file does not meet), the pages go through a descriptor of the file without them, as
    /// LOWER's own write-back of its page cache would. With `--writeback` no handle has
    /// `O_APPEND` and every write is a write-back: the flags are not asked for, and only a
    /// write refused (`EINVAL`: `O_DIRECT`) goes the other way.
    fn write_back(
        &self,
        req: &Request,
        fd: BorrowedFd,
        data: &[u8],
        offset: u64,
    ) -> io::Result<usize> {
        let plain =
            self.cfg.writeback || sys::status_flags(fd)? & (libc::O_APPEND | libc::O_DIRECT) == 0;
        if plain {
            match self
                .lower
                .call(req, Sys::Pwrite, || sys::pwrite(fd, data, offset))
            {
                Err(e) if self.cfg.writeback && e.raw_os_error() == Some(libc::EINVAL) => {}
                r => return r,
            }
        }
        let plain = self
            .lower
            .call(req, Sys::Openat, || sys::reopen(fd, libc::O_WRONLY))?;
        self.lower.call(req, Sys::Pwrite, || {
            sys::pwrite(plain.as_fd(), data, offset)
        })
    }

    /// `pwrite(2)` of `data` copied into this thread's aligned buffer (for `O_DIRECT`).
    fn pwrite_aligned(
        &self,
        req: &Request,
        fd: BorrowedFd,
        data: &[u8],
        offset: u64,
    ) -> io::Result<usize> {
        WRITE_BUF.with(|b| {
            let mut b = b.borrow_mut();
            let buf = b.get(data.len());
            buf.copy_from_slice(data);
            self.lower
                .call(req, Sys::Pwrite, || sys::pwrite(fd, buf, offset))
        })
    }

    pub(crate) fn do_release(&self, req: &Request, ino: Ino, fh: FdHandle) {
        if self.passthrough.load(Ordering::Relaxed) {
            self.backings.remove(fh.number());
        }
        self.lower.call(req, Sys::Close, || drop(fh));
        if let Ok(inode) = self.store.get(ino.0) {
            self.store.unpin(&inode);
        }
    }
}
