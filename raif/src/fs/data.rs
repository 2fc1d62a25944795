//! File data operations: create, open, read, write, flush, release, fsync, and truncation.
//!
//! A request on an open file takes a read-write descriptor of its part on every branch that
//! has one and is usable for it (from the inode's slots, see [`super::open`]); reads and writes
//! go through [`crate::stripe`] over those descriptors. Operations that come by node id
//! (`fstat`, `fchmod`, a truncate without a handle, xattrs, another open) use them too, where
//! cached, and reach the open object even after its name was removed or replaced (its
//! descriptors are then kept, see [`Raif::keep_open`]). The logical size lives in the inode while the file is known and is written into the parts'
//! records at `flush` (close), `fsync`, truncation and release; so is the generation when a
//! change cannot reach every branch (degraded), before the change.

use std::cell::RefCell;
use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

use fsprof_fuse::filesystem::{Attr, FopenFlags, Ino, Key, Opened, Request, WriteFlags};
use fsprof_fuse::protocol::errno::err;
use fsprof_fuse::protocol::ops::Sys;
use fsprof_fuse::sys::{self, SetTime};
use fsprof_fuse::toolkit::fdcache::Fd;

use super::open::{Gain, OpenFile, file_of};
use super::{MountParts, Raif};
use crate::inode::{FileState, Inode, new_id};
use crate::layout::{FileMeta, MAX_BRANCHES, Meta, XATTR};
use crate::stripe;
use crate::sums;

impl Raif {
    /// Open flags for `file` opened with `flags`: keep the page cache (every change comes
    /// through the mount); no FLUSH on close for a mirrored file opened read-only, which has
    /// nothing to write then (a writer's close gives the copies one modification time).
    fn fopen_flags(&self, file: &FileState, flags: i32) -> FopenFlags {
        let mut f = if self.cfg.keep_cache {
            FopenFlags::KEEP_CACHE
        } else {
            FopenFlags::empty()
        };
        if !file.layout.level.striped() && flags & libc::O_ACCMODE == libc::O_RDONLY {
            f |= FopenFlags::NOFLUSH;
        }
        f
    }

    pub(super) fn handle(&self, fh: &Key) -> io::Result<Arc<OpenFile>> {
        self.files.get(fh.get()).ok_or_else(|| err(libc::EBADF))
    }

    pub(crate) fn do_create(
        &self,
        req: &Request,
        parent: Ino,
        name: &OsStr,
        mode: u32,
        flags: i32,
    ) -> io::Result<(Attr, Opened<Key>)> {
        self.check_name(parent, name)?;
        let p = self.inodes.get(parent.0)?;
        let opened = self.bs.swaps.load(Ordering::Acquire);
        let meta = FileMeta {
            id: new_id(),
            layout: self.new_layout(&p, name),
            size: 0,
            generation: self.bs.epoch(),
            lost: 0,
            parity_stale: false,
        };
        let rec = Meta::File(meta).encode();
        let n = self.bs.len();
        let fds: RefCell<Vec<Option<Fd>>> = RefCell::new((0..n).map(|_| None).collect());
        let unlink = |b: usize, pfd: &Arc<OwnedFd>| {
            self.bs.get(b).call(req, Sys::Unlinkat, || {
                sys::unlinkat(pfd.as_fd(), name, false)
            })
        };
        let created = self.fan_out(
            "create",
            |b| self.dir_fd(&p, b, req),
            |b, pfd| {
                let br = self.bs.get(b);
                let fl = libc::O_CREAT | libc::O_EXCL | libc::O_RDWR | libc::O_NOFOLLOW;
                let fd = self.as_caller(req, || {
                    br.call(req, Sys::Openat, || {
                        sys::openat(pfd.as_fd(), name, fl, mode)
                    })
                })?;
                let r = br.call(req, Sys::Fsetxattr, || {
                    sys::fsetxattr(fd.as_fd(), OsStr::new(XATTR), rec.as_bytes(), 0)
                });
                if let Err(e) = r {
                    self.bs.close(req, b, fd);
                    let _ = unlink(b, pfd);
                    return Err(e);
                }
                fds.borrow_mut()[b] = Some(Arc::new(fd));
                Ok(())
            },
            Some(&mut |b, pfd| unlink(b, pfd)),
        );
        let mut fds = fds.into_inner();
        if created.is_err() {
            // The parts made before a branch refused (and undone): closed as the request's.
            self.bs.release_all(req, fds.drain(..));
        }
        match created {
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) && flags & libc::O_EXCL == 0 => {
                // Made by someone else since the kernel looked: open it instead.
                let attr = self.do_lookup(req, parent, name)?;
                let opened = self.do_open(req, Ino(attr.ino), flags & !libc::O_CREAT)?;
                return Ok((attr, opened));
            }
            r => r?,
        };
        let missing = (0..n)
            .filter(|&b| fds[b].is_none())
            .fold(0u64, |m, b| m | 1 << b);
        let state = FileState::new(&meta, 0, missing & !self.bs.failed_mask());
        // Its parts hold their record alone.
        state.bare.store(!missing, Ordering::Release);
        // Made on a branch being rebuilt too: current there from the start.
        let joined = self.bs.rebuilding_mask() & !missing;
        if joined != 0 {
            state.joined.store(joined, Ordering::Release);
            self.bs.join(meta.id);
        }
        let inode = self
            .inodes
            .lookup(&p, name, libc::S_IFREG, Some(meta.id), move || Some(state));
        // A new handle (closed in `release`); its parts in the inode's slots.
        self.inodes.open_file(&inode);
        for (b, fd) in fds.iter_mut().enumerate() {
            if let Some(f) = fd.take() {
                *fd = Some(
                    self.inodes
                        .cache_part(&inode, b, f, |c, f| self.bs.release(req, c, f)),
                );
            }
        }
        let sums =
            file_of(&inode).and_then(|f| self.open_sums(&inode, f, &fds, joined, req, Gain::New));
        let direct = super::open::direct_align(flags, &fds);
        let h = OpenFile {
            inode,
            append: flags & libc::O_APPEND != 0,
            sums: *sums.as_ref().unwrap_or(&0),
            opened,
            direct: *direct.as_ref().unwrap_or(&0),
        };
        let ready = sums
            .and(direct)
            .and_then(|_| self.fstat_open(&h, req))
            .and_then(|attr| match self.keep_setgid(&h.inode, req, &attr, mode)? {
                true => self.fstat_open(&h, req),
                false => Ok(attr),
            })
            .and_then(|attr| Ok((attr, self.fopen_flags(file_of(&h.inode)?, flags))));
        let (attr, fl) = match ready {
            Ok(r) => r,
            Err(e) => {
                self.close(&h, req);
                return Err(e);
            }
        };
        let fh = self.files.insert(h);
        Ok((attr, Opened::new(Key::new(fh), fl)))
    }

    pub(crate) fn do_open(&self, req: &Request, ino: Ino, flags: i32) -> io::Result<Opened<Key>> {
        let inode = self.inodes.get(ino.0)?;
        let file = file_of(&inode)?;
        let trunc = flags & libc::O_TRUNC != 0;
        // A lost part (RAIF0, not rebuilt) holds nothing of an empty file: truncating to 0
        // brings it back into use (its branch gets its part again below).
        let lost = if trunc {
            file.lost.swap(0, Ordering::AcqRel)
        } else {
            0
        };
        let opened = self.bs.swaps.load(Ordering::Acquire);
        self.inodes.open_file(&inode);
        let mut h = OpenFile {
            inode: inode.clone(),
            append: flags & libc::O_APPEND != 0,
            sums: 0,
            opened,
            direct: 0,
        };
        let mut parts: [Option<Fd>; MAX_BRANCHES] = std::array::from_fn(|_| None);
        let parts = &mut parts[..self.bs.len()];
        let mut r = self
            .fill_parts(&inode, file, req, parts, true)
            .and_then(|()| {
                h.direct = super::open::direct_align(flags, parts)?;
                // An empty file (or one emptied now) gains checksums where it has none yet,
                // unless another handle is open (which would not keep them).
                let empty = (trunc || file.size.load(Ordering::Acquire) == 0) && inode.opens() == 1;
                let joined = file.joined.load(Ordering::Acquire);
                h.sums = self.open_sums(&inode, file, parts, joined, req, Gain::when(empty))?;
                Ok(())
            });
        if r.is_ok() && trunc && (file.size.load(Ordering::Acquire) > 0 || lost != 0) {
            r = self
                .fds(&h, req)
                .and_then(|fds| self.truncate_file(&inode, fds.parts(), fds.sums(), 0, req));
        }
        if r.is_err() {
            file.lost.fetch_or(lost, Ordering::AcqRel);
        }
        if let Err(e) = r {
            self.close(&h, req);
            return Err(e);
        }
        if req.kill_suidgid {
            // Truncated by a caller without CAP_FSETID.
            self.privileges_dropped(&inode, req);
        }
        let fl = self.fopen_flags(file, flags);
        let fh = self.files.insert(h);
        Ok(Opened::new(Key::new(fh), fl))
    }

    /// `fstat` of an open file's home part (or the next one usable).
    pub(crate) fn fstat_open(&self, h: &OpenFile, req: &Request) -> io::Result<Attr> {
        let file = file_of(&h.inode)?;
        let fds = self.fds(h, req)?;
        let fds = fds.parts();
        let open = (0..self.bs.len())
            .filter(|&b| fds[b].is_some() && file.layout.holds(b))
            .fold(0u64, |m, b| m | 1 << b);
        let usable = open & !file.down(&self.bs);
        let fstat = |b: usize| {
            let fd = fds[b].as_ref().ok_or_else(|| err(libc::EIO))?.as_fd();
            self.bs.get(b).call(req, Sys::Statx, || sys::fstat(fd))
        };
        let (b, st) = self.on_one(file.layout.home() as u64, usable, "fstat", |b| {
            fstat(b).map(|st| (b, st))
        })?;
        Ok(self.attr(&h.inode, b, &st, fstat))
    }

    pub(crate) fn do_read(
        &self,
        req: &Request,
        fh: &Key,
        offset: u64,
        buf: &mut [u8],
    ) -> io::Result<usize> {
        let h = self.handle(fh)?;
        h.check_direct(offset, buf.len())?;
        let file = file_of(&h.inode)?;
        let (n, degraded) = {
            let _shared = file.lock.read();
            let len = file.size.load(Ordering::Acquire);
            let fds = self.fds(&h, req)?;
            let parts = MountParts::new(&self.bs, fds.parts(), file, req)
                .summed(fds.sums(), self.sum_files(&h.inode));
            stripe::read(&file.layout, len, &parts, offset, buf)?
        };
        if degraded {
            self.bs.degraded_reads.fetch_add(1, Ordering::Relaxed);
        }
        Ok(n)
    }

    pub(crate) fn do_write(
        &self,
        req: &Request,
        fh: &Key,
        offset: u64,
        data: &[u8],
        flags: WriteFlags,
    ) -> io::Result<u32> {
        let h = self.handle(fh)?;
        // A write-back of the page cache (a shared mapping of a file opened with O_DIRECT) is
        // no caller's direct write: O_DIRECT's alignment does not apply to it.
        if !flags.cache {
            h.check_direct(offset, data.len())?;
        }
        let file = file_of(&h.inode)?;
        if flags.kill_suidgid {
            self.privileges_dropped(&h.inode, req);
        }
        let _excl = file.lock.write();
        let size = file.size.load(Ordering::Acquire);
        // A write-back of the page cache goes where its pages are, whatever the handle's
        // O_APPEND (the kernel picks any writable handle of the file for it).
        let off = if h.append && !flags.cache {
            size
        } else {
            offset
        };
        let all = self.fds(&h, req)?;
        let (fds, sums) = (all.parts(), all.sums());
        let w = self.journal.as_ref().map(|j| (j, j.writing()));
        let parts = MountParts::new(&self.bs, fds, file, req)
            .summed(sums, self.sum_files(&h.inode))
            .logged(w.as_ref().map(|(j, w)| (&***j, w, &h.inode)));
        if parts.degraded() {
            self.bump_generation(file, fds, req);
        }
        let end = off + data.len() as u64;
        // On an error the data path has cut what the write put past the size, and settled
        // the rows and copies it touched (a branch without room is not failed for it).
        let r = stripe::write(&file.layout, size, &parts, off, data);
        self.record_out_of_date(file, fds, &parts);
        // Also after a refused write, which may have changed bytes within the size. Load
        // first: after the first write the flag is set, and a store would dirty a cache line
        // other threads read.
        if !file.touched.load(Ordering::Relaxed) {
            file.touched.store(true, Ordering::Release);
        }
        let degraded = r?;
        let striped = file.layout.level.striped();
        if end > size {
            file.size.store(end, Ordering::Release);
            if striped {
                file.dirty.store(true, Ordering::Release);
            }
        }
        if degraded {
            self.bs.degraded_writes.fetch_add(1, Ordering::Relaxed);
            self.bump_generation(file, fds, req);
        }
        Ok(data.len() as u32)
    }

    /// Truncates (or extends) a file to `new` bytes over the parts `fds`.
    pub(crate) fn truncate_file(
        &self,
        inode: &Arc<Inode>,
        fds: &[Option<Fd>],
        sums: &[Option<Fd>],
        new: u64,
        req: &Request,
    ) -> io::Result<()> {
        let file = file_of(inode)?;
        let _excl = file.lock.write();
        self.truncate_held(inode, file, fds, sums, new, req)
    }

    /// [`Raif::truncate_file`] with the file's write lock held.
    pub(super) fn truncate_held(
        &self,
        inode: &Arc<Inode>,
        file: &FileState,
        fds: &[Option<Fd>],
        sums: &[Option<Fd>],
        new: u64,
        req: &Request,
    ) -> io::Result<()> {
        let old = file.size.load(Ordering::Acquire);
        let w = self.journal.as_ref().map(|j| (j, j.writing()));
        let parts = MountParts::new(&self.bs, fds, file, req)
            .summed(sums, self.sum_files(inode))
            .logged(w.as_ref().map(|(j, w)| (&***j, w, inode)));
        if parts.degraded() {
            self.bump_generation(file, fds, req);
        }
        if new > old && file.layout.level.striped() {
            self.cut_to_size(file, fds, &parts, old, req)?;
        }
        let r = stripe::truncate(&file.layout, old, new, &parts);
        self.record_out_of_date(file, fds, &parts);
        let degraded = r?;
        file.size.store(new, Ordering::Release);
        if new == 0 {
            // Nothing left for a parity to disagree with (recorded below).
            file.parity_stale.store(false, Ordering::Release);
        }
        if degraded {
            self.bs.degraded_writes.fetch_add(1, Ordering::Relaxed);
            self.bump_generation(file, fds, req);
        }
        // The size (striped levels) and one modification time for every part.
        let striped = file.layout.level.striped();
        if striped {
            file.dirty.store(false, Ordering::Release);
        }
        file.touched.store(false, Ordering::Release);
        self.persist(file, fds, req, striped, true);
        Ok(())
    }

    /// Before a truncation up exposes the bytes past the end of a striped file as zeros: cuts
    /// any part longer than the size `size` says (a part should never be; one fstat per part,
    /// and truncations up are rare).
    fn cut_to_size(
        &self,
        file: &FileState,
        fds: &[Option<Fd>],
        parts: &MountParts,
        size: u64,
        req: &Request,
    ) -> io::Result<()> {
        let l = &file.layout;
        let long = fds.iter().enumerate().any(|(b, fd)| {
            fd.as_ref()
                .filter(|_| crate::part_io::Parts::usable(parts, b))
                .is_some_and(|fd| {
                    self.bs
                        .get(b)
                        .call(req, Sys::Statx, || sys::fstat(fd.as_fd()))
                        .is_ok_and(|st| st.size > l.part_size(b, size))
                })
        });
        if long {
            log::warn!("a part held bytes past the end of its file: cut");
            stripe::truncate(l, u64::MAX, size, parts)?;
        }
        Ok(())
    }

    /// After a data operation over `parts`: records what it gave up for the file (see
    /// [`crate::part_io::Parts::out_of_date`]) in every part's record, the given-up copies' own
    /// included, so that whichever branch a later lookup asks knows.
    pub(super) fn record_out_of_date(
        &self,
        file: &FileState,
        fds: &[Option<Fd>],
        parts: &MountParts,
    ) {
        if !parts.gave_up() {
            return;
        }
        self.persist(file, fds, parts.req, true, false);
        self.write_record_to(file, fds, parts.given_up.get(), parts.req);
    }

    /// Writes the file's record to the parts on the branches of `mask` (which it does not
    /// otherwise use), as far as they take it.
    fn write_record_to(&self, file: &FileState, fds: &[Option<Fd>], mask: u64, req: &Request) {
        let rec = Meta::File(file.meta()).encode();
        for (b, fd) in fds.iter().enumerate() {
            let Some(fd) = fd.as_ref().filter(|_| mask & (1 << b) != 0) else {
                continue;
            };
            let r = self.set_record(file, b, fd.as_fd(), rec.as_bytes(), req);
            if let Err(e) = r {
                log::warn!("branch {b}: cannot record a part out of date: {e}");
            }
        }
    }

    /// Writes `rec`, the record of `file`, to its part `fd` on branch `b`, keeping the
    /// checksum entries that follow the record there ([`super::put_record`]).
    pub(super) fn set_record(
        &self,
        file: &FileState,
        b: usize,
        fd: std::os::fd::BorrowedFd,
        rec: &[u8],
        req: &Request,
    ) -> io::Result<()> {
        let br = self.bs.get(b);
        let name = OsStr::new(XATTR);
        super::put_record(
            file,
            b,
            rec,
            |buf| br.call(req, Sys::Fgetxattr, || sys::fgetxattr(fd, name, buf)),
            |v| br.call(req, Sys::Fsetxattr, || sys::fsetxattr(fd, name, v, 0)),
        )
    }

    /// Raises the file's generation to the current epoch (a change is about to miss a branch)
    /// and records it on the parts that get the change.
    pub(super) fn bump_generation(&self, file: &FileState, fds: &[Option<Fd>], req: &Request) {
        let epoch = self.bs.epoch();
        if file.generation.fetch_max(epoch, Ordering::AcqRel) < epoch {
            self.persist(file, fds, req, true, false);
        }
    }

    /// With `record`, writes the file's record to every usable part; with `touch`, gives all
    /// parts the same modification time (now).
    fn persist(
        &self,
        file: &FileState,
        fds: &[Option<Fd>],
        req: &Request,
        record: bool,
        touch: bool,
    ) {
        let rec = Meta::File(file.meta()).encode();
        let now = touch.then(|| {
            let d = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default();
            SetTime::At(d.as_secs() as i64, d.subsec_nanos())
        });
        let down = file.down(&self.bs);
        for (b, fd) in fds.iter().enumerate() {
            let Some(fd) = fd.as_ref().filter(|_| down & (1 << b) == 0) else {
                continue;
            };
            let br = self.bs.get(b);
            let mut r = Ok(());
            if record {
                r = self.set_record(file, b, fd.as_fd(), rec.as_bytes(), req);
            }
            if let (Ok(()), Some(t)) = (&r, now) {
                r = br.call(req, Sys::Utimensat, || {
                    sys::futimens(fd.as_fd(), SetTime::Omit, t)
                });
            }
            if let Err(e) = r {
                if !self.bs.error(b, &e, "record") {
                    log::warn!("branch {b}: cannot write a file record: {e}");
                }
            }
        }
    }

    /// Writes what changed of the file (size, times) through the handle's descriptors. Where
    /// they cannot be had (the daemon's own limits), what changed stays to be written by the
    /// next flush, release or fsync, and the error is the caller's.
    fn settle(&self, h: &OpenFile, req: &Request) -> io::Result<()> {
        let Some(file) = h.inode.file.as_ref() else {
            return Ok(());
        };
        let dirty = file.dirty.swap(false, Ordering::AcqRel);
        let touched = file.touched.swap(false, Ordering::AcqRel);
        if dirty || touched {
            let _shared = file.lock.read();
            let fds = match self.fds(h, req) {
                Ok(fds) => fds,
                Err(e) => {
                    file.dirty.fetch_or(dirty, Ordering::AcqRel);
                    file.touched.fetch_or(touched, Ordering::AcqRel);
                    return Err(e);
                }
            };
            self.persist(file, fds.parts(), req, dirty, touched);
        }
        Ok(())
    }

    pub(crate) fn do_flush(&self, req: &Request, fh: &Key) -> io::Result<()> {
        let h = self.handle(fh)?;
        self.settle(&h, req)
    }

    pub(crate) fn do_release(&self, req: &Request, fh: Key) {
        let Some(h) = self.files.remove(fh.get()) else {
            return;
        };
        if let Err(e) = self.settle(&h, req) {
            log::warn!(
                "{}: size and times not recorded at release: {e}; recorded at the next close",
                String::from_utf8_lossy(&h.inode.path())
            );
        }
        // A request still in flight on it keeps the descriptors it took until it ends.
        self.close(&h, req);
    }

    pub(crate) fn do_fsync(&self, req: &Request, fh: &Key, datasync: bool) -> io::Result<()> {
        let h = self.handle(fh)?;
        if let Some(f) = &h.inode.file {
            super::flush_sums(&self.bs, f, Some(req));
        }
        self.settle(&h, req)?;
        let file = file_of(&h.inode)?;
        let down = file.down(&self.bs);
        let failed = self.bs.failed_mask();
        let l = &file.layout;
        let all = self.fds(&h, req)?;
        let (fds, sums) = (all.parts(), all.sums());
        let parts =
            MountParts::new(&self.bs, fds, file, req).summed(sums, self.sum_files(&h.inode));
        let xsums = file.xsums.load(Ordering::Acquire);
        // An attribute change is metadata that fdatasync need not make durable (ext4's does
        // not): the parts of a file that keeps checksums in attributes get a full fsync.
        let datasync = datasync && xsums == 0;
        for (b, fd) in sums.iter().enumerate() {
            // The checksums of what is made durable, first (on the other branches): their sum
            // file, or the overflow file of those in an attribute (which goes with its part,
            // made durable below), opened again if the cache let it go.
            let over = (xsums & (1 << b) != 0).then(|| parts.over_fd(b, false).ok().flatten());
            let fd = match &over {
                Some(over) => over.as_ref().filter(|_| fd.is_some()),
                None => fd.as_ref(),
            };
            let Some((hb, fd)) = fd.and_then(|fd| {
                sums::home(b, l.width as usize)
                    .filter(|hb| (failed | self.bs.rebuilding_mask()) & (1 << hb) == 0)
                    .map(|hb| (hb, fd))
            }) else {
                continue;
            };
            if let Err(e) = self
                .bs
                .get(hb)
                .call(req, Sys::Fsync, || sys::fsync(fd.as_fd(), datasync))
                && !self.bs.error(hb, &e, "fsync")
            {
                return Err(e);
            }
        }
        for (b, fd) in fds.iter().enumerate() {
            let Some(fd) = fd.as_ref().filter(|_| down & (1 << b) == 0) else {
                continue;
            };
            if let Err(e) = self
                .bs
                .get(b)
                .call(req, Sys::Fsync, || sys::fsync(fd.as_fd(), datasync))
            {
                if !self.bs.error(b, &e, "fsync") {
                    return Err(e);
                }
            }
        }
        Ok(())
    }
}
