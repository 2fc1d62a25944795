//! What the admin commands ([`crate::admin`]) and the mount-time replay of the write-intent log
//! ([`crate::intent`]) share to work on a volume's branches without a mount: reading and
//! writing files' records, walking the tree of one branch with the other branches' directories
//! alongside ([`walk`]), opening a file's parts as a [`Parts`](crate::part_io::Parts)
//! ([`AdminParts`]), and copying an object's owner, mode, times and extended attributes from
//! one branch to another.

mod admin_io;

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use fsprof_fuse::sys::{self, Stat};

use crate::branch::BranchSet;
use crate::layout::{ATTR_MAX, FileMeta, META_MAX, Meta, XATTR, XATTR_OTHER, ours};

pub use admin_io::AdminParts;

/// The record of `name` in directory `dir`, if it has a valid one.
pub fn record(dir: BorrowedFd, name: &OsStr) -> Option<Meta> {
    let mut buf = [0u8; ATTR_MAX];
    let n = sys::getxattr_at(dir, name, OsStr::new(XATTR), &mut buf).ok()?;
    Meta::decode(&buf[..n])
}

/// Writes `meta` as the record of the open file `fd`, keeping the checksum entries that
/// follow the old one ([`crate::sums::with_record`]).
pub fn write_record(fd: BorrowedFd, meta: &Meta) -> io::Result<()> {
    crate::sums::with_record(
        |buf| sys::fgetxattr(fd, OsStr::new(XATTR), buf),
        |v| sys::fsetxattr(fd, OsStr::new(XATTR), v, 0),
        meta.encode().as_bytes(),
        crate::sums::After::Kept,
    )
}

/// The index of an item that a strict majority of `items` are equal to, if there is one (a
/// file's records, copies: what scrub and the mount take as right when they disagree).
pub fn majority<T: PartialEq>(items: &[T]) -> Option<usize> {
    (0..items.len()).find(|&i| 2 * items.iter().filter(|x| **x == items[i]).count() > items.len())
}

/// Of a file's records (those its parts hold): the one to take when they differ in the
/// generation alone, the highest. A generation is raised on the parts one after the other
/// before the change that raised it, so a crash in between leaves the parts that missed it
/// behind with data no newer than the others' (and a branch stale for the file must not pass
/// for current by agreeing with one of them). `None` unless every record is of one file (id,
/// layout, size, lost parts, parity) at some generation.
pub fn newest_generation(records: &[&Option<Meta>]) -> Option<FileMeta> {
    let mut files = records.iter().map(|r| match r {
        Some(Meta::File(m)) => Some(*m),
        _ => None,
    });
    let first = files.next()??;
    files.try_fold(first, |acc, m| {
        let m = m?;
        let same = FileMeta {
            generation: acc.generation,
            ..m
        };
        (same == acc).then_some(FileMeta {
            generation: acc.generation.max(m.generation),
            ..acc
        })
    })
}

/// The file record that decides among a file's records: the one a strict majority hold
/// ([`majority`]), or, without one, the newest where they differ in the generation alone
/// ([`newest_generation`]). `None` when the majority's record is not a file's, or nothing
/// decides. The mount's first lookup and scrub decide alike.
pub fn decided(records: &[&Option<Meta>]) -> Option<FileMeta> {
    match majority(records) {
        Some(i) => match records[i] {
            Some(Meta::File(m)) => Some(*m),
            _ => None,
        },
        None => newest_generation(records),
    }
}

/// `stat` of `name` in `dir`, `None` if it does not exist.
pub fn stat_opt(dir: BorrowedFd, name: &OsStr) -> io::Result<Option<Stat>> {
    match sys::statat(dir, name) {
        Ok(st) => Ok(Some(st)),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The names in the directory `dir` (an `O_PATH` descriptor), without `.` and `..`.
pub fn list(dir: BorrowedFd) -> io::Result<Vec<OsString>> {
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
pub struct Entry<'a> {
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
pub fn walk(
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

/// Reads a whole attribute value (or name list) with `get(buf)`, sizing the buffer first.
pub fn read_sized(mut get: impl FnMut(&mut [u8]) -> io::Result<usize>) -> io::Result<Vec<u8>> {
    loop {
        let len = get(&mut [])?;
        let mut buf = vec![0u8; len];
        match get(&mut buf) {
            Ok(n) => {
                buf.truncate(n);
                return Ok(buf);
            }
            // Grew in between: ask again.
            Err(e) if e.raw_os_error() == Some(libc::ERANGE) => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Descriptors of every branch root of `bs` in `mask`.
pub fn roots(bs: &BranchSet, mask: u64) -> Vec<Option<OwnedFd>> {
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
pub fn xattrs(fd: BorrowedFd) -> io::Result<Vec<(OsString, Vec<u8>)>> {
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
pub fn copy_xattrs(from: BorrowedFd, to: BorrowedFd) -> io::Result<Vec<OsString>> {
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
pub fn copy_attrs(
    to: BorrowedFd,
    st: &Stat,
    from: Option<BorrowedFd>,
    times: bool,
) -> io::Result<()> {
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
pub fn copy_other_id(from: BorrowedFd, to: BorrowedFd, name: &OsStr) -> io::Result<()> {
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
pub fn object(dir: BorrowedFd, name: &OsStr) -> io::Result<OwnedFd> {
    sys::openat(dir, name, libc::O_PATH | libc::O_NOFOLLOW, 0)
}
