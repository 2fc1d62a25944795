//! I/O on a file's parts as the mount does it ([`MountParts`]): its open descriptors as a
//! [`Parts`] for the data path, every system call counted on its branch and every error
//! reported to the branch set, with the checksums of the parts kept after the home parts'
//! records (cached in the file's state, see [`super::writeback`]) and the writes' intents
//! logged.

use std::cell::Cell;
use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use fsprof_fuse::filesystem::Request;
use fsprof_fuse::protocol::errno::err;
use fsprof_fuse::protocol::ops::Sys;
use fsprof_fuse::sys;
use fsprof_fuse::toolkit::fdcache::Fd;

use super::writeback::{DirtySums, SumDirs, get_attr, put_attr};
use crate::branch::BranchSet;
use crate::inode::{FileState, Inode, InodeTable};
use crate::intent::{Journal, Writing};
use crate::part_io::{BadBlock, How, OutOfDate, Parts, no_room};
use crate::sums;

/// A file's parts as the mount sees them: the open descriptors, minus the branches that are
/// failed or out of date for this file; errors go to the branch set.
pub(crate) struct MountParts<'a> {
    pub bs: &'a BranchSet,
    pub fds: &'a [Option<Fd>],
    pub file: &'a FileState,
    pub req: &'a Request<'a>,
    pub down: Cell<u64>,
    /// The copies this operation gave up for the file ([`Parts::out_of_date`]); the caller
    /// records them, and a parity given up, in the parts' records.
    pub given_up: Cell<u64>,
    /// The operation recorded the file's parity out of date.
    pub gave_up_parity: Cell<bool>,
    /// Where the operation's intents are logged: the log, the write's registration, the file.
    pub log: Option<(&'a Journal, &'a Writing<'a>, &'a Arc<Inode>)>,
    /// Where the checksums of the parts are kept, by the part's branch ([`crate::sums`]): the
    /// sum file, or the home part when they are in its attribute ([`FileState::xsums`]);
    /// empty: none.
    pub sums: &'a [Option<Fd>],
    /// How to reach the overflow files of parts that keep their checksums in an attribute.
    pub over: Option<SumFiles<'a>>,
    /// The operation's write now is covered by a live region of the intent log (it announced
    /// it): the checksum attributes it changes may be written back later ([`DirtySums`]);
    /// otherwise (truncations, which log nothing) at once.
    pub covered: Cell<bool>,
}

/// What a [`MountParts`] needs to open (or make) the overflow files of a file's parts
/// ([`crate::sums`]), which are cached in the inode's slots.
#[derive(Clone, Copy)]
pub(crate) struct SumFiles<'a> {
    pub inodes: &'a InodeTable,
    pub inode: &'a Arc<Inode>,
    pub dirs: &'a SumDirs,
    /// Where files with checksum attributes to write back are listed; `None`: written at once
    /// (no intent log to cover them until then).
    pub dirty: Option<&'a DirtySums>,
}

impl SumFiles<'_> {
    /// Opens (made first with `create`) the sum or overflow file of branch `b`'s part of file
    /// `id` in branch `h`'s sum directory, counted on `h` for `req`, and caches it in the
    /// inode's slots. `ENOENT` also when `h` has no sum directory.
    pub(crate) fn open(
        &self,
        bs: &BranchSet,
        req: &Request,
        h: usize,
        id: u64,
        b: usize,
        create: bool,
    ) -> io::Result<Fd> {
        let dir = self.dirs.get(h).ok_or_else(|| err(libc::ENOENT))?;
        let name = sums::name(id, b);
        let fl = libc::O_RDWR | libc::O_NOFOLLOW | if create { libc::O_CREAT } else { 0 };
        let fd = self.inodes.retry_emfile(|| {
            bs.get(h).call(req, Sys::Openat, || {
                sys::openat(dir.as_fd(), OsStr::new(&name), fl, 0o600)
            })
        })?;
        Ok(self
            .inodes
            .cache_sum(self.inode, b, h, Arc::new(fd), |c, f| bs.release(req, c, f)))
    }
}

impl<'a> MountParts<'a> {
    pub fn new(
        bs: &'a BranchSet,
        fds: &'a [Option<Fd>],
        file: &'a FileState,
        req: &'a Request,
    ) -> Self {
        MountParts {
            bs,
            fds,
            file,
            req,
            down: Cell::new(file.down(bs)),
            given_up: Cell::new(0),
            gave_up_parity: Cell::new(false),
            log: None,
            sums: &[],
            over: None,
            covered: Cell::new(false),
        }
    }

    /// The same, keeping the parts' block checksums in `sums` (see [`Raif::open_sums`]), and
    /// their overflow files through `over`.
    pub fn summed(mut self, sums: &'a [Option<Fd>], over: SumFiles<'a>) -> Self {
        self.sums = sums;
        self.over = Some(over);
        self
    }

    /// The sum file of branch `b`'s part and the branch it lives on.
    #[inline]
    fn sum_fd(&self, b: usize) -> io::Result<(usize, BorrowedFd<'_>)> {
        let fd = self.sums.get(b).and_then(Option::as_ref);
        match (fd, sums::home(b, self.file.layout.width as usize)) {
            (Some(fd), Some(h)) => Ok((h, fd.as_fd())),
            _ => Err(err(libc::EIO)),
        }
    }

    /// The same, logging the operation's intents in `j` (as `w`) for `inode`.
    pub fn logged(mut self, log: Option<(&'a Journal, &'a Writing<'a>, &'a Arc<Inode>)>) -> Self {
        self.log = log;
        self
    }

    #[inline]
    pub(super) fn fd(&self, b: usize) -> io::Result<BorrowedFd<'_>> {
        self.fds[b]
            .as_ref()
            .map(|f| f.as_fd())
            .ok_or_else(|| err(libc::EIO))
    }

    /// Whether the operation recorded part of the file out of date.
    pub fn gave_up(&self) -> bool {
        self.given_up.get() != 0 || self.gave_up_parity.get()
    }

    /// Some branch holding a part cannot be used.
    pub fn degraded(&self) -> bool {
        crate::part_io::degraded(&self.file.layout, self)
    }
}

impl MountParts<'_> {
    /// Call `f` (system call `op`) on branch `h`, where checksums are kept: an error there is
    /// that branch's.
    fn on_home<T>(&self, h: usize, op: Sys, f: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
        let r = self.bs.get(h).call(self.req, op, f);
        if let Err(e) = &r
            && !no_room(e)
        {
            self.bs.error(h, e, "checksums");
        }
        r
    }

    /// Whether branch `b`'s part keeps its checksums in an attribute of its home part.
    #[inline]
    fn in_xattr(&self, b: usize) -> bool {
        self.file.xsums.load(Ordering::Relaxed) & (1 << b) != 0
    }

    /// The overflow file of branch `b`'s part (cached in the inode's slots), made first with
    /// `create`; `None` if there is none (or its file's last link went: none is made then).
    pub(super) fn over_fd(&self, b: usize, create: bool) -> io::Result<Option<Fd>> {
        let Some(o) = self.over else {
            return Ok(None);
        };
        if let Some(fd) = o.inode.cached_sum(b) {
            return Ok(Some(fd));
        }
        let bit = 1u64 << b;
        let f = self.file;
        let gone = f.sums_gone.load(Ordering::Acquire);
        if gone || !(create || f.xover.load(Ordering::Acquire) & bit != 0) {
            return Ok(None);
        }
        let (h, _) = self.sum_fd(b)?;
        if o.dirs.get(h).is_none() {
            return Ok(None);
        }
        match o.open(self.bs, self.req, h, f.id, b, create) {
            Ok(fd) => {
                f.xover.fetch_or(bit, Ordering::AcqRel);
                Ok(Some(fd))
            }
            Err(e) if !create && e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
            Err(e) => {
                if !no_room(&e) {
                    self.bs.error(h, &e, "checksums");
                }
                Err(e)
            }
        }
    }
}

/// The calls on branch `b`'s checksum attribute and overflow file, for [`sums::Xattr`].
struct MountXattr<'p, 'a>(&'p MountParts<'a>, usize);

impl MountXattr<'_, '_> {
    /// Keeps `entries` as the part's in `cache`, the file's (`dirty`: to be written), in
    /// place where the part has an entry (no allocation on a write's path).
    fn cache(
        &self,
        cache: &mut Vec<sums::CachedAttr>,
        entries: &[u8],
        dirty: bool,
    ) -> io::Result<()> {
        let (p, b) = (self.0, self.1);
        let (h, _) = p.sum_fd(b)?;
        let fd = p.sums[b].as_ref().ok_or_else(|| err(libc::EIO))?;
        match cache.iter_mut().find(|c| c.b == b) {
            Some(c) => {
                c.value.clear();
                c.value.extend_from_slice(entries);
                c.dirty |= dirty;
                if dirty {
                    c.h = h;
                    c.fd = Some(fd.clone());
                }
            }
            None => cache.push(sums::CachedAttr {
                b,
                h,
                fd: dirty.then(|| fd.clone()),
                value: entries.to_vec(),
                dirty,
            }),
        }
        Ok(())
    }

    /// Counts `f` (system call `op`) on the home branch `h`, as [`MountParts::on_home`].
    fn call(
        &self,
        h: usize,
        op: Sys,
        f: &mut dyn FnMut() -> io::Result<usize>,
    ) -> io::Result<usize> {
        self.0.on_home(h, op, f)
    }
}

impl sums::XattrIo for MountXattr<'_, '_> {
    fn get(&self, buf: &mut [u8]) -> io::Result<usize> {
        let (p, b) = (self.0, self.1);
        let deferred = p.over.is_some_and(|o| o.dirty.is_some());
        if deferred {
            let cache = p.file.xcache.lock();
            if let Some(c) = cache.iter().find(|c| c.b == b) {
                let n = c.value.len().min(buf.len());
                buf[..n].copy_from_slice(&c.value[..n]);
                return Ok(n);
            }
        }
        let (h, fd) = p.sum_fd(b)?;
        let n = get_attr(fd, p.file.id, buf, |op, f| self.call(h, op, f))?;
        if deferred {
            self.cache(&mut p.file.xcache.lock(), &buf[..n], false)?;
        }
        Ok(n)
    }

    fn set(&self, entries: &[u8]) -> io::Result<()> {
        let p = self.0;
        let deferred = p.over.and_then(|o| o.dirty.map(|d| (o, d)));
        let mut cache = p.file.xcache.lock();
        // Deferred while the list of files to write back has room: its entries hold the home
        // parts' descriptors until written.
        let listed = p.file.xlisted.load(Ordering::Acquire);
        if let Some((o, dirty)) = deferred
            .filter(|_| p.covered.get())
            .filter(|(_, d)| listed || d.has_room())
        {
            self.cache(&mut cache, entries, true)?;
            drop(cache);
            dirty.add(o.inode, p.file);
            return Ok(());
        }
        // Written now, with the cache held: a record written meanwhile would miss them.
        let (h, fd) = p.sum_fd(self.1)?;
        put_attr(fd, entries, |op, f| self.call(h, op, f))?;
        if !entries.is_empty() {
            p.file.bare.fetch_and(!(1 << h), Ordering::AcqRel);
        }
        // What a later read of the cache finds (a change still waiting in it is part of what
        // was just written).
        if deferred.is_some() {
            self.cache(&mut cache, entries, false)?;
        }
        Ok(())
    }

    fn locked<R>(&self, f: impl FnOnce() -> R) -> R {
        let _held = self.0.file.sums_lock.lock();
        f()
    }

    fn over_pread(&self, buf: &mut [u8], off: u64) -> io::Result<usize> {
        let p = self.0;
        let Some(fd) = p.over_fd(self.1, false)? else {
            return Ok(0);
        };
        let (h, _) = p.sum_fd(self.1)?;
        p.on_home(h, Sys::Pread, || sys::pread(fd.as_fd(), buf, off))
    }

    fn over_pwrite(&self, buf: &[u8], off: u64) -> io::Result<usize> {
        let p = self.0;
        let Some(fd) = p.over_fd(self.1, true)? else {
            // The file's last link went: what is past the attribute stays unknown.
            return Err(err(libc::ENOENT));
        };
        let (h, _) = p.sum_fd(self.1)?;
        p.on_home(h, Sys::Pwrite, || sys::pwrite(fd.as_fd(), buf, off))
    }

    fn over_truncate(&self, len: u64) -> io::Result<()> {
        let p = self.0;
        let Some(fd) = p.over_fd(self.1, false)? else {
            return Ok(());
        };
        let (h, _) = p.sum_fd(self.1)?;
        p.on_home(h, Sys::Ftruncate, || sys::ftruncate(fd.as_fd(), len))
    }
}

impl Parts for MountParts<'_> {
    #[inline]
    fn usable(&self, b: usize) -> bool {
        (self.down.get() | self.bs.failed_mask()) & (1 << b) == 0 && self.fds[b].is_some()
    }

    fn pread(&self, b: usize, buf: &mut [u8], off: u64) -> io::Result<usize> {
        let fd = self.fd(b)?;
        self.bs
            .get(b)
            .call(self.req, Sys::Pread, || sys::pread(fd, buf, off))
    }

    fn pwrite(&self, b: usize, buf: &[u8], off: u64) -> io::Result<usize> {
        let fd = self.fd(b)?;
        self.bs
            .get(b)
            .call(self.req, Sys::Pwrite, || sys::pwrite(fd, buf, off))
    }

    fn truncate(&self, b: usize, len: u64) -> io::Result<()> {
        let fd = self.fd(b)?;
        self.bs
            .get(b)
            .call(self.req, Sys::Ftruncate, || sys::ftruncate(fd, len))
    }

    fn failed(&self, b: usize, e: &io::Error, missed: bool) -> bool {
        let gone = if missed {
            self.bs.fail(b, &format!("missed a write: {e}"));
            true
        } else {
            self.bs.error(b, e, "file data")
        };
        if gone {
            self.down.set(self.down.get() | 1 << b);
        }
        gone
    }

    fn out_of_date(&self, what: OutOfDate) {
        log::warn!(
            "{what:?}: could not be put back in line after a write refused for lack of room \
             (until `raif scrub --repair`)"
        );
        match what {
            OutOfDate::Copy(b) => {
                self.file.lost.fetch_or(1 << b, Ordering::AcqRel);
                self.down.set(self.down.get() | 1 << b);
                self.given_up.set(self.given_up.get() | 1 << b);
            }
            OutOfDate::Parity => {
                self.file.parity_stale.store(true, Ordering::Release);
                self.gave_up_parity.set(true);
            }
        }
    }

    #[inline]
    fn parity_stale(&self) -> bool {
        self.file.parity_stale.load(Ordering::Relaxed)
    }

    #[inline]
    fn has_sums(&self, b: usize) -> bool {
        self.sums.get(b).is_some_and(Option::is_some)
            && sums::home(b, self.file.layout.width as usize).is_some_and(|h| {
                self.bs.sums_down(self.file.joined.load(Ordering::Relaxed)) & (1 << h) == 0
            })
    }

    fn sums_pread(&self, b: usize, buf: &mut [u8], off: u64) -> io::Result<usize> {
        if self.in_xattr(b) {
            return sums::Xattr(&MountXattr(self, b)).pread(buf, off);
        }
        Err(err(libc::EIO))
    }

    fn sums_pwrite(&self, b: usize, buf: &[u8], off: u64) -> io::Result<usize> {
        if self.in_xattr(b) {
            return sums::Xattr(&MountXattr(self, b)).pwrite(buf, off);
        }
        Err(err(libc::EIO))
    }

    fn sums_truncate(&self, b: usize, len: u64) -> io::Result<()> {
        if self.in_xattr(b) {
            return sums::Xattr(&MountXattr(self, b)).truncate(len);
        }
        Err(err(libc::EIO))
    }

    fn checksum_event(&self, bad: BadBlock, repaired: bool) {
        self.bs.checksum_errors.fetch_add(1, Ordering::Relaxed);
        if repaired {
            self.bs.checksum_repairs.fetch_add(1, Ordering::Relaxed);
        }
        let path = self
            .log
            .map(|(_, _, i)| String::from_utf8_lossy(&i.path()).into_owned())
            .unwrap_or_else(|| format!("file {:016x}", self.file.id));
        let at = sums::logical(&self.file.layout, bad.branch, bad.offset)
            .map_or_else(|| "parity".to_string(), |o| format!("logical offset {o}"));
        if repaired {
            log::warn!("{path}: {bad} ({at}): rewritten from redundancy");
        } else {
            log::error!("{path}: {bad} ({at}): nothing to repair it from: EIO");
        }
    }

    fn intent(&self, start: u64, len: u64, written: u64, how: How) -> io::Result<()> {
        let Some((j, w, inode)) = self.log else {
            return Ok(());
        };
        let r = j.note(
            self.req,
            w,
            self.bs,
            &self.file.intent,
            self.file.id,
            &|| inode.path(),
            start,
            len,
            written,
            how,
        );
        if r.is_ok() {
            self.covered.set(true);
        }
        r
    }
}
