//! The control-files layer: serves `.fsprof`, `.fsprof.json` (and a file system's own, such as
//! RAIF's `.raif`) at the mount root, and passes every other request to the layer below.
//!
//! It sits above the profiling layer, so nothing done to a control file is counted: requests
//! on them never reach it. A `statfs` of a control file is answered by the file system as for
//! the root (the file system the control files live in), made [`Request::unrecorded`] so that
//! its lower or branch calls are not recorded either. Locks and `bmap` on control files fail
//! with `ENOLCK` and `EINVAL`, `poll` says ready, and with [`ControlFiles::listed`] a listing
//! of the root starts with the control files (offsets [`LISTED_BASE`]` + k`).
//!
//! The methods written here are the operations a control file changes; every other operation
//! of the table (`for_each_op!`) passes to the layer below unchanged (`impl_rest!`).
//!
//! Opening a control file takes a snapshot; its handle is a [`Layered::Own`], numbered
//! above `2^63` so that it never meets a handle of the file system below (`Handle`).
//!
//! The tools must leave no trace in what they measure. A lookup of a control file needs the
//! root's attributes (the kernel checks the caller may search it, `default_permissions`), and
//! when they are older than the attribute time-out the kernel first sends a `GETATTR` of the
//! root: `fsprof top` and `fsprof slow -f` added one to the profile, and with `--by comm` a
//! layer `fuse@comm:fsprof`, at every refresh. So the threads that opened a control file in
//! the last [`READER_TTL`] are remembered ([`READERS`] of them), and their `GETATTR`s of the
//! root are passed down [`Request::unrecorded`] (and left out of the `kernel` layer, as the
//! control files' own requests are). A tool's first read still costs one: the kernel asks
//! before the control file is named.

use std::ffi::OsStr;
use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::filesystem::{
    AttrOut, DirPlusSink, DirSink, Entry, FileSystem, FileType, FopenFlags, Init, Ino, IoctlOut,
    Layered, Lock, Opened, Request, SetAttr, Statfs, WriteFlags,
};
use crate::filesystem::{forward, impl_rest};
use crate::layers::control_files::{ControlFiles, LISTED_BASE};
use crate::protocol::errno::err;

/// An open file of a [`Control`] layer: a control file's snapshot (by its number in
/// [`ControlFiles`]), or a file of the layer below.
pub type CtlFile<H> = Layered<H>;

/// A file system with control files at its root (or without, when `files` is `None`).
pub struct Control<F> {
    inner: F,
    files: Option<ControlFiles>,
    /// Threads that opened a control file lately, and when.
    readers: Mutex<[(u32, Option<Instant>); READERS]>,
}

/// Threads remembered as readers of control files.
pub const READERS: usize = 16;
/// How long a reader is remembered after its last open of a control file.
pub const READER_TTL: Duration = Duration::from_secs(60);

/// Who serves a directory listing request (see [`Control::listing`]).
enum Listing<'a> {
    /// The inner file system, from this offset.
    Inner(u64),
    /// The control files, from this one on.
    Control(&'a ControlFiles, usize),
}

impl<F: FileSystem> Control<F> {
    /// `inner` with the control `files` (none: every request passes through).
    pub fn new(inner: F, files: Option<ControlFiles>) -> Control<F> {
        Control {
            inner,
            files,
            readers: Mutex::new([(0, None); READERS]),
        }
    }

    /// Remembers thread `pid` as a reader of control files (replacing the oldest).
    fn reader(&self, pid: u32) {
        let now = Instant::now();
        let mut r = self.readers.lock();
        let slot = match r.iter().position(|(p, at)| *p == pid && at.is_some()) {
            Some(i) => i,
            None => (0..READERS).min_by_key(|&i| r[i].1).unwrap_or(0),
        };
        r[slot] = (pid, Some(now));
    }

    /// Whether thread `pid` opened a control file in the last [`READER_TTL`].
    fn is_reader(&self, pid: u32) -> bool {
        let r = self.readers.lock();
        r.iter()
            .any(|(p, at)| *p == pid && at.is_some_and(|t| t.elapsed() < READER_TTL))
    }

    /// The layer below.
    pub fn inner(&self) -> &F {
        &self.inner
    }

    /// The control files, if `ino` is one of them (then `req` is answered here, and noted).
    #[inline(always)]
    fn control(&self, req: &Request, ino: Ino) -> Option<&ControlFiles> {
        let c = self
            .files
            .as_ref()
            .filter(|_| ControlFiles::is_control(ino.0))?;
        c.answered_here(req);
        Some(c)
    }

    /// Whether `name` in `parent` is a control file name (creating, removing, renaming: EPERM,
    /// answered here and noted).
    #[inline]
    fn reserved(&self, req: &Request, parent: Ino, name: &OsStr) -> bool {
        if parent != Ino::ROOT {
            return false;
        }
        match self.files.as_ref() {
            Some(c) if c.ino_of(name).is_some() => {
                c.answered_here(req);
                true
            }
            _ => false,
        }
    }

    /// Who serves a listing of `ino` at `offset`. With listed control files, a listing of the
    /// root starts with them (offsets [`LISTED_BASE`]` + k`, not counted), then continues with
    /// the inner file system's listing from its start.
    #[inline]
    fn listing(&self, ino: Ino, offset: u64) -> Listing<'_> {
        if ino != Ino::ROOT {
            return Listing::Inner(offset);
        }
        let Some(c) = self.files.as_ref().filter(|c| c.is_listed()) else {
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

    fn entry(c: &ControlFiles, ino: u64) -> Entry {
        Entry {
            attr: c.attr(ino),
            generation: 0,
            entry_ttl: c.ttl(),
            attr_ttl: c.ttl(),
        }
    }

    fn attr_out(c: &ControlFiles, ino: u64) -> AttrOut {
        AttrOut {
            attr: c.attr(ino),
            ttl: c.ttl(),
        }
    }
}

/// The inner handle of a file that is not a control file (`EBADF` for a snapshot, which the
/// kernel only sends with a control file's node id).
#[inline(always)]
fn inner<H>(fh: &CtlFile<H>) -> io::Result<&H> {
    match fh {
        Layered::Inner(h) => Ok(h),
        Layered::Own(_) => Err(err(libc::EBADF)),
    }
}

impl_rest! {
    impl[F: FileSystem] FileSystem for Control<F>, rest: forward(inner) {
        type File = CtlFile<F::File>;
        type Dir = F::Dir;

        fn init(&self, init: &mut Init) -> io::Result<()> {
            self.inner.init(init)
        }

        fn destroy(&self) {
            self.inner.destroy()
        }

        fn interrupt(&self, unique: u64) {
            self.inner.interrupt(unique)
        }

        fn disconnected(&self) {
            self.inner.disconnected()
        }

        fn lookup(&self, req: &Request, parent: Ino, name: &OsStr) -> io::Result<Entry> {
            if parent == Ino::ROOT {
                if let Some(c) = &self.files {
                    if let Some(ino) = c.ino_of(name) {
                        c.answered_here(req);
                        return Ok(Self::entry(c, ino));
                    }
                }
            }
            self.inner.lookup(req, parent, name)
        }

        fn forget(&self, req: &Request, ino: Ino, nlookup: u64) {
            if self.control(req, ino).is_none() {
                self.inner.forget(req, ino, nlookup)
            }
        }

        fn getattr(&self, req: &Request, ino: Ino, fh: Option<&Self::File>) -> io::Result<AttrOut> {
            if let Some(c) = self.control(req, ino) {
                return Ok(Self::attr_out(c, ino.0));
            }
            let fh = fh.map(inner).transpose()?;
            // A control-file reader's lookup, revalidating the root: not the workload's (and so
            // out of the `kernel` layer too, as it is out of `fuse`).
            if let Some(c) = &self.files {
                if ino == Ino::ROOT && self.is_reader(req.pid) {
                    c.answered_here(req);
                    return self.inner.getattr(&req.unrecorded(ino), ino, fh);
                }
            }
            self.inner.getattr(req, ino, fh)
        }

        fn setattr(
            &self,
            req: &Request,
            ino: Ino,
            set: &SetAttr,
            fh: Option<&Self::File>,
        ) -> io::Result<AttrOut> {
            if let Some(c) = self.control(req, ino) {
                // Truncation resets; times may be touched (ignored); anything else is refused.
                if set.mode.is_some() || set.uid.is_some() || set.gid.is_some() {
                    return Err(err(libc::EPERM));
                }
                if set.size.is_some() {
                    if !c.may_reset(req.uid) {
                        return Err(err(libc::EACCES));
                    }
                    c.truncate(ino.0);
                }
                return Ok(Self::attr_out(c, ino.0));
            }
            let fh = fh.map(inner).transpose()?;
            self.inner.setattr(req, ino, set, fh)
        }

        fn readlink(&self, req: &Request, ino: Ino, buf: &mut [u8]) -> io::Result<usize> {
            if self.control(req, ino).is_some() {
                return Err(err(libc::EINVAL));
            }
            self.inner.readlink(req, ino, buf)
        }

        fn mknod(
            &self,
            req: &Request,
            parent: Ino,
            name: &OsStr,
            mode: u32,
            rdev: u32,
        ) -> io::Result<Entry> {
            if self.reserved(req, parent, name) {
                return Err(err(libc::EPERM));
            }
            self.inner.mknod(req, parent, name, mode, rdev)
        }

        fn mkdir(&self, req: &Request, parent: Ino, name: &OsStr, mode: u32) -> io::Result<Entry> {
            if self.reserved(req, parent, name) {
                return Err(err(libc::EPERM));
            }
            self.inner.mkdir(req, parent, name, mode)
        }

        fn unlink(&self, req: &Request, parent: Ino, name: &OsStr) -> io::Result<()> {
            if self.reserved(req, parent, name) {
                return Err(err(libc::EPERM));
            }
            self.inner.unlink(req, parent, name)
        }

        fn rmdir(&self, req: &Request, parent: Ino, name: &OsStr) -> io::Result<()> {
            if self.reserved(req, parent, name) {
                return Err(err(libc::EPERM));
            }
            self.inner.rmdir(req, parent, name)
        }

        fn symlink(
            &self,
            req: &Request,
            parent: Ino,
            name: &OsStr,
            target: &Path,
        ) -> io::Result<Entry> {
            if self.reserved(req, parent, name) {
                return Err(err(libc::EPERM));
            }
            self.inner.symlink(req, parent, name, target)
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
            if self.reserved(req, parent, name) || self.reserved(req, newparent, newname) {
                return Err(err(libc::EPERM));
            }
            self.inner
                .rename(req, parent, name, newparent, newname, flags)
        }

        fn link(&self, req: &Request, ino: Ino, newparent: Ino, newname: &OsStr) -> io::Result<Entry> {
            if self.control(req, ino).is_some() || self.reserved(req, newparent, newname) {
                return Err(err(libc::EPERM));
            }
            self.inner.link(req, ino, newparent, newname)
        }

        fn open(&self, req: &Request, ino: Ino, flags: i32) -> io::Result<Opened<Self::File>> {
            if let Some(c) = self.control(req, ino) {
                self.reader(req.pid);
                if flags & libc::O_TRUNC != 0 {
                    if !c.may_reset(req.uid) {
                        return Err(err(libc::EACCES));
                    }
                    c.truncate(ino.0);
                }
                let fh = Layered::Own(c.open(ino.0, req.uid, req.gid, req.pid)?);
                return Ok(Opened::new(fh, FopenFlags::DIRECT_IO));
            }
            let o = self.inner.open(req, ino, flags)?;
            Ok(Opened {
                fh: Layered::Inner(o.fh),
                flags: o.flags,
                backing: o.backing,
            })
        }

        fn read(
            &self,
            req: &Request,
            ino: Ino,
            fh: &Self::File,
            offset: u64,
            buf: &mut [u8],
        ) -> io::Result<usize> {
            match fh {
                Layered::Own(n) => match self.control(req, ino) {
                    Some(c) => Ok(c.read(*n, offset, buf)),
                    None => Err(err(libc::EBADF)),
                },
                Layered::Inner(h) => self.inner.read(req, ino, h, offset, buf),
            }
        }

        fn write(
            &self,
            req: &Request,
            ino: Ino,
            fh: &Self::File,
            offset: u64,
            data: &[u8],
            flags: WriteFlags,
        ) -> io::Result<u32> {
            if let Some(c) = self.control(req, ino) {
                if !c.may_reset(req.uid) {
                    return Err(err(libc::EACCES));
                }
                c.write(ino.0, data)?;
                return Ok(data.len() as u32);
            }
            self.inner.write(req, ino, inner(fh)?, offset, data, flags)
        }

        fn flush(&self, req: &Request, ino: Ino, fh: &Self::File) -> io::Result<()> {
            match fh {
                Layered::Own(_) => {
                    if let Some(c) = &self.files {
                        c.answered_here(req);
                    }
                    Ok(())
                }
                Layered::Inner(h) => self.inner.flush(req, ino, h),
            }
        }

        fn release(&self, req: &Request, ino: Ino, fh: Self::File) -> io::Result<()> {
            match fh {
                Layered::Own(n) => {
                    if let Some(c) = &self.files {
                        c.answered_here(req);
                        c.release(n);
                    }
                    Ok(())
                }
                Layered::Inner(h) => self.inner.release(req, ino, h),
            }
        }

        fn fsync(&self, req: &Request, ino: Ino, fh: &Self::File, datasync: bool) -> io::Result<()> {
            match fh {
                Layered::Own(_) => {
                    if let Some(c) = &self.files {
                        c.answered_here(req);
                    }
                    Ok(())
                }
                Layered::Inner(h) => self.inner.fsync(req, ino, h, datasync),
            }
        }

        fn opendir(&self, req: &Request, ino: Ino, flags: i32) -> io::Result<Opened<Self::Dir>> {
            if self.control(req, ino).is_some() {
                return Err(err(libc::ENOTDIR));
            }
            self.inner.opendir(req, ino, flags)
        }

        fn readdir(
            &self,
            req: &Request,
            ino: Ino,
            dh: &Self::Dir,
            offset: u64,
            out: &mut dyn DirSink,
        ) -> io::Result<()> {
            match self.listing(ino, offset) {
                Listing::Inner(offset) => self.inner.readdir(req, ino, dh, offset, out),
                Listing::Control(c, from) => {
                    c.answered_here(req);
                    for (k, (cino, name)) in c.entries().enumerate().skip(from) {
                        let next = LISTED_BASE + k as u64 + 1;
                        if out.add(cino, next, FileType::RegularFile, name) {
                            break;
                        }
                    }
                    Ok(())
                }
            }
        }

        fn readdirplus(
            &self,
            req: &Request,
            ino: Ino,
            dh: &Self::Dir,
            offset: u64,
            out: &mut dyn DirPlusSink,
        ) -> io::Result<()> {
            match self.listing(ino, offset) {
                Listing::Inner(offset) => self.inner.readdirplus(req, ino, dh, offset, out),
                Listing::Control(c, from) => {
                    c.answered_here(req);
                    for (k, (cino, name)) in c.entries().enumerate().skip(from) {
                        let next = LISTED_BASE + k as u64 + 1;
                        if out.add(&Self::entry(c, cino), next, name) {
                            break;
                        }
                    }
                    Ok(())
                }
            }
        }

        fn statfs(&self, req: &Request, ino: Ino) -> io::Result<Statfs> {
            if self.control(req, ino).is_some() {
                // The file system the control files live in, as for the root; recorded nowhere.
                return self.inner.statfs(&req.unrecorded(Ino::ROOT), Ino::ROOT);
            }
            self.inner.statfs(req, ino)
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
            if self.control(req, ino).is_some() {
                return Err(err(libc::EPERM));
            }
            self.inner.setxattr(req, ino, name, value, flags, position)
        }

        fn getxattr(&self, req: &Request, ino: Ino, name: &OsStr, buf: &mut [u8]) -> io::Result<usize> {
            if self.control(req, ino).is_some() {
                return Err(err(libc::ENODATA));
            }
            self.inner.getxattr(req, ino, name, buf)
        }

        fn listxattr(&self, req: &Request, ino: Ino, buf: &mut [u8]) -> io::Result<usize> {
            if self.control(req, ino).is_some() {
                return Ok(0);
            }
            self.inner.listxattr(req, ino, buf)
        }

        fn removexattr(&self, req: &Request, ino: Ino, name: &OsStr) -> io::Result<()> {
            if self.control(req, ino).is_some() {
                return Err(err(libc::EPERM));
            }
            self.inner.removexattr(req, ino, name)
        }

        fn access(&self, req: &Request, ino: Ino, mask: i32) -> io::Result<()> {
            if self.control(req, ino).is_some() {
                return Ok(());
            }
            self.inner.access(req, ino, mask)
        }

        fn create(
            &self,
            req: &Request,
            parent: Ino,
            name: &OsStr,
            mode: u32,
            flags: i32,
        ) -> io::Result<(Entry, Opened<Self::File>)> {
            if self.reserved(req, parent, name) {
                return Err(err(libc::EPERM));
            }
            let (e, o) = self.inner.create(req, parent, name, mode, flags)?;
            let o = Opened {
                fh: Layered::Inner(o.fh),
                flags: o.flags,
                backing: o.backing,
            };
            Ok((e, o))
        }

        fn getlk(
            &self,
            req: &Request,
            ino: Ino,
            fh: &Self::File,
            owner: u64,
            lock: &Lock,
        ) -> io::Result<Lock> {
            if self.control(req, ino).is_some() {
                // Only reached when locks are forwarded (by default they are kernel-local).
                return Err(err(libc::ENOLCK));
            }
            self.inner.getlk(req, ino, inner(fh)?, owner, lock)
        }

        fn setlk(
            &self,
            req: &Request,
            ino: Ino,
            fh: &Self::File,
            owner: u64,
            lock: &Lock,
            sleep: bool,
        ) -> io::Result<()> {
            if self.control(req, ino).is_some() {
                return Err(err(libc::ENOLCK));
            }
            self.inner.setlk(req, ino, inner(fh)?, owner, lock, sleep)
        }

        fn bmap(&self, req: &Request, ino: Ino, blocksize: u32, idx: u64) -> io::Result<u64> {
            if self.control(req, ino).is_some() {
                // No blocks (and not ENOSYS, which would stop the kernel asking for any file).
                return Err(err(libc::EINVAL));
            }
            self.inner.bmap(req, ino, blocksize, idx)
        }

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
            if self.control(req, ino).is_some() {
                return Err(err(libc::ENOTTY));
            }
            self.inner
                .ioctl(req, ino, inner(fh)?, flags, cmd, in_data, out_size)
        }

        fn poll(
            &self,
            req: &Request,
            ino: Ino,
            fh: &Self::File,
            events: u32,
            flags: u32,
        ) -> io::Result<u32> {
            if self.control(req, ino).is_some() {
                // Always ready, like a regular file (and not ENOSYS, which would stop the kernel
                // polling any file of the mount).
                return Ok((libc::POLLIN | libc::POLLOUT | libc::POLLRDNORM | libc::POLLWRNORM) as u32);
            }
            self.inner.poll(req, ino, inner(fh)?, events, flags)
        }

        fn fallocate(
            &self,
            req: &Request,
            ino: Ino,
            fh: &Self::File,
            offset: u64,
            length: u64,
            mode: i32,
        ) -> io::Result<()> {
            if self.control(req, ino).is_some() {
                return Err(err(libc::EPERM));
            }
            self.inner
                .fallocate(req, ino, inner(fh)?, offset, length, mode)
        }

        fn lseek(
            &self,
            req: &Request,
            ino: Ino,
            fh: &Self::File,
            offset: i64,
            whence: i32,
        ) -> io::Result<i64> {
            if self.control(req, ino).is_some() {
                return Err(err(libc::ESPIPE));
            }
            self.inner.lseek(req, ino, inner(fh)?, offset, whence)
        }

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
            if self.control(req, ino_in).is_some() || self.control(req, ino_out).is_some() {
                // Let the kernel fall back to read and write, which the control files serve.
                return Err(err(libc::EXDEV));
            }
            self.inner.copy_file_range(
                req,
                ino_in,
                inner(fh_in)?,
                offset_in,
                ino_out,
                inner(fh_out)?,
                offset_out,
                len,
                flags,
            )
        }
    }
}

#[cfg(test)]
mod tests;
