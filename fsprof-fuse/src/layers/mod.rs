//! Layers: types that implement [`FileSystem`] over an inner one, stacked by the program in one
//! place (`daemon/app.rs`): transport → [`control::Control`] → [`profiled`] → [`recorded`] →
//! file system.
//!
//! Most layers only need to act around every request (time it, delay it, log it): they
//! implement [`Hook`], and [`Hooked`] does the forwarding of every operation once, for all of
//! them. A layer that answers some requests itself ([`control::Control`]) implements the trait
//! by hand.

pub mod access;
pub mod control;
pub mod control_files;
pub mod profiled;
pub mod recorded;

use std::ffi::OsStr;
use std::io;
use std::path::Path;

use crate::filesystem::request::Span;
use crate::filesystem::{
    AttrOut, DirPlusSink, DirSink, Entry, FileSystem, Init, Ino, IoctlOut, Lock, Opened, Request,
    SetAttr, Statfs, WriteFlags,
};

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

#[cfg(test)]
mod tests {
    use std::ffi::OsString;

    use parking_lot::Mutex;

    use super::*;
    use crate::filesystem::fake::{FAKE_DATA, FAKE_FH, FAKE_INO, FAKE_NAMES, Fake, Listing};
    use crate::filesystem::{Caps, Key};
    use crate::protocol::ops::Op;

    /// What the hook saw of one request: its operation, id and span.
    #[derive(Debug, Clone, PartialEq, Eq)]
    struct Seen {
        op: Op,
        unique: u64,
        offset: Option<u64>,
        size: Option<u64>,
        name: Option<OsString>,
    }

    /// A hook that records each request and serves it, or answers it itself with `refuse`.
    #[derive(Default)]
    struct Spy {
        seen: Mutex<Vec<Seen>>,
        refuse: Option<i32>,
    }

    impl Hook for Spy {
        fn around<R>(
            &self,
            req: &Request,
            span: Span<'_>,
            serve: impl FnOnce(&Request) -> io::Result<R>,
        ) -> io::Result<R> {
            self.seen.lock().push(Seen {
                op: req.op,
                unique: req.unique,
                offset: span.offset,
                size: span.size,
                name: span.name.map(OsStr::to_os_string),
            });
            match self.refuse {
                Some(e) => Err(io::Error::from_raw_os_error(e)),
                None => serve(req),
            }
        }
    }

    type Spied = Hooked<Spy, Fake>;

    fn spied() -> Spied {
        Hooked::new(Spy::default(), Fake::new())
    }

    /// The span a request should be seen with: (offset, size, name).
    type Want = (Option<u64>, Option<u64>, Option<&'static str>);

    const NONE: Want = (None, None, None);

    fn named(name: &'static str) -> Want {
        (None, None, Some(name))
    }

    fn at(offset: u64, size: u64) -> Want {
        (Some(offset), Some(size), None)
    }

    /// Runs one request of `op` through `fs` with `call`; checks that the file system got it
    /// exactly once, as `what` and with the request's id, and that the hook saw it exactly once
    /// over `span`. Returns the answer.
    fn check<R>(
        fs: &Spied,
        op: Op,
        span: Want,
        what: &str,
        call: impl FnOnce(&Spied, &Request) -> io::Result<R>,
    ) -> R {
        let (hooked, served) = (fs.hook().seen.lock().len(), fs.inner().calls().len());
        let unique = 1000 + hooked as u64;
        let req = Request::new(op, unique, Ino(5), 77, 1000, 1000);
        let r = call(fs, &req).unwrap_or_else(|e| panic!("{what}: {e}"));
        let calls = fs.inner().calls();
        assert_eq!(
            calls.len(),
            served + 1,
            "{what}: the file system got it once"
        );
        let got = &calls[served];
        assert_eq!(
            (got.what.as_str(), got.op, got.unique),
            (what, Some(op), unique)
        );
        let seen = fs.hook().seen.lock();
        assert_eq!(seen.len(), hooked + 1, "{what}: the hook saw it once");
        let want = Seen {
            op,
            unique,
            offset: span.0,
            size: span.1,
            name: span.2.map(OsString::from),
        };
        assert_eq!(seen[hooked], want, "{what}");
        r
    }

    fn os(s: &str) -> &OsStr {
        OsStr::new(s)
    }

    #[test]
    fn name_operations_are_seen_with_the_name_they_act_on() {
        let fs = spied();
        let e = check(
            &fs,
            Op::Lookup,
            named("n"),
            "lookup parent=5 name=\"n\"",
            |fs, r| fs.lookup(r, Ino(5), os("n")),
        );
        assert_eq!(e.attr.ino, FAKE_INO);
        let what = "mknod parent=5 name=\"p\" mode=10644 rdev=3";
        check(&fs, Op::Mknod, named("p"), what, |fs, r| {
            fs.mknod(r, Ino(5), os("p"), libc::S_IFIFO | 0o644, 3)
        });
        let what = "mkdir parent=5 name=\"d\" mode=755";
        check(&fs, Op::Mkdir, named("d"), what, |fs, r| {
            fs.mkdir(r, Ino(5), os("d"), 0o755)
        });
        check(
            &fs,
            Op::Unlink,
            named("u"),
            "unlink parent=5 name=\"u\"",
            |fs, r| fs.unlink(r, Ino(5), os("u")),
        );
        check(
            &fs,
            Op::Rmdir,
            named("r"),
            "rmdir parent=5 name=\"r\"",
            |fs, r| fs.rmdir(r, Ino(5), os("r")),
        );
        let what = "symlink parent=5 name=\"l\" target=\"/t\"";
        check(&fs, Op::Symlink, named("l"), what, |fs, r| {
            fs.symlink(r, Ino(5), os("l"), Path::new("/t"))
        });
        // A rename is seen with its old name, a link with its new one.
        let what = "rename parent=5 name=\"old\" newparent=6 newname=\"new\" flags=1";
        check(&fs, Op::Rename, named("old"), what, |fs, r| {
            fs.rename(r, Ino(5), os("old"), Ino(6), os("new"), 1)
        });
        let what = "link ino=9 newparent=6 newname=\"hard\"";
        let e = check(&fs, Op::Link, named("hard"), what, |fs, r| {
            fs.link(r, Ino(9), Ino(6), os("hard"))
        });
        assert_eq!(e.attr.ino, 9);
        let what = "create parent=5 name=\"f\" mode=100600 flags=102";
        let (e, o) = check(&fs, Op::Create, named("f"), what, |fs, r| {
            fs.create(r, Ino(5), os("f"), libc::S_IFREG | 0o600, 0o102)
        });
        assert_eq!((e.attr.ino, o.fh.get()), (FAKE_INO, FAKE_FH));
    }

    #[test]
    fn data_operations_are_seen_with_their_offset_and_size() {
        let fs = spied();
        let fh = Key::new(FAKE_FH);
        let mut buf = vec![0u8; 4096];
        let what = "read ino=5 fh=7 offset=0 size=4096";
        let n = check(&fs, Op::Read, at(0, 4096), what, |fs, r| {
            fs.read(r, Ino(5), &fh, 0, &mut buf)
        });
        assert_eq!(&buf[..n], FAKE_DATA, "the reply comes back whole");
        let what = "read ino=5 fh=7 offset=8192 size=10";
        let n = check(&fs, Op::Read, at(8192, 10), what, |fs, r| {
            fs.read(r, Ino(5), &fh, 8192, &mut buf[..10])
        });
        assert_eq!(n, 0);
        let flags = WriteFlags {
            kill_suidgid: true,
            direct: false,
            cache: false,
        };
        let what = format!("write ino=5 fh=7 offset=100 size=3 {flags:?}");
        let n = check(&fs, Op::Write, at(100, 3), &what, |fs, r| {
            fs.write(r, Ino(5), &fh, 100, b"abc", flags)
        });
        assert_eq!(n, 3);
        let what = "fallocate ino=5 fh=7 offset=4096 length=65536 mode=1";
        check(&fs, Op::Fallocate, at(4096, 65536), what, |fs, r| {
            fs.fallocate(r, Ino(5), &fh, 4096, 65536, 1)
        });
        let what = "copy_file_range in=5/7@10 out=6/7@20 len=30 flags=0";
        let n = check(&fs, Op::CopyFileRange, at(10, 30), what, |fs, r| {
            fs.copy_file_range(r, Ino(5), &fh, 10, Ino(6), &fh, 20, 30, 0)
        });
        assert_eq!(n, 30);
        // A truncation is seen at its new size; another setattr over nothing.
        let cut = SetAttr {
            size: Some(100),
            ..SetAttr::default()
        };
        let what = format!("setattr ino=5 {cut:?} fh=Some(7)");
        let span = (Some(100), None, None);
        check(&fs, Op::Setattr, span, &what, |fs, r| {
            fs.setattr(r, Ino(5), &cut, Some(&fh))
        });
        let chmod = SetAttr {
            mode: Some(0o600),
            ..SetAttr::default()
        };
        let what = format!("setattr ino=5 {chmod:?} fh=None");
        check(&fs, Op::Setattr, NONE, &what, |fs, r| {
            fs.setattr(r, Ino(5), &chmod, None)
        });
    }

    #[test]
    fn file_operations_are_forwarded_with_their_arguments() {
        let fs = spied();
        let fh = Key::new(FAKE_FH);
        check(
            &fs,
            Op::Getattr,
            NONE,
            "getattr ino=5 fh=Some(7)",
            |fs, r| fs.getattr(r, Ino(5), Some(&fh)),
        );
        let mut buf = [0u8; 64];
        let n = check(
            &fs,
            Op::Readlink,
            NONE,
            "readlink ino=5 size=64",
            |fs, r| fs.readlink(r, Ino(5), &mut buf),
        );
        assert_eq!(&buf[..n], b"target");
        let o = check(&fs, Op::Open, NONE, "open ino=5 flags=2", |fs, r| {
            fs.open(r, Ino(5), libc::O_RDWR)
        });
        assert_eq!(o.fh.get(), FAKE_FH);
        check(&fs, Op::Flush, NONE, "flush ino=5 fh=7", |fs, r| {
            fs.flush(r, Ino(5), &fh)
        });
        check(
            &fs,
            Op::Fsync,
            NONE,
            "fsync ino=5 fh=7 datasync=true",
            |fs, r| fs.fsync(r, Ino(5), &fh, true),
        );
        let lock = Lock {
            start: 1,
            end: 2,
            typ: libc::F_WRLCK,
            pid: 9,
        };
        let what = format!("getlk ino=5 fh=7 owner=3 {lock:?}");
        let got = check(&fs, Op::Getlk, NONE, &what, |fs, r| {
            fs.getlk(r, Ino(5), &fh, 3, &lock)
        });
        assert_eq!(got, lock);
        let what = format!("setlk ino=5 fh=7 owner=3 {lock:?} sleep=true");
        check(&fs, Op::Setlk, NONE, &what, |fs, r| {
            fs.setlk(r, Ino(5), &fh, 3, &lock, true)
        });
        let what = "ioctl ino=5 fh=7 flags=1 cmd=2 in=3 out=4";
        let out = check(&fs, Op::Ioctl, NONE, what, |fs, r| {
            fs.ioctl(r, Ino(5), &fh, 1, 2, b"xyz", 4)
        });
        assert_eq!(out.data, b"xyz");
        check(
            &fs,
            Op::Poll,
            NONE,
            "poll ino=5 fh=7 events=1 flags=0",
            |fs, r| fs.poll(r, Ino(5), &fh, 1, 0),
        );
        let what = "lseek ino=5 fh=7 offset=-4 whence=3";
        let at = check(&fs, Op::Lseek, NONE, what, |fs, r| {
            fs.lseek(r, Ino(5), &fh, -4, libc::SEEK_DATA)
        });
        assert_eq!(at, -4);
        check(
            &fs,
            Op::Bmap,
            NONE,
            "bmap ino=5 blocksize=512 idx=8",
            |fs, r| fs.bmap(r, Ino(5), 512, 8),
        );
        check(&fs, Op::Release, NONE, "release ino=5 fh=7", |fs, r| {
            fs.release(r, Ino(5), Key::new(FAKE_FH))
        });
    }

    #[test]
    fn directory_xattr_and_other_operations_are_forwarded_with_their_arguments() {
        let fs = spied();
        let dh = Key::new(FAKE_FH);
        check(&fs, Op::Opendir, NONE, "opendir ino=5 flags=0", |fs, r| {
            fs.opendir(r, Ino(5), 0)
        });
        let mut out = Listing::new(2);
        check(
            &fs,
            Op::Readdir,
            NONE,
            "readdir ino=5 fh=7 offset=1",
            |fs, r| fs.readdir(r, Ino(5), &dh, 1, &mut out),
        );
        assert_eq!(out.names(), FAKE_NAMES[1..]);
        let mut out = Listing::new(1);
        let what = "readdirplus ino=5 fh=7 offset=0";
        check(&fs, Op::Readdirplus, NONE, what, |fs, r| {
            fs.readdirplus(r, Ino(5), &dh, 0, &mut out)
        });
        assert_eq!(out.entries, [(100, 1, OsString::from("a"))]);
        let what = "fsyncdir ino=5 fh=7 datasync=false";
        check(&fs, Op::Fsyncdir, NONE, what, |fs, r| {
            fs.fsyncdir(r, Ino(5), &dh, false)
        });
        check(
            &fs,
            Op::Releasedir,
            NONE,
            "releasedir ino=5 fh=7",
            |fs, r| fs.releasedir(r, Ino(5), Key::new(FAKE_FH)),
        );
        let s = check(&fs, Op::Statfs, NONE, "statfs ino=5", |fs, r| {
            fs.statfs(r, Ino(5))
        });
        assert_eq!(s.namelen, 255);
        let what = "setxattr ino=5 name=\"user.x\" size=2 flags=1 position=0";
        check(&fs, Op::Setxattr, NONE, what, |fs, r| {
            fs.setxattr(r, Ino(5), os("user.x"), b"ab", libc::XATTR_CREATE, 0)
        });
        let mut buf = [0u8; 16];
        let what = "getxattr ino=5 name=\"user.x\" size=16";
        let n = check(&fs, Op::Getxattr, NONE, what, |fs, r| {
            fs.getxattr(r, Ino(5), os("user.x"), &mut buf)
        });
        assert_eq!(&buf[..n], b"value");
        let n = check(
            &fs,
            Op::Listxattr,
            NONE,
            "listxattr ino=5 size=0",
            |fs, r| fs.listxattr(r, Ino(5), &mut []),
        );
        assert_eq!(n, 7, "a size query answers the size");
        let what = "removexattr ino=5 name=\"user.x\"";
        check(&fs, Op::Removexattr, NONE, what, |fs, r| {
            fs.removexattr(r, Ino(5), os("user.x"))
        });
        check(&fs, Op::Access, NONE, "access ino=5 mask=4", |fs, r| {
            fs.access(r, Ino(5), libc::R_OK)
        });
        check(&fs, Op::Forget, NONE, "forget ino=5 nlookup=3", |fs, r| {
            fs.forget(r, Ino(5), 3);
            Ok(())
        });
    }

    #[test]
    fn init_and_destroy_pass_the_hook_by() {
        let fs = spied();
        let mut init = Init::offered(Caps::ASYNC_READ, 4096);
        fs.init(&mut init).unwrap();
        fs.destroy();
        assert_eq!(fs.inner().seen(), ["init", "destroy"]);
        assert!(fs.inner().calls().iter().all(|c| c.op.is_none()));
        assert!(fs.hook().seen.lock().is_empty());
    }

    #[test]
    fn a_hook_that_answers_itself_keeps_the_request_from_the_file_system() {
        let fs = Hooked::new(
            Spy {
                refuse: Some(libc::EACCES),
                ..Spy::default()
            },
            Fake::new(),
        );
        let req = Request::new(Op::Lookup, 1, Ino(1), 7, 0, 0);
        let e = fs.lookup(&req, Ino(1), os("x")).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EACCES));
        // A forget has no answer: refused, it is simply not passed on.
        fs.forget(&Request::new(Op::Forget, 2, Ino(9), 0, 0, 0), Ino(9), 1);
        assert!(fs.inner().calls().is_empty());
        let seen = fs.hook().seen.lock();
        assert_eq!(
            seen.iter().map(|s| (s.op, s.unique)).collect::<Vec<_>>(),
            [(Op::Lookup, 1), (Op::Forget, 2)]
        );
    }

    #[test]
    fn an_inner_error_comes_back_through_the_hook_unchanged() {
        let fs = spied();
        fs.inner().fail_with(libc::ENOSPC);
        let req = Request::new(Op::Mkdir, 3, Ino(1), 7, 0, 0);
        let e = fs.mkdir(&req, Ino(1), os("d"), 0o755).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
        assert_eq!(fs.inner().calls().len(), 1);
        assert_eq!(fs.hook().seen.lock().len(), 1);
    }
}
