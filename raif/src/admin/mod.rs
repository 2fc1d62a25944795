//! The admin commands. `raif rebuild` and `raif scrub` work offline (`raif rebuild --mounted`
//! asks a mount to rebuild while it serves, see [`crate::online`]): they refuse to run while
//! the volume is mounted, open the branches as the mount does (markers decide which are
//! usable), walk the tree of one usable branch and work on every branch's copy of each entry
//! through descriptors, with the data path of [`crate::stripe`]. `raif split` cuts a profile
//! into one file per layer, for comparing branch layers with `fsprof compare`.

mod mounted;
mod progress;
mod rebuild;
mod scrub;
mod split;

use std::cell::Cell;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use fsprof_fuse::lower::Lower;
use fsprof_fuse::mount::{SetupError, plain, setup_err};
use fsprof_fuse::sys::{self, Stat};

use crate::branch::BranchSet;
use crate::fs::xattr::{ours, read_sized};
use crate::layout::{ATTR_MAX, META_MAX, Meta, XATTR, XATTR_OTHER};
use crate::parts::{OutOfDate, Parts};

pub use mounted::rebuild_mounted as rebuild_while_mounted;
pub use rebuild::rebuild;
pub(crate) use rebuild::rebuild_mounted;
pub use scrub::scrub;
pub use split::split;

/// Opens the volume of `paths` for an admin command: refuses a mounted volume.
fn open_volume(paths: &[PathBuf]) -> Result<BranchSet, SetupError> {
    if let Some(mnt) = crate::app::mounted_over(paths) {
        return Err(setup_err(format!(
            "the volume is mounted at {mnt}: unmount it first"
        )));
    }
    let lowers = paths.iter().map(|_| Lower::default()).collect();
    BranchSet::open(paths, lowers, false).map_err(setup_err)
}

/// The record of `name` in directory `dir`, if it has a valid one.
pub(crate) fn record(dir: BorrowedFd, name: &OsStr) -> Option<Meta> {
    let mut buf = [0u8; ATTR_MAX];
    let n = sys::getxattr_at(dir, name, OsStr::new(XATTR), &mut buf).ok()?;
    Meta::decode(&buf[..n])
}

/// Writes `meta` as the record of the open file `fd`, keeping the checksum entries that
/// follow the old one ([`crate::sums::with_record`]).
pub(crate) fn write_record(fd: BorrowedFd, meta: &Meta) -> io::Result<()> {
    crate::sums::with_record(
        |buf| sys::fgetxattr(fd, OsStr::new(XATTR), buf),
        |v| sys::fsetxattr(fd, OsStr::new(XATTR), v, 0),
        meta.encode().as_bytes(),
        crate::sums::After::Kept,
    )
}

/// `stat` of `name` in `dir`, `None` if it does not exist.
fn stat_opt(dir: BorrowedFd, name: &OsStr) -> io::Result<Option<Stat>> {
    match sys::statat(dir, name) {
        Ok(st) => Ok(Some(st)),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The names in the directory `dir` (an `O_PATH` descriptor), without `.` and `..`.
fn list(dir: BorrowedFd) -> io::Result<Vec<OsString>> {
    let d = sys::reopen(dir, libc::O_RDONLY | libc::O_DIRECTORY)?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut names = Vec::new();
    loop {
        let n = sys::getdents64(d.as_fd(), &mut buf)?;
        if n == 0 {
            return Ok(names);
        }
        let mut pos = 0;
        while let Some((e, next)) = sys::parse_dirent(&buf[..n], pos) {
            if e.name != b"." && e.name != b".." {
                names.push(OsStr::from_bytes(e.name).to_os_string());
            }
            pos = next;
        }
    }
}

/// One entry met by [`walk`].
pub(crate) struct Entry<'a> {
    /// Path from the volume root.
    pub path: &'a Path,
    /// Name in its directory.
    pub name: &'a OsStr,
    /// Its directory on every branch (`None`: missing there, or branch not used).
    pub dirs: &'a [Option<OwnedFd>],
    /// `stat` on the reference branch.
    pub st: Stat,
}

/// Visits every entry of the tree of branch `reference` (parents before children, RAIF's own
/// files at the root left out): `visit` is called for each, and `leave` for each directory
/// after its children. The directory descriptors of other branches follow along where the
/// directory exists there (`visit` may create it).
pub(crate) fn walk(
    roots: &[Option<OwnedFd>],
    reference: usize,
    visit: &mut dyn FnMut(&Entry) -> io::Result<()>,
    leave: &mut dyn FnMut(&Entry) -> io::Result<()>,
) -> io::Result<()> {
    let dirs: Vec<Option<OwnedFd>> = roots
        .iter()
        .map(|r| r.as_ref().and_then(|fd| fd.try_clone().ok()))
        .collect();
    walk_dir(&dirs, reference, Path::new(""), true, visit, leave)
}

fn walk_dir(
    dirs: &[Option<OwnedFd>],
    reference: usize,
    path: &Path,
    root: bool,
    visit: &mut dyn FnMut(&Entry) -> io::Result<()>,
    leave: &mut dyn FnMut(&Entry) -> io::Result<()>,
) -> io::Result<()> {
    let rdir = dirs[reference]
        .as_ref()
        .expect("reference directory")
        .as_fd();
    let mut names = list(rdir)?;
    names.sort();
    for name in names {
        if root && crate::reserved::is_own_name(name.as_bytes()) {
            continue;
        }
        let Some(st) = stat_opt(rdir, &name)? else {
            continue;
        };
        let child = path.join(&name);
        let e = Entry {
            path: &child,
            name: &name,
            dirs,
            st,
        };
        visit(&e)?;
        if st.mode & libc::S_IFMT == libc::S_IFDIR {
            let sub: Vec<Option<OwnedFd>> = dirs
                .iter()
                .map(|d| {
                    d.as_ref().and_then(|d| {
                        sys::openat(
                            d.as_fd(),
                            &name,
                            libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
                            0,
                        )
                        .ok()
                    })
                })
                .collect();
            if sub[reference].is_some() {
                walk_dir(&sub, reference, &child, false, visit, leave)?;
            }
            leave(&e)?;
        }
    }
    Ok(())
}

/// A file's parts opened by an admin command; a branch that errs is just left out.
pub(crate) struct AdminParts {
    pub fds: Vec<Option<OwnedFd>>,
    pub down: Cell<u64>,
    /// The file's parity is out of date (its record says so): nothing is reconstructed from it.
    pub stale: Cell<bool>,
    /// The sum files of the parts, by the part's branch ([`AdminParts::with_sums`]).
    pub sums: Vec<Option<OwnedFd>>,
    /// Where each part's checksums live (its home branch).
    pub homes: Vec<Option<usize>>,
    /// The parts that keep their checksums in an attribute of their home part.
    pub xsums: u64,
    /// Of those, the parts whose attribute is one of its own ([`crate::sums::Held::Apart`]).
    xapart: u64,
    /// Their overflow files, where opened or made ([`crate::sums`]).
    over: Vec<std::cell::RefCell<Option<OwnedFd>>>,
    /// The home branches' sum directories, where overflow files are made (with `write`).
    over_dirs: Vec<Option<OwnedFd>>,
    /// The file's record id.
    id: u64,
}

impl AdminParts {
    /// Opens `name` in `dirs` on the branches of `mask` with `flags`.
    pub fn open(dirs: &[Option<OwnedFd>], name: &OsStr, mask: u64, flags: i32) -> AdminParts {
        let fds = dirs
            .iter()
            .enumerate()
            .map(|(b, d)| {
                let d = d.as_ref().filter(|_| mask & (1 << b) != 0)?;
                sys::openat(d.as_fd(), name, flags | libc::O_NOFOLLOW, 0).ok()
            })
            .collect();
        AdminParts {
            fds,
            down: Cell::new(0),
            stale: Cell::new(false),
            sums: Vec::new(),
            homes: Vec::new(),
            xsums: 0,
            xapart: 0,
            over: Vec::new(),
            over_dirs: Vec::new(),
            id: 0,
        }
    }

    /// Also finds where the parts of file `id` of layout `l` keep their checksums, in the sum
    /// directories `dirs` (by branch) and the attributes of the home parts (see
    /// [`crate::sums`]); read-write with `write`; with `create`, a part that keeps none gains
    /// them (in the attribute).
    pub fn with_sums(
        mut self,
        dirs: &[Option<OwnedFd>],
        id: u64,
        l: &crate::layout::Layout,
        write: bool,
        create: bool,
    ) -> AdminParts {
        let n = self.fds.len();
        if !crate::sums::covered(l) {
            return self;
        }
        self.id = id;
        self.homes = (0..n)
            .map(|b| crate::sums::home(b, l.width as usize).filter(|_| l.holds(b)))
            .collect();
        let fl = if write { libc::O_RDWR } else { libc::O_RDONLY } | libc::O_NOFOLLOW;
        let open = |h: usize, b: usize| {
            let d = dirs.get(h)?.as_ref()?;
            let name = crate::sums::name(id, b);
            sys::openat(d.as_fd(), OsStr::new(&name), fl, 0).ok()
        };
        self.sums = (0..n).map(|_| None).collect();
        self.over = (0..n).map(|_| Default::default()).collect();
        self.over_dirs = (0..n).map(|_| None).collect();
        for b in 0..n {
            let Some(h) = self.homes[b] else { continue };
            let home = self.fds.get(h).and_then(Option::as_ref);
            let held = home.and_then(|f| crate::sums::held_by(f.as_fd(), |g| g()).ok().flatten());
            if held == Some(crate::sums::Held::Apart) {
                self.xapart |= 1 << b;
            }
            let xattr = held.is_some();
            if !xattr {
                self.sums[b] = open(h, b);
            }
            if xattr || (create && home.is_some() && self.sums[b].is_none()) {
                self.xsums |= 1 << b;
                *self.over[b].get_mut() = open(h, b);
                if write {
                    self.over_dirs[b] = dirs
                        .get(h)
                        .and_then(Option::as_ref)
                        .and_then(|d| d.try_clone().ok());
                }
            }
        }
        self
    }

    /// Whether branch `b`'s part keeps checksums (in an attribute or a sum file), whatever
    /// the state of its home branch.
    pub fn keeps_sums(&self, b: usize) -> bool {
        self.xsums & (1 << b) != 0 || self.sums.get(b).is_some_and(Option::is_some)
    }

    fn sum_fd(&self, b: usize) -> io::Result<BorrowedFd<'_>> {
        self.sums
            .get(b)
            .and_then(Option::as_ref)
            .map(|f| f.as_fd())
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EIO))
    }

    fn fd(&self, b: usize) -> io::Result<BorrowedFd<'_>> {
        self.fds[b]
            .as_ref()
            .map(|f| f.as_fd())
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EIO))
    }
}

/// The calls on branch `b`'s checksum attribute and overflow file, for
/// [`crate::sums::Xattr`] (one thread per file: nothing to lock).
struct AdminXattr<'p>(&'p AdminParts, usize);

impl AdminXattr<'_> {
    fn home(&self) -> io::Result<BorrowedFd<'_>> {
        let h = self.0.homes.get(self.1).copied().flatten();
        self.0
            .fd(h.ok_or_else(|| io::Error::from_raw_os_error(libc::EIO))?)
    }
}

impl AdminXattr<'_> {
    fn how(&self) -> crate::sums::Held {
        if self.0.xapart & (1 << self.1) != 0 {
            crate::sums::Held::Apart
        } else {
            crate::sums::Held::InRecord
        }
    }
}

impl crate::sums::XattrIo for AdminXattr<'_> {
    fn get(&self, buf: &mut [u8]) -> io::Result<usize> {
        use crate::sums::{Held, XATTR_NAME, absent_is_empty, entries_in};
        let how = self.how();
        let name = OsStr::new(if how == Held::Apart {
            XATTR_NAME
        } else {
            XATTR
        });
        let mut v = [0u8; ATTR_MAX];
        let n = absent_is_empty(sys::fgetxattr(self.home()?, name, &mut v))?;
        let e = entries_in(&v[..n], self.0.id, how);
        buf[..e.len()].copy_from_slice(e);
        Ok(e.len())
    }
    fn set(&self, entries: &[u8]) -> io::Result<()> {
        use crate::sums::{APART_MAX, Held, XATTR_NAME, apart_value, with_entries};
        let fd = self.home()?;
        match self.how() {
            Held::InRecord => with_entries(
                |buf| sys::fgetxattr(fd, OsStr::new(XATTR), buf),
                |v| sys::fsetxattr(fd, OsStr::new(XATTR), v, 0),
                entries,
            ),
            Held::Apart => {
                let mut v = [0u8; APART_MAX];
                let n = apart_value(&mut v, self.0.id, entries);
                sys::fsetxattr(fd, OsStr::new(XATTR_NAME), &v[..n], 0)
            }
        }
    }
    fn locked<R>(&self, f: impl FnOnce() -> R) -> R {
        f()
    }
    fn over_pread(&self, buf: &mut [u8], off: u64) -> io::Result<usize> {
        match &*self.0.over[self.1].borrow() {
            Some(fd) => sys::pread(fd.as_fd(), buf, off),
            None => Ok(0),
        }
    }
    fn over_pwrite(&self, buf: &[u8], off: u64) -> io::Result<usize> {
        let mut over = self.0.over[self.1].borrow_mut();
        if over.is_none() {
            let dir = self.0.over_dirs[self.1]
                .as_ref()
                .ok_or_else(|| io::Error::from_raw_os_error(libc::EROFS))?;
            let name = crate::sums::name(self.0.id, self.1);
            let fl = libc::O_RDWR | libc::O_CREAT | libc::O_NOFOLLOW;
            *over = Some(sys::openat(dir.as_fd(), OsStr::new(&name), fl, 0o600)?);
        }
        sys::pwrite(over.as_ref().expect("opened").as_fd(), buf, off)
    }
    fn over_truncate(&self, len: u64) -> io::Result<()> {
        match &*self.0.over[self.1].borrow() {
            Some(fd) => sys::ftruncate(fd.as_fd(), len),
            None => Ok(()),
        }
    }
}

impl Parts for AdminParts {
    fn usable(&self, b: usize) -> bool {
        self.fds[b].is_some() && self.down.get() & (1 << b) == 0
    }
    fn pread(&self, b: usize, buf: &mut [u8], off: u64) -> io::Result<usize> {
        sys::pread(self.fd(b)?, buf, off)
    }
    fn pwrite(&self, b: usize, buf: &[u8], off: u64) -> io::Result<usize> {
        sys::pwrite(self.fd(b)?, buf, off)
    }
    fn truncate(&self, b: usize, len: u64) -> io::Result<()> {
        sys::ftruncate(self.fd(b)?, len)
    }
    fn failed(&self, b: usize, e: &io::Error, _missed: bool) -> bool {
        log::warn!("branch {b}: {}", plain(e));
        self.down.set(self.down.get() | 1 << b);
        true
    }
    fn out_of_date(&self, what: OutOfDate) {
        log::warn!("{what:?}: left out of date (no room to put it back)");
        match what {
            OutOfDate::Copy(b) => self.down.set(self.down.get() | 1 << b),
            OutOfDate::Parity => self.stale.set(true),
        }
    }
    fn parity_stale(&self) -> bool {
        self.stale.get()
    }
    fn has_sums(&self, b: usize) -> bool {
        self.keeps_sums(b)
            && self
                .homes
                .get(b)
                .copied()
                .flatten()
                .is_some_and(|h| self.down.get() & (1 << h) == 0)
    }
    fn sums_pread(&self, b: usize, buf: &mut [u8], off: u64) -> io::Result<usize> {
        if self.xsums & (1 << b) != 0 {
            return crate::sums::Xattr(&AdminXattr(self, b)).pread(buf, off);
        }
        sys::pread(self.sum_fd(b)?, buf, off)
    }
    fn sums_pwrite(&self, b: usize, buf: &[u8], off: u64) -> io::Result<usize> {
        if self.xsums & (1 << b) != 0 {
            return crate::sums::Xattr(&AdminXattr(self, b)).pwrite(buf, off);
        }
        sys::pwrite(self.sum_fd(b)?, buf, off)
    }
    fn sums_truncate(&self, b: usize, len: u64) -> io::Result<()> {
        if self.xsums & (1 << b) != 0 {
            return crate::sums::Xattr(&AdminXattr(self, b)).truncate(len);
        }
        sys::ftruncate(self.sum_fd(b)?, len)
    }
    fn next_data(&self, b: usize, off: u64) -> Option<u64> {
        let Ok(fd) = self.fd(b) else {
            return Some(off);
        };
        match sys::lseek(fd, off as i64, libc::SEEK_DATA) {
            Ok(d) => Some(d as u64),
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => None,
            Err(_) => Some(off), // no hole information: data may be anywhere
        }
    }
}

/// Descriptors of every branch root of `bs` in `mask`.
fn roots(bs: &BranchSet, mask: u64) -> Vec<Option<OwnedFd>> {
    bs.iter()
        .map(|b| {
            (mask & (1 << b.index) != 0)
                .then(|| b.root().ok().and_then(|r| r.try_clone().ok()))
                .flatten()
        })
        .collect()
}

/// The extended attributes of the object `fd` (`O_PATH` or open; not a symlink), RAIF's own
/// left out, sorted by name. None where the file system has none.
fn xattrs(fd: BorrowedFd) -> io::Result<Vec<(OsString, Vec<u8>)>> {
    let list = match read_sized(|buf| sys::listxattr_fd(fd, buf)) {
        Ok(l) => l,
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for name in list
        .split(|&c| c == 0)
        .filter(|n| !n.is_empty() && !ours(n))
    {
        let name = OsStr::from_bytes(name);
        match read_sized(|buf| sys::getxattr_fd(fd, name, buf)) {
            Ok(v) => out.push((name.to_os_string(), v)),
            // Removed since listed.
            Err(e) if e.raw_os_error() == Some(libc::ENODATA) => {}
            Err(e) => return Err(e),
        }
    }
    out.sort();
    Ok(out)
}

/// Gives the object `to` the extended attributes of `from` (RAIF's own aside: each object
/// keeps its record): sets what differs, removes what `from` lacks. POSIX ACLs are extended
/// attributes (`system.posix_acl_*`) and are copied with them. Returns the names that differed.
fn copy_xattrs(from: BorrowedFd, to: BorrowedFd) -> io::Result<Vec<OsString>> {
    let want = xattrs(from)?;
    let have = xattrs(to)?;
    let mut changed = Vec::new();
    for (name, _) in &have {
        if !want.iter().any(|(n, _)| n == name) {
            sys::removexattr_fd(to, name)?;
            changed.push(name.clone());
        }
    }
    for (name, v) in &want {
        if !have.iter().any(|(n, hv)| n == name && hv == v) {
            sys::setxattr_fd(to, name, v, 0)?;
            changed.push(name.clone());
        }
    }
    Ok(changed)
}

/// Copies owner, extended attributes (when `from`, the reference object, is given: not for
/// symlinks), mode and, with `times`, times of the reference (`st`, `from`) to the object
/// `to` (`O_PATH` or open). The owner goes first (a `chown` drops setuid bits and file
/// capabilities), the mode after the ACLs (so the ACL mask agrees with it).
fn copy_attrs(to: BorrowedFd, st: &Stat, from: Option<BorrowedFd>, times: bool) -> io::Result<()> {
    sys::chown_fd(to, st.uid, st.gid)?;
    if let Some(from) = from {
        copy_xattrs(from, to)?;
        sys::chmod_fd(to, st.mode & 0o7777)?;
    }
    if times {
        sys::utimens_fd(
            to,
            sys::SetTime::At(st.atime.0, st.atime.1),
            sys::SetTime::At(st.mtime.0, st.mtime.1),
        )?;
    }
    Ok(())
}

/// Gives the symlink or special file `name` in `to` the identity ([`XATTR_OTHER`]) it has in
/// `from`, if any.
fn copy_other_id(from: BorrowedFd, to: BorrowedFd, name: &OsStr) -> io::Result<()> {
    let mut buf = [0u8; META_MAX];
    match sys::getxattr_at(from, name, OsStr::new(XATTR_OTHER), &mut buf) {
        Ok(n) => sys::setxattr_at(to, name, OsStr::new(XATTR_OTHER), &buf[..n], 0),
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::ENODATA | libc::EOPNOTSUPP | libc::EPERM)
            ) =>
        {
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// An `O_PATH` descriptor of `name` in `dir` (not following a final symlink).
fn object(dir: BorrowedFd, name: &OsStr) -> io::Result<OwnedFd> {
    sys::openat(dir, name, libc::O_PATH | libc::O_NOFOLLOW, 0)
}
