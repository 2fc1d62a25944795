//! [`Classic`]'s fuser methods: one per operation, each building the request context,
//! lending the handle and the reply buffer, calling the file system and replying.

use std::ffi::OsStr;
use std::io;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::time::SystemTime;

use fuser::{
    AccessFlags, BsdFileFlags, CopyFileRangeFlags, Errno, FileHandle, Generation, INodeNo,
    IoctlFlags, KernelConfig, LockOwner, OpenFlags, PollEvents, PollFlags, PollNotifier,
    RenameFlags, ReplyAttr, ReplyBmap, ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus,
    ReplyEmpty, ReplyEntry, ReplyIoctl, ReplyLock, ReplyLseek, ReplyOpen, ReplyPoll, ReplyStatfs,
    ReplyWrite, ReplyXattr, RequestId, TimeOrNow, WriteFlags as FuserWriteFlags,
};

use super::convert::{
    Dir, DirPlus, file_attr, reply_attr, reply_empty, reply_entry, reply_opened, reply_sized,
    set_time, with_buf,
};
use super::{Classic, apply_init, ctx, errno, lend, panic_message, take};
use crate::filesystem::{Entry, FileSystem, Handle, Init, Ino, Lock, SetAttr, WriteFlags};
use crate::protocol::ops::Op;
use crate::sys::PATH_MAX;
use crate::toolkit::xattr_names::XATTR_MAX;

impl<F: FileSystem + 'static> fuser::Filesystem for Classic<F> {
    fn init(&mut self, _req: &fuser::Request, config: &mut KernelConfig) -> io::Result<()> {
        let mut init = Init::offered(
            crate::filesystem::Caps(config.capabilities().bits()),
            u32::MAX,
        );
        self.fs.init(&mut init)?;
        init.want |= self.extra;
        apply_init(&mut init, config);
        *self.negotiated.lock() = Some(init);
        Ok(())
    }

    fn destroy(&mut self) {
        if self.destroy {
            self.fs.destroy()
        }
    }

    fn interrupt(&self, _req: &fuser::Request, unique: RequestId) -> Result<(), Errno> {
        // No reply: the interrupted request answers (EINTR where it was cut short). Answering
        // ENOSYS, as fuser 0.18 did, would stop the kernel's interrupts for good.
        if let Err(p) = catch_unwind(AssertUnwindSafe(|| self.fs.interrupt(unique.0))) {
            log::error!("an interrupt panicked: {}", panic_message(&*p));
        }
        Ok(())
    }

    fn disconnected(&self) {
        if let Err(p) = catch_unwind(AssertUnwindSafe(|| self.fs.disconnected())) {
            log::error!("the end of the connection panicked: {}", panic_message(&*p));
        }
    }

    fn lookup(&self, req: &fuser::Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let r = ctx(Op::Lookup, req, parent);
        Self::contain(r.op, || {
            let e = self.fs.lookup(&r, Ino(parent.0), name);
            reply_entry(Entry::or_negative(e, self.negative_ttl), reply)
        })
    }

    fn forget(&self, req: &fuser::Request, ino: INodeNo, nlookup: u64) {
        let r = ctx(Op::Forget, req, ino);
        Self::contain(r.op, || self.fs.forget(&r, Ino(ino.0), nlookup))
    }

    fn getattr(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        fh: Option<FileHandle>,
        reply: ReplyAttr,
    ) {
        let r = ctx(Op::Getattr, req, ino);
        Self::contain(r.op, || {
            let fh = fh.map(lend::<F::File>);
            reply_attr(self.fs.getattr(&r, Ino(ino.0), fh.as_deref()), reply)
        })
    }

    fn setattr(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        kill_suidgid: bool,
        reply: ReplyAttr,
    ) {
        let r = ctx(Op::Setattr, req, ino);
        Self::contain(r.op, || {
            let set = SetAttr {
                mode,
                uid,
                gid,
                size,
                atime: set_time(atime),
                mtime: set_time(mtime),
                kill_suidgid,
            };
            let fh = fh.map(lend::<F::File>);
            reply_attr(self.fs.setattr(&r, Ino(ino.0), &set, fh.as_deref()), reply)
        })
    }

    fn readlink(&self, req: &fuser::Request, ino: INodeNo, reply: ReplyData) {
        let r = ctx(Op::Readlink, req, ino);
        Self::contain(r.op, || {
            with_buf(PATH_MAX, |buf| {
                match self.fs.readlink(&r, Ino(ino.0), buf) {
                    Ok(n) => reply.data(&buf[..n]),
                    Err(e) => reply.error(errno(&e)),
                }
            })
        })
    }

    fn mknod(
        &self,
        req: &fuser::Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let r = ctx(Op::Mknod, req, parent).with_umask(umask);
        Self::contain(r.op, || {
            reply_entry(self.fs.mknod(&r, Ino(parent.0), name, mode, rdev), reply)
        })
    }

    fn mkdir(
        &self,
        req: &fuser::Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let r = ctx(Op::Mkdir, req, parent).with_umask(umask);
        Self::contain(r.op, || {
            reply_entry(self.fs.mkdir(&r, Ino(parent.0), name, mode), reply)
        })
    }

    fn unlink(&self, req: &fuser::Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let r = ctx(Op::Unlink, req, parent);
        Self::contain(r.op, || {
            reply_empty(self.fs.unlink(&r, Ino(parent.0), name), reply)
        })
    }

    fn rmdir(&self, req: &fuser::Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let r = ctx(Op::Rmdir, req, parent);
        Self::contain(r.op, || {
            reply_empty(self.fs.rmdir(&r, Ino(parent.0), name), reply)
        })
    }

    fn symlink(
        &self,
        req: &fuser::Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let r = ctx(Op::Symlink, req, parent);
        Self::contain(r.op, || {
            reply_entry(self.fs.symlink(&r, Ino(parent.0), link_name, target), reply)
        })
    }

    fn rename(
        &self,
        req: &fuser::Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let r = ctx(Op::Rename, req, parent);
        Self::contain(r.op, || {
            reply_empty(
                self.fs.rename(
                    &r,
                    Ino(parent.0),
                    name,
                    Ino(newparent.0),
                    newname,
                    flags.bits(),
                ),
                reply,
            )
        })
    }

    fn link(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let r = ctx(Op::Link, req, ino);
        Self::contain(r.op, || {
            reply_entry(
                self.fs.link(&r, Ino(ino.0), Ino(newparent.0), newname),
                reply,
            )
        })
    }

    fn open(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        flags: OpenFlags,
        kill_suidgid: bool,
        reply: ReplyOpen,
    ) {
        let r = ctx(Op::Open, req, ino).with_kill_suidgid(kill_suidgid);
        Self::contain(r.op, || {
            reply_opened(self.fs.open(&r, Ino(ino.0), flags.0), reply)
        })
    }

    fn read(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let r = ctx(Op::Read, req, ino);
        Self::contain(r.op, || {
            let fh = lend::<F::File>(fh);
            with_buf(size as usize, |buf| {
                match self.fs.read(&r, Ino(ino.0), &fh, offset, buf) {
                    Ok(n) => reply.data(&buf[..n]),
                    Err(e) => reply.error(errno(&e)),
                }
            })
        })
    }

    fn write(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: FuserWriteFlags,
        flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let r = ctx(Op::Write, req, ino);
        Self::contain(r.op, || {
            let fh = lend::<F::File>(fh);
            let flags = WriteFlags {
                kill_suidgid: write_flags.contains(FuserWriteFlags::FUSE_WRITE_KILL_SUIDGID),
                direct: flags.0 & libc::O_DIRECT != 0,
                cache: write_flags.contains(FuserWriteFlags::FUSE_WRITE_CACHE),
            };
            match self.fs.write(&r, Ino(ino.0), &fh, offset, data, flags) {
                Ok(n) => reply.written(n),
                Err(e) => reply.error(errno(&e)),
            }
        })
    }

    fn flush(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        let r = ctx(Op::Flush, req, ino);
        Self::contain(r.op, || {
            let fh = lend::<F::File>(fh);
            reply_empty(self.fs.flush(&r, Ino(ino.0), &fh), reply)
        })
    }

    fn release(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let r = ctx(Op::Release, req, ino);
        Self::contain(r.op, || {
            reply_empty(self.fs.release(&r, Ino(ino.0), take(fh)), reply)
        })
    }

    fn fsync(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        let r = ctx(Op::Fsync, req, ino);
        Self::contain(r.op, || {
            let fh = lend::<F::File>(fh);
            reply_empty(self.fs.fsync(&r, Ino(ino.0), &fh, datasync), reply)
        })
    }

    fn opendir(&self, req: &fuser::Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let r = ctx(Op::Opendir, req, ino);
        Self::contain(r.op, || {
            reply_opened(self.fs.opendir(&r, Ino(ino.0), flags.0), reply)
        })
    }

    fn readdir(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let r = ctx(Op::Readdir, req, ino);
        Self::contain(r.op, || {
            let dh = lend::<F::Dir>(fh);
            match self
                .fs
                .readdir(&r, Ino(ino.0), &dh, offset, &mut Dir(&mut reply))
            {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(errno(&e)),
            }
        })
    }

    fn readdirplus(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let r = ctx(Op::Readdirplus, req, ino);
        Self::contain(r.op, || {
            let dh = lend::<F::Dir>(fh);
            match self
                .fs
                .readdirplus(&r, Ino(ino.0), &dh, offset, &mut DirPlus(&mut reply))
            {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(errno(&e)),
            }
        })
    }

    fn releasedir(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        let r = ctx(Op::Releasedir, req, ino);
        Self::contain(r.op, || {
            reply_empty(self.fs.releasedir(&r, Ino(ino.0), take(fh)), reply)
        })
    }

    fn fsyncdir(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        let r = ctx(Op::Fsyncdir, req, ino);
        Self::contain(r.op, || {
            let dh = lend::<F::Dir>(fh);
            reply_empty(self.fs.fsyncdir(&r, Ino(ino.0), &dh, datasync), reply)
        })
    }

    fn statfs(&self, req: &fuser::Request, ino: INodeNo, reply: ReplyStatfs) {
        let r = ctx(Op::Statfs, req, ino);
        Self::contain(r.op, || match self.fs.statfs(&r, Ino(ino.0)) {
            Ok(s) => reply.statfs(
                s.blocks, s.bfree, s.bavail, s.files, s.ffree, s.bsize, s.namelen, s.frsize,
            ),
            Err(e) => reply.error(errno(&e)),
        })
    }

    fn setxattr(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        position: u32,
        reply: ReplyEmpty,
    ) {
        let r = ctx(Op::Setxattr, req, ino);
        Self::contain(r.op, || {
            reply_empty(
                self.fs
                    .setxattr(&r, Ino(ino.0), name, value, flags, position),
                reply,
            )
        })
    }

    fn getxattr(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        name: &OsStr,
        size: u32,
        reply: ReplyXattr,
    ) {
        let r = ctx(Op::Getxattr, req, ino);
        Self::contain(r.op, || {
            with_buf((size as usize).min(XATTR_MAX), |buf| {
                let res = self.fs.getxattr(&r, Ino(ino.0), name, buf);
                reply_sized(size, res, buf, reply)
            })
        })
    }

    fn listxattr(&self, req: &fuser::Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let r = ctx(Op::Listxattr, req, ino);
        Self::contain(r.op, || {
            with_buf((size as usize).min(XATTR_MAX), |buf| {
                let res = self.fs.listxattr(&r, Ino(ino.0), buf);
                reply_sized(size, res, buf, reply)
            })
        })
    }

    fn removexattr(&self, req: &fuser::Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let r = ctx(Op::Removexattr, req, ino);
        Self::contain(r.op, || {
            reply_empty(self.fs.removexattr(&r, Ino(ino.0), name), reply)
        })
    }

    fn access(&self, req: &fuser::Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        let r = ctx(Op::Access, req, ino);
        Self::contain(r.op, || {
            reply_empty(self.fs.access(&r, Ino(ino.0), mask.bits()), reply)
        })
    }

    fn create(
        &self,
        req: &fuser::Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        kill_suidgid: bool,
        reply: ReplyCreate,
    ) {
        let r = ctx(Op::Create, req, parent)
            .with_umask(umask)
            .with_kill_suidgid(kill_suidgid);
        Self::contain(r.op, || {
            match self.fs.create(&r, Ino(parent.0), name, mode, flags) {
                Ok((e, o)) => {
                    let attr = file_attr(&e.attr);
                    let fl = fuser::FopenFlags::from_bits_retain(o.flags.0);
                    let fh = FileHandle(o.fh.into_raw());
                    let g = Generation(e.generation);
                    match o.backing {
                        None => reply.created(&e.entry_ttl, &attr, g, fh, fl),
                        Some(id) => {
                            // SAFETY: as in `reply_opened`.
                            let b = unsafe { reply.wrap_backing(id) };
                            reply.created_passthrough(&e.entry_ttl, &attr, g, fh, fl, &b);
                            b.into_raw();
                        }
                    }
                }
                Err(e) => reply.error(errno(&e)),
            }
        })
    }

    fn getlk(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        reply: ReplyLock,
    ) {
        let r = ctx(Op::Getlk, req, ino);
        Self::contain(r.op, || {
            let fh = lend::<F::File>(fh);
            let lock = Lock {
                start,
                end,
                typ,
                pid,
            };
            match self.fs.getlk(&r, Ino(ino.0), &fh, lock_owner.0, &lock) {
                Ok(l) => reply.locked(l.start, l.end, l.typ, l.pid),
                Err(e) => reply.error(errno(&e)),
            }
        })
    }

    fn setlk(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        sleep: bool,
        reply: ReplyEmpty,
    ) {
        let r = ctx(Op::Setlk, req, ino);
        Self::contain(r.op, || {
            let fh = lend::<F::File>(fh);
            let lock = Lock {
                start,
                end,
                typ,
                pid,
            };
            reply_empty(
                self.fs
                    .setlk(&r, Ino(ino.0), &fh, lock_owner.0, &lock, sleep),
                reply,
            )
        })
    }

    fn bmap(&self, req: &fuser::Request, ino: INodeNo, blocksize: u32, idx: u64, reply: ReplyBmap) {
        let r = ctx(Op::Bmap, req, ino);
        Self::contain(r.op, || {
            match self.fs.bmap(&r, Ino(ino.0), blocksize, idx) {
                Ok(b) => reply.bmap(b),
                Err(e) => reply.error(errno(&e)),
            }
        })
    }

    fn ioctl(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        fh: FileHandle,
        flags: IoctlFlags,
        cmd: u32,
        in_data: &[u8],
        out_size: u32,
        reply: ReplyIoctl,
    ) {
        let r = ctx(Op::Ioctl, req, ino);
        Self::contain(r.op, || {
            let fh = lend::<F::File>(fh);
            match self
                .fs
                .ioctl(&r, Ino(ino.0), &fh, flags.bits(), cmd, in_data, out_size)
            {
                Ok(out) => reply.ioctl(out.result, &out.data),
                Err(e) => reply.error(errno(&e)),
            }
        })
    }

    fn poll(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        fh: FileHandle,
        _ph: PollNotifier,
        events: PollEvents,
        flags: PollFlags,
        reply: ReplyPoll,
    ) {
        let r = ctx(Op::Poll, req, ino);
        Self::contain(r.op, || {
            let fh = lend::<F::File>(fh);
            match self
                .fs
                .poll(&r, Ino(ino.0), &fh, events.bits(), flags.bits())
            {
                Ok(rev) => reply.poll(PollEvents::from_bits_retain(rev)),
                Err(e) => reply.error(errno(&e)),
            }
        })
    }

    fn fallocate(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let r = ctx(Op::Fallocate, req, ino);
        Self::contain(r.op, || {
            let fh = lend::<F::File>(fh);
            reply_empty(
                self.fs.fallocate(&r, Ino(ino.0), &fh, offset, length, mode),
                reply,
            )
        })
    }

    fn lseek(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: i64,
        whence: i32,
        reply: ReplyLseek,
    ) {
        let r = ctx(Op::Lseek, req, ino);
        Self::contain(r.op, || {
            let fh = lend::<F::File>(fh);
            match self.fs.lseek(&r, Ino(ino.0), &fh, offset, whence) {
                Ok(o) => reply.offset(o),
                Err(e) => reply.error(errno(&e)),
            }
        })
    }

    fn copy_file_range(
        &self,
        req: &fuser::Request,
        ino_in: INodeNo,
        fh_in: FileHandle,
        offset_in: u64,
        ino_out: INodeNo,
        fh_out: FileHandle,
        offset_out: u64,
        len: u64,
        flags: CopyFileRangeFlags,
        reply: ReplyWrite,
    ) {
        let r = ctx(Op::CopyFileRange, req, ino_in);
        Self::contain(r.op, || {
            let (fi, fo) = (lend::<F::File>(fh_in), lend::<F::File>(fh_out));
            match self.fs.copy_file_range(
                &r,
                Ino(ino_in.0),
                &fi,
                offset_in,
                Ino(ino_out.0),
                &fo,
                offset_out,
                len,
                flags.bits() as u32,
            ) {
                Ok(n) => reply.written(n),
                Err(e) => reply.error(errno(&e)),
            }
        })
    }
}
