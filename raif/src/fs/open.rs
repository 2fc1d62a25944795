//! Open regular files: their handles, and the descriptors a request on one takes.
//!
//! A handle ([`OpenFile`]) holds no descriptor. The file's parts, and the sum files of the
//! parts that keep their checksums in one, are in the inode's slots (see [`crate::inode`]),
//! where the descriptor cache may close the least recently used while the file is open; a
//! request takes them from there ([`Raif::fds`]), opening by name again those that went. So a
//! client may hold far more files open than the daemon may hold descriptors: the daemon's
//! descriptors stay within the cache's capacity, and what a request needs beyond that it opens
//! again (or answers `EMFILE`, to the caller, when even that fails). Before an open file loses
//! a name (an unlink, a rename over it), its descriptors are opened and kept until the last
//! release ([`Raif::keep_open`]), since its name may no longer lead to it.

use std::io;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use fsprof_fuse::filesystem::Request;
use fsprof_fuse::protocol::errno::err;
use fsprof_fuse::protocol::ops::Sys;
use fsprof_fuse::sys;
use fsprof_fuse::toolkit::fdcache::Fd;

use super::{Raif, SumFiles, release_sums, trouble};
use crate::inode::{BranchFds, FileState, Inode};
use crate::layout::{Layout, MAX_BRANCHES};
use crate::part_io::own_limits;
use crate::sums;

/// An open regular file.
pub struct OpenFile {
    /// The file.
    pub inode: Arc<Inode>,
    /// Opened with `O_APPEND`: writes go to the logical end.
    pub append: bool,
    /// The parts (by branch) whose checksums this handle keeps ([`Raif::open_sums`]).
    pub sums: u64,
    /// [`crate::branch::BranchSet::swaps`] before it was opened.
    pub opened: u64,
    /// Opened with `O_DIRECT`: the alignment of offset and length its reads and writes need
    /// ([`direct_align`]); 0 for none.
    pub direct: u32,
}

impl OpenFile {
    /// `EINVAL` for a read or write of `len` bytes at `off` that its parts' file systems
    /// would refuse under `O_DIRECT` (the parts are not opened with it: RAIF's own reads and
    /// writes of parity and checksums are not aligned).
    #[inline]
    pub fn check_direct(&self, off: u64, len: usize) -> io::Result<()> {
        let a = self.direct as u64;
        if a > 1 && (off % a != 0 || len as u64 % a != 0) {
            return Err(err(libc::EINVAL));
        }
        Ok(())
    }
}

/// The alignment of offset and length that `O_DIRECT` reads and writes of a file opened with
/// `flags` need (none without `O_DIRECT`): the strictest its parts' file systems say
/// (`STATX_DIOALIGN`; one that says nothing, as tmpfs, takes any). `EINVAL` where one takes
/// no direct I/O, as its `open` would be refused.
pub(crate) fn direct_align(flags: i32, parts: &[Option<Fd>]) -> io::Result<u32> {
    if flags & libc::O_DIRECT == 0 {
        return Ok(0);
    }
    let mut a = 0;
    for fd in parts.iter().flatten() {
        match sys::dio_offset_align(fd.as_fd()) {
            Ok(Some(0)) => return Err(err(libc::EINVAL)),
            Ok(Some(x)) => a = a.max(x),
            _ => {}
        }
    }
    Ok(a)
}

/// The descriptors one request on an open file uses, by branch: its parts, and where their
/// checksums are kept (the sum file, or the home part when they are in its attribute). On
/// the stack: a request allocates nothing for them.
pub(crate) struct Fds {
    parts: [Option<Fd>; MAX_BRANCHES],
    sums: [Option<Fd>; MAX_BRANCHES],
    n: usize,
}

impl Fds {
    fn new(n: usize) -> Fds {
        Fds {
            parts: std::array::from_fn(|_| None),
            sums: std::array::from_fn(|_| None),
            n,
        }
    }

    /// The parts' descriptors (`None`: no part there, or not usable).
    #[inline]
    pub(crate) fn parts(&self) -> &[Option<Fd>] {
        &self.parts[..self.n]
    }

    /// Where each part's checksums are kept (`None`: not by this handle).
    #[inline]
    pub(crate) fn sums(&self) -> &[Option<Fd>] {
        &self.sums[..self.n]
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

/// The state of the regular file `inode`; `EISDIR` for a directory, `EIO` for another object.
pub(super) fn file_of(inode: &Inode) -> io::Result<&FileState> {
    inode.file.as_ref().ok_or_else(|| {
        err(if inode.is_dir() {
            libc::EISDIR
        } else {
            libc::EIO
        })
    })
}

/// Whether branch `b` has something of a file of layout `l` to open: a part, or (a RAIF1
/// file with fewer copies than branches) the empty file whose attribute keeps the checksums
/// of the part before it.
fn has_file(l: &Layout, b: usize) -> bool {
    l.holds(b) || sums::keeps_for(l, b).is_some()
}

impl Raif {
    /// The descriptors a request on the open file `h` uses: the inode's cached ones, the
    /// parts and sum files the cache let go opened again. The daemon's own limits
    /// ([`own_limits`]) are the request's error.
    pub(crate) fn fds(&self, h: &OpenFile, req: &Request) -> io::Result<Fds> {
        let inode = &h.inode;
        let file = file_of(inode)?;
        let n = self.bs.len();
        let mut out = Fds::new(n);
        self.fill_parts(inode, file, req, &mut out.parts[..n], true)?;
        let w = file.layout.width as usize;
        let mut keep = h.sums;
        if file.swapped.load(Ordering::Acquire) > h.opened {
            // A rebuild while mounted replaced a part since the handle was opened: no
            // checksums on the rebuilt branch (they were dropped, see `crate::online`).
            let joined = file.joined.load(Ordering::Acquire);
            for b in 0..n {
                if sums::home(b, w).is_some_and(|hb| joined & (1 << hb) != 0) {
                    keep &= !(1 << b);
                }
            }
        }
        let Fds { parts, sums, .. } = &mut out;
        fill_sums(file, &parts[..n], keep, &mut sums[..n]);
        Ok(out)
    }

    /// Where the checksums of the parts of `file` (its parts `parts`) are kept, for an
    /// operation without a handle ([`Raif::open_sums`] says which parts keep them, `gain`
    /// whether one that has none gains them).
    pub(crate) fn sums_of(
        &self,
        inode: &Arc<Inode>,
        file: &FileState,
        parts: &[Option<Fd>],
        req: &Request,
        gain: Gain,
    ) -> io::Result<BranchFds> {
        let joined = file.joined.load(Ordering::Acquire);
        let keep = self.open_sums(inode, file, parts, joined, req, gain)?;
        let mut out: BranchFds = (0..self.bs.len()).map(|_| None).collect();
        fill_sums(file, parts, keep, &mut out);
        Ok(out)
    }

    /// The overflow file of branch `b`'s part of `file`, on branch `hb`: cached, or opened again
    /// (`None` where it is gone or its branch is in trouble: the part's checksums go unkept).
    fn sum_file(
        &self,
        inode: &Arc<Inode>,
        file: &FileState,
        hb: usize,
        b: usize,
        req: &Request,
    ) -> io::Result<Option<Fd>> {
        if let Some(fd) = inode.cached_sum(b) {
            return Ok(Some(fd));
        }
        match self
            .sum_files(inode)
            .open(&self.bs, req, hb, file.id, b, false)
        {
            Ok(fd) => Ok(Some(fd)),
            Err(e) if own_limits(&e) => Err(e),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
            Err(e) => {
                self.sums_trouble(hb, &e);
                Ok(None)
            }
        }
    }

    /// Descriptors of the parts of `inode` on every branch holding one that is usable for it
    /// (cached ones, else opened by name), for an operation without a handle, which lets them
    /// go as its calls ([`crate::branch::BranchSet::release_all`]).
    pub(crate) fn parts_of(
        &self,
        inode: &Arc<Inode>,
        file: &FileState,
        req: &Request,
    ) -> io::Result<BranchFds> {
        let mut fds: BranchFds = (0..self.bs.len()).map(|_| None).collect();
        match self.fill_parts(inode, file, req, &mut fds, false) {
            Ok(()) => Ok(fds),
            Err(e) => {
                // Those opened for this request alone: closed as its calls.
                self.bs.release_all(req, fds.into_vec());
                Err(e)
            }
        }
    }

    /// Puts in `out` the descriptors of the parts of `inode` on every branch holding one that
    /// is usable for it: an open file's cached ones, else opened by name (and, with `cache`,
    /// cached in its slots). `EIO` if no part can be had; the daemon's own limits are the
    /// caller's error.
    pub(crate) fn fill_parts(
        &self,
        inode: &Arc<Inode>,
        file: &FileState,
        req: &Request,
        out: &mut [Option<Fd>],
        cache: bool,
    ) -> io::Result<()> {
        let down = file.down(&self.bs);
        let l = &file.layout;
        let mut parent = None;
        for (b, slot) in out.iter_mut().enumerate() {
            if !has_file(l, b) || down & (1 << b) != 0 {
                continue;
            }
            if let Some(fd) = inode.open_part(b) {
                *slot = Some(fd);
                continue;
            }
            if parent.is_none() {
                parent = Some(
                    inode
                        .with_loc(|p, _| p.cloned())
                        .ok_or_else(|| err(libc::EIO))?,
                );
            }
            let parent = parent.as_ref().expect("set above");
            *slot = self.open_part(inode, file, parent, b, req, cache)?;
        }
        if !out
            .iter()
            .enumerate()
            .any(|(b, f)| f.is_some() && l.holds(b))
        {
            return Err(err(libc::EIO));
        }
        Ok(())
    }

    /// Opens the part of `inode` (in `parent`) on branch `b` by name; `None` where it is
    /// missing or its branch in trouble (both recorded), or where it only keeps checksums and
    /// cannot be had (they go unkept).
    fn open_part(
        &self,
        inode: &Arc<Inode>,
        file: &FileState,
        parent: &Arc<Inode>,
        b: usize,
        req: &Request,
        cache: bool,
    ) -> io::Result<Option<Fd>> {
        let br = self.bs.get(b);
        // Out of descriptors: give back cached ones and try once more.
        let r = self.inodes.retry_emfile(|| {
            self.dir_fd(parent, b, req).and_then(|pfd| {
                inode.with_loc(|_, name| {
                    br.call(req, Sys::Openat, || {
                        sys::openat(pfd.as_fd(), name, libc::O_RDWR | libc::O_NOFOLLOW, 0)
                    })
                })
            })
        });
        let home_only = !file.layout.holds(b);
        match r {
            Ok(fd) if cache => Ok(Some(self.inodes.cache_part(
                inode,
                b,
                Arc::new(fd),
                |c, f| self.bs.release(req, c, f),
            ))),
            Ok(fd) => Ok(Some(Arc::new(fd))),
            Err(e) if own_limits(&e) => Err(e),
            // Its checksums go unkept: not a part missing.
            Err(_) if home_only => Ok(None),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                if self.bs.check(b) {
                    // The branch is fine but the part is gone: serve without it.
                    log::warn!(
                        "{}: part missing on branch {b}; served without it until rebuilt",
                        String::from_utf8_lossy(&inode.path())
                    );
                    file.stale.fetch_or(1 << b, Ordering::AcqRel);
                }
                Ok(None)
            }
            Err(e) if trouble(&e) => {
                self.bs.error(b, &e, "open");
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// The open file `inode` is about to lose a name (unlinked, or renamed over): its parts,
    /// and its sum and overflow files, are opened where the cache let them go and kept until
    /// its last release, for its handles. Nothing for a file that is not open.
    pub(crate) fn keep_open(&self, inode: &Arc<Inode>, req: &Request) -> io::Result<()> {
        let Some(file) = inode.file.as_ref().filter(|_| inode.opens() > 0) else {
            return Ok(());
        };
        // Pinned first: nothing filled from now on is evicted.
        self.inodes.keep_parts(inode);
        let mut parts: [Option<Fd>; MAX_BRANCHES] = std::array::from_fn(|_| None);
        self.fill_parts(inode, file, req, &mut parts[..self.bs.len()], true)?;
        let l = &file.layout;
        for (b, hb, _) in self.sum_homes(l, self.bs.sums_down(file.joined.load(Ordering::Acquire)))
        {
            // Only parts that keep checksums may have an overflow file.
            let x = 1u64 << b;
            let xsums = file.xsums.load(Ordering::Acquire);
            if xsums & x == 0 || file.xover.load(Ordering::Acquire) & x == 0 {
                continue;
            }
            self.sum_file(inode, file, hb, b, req)?;
        }
        Ok(())
    }

    /// Closes an open file's handle `h` for `req`: at the last, its parts leave the inode's
    /// slots (a part's close is counted on its branch) and what it cached of its checksum
    /// attributes is written back and let go.
    pub(crate) fn close(&self, h: &OpenFile, req: &Request) {
        let Some(taken) = self.inodes.close_file(&h.inode) else {
            return;
        };
        if let Some(f) = &h.inode.file {
            // Here, not at each close(2) (a flush), which the caller waits for: the kernel
            // sends the release in the background.
            release_sums(&self.bs, f, Some(req));
        }
        self.bs.release_all(req, taken.into_vec());
    }

    /// Where the checksums of the parts of regular file `inode` are kept ([`crate::sums`]):
    /// the parts (by branch) that keep them, for a new handle. They are in the record attribute
    /// of the home part (in `fds`, the file's parts), the entries past its room in an overflow
    /// file on the home branch (opened when needed, and cached in the inode's slots).
    /// `gain` says whether a part that has none gains them (in the attribute; with checksums
    /// on). Not kept: a file made without checksums, the home branch failed or stale. The
    /// daemon's own limits are the open's error (a handle that kept no checksums would let
    /// them go stale).
    pub(crate) fn open_sums(
        &self,
        inode: &Arc<Inode>,
        file: &FileState,
        fds: &[Option<Fd>],
        joined: u64,
        req: &Request,
        gain: Gain,
    ) -> io::Result<u64> {
        let mut out = 0u64;
        // A stale branch's sums may have missed changes, as its parts may.
        let unusable = self.bs.sums_down(joined);
        let new = gain == Gain::New;
        let gain = if self.cfg.checksums { gain } else { Gain::No };
        for (b, h, _) in self.sum_homes(&file.layout, unusable) {
            let bit = 1u64 << b;
            let home = fds.get(h).and_then(Option::as_ref);
            if file.xsums.load(Ordering::Acquire) & bit != 0 {
                if home.is_some() {
                    out |= bit;
                }
                continue;
            }
            if inode.cached_sum(b).is_some() {
                out |= bit;
                continue;
            }
            let br = self.bs.get(h);
            // A new file has neither an attribute nor a sum file, and one found to have none
            // gained none since: nothing to ask.
            let none = new || file.sums_none.load(Ordering::Acquire) & bit != 0;
            if !none {
                // The home part's attributes say the part keeps its checksums there.
                if let Some(hf) = home {
                    let held = sums::held_by(hf.as_fd(), |g| br.call(req, Sys::Fgetxattr, g));
                    match held {
                        Ok(true) => {
                            // Whether it has an overflow file is not known.
                            file.xover.fetch_or(bit, Ordering::AcqRel);
                            file.xsums.fetch_or(bit, Ordering::AcqRel);
                            out |= bit;
                            continue;
                        }
                        Ok(false) => {}
                        Err(e) if own_limits(&e) => return Err(e),
                        Err(e) => {
                            self.sums_trouble(h, &e);
                            continue;
                        }
                    }
                }
            }
            if gain != Gain::No && home.is_some() {
                // Kept in the attribute from now on, written with the first entries (an
                // empty file that has none yet gains them again at its next open).
                file.xsums.fetch_or(bit, Ordering::AcqRel);
                out |= bit;
            } else if home.is_some() {
                file.sums_none.fetch_or(bit, Ordering::AcqRel);
            }
        }
        Ok(out)
    }

    /// An error where a part's checksums are kept (branch `h`).
    fn sums_trouble(&self, h: usize, e: &io::Error) {
        if trouble(e) {
            self.bs.error(h, e, "checksums");
        } else {
            log::warn!("branch {h}: cannot reach checksums: {e}");
        }
    }

    /// How [`super::MountParts`] reaches the overflow files of `inode`'s parts.
    #[inline]
    pub(crate) fn sum_files<'a>(&'a self, inode: &'a Arc<Inode>) -> SumFiles<'a> {
        SumFiles {
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
        l: &Layout,
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
}

/// Puts in `out` where the checksums of the parts in `keep` of `file` (its parts `parts`) are
/// kept: the home part, in whose record attribute they are.
fn fill_sums(file: &FileState, parts: &[Option<Fd>], keep: u64, out: &mut [Option<Fd>]) {
    let w = file.layout.width as usize;
    let xsums = file.xsums.load(Ordering::Acquire);
    for (b, slot) in out.iter_mut().enumerate() {
        let Some(hb) = sums::home(b, w).filter(|_| keep & (1 << b) != 0) else {
            continue;
        };
        if xsums & (1 << b) != 0 {
            *slot = parts[hb].clone();
        }
    }
}
