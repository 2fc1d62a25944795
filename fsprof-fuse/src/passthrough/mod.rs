//! The passthrough file system: serves a lower directory unchanged (a user-space Base0fs).
//!
//! Each FUSE operation is implemented as a method returning `io::Result` (in `meta`, `data`,
//! `dir`, `xattr`); the [`fuser::Filesystem`] implementation below only calls them and
//! replies, converting errors in one place ([`crate::errno`]).

mod data;
mod dir;
mod meta;
mod xattr;

use std::cell::RefCell;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use fuser::{
    BsdFileFlags, CopyFileRangeFlags, FileAttr, FileHandle, Filesystem, FopenFlags, Generation,
    INodeNo, InitFlags, IoctlFlags, KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr,
    ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyIoctl,
    ReplyLseek, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use profile_store::Recorder;

use crate::errno::errno;
use crate::handles::HandleTable;
use crate::inode::{Inode, InodeMode, InodeStore};
use crate::ops::Op;
use crate::profiled::{ready, reply_ready};
use crate::sys;

pub use dir::{DirHandle, walk};

/// Settings of the passthrough.
#[derive(Debug, Clone)]
pub struct PassthroughConfig {
    /// How long the kernel may cache names (entry timeout). Default 1 s.
    pub entry_ttl: Duration,
    /// How long the kernel may cache attributes. Default 1 s.
    pub attr_ttl: Duration,
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
    pub caps_off: InitFlags,
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
            writeback: false,
            keep_cache: true,
            direct_io: false,
            hidden_root_names: Vec::new(),
            inode_mode: InodeMode::Auto,
            fd_cache: 8192,
            max_io: 1 << 20,
            max_background: 64,
            flush: Flush::Auto,
            caps_off: InitFlags::empty(),
            kernel_passthrough: false,
        }
    }
}

/// Times lower-level system calls into a `lower` layer, under the FUSE operation that made them.
#[derive(Debug, Clone, Default)]
pub struct Lower {
    rec: Option<Recorder>,
}

impl Lower {
    /// Records into `rec` (a recorder over [`crate::ops::NAMES`]), or nothing.
    pub fn new(rec: Option<Recorder>) -> Lower {
        Lower { rec }
    }

    /// Runs one lower system call `f` on behalf of `op` (recorded unless inside [`uncounted`]).
    #[inline(always)]
    pub fn call<R>(&self, op: Op, f: impl FnOnce() -> R) -> R {
        match &self.rec {
            Some(r) if !UNCOUNTED.get() => r.measure(op.id(), f),
            _ => f(),
        }
    }
}

thread_local! {
    /// Lower calls are not recorded on this thread (see [`uncounted`]).
    static UNCOUNTED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with the recording of lower calls ([`Lower::call`], in every layer) suspended on
/// this thread: what an inner file system does for a request on a control file, which nothing
/// may count, stays out of its lower and branch layers too.
pub fn uncounted<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            UNCOUNTED.set(self.0);
        }
    }
    let _restore = Restore(UNCOUNTED.replace(true));
    f()
}

/// The passthrough file system over one lower directory.
pub struct Passthrough {
    pub(crate) store: InodeStore,
    pub(crate) cfg: PassthroughConfig,
    pub(crate) lower: Lower,
    pub(crate) dirs: HandleTable<DirHandle>,
    /// Daemon runs as root: create as the caller, link by `AT_EMPTY_PATH`.
    pub(crate) privileged: bool,
    /// Opens are answered with `FOPEN_NOFLUSH` (see [`Flush`]).
    pub(crate) noflush: bool,
    /// Kernel passthrough is on (asked for and granted at init).
    pub(crate) passthrough: bool,
    /// Backing files of open handles (kernel passthrough), by handle.
    pub(crate) backings: HandleTable<fuser::BackingId>,
}

thread_local! {
    /// Per-thread I/O buffer for reads, `O_DIRECT` writes, xattrs and readlink (grown once,
    /// reused).
    static BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Alignment of the slice [`with_buf`] hands out: enough for `O_DIRECT` on any common device,
/// which needs buffers aligned to the logical block size (512 B or 4 KiB).
pub const DIO_ALIGN: usize = 4096;

/// Runs `f` with this thread's I/O buffer, `len` bytes long and aligned to [`DIO_ALIGN`], so
/// that it can take `O_DIRECT` reads and writes (grown once, then reused: a read reply
/// allocates nothing). Not reentrant: `f` must not call it again. RAIF's reads use it too.
pub fn with_buf<R>(len: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
    BUF.with(|b| {
        let mut b = b.borrow_mut();
        if b.len() < len + DIO_ALIGN {
            b.resize(len + DIO_ALIGN, 0);
        }
        let start = b.as_ptr().addr().wrapping_neg() % DIO_ALIGN;
        f(&mut b[start..start + len])
    })
}

impl Passthrough {
    /// Opens LOWER and builds the inode store.
    pub fn new(lower_dir: &Path, cfg: PassthroughConfig, lower: Lower) -> io::Result<Passthrough> {
        let root = sys::open_path(lower_dir, libc::O_PATH | libc::O_DIRECTORY)?;
        let noflush = match cfg.flush {
            Flush::Always => false,
            Flush::Never => true,
            Flush::Auto => {
                let magic = sys::fstatfs_type(root.as_fd())?;
                !FLUSH_FS_MAGICS.contains(&magic)
            }
        };
        let store = InodeStore::new(root, cfg.inode_mode, cfg.fd_cache)?;
        Ok(Passthrough {
            store,
            cfg,
            lower,
            dirs: HandleTable::default(),
            privileged: sys::geteuid() == 0,
            noflush,
            passthrough: false,
            backings: HandleTable::default(),
        })
    }

    /// The inode store (for tests and diagnostics).
    pub fn store(&self) -> &InodeStore {
        &self.store
    }

    /// Inode and its `O_PATH` descriptor.
    #[inline]
    pub(crate) fn node(&self, ino: INodeNo) -> io::Result<(Arc<Inode>, Arc<OwnedFd>)> {
        let inode = self.store.get(ino.0)?;
        let fd = self.store.fd(&inode)?;
        Ok((inode, fd))
    }

    /// Looks `name` up in `parent` and counts one kernel lookup: the entry reply's content.
    pub(crate) fn entry(
        &self,
        op: Op,
        parent: &Arc<Inode>,
        parent_fd: &OwnedFd,
        name: &OsStr,
        fresh: bool,
    ) -> io::Result<(FileAttr, Generation)> {
        let (inode, st) = if fresh && self.store.uses_handles() {
            // A new object needs an O_PATH descriptor for its handle anyway: open it first and
            // stat that, rather than stat the name, then open and stat it again.
            let fd = self.store.retry_emfile(|| {
                sys::openat(parent_fd.as_fd(), name, libc::O_PATH | libc::O_NOFOLLOW, 0)
            })?;
            let st = self.lower.call(op, || sys::fstat(fd.as_fd()))?;
            (self.store.lookup_opened(parent, name, &st, fresh, fd)?, st)
        } else {
            let st = self
                .lower
                .call(op, || sys::statat(parent_fd.as_fd(), name))?;
            let inode = self
                .store
                .lookup(parent, parent_fd.as_fd(), name, &st, fresh)?;
            (inode, st)
        };
        Ok((
            crate::attr::to_attr(inode.nodeid, &st),
            Generation(inode.generation()),
        ))
    }

    /// Whether `name` in directory `parent` is one of the hidden root names.
    pub(crate) fn hidden(&self, parent: u64, name: &[u8]) -> bool {
        parent == crate::inode::ROOT_ID
            && self
                .cfg
                .hidden_root_names
                .iter()
                .any(|h| h.as_encoded_bytes() == name)
    }

    fn reply_entry(&self, r: io::Result<(FileAttr, Generation)>, reply: ReplyEntry) {
        match ready(r) {
            Ok((attr, generation)) => {
                reply.entry_with_ttls(&self.cfg.attr_ttl, &self.cfg.entry_ttl, &attr, generation)
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn reply_empty(r: io::Result<()>, reply: ReplyEmpty) {
        match ready(r) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn reply_attr(&self, r: io::Result<FileAttr>, reply: ReplyAttr) {
        match ready(r) {
            Ok(a) => reply.attr(&self.cfg.attr_ttl, &a),
            Err(e) => reply.error(errno(&e)),
        }
    }
}

impl Filesystem for Passthrough {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> io::Result<()> {
        if self.cfg.kernel_passthrough {
            // Registering backing files needs CAP_SYS_ADMIN.
            self.passthrough = self.privileged
                && !self.cfg.caps_off.contains(InitFlags::FUSE_PASSTHROUGH)
                && config.capabilities().contains(InitFlags::FUSE_PASSTHROUGH)
                && config.set_max_stack_depth(1).is_ok();
            if !self.passthrough {
                log::warn!(
                    "kernel passthrough not available (needs Linux 6.9+ and root): reads and writes go through the daemon"
                );
            }
        }
        crate::init::negotiate(
            config,
            &crate::init::Wants {
                keep_cache: self.cfg.keep_cache,
                readdirplus: true,
                writeback: self.cfg.writeback,
                extra: if self.passthrough {
                    InitFlags::FUSE_PASSTHROUGH
                } else if self.cfg.direct_io {
                    // Without it the kernel refuses MAP_SHARED of direct-I/O files (ENODEV).
                    InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP
                } else {
                    InitFlags::empty()
                },
                off: self.cfg.caps_off,
                max_io: self.cfg.max_io,
                max_background: Some(self.cfg.max_background),
            },
        );
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        self.reply_entry(self.do_lookup(parent, name), reply)
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.store.forget(ino.0, nlookup);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        self.reply_attr(self.do_getattr(ino, fh), reply)
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<std::time::SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<std::time::SystemTime>,
        _chgtime: Option<std::time::SystemTime>,
        _bkuptime: Option<std::time::SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let r = self.do_setattr(req, ino, mode, uid, gid, size, atime, mtime, fh);
        self.reply_attr(r, reply)
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let (_, fd) = match self.node(ino) {
            Ok(n) => n,
            Err(e) => return reply.error(errno(&ready(e))),
        };
        with_buf(sys::PATH_MAX, |buf| {
            let r = self
                .lower
                .call(Op::Readlink, || sys::readlink_fd(fd.as_fd(), buf));
            match ready(r) {
                Ok(n) => reply.data(&buf[..n]),
                Err(e) => reply.error(errno(&e)),
            }
        })
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        self.reply_entry(self.do_mknod(req, parent, name, mode, umask, rdev), reply)
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        self.reply_entry(self.do_mkdir(req, parent, name, mode, umask), reply)
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        Self::reply_empty(self.do_remove(Op::Unlink, parent, name, false), reply)
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        Self::reply_empty(self.do_remove(Op::Rmdir, parent, name, true), reply)
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        self.reply_entry(self.do_symlink(req, parent, link_name, target), reply)
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        Self::reply_empty(
            self.do_rename(parent, name, newparent, newname, flags.bits()),
            reply,
        )
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        self.reply_entry(self.do_link(ino, newparent, newname), reply)
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        match self.do_open(req, ino, flags.0) {
            Ok((inode, fh, fl)) if self.passthrough => {
                // Registering the backing file is part of the open: mark after it.
                match ready(self.backing(&inode, fh, |fd| reply.open_backing(fd))) {
                    Ok(b) => reply.opened_passthrough(fh, fl, &b),
                    Err(e) => {
                        // E.g. a lower file on a stacked file system (ELOOP): serve it ourselves.
                        log::warn!("kernel passthrough refused for inode {}: {e}", inode.nodeid);
                        reply.opened(fh, fl)
                    }
                }
            }
            r => match ready(r) {
                Ok((_, fh, fl)) => reply.opened(fh, fl),
                Err(e) => reply.error(errno(&e)),
            },
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        self.do_read(fh, offset, size, reply)
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let kill = write_flags.contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID);
        let direct = flags.0 & libc::O_DIRECT != 0;
        match ready(self.do_write(fh, offset, data, direct, kill)) {
            Ok(n) => reply.written(n as u32),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        Self::reply_empty(self.do_flush(fh), reply)
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.do_release(ino, fh);
        reply_ready();
        reply.ok()
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        Self::reply_empty(self.do_fsync(fh, datasync), reply)
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        match ready(self.do_opendir(ino, flags.0)) {
            Ok(fh) => reply.opened(fh, FopenFlags::empty()),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        reply: ReplyDirectory,
    ) {
        self.do_readdir(ino, fh, offset, reply)
    }

    fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        reply: ReplyDirectoryPlus,
    ) {
        self.do_readdirplus(ino, fh, offset, reply)
    }

    fn releasedir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.do_releasedir(ino, fh);
        reply_ready();
        reply.ok()
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        Self::reply_empty(self.do_fsyncdir(fh, datasync), reply)
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let root = self.store.root().clone();
        let r = self
            .store
            .fd(&root)
            .and_then(|fd| self.lower.call(Op::Statfs, || sys::fstatvfs(fd.as_fd())));
        match ready(r) {
            Ok(s) => reply.statfs(
                s.f_blocks,
                s.f_bfree,
                s.f_bavail,
                s.f_files,
                s.f_ffree,
                s.f_bsize as u32,
                s.f_namemax as u32,
                s.f_frsize as u32,
            ),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn setxattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        position: u32,
        reply: ReplyEmpty,
    ) {
        Self::reply_empty(self.do_setxattr(ino, name, value, flags, position), reply)
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        self.do_getxattr(ino, name, size, reply)
    }

    fn listxattr(&self, req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        self.do_listxattr(req.uid(), ino, size, reply)
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        Self::reply_empty(self.do_removexattr(ino, name), reply)
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        match self.do_create(req, parent, name, mode, umask, flags) {
            Ok((inode, attr, generation, fh, fl)) if self.passthrough => {
                // Registering the backing file is part of the create: mark after it.
                match ready(self.backing(&inode, fh, |fd| reply.open_backing(fd))) {
                    Ok(b) => reply.created_passthrough(
                        &self.cfg.entry_ttl,
                        &attr,
                        generation,
                        fh,
                        fl,
                        &b,
                    ),
                    Err(e) => {
                        log::warn!("kernel passthrough refused for inode {}: {e}", inode.nodeid);
                        reply.created(&self.cfg.entry_ttl, &attr, generation, fh, fl)
                    }
                }
            }
            r => match ready(r) {
                Ok((_, attr, generation, fh, fl)) => {
                    reply.created(&self.cfg.entry_ttl, &attr, generation, fh, fl)
                }
                Err(e) => reply.error(errno(&e)),
            },
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        Self::reply_empty(self.do_fallocate(fh, offset, length, mode), reply)
    }

    fn lseek(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: i64,
        whence: i32,
        reply: ReplyLseek,
    ) {
        match ready(self.do_lseek(fh, offset, whence)) {
            Ok(o) => reply.offset(o),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn ioctl(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: IoctlFlags,
        cmd: u32,
        _in_data: &[u8],
        _out_size: u32,
        reply: ReplyIoctl,
    ) {
        reply.error(ready(crate::ioctl::answer(cmd)))
    }

    fn copy_file_range(
        &self,
        _req: &Request,
        _ino_in: INodeNo,
        fh_in: FileHandle,
        offset_in: u64,
        _ino_out: INodeNo,
        fh_out: FileHandle,
        offset_out: u64,
        len: u64,
        flags: CopyFileRangeFlags,
        reply: ReplyWrite,
    ) {
        match ready(self.do_copy_file_range(
            fh_in,
            offset_in,
            fh_out,
            offset_out,
            len,
            flags.bits() as u32,
        )) {
            Ok(n) => reply.written(n as u32),
            Err(e) => reply.error(errno(&e)),
        }
    }
}
