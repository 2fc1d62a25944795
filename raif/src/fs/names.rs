//! Namespace operations: mknod, mkdir, unlink, rmdir, symlink, rename, link, and a directory's
//! fsync.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use fsprof_fuse::filesystem::{Attr, Ino, Request};
use fsprof_fuse::protocol::errno::err;
use fsprof_fuse::protocol::ops::{Op, Sys};
use fsprof_fuse::sys::{self};

use super::{Held, Raif, Undo, spread, trouble};
use crate::branch::State;
use crate::inode::{Inode, new_id};
use crate::layout::{Meta, XATTR, XATTR_OTHER};

impl Raif {
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
                    let r = br.call(req, Sys::Lsetxattr, || {
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
        let attr = self.make_node(req, parent, name, Sys::Mknodat, |pfd| {
            sys::mknodat(pfd.as_fd(), name, mode, dev)
        })?;
        let inode = self.inodes.get(attr.ino)?;
        match self.keep_setgid(&inode, req, &attr, mode)? {
            true => self.getattr_of(&inode, req),
            false => Ok(attr),
        }
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
                let r = br.call(req, Sys::Lsetxattr, || {
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
        // An open file reached through this name keeps its descriptors from now on.
        if let Some(i) = &found {
            self.keep_open(i, req)?;
        }
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
        self.inodes
            .removed(&p, name, None, |b, fd| self.bs.release(req, b, fd));
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
            // An open file's handles keep using those they have until the last release.
            if !self.inodes.kept(i) {
                self.inodes
                    .drop_sums(i, |b, fd| self.bs.release(req, b, fd));
            }
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
            let r = br.call(req, Sys::Fchownat, || {
                sys::chown_fd(o.as_fd(), old.uid, old.gid)
            });
            if let Err(e) = r {
                self.bs.close(req, b, o);
                return Err(e);
            }
            // Exactly the old mode, whatever this thread's umask.
            let r = br.call(req, Sys::Chmod, || {
                sys::chmod_fd(o.as_fd(), old.mode & 0o7777)
            });
            self.bs.close(req, b, o);
            r?;
            if let Some(r) = rec {
                br.call(req, Sys::Lsetxattr, || {
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
        self.inodes.removed(&p, name, victim.as_ref(), |b, fd| {
            self.bs.release(req, b, fd)
        });
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
        // An open file the rename replaces keeps its descriptors from now on.
        if let Some(i) = dst_inode.as_ref().filter(|_| !exchange) {
            let same = src_inode.as_ref().is_some_and(|s| Arc::ptr_eq(s, i));
            if !same {
                self.keep_open(i, req)?;
            }
        }
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
                self.inodes
                    .removed(&np, newname, dst_inode.as_ref(), |b, fd| {
                        self.bs.release(req, b, fd)
                    });
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
        let mut undo = |b: usize, (_, npfd): &(Held, Arc<OwnedFd>)| {
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
                let r = br.call(req, Sys::Fsync, || sys::fsync(d.as_fd(), datasync));
                self.bs.close(req, b, d);
                r
            });
            match r {
                Ok(()) => synced = true,
                Err(_) if matches!(state, State::Stale | State::Rebuilding) => {}
                Err(e) if trouble(&e) && self.bs.error(b, &e, Op::Fsyncdir.method()) => {}
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
