//! File data operations: create, open, read, write, flush, release, fsync, and truncation.
//!
//! An open file holds a read-write descriptor of its part on every branch that has one and is
//! usable for it; reads and writes go through [`crate::stripe`] over those descriptors. The
//! same descriptors are pinned in the inode's slots while it is open (see [`crate::inode`]), so
//! operations that come by node id (`fstat`, `fchmod`, a truncate without a handle, xattrs,
//! another open) reach the open object even after its name was removed or replaced. The
//! logical size lives in the inode while the file is known and is written into the parts'
//! records at `flush` (close), `fsync`, truncation and release; so is the generation when a
//! change cannot reach every branch (degraded), before the change.

use std::borrow::Cow;
use std::cell::RefCell;
use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

use fsprof_fuse::errno::err;
use fsprof_fuse::fdcache::Fd;
use fsprof_fuse::filesystem::{Attr, FopenFlags, Ino, Key, Opened, Request};
use fsprof_fuse::ops::Sys;
use fsprof_fuse::sys::{self, SetTime};

use super::{MountParts, Raif, trouble};
use crate::inode::{BranchFds, FileState, Inode, new_id};
use crate::layout::{FileMeta, Meta, XATTR};
use crate::stripe;
use crate::sums;

/// An open regular file.
pub struct OpenFile {
    /// The file.
    pub inode: Arc<Inode>,
    /// Read-write descriptors of its parts, by branch (`None`: no part there, or unusable);
    /// shared with the inode's pinned slots.
    pub fds: BranchFds,
    /// Opened with `O_APPEND`: writes go to the logical end.
    pub append: bool,
    /// The sum files of its parts, by the part's branch ([`Raif::open_sums`]).
    pub sums: BranchFds,
    /// [`crate::branch::BranchSet::swaps`] before it was opened.
    pub opened: u64,
}

/// Descriptors by branch, the handle's own or a copy (see [`OpenFile::view`]).
pub(crate) type Fds<'a> = Cow<'a, [Option<Fd>]>;

impl OpenFile {
    /// The descriptors to use for `file`'s parts and sum files: the handle's own, unless a
    /// rebuild while mounted replaced a part since it was opened (then the inode's slots,
    /// which hold the new part, and no sum file on the rebuilt branch: its checksums were
    /// dropped, see [`crate::online`]).
    #[inline]
    pub(crate) fn view(&self, file: &FileState) -> (Fds<'_>, Fds<'_>) {
        if file.swapped.load(Ordering::Acquire) <= self.opened {
            return (Cow::Borrowed(&self.fds), Cow::Borrowed(&self.sums));
        }
        let fds = (0..self.fds.len())
            .map(|b| self.inode.cached_fd(b))
            .collect();
        let joined = file.joined.load(Ordering::Acquire);
        let w = file.layout.width as usize;
        let sums = self
            .sums
            .iter()
            .enumerate()
            .map(|(b, s)| {
                let dropped = sums::home(b, w).is_some_and(|h| joined & (1 << h) != 0);
                if dropped { None } else { s.clone() }
            })
            .collect();
        (Cow::Owned(fds), Cow::Owned(sums))
    }
}

/// Whether a part that keeps no checksums gains them when its file is opened
/// ([`Raif::open_sums`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Gain {
    /// No: a file with content, or open elsewhere (whose handles would not keep them).
    No,
    /// Yes, where it has none: the file is empty (or emptied now).
    Empty,
    /// Yes: the file was just made (it has none, nothing to ask).
    New,
}

impl Gain {
    /// [`Gain::Empty`] if `empty`, else [`Gain::No`].
    pub(crate) fn when(empty: bool) -> Gain {
        if empty { Gain::Empty } else { Gain::No }
    }
}

pub(super) fn file_of(inode: &Inode) -> io::Result<&FileState> {
    inode.file.as_ref().ok_or_else(|| {
        err(if inode.is_dir() {
            libc::EISDIR
        } else {
            libc::EIO
        })
    })
}

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
                    let _ = unlink(b, pfd);
                    return Err(e);
                }
                fds.borrow_mut()[b] = Some(Arc::new(fd));
                Ok(())
            },
            Some(&mut |b, pfd| unlink(b, pfd)),
        );
        match created {
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) && flags & libc::O_EXCL == 0 => {
                // Made by someone else since the kernel looked: open it instead.
                let attr = self.do_lookup(req, parent, name)?;
                let opened = self.do_open(req, Ino(attr.ino), flags & !libc::O_CREAT, false)?;
                return Ok((attr, opened));
            }
            r => r?,
        };
        let mut fds = fds.into_inner().into_boxed_slice();
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
        // Pinned for the new handle, released in `release`.
        self.inodes.pin(&inode);
        for (b, fd) in fds.iter_mut().enumerate() {
            if let Some(f) = fd.take() {
                *fd = Some(self.inodes.cache_part(&inode, b, f));
            }
        }
        let sums = match file_of(&inode) {
            Ok(f) => self.open_sums(&inode, f, &fds, joined, req, Gain::New),
            Err(_) => (0..n).map(|_| None).collect(),
        };
        let h = OpenFile {
            inode,
            fds,
            append: flags & libc::O_APPEND != 0,
            sums,
            opened,
        };
        let ready = self
            .fstat_open(&h, req)
            .and_then(|attr| Ok((attr, self.fopen_flags(file_of(&h.inode)?, flags))));
        let (attr, fl) = match ready {
            Ok(r) => r,
            Err(e) => {
                self.close(h, req);
                return Err(e);
            }
        };
        let fh = self.files.insert(h);
        Ok((attr, Opened::new(Key::new(fh), fl)))
    }

    /// Descriptors of the parts of `inode` on every branch holding one that is usable for it:
    /// those of its open handles (pinned in its slots), else opened by name. With `pin`, for a
    /// new handle: the inode is pinned and the parts opened are cached in its slots (undone with
    /// [`Raif::close`]).
    pub(crate) fn open_parts(
        &self,
        inode: &Arc<Inode>,
        file: &FileState,
        req: &Request,
        pin: bool,
    ) -> io::Result<BranchFds> {
        if pin {
            self.inodes.pin(inode);
        }
        let r = self.parts_of(inode, file, req, pin);
        if r.is_err() && pin {
            drop(self.inodes.release(inode));
        }
        r
    }

    fn parts_of(
        &self,
        inode: &Arc<Inode>,
        file: &FileState,
        req: &Request,
        cache: bool,
    ) -> io::Result<BranchFds> {
        let parent = inode
            .with_loc(|p, _| p.cloned())
            .ok_or_else(|| err(libc::EIO))?;
        let down = file.down(&self.bs);
        let n = self.bs.len();
        let l = &file.layout;
        let mut fds: Vec<Option<Fd>> = (0..n).map(|_| None).collect();
        for (b, slot) in fds.iter_mut().enumerate() {
            // A branch that holds no part (a RAIF1 file with fewer copies than branches) may
            // still keep the checksums of the part before it, in its empty file's attribute.
            let home_only = !l.holds(b) && sums::keeps_for(l, b).is_some();
            if !(l.holds(b) || home_only) || down & (1 << b) != 0 {
                continue;
            }
            if let Some(fd) = inode.open_part(b) {
                *slot = Some(fd);
                continue;
            }
            let br = self.bs.get(b);
            // Out of descriptors: give back cached ones and try once more.
            let r = self.inodes.retry_emfile(|| {
                self.dir_fd(&parent, b, req).and_then(|pfd| {
                    inode.with_loc(|_, name| {
                        br.call(req, Sys::Openat, || {
                            sys::openat(pfd.as_fd(), name, libc::O_RDWR | libc::O_NOFOLLOW, 0)
                        })
                    })
                })
            });
            match r {
                Ok(fd) if cache => *slot = Some(self.inodes.cache_part(inode, b, Arc::new(fd))),
                Ok(fd) => *slot = Some(Arc::new(fd)),
                // Its checksums go unkept: not a part missing.
                Err(_) if home_only => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                    if self.bs.check(b) {
                        // The branch is fine but the part is gone: serve without it.
                        log::warn!(
                            "{}: part missing on branch {b}; served without it until rebuilt",
                            String::from_utf8_lossy(&inode.path())
                        );
                        file.stale.fetch_or(1 << b, Ordering::AcqRel);
                    }
                }
                Err(e) if trouble(&e) => {
                    self.bs.error(b, &e, "open");
                }
                Err(e) => return Err(e),
            }
        }
        if !fds
            .iter()
            .enumerate()
            .any(|(b, f)| f.is_some() && l.holds(b))
        {
            return Err(err(libc::EIO));
        }
        Ok(fds.into_boxed_slice())
    }

    /// Where the checksums of the parts of regular file `inode` are kept ([`crate::sums`]), by
    /// the part's branch: the home part's descriptor (in `fds`, the file's parts) where they
    /// are in its attribute, or the sum file's, opened on the home branch (or taken from the
    /// inode's cache, where it stays after the file is closed). `gain` says whether a part
    /// that has none gains them (in the attribute; with checksums on). `None` where there is
    /// none: a file made without checksums, the home branch failed or stale.
    pub(crate) fn open_sums(
        &self,
        inode: &Arc<Inode>,
        file: &FileState,
        fds: &[Option<Fd>],
        joined: u64,
        req: &Request,
        gain: Gain,
    ) -> BranchFds {
        let n = self.bs.len();
        let mut out: Vec<Option<Fd>> = (0..n).map(|_| None).collect();
        // A stale branch's sums may have missed changes, as its parts may.
        let unusable = self.bs.sums_down(joined);
        let new = gain == Gain::New;
        let gain = if self.cfg.checksums { gain } else { Gain::No };
        for (b, h, _) in self.sum_homes(&file.layout, unusable) {
            let bit = 1u64 << b;
            let home = fds.get(h).and_then(Option::as_ref);
            if file.xsums.load(Ordering::Acquire) & bit != 0 {
                out[b] = home.cloned();
                continue;
            }
            if let Some(fd) = inode.cached_sum(b) {
                out[b] = Some(fd);
                continue;
            }
            let br = self.bs.get(h);
            // A new file has neither an attribute nor a sum file, and one found to have none
            // gained none since: nothing to ask.
            let none = new || file.sums_none.load(Ordering::Acquire) & bit != 0;
            if !none {
                // The home part's attributes say the part keeps its checksums there.
                if let Some(hf) = home {
                    let held = sums::held_by(hf.as_fd(), |g| br.call(req, Sys::Getxattr, g));
                    match held {
                        Ok(Some(how)) => {
                            if how == sums::Held::Apart {
                                file.xapart.fetch_or(bit, Ordering::AcqRel);
                            }
                            // Whether it has an overflow file is not known.
                            file.xover.fetch_or(bit, Ordering::AcqRel);
                            file.xsums.fetch_or(bit, Ordering::AcqRel);
                            out[b] = Some(hf.clone());
                            continue;
                        }
                        Ok(None) => {}
                        Err(e) => {
                            self.sums_trouble(h, &e);
                            continue;
                        }
                    }
                }
                // A sum file: a file from before the attribute.
                match self
                    .sum_files(inode)
                    .open(&self.bs, req, h, file.id, b, false)
                {
                    Ok(fd) => {
                        out[b] = Some(fd);
                        continue;
                    }
                    Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
                    Err(e) => {
                        self.sums_trouble(h, &e);
                        continue;
                    }
                }
            }
            if gain != Gain::No && home.is_some() {
                // Kept in the attribute from now on, written with the first entries (an
                // empty file that has none yet gains them again at its next open).
                file.xsums.fetch_or(bit, Ordering::AcqRel);
                out[b] = home.cloned();
            } else if home.is_some() {
                file.sums_none.fetch_or(bit, Ordering::AcqRel);
            }
        }
        out.into_boxed_slice()
    }

    /// An error where a part's checksums are kept (branch `h`).
    fn sums_trouble(&self, h: usize, e: &io::Error) {
        if trouble(e) {
            self.bs.error(h, e, "checksums");
        } else {
            log::warn!("branch {h}: cannot reach checksums: {e}");
        }
    }

    /// How [`MountParts`] reaches the overflow files of `inode`'s parts.
    #[inline]
    pub(crate) fn sum_files<'a>(&'a self, inode: &'a Arc<Inode>) -> super::SumFiles<'a> {
        super::SumFiles {
            inodes: &self.inodes,
            inode,
            dirs: &self.sum_dirs,
            dirty: self.journal.is_some().then_some(&*self.dirty_sums),
        }
    }

    /// For each part of a file of layout `l` that keeps checksums: its branch, the branch its
    /// sum file lives on (not in `unusable`) and that branch's sum directory.
    pub(crate) fn sum_homes<'s>(
        &'s self,
        l: &crate::layout::Layout,
        unusable: u64,
    ) -> impl Iterator<Item = (usize, usize, Arc<std::os::fd::OwnedFd>)> + 's {
        let (l, covered) = (*l, sums::covered(l));
        (0..self.bs.len())
            .filter(move |&b| covered && l.holds(b))
            .filter_map(move |b| {
                let h = sums::home(b, l.width as usize).filter(|h| unusable & (1 << h) == 0)?;
                Some((b, h, self.sum_dirs.get(h)?))
            })
    }

    pub(crate) fn do_open(
        &self,
        req: &Request,
        ino: Ino,
        flags: i32,
        kill_suid: bool,
    ) -> io::Result<Opened<Key>> {
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
        let fds = match self.open_parts(&inode, file, req, true) {
            Ok(fds) => fds,
            Err(e) => {
                file.lost.fetch_or(lost, Ordering::AcqRel);
                return Err(e);
            }
        };
        // An empty file (or one emptied now) gains checksums where it has none yet, unless
        // another handle is open (which would not keep them).
        let empty = (trunc || file.size.load(Ordering::Acquire) == 0) && inode.opens() == 1;
        let joined = file.joined.load(Ordering::Acquire);
        let sums = self.open_sums(&inode, file, &fds, joined, req, Gain::when(empty));
        let h = OpenFile {
            inode: inode.clone(),
            fds,
            append: flags & libc::O_APPEND != 0,
            sums,
            opened,
        };
        let mut r = Ok(());
        if trunc && (file.size.load(Ordering::Acquire) > 0 || lost != 0) {
            r = self.truncate_file(&inode, &h.fds, &h.sums, 0, req);
            if r.is_err() {
                file.lost.fetch_or(lost, Ordering::AcqRel);
            }
        }
        if kill_suid && r.is_ok() {
            r = self.kill_suid(&inode, req);
        }
        if let Err(e) = r {
            self.close(h, req);
            return Err(e);
        }
        let fl = self.fopen_flags(file, flags);
        let fh = self.files.insert(h);
        Ok(Opened::new(Key::new(fh), fl))
    }

    /// `fstat` of an open file's home part (or the next one usable).
    pub(crate) fn fstat_open(&self, h: &OpenFile, req: &Request) -> io::Result<Attr> {
        let file = file_of(&h.inode)?;
        let (fds, _) = h.view(file);
        let open = (0..self.bs.len())
            .filter(|&b| fds[b].is_some() && file.layout.holds(b))
            .fold(0u64, |m, b| m | 1 << b);
        let usable = open & !file.down(&self.bs);
        let st = self.on_one(file.layout.home() as u64, usable, "fstat", |b| {
            let fd = fds[b].as_ref().expect("open part").as_fd();
            self.bs.get(b).call(req, Sys::Statx, || sys::fstat(fd))
        })?;
        Ok(self.attr(&h.inode, &st))
    }

    pub(crate) fn do_read(
        &self,
        req: &Request,
        fh: &Key,
        offset: u64,
        buf: &mut [u8],
    ) -> io::Result<usize> {
        let h = self.handle(fh)?;
        let file = file_of(&h.inode)?;
        let (n, degraded) = {
            let _shared = file.lock.read();
            let len = file.size.load(Ordering::Acquire);
            let (fds, sums) = h.view(file);
            let parts =
                MountParts::new(&self.bs, &fds, file, req).summed(&sums, self.sum_files(&h.inode));
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
        kill_suid: bool,
    ) -> io::Result<u32> {
        let h = self.handle(fh)?;
        let file = file_of(&h.inode)?;
        if kill_suid {
            self.kill_suid(&h.inode, req)?;
        }
        let _excl = file.lock.write();
        let size = file.size.load(Ordering::Acquire);
        let off = if h.append { size } else { offset };
        let w = self.journal.as_ref().map(|j| (j, j.writing()));
        let (fds, sums) = h.view(file);
        let parts = MountParts::new(&self.bs, &fds, file, req)
            .summed(&sums, self.sum_files(&h.inode))
            .logged(w.as_ref().map(|(j, w)| (&***j, w, &h.inode)));
        if parts.degraded() {
            self.bump_generation(file, &fds, req);
        }
        let end = off + data.len() as u64;
        // On an error the data path has cut what the write put past the size, and settled
        // the rows and copies it touched (a branch without room is not failed for it).
        let r = stripe::write(&file.layout, size, &parts, off, data);
        self.record_out_of_date(file, &fds, &parts);
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
            self.bump_generation(file, &fds, req);
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
                .filter(|_| crate::parts::Parts::usable(parts, b))
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
    /// [`crate::parts::Parts::out_of_date`]) in every part's record, the given-up copies' own
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
            |buf| br.call(req, Sys::Getxattr, || sys::fgetxattr(fd, name, buf)),
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

    /// Writes what changed of the file (size, times) through the handle's descriptors.
    fn settle(&self, h: &OpenFile, req: &Request) {
        let Some(file) = h.inode.file.as_ref() else {
            return;
        };
        let dirty = file.dirty.swap(false, Ordering::AcqRel);
        let touched = file.touched.swap(false, Ordering::AcqRel);
        if dirty || touched {
            let _shared = file.lock.read();
            let (fds, _) = h.view(file);
            self.persist(file, &fds, req, dirty, touched);
        }
    }

    pub(crate) fn do_flush(&self, req: &Request, fh: &Key) -> io::Result<()> {
        let h = self.handle(fh)?;
        self.settle(&h, req);
        Ok(())
    }

    pub(crate) fn do_release(&self, req: &Request, fh: Key) {
        let Some(h) = self.files.remove(fh.get()) else {
            return;
        };
        self.settle(&h, req);
        match Arc::try_unwrap(h) {
            Ok(h) => self.close(h, req),
            // Still in use by a request in flight: its descriptors close when that ends.
            Err(h) => drop(self.inodes.release(&h.inode)),
        }
    }

    /// Closes an open file's handle `h` for `req`: one pin of its inode less, and at the
    /// last, its parts leave the inode's slots. A part's close is counted on its branch.
    pub(crate) fn close(&self, h: OpenFile, req: &Request) {
        let mut taken = self.inodes.release(&h.inode);
        if taken.is_some()
            && let Some(f) = &h.inode.file
        {
            // The last handle: what it cached of the checksum attributes goes (written back
            // first), with the descriptors it holds. Here, not at each close(2) (a flush),
            // which the caller waits for: the kernel sends the release in the background.
            super::release_sums(&self.bs, f, Some(req));
        }
        for (b, fd) in h.fds.into_vec().into_iter().enumerate() {
            let pinned = taken.as_mut().and_then(|t| t[b].take());
            if fd.is_some() {
                self.bs.get(b).call(req, Sys::Close, || drop((fd, pinned)));
            }
        }
    }

    pub(crate) fn do_fsync(&self, req: &Request, fh: &Key, datasync: bool) -> io::Result<()> {
        let h = self.handle(fh)?;
        if let Some(f) = &h.inode.file {
            super::flush_sums(&self.bs, f, Some(req));
        }
        self.settle(&h, req);
        let file = file_of(&h.inode)?;
        let down = file.down(&self.bs);
        let failed = self.bs.failed_mask();
        let l = &file.layout;
        let (fds, sums) = h.view(file);
        let parts =
            MountParts::new(&self.bs, &fds, file, req).summed(&sums, self.sum_files(&h.inode));
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
