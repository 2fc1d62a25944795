//! The passthrough file system: serves a lower directory unchanged (a user-space Base0fs).
//!
//! Each FUSE operation is implemented as a method returning `io::Result` (in `meta`, `data`,
//! `dir`, `xattr`); the [`FileSystem`] implementation below only routes to them. Errors stay raw
//! `io::Error`s; the transport turns them into the reply's errno. Every lower system call a
//! request makes goes through [`Lower::call`], which records it under the request's operation
//! and its own name, those of the inode store included ([`crate::toolkit::lower::Via`]).

mod data;
mod dir;
pub mod inode_store;
mod meta;
mod privs;
mod xattr;

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::filesystem::{
    AttrOut, Caps, DirPlusSink, DirSink, Entry, FileSystem, Init, Ino, IoctlOut, Key, Opened,
    Request, SetAttr, Statfs, WriteFlags,
};
use crate::passthrough::inode_store::{Inode, InodeMode, InodeStore};
use crate::protocol::ops::Sys;
use crate::sys::fuse::{BackingId, Device};
use crate::sys::{self, FdHandle};
use crate::toolkit::handle_table::HandleTable;
use crate::toolkit::kernel_cache::Readdirplus;
use crate::toolkit::lower::{Lower, Via};

pub use crate::toolkit::dircursor::DirCursor;

/// Settings of the passthrough.
#[derive(Debug, Clone)]
pub struct PassthroughConfig {
    /// How long the kernel may cache names (entry timeout). Default 1 s.
    pub entry_ttl: Duration,
    /// How long the kernel may cache attributes. Default 1 s.
    pub attr_ttl: Duration,
    /// When directories are listed with `READDIRPLUS`. Default [`Readdirplus::Auto`].
    pub readdirplus: Readdirplus,
    /// Kernel writeback cache (writes are gathered by the kernel; the daemon sees fewer, larger
    /// writes). Default off.
    pub writeback: bool,
    /// Keep the kernel's page cache across opens, invalidated when the lower file's size or
    /// mtime changes (`FOPEN_KEEP_CACHE` + `FUSE_AUTO_INVAL_DATA`). Default on.
    pub keep_cache: bool,
    /// Bypass the page cache (every read and write reaches the daemon). Default off.
    pub direct_io: bool,
    /// Names at the root that are not listed (the control files). Default none.
    pub hidden_root_names: Vec<OsString>,
    /// How inodes are located. Default [`InodeMode::Auto`].
    pub inode_mode: InodeMode,
    /// Most cached `O_PATH` descriptors. Default: half the open-file limit.
    pub fd_cache: usize,
    /// Largest read or write request (bytes). Default 1 MiB.
    pub max_io: u32,
    /// Kernel background request limit. Default 64.
    pub max_background: u16,
    /// Whether `close(2)` reaches the daemon as FLUSH. Default [`Flush::Auto`].
    pub flush: Flush,
    /// Kernel capabilities not to request (for measuring what each one buys). Default none.
    pub caps_off: Caps,
    /// Kernel FUSE passthrough (Linux 6.9+, root): reads and writes of open files go from the
    /// kernel straight to the lower file, bypassing (and not profiled by) the daemon. Default off.
    pub kernel_passthrough: bool,
}

/// When `close(2)` is forwarded as FLUSH (which closes a duplicate of the lower descriptor, so the
/// lower file system sees a close and can report delayed write errors).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flush {
    /// Only when LOWER is a network or FUSE file system, where a close can report errors; a local
    /// file system reports nothing at close, so the round trip is skipped (`FOPEN_NOFLUSH`).
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

/// `statfs` magic numbers of file systems whose `close` can report errors (network and FUSE).
const FLUSH_FS_MAGICS: &[i64] = &[
    0x6969,      // NFS
    0x517B,      // SMB
    0xFE53_4D42, // SMB2
    0xFF53_4D42, // CIFS
    0x6573_5546, // FUSE
    0x00C3_6400, // Ceph
    0x0102_1997, // 9P
    0x5346_414F, // AFS
    0x7375_7245, // Coda
    0x0BD0_0BD0, // Lustre
    0x4750_4653, // GPFS
    0x2003_0528, // OrangeFS
    0x786F_4256, // vboxsf
    0x0116_1970, // GFS2
    0x7461_636F, // OCFS2
];

impl Default for PassthroughConfig {
    fn default() -> Self {
        PassthroughConfig {
            entry_ttl: Duration::from_secs(1),
            attr_ttl: Duration::from_secs(1),
            readdirplus: Readdirplus::Auto,
            writeback: false,
            keep_cache: true,
            direct_io: false,
            hidden_root_names: Vec::new(),
            inode_mode: InodeMode::Auto,
            fd_cache: 8192,
            max_io: 1 << 20,
            max_background: 64,
            flush: Flush::Auto,
            caps_off: Caps::empty(),
            kernel_passthrough: false,
        }
    }
}

/// The passthrough file system over one lower directory.
pub struct Passthrough {
    pub(crate) store: Arc<InodeStore>,
    root: std::path::PathBuf,
    pub(crate) cfg: PassthroughConfig,
    pub(crate) lower: Lower,
    pub(crate) dirs: HandleTable<DirCursor>,
    /// Daemon runs as root: create as the caller, link by `AT_EMPTY_PATH`.
    pub(crate) privileged: bool,
    /// Opens are answered with `FOPEN_NOFLUSH` (see [`Flush`]).
    pub(crate) noflush: bool,
    /// Kernel passthrough is on (asked for and granted at init).
    pub(crate) passthrough: AtomicBool,
    /// The session's `/dev/fuse`, where kernel-passthrough backing files are registered.
    pub(crate) device: Device,
    /// Backing files of open handles (kernel passthrough), by handle number.
    pub(crate) backings: HandleTable<BackingId>,
}

/// [`crate::records::Paths`] over the inode store.
struct StorePaths {
    store: Arc<InodeStore>,
    root: std::path::PathBuf,
    /// The daemon runs as root: a search is checked as the user ([`crate::toolkit::caller::Caller`]).
    privileged: bool,
}

impl crate::records::Paths for StorePaths {
    fn path(&self, ino: Ino) -> Option<Vec<u8>> {
        use std::os::fd::AsRawFd;
        if ino == Ino::ROOT {
            return Some(b"/".to_vec());
        }
        let inode = self.store.get(ino.0).ok()?;
        // The records' own lookup, outside any request.
        let fd = self.store.fd(Via::NONE, &inode).ok()?;
        let lower = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()?;
        crate::records::mount_path(&self.root, lower)
    }

    fn may_search(&self, who: &crate::toolkit::caller::Caller, dir: &[u8]) -> bool {
        use std::os::fd::AsFd as _;
        let Ok(root) = self.store.fd(Via::NONE, self.store.root()) else {
            return false;
        };
        who.may_search(root.as_fd(), dir, self.privileged)
    }
}

impl Passthrough {
    /// Opens LOWER and builds the inode store. `device` is the session's `/dev/fuse` (set once
    /// mounted), needed only for kernel passthrough.
    pub fn new(
        lower_dir: &Path,
        cfg: PassthroughConfig,
        lower: Lower,
        device: Device,
    ) -> io::Result<Passthrough> {
        let root = sys::open_path(lower_dir, libc::O_PATH | libc::O_DIRECTORY)?;
        let noflush = match cfg.flush {
            Flush::Always => false,
            Flush::Never => true,
            Flush::Auto => {
                let magic = sys::fstatfs_type(root.as_fd())?;
                !FLUSH_FS_MAGICS.contains(&magic)
            }
        };
        let store = Arc::new(InodeStore::new(root, cfg.inode_mode, cfg.fd_cache)?);
        Ok(Passthrough {
            store,
            root: lower_dir.to_path_buf(),
            cfg,
            lower,
            dirs: HandleTable::default(),
            privileged: sys::geteuid() == 0,
            noflush,
            passthrough: AtomicBool::new(false),
            device,
            backings: HandleTable::default(),
        })
    }

    /// The inode store (for tests and diagnostics).
    pub fn store(&self) -> &InodeStore {
        &self.store
    }

    /// Names nodes by their path in the mount (for the request records): the path of the
    /// node's lower object as `/proc/self/fd` shows it, within LOWER (`lower_dir` as given to
    /// [`Passthrough::new`], which should be canonical).
    pub fn paths(&self) -> Arc<dyn crate::records::Paths> {
        Arc::new(StorePaths {
            store: self.store.clone(),
            root: self.root.clone(),
            privileged: self.privileged,
        })
    }

    /// Inode and its `O_PATH` descriptor (opened, if it must be, as a call of `req`).
    #[inline]
    pub(crate) fn node(&self, req: &Request, ino: Ino) -> io::Result<(Arc<Inode>, Arc<OwnedFd>)> {
        let inode = self.store.get(ino.0)?;
        let fd = self.store.fd(self.lower.via(req), &inode)?;
        Ok((inode, fd))
    }

    /// Looks `name` up in `parent` and counts one kernel lookup: the entry reply's content.
    pub(crate) fn entry(
        &self,
        req: &Request,
        parent: &Arc<Inode>,
        parent_fd: &OwnedFd,
        name: &OsStr,
        fresh: bool,
    ) -> io::Result<Entry> {
        let via = self.lower.via(req);
        let (inode, st) = if fresh && self.store.uses_handles() {
            // A new object needs an O_PATH descriptor for its handle anyway: open it first and
            // stat that, rather than stat the name, then open and stat it again.
            let fd = self.store.retry_emfile(|| {
                via.call(Sys::Openat, || {
                    sys::openat(parent_fd.as_fd(), name, libc::O_PATH | libc::O_NOFOLLOW, 0)
                })
            })?;
            let st = match via.call(Sys::Statx, || sys::fstat(fd.as_fd())) {
                Ok(st) => st,
                Err(e) => {
                    via.close(fd);
                    return Err(e);
                }
            };
            (
                self.store
                    .lookup_opened(via, parent, name, &st, fresh, fd)?,
                st,
            )
        } else {
            let st = via.call(Sys::Statx, || sys::statat(parent_fd.as_fd(), name))?;
            let inode = self
                .store
                .lookup(via, parent, parent_fd.as_fd(), name, &st, fresh)?;
            (inode, st)
        };
        Ok(self.entry_of(&inode, &st))
    }

    /// The entry reply for `inode`, `stat`ed as `st`.
    pub(crate) fn entry_of(&self, inode: &Inode, st: &sys::Stat) -> Entry {
        Entry {
            attr: crate::toolkit::attr::to_attr(inode.nodeid, st),
            generation: inode.generation(),
            entry_ttl: self.cfg.entry_ttl,
            attr_ttl: self.cfg.attr_ttl,
        }
    }

    /// Attributes with the configured time to live.
    pub(crate) fn attr_out(&self, ino: u64, st: &sys::Stat) -> AttrOut {
        AttrOut {
            attr: crate::toolkit::attr::to_attr(ino, st),
            ttl: self.cfg.attr_ttl,
        }
    }

    /// Whether `name` in directory `parent` is one of the hidden root names.
    pub(crate) fn hidden(&self, parent: u64, name: &[u8]) -> bool {
        parent == crate::passthrough::inode_store::ROOT_ID
            && self
                .cfg
                .hidden_root_names
                .iter()
                .any(|h| h.as_encoded_bytes() == name)
    }
}

impl FileSystem for Passthrough {
    type File = FdHandle;
    type Dir = Key;

    fn init(&self, init: &mut Init) -> io::Result<()> {
        let mut extra = Caps::empty();
        if self.cfg.kernel_passthrough {
            // Registering backing files needs CAP_SYS_ADMIN.
            let on = self.privileged
                && !self.cfg.caps_off.contains(Caps::PASSTHROUGH)
                && init.offered.contains(Caps::PASSTHROUGH);
            if on {
                init.max_stack_depth = 1;
                extra = Caps::PASSTHROUGH;
            } else {
                log::warn!(
                    "kernel passthrough not available (needs Linux 6.9+ and root): reads and writes go through the daemon"
                );
            }
            self.passthrough.store(on, Ordering::Relaxed);
        } else if self.cfg.direct_io {
            // Without it the kernel refuses MAP_SHARED of direct-I/O files (ENODEV).
            extra = Caps::DIRECT_IO_ALLOW_MMAP;
        }
        // File handles taken on the mount outlive the kernel's inodes (see `inode::export`).
        extra |= Caps::EXPORT_SUPPORT;
        crate::toolkit::init_flags::negotiate(
            init,
            &crate::toolkit::init_flags::Wants {
                keep_cache: self.cfg.keep_cache,
                readdirplus: true,
                writeback: self.cfg.writeback,
                extra,
                off: self.cfg.caps_off
                    | crate::toolkit::init_flags::readdirplus_off(self.cfg.readdirplus),
                max_io: self.cfg.max_io,
                max_background: Some(self.cfg.max_background),
            },
        );
        Ok(())
    }

    fn lookup(&self, req: &Request, parent: Ino, name: &OsStr) -> io::Result<Entry> {
        self.do_lookup(req, parent, name)
    }

    fn forget(&self, req: &Request, ino: Ino, nlookup: u64) {
        self.store.forget(self.lower.via(req), ino.0, nlookup);
    }

    fn getattr(&self, req: &Request, ino: Ino, fh: Option<&FdHandle>) -> io::Result<AttrOut> {
        self.do_getattr(req, ino, fh)
    }

    fn setattr(
        &self,
        req: &Request,
        ino: Ino,
        set: &SetAttr,
        fh: Option<&FdHandle>,
    ) -> io::Result<AttrOut> {
        self.do_setattr(req, ino, set, fh)
    }

    fn readlink(&self, req: &Request, ino: Ino, buf: &mut [u8]) -> io::Result<usize> {
        let (_, fd) = self.node(req, ino)?;
        self.lower
            .call(req, Sys::Readlinkat, || sys::readlink_fd(fd.as_fd(), buf))
    }

    fn mknod(
        &self,
        req: &Request,
        parent: Ino,
        name: &OsStr,
        mode: u32,
        rdev: u32,
    ) -> io::Result<Entry> {
        self.do_mknod(req, parent, name, mode, rdev)
    }

    fn mkdir(&self, req: &Request, parent: Ino, name: &OsStr, mode: u32) -> io::Result<Entry> {
        self.do_mkdir(req, parent, name, mode)
    }

    fn unlink(&self, req: &Request, parent: Ino, name: &OsStr) -> io::Result<()> {
        self.do_remove(req, parent, name, false)
    }

    fn rmdir(&self, req: &Request, parent: Ino, name: &OsStr) -> io::Result<()> {
        self.do_remove(req, parent, name, true)
    }

    fn symlink(
        &self,
        req: &Request,
        parent: Ino,
        name: &OsStr,
        target: &Path,
    ) -> io::Result<Entry> {
        self.do_symlink(req, parent, name, target)
    }

    fn rename(
        &self,
        req: &Request,
        parent: Ino,
        name: &OsStr,
        newparent: Ino,
        newname: &OsStr,
        flags: u32,
    ) -> io::Result<()> {
        self.do_rename(req, parent, name, newparent, newname, flags)
    }

    fn link(&self, req: &Request, ino: Ino, newparent: Ino, newname: &OsStr) -> io::Result<Entry> {
        self.do_link(req, ino, newparent, newname)
    }

    fn open(&self, req: &Request, ino: Ino, flags: i32) -> io::Result<Opened<FdHandle>> {
        let (inode, fh, fl) = self.do_open(req, ino, flags)?;
        Ok(self.opened(&inode, fh, fl))
    }

    fn read(
        &self,
        req: &Request,
        _ino: Ino,
        fh: &FdHandle,
        offset: u64,
        buf: &mut [u8],
    ) -> io::Result<usize> {
        self.lower
            .call(req, Sys::Pread, || sys::pread(fh.fd(), buf, offset))
    }

    fn write(
        &self,
        req: &Request,
        ino: Ino,
        fh: &FdHandle,
        offset: u64,
        data: &[u8],
        flags: WriteFlags,
    ) -> io::Result<u32> {
        self.do_write(req, ino, fh, offset, data, flags)
            .map(|n| n as u32)
    }

    fn flush(&self, req: &Request, _ino: Ino, fh: &FdHandle) -> io::Result<()> {
        // close(2) semantics on the lower file (errors of delayed writes on network file
        // systems surface here) without closing the handle's descriptor: close a duplicate.
        let dup = self.lower.call(req, Sys::Dup, || sys::dup(fh.fd()))?;
        self.lower.via(req).close(dup);
        Ok(())
    }

    fn release(&self, req: &Request, ino: Ino, fh: FdHandle) -> io::Result<()> {
        self.do_release(req, ino, fh);
        Ok(())
    }

    fn fsync(&self, req: &Request, _ino: Ino, fh: &FdHandle, datasync: bool) -> io::Result<()> {
        let call = if datasync { Sys::Fdatasync } else { Sys::Fsync };
        self.lower.call(req, call, || sys::fsync(fh.fd(), datasync))
    }

    fn opendir(&self, req: &Request, ino: Ino, flags: i32) -> io::Result<Opened<Key>> {
        self.do_opendir(req, ino, flags)
    }

    fn readdir(
        &self,
        req: &Request,
        ino: Ino,
        dh: &Key,
        offset: u64,
        out: &mut dyn DirSink,
    ) -> io::Result<()> {
        self.do_readdir(req, ino, dh, offset, out)
    }

    fn readdirplus(
        &self,
        req: &Request,
        ino: Ino,
        dh: &Key,
        offset: u64,
        out: &mut dyn DirPlusSink,
    ) -> io::Result<()> {
        self.do_readdirplus(req, ino, dh, offset, out)
    }

    fn releasedir(&self, req: &Request, ino: Ino, dh: Key) -> io::Result<()> {
        self.do_releasedir(req, ino, dh);
        Ok(())
    }

    fn fsyncdir(&self, req: &Request, _ino: Ino, dh: &Key, datasync: bool) -> io::Result<()> {
        let h = self.dir(dh)?;
        let call = if datasync { Sys::Fdatasync } else { Sys::Fsync };
        self.lower
            .call(req, call, || sys::fsync(h.fd().as_fd(), datasync))
    }

    fn statfs(&self, req: &Request, _ino: Ino) -> io::Result<Statfs> {
        let root = self.store.root().clone();
        let fd = self.store.fd(self.lower.via(req), &root)?;
        let s = self
            .lower
            .call(req, Sys::Fstatvfs, || sys::fstatvfs(fd.as_fd()))?;
        Ok(Statfs {
            blocks: s.f_blocks,
            bfree: s.f_bfree,
            bavail: s.f_bavail,
            files: s.f_files,
            ffree: s.f_ffree,
            bsize: s.f_bsize as u32,
            namelen: s.f_namemax as u32,
            frsize: s.f_frsize as u32,
        })
    }

    fn setxattr(
        &self,
        req: &Request,
        ino: Ino,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        position: u32,
    ) -> io::Result<()> {
        self.do_setxattr(req, ino, name, value, flags, position)
    }

    fn getxattr(&self, req: &Request, ino: Ino, name: &OsStr, buf: &mut [u8]) -> io::Result<usize> {
        self.do_getxattr(req, ino, name, buf)
    }

    fn listxattr(&self, req: &Request, ino: Ino, buf: &mut [u8]) -> io::Result<usize> {
        self.do_listxattr(req, ino, buf)
    }

    fn removexattr(&self, req: &Request, ino: Ino, name: &OsStr) -> io::Result<()> {
        self.do_removexattr(req, ino, name)
    }

    fn create(
        &self,
        req: &Request,
        parent: Ino,
        name: &OsStr,
        mode: u32,
        flags: i32,
    ) -> io::Result<(Entry, Opened<FdHandle>)> {
        let (inode, entry, fh, fl) = self.do_create(req, parent, name, mode, flags)?;
        Ok((entry, self.opened(&inode, fh, fl)))
    }

    fn ioctl(
        &self,
        _req: &Request,
        _ino: Ino,
        _fh: &FdHandle,
        _flags: u32,
        cmd: u32,
        _in_data: &[u8],
        _out_size: u32,
    ) -> io::Result<IoctlOut> {
        Err(crate::toolkit::ioctl::answer(cmd))
    }

    fn fallocate(
        &self,
        req: &Request,
        _ino: Ino,
        fh: &FdHandle,
        offset: u64,
        length: u64,
        mode: i32,
    ) -> io::Result<()> {
        self.lower.call(req, Sys::Fallocate, || {
            sys::fallocate(fh.fd(), mode, offset, length)
        })
    }

    fn lseek(
        &self,
        req: &Request,
        _ino: Ino,
        fh: &FdHandle,
        offset: i64,
        whence: i32,
    ) -> io::Result<i64> {
        self.lower
            .call(req, Sys::Lseek, || sys::lseek(fh.fd(), offset, whence))
    }

    fn copy_file_range(
        &self,
        req: &Request,
        _ino_in: Ino,
        fh_in: &FdHandle,
        offset_in: u64,
        _ino_out: Ino,
        fh_out: &FdHandle,
        offset_out: u64,
        len: u64,
        flags: u32,
    ) -> io::Result<u32> {
        // The reply carries a 32-bit count: copy at most that much (callers loop on short
        // copies).
        let len = len.min(u32::MAX as u64 & !0xfff);
        self.lower
            .call(req, Sys::CopyFileRange, || {
                sys::copy_file_range(fh_in.fd(), offset_in, fh_out.fd(), offset_out, len, flags)
            })
            .map(|n| n as u32)
    }
}

#[cfg(test)]
mod tests;
