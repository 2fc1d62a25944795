//! Layers: types that implement [`FileSystem`] over an inner one, stacked by the program in one
//! place (`app.rs`): transport → [`control::Control`] → [`profiled`] → [`records`] → file system.
//!
//! Most layers only need to act around every request (time it, delay it, log it): they
//! implement [`Hook`], and [`Hooked`] does the forwarding of every operation once, for all of
//! them. A layer that answers some requests itself ([`control::Control`]) implements the trait
//! by hand.

pub mod control;
pub mod profiled;
pub mod records;

use std::ffi::OsStr;
use std::io;
use std::path::Path;

use crate::filesystem::{
    AttrOut, DirPlusSink, DirSink, Entry, FileSystem, Init, Ino, IoctlOut, Lock, Opened, Request,
    SetAttr, Statfs, WriteFlags,
};

/// Where a request acts, for layers that report or target it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span<'a> {
    /// Byte offset (read, write, fallocate, copy_file_range: its source).
    pub offset: Option<u64>,
    /// Byte count asked for.
    pub size: Option<u64>,
    /// The name in the request's node (a directory) that it acts on: lookup, mknod, mkdir,
    /// unlink, rmdir, symlink, link and create (the new name), rename (the old one).
    pub name: Option<&'a OsStr>,
}

impl<'a> Span<'a> {
    const NONE: Span<'static> = Span {
        offset: None,
        size: None,
        name: None,
    };

    fn at(offset: u64, size: u64) -> Span<'static> {
        Span {
            offset: Some(offset),
            size: Some(size),
            name: None,
        }
    }

    fn named(name: &'a OsStr) -> Span<'a> {
        Span {
            name: Some(name),
            ..Span::NONE
        }
    }
}

/// Something done around every request of a [`Hooked`] file system.
pub trait Hook: Send + Sync {
    /// Runs the request `req` (about node [`Request::nodeid`], over `span` of it) by calling
    /// `serve` with `req` (or a copy of it that carries more, e.g. [`Request::traced`]), which
    /// runs it in the inner file system, and returns what that answers (or its own answer
    /// instead).
    fn around<R>(
        &self,
        req: &Request,
        span: Span<'_>,
        serve: impl FnOnce(&Request) -> io::Result<R>,
    ) -> io::Result<R>;

    /// Request `unique` should end early ([`FileSystem::interrupt`]); the inner file system is
    /// told too.
    fn interrupt(&self, unique: u64) {
        let _ = unique;
    }

    /// The connection has ended ([`FileSystem::disconnected`]); the inner file system is told
    /// too.
    fn disconnected(&self) {}
}

/// A file system with a [`Hook`] around each of its requests.
pub struct Hooked<H, F> {
    hook: H,
    inner: F,
}

impl<H: Hook, F: FileSystem> Hooked<H, F> {
    /// `inner` with `hook` around its requests.
    pub fn new(hook: H, inner: F) -> Hooked<H, F> {
        Hooked { hook, inner }
    }

    /// The hook.
    pub fn hook(&self) -> &H {
        &self.hook
    }

    /// The inner file system.
    pub fn inner(&self) -> &F {
        &self.inner
    }
}

impl<H: Hook, F: FileSystem> FileSystem for Hooked<H, F> {
    type File = F::File;
    type Dir = F::Dir;

    fn init(&self, init: &mut Init) -> io::Result<()> {
        self.inner.init(init)
    }

    fn destroy(&self) {
        self.inner.destroy()
    }

    fn interrupt(&self, unique: u64) {
        self.hook.interrupt(unique);
        self.inner.interrupt(unique)
    }

    fn disconnected(&self) {
        self.hook.disconnected();
        self.inner.disconnected()
    }

    fn lookup(&self, req: &Request, parent: Ino, name: &OsStr) -> io::Result<Entry> {
        self.hook.around(req, Span::named(name), |req| {
            self.inner.lookup(req, parent, name)
        })
    }

    fn forget(&self, req: &Request, ino: Ino, nlookup: u64) {
        let _ = self.hook.around(req, Span::NONE, |req| {
            self.inner.forget(req, ino, nlookup);
            Ok(())
        });
    }

    fn getattr(&self, req: &Request, ino: Ino, fh: Option<&F::File>) -> io::Result<AttrOut> {
        self.hook
            .around(req, Span::NONE, |req| self.inner.getattr(req, ino, fh))
    }

    fn setattr(
        &self,
        req: &Request,
        ino: Ino,
        set: &SetAttr,
        fh: Option<&F::File>,
    ) -> io::Result<AttrOut> {
        let span = Span {
            offset: set.size,
            ..Span::NONE
        };
        self.hook
            .around(req, span, |req| self.inner.setattr(req, ino, set, fh))
    }

    fn readlink(&self, req: &Request, ino: Ino, buf: &mut [u8]) -> io::Result<usize> {
        self.hook
            .around(req, Span::NONE, |req| self.inner.readlink(req, ino, buf))
    }

    fn mknod(
        &self,
        req: &Request,
        parent: Ino,
        name: &OsStr,
        mode: u32,
        rdev: u32,
    ) -> io::Result<Entry> {
        self.hook.around(req, Span::named(name), |req| {
            self.inner.mknod(req, parent, name, mode, rdev)
        })
    }

    fn mkdir(&self, req: &Request, parent: Ino, name: &OsStr, mode: u32) -> io::Result<Entry> {
        self.hook.around(req, Span::named(name), |req| {
            self.inner.mkdir(req, parent, name, mode)
        })
    }

    fn unlink(&self, req: &Request, parent: Ino, name: &OsStr) -> io::Result<()> {
        self.hook.around(req, Span::named(name), |req| {
            self.inner.unlink(req, parent, name)
        })
    }

    fn rmdir(&self, req: &Request, parent: Ino, name: &OsStr) -> io::Result<()> {
        self.hook.around(req, Span::named(name), |req| {
            self.inner.rmdir(req, parent, name)
        })
    }

    fn symlink(
        &self,
        req: &Request,
        parent: Ino,
        name: &OsStr,
        target: &Path,
    ) -> io::Result<Entry> {
        self.hook.around(req, Span::named(name), |req| {
            self.inner.symlink(req, parent, name, target)
        })
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
        self.hook.around(req, Span::named(name), |req| {
            self.inner
                .rename(req, parent, name, newparent, newname, flags)
        })
    }

    fn link(&self, req: &Request, ino: Ino, newparent: Ino, newname: &OsStr) -> io::Result<Entry> {
        self.hook.around(req, Span::named(newname), |req| {
            self.inner.link(req, ino, newparent, newname)
        })
    }

    fn open(&self, req: &Request, ino: Ino, flags: i32) -> io::Result<Opened<F::File>> {
        self.hook
            .around(req, Span::NONE, |req| self.inner.open(req, ino, flags))
    }

    fn read(
        &self,
        req: &Request,
        ino: Ino,
        fh: &F::File,
        offset: u64,
        buf: &mut [u8],
    ) -> io::Result<usize> {
        let span = Span::at(offset, buf.len() as u64);
        self.hook
            .around(req, span, |req| self.inner.read(req, ino, fh, offset, buf))
    }

    fn write(
        &self,
        req: &Request,
        ino: Ino,
        fh: &F::File,
        offset: u64,
        data: &[u8],
        flags: WriteFlags,
    ) -> io::Result<u32> {
        let span = Span::at(offset, data.len() as u64);
        self.hook.around(req, span, |req| {
            self.inner.write(req, ino, fh, offset, data, flags)
        })
    }

    fn flush(&self, req: &Request, ino: Ino, fh: &F::File) -> io::Result<()> {
        self.hook
            .around(req, Span::NONE, |req| self.inner.flush(req, ino, fh))
    }

    fn release(&self, req: &Request, ino: Ino, fh: F::File) -> io::Result<()> {
        self.hook
            .around(req, Span::NONE, |req| self.inner.release(req, ino, fh))
    }

    fn fsync(&self, req: &Request, ino: Ino, fh: &F::File, datasync: bool) -> io::Result<()> {
        self.hook.around(req, Span::NONE, |req| {
            self.inner.fsync(req, ino, fh, datasync)
        })
    }

    fn opendir(&self, req: &Request, ino: Ino, flags: i32) -> io::Result<Opened<F::Dir>> {
        self.hook
            .around(req, Span::NONE, |req| self.inner.opendir(req, ino, flags))
    }

    fn readdir(
        &self,
        req: &Request,
        ino: Ino,
        dh: &F::Dir,
        offset: u64,
        out: &mut dyn DirSink,
    ) -> io::Result<()> {
        self.hook.around(req, Span::NONE, |req| {
            self.inner.readdir(req, ino, dh, offset, out)
        })
    }

    fn readdirplus(
        &self,
        req: &Request,
        ino: Ino,
        dh: &F::Dir,
        offset: u64,
        out: &mut dyn DirPlusSink,
    ) -> io::Result<()> {
        self.hook.around(req, Span::NONE, |req| {
            self.inner.readdirplus(req, ino, dh, offset, out)
        })
    }

    fn releasedir(&self, req: &Request, ino: Ino, dh: F::Dir) -> io::Result<()> {
        self.hook
            .around(req, Span::NONE, |req| self.inner.releasedir(req, ino, dh))
    }

    fn fsyncdir(&self, req: &Request, ino: Ino, dh: &F::Dir, datasync: bool) -> io::Result<()> {
        self.hook.around(req, Span::NONE, |req| {
            self.inner.fsyncdir(req, ino, dh, datasync)
        })
    }

    fn statfs(&self, req: &Request, ino: Ino) -> io::Result<Statfs> {
        self.hook
            .around(req, Span::NONE, |req| self.inner.statfs(req, ino))
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
        self.hook.around(req, Span::NONE, |req| {
            self.inner.setxattr(req, ino, name, value, flags, position)
        })
    }

    fn getxattr(&self, req: &Request, ino: Ino, name: &OsStr, buf: &mut [u8]) -> io::Result<usize> {
        self.hook.around(req, Span::NONE, |req| {
            self.inner.getxattr(req, ino, name, buf)
        })
    }

    fn listxattr(&self, req: &Request, ino: Ino, buf: &mut [u8]) -> io::Result<usize> {
        self.hook
            .around(req, Span::NONE, |req| self.inner.listxattr(req, ino, buf))
    }

    fn removexattr(&self, req: &Request, ino: Ino, name: &OsStr) -> io::Result<()> {
        self.hook.around(req, Span::NONE, |req| {
            self.inner.removexattr(req, ino, name)
        })
    }

    fn access(&self, req: &Request, ino: Ino, mask: i32) -> io::Result<()> {
        self.hook
            .around(req, Span::NONE, |req| self.inner.access(req, ino, mask))
    }

    fn create(
        &self,
        req: &Request,
        parent: Ino,
        name: &OsStr,
        mode: u32,
        flags: i32,
    ) -> io::Result<(Entry, Opened<F::File>)> {
        self.hook.around(req, Span::named(name), |req| {
            self.inner.create(req, parent, name, mode, flags)
        })
    }

    fn getlk(
        &self,
        req: &Request,
        ino: Ino,
        fh: &F::File,
        owner: u64,
        lock: &Lock,
    ) -> io::Result<Lock> {
        self.hook.around(req, Span::NONE, |req| {
            self.inner.getlk(req, ino, fh, owner, lock)
        })
    }

    fn setlk(
        &self,
        req: &Request,
        ino: Ino,
        fh: &F::File,
        owner: u64,
        lock: &Lock,
        sleep: bool,
    ) -> io::Result<()> {
        self.hook.around(req, Span::NONE, |req| {
            self.inner.setlk(req, ino, fh, owner, lock, sleep)
        })
    }

    fn bmap(&self, req: &Request, ino: Ino, blocksize: u32, idx: u64) -> io::Result<u64> {
        self.hook.around(req, Span::NONE, |req| {
            self.inner.bmap(req, ino, blocksize, idx)
        })
    }

    fn ioctl(
        &self,
        req: &Request,
        ino: Ino,
        fh: &F::File,
        flags: u32,
        cmd: u32,
        in_data: &[u8],
        out_size: u32,
    ) -> io::Result<IoctlOut> {
        self.hook.around(req, Span::NONE, |req| {
            self.inner
                .ioctl(req, ino, fh, flags, cmd, in_data, out_size)
        })
    }

    fn poll(
        &self,
        req: &Request,
        ino: Ino,
        fh: &F::File,
        events: u32,
        flags: u32,
    ) -> io::Result<u32> {
        self.hook.around(req, Span::NONE, |req| {
            self.inner.poll(req, ino, fh, events, flags)
        })
    }

    fn fallocate(
        &self,
        req: &Request,
        ino: Ino,
        fh: &F::File,
        offset: u64,
        length: u64,
        mode: i32,
    ) -> io::Result<()> {
        self.hook.around(req, Span::at(offset, length), |req| {
            self.inner.fallocate(req, ino, fh, offset, length, mode)
        })
    }

    fn lseek(
        &self,
        req: &Request,
        ino: Ino,
        fh: &F::File,
        offset: i64,
        whence: i32,
    ) -> io::Result<i64> {
        self.hook.around(req, Span::NONE, |req| {
            self.inner.lseek(req, ino, fh, offset, whence)
        })
    }

    fn copy_file_range(
        &self,
        req: &Request,
        ino_in: Ino,
        fh_in: &F::File,
        offset_in: u64,
        ino_out: Ino,
        fh_out: &F::File,
        offset_out: u64,
        len: u64,
        flags: u32,
    ) -> io::Result<u32> {
        self.hook.around(req, Span::at(offset_in, len), |req| {
            self.inner.copy_file_range(
                req, ino_in, fh_in, offset_in, ino_out, fh_out, offset_out, len, flags,
            )
        })
    }
}
