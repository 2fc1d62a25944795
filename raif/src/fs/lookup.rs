//! Finding objects on the branches: lookup, the identity (node id) and record of what a name
//! leads to, and a regular file's in-memory state (its size recovered after an unclean stop).

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use fsprof_fuse::filesystem::{Attr, Ino, Request};
use fsprof_fuse::protocol::errno::err;
use fsprof_fuse::protocol::ops::Sys;
use fsprof_fuse::sys::{self, Stat};
use fsprof_fuse::toolkit::fdcache::Fd;

use super::{Raif, spread};
use crate::inode::{FileState, Inode, new_id};
use crate::layout::{ATTR_MAX, FileMeta, META_MAX, Meta, XATTR, XATTR_OTHER};

impl Raif {
    pub(crate) fn do_lookup(&self, req: &Request, parent: Ino, name: &OsStr) -> io::Result<Attr> {
        if name == "." || name == ".." || self.hidden(parent.0, name.as_bytes()) {
            return Err(err(libc::ENOENT));
        }
        let p = self.inodes.get(parent.0)?;
        self.on_one(spread(name), self.readable(), "lookup", |b| {
            let pfd = self.dir_fd(&p, b, req)?;
            self.entry(&p, b, &pfd, name, req)
        })
    }

    /// The record of `name` in the directory `pfd` on branch `b`, if it has one.
    pub(crate) fn read_meta(
        &self,
        b: usize,
        pfd: &OwnedFd,
        name: &OsStr,
        req: &Request,
    ) -> io::Result<Option<Meta>> {
        let mut buf = [0u8; ATTR_MAX];
        let r = self.bs.get(b).call(req, Sys::Lgetxattr, || {
            sys::getxattr_at(pfd.as_fd(), name, OsStr::new(XATTR), &mut buf)
        });
        match r {
            Ok(n) => Ok(Meta::decode(&buf[..n])),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENODATA | libc::ERANGE)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The identity of the symlink or special file `name` in the directory `pfd` (`p`) on
    /// branch `b`, from its [`XATTR_OTHER`] attribute; one it lacks (made before RAIF gave them
    /// one) is given now, on every online branch. `None` where the attribute cannot be had (the
    /// daemon is not root, or the branch has no `trusted.*` attributes): the object then gets
    /// a counter id, stable while the kernel knows it.
    fn other_id(
        &self,
        p: &Arc<Inode>,
        b: usize,
        pfd: &OwnedFd,
        name: &OsStr,
        req: &Request,
    ) -> Option<u64> {
        if !self.privileged {
            return None;
        }
        match self.read_other(b, pfd, name, req) {
            Ok(Some(id)) => return Some(id),
            Ok(None) => {}
            Err(_) => return None,
        }
        let _g = self.id_lock.lock();
        let dirs: Vec<(usize, Arc<OwnedFd>)> = (0..self.bs.len())
            .filter(|&x| self.readable() & (1 << x) != 0)
            .filter_map(|x| Some((x, self.dir_fd(p, x, req).ok()?)))
            .collect();
        // One another lookup gave it meanwhile, or one branch has.
        let have: Vec<Option<u64>> = dirs
            .iter()
            .map(|(x, d)| self.read_other(*x, d, name, req).ok().flatten())
            .collect();
        let id = have.iter().flatten().next().copied().unwrap_or_else(new_id);
        let rec = Meta::Other(id).encode();
        for ((x, d), had) in dirs.iter().zip(&have) {
            if *had == Some(id) {
                continue;
            }
            let r = self.bs.get(*x).call(req, Sys::Lsetxattr, || {
                sys::setxattr_at(d.as_fd(), name, OsStr::new(XATTR_OTHER), rec.as_bytes(), 0)
            });
            if let Err(e) = r {
                log::debug!("branch {x}: cannot give a special file its identity: {e}");
                return None;
            }
        }
        Some(id)
    }

    /// The identity in `name`'s [`XATTR_OTHER`] attribute on branch `b`, `None` if it has
    /// none.
    fn read_other(
        &self,
        b: usize,
        pfd: &OwnedFd,
        name: &OsStr,
        req: &Request,
    ) -> io::Result<Option<u64>> {
        let mut buf = [0u8; META_MAX];
        let r = self.bs.get(b).call(req, Sys::Lgetxattr, || {
            sys::getxattr_at(pfd.as_fd(), name, OsStr::new(XATTR_OTHER), &mut buf)
        });
        match r {
            Ok(n) => Ok(match Meta::decode(&buf[..n]) {
                Some(Meta::Other(id)) => Some(id),
                _ => None,
            }),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENODATA | libc::ERANGE)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Stats `name` in `parent` on branch `b` (`pfd` is `parent` there), reads its record and
    /// finds or makes its inode, counting one kernel lookup: the entry's attributes.
    pub(crate) fn entry(
        &self,
        p: &Arc<Inode>,
        b: usize,
        pfd: &OwnedFd,
        name: &OsStr,
        req: &Request,
    ) -> io::Result<Attr> {
        let st = self
            .bs
            .get(b)
            .call(req, Sys::Statx, || sys::statat(pfd.as_fd(), name))?;
        let kind = st.mode & libc::S_IFMT;
        self.vote_kind(p, b, name, kind, req)?;
        let meta = match kind {
            libc::S_IFREG | libc::S_IFDIR => self.read_meta(b, pfd, name, req)?,
            _ => self.other_id(p, b, pfd, name, req).map(Meta::Other),
        };
        let id = meta.map(|m| m.id());
        if kind == libc::S_IFREG && meta.is_none() {
            log::warn!(
                "{}: no RAIF record on branch {b}: not served",
                String::from_utf8_lossy(name.as_bytes())
            );
        }
        // A new file's state needs branch I/O: get it before the table is locked.
        let state = match meta {
            Some(Meta::File(m)) if kind == libc::S_IFREG && self.inodes.get(m.id).is_err() => {
                let m = self.vote_record(p, b, name, m, req);
                Some(self.file_state(p, b, name, &m, &st, req))
            }
            _ => None,
        };
        let inode = self.inodes.lookup(p, name, kind, id, move || state);
        // Only the inode in the table is used by writers, and its lock excludes them: recover
        // there, once (a concurrent lookup may have published its own state first).
        if let Some(file) = inode.file.as_ref() {
            if file.recover.load(Ordering::Acquire) {
                let _excl = file.lock.write();
                if file.recover.swap(false, Ordering::AcqRel) {
                    self.recover_size(p, name, file, req);
                }
            }
        }
        Ok(self.attr(&inode, b, &st, |c| {
            let pfd = self.dir_fd(p, c, req)?;
            self.bs
                .get(c)
                .call(req, Sys::Statx, || sys::statat(pfd.as_fd(), name))
        }))
    }

    /// Checks, for a directory seen for the first time (or a regular file without a record),
    /// that the online branches agree on what `name` is: one that holds another type (a
    /// directory replaced by a file behind RAIF's back, or the reverse) is failed, as it
    /// diverged (`raif replace` rebuilds it). The majority decides; if it is `b` that is
    /// outvoted, `EIO` has the caller ask another branch.
    fn vote_kind(
        &self,
        p: &Arc<Inode>,
        b: usize,
        name: &OsStr,
        kind: u32,
        req: &Request,
    ) -> io::Result<()> {
        let seen = match kind {
            libc::S_IFDIR => true,
            libc::S_IFREG => false,
            _ => return Ok(()),
        };
        let online = self.bs.online_mask();
        if online.count_ones() < 3 || online & (1 << b) == 0 || (seen && self.known(p, name)) {
            return Ok(());
        }
        if !seen {
            // A file: only one without a record (it may be a directory elsewhere).
            let pfd = self.dir_fd(p, b, req)?;
            if self.read_meta(b, &pfd, name, req)?.is_some() {
                return Ok(());
            }
        }
        let kinds: Vec<(usize, Option<u32>)> = (0..self.bs.len())
            .filter(|&c| online & (1 << c) != 0)
            .map(|c| {
                let k = if c == b {
                    Some(kind)
                } else {
                    self.dir_fd(p, c, req)
                        .and_then(|pfd| {
                            self.bs
                                .get(c)
                                .call(req, Sys::Statx, || sys::statat(pfd.as_fd(), name))
                        })
                        .ok()
                        .map(|st| st.mode & libc::S_IFMT)
                };
                (c, k)
            })
            .collect();
        let held: Vec<Option<u32>> = kinds.iter().map(|(_, k)| *k).collect();
        let Some(Some(won)) = crate::offline::majority(&held).map(|i| held[i]) else {
            return Ok(());
        };
        let path = String::from_utf8_lossy(&p.path()).into_owned();
        let what = |k: u32| {
            if k == libc::S_IFDIR {
                "a directory"
            } else {
                "not a directory"
            }
        };
        for (c, k) in kinds.iter().filter(|(_, k)| k.is_some_and(|k| k != won)) {
            self.bs.fail(
                *c,
                &format!(
                    "{path}/{} is {} there and {} on the other branches (changed behind \
                     RAIF's back)",
                    name.to_string_lossy(),
                    what(k.expect("filtered")),
                    what(won)
                ),
            );
        }
        if won != kind {
            return Err(err(libc::EIO));
        }
        Ok(())
    }

    /// Whether the mount knows the object `name` in `p` already (it was checked then).
    fn known(&self, p: &Arc<Inode>, name: &OsStr) -> bool {
        self.inodes.child_known(p, name)
    }

    /// The record of a file seen for the first time, found on branch `b` as `m`: the one a
    /// strict majority of the online branches hold, as scrub decides, or where they differ in
    /// the generation alone, the newest ([`crate::offline::newest_generation`]: a crash while
    /// a write raised it, one part after the other, with a branch failed). One that is
    /// outvoted (a record written behind RAIF's back, or one a crash cut short) is repaired to
    /// it and logged; otherwise `m` (the parts' sizes decide the rest, see `recover_size`).
    fn vote_record(
        &self,
        p: &Arc<Inode>,
        b: usize,
        name: &OsStr,
        m: FileMeta,
        req: &Request,
    ) -> FileMeta {
        let online = self.bs.online_mask();
        // Two records decide only a generation, raised only while a branch is out of service.
        let (count, all) = (online.count_ones(), crate::layout::all_mask(self.bs.len()));
        if online & (1 << b) == 0 || count < 2 || (count == 2 && online == all) {
            return m;
        }
        let records: Vec<(usize, Option<Meta>)> = (0..self.bs.len())
            .filter(|&c| online & (1 << c) != 0)
            .map(|c| {
                let r = if c == b {
                    Some(Meta::File(m))
                } else {
                    self.dir_fd(p, c, req)
                        .and_then(|pfd| self.read_meta(c, &pfd, name, req))
                        .ok()
                        .flatten()
                };
                (c, r)
            })
            .collect();
        let held: Vec<&Option<Meta>> = records.iter().map(|(_, r)| r).collect();
        let Some(won) = crate::offline::decided(&held) else {
            return m;
        };
        let path = String::from_utf8_lossy(&p.path()).into_owned();
        let rec = Meta::File(won);
        for (c, r) in records.iter().filter(|(_, r)| *r != Some(rec)) {
            let fixed = self
                .dir_fd(p, *c, req)
                .and_then(|pfd| {
                    self.bs.get(*c).call(req, Sys::Openat, || {
                        let fl = libc::O_RDONLY | libc::O_NOFOLLOW;
                        sys::openat(pfd.as_fd(), name, fl, 0)
                    })
                })
                .and_then(|fd| {
                    // As `crate::offline::write_record`, each call on the branch counted.
                    let (br, x) = (self.bs.get(*c), OsStr::new(XATTR));
                    let r = crate::sums::with_record(
                        |buf| br.call(req, Sys::Fgetxattr, || sys::fgetxattr(fd.as_fd(), x, buf)),
                        |v| br.call(req, Sys::Fsetxattr, || sys::fsetxattr(fd.as_fd(), x, v, 0)),
                        rec.encode().as_bytes(),
                        crate::sums::After::Kept,
                    );
                    self.bs.close(req, *c, fd);
                    r
                });
            log::warn!(
                "{path}/{}: the record on branch {c} ({}) is outvoted by the other branches' \
                 ({}): {}",
                name.to_string_lossy(),
                r.map_or("none".into(), |r| String::from_utf8_lossy(
                    r.encode().as_bytes()
                )
                .into_owned()),
                String::from_utf8_lossy(rec.encode().as_bytes()),
                match fixed {
                    Ok(()) => "repaired".to_string(),
                    Err(e) => format!("not repaired: {e}"),
                }
            );
        }
        won
    }

    /// The state of a file found on branch `b` with record `m` and `stat` `st`: its size, and
    /// the stale branches it is out of date on.
    fn file_state(
        &self,
        p: &Arc<Inode>,
        b: usize,
        name: &OsStr,
        m: &FileMeta,
        st: &Stat,
        req: &Request,
    ) -> FileState {
        let l = &m.layout;
        let size = if l.level.striped() {
            m.size
        } else if l.holds(b) {
            st.size
        } else {
            let holders = (0..self.bs.len())
                .filter(|&c| l.holds(c))
                .fold(0u64, |acc, c| acc | 1 << c);
            self.on_one(l.start as u64, holders & self.readable(), "stat", |c| {
                let pfd = self.dir_fd(p, c, req)?;
                self.bs
                    .get(c)
                    .call(req, Sys::Statx, || sys::statat(pfd.as_fd(), name))
            })
            .map_or(0, |s| s.size)
        };
        let mut stale = 0u64;
        let stale_branches = self.bs.stale_mask();
        for s in (0..self.bs.len()).filter(|&s| stale_branches & (1 << s) != 0 && l.holds(s)) {
            let current = self
                .dir_fd(p, s, req)
                .and_then(|pfd| self.read_meta(s, &pfd, name, req))
                .is_ok_and(|x| {
                    matches!(x, Some(Meta::File(x)) if x.id == m.id && x.generation == m.generation)
                });
            if !current {
                stale |= 1 << s;
            }
        }
        let state = FileState::new(m, size, stale);
        state.joined.store(self.bs.joined(m.id), Ordering::Relaxed);
        state
            .recover
            .store(self.bs.unclean && l.level.striped(), Ordering::Relaxed);
        state
    }

    /// After an unclean stop: makes a striped file's parts agree with its recorded size. A
    /// write past the end that the crash kept from being recorded (the size is written at
    /// close) left data beyond it: the size the parts imply is adopted, as `raif scrub` does,
    /// and the parity of those rows recomputed from the data (the write may have missed it).
    /// Parts still longer than the size then says are cut, so that bytes past the end read as
    /// zeros when the file grows. With a part unusable only the size is adopted (its data may
    /// live in the parity alone). The caller holds the file's lock exclusively.
    fn recover_size(&self, p: &Arc<Inode>, name: &OsStr, file: &FileState, req: &Request) {
        let l = &file.layout;
        let n = self.bs.len();
        let down = file.down(&self.bs);
        let fds: Vec<Option<Fd>> = (0..n)
            .map(|b| {
                if down & (1 << b) != 0 {
                    return None;
                }
                let pfd = self.dir_fd(p, b, req).ok()?;
                let fl = libc::O_RDWR | libc::O_NOFOLLOW;
                self.bs
                    .get(b)
                    .call(req, Sys::Openat, || sys::openat(pfd.as_fd(), name, fl, 0))
                    .ok()
                    .map(Arc::new)
            })
            .collect();
        let lens: Vec<Option<u64>> = fds
            .iter()
            .enumerate()
            .map(|(b, fd)| {
                let fd = fd.as_ref()?;
                Some(
                    self.bs
                        .get(b)
                        .call(req, Sys::Statx, || sys::fstat(fd.as_fd()))
                        .ok()?
                        .size,
                )
            })
            .collect();
        let recorded = file.size.load(Ordering::Acquire);
        let implied = l.implied_size(&lens);
        let size = recorded.max(implied);
        let whole = lens.iter().all(Option::is_some);
        let long = (0..n).any(|b| lens[b].is_some_and(|len| len > l.part_size(b, size)));
        if implied <= recorded && !(whole && long) {
            self.bs.release_all(req, fds);
            return;
        }
        let path = String::from_utf8_lossy(&p.path()).into_owned();
        let parts = super::MountParts::new(&self.bs, &fds, file, req);
        if implied > recorded {
            log::warn!(
                "{path}/{}: recorded size {recorded}, the parts hold data up to {implied} \
                 (written before the unclean stop): size adopted",
                name.to_string_lossy()
            );
            file.size.store(size, Ordering::Release);
            let first = recorded.checked_sub(1).map_or(0, |x| l.locate(x).0);
            if whole {
                if let Err(e) = crate::stripe::resync_parity(l, size, &parts, first) {
                    log::warn!("{path}: cannot recompute the parity of the tail: {e}");
                }
            }
        }
        if whole && long {
            if let Err(e) = crate::stripe::truncate(l, u64::MAX, size, &parts) {
                log::warn!("{path}: cannot cut the parts to the size: {e}");
            }
        }
        let rec = Meta::File(file.meta()).encode();
        for (b, fd) in fds.iter().enumerate() {
            if let Some(fd) = fd {
                let r = self.set_record(file, b, fd.as_fd(), rec.as_bytes(), req);
                if let Err(e) = r {
                    log::warn!("branch {b}: cannot write a file record: {e}");
                }
            }
        }
        self.bs.release_all(req, fds);
    }

    /// The entry of `name` just made in `p` (one lookup counted).
    pub(crate) fn new_entry(
        &self,
        p: &Arc<Inode>,
        name: &OsStr,
        req: &Request,
    ) -> io::Result<Attr> {
        self.on_one(spread(name), self.readable(), "stat", |b| {
            let pfd = self.dir_fd(p, b, req)?;
            self.entry(p, b, &pfd, name, req)
        })
    }
}
