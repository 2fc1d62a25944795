//! What a rebuild does for each entry of the tree ([`Rebuilder`]): makes it on the target
//! branch, a regular file's part computed from the other branches, with its checksums.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use fsprof_fuse::sys;

use super::progress::{Meter, Progress};
use crate::branch::BranchSet;
use crate::inode::Inode;
use crate::layout::{FileMeta, Meta};
use crate::offline::{
    AdminParts, Entry, copy_attrs, copy_other_id, list, newest_generation, object, record,
    stat_opt, write_record,
};
use crate::part_io::{self, Parts as _};
use crate::stripe;

/// What a rebuild while mounted needs of the mount it runs under (the mount's
/// [`crate::online::Online`] implements it).
pub trait Mounted: Send + Sync {
    /// The volume's branches.
    fn branches(&self) -> &BranchSet;
    /// The mount's inode of the regular file `id`, if it knows it.
    fn file(&self, id: u64) -> Option<Arc<Inode>>;
    /// Whether the file `id` may have a torn part on a branch rebuilt before the last stop
    /// (then a resumed rebuild does not keep it).
    fn torn(&self, id: u64) -> bool;
    /// The file `id` (`inode`, if the mount knows it) is current on branch `n`, being rebuilt;
    /// `part` is its part there, opened for the handles open on it.
    fn join(&self, n: usize, id: u64, inode: Option<&Arc<Inode>>, part: Option<OwnedFd>);
    /// Holds off every request while the guard lives (none is under way once it is given).
    fn quiesce(&self) -> parking_lot::RwLockWriteGuard<'_, ()>;
    /// The counts shown in `.raif` while the rebuild runs.
    fn meter(&self) -> Arc<Meter>;
    /// Writes back every checksum attribute the mount holds changed (with no request under
    /// way): the rebuild reads them from the branches, and verifies what it reads against
    /// them.
    fn settle_sums(&self);
    /// The mount is stopping: the rebuild gives up (and resumes at the next mount's command).
    fn stopping(&self) -> bool;
}
/// What a rebuild did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tally {
    /// Directories made or brought up to date.
    pub dirs: u64,
    /// Regular files whose part was written.
    pub files: u64,
    /// Regular files whose part was current already.
    pub kept: u64,
    /// Bytes of parts written.
    pub bytes: u64,
    /// Further names of files met before (hard links).
    pub links: u64,
    /// Entries removed from the target (removed from the volume while it was away).
    pub removed: u64,
    /// Files whose part could not be restored (path and level).
    pub lost: Vec<String>,
}

/// Granularity at which a rebuilt part is left sparse: blocks of zeros this long are not written.
const HOLE_BLOCK: usize = 4096;

/// One pass of a rebuild of branch `n` over the tree: the walk's visitor.
pub struct Rebuilder {
    /// Each branch's sum directory, the target's included.
    sum_dirs: Vec<Option<OwnedFd>>,
    /// The same without the target's.
    src_sum_dirs: Vec<Option<OwnedFd>>,
    n: usize,
    /// Parts already on the target at the file's generation are current.
    trust: bool,
    sources: u64,
    newdir: PathBuf,
    /// Hard links met: (device, inode) on the reference → path from the volume root.
    links: HashMap<(u64, u64), PathBuf>,
    pub(super) t: Tally,
    pub(super) progress: Progress,
    /// Regular files gone through (for the progress bar).
    done: u64,
    /// Rebuilding while mounted: the mount's state of the files.
    live: Option<Arc<dyn Mounted>>,
}

impl Rebuilder {
    /// A pass rebuilding branch `n` from the branches of `sources` (`dirs`: every branch's
    /// root, the target's included, as for [`crate::offline::walk`]) onto `newdir` (the
    /// target's path); `trust`: parts already on the target at their file's generation are
    /// current. `live`: the mount, rebuilding while mounted.
    pub fn new(
        dirs: &[Option<OwnedFd>],
        n: usize,
        trust: bool,
        sources: u64,
        newdir: &Path,
        progress: Progress,
        live: Option<Arc<dyn Mounted>>,
    ) -> Rebuilder {
        let sum_dirs = crate::sums::open_dirs(dirs, true);
        // The sources' blocks are verified as they are read, not against the sums kept on the
        // target (rebuilt after).
        let src_sum_dirs = sum_dirs
            .iter()
            .enumerate()
            .map(|(b, d)| (b != n).then(|| d.as_ref()?.try_clone().ok()).flatten())
            .collect();
        Rebuilder {
            sum_dirs,
            src_sum_dirs,
            n,
            trust,
            sources,
            newdir: newdir.to_path_buf(),
            links: HashMap::new(),
            t: Tally::default(),
            progress,
            done: 0,
            live,
        }
    }

    /// Makes the entry `e` on the target (its directory first, on the way down).
    pub fn visit(&mut self, e: &Entry) -> io::Result<()> {
        let Some(tdir) = e.dirs[self.n].as_ref() else {
            return Ok(()); // its directory could not be made
        };
        let tdir = tdir.as_fd();
        let kind = e.st.mode & libc::S_IFMT;
        let existing = stat_opt(tdir, e.name)?;
        if let Some(x) = existing {
            if x.mode & libc::S_IFMT != kind {
                remove_tree(tdir, e.name)?;
                self.t.removed += 1;
            }
        }
        let existing = stat_opt(tdir, e.name)?;
        match kind {
            libc::S_IFDIR => {
                if existing.is_none() {
                    sys::mkdirat(tdir, e.name, e.st.mode & 0o7777)?;
                }
                let rdir = reference_dir(e, self.sources);
                if let Some(rec) = rdir.and_then(|d| record(d, e.name)) {
                    sys::setxattr_at(
                        tdir,
                        e.name,
                        OsStr::new(crate::layout::XATTR),
                        rec.encode().as_bytes(),
                        0,
                    )?;
                }
                self.t.dirs += 1;
            }
            _ if self.link_again(e, tdir, existing.is_some())? => {}
            libc::S_IFREG => {
                self.file(e, tdir, existing.is_some())?;
                self.done += 1;
                self.progress.file_done(self.done);
            }
            libc::S_IFLNK => {
                let rdir = reference_dir(e, self.sources).expect("reference");
                let o = sys::openat(rdir, e.name, libc::O_PATH | libc::O_NOFOLLOW, 0)?;
                let mut buf = vec![0u8; sys::PATH_MAX];
                let len = sys::readlink_fd(o.as_fd(), &mut buf)?;
                if existing.is_some() {
                    sys::unlinkat(tdir, e.name, false)?;
                }
                sys::symlinkat(&buf[..len], tdir, e.name)?;
                copy_other_id(rdir, tdir, e.name)?;
                let t = object(tdir, e.name)?;
                copy_attrs(t.as_fd(), &e.st, None, true)?;
                self.remember_link(e);
            }
            _ => {
                if existing.is_none() {
                    sys::mknodat(tdir, e.name, e.st.mode, e.st.rdev as u64)?;
                }
                let rdir = reference_dir(e, self.sources).expect("reference");
                copy_other_id(rdir, tdir, e.name)?;
                let t = object(tdir, e.name)?;
                let r = object(rdir, e.name)?;
                copy_attrs(t.as_fd(), &e.st, Some(r.as_fd()), true)?;
                self.remember_link(e);
            }
        }
        Ok(())
    }

    /// Recomputes, from the parts as they now are, the checksums kept on the target (those
    /// of the part before it) and, with `own`, those of the target's part (kept on the next
    /// branch).
    fn refresh_sums(&self, e: &Entry, meta: &FileMeta, own: bool) -> io::Result<()> {
        let l = &meta.layout;
        if !crate::sums::covered(l) {
            return Ok(());
        }
        let w = l.width as usize;
        let all = AdminParts::open(e.dirs, e.name, self.sources | 1 << self.n, libc::O_RDONLY)
            .with_sums(&self.sum_dirs, meta.id, l, true, true);
        let size = if l.level.striped() {
            meta.size
        } else {
            all.fds[self.n]
                .as_ref()
                .and_then(|fd| sys::fstat(fd.as_fd()).ok())
                .map_or(0, |st| st.size)
        };
        let prev = (self.n + w - 1) % w;
        for b in [own.then_some(self.n), Some(prev)].into_iter().flatten() {
            if l.holds(b) && all.fds[b].is_some() && all.has_sums(b) {
                all.sums_truncate(b, 0)?;
                crate::sums::resum(&all, b, 0, l.part_size(b, size))?;
            }
        }
        Ok(())
    }

    /// Copies the directory `e`'s attributes onto the target, on the way up (after its
    /// entries changed its times).
    pub fn leave(&mut self, e: &Entry) -> io::Result<()> {
        if let Some(tdir) = e.dirs[self.n].as_ref() {
            let t = sys::openat(
                tdir.as_fd(),
                e.name,
                libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
                0,
            )?;
            let r = object(reference_dir(e, self.sources).expect("reference"), e.name)?;
            copy_attrs(t.as_fd(), &e.st, Some(r.as_fd()), true)?;
        }
        Ok(())
    }

    fn file(&mut self, e: &Entry, tdir: BorrowedFd, exists: bool) -> io::Result<()> {
        let n = self.n;
        let rdir = reference_dir(e, self.sources).expect("reference");
        let Some((mut meta, behind)) = source_record(e, self.sources) else {
            log::warn!("{}: no RAIF record; skipped", e.path.display());
            return Ok(());
        };
        if behind != 0 {
            // A kill between the parts' writes of a raised generation: the sources agree
            // before anything is copied from them.
            log::warn!(
                "{}: the record's generation {} had not reached every branch: recorded there",
                e.path.display(),
                meta.generation
            );
            let parts = AdminParts::open(e.dirs, e.name, behind, libc::O_RDONLY);
            for fd in parts.fds.iter().flatten() {
                write_record(fd.as_fd(), &Meta::File(meta))?;
            }
        }
        let inode = self.live.as_ref().and_then(|l| l.file(meta.id));
        if let Some(f) = inode.as_ref().and_then(|i| i.file.as_ref()) {
            // The mount's state is ahead of the record written at close.
            meta = f.meta();
        }
        if let Some(live) = &self.live {
            if live.branches().is_joined(meta.id) {
                // Rebuilt by an earlier pass, and written since wherever the mount wrote it.
                if exists {
                    let t = object(tdir, e.name)?;
                    copy_attrs(t.as_fd(), &e.st, Some(object(rdir, e.name)?.as_fd()), true)?;
                }
                self.t.kept += 1;
                self.remember_link(e);
                return Ok(());
            }
        }
        let torn = self.live.as_ref().is_some_and(|l| l.torn(meta.id));
        if exists && self.trust && !torn {
            if let Some(Meta::File(have)) = record(tdir, e.name) {
                if have.id == meta.id && have.generation == meta.generation {
                    // The data is current; owner, mode, times and attributes may not be, nor
                    // the checksums kept there of the part before it.
                    let t = object(tdir, e.name)?;
                    copy_attrs(t.as_fd(), &e.st, Some(object(rdir, e.name)?.as_fd()), true)?;
                    self.settle_sums(e, &meta, false, inode.as_ref())?;
                    self.t.kept += 1;
                    self.remember_link(e);
                    self.joined(e, tdir, &meta, inode.as_ref())?;
                    return Ok(());
                }
            }
        }
        let l = meta.layout;
        let parts = AdminParts::open(e.dirs, e.name, self.sources, libc::O_RDONLY).with_sums(
            &self.src_sum_dirs,
            meta.id,
            &l,
            false,
            false,
        );
        parts.stale.set(meta.parity_stale);
        let size = if l.level.striped() {
            meta.size
        } else {
            (0..l.width as usize)
                .filter(|&b| l.holds(b) && parts.fds[b].is_some())
                .find_map(|b| sys::fstat(parts.fds[b].as_ref()?.as_fd()).ok())
                .map_or(0, |st| st.size)
        };
        let out = sys::openat(
            tdir,
            e.name,
            libc::O_CREAT | libc::O_TRUNC | libc::O_WRONLY | libc::O_NOFOLLOW,
            e.st.mode & 0o7777,
        )?;
        let mut written = 0u64;
        let r = stripe::rebuild_part(&l, size, &parts, n, |off, bytes| {
            self.progress.bytes(bytes.len() as u64);
            // Blocks of zeros are left as holes, as on the other branches (the part is new).
            let mut at = 0;
            while at < bytes.len() {
                let block = |i: usize| {
                    let end = (i + HOLE_BLOCK - (off as usize + i) % HOLE_BLOCK).min(bytes.len());
                    (end, bytes[i..end].iter().all(|&b| b == 0))
                };
                let (mut end, zero) = block(at);
                if !zero {
                    while end < bytes.len() {
                        let (next, zero) = block(end);
                        if zero {
                            break;
                        }
                        end = next;
                    }
                    part_io::write_full(
                        &part_io::Plain(out.as_fd()),
                        0,
                        &bytes[at..end],
                        off + at as u64,
                    )?;
                    written += (end - at) as u64;
                }
                at = end;
            }
            Ok(())
        });
        match r {
            Ok(()) => {
                sys::ftruncate(out.as_fd(), l.part_size(n, size))?;
                let mut m = meta;
                m.size = size;
                // The record before the checksums, which follow it (the checksums of the part
                // before this one); not before the data: a resumed rebuild trusts a part whose
                // record is current.
                write_record(out.as_fd(), &Meta::File(meta))?;
                self.settle_sums(e, &m, true, inode.as_ref())?;
            }
            Err(err) if err.raw_os_error() == Some(libc::EIO) => {
                // Unrecoverable (RAIF0, or a second part missing): keep the file, mark the
                // part lost everywhere.
                sys::ftruncate(out.as_fd(), 0)?;
                meta.lost |= 1 << n;
                mark_lost(e, &Meta::File(meta), self.sources)?;
                if let Some(f) = inode.as_ref().and_then(|i| i.file.as_ref()) {
                    f.lost.fetch_or(1 << n, std::sync::atomic::Ordering::AcqRel);
                }
                self.t.lost.push(format!(
                    "{} (RAIF{} part on branch {n})",
                    e.path.display(),
                    l.level.num()
                ));
            }
            Err(err) => return Err(err),
        }
        write_record(out.as_fd(), &Meta::File(meta))?;
        copy_attrs(
            out.as_fd(),
            &e.st,
            Some(object(rdir, e.name)?.as_fd()),
            true,
        )?;
        self.t.files += 1;
        self.t.bytes += written;
        self.remember_link(e);
        self.joined(e, tdir, &meta, inode.as_ref())
    }

    /// The checksums of a file whose part was just rebuilt (`own`) or found current: as
    /// [`Rebuilder::refresh_sums`], except for a file open through the mount, whose handles
    /// keep the sum files they opened: the part's own (kept on the next branch) are
    /// recomputed where they exist, and those kept on the target are dropped (its handles
    /// never had them; the part before loses its checksums until `raif scrub
    /// --add-checksums`).
    fn settle_sums(
        &self,
        e: &Entry,
        meta: &FileMeta,
        own: bool,
        inode: Option<&Arc<Inode>>,
    ) -> io::Result<()> {
        if inode.is_none_or(|i| i.opens() == 0) {
            return self.refresh_sums(e, meta, own);
        }
        let l = &meta.layout;
        if !crate::sums::covered(l) {
            return Ok(());
        }
        let w = l.width as usize;
        let prev = (self.n + w - 1) % w;
        if l.holds(prev) {
            if let Some(d) = &self.sum_dirs[self.n] {
                let name = crate::sums::name(meta.id, prev);
                match sys::unlinkat(d.as_fd(), OsStr::new(&name), false) {
                    Err(e) if e.raw_os_error() != Some(libc::ENOENT) => return Err(e),
                    _ => {}
                }
            }
        }
        if own && l.holds(self.n) {
            let all = AdminParts::open(e.dirs, e.name, self.sources | 1 << self.n, libc::O_RDONLY)
                .with_sums(&self.sum_dirs, meta.id, l, true, false);
            if all.fds[self.n].is_some() && all.has_sums(self.n) {
                let size = if l.level.striped() {
                    meta.size
                } else {
                    sys::fstat(all.fds[self.n].as_ref().expect("part").as_fd())?.size
                };
                all.sums_truncate(self.n, 0)?;
                crate::sums::resum(&all, self.n, 0, l.part_size(self.n, size))?;
            }
        }
        Ok(())
    }

    /// Rebuilding while mounted: the file's part on the target is current from now on (the
    /// mount writes it; an open file's handles get it).
    fn joined(
        &self,
        e: &Entry,
        tdir: BorrowedFd,
        meta: &FileMeta,
        inode: Option<&Arc<Inode>>,
    ) -> io::Result<()> {
        let Some(live) = &self.live else {
            return Ok(());
        };
        let part = match inode {
            Some(i) if i.opens() > 0 && meta.lost & (1 << self.n) == 0 => Some(sys::openat(
                tdir,
                e.name,
                libc::O_RDWR | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                0,
            )?),
            _ => None,
        };
        live.join(self.n, meta.id, inode, part);
        Ok(())
    }

    /// A further name of an object met before (a hard link): linked to the name rebuilt
    /// then. Returns whether it was.
    fn link_again(&mut self, e: &Entry, tdir: BorrowedFd, exists: bool) -> io::Result<bool> {
        if e.st.nlink < 2 {
            return Ok(false);
        }
        let Some(first) = self.links.get(&(e.st.dev, e.st.ino)) else {
            return Ok(false);
        };
        if exists {
            sys::unlinkat(tdir, e.name, false)?;
        }
        let src = sys::open_path(&self.newdir.join(first), libc::O_PATH | libc::O_NOFOLLOW)?;
        sys::link_fd(src.as_fd(), tdir, e.name, true)?;
        self.t.links += 1;
        Ok(true)
    }

    fn remember_link(&mut self, e: &Entry) {
        if e.st.nlink > 1 {
            self.links
                .insert((e.st.dev, e.st.ino), e.path.to_path_buf());
        }
    }
}

/// The bytes a rebuild of branch `n` writes for the file `e` (for the progress bar, from the
/// records alone): its part there, unless that is already current (`trust`: a stale branch
/// keeps the parts it has at the file's generation) or it is a further name of a file met
/// before (`seen`).
pub(super) fn to_write(
    e: &Entry,
    n: usize,
    trust: bool,
    sources: u64,
    seen: &mut std::collections::HashSet<(u64, u64)>,
) -> u64 {
    if e.st.nlink > 1 && !seen.insert((e.st.dev, e.st.ino)) {
        return 0;
    }
    let Some((meta, _)) = source_record(e, sources) else {
        return 0;
    };
    let current = trust
        && e.dirs[n]
            .as_ref()
            .and_then(|d| record(d.as_fd(), e.name))
            .is_some_and(|m| {
                matches!(m, Meta::File(h) if h.id == meta.id && h.generation == meta.generation)
            });
    if current {
        return 0;
    }
    let l = meta.layout;
    let parts: Vec<_> = (0..l.width as usize)
        .filter(|&b| b != n && l.holds(b) && sources & (1 << b) != 0)
        .filter_map(|b| stat_opt(e.dirs[b].as_ref()?.as_fd(), e.name).ok().flatten())
        .collect();
    let size = if l.level.striped() {
        meta.size
    } else {
        parts.first().map_or(0, |st| st.size)
    };
    // Holes are skipped: no more than the other parts hold.
    let held = parts.iter().map(|st| st.blocks * 512).max().unwrap_or(0);
    l.part_size(n, size).min(held)
}

/// The record of the file `e` as the source branches hold it: the first one's, or where they
/// differ in the generation alone, the newest ([`newest_generation`]); and the sources whose
/// record is behind that one. `None` if the first source holds no file record.
pub(super) fn source_record(e: &Entry, sources: u64) -> Option<(FileMeta, u64)> {
    let Some(Meta::File(first)) = reference_dir(e, sources).and_then(|d| record(d, e.name)) else {
        return None;
    };
    let held: Vec<(usize, Option<Meta>)> = e
        .dirs
        .iter()
        .enumerate()
        .filter(|(b, _)| sources & (1 << b) != 0)
        .filter_map(|(b, d)| Some((b, record(d.as_ref()?.as_fd(), e.name))))
        .collect();
    let records: Vec<&Option<Meta>> = held.iter().map(|(_, r)| r).collect();
    let Some(meta) = newest_generation(&records) else {
        return Some((first, 0));
    };
    let behind = held
        .iter()
        .filter(|(_, r)| *r != Some(Meta::File(meta)))
        .fold(0, |acc, (b, _)| acc | 1 << b);
    Some((meta, behind))
}

/// The directory of entry `e` on the first source branch that has it.
pub(super) fn reference_dir<'a>(e: &'a Entry, sources: u64) -> Option<BorrowedFd<'a>> {
    e.dirs
        .iter()
        .enumerate()
        .find(|(b, d)| sources & (1 << b) != 0 && d.is_some())
        .and_then(|(_, d)| d.as_ref().map(|d| d.as_fd()))
}

/// Writes the record `meta` (with a lost part) onto the file's parts on `sources`.
fn mark_lost(e: &Entry, meta: &Meta, sources: u64) -> io::Result<()> {
    let parts = AdminParts::open(e.dirs, e.name, sources, libc::O_RDONLY);
    for fd in parts.fds.iter().flatten() {
        write_record(fd.as_fd(), meta)?;
    }
    Ok(())
}

/// Removes `name` in `dir`, a whole tree if it is a directory.
fn remove_tree(dir: BorrowedFd, name: &OsStr) -> io::Result<()> {
    let st = sys::statat(dir, name)?;
    if st.mode & libc::S_IFMT == libc::S_IFDIR {
        let d = sys::openat(
            dir,
            name,
            libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
            0,
        )?;
        for child in list(d.as_fd())? {
            remove_tree(d.as_fd(), &child)?;
        }
        sys::unlinkat(dir, name, true)
    } else {
        sys::unlinkat(dir, name, false)
    }
}

/// Removes from branch `n` what the reference branch does not have (removed while `n` was
/// away); returns how many entries.
pub(super) fn remove_extras(
    dirs: &[Option<std::os::fd::OwnedFd>],
    reference: usize,
    n: usize,
) -> io::Result<u64> {
    fn go(r: BorrowedFd, t: BorrowedFd, root: bool) -> io::Result<u64> {
        let mut removed = 0;
        for name in list(t)? {
            if root && crate::reserved::is_own_name(name.as_encoded_bytes()) {
                continue;
            }
            match stat_opt(r, &name)? {
                None => {
                    remove_tree(t, &name)?;
                    removed += 1;
                }
                Some(st) if st.mode & libc::S_IFMT == libc::S_IFDIR => {
                    let fl = libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW;
                    let rd = sys::openat(r, &name, fl, 0)?;
                    if let Ok(td) = sys::openat(t, &name, fl, 0) {
                        removed += go(rd.as_fd(), td.as_fd(), false)?;
                    }
                }
                Some(_) => {}
            }
        }
        Ok(removed)
    }
    let (Some(r), Some(t)) = (&dirs[reference], &dirs[n]) else {
        return Ok(0);
    };
    go(r.as_fd(), t.as_fd(), true)
}
