//! Namespace and attribute operations: lookup, getattr, setattr, readlink, mknod, mkdir,
//! unlink, rmdir, symlink, rename, link, fsyncdir.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use fsprof_fuse::attr::set_time;
use fsprof_fuse::errno::err;
use fsprof_fuse::fdcache::Fd;
use fsprof_fuse::filesystem::{Attr, Ino, Key, Request, SetAttr};
use fsprof_fuse::ops::Sys;
use fsprof_fuse::sys::{self, SetTime, Stat};

use super::{Raif, Undo, spread, trouble};
use crate::branch::State;
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
        let r = self.bs.get(b).call(req, Sys::Getxattr, || {
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
            let r = self.bs.get(*x).call(req, Sys::Setxattr, || {
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
        let r = self.bs.get(b).call(req, Sys::Getxattr, || {
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
        Ok(self.attr(&inode, &st))
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

    pub(crate) fn do_getattr(&self, req: &Request, ino: Ino, fh: Option<&Key>) -> io::Result<Attr> {
        let inode = self.inodes.get(ino.0)?;
        if let Some(h) = fh
            .filter(|_| inode.file.is_some())
            .and_then(|fh| self.files.get(fh.get()))
        {
            return self.fstat_open(&h, req);
        }
        self.getattr_of(&inode, req)
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn do_setattr(
        &self,
        req: &Request,
        ino: Ino,
        set: &SetAttr,
        fh: Option<&Key>,
        kill_suid: bool,
    ) -> io::Result<Attr> {
        let SetAttr {
            mode,
            uid,
            gid,
            size,
            atime,
            mtime,
        } = *set;
        let inode = self.inodes.get(ino.0)?;
        if let Some(size) = size {
            let Some(file) = inode.file.as_ref() else {
                return Err(err(if inode.is_dir() {
                    libc::EISDIR
                } else {
                    libc::EINVAL
                }));
            };
            match fh.and_then(|fh| self.files.get(fh.get())) {
                Some(h) => {
                    let (fds, sums) = h.view(file);
                    self.truncate_file(&inode, &fds, &sums, size, req)?
                }
                None => {
                    let fds = self.open_parts(&inode, file, req, false)?;
                    let joined = file.joined.load(Ordering::Acquire);
                    let empty = size == 0 && inode.opens() == 0;
                    let gain = super::data::Gain::when(empty);
                    let sums = self.open_sums(&inode, file, &fds, joined, req, gain);
                    let r = self.truncate_file(&inode, &fds, &sums, size, req);
                    // No handle to write back the checksums it changed later: now.
                    if inode.opens() == 0 {
                        super::release_sums(&self.bs, file, Some(req));
                    }
                    r?;
                }
            }
            if kill_suid {
                self.kill_suid(&inode, req)?;
            }
        }
        if mode.is_some() || uid.is_some() || gid.is_some() || atime.is_some() || mtime.is_some() {
            if let Some(f) = &inode.file {
                if mtime.is_some() {
                    // Explicit times win over the modification time set at close.
                    f.touched.store(false, Ordering::Release);
                }
            }
            self.set_attrs(
                req,
                &inode,
                mode,
                uid,
                gid,
                set_time(atime),
                set_time(mtime),
            )?;
        }
        self.getattr_of(&inode, req)
    }

    /// Clears setuid/setgid bits on every branch, as the kernel does when a caller without
    /// `CAP_FSETID` modifies a file (the daemon's own writes, as root, would keep them).
    pub(crate) fn kill_suid(&self, inode: &Arc<Inode>, req: &Request) -> io::Result<()> {
        let st = self.on_one(self.first_for(inode), self.answering(inode), "stat", |b| {
            self.stat_on(inode, b, req)
        })?;
        match fsprof_fuse::attr::mode_without_privs(st.mode) {
            Some(mode) => self.set_attrs(
                req,
                inode,
                Some(mode),
                None,
                None,
                SetTime::Omit,
                SetTime::Omit,
            ),
            None => Ok(()),
        }
    }

    /// Mode, owner and times on every branch, restored where a later branch refuses.
    #[allow(clippy::too_many_arguments)]
    fn set_attrs(
        &self,
        req: &Request,
        inode: &Arc<Inode>,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        atime: SetTime,
        mtime: SetTime,
    ) -> io::Result<()> {
        let old = self.on_one(self.first_for(inode), self.answering(inode), "stat", |b| {
            self.stat_on(inode, b, req)
        })?;
        let times = !matches!((atime, mtime), (SetTime::Omit, SetTime::Omit));
        let apply = |b: usize,
                     fd: &Arc<OwnedFd>,
                     mode: Option<u32>,
                     owner: Option<(u32, u32)>,
                     t: Option<(SetTime, SetTime)>| {
            let br = self.bs.get(b);
            if let Some(m) = mode {
                br.call(req, Sys::Chmod, || sys::chmod_fd(fd.as_fd(), m & 0o7777))?;
            }
            if let Some((u, g)) = owner {
                br.call(req, Sys::Fchownat, || sys::chown_fd(fd.as_fd(), u, g))?;
            }
            if let Some((a, m)) = t {
                br.call(req, Sys::Utimensat, || sys::utimens_fd(fd.as_fd(), a, m))?;
            }
            Ok(())
        };
        let owner = (uid.is_some() || gid.is_some())
            .then(|| (uid.unwrap_or(u32::MAX), gid.unwrap_or(u32::MAX)));
        let mut undo = |b: usize, fd: &Arc<OwnedFd>| {
            apply(
                b,
                fd,
                mode.map(|_| old.mode),
                owner.map(|_| (old.uid, old.gid)),
                times.then_some((
                    SetTime::At(old.atime.0, old.atime.1),
                    SetTime::At(old.mtime.0, old.mtime.1),
                )),
            )
        };
        let raised = self.before_attr_change(inode, req);
        let done = self.fan_out(
            "setattr",
            |b| self.obj_fd(inode, b, req),
            |b, fd| apply(b, fd, mode, owner, times.then_some((atime, mtime))),
            Some(&mut undo),
        )?;
        self.after_attr_change(inode, raised, done, req);
        Ok(())
    }

    /// Before a change of `inode`'s owner, mode, times or extended attributes: if a branch is
    /// failed, the change will miss it, so a regular file's generation is raised first (as for
    /// a write), and the branch is stale for the file when it comes back: its old mode or
    /// attributes are never served. The raised record goes to the online branches now, and to
    /// a stale branch only once the change reached it too ([`Raif::after_attr_change`]).
    /// Directories, symlinks and special files need no generation: only online branches answer
    /// for them. Returns whether the generation was raised.
    pub(crate) fn before_attr_change(&self, inode: &Arc<Inode>, req: &Request) -> bool {
        let Some(file) = &inode.file else {
            return false;
        };
        if self.bs.failed_mask() == 0 {
            return false;
        }
        let epoch = self.bs.epoch();
        let _shared = file.lock.read();
        if file.generation.fetch_max(epoch, Ordering::AcqRel) >= epoch {
            return false;
        }
        self.write_record_at(inode, file, self.bs.online_mask(), req);
        true
    }

    /// After such a change reached the branches `done`: a stale branch the file is current on
    /// gets the raised record if it got the change, and is out of date for the file if it did
    /// not (a stale branch's refusal is not an answer).
    pub(crate) fn after_attr_change(
        &self,
        inode: &Arc<Inode>,
        raised: bool,
        done: u64,
        req: &Request,
    ) {
        let Some(file) = &inode.file else { return };
        let current_stale = self.bs.stale_mask() & !file.down(&self.bs);
        let missed = current_stale & !done;
        if missed != 0 {
            file.stale.fetch_or(missed, Ordering::AcqRel);
        }
        let mut mask = 0;
        if raised {
            mask = current_stale & done;
        } else if missed != 0 {
            // Raise it now; the branches that got the change get the record.
            let epoch = self.bs.epoch();
            if file.generation.fetch_max(epoch, Ordering::AcqRel) < epoch {
                mask = done & !file.down(&self.bs);
            }
        }
        if mask != 0 {
            let _shared = file.lock.read();
            self.write_record_at(inode, file, mask, req);
        }
    }

    /// Writes `file`'s record on the branches of `mask` it is usable on, by name (the file need
    /// not be open).
    fn write_record_at(&self, inode: &Arc<Inode>, file: &FileState, mask: u64, req: &Request) {
        let rec = Meta::File(file.meta()).encode();
        let Some(parent) = inode.with_loc(|p, _| p.cloned()) else {
            return;
        };
        let down = file.down(&self.bs);
        for b in (0..self.bs.len()).filter(|b| mask & !down & (1 << b) != 0) {
            let br = self.bs.get(b);
            let r = match inode.open_part(b) {
                // Open: through its part, whatever happened to its name.
                Some(fd) => self.set_record(file, b, fd.as_fd(), rec.as_bytes(), req),
                None => self.dir_fd(&parent, b, req).and_then(|pfd| {
                    inode.with_loc(|_, name| {
                        let x = OsStr::new(XATTR);
                        super::put_record(
                            file,
                            b,
                            rec.as_bytes(),
                            |buf| {
                                br.call(req, Sys::Getxattr, || {
                                    sys::getxattr_at(pfd.as_fd(), name, x, buf)
                                })
                            },
                            |v| {
                                br.call(req, Sys::Setxattr, || {
                                    sys::setxattr_at(pfd.as_fd(), name, x, v, 0)
                                })
                            },
                        )
                    })
                }),
            };
            if let Err(e) = r {
                if !self.bs.error(b, &e, "record") {
                    log::warn!("branch {b}: cannot write a file record: {e}");
                }
            }
        }
    }

    pub(crate) fn do_readlink(&self, req: &Request, ino: Ino, buf: &mut [u8]) -> io::Result<usize> {
        let inode = self.inodes.get(ino.0)?;
        self.on_one(self.first_for(&inode), self.readable(), "readlink", |b| {
            let fd = self.obj_fd(&inode, b, req)?;
            self.bs
                .get(b)
                .call(req, Sys::Readlinkat, || sys::readlink_fd(fd.as_fd(), buf))
        })
    }

    /// Refuses names RAIF keeps for itself at the root.
    pub(crate) fn check_name(&self, parent: Ino, name: &OsStr) -> io::Result<()> {
        if self.hidden(parent.0, name.as_bytes()) {
            return Err(err(libc::EPERM));
        }
        Ok(())
    }

    /// Creates a non-directory, non-regular object on every branch with `make`.
    fn make_node(
        &self,
        req: &Request,
        parent: Ino,
        name: &OsStr,
        call: Sys,
        make: impl Fn(&OwnedFd) -> io::Result<()>,
    ) -> io::Result<Attr> {
        self.check_name(parent, name)?;
        let p = self.inodes.get(parent.0)?;
        let mut undo = |b: usize, pfd: &Arc<OwnedFd>| {
            self.bs.get(b).call(req, Sys::Unlinkat, || {
                sys::unlinkat(pfd.as_fd(), name, false)
            })
        };
        // Its identity, on every branch (root only: a `trusted.*` attribute).
        let rec = self.privileged.then(|| Meta::Other(new_id()).encode());
        self.fan_out(
            req.op.name(),
            |b| self.dir_fd(&p, b, req),
            |b, pfd| {
                let br = self.bs.get(b);
                self.as_caller(req, || br.call(req, call, || make(pfd)))?;
                if let Some(rec) = &rec {
                    let r = br.call(req, Sys::Setxattr, || {
                        sys::setxattr_at(
                            pfd.as_fd(),
                            name,
                            OsStr::new(XATTR_OTHER),
                            rec.as_bytes(),
                            0,
                        )
                    });
                    if let Err(e) = r {
                        // Not fatal: it is then found by name, with a counter id.
                        log::debug!("branch {b}: no identity for a special file: {e}");
                    }
                }
                Ok(())
            },
            Some(&mut undo),
        )?;
        self.new_entry(&p, name, req)
    }

    pub(crate) fn do_mknod(
        &self,
        req: &Request,
        parent: Ino,
        name: &OsStr,
        mode: u32,
        rdev: u32,
    ) -> io::Result<Attr> {
        if mode & libc::S_IFMT == libc::S_IFREG {
            let (attr, opened) = self.do_create(req, parent, name, mode, libc::O_EXCL)?;
            self.do_release(req, opened.fh);
            return Ok(attr);
        }
        // FUSE passes rdev as the kernel's new_encode_dev.
        let dev = libc::makedev(
            (rdev >> 8) & 0xfff,
            (rdev & 0xff) | ((rdev >> 12) & 0xfff00),
        );
        self.make_node(req, parent, name, Sys::Mknodat, |pfd| {
            sys::mknodat(pfd.as_fd(), name, mode, dev)
        })
    }

    pub(crate) fn do_symlink(
        &self,
        req: &Request,
        parent: Ino,
        name: &OsStr,
        target: &Path,
    ) -> io::Result<Attr> {
        let t = target.as_os_str().as_bytes();
        // A symlink's mode is fixed: no umask.
        let req = &req.clone().with_umask(0);
        self.make_node(req, parent, name, Sys::Symlinkat, |pfd| {
            sys::symlinkat(t, pfd.as_fd(), name)
        })
    }

    pub(crate) fn do_mkdir(
        &self,
        req: &Request,
        parent: Ino,
        name: &OsStr,
        mode: u32,
    ) -> io::Result<Attr> {
        self.check_name(parent, name)?;
        let p = self.inodes.get(parent.0)?;
        let rec = Meta::Dir(new_id()).encode();
        let rmdir = |b: usize, pfd: &Arc<OwnedFd>| {
            self.bs.get(b).call(req, Sys::Unlinkat, || {
                sys::unlinkat(pfd.as_fd(), name, true)
            })
        };
        self.fan_out(
            "mkdir",
            |b| self.dir_fd(&p, b, req),
            |b, pfd| {
                let br = self.bs.get(b);
                self.as_caller(req, || {
                    br.call(req, Sys::Mkdirat, || sys::mkdirat(pfd.as_fd(), name, mode))
                })?;
                let r = br.call(req, Sys::Setxattr, || {
                    sys::setxattr_at(pfd.as_fd(), name, OsStr::new(XATTR), rec.as_bytes(), 0)
                });
                if let Err(e) = r {
                    let _ = rmdir(b, pfd);
                    return Err(e);
                }
                Ok(())
            },
            Some(&mut |b, pfd| rmdir(b, pfd)),
        )?;
        self.new_entry(&p, name, req)
    }

    pub(crate) fn do_unlink(&self, req: &Request, parent: Ino, name: &OsStr) -> io::Result<()> {
        self.check_name(parent, name)?;
        let p = self.inodes.get(parent.0)?;
        // A regular file's last link: its sum files go with it (a file known to keep its
        // checksums in attributes only has none: nothing to ask).
        let found = self.inodes.find(&p, name, None);
        let sums = found
            .as_ref()
            .and_then(|i| i.file.as_ref().map(|f| (f.id, f.layout)))
            .filter(|(_, l)| crate::sums::covered(l))
            .filter(|(_, l)| found.as_ref().is_none_or(|i| self.sum_files_of(i, l) != 0))
            .filter(|_| {
                self.on_one(spread(name), self.readable(), "unlink", |b| {
                    let pfd = self.dir_fd(&p, b, req)?;
                    self.bs
                        .get(b)
                        .call(req, Sys::Statx, || sys::statat(pfd.as_fd(), name))
                })
                .is_ok_and(|st| st.nlink == 1)
            });
        self.fan_out(
            "unlink",
            |b| self.dir_fd(&p, b, req),
            |b, pfd| {
                self.bs.get(b).call(req, Sys::Unlinkat, || {
                    sys::unlinkat(pfd.as_fd(), name, false)
                })
            },
            None,
        )?;
        self.inodes.removed(&p, name, None);
        if let Some((id, l)) = sums {
            self.remove_sums(id, &l, found.as_ref(), req);
        }
        Ok(())
    }

    /// Removes the sum files of file `id` (its last link went; an open descriptor keeps
    /// serving until closed), and takes those `inode`, the mount's inode of it, caches
    /// (checksums kept in attributes go with the parts).
    pub(crate) fn remove_sums(
        &self,
        id: u64,
        l: &crate::layout::Layout,
        inode: Option<&Arc<Inode>>,
        req: &Request,
    ) {
        let mut files = u64::MAX;
        if let Some(i) = inode {
            files = self.sum_files_of(i, l);
            if let Some(f) = &i.file {
                f.sums_gone.store(true, Ordering::Release);
            }
            self.inodes.drop_sums(i);
        }
        for (b, h, dir) in self.sum_homes(l, self.bs.failed_mask()) {
            if files & (1 << b) == 0 {
                continue;
            }
            let path = crate::sums::name(id, b);
            let r = self.bs.get(h).call(req, Sys::Unlinkat, || {
                sys::unlinkat(dir.as_fd(), OsStr::new(&path), false)
            });
            if let Err(e) = r
                && e.raw_os_error() != Some(libc::ENOENT)
            {
                log::warn!("branch {h}: cannot remove {path}: {e}");
            }
        }
    }

    /// The parts of file `inode` (of layout `l`) that may have a sum or overflow file: all but
    /// those known to keep their checksums in an attribute with no overflow file.
    fn sum_files_of(&self, inode: &Inode, l: &crate::layout::Layout) -> u64 {
        let all = u64::MAX >> (64 - u32::from(l.width).clamp(1, 64));
        inode.file.as_ref().map_or(all, |f| {
            let x = f.xsums.load(Ordering::Acquire) & !f.xover.load(Ordering::Acquire);
            all & !x
        })
    }

    pub(crate) fn do_rmdir(&self, req: &Request, parent: Ino, name: &OsStr) -> io::Result<()> {
        self.check_name(parent, name)?;
        let p = self.inodes.get(parent.0)?;
        // What to put back if a later branch refuses (not empty there).
        let (old, rec) = self.on_one(spread(name), self.readable(), "rmdir", |b| {
            let pfd = self.dir_fd(&p, b, req)?;
            let st = self
                .bs
                .get(b)
                .call(req, Sys::Statx, || sys::statat(pfd.as_fd(), name))?;
            Ok((st, self.read_meta(b, &pfd, name, req)?))
        })?;
        if old.mode & libc::S_IFMT != libc::S_IFDIR {
            return Err(err(libc::ENOTDIR));
        }
        let mut undo = |b: usize, pfd: &Arc<OwnedFd>| {
            let br = self.bs.get(b);
            br.call(req, Sys::Mkdirat, || {
                sys::mkdirat(pfd.as_fd(), name, old.mode & 0o7777)
            })?;
            let o = br.call(req, Sys::Openat, || {
                sys::openat(pfd.as_fd(), name, libc::O_PATH | libc::O_NOFOLLOW, 0)
            })?;
            br.call(req, Sys::Fchownat, || {
                sys::chown_fd(o.as_fd(), old.uid, old.gid)
            })?;
            // Exactly the old mode, whatever this thread's umask.
            br.call(req, Sys::Chmod, || {
                sys::chmod_fd(o.as_fd(), old.mode & 0o7777)
            })?;
            if let Some(r) = rec {
                br.call(req, Sys::Setxattr, || {
                    sys::setxattr_at(
                        pfd.as_fd(),
                        name,
                        OsStr::new(XATTR),
                        r.encode().as_bytes(),
                        0,
                    )
                })?;
            }
            Ok(())
        };
        let victim = self.inodes.find(&p, name, rec.map(|r| r.id()));
        self.fan_out(
            "rmdir",
            |b| self.dir_fd(&p, b, req),
            |b, pfd| {
                self.bs.get(b).call(req, Sys::Unlinkat, || {
                    sys::unlinkat(pfd.as_fd(), name, true)
                })
            },
            Some(&mut undo),
        )?;
        self.inodes.removed(&p, name, victim.as_ref());
        Ok(())
    }

    pub(crate) fn do_rename(
        &self,
        req: &Request,
        parent: Ino,
        name: &OsStr,
        newparent: Ino,
        newname: &OsStr,
        flags: u32,
    ) -> io::Result<()> {
        if flags & !(libc::RENAME_NOREPLACE | libc::RENAME_EXCHANGE) != 0 {
            return Err(err(libc::EINVAL));
        }
        self.check_name(parent, name)?;
        self.check_name(newparent, newname)?;
        let (p, np) = (self.inodes.get(parent.0)?, self.inodes.get(newparent.0)?);
        let fds = |b: usize| Ok((self.dir_fd(&p, b, req)?, self.dir_fd(&np, b, req)?));
        // Which objects move, and whether one is replaced (which cannot be undone).
        let (src, dst, replaced_last) =
            self.on_one(spread(name), self.readable(), "rename", |b| {
                let (pfd, npfd) = fds(b)?;
                let br = self.bs.get(b);
                br.call(req, Sys::Statx, || sys::statat(pfd.as_fd(), name))?;
                let sid = self.read_meta(b, &pfd, name, req)?.map(|m| m.id());
                let (dst, last) =
                    match br.call(req, Sys::Statx, || sys::statat(npfd.as_fd(), newname)) {
                        Ok(st) => {
                            let meta = self.read_meta(b, &npfd, newname, req)?;
                            // A regular file's last link, replaced: its sum files go with it.
                            let last = match &meta {
                                Some(Meta::File(m))
                                    if st.nlink == 1 && crate::sums::covered(&m.layout) =>
                                {
                                    Some((m.id, m.layout))
                                }
                                _ => None,
                            };
                            (Some(meta.map(|m| m.id())), last)
                        }
                        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => (None, None),
                        Err(e) => return Err(e),
                    };
                Ok((sid, dst, last))
            })?;
        let exchange = flags & libc::RENAME_EXCHANGE != 0;
        let src_inode = self.inodes.find(&p, name, src);
        let dst_inode = dst.and_then(|id| self.inodes.find(&np, newname, id));
        let mut back = |b: usize, (pfd, npfd): &(Arc<OwnedFd>, Arc<OwnedFd>)| {
            self.bs.get(b).call(req, Sys::Renameat2, || {
                sys::renameat2(
                    npfd.as_fd(),
                    newname,
                    pfd.as_fd(),
                    name,
                    flags & libc::RENAME_EXCHANGE,
                )
            })
        };
        let undo: Option<Undo<(Arc<OwnedFd>, Arc<OwnedFd>)>> = if dst.is_some() && !exchange {
            None
        } else {
            Some(&mut back)
        };
        self.fan_out(
            "rename",
            fds,
            |b, (pfd, npfd)| {
                self.bs.get(b).call(req, Sys::Renameat2, || {
                    sys::renameat2(pfd.as_fd(), name, npfd.as_fd(), newname, flags)
                })
            },
            undo,
        )?;
        if exchange {
            if let Some(i) = src_inode {
                self.inodes.moved(&i, &p, name, &np, newname);
            }
            if let Some(i) = dst_inode {
                self.inodes.moved(&i, &np, newname, &p, name);
            }
        } else if !matches!((&src_inode, &dst_inode), (Some(a), Some(b)) if Arc::ptr_eq(a, b)) {
            // (Two names of one file: a rename between them changes nothing.) What the new
            // name named before (replaced) no longer has it.
            if dst.is_some() {
                self.inodes.removed(&np, newname, dst_inode.as_ref());
            }
            if let Some(i) = src_inode {
                self.inodes.moved(&i, &p, name, &np, newname);
            }
            if let Some((id, l)) = replaced_last {
                self.remove_sums(id, &l, dst_inode.as_ref(), req);
            }
        }
        Ok(())
    }

    pub(crate) fn do_link(
        &self,
        req: &Request,
        ino: Ino,
        newparent: Ino,
        newname: &OsStr,
    ) -> io::Result<Attr> {
        self.check_name(newparent, newname)?;
        let inode = self.inodes.get(ino.0)?;
        if inode.is_dir() {
            return Err(err(libc::EPERM));
        }
        let np = self.inodes.get(newparent.0)?;
        let mut undo = |b: usize, (_, npfd): &(Arc<OwnedFd>, Arc<OwnedFd>)| {
            self.bs.get(b).call(req, Sys::Unlinkat, || {
                sys::unlinkat(npfd.as_fd(), newname, false)
            })
        };
        self.fan_out(
            "link",
            |b| Ok((self.obj_fd(&inode, b, req)?, self.dir_fd(&np, b, req)?)),
            |b, (o, npfd)| {
                self.bs.get(b).call(req, Sys::Linkat, || {
                    sys::link_fd(o.as_fd(), npfd.as_fd(), newname, self.privileged)
                })
            },
            Some(&mut undo),
        )?;
        self.new_entry(&np, newname, req)
    }

    /// Syncs the directory on every branch. An error is the answer (after the other branches
    /// are synced too) but no reason to fail a branch unless it says the branch is in trouble:
    /// a sync changes nothing that could diverge.
    pub(crate) fn do_fsyncdir(&self, req: &Request, ino: Ino, datasync: bool) -> io::Result<()> {
        let inode = self.inodes.get(ino.0)?;
        let mut first_err = None;
        let mut synced = false;
        for b in 0..self.bs.len() {
            let state = self.bs.state(b);
            if state == State::Failed {
                continue;
            }
            let br = self.bs.get(b);
            let r = self.dir_fd(&inode, b, req).and_then(|fd| {
                let d = br.call(req, Sys::Openat, || {
                    sys::reopen(fd.as_fd(), libc::O_RDONLY | libc::O_DIRECTORY)
                })?;
                br.call(req, Sys::Fsync, || sys::fsync(d.as_fd(), datasync))
            });
            match r {
                Ok(()) => synced = true,
                Err(_) if matches!(state, State::Stale | State::Rebuilding) => {}
                Err(e) if trouble(&e) && self.bs.error(b, &e, "fsyncdir") => {}
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None if synced => Ok(()),
            None => Err(err(libc::EIO)),
        }
    }
}
