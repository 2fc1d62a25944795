//! The profiling decorator: a [`fuser::Filesystem`] over any inner file system that times every
//! request into the `fuse` layer, serves the control files, and keeps a panic in one request from
//! taking the mount down.
//!
//! Each method is one line of routing plus one call to `Profiled::run`, which starts the
//! timer (the count goes up before the inner call), calls the inner file system inside
//! `catch_unwind`, and stops the timer where the inner file system marked its reply ready
//! ([`ready`]), or else when the inner call returns. A panicking request drops its reply while
//! unwinding, which makes fuser answer `EIO`; the panic is logged and the mount keeps serving.
//!
//! # Where a request ends
//!
//! Writing a reply to `/dev/fuse` wakes the caller, and the scheduler may run the caller on this
//! thread's CPU at once, preempting the daemon before it reads the clock. Timed to the end of the
//! inner method, a request then includes the caller's own work: measured on a two-CPU VM with
//! Postmark, the `fuse` layer's GETATTR had a mean of 74 µs (an `fstat` of 1.3 µs below) and a
//! second peak at 54–107 µs that was the scheduler's, not the file system's. So inner file
//! systems call [`ready`] once a request's work is done, just before they build and send the
//! reply, and the request is recorded as ending there.
//!
//! Nothing done to a control file is counted: requests on them are answered here, untimed
//! (statfs goes to the inner file system as for the root, untimed, its lower calls unrecorded; locks and
//! bmap on them fail with `ENOLCK` and `EINVAL`; poll says ready). With
//! [`Control::listed`], a listing of the root starts with the control files (untimed too).
//!
//! fuser 0.18 does not export the type of `batch_forget`'s argument, so its default
//! implementation is used: a batch forget is counted as one `OP_FORGET` per node.

use std::cell::Cell;
use std::ffi::OsStr;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::time::SystemTime;

use fuser::{
    AccessFlags, BsdFileFlags, CopyFileRangeFlags, Errno, FileHandle, FileType, Filesystem,
    FopenFlags, Generation, INodeNo, IoctlFlags, KernelConfig, LockOwner, OpenFlags, PollEvents,
    PollFlags, PollNotifier, RenameFlags, ReplyAttr, ReplyBmap, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyIoctl, ReplyLock, ReplyLseek,
    ReplyOpen, ReplyPoll, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use profile_store::{Recorder, clock};

use crate::control::{Control, LISTED_BASE};
use crate::inode::ROOT_ID;
use crate::ops::Op;
use crate::passthrough::uncounted;

/// No timed request on this thread ([`REPLY_READY`]).
const UNARMED: u64 = u64::MAX;
/// A timed request whose reply is not marked ready yet.
const ARMED: u64 = u64::MAX - 1;

thread_local! {
    /// Clock reading at which the current request's reply became ready, or [`UNARMED`] /
    /// [`ARMED`].
    static REPLY_READY: Cell<u64> = const { Cell::new(UNARMED) };
}

/// Marks the current request's reply as ready and returns `r` unchanged. Inner file systems call
/// it once a request's work is done, just before building and sending the reply:
///
/// ```ignore
/// match ready(self.do_getattr(ino)) {
///     Ok(attr) => reply.attr(&ttl, &attr),
///     Err(e) => reply.error(errno(&e)),
/// }
/// ```
///
/// [`Profiled`] records the request as ending at the last such mark (see the module docs for
/// why); a request never marked is timed to the end of the inner method. Outside a timed
/// request (`--no-profile`, control files) it reads no clock.
#[inline(always)]
pub fn ready<T>(r: T) -> T {
    reply_ready();
    r
}

/// [`ready`] for a request that computes no result (release, releasedir).
#[inline(always)]
pub fn reply_ready() {
    REPLY_READY.with(|c| {
        if c.get() != UNARMED {
            c.set(clock::now());
        }
    });
}

/// Profiling and control files around an inner file system.
pub struct Profiled<F> {
    inner: F,
    rec: Option<Recorder>,
    control: Option<Control>,
}

/// Who serves a directory listing request (see [`Profiled::listing`]).
enum Listing<'a> {
    /// The inner file system, from this offset.
    Inner(u64),
    /// The control files, from this one on.
    Control(&'a Control, usize),
}

/// The message of a panic payload.
fn panic_message(p: &(dyn std::any::Any + Send)) -> &str {
    p.downcast_ref::<&str>()
        .copied()
        .or_else(|| p.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

impl<F: Filesystem> Profiled<F> {
    /// Wraps `inner`. `rec` is the `fuse` layer (over [`crate::ops::NAMES`]); `None` serves
    /// without profiling. `control` serves the control files (needs profiling to be useful).
    pub fn new(inner: F, rec: Option<Recorder>, control: Option<Control>) -> Profiled<F> {
        Profiled {
            inner,
            rec,
            control,
        }
    }

    /// The inner file system.
    pub fn inner(&self) -> &F {
        &self.inner
    }

    /// Times `f` as `op` and contains a panic in it.
    #[inline(always)]
    fn run(&self, op: Op, f: impl FnOnce()) {
        let Some(rec) = &self.rec else {
            return Self::contain(op, f);
        };
        let token = rec.start(op.id());
        // A decorator may wrap another: keep the enclosing one's state and hand it this
        // request's mark, so both end the request at the same place.
        let outer = REPLY_READY.replace(ARMED);
        Self::contain(op, f);
        let at = REPLY_READY.get();
        let end = if at == ARMED { clock::now() } else { at };
        REPLY_READY.set(match outer {
            UNARMED => UNARMED,
            _ if at == ARMED => outer,
            _ => at,
        });
        rec.record(token, end);
    }

    /// Runs `f` (serving `op`) without timing it, containing a panic in it.
    #[inline(always)]
    fn contain(op: Op, f: impl FnOnce()) {
        if let Err(p) = catch_unwind(AssertUnwindSafe(f)) {
            log::error!(
                "{} panicked, answered EIO: {}",
                op.name(),
                panic_message(&*p)
            );
        }
    }

    /// The control files, if `ino` is one of them.
    #[inline(always)]
    fn control(&self, ino: INodeNo) -> Option<&Control> {
        self.control.as_ref().filter(|_| Control::is_control(ino.0))
    }

    /// Who serves a `readdir` of `ino` at `offset`. With listed control files, a listing of
    /// the root starts with them (offsets [`LISTED_BASE`]` + k`, not counted: nothing done to a
    /// control file is), then continues with the inner file system's listing from its start.
    #[inline(always)]
    fn listing(&self, ino: INodeNo, offset: u64) -> Listing<'_> {
        if ino.0 != ROOT_ID {
            return Listing::Inner(offset);
        }
        let Some(c) = self.control.as_ref().filter(|c| c.is_listed()) else {
            return Listing::Inner(offset);
        };
        let n = c.entries().count() as u64;
        match offset {
            0 => Listing::Control(c, 0),
            o if o > LISTED_BASE && o < LISTED_BASE + n => {
                Listing::Control(c, (o - LISTED_BASE) as usize)
            }
            o if o == LISTED_BASE + n => Listing::Inner(0),
            o => Listing::Inner(o),
        }
    }

    /// Whether `name` in `parent` is a control file name (creating, removing, renaming: EPERM).
    fn reserved(&self, parent: INodeNo, name: &OsStr) -> bool {
        parent.0 == ROOT_ID
            && self
                .control
                .as_ref()
                .is_some_and(|c| c.ino_of(name).is_some())
    }
}

impl<F: Filesystem> Filesystem for Profiled<F> {
    fn init(&mut self, req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        self.inner.init(req, config)
    }

    fn destroy(&mut self) {
        self.inner.destroy()
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        if parent.0 == ROOT_ID {
            if let Some(c) = &self.control {
                if let Some(ino) = c.ino_of(name) {
                    return reply.entry(&c.ttl(), &c.attr(ino), Generation(0));
                }
            }
        }
        self.run(Op::Lookup, || self.inner.lookup(req, parent, name, reply))
    }

    fn forget(&self, req: &Request, ino: INodeNo, nlookup: u64) {
        if self.control(ino).is_some() {
            return;
        }
        self.run(Op::Forget, || self.inner.forget(req, ino, nlookup))
    }

    fn getattr(&self, req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        if let Some(c) = self.control(ino) {
            return reply.attr(&c.ttl(), &c.attr(ino.0));
        }
        self.run(Op::Getattr, || self.inner.getattr(req, ino, fh, reply))
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
        ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        crtime: Option<SystemTime>,
        chgtime: Option<SystemTime>,
        bkuptime: Option<SystemTime>,
        flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        if let Some(c) = self.control(ino) {
            // Truncation resets; times may be touched (ignored); anything else is refused.
            if mode.is_some() || uid.is_some() || gid.is_some() {
                return reply.error(Errno::EPERM);
            }
            if size.is_some() {
                if !c.may_reset(req.uid()) {
                    return reply.error(Errno::EACCES);
                }
                c.truncate(ino.0);
            }
            return reply.attr(&c.ttl(), &c.attr(ino.0));
        }
        self.run(Op::Setattr, || {
            self.inner.setattr(
                req, ino, mode, uid, gid, size, atime, mtime, ctime, fh, crtime, chgtime, bkuptime,
                flags, reply,
            )
        })
    }

    fn readlink(&self, req: &Request, ino: INodeNo, reply: ReplyData) {
        if self.control(ino).is_some() {
            return reply.error(Errno::EINVAL);
        }
        self.run(Op::Readlink, || self.inner.readlink(req, ino, reply))
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
        if self.reserved(parent, name) {
            return reply.error(Errno::EPERM);
        }
        self.run(Op::Mknod, || {
            self.inner
                .mknod(req, parent, name, mode, umask, rdev, reply)
        })
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
        if self.reserved(parent, name) {
            return reply.error(Errno::EPERM);
        }
        self.run(Op::Mkdir, || {
            self.inner.mkdir(req, parent, name, mode, umask, reply)
        })
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        if self.reserved(parent, name) {
            return reply.error(Errno::EPERM);
        }
        self.run(Op::Unlink, || self.inner.unlink(req, parent, name, reply))
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        if self.reserved(parent, name) {
            return reply.error(Errno::EPERM);
        }
        self.run(Op::Rmdir, || self.inner.rmdir(req, parent, name, reply))
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        if self.reserved(parent, link_name) {
            return reply.error(Errno::EPERM);
        }
        self.run(Op::Symlink, || {
            self.inner.symlink(req, parent, link_name, target, reply)
        })
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        if self.reserved(parent, name) || self.reserved(newparent, newname) {
            return reply.error(Errno::EPERM);
        }
        self.run(Op::Rename, || {
            self.inner
                .rename(req, parent, name, newparent, newname, flags, reply)
        })
    }

    fn link(
        &self,
        req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        if self.control(ino).is_some() || self.reserved(newparent, newname) {
            return reply.error(Errno::EPERM);
        }
        self.run(Op::Link, || {
            self.inner.link(req, ino, newparent, newname, reply)
        })
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        if let Some(c) = self.control(ino) {
            if flags.0 & libc::O_TRUNC != 0 {
                if !c.may_reset(req.uid()) {
                    return reply.error(Errno::EACCES);
                }
                c.truncate(ino.0);
            }
            return reply.opened(FileHandle(c.open(ino.0)), FopenFlags::FOPEN_DIRECT_IO);
        }
        self.run(Op::Open, || self.inner.open(req, ino, flags, reply))
    }

    fn read(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        flags: OpenFlags,
        lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        if let Some(c) = self.control(ino) {
            return c.read(fh.0, offset, size, |d| reply.data(d));
        }
        self.run(Op::Read, || {
            self.inner
                .read(req, ino, fh, offset, size, flags, lock_owner, reply)
        })
    }

    fn write(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        flags: OpenFlags,
        lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        if let Some(c) = self.control(ino) {
            if !c.may_reset(req.uid()) {
                return reply.error(Errno::EACCES);
            }
            return match c.write(ino.0, data) {
                Ok(()) => reply.written(data.len() as u32),
                Err(e) => reply.error(e),
            };
        }
        self.run(Op::Write, || {
            self.inner.write(
                req,
                ino,
                fh,
                offset,
                data,
                write_flags,
                flags,
                lock_owner,
                reply,
            )
        })
    }

    fn flush(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        if self.control(ino).is_some() {
            return reply.ok();
        }
        self.run(Op::Flush, || {
            self.inner.flush(req, ino, fh, lock_owner, reply)
        })
    }

    fn release(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        flags: OpenFlags,
        lock_owner: Option<LockOwner>,
        flush: bool,
        reply: ReplyEmpty,
    ) {
        if let Some(c) = self.control(ino) {
            c.release(fh.0);
            return reply.ok();
        }
        self.run(Op::Release, || {
            self.inner
                .release(req, ino, fh, flags, lock_owner, flush, reply)
        })
    }

    fn fsync(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        if self.control(ino).is_some() {
            return reply.ok();
        }
        self.run(Op::Fsync, || {
            self.inner.fsync(req, ino, fh, datasync, reply)
        })
    }

    fn opendir(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        if self.control(ino).is_some() {
            return reply.error(Errno::ENOTDIR);
        }
        self.run(Op::Opendir, || self.inner.opendir(req, ino, flags, reply))
    }

    fn readdir(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let offset = match self.listing(ino, offset) {
            Listing::Inner(offset) => offset,
            Listing::Control(c, from) => {
                for (k, (cino, name)) in c.entries().enumerate().skip(from) {
                    let next = LISTED_BASE + k as u64 + 1;
                    if reply.add(INodeNo(cino), next, FileType::RegularFile, name) {
                        break;
                    }
                }
                return reply.ok();
            }
        };
        self.run(Op::Readdir, || {
            self.inner.readdir(req, ino, fh, offset, reply)
        })
    }

    fn readdirplus(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let offset = match self.listing(ino, offset) {
            Listing::Inner(offset) => offset,
            Listing::Control(c, from) => {
                for (k, (cino, name)) in c.entries().enumerate().skip(from) {
                    let next = LISTED_BASE + k as u64 + 1;
                    let attr = c.attr(cino);
                    if reply.add(INodeNo(cino), next, name, &c.ttl(), &attr, Generation(0)) {
                        break;
                    }
                }
                return reply.ok();
            }
        };
        self.run(Op::Readdirplus, || {
            self.inner.readdirplus(req, ino, fh, offset, reply)
        })
    }

    fn releasedir(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.run(Op::Releasedir, || {
            self.inner.releasedir(req, ino, fh, flags, reply)
        })
    }

    fn fsyncdir(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.run(Op::Fsyncdir, || {
            self.inner.fsyncdir(req, ino, fh, datasync, reply)
        })
    }

    fn statfs(&self, req: &Request, ino: INodeNo, reply: ReplyStatfs) {
        if self.control(ino).is_some() {
            // Not counted, in any layer: the inner file system answers as for the root (the
            // file system the control files live in) with its lower calls unrecorded.
            return Self::contain(Op::Statfs, || {
                uncounted(|| self.inner.statfs(req, INodeNo(ROOT_ID), reply))
            });
        }
        self.run(Op::Statfs, || self.inner.statfs(req, ino, reply))
    }

    fn setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        position: u32,
        reply: ReplyEmpty,
    ) {
        if self.control(ino).is_some() {
            return reply.error(Errno::EPERM);
        }
        self.run(Op::Setxattr, || {
            self.inner
                .setxattr(req, ino, name, value, flags, position, reply)
        })
    }

    fn getxattr(&self, req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        if self.control(ino).is_some() {
            return reply.error(Errno::from_i32(libc::ENODATA));
        }
        self.run(Op::Getxattr, || {
            self.inner.getxattr(req, ino, name, size, reply)
        })
    }

    fn listxattr(&self, req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        if self.control(ino).is_some() {
            return if size == 0 {
                reply.size(0)
            } else {
                reply.data(&[])
            };
        }
        self.run(Op::Listxattr, || {
            self.inner.listxattr(req, ino, size, reply)
        })
    }

    fn removexattr(&self, req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        if self.control(ino).is_some() {
            return reply.error(Errno::EPERM);
        }
        self.run(Op::Removexattr, || {
            self.inner.removexattr(req, ino, name, reply)
        })
    }

    fn access(&self, req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        if self.control(ino).is_some() {
            return reply.ok();
        }
        self.run(Op::Access, || self.inner.access(req, ino, mask, reply))
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
        if self.reserved(parent, name) {
            return reply.error(Errno::EPERM);
        }
        self.run(Op::Create, || {
            self.inner
                .create(req, parent, name, mode, umask, flags, reply)
        })
    }

    fn getlk(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        reply: ReplyLock,
    ) {
        if self.control(ino).is_some() {
            // Only reached when locks are forwarded to the file system (by default they are
            // kernel-local and never are): control files cannot be locked.
            return reply.error(Errno::ENOLCK);
        }
        self.run(Op::Getlk, || {
            self.inner
                .getlk(req, ino, fh, lock_owner, start, end, typ, pid, reply)
        })
    }

    fn setlk(
        &self,
        req: &Request,
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
        if self.control(ino).is_some() {
            return reply.error(Errno::ENOLCK);
        }
        self.run(Op::Setlk, || {
            self.inner
                .setlk(req, ino, fh, lock_owner, start, end, typ, pid, sleep, reply)
        })
    }

    fn bmap(&self, req: &Request, ino: INodeNo, blocksize: u32, idx: u64, reply: ReplyBmap) {
        if self.control(ino).is_some() {
            // No blocks (and not ENOSYS, which would stop the kernel asking for any file).
            return reply.error(Errno::EINVAL);
        }
        self.run(Op::Bmap, || {
            self.inner.bmap(req, ino, blocksize, idx, reply)
        })
    }

    fn ioctl(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        flags: IoctlFlags,
        cmd: u32,
        in_data: &[u8],
        out_size: u32,
        reply: ReplyIoctl,
    ) {
        if self.control(ino).is_some() {
            return reply.error(Errno::from_i32(libc::ENOTTY));
        }
        self.run(Op::Ioctl, || {
            self.inner
                .ioctl(req, ino, fh, flags, cmd, in_data, out_size, reply)
        })
    }

    fn poll(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        ph: PollNotifier,
        events: PollEvents,
        flags: PollFlags,
        reply: ReplyPoll,
    ) {
        if self.control(ino).is_some() {
            // Always ready, like a regular file (and not ENOSYS, which would stop the kernel
            // polling any file of the mount).
            return reply.poll(
                PollEvents::POLLIN
                    | PollEvents::POLLOUT
                    | PollEvents::POLLRDNORM
                    | PollEvents::POLLWRNORM,
            );
        }
        self.run(Op::Poll, || {
            self.inner.poll(req, ino, fh, ph, events, flags, reply)
        })
    }

    fn fallocate(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        if self.control(ino).is_some() {
            return reply.error(Errno::EPERM);
        }
        self.run(Op::Fallocate, || {
            self.inner
                .fallocate(req, ino, fh, offset, length, mode, reply)
        })
    }

    fn lseek(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: i64,
        whence: i32,
        reply: ReplyLseek,
    ) {
        if self.control(ino).is_some() {
            return reply.error(Errno::from_i32(libc::ESPIPE));
        }
        self.run(Op::Lseek, || {
            self.inner.lseek(req, ino, fh, offset, whence, reply)
        })
    }

    fn copy_file_range(
        &self,
        req: &Request,
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
        if self.control(ino_in).is_some() || self.control(ino_out).is_some() {
            // Let the kernel fall back to read/write, which the control files serve.
            return reply.error(Errno::from_i32(libc::EXDEV));
        }
        self.run(Op::CopyFileRange, || {
            self.inner.copy_file_range(
                req, ino_in, fh_in, offset_in, ino_out, fh_out, offset_out, len, flags, reply,
            )
        })
    }
}
