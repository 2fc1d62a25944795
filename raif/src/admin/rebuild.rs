//! `raif rebuild --branches ... --replace N NEWDIR`: makes NEWDIR branch N of the volume.
//!
//! NEWDIR is either an empty directory (a replacement disk) or branch N itself, back after a
//! failure (stale), or an old copy of branch N (behind the volume's mount count: its files are
//! not trusted at all). The tree of a usable branch is walked; every directory, symlink and
//! special file is made on NEWDIR with the same owner, mode, times and extended attributes
//! (ACLs included); every regular file's part is computed from the other branches (a copy, or
//! the XOR of the rest of each row), except where a stale NEWDIR already has the part at the
//! file's current generation (its owner, mode, times and attributes are copied all the same:
//! cheap, and volumes written before metadata changes raised generations need it). Entries NEWDIR
//! has that the volume does not (removed while it was away) are removed. A RAIF0 part cannot
//! be recovered: the file is kept, the part marked lost in its record (reads of those ranges
//! fail with `EIO`), and listed. Last, NEWDIR gets branch N's marker and the other branches'
//! failure record forgets N.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use fsprof_fuse::daemon::mount::{SetupError, absolute_dir, plain, setup_err};
use fsprof_fuse::sys;

use super::open_volume;
use super::progress::{Meter, Progress};
use crate::branch::{BranchSet, State, check_branches};
use crate::inode::Inode;
use crate::layout::{FileMeta, Meta};
use crate::marker::Marker;
use crate::offline::{
    AdminParts, Entry, copy_attrs, copy_other_id, list, object, record, roots, stat_opt, walk,
    write_record,
};
use crate::parts::{self, Parts as _};
use crate::stripe;
use std::sync::Arc;

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

/// Granularity at which a rebuilt part is left sparse: blocks of zeros this long are not written.
const HOLE_BLOCK: usize = 4096;

/// What a rebuild did.
#[derive(Debug, Default)]
struct Tally {
    dirs: u64,
    files: u64,
    kept: u64,
    bytes: u64,
    links: u64,
    removed: u64,
    lost: Vec<String>,
}

/// Rebuilds branch `n` of the volume `branches` onto `newdir`; returns whether nothing was
/// lost.
pub fn rebuild(branches: &[PathBuf], n: usize, newdir: &Path) -> Result<bool, SetupError> {
    if n >= branches.len() {
        return Err(setup_err(format!(
            "--replace {n}: the volume has {} branches",
            branches.len()
        )));
    }
    let newdir = absolute_dir(newdir, "NEWDIR")?;
    let mut paths = branches.to_vec();
    paths[n] = newdir.clone();
    let paths = check_branches(&paths)?;
    let bs = open_volume(&paths)?;
    let target = bs.get(n);
    let dir_err = |e: io::Error| setup_err(format!("NEWDIR {}: {}", newdir.display(), plain(&e)));
    // What NEWDIR's files can be trusted for: a stale branch's files at the current generation
    // (it missed only changes that raised generations); nothing on a replacement or on an old
    // copy of the branch (failed at open: it missed whole mounts).
    let (fresh, trust) = match bs.state(n) {
        State::Failed => {
            let root =
                sys::open_path(&newdir, libc::O_PATH | libc::O_DIRECTORY).map_err(dir_err)?;
            let ours = Marker::read(root.as_fd())
                .ok()
                .flatten()
                .is_some_and(|m| m.volume == bs.volume() && m.index == n);
            // Empty but for RAIF's own files (a sum directory, say, left by the branch's
            // last life: its sum files are rewritten as the parts are rebuilt).
            let empty = std::fs::read_dir(&newdir)
                .map_err(dir_err)?
                .filter_map(Result::ok)
                .all(|e| {
                    let n = e.file_name();
                    let n = n.as_encoded_bytes();
                    crate::reserved::is_log_name(n) || crate::reserved::is_sum_dir(n)
                });
            if !empty && !ours {
                return Err(setup_err(format!(
                    "NEWDIR {}: not empty and not branch {n} of this volume",
                    newdir.display()
                )));
            }
            (empty, false)
        }
        State::Stale | State::Online | State::Rebuilding => (false, true),
    };
    let target_root = if bs.state(n) == State::Failed {
        sys::open_path(&newdir, libc::O_PATH | libc::O_DIRECTORY)
    } else {
        target.root().and_then(|r| r.try_clone())
    }
    .map_err(dir_err)?;
    let sources = bs.online_mask() & !(1 << n);
    if sources == 0 {
        return Err(setup_err("no other branch is online to rebuild from"));
    }
    let reference = sources.trailing_zeros() as usize;
    let mut dirs = roots(&bs, sources);
    dirs[n] = Some(target_root);
    let mut seen = std::collections::HashSet::new();
    let progress = Progress::start("rebuild", &dirs, reference, |e| {
        to_write(e, n, trust, sources, &mut seen)
    });
    let sum_dirs = crate::sums::open_dirs(&dirs, true);
    // The sources' blocks are verified as they are read, not against the sums kept on the
    // target (rebuilt after).
    let src_sum_dirs = sum_dirs
        .iter()
        .enumerate()
        .map(|(b, d)| (b != n).then(|| d.as_ref()?.try_clone().ok()).flatten())
        .collect();
    let r = std::cell::RefCell::new(Rebuilder {
        sum_dirs,
        src_sum_dirs,
        n,
        trust,
        sources,
        newdir: newdir.clone(),
        links: HashMap::new(),
        t: Tally::default(),
        progress,
        done: 0,
        live: None,
    });
    let mut visit = |e: &Entry| r.borrow_mut().visit(e);
    let mut leave = |e: &Entry| r.borrow_mut().leave(e);
    let walked = walk(&dirs, reference, &mut visit, &mut leave);
    r.borrow().progress.finish();
    walked.map_err(|e| setup_err(format!("rebuild stopped: {}", plain(&e))))?;
    let mut r = r.into_inner();
    if !fresh {
        r.t.removed += remove_extras(&dirs, reference, n).map_err(|e| {
            setup_err(format!(
                "removing what branch {n} should not have: {}",
                plain(&e)
            ))
        })?;
    }
    bs.record_rebuilt(n, dirs[n].as_ref().expect("target").as_fd(), true)
        .map_err(|e| setup_err(format!("writing markers: {}", plain(&e))))?;
    let t = &r.t;
    println!(
        "rebuilt branch {n} at {}: {} files ({} bytes written, {} already current), {} directories, {} hard links, {} stale entries removed",
        newdir.display(),
        t.files,
        t.bytes,
        t.kept,
        t.dirs,
        t.links,
        t.removed
    );
    for l in &t.lost {
        println!("lost: {l}");
    }
    if !t.lost.is_empty() {
        println!(
            "{} files could not be restored (their part on branch {n} reads as an I/O error)",
            t.lost.len()
        );
    }
    Ok(t.lost.is_empty())
}

struct Rebuilder {
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
    t: Tally,
    progress: Progress,
    /// Regular files gone through (for the progress bar).
    done: u64,
    /// Rebuilding while mounted: the mount's state of the files.
    live: Option<Arc<dyn Mounted>>,
}

impl Rebuilder {
    fn visit(&mut self, e: &Entry) -> io::Result<()> {
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

    fn leave(&mut self, e: &Entry) -> io::Result<()> {
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
        let Some(Meta::File(mut meta)) = record(rdir, e.name) else {
            log::warn!("{}: no RAIF record; skipped", e.path.display());
            return Ok(());
        };
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
                    parts::write_full(
                        &parts::Plain(out.as_fd()),
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
fn to_write(
    e: &Entry,
    n: usize,
    trust: bool,
    sources: u64,
    seen: &mut std::collections::HashSet<(u64, u64)>,
) -> u64 {
    if e.st.nlink > 1 && !seen.insert((e.st.dev, e.st.ino)) {
        return 0;
    }
    let Some(Meta::File(meta)) = reference_dir(e, sources).and_then(|d| record(d, e.name)) else {
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

/// The directory of entry `e` on the first source branch that has it.
fn reference_dir<'a>(e: &'a Entry, sources: u64) -> Option<BorrowedFd<'a>> {
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
fn remove_extras(
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

/// Passes of a rebuild while mounted with the gate taken per entry, before the last one, which
/// holds it for the whole walk.
const MOUNTED_PASSES: u64 = 4;

/// `Ok` while branch `n` is still being rebuilt (a write through the mount may have failed it
/// meanwhile: then it must not go online).
fn still_rebuilding(bs: &BranchSet, n: usize) -> io::Result<()> {
    if bs.state(n) == State::Rebuilding {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "branch {n} is {} now",
            bs.state(n).name()
        )))
    }
}

/// Whether `e` says the entry went away while the walk was at it (removed or renamed by the
/// mount meanwhile): the next pass sees the tree as it is then.
fn vanished(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOENT | libc::ESTALE | libc::ENOTEMPTY)
    )
}

/// Rebuilds branch `n` of a mounted volume onto `newdir` (already made branch `n`, rebuilding;
/// see [`crate::online`]): passes until one finds nothing to do, then a last one with no
/// request served, after which the branch is online. `trust`: parts already at their file's
/// generation are kept. Returns the summary.
pub fn rebuild_in_mount(
    live: &Arc<dyn Mounted>,
    n: usize,
    newdir: &Path,
    trust: bool,
) -> io::Result<String> {
    let bs = live.branches();
    let mut total = Tally::default();
    let (mut pass, mut ran) = (0, 0);
    loop {
        pass += 1;
        ran += 1;
        let sources = bs.online_mask() & !(1 << n);
        if sources == 0 {
            return Err(io::Error::other(
                "no other branch is online to rebuild from",
            ));
        }
        let reference = sources.trailing_zeros() as usize;
        let mut dirs = roots(bs, sources);
        dirs[n] = Some(bs.get(n).root()?.try_clone()?);
        let last = pass >= MOUNTED_PASSES;
        // The last pass: nothing changes between it and the branch going online.
        let whole = last.then(|| live.quiesce());
        let mut seen = std::collections::HashSet::new();
        let progress = Progress::shared(
            &dirs,
            reference,
            |e| {
                let joined = reference_dir(e, sources)
                    .and_then(|d| record(d, e.name))
                    .is_some_and(|m| matches!(m, Meta::File(f) if bs.is_joined(f.id)));
                if joined {
                    0
                } else {
                    to_write(e, n, trust, sources, &mut seen)
                }
            },
            live.meter(),
            ran,
        );
        let sum_dirs = crate::sums::open_dirs(&dirs, true);
        let src_sum_dirs = sum_dirs
            .iter()
            .enumerate()
            .map(|(b, d)| (b != n).then(|| d.as_ref()?.try_clone().ok()).flatten())
            .collect();
        let r = std::cell::RefCell::new(Rebuilder {
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
            live: Some(live.clone()),
        });
        let again = std::cell::Cell::new(false);
        let step = |f: &mut dyn FnMut(&mut Rebuilder) -> io::Result<()>| -> io::Result<()> {
            if live.stopping() {
                return Err(io::Error::other("the mount is stopping"));
            }
            let _g = whole.is_none().then(|| live.quiesce());
            still_rebuilding(bs, n)?;
            live.settle_sums();
            match f(&mut r.borrow_mut()) {
                Err(e) if vanished(&e) => {
                    again.set(true);
                    Ok(())
                }
                other => other,
            }
        };
        walk(
            &dirs,
            reference,
            &mut |e| step(&mut |r| r.visit(e)),
            &mut |e| step(&mut |r| r.leave(e)),
        )?;
        let removed = {
            let _g = whole.is_none().then(|| live.quiesce());
            remove_extras(&dirs, reference, n)?
        };
        let t = r.into_inner().t;
        let busy = t.files > 0 || removed > 0 || again.get();
        total.files += t.files;
        total.bytes += t.bytes;
        total.removed += removed;
        total.lost.extend(t.lost);
        if ran == 1 {
            total.kept = t.kept;
        }
        if last {
            total.dirs = t.dirs;
            total.links = t.links;
            still_rebuilding(bs, n)?;
            bs.finish_rebuild(n)?;
            drop(whole);
            break;
        }
        if !busy {
            // Quiet: the last pass only checks.
            pass = MOUNTED_PASSES - 1;
        }
    }
    let mut s = format!(
        "rebuilt branch {n} at {} while mounted in {ran} passes: {} files ({} bytes written, \
         {} already current), {} directories, {} hard links, {} stale entries removed; online",
        newdir.display(),
        total.files,
        total.bytes,
        total.kept,
        total.dirs,
        total.links,
        total.removed
    );
    if !total.lost.is_empty() {
        s.push_str(&format!(
            "; {} files could not be restored (their part on branch {n} reads as an I/O error): {}",
            total.lost.len(),
            total.lost.join(", ")
        ));
    }
    Ok(s)
}
