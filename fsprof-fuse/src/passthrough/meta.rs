//! Metadata operations: lookup, getattr, setattr, mknod, mkdir, unlink, rmdir, symlink, rename,
//! link.
//!
//! There is no `access`: mounts always use `default_permissions` (the kernel checks permissions
//! against the attributes of LOWER), and then the kernel never sends `ACCESS`.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;

use super::Passthrough;
use crate::filesystem::{AttrOut, Entry, Ino, Request, SetAttr};
use crate::passthrough::inode_store::Inode;
use crate::protocol::errno::err;
use crate::protocol::ops::Sys;
use crate::sys::{self, FdHandle};
use crate::toolkit::attr::set_time;

impl Passthrough {
    pub(crate) fn do_lookup(&self, req: &Request, parent: Ino, name: &OsStr) -> io::Result<Entry> {
        // The kernel asks for "." and ".." only to open a file handle of an object it forgot
        // (FUSE_EXPORT_SUPPORT; see `inode::export`): the node itself, found again from its
        // lower handle, and a directory's parent, never above LOWER.
        if name == "." || name == ".." {
            let (inode, st) = if name == "." {
                self.store.lookup_self(self.lower.via(req), parent.0)?
            } else {
                self.store
                    .lookup_parent(self.lower.via(req), &self.store.get(parent.0)?)?
            };
            return Ok(self.entry_of(&inode, &st));
        }
        if self.hidden(parent.0, name.as_bytes()) {
            return Err(err(libc::ENOENT));
        }
        let (parent, pfd) = self.node(req, parent)?;
        self.entry(req, &parent, &pfd, name, false)
    }

    pub(crate) fn do_getattr(
        &self,
        req: &Request,
        ino: Ino,
        fh: Option<&FdHandle>,
    ) -> io::Result<AttrOut> {
        let st = match fh {
            // The kernel passes a handle only for regular files (FUSE_GETATTR_FH); it keeps an
            // unlinked open file reachable.
            Some(fh) => self.lower.call(req, Sys::Statx, || sys::fstat(fh.fd()))?,
            None => {
                let (_, fd) = self.node(req, ino)?;
                self.lower
                    .call(req, Sys::Statx, || sys::fstat(fd.as_fd()))?
            }
        };
        Ok(self.attr_out(ino.0, &st))
    }

    pub(crate) fn do_setattr(
        &self,
        req: &Request,
        ino: Ino,
        set: &SetAttr,
        fh: Option<&FdHandle>,
    ) -> io::Result<AttrOut> {
        let inode = self.store.get(ino.0)?;
        // With a handle (ftruncate; the kernel passes one for regular files only) every call
        // goes to its open descriptor, which reaches the object whatever became of its name;
        // otherwise to the inode's cached one (pinned while the file is open elsewhere).
        let open = fh
            .filter(|_| inode.kind() == libc::S_IFREG)
            .map(FdHandle::fd);
        let cached;
        let fd = match open {
            Some(f) => f,
            None => {
                cached = self.store.fd(self.lower.via(req), &inode)?;
                cached.as_fd()
            }
        };
        let l = &self.lower;
        let regular = inode.kind() == libc::S_IFREG;
        // The group before a change of it by a caller other than root (see `privs`).
        let old_gid = if regular
            && set.kill_suidgid
            && set.gid.is_some()
            && req.uid != 0
            && self.privileged
        {
            Some(l.call(req, Sys::Statx, || sys::fstat(fd))?.gid)
        } else {
            None
        };
        if let Some(mode) = set.mode {
            match open {
                Some(f) => l.call(req, Sys::Fchmod, || sys::fchmod(f, mode & 0o7777))?,
                None => l.call(req, Sys::Chmod, || sys::chmod_fd(fd, mode & 0o7777))?,
            }
        }
        if set.uid.is_some() || set.gid.is_some() {
            let (u, g) = (set.uid.unwrap_or(u32::MAX), set.gid.unwrap_or(u32::MAX));
            l.call(req, Sys::Fchownat, || sys::chown_fd(fd, u, g))?;
        }
        if let Some(size) = set.size {
            match open {
                Some(f) => l.call(req, Sys::Ftruncate, || sys::ftruncate(f, size))?,
                None => l.call(req, Sys::Truncate, || sys::truncate_fd(fd, size))?,
            }
        }
        if set.atime.is_some() || set.mtime.is_some() {
            let (a, m) = (set_time(set.atime), set_time(set.mtime));
            // utimensat with AT_EMPTY_PATH serves open and O_PATH descriptors alike.
            l.call(req, Sys::Utimensat, || sys::utimens_fd(fd, a, m))?;
        }
        let mut st = l.call(req, Sys::Statx, || sys::fstat(fd))?;
        if regular {
            st = self.setattr_privileges(req, set, fd, st, old_gid)?;
        }
        Ok(self.attr_out(ino.0, &st))
    }

    /// Runs `create` with the caller's rights (see [`crate::toolkit::create_as::create_as`]).
    pub(crate) fn create_as<T>(
        &self,
        req: &Request,
        create: impl FnMut() -> io::Result<T>,
    ) -> io::Result<T> {
        crate::toolkit::create_as::create_as(self.privileged, req, create)
    }

    pub(crate) fn do_mknod(
        &self,
        req: &Request,
        parent: Ino,
        name: &OsStr,
        mode: u32,
        rdev: u32,
    ) -> io::Result<Entry> {
        let (p, pfd) = self.node(req, parent)?;
        // FUSE encodes rdev as the kernel's new_encode_dev; makedev wants major and minor.
        let (major, minor) = (
            (rdev & 0xfff00) >> 8,
            (rdev & 0xff) | ((rdev >> 12) & 0xfff00),
        );
        let dev = libc::makedev(major, minor);
        self.create_as(req, || {
            self.lower.call(req, Sys::Mknodat, || {
                sys::mknodat(pfd.as_fd(), name, mode, dev)
            })
        })?;
        if mode & libc::S_ISGID != 0 && self.privileged {
            let fd = self.lower.call(req, Sys::Openat, || {
                sys::openat(pfd.as_fd(), name, libc::O_PATH | libc::O_NOFOLLOW, 0)
            })?;
            let st = self
                .lower
                .call(req, Sys::Statx, || sys::fstat(fd.as_fd()))?;
            self.keep_setgid(req, fd.as_fd(), &st, mode)?;
        }
        self.entry(req, &p, &pfd, name, true)
    }

    pub(crate) fn do_mkdir(
        &self,
        req: &Request,
        parent: Ino,
        name: &OsStr,
        mode: u32,
    ) -> io::Result<Entry> {
        let (p, pfd) = self.node(req, parent)?;
        self.create_as(req, || {
            self.lower
                .call(req, Sys::Mkdirat, || sys::mkdirat(pfd.as_fd(), name, mode))
        })?;
        self.entry(req, &p, &pfd, name, true)
    }

    pub(crate) fn do_symlink(
        &self,
        req: &Request,
        parent: Ino,
        name: &OsStr,
        target: &Path,
    ) -> io::Result<Entry> {
        let (p, pfd) = self.node(req, parent)?;
        let t = target.as_os_str().as_bytes();
        // A symlink's mode is not subject to the umask.
        let req_nomask = req.clone().with_umask(0);
        self.create_as(&req_nomask, || {
            self.lower
                .call(req, Sys::Symlinkat, || sys::symlinkat(t, pfd.as_fd(), name))
        })?;
        self.entry(req, &p, &pfd, name, true)
    }

    pub(crate) fn do_remove(
        &self,
        req: &Request,
        parent: Ino,
        name: &OsStr,
        dir: bool,
    ) -> io::Result<()> {
        let (_, pfd) = self.node(req, parent)?;
        self.lower
            .call(req, Sys::Unlinkat, || sys::unlinkat(pfd.as_fd(), name, dir))
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
        let (_, pfd) = self.node(req, parent)?;
        let (np, npfd) = self.node(req, newparent)?;
        self.lower.call(req, Sys::Renameat2, || {
            sys::renameat2(pfd.as_fd(), name, npfd.as_fd(), newname, flags)
        })?;
        if !self.store.uses_handles() {
            let via = self.lower.via(req);
            self.store.renamed(via, &np, npfd.as_fd(), newname);
            if flags & libc::RENAME_EXCHANGE != 0 {
                let p = self.store.get(parent.0)?;
                self.store.renamed(via, &p, pfd.as_fd(), name);
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
    ) -> io::Result<Entry> {
        let (_, fd) = self.node(req, ino)?;
        let (np, npfd): (Arc<Inode>, Arc<OwnedFd>) = self.node(req, newparent)?;
        self.lower.call(req, Sys::Linkat, || {
            sys::link_fd(fd.as_fd(), npfd.as_fd(), newname, self.store.uses_handles())
        })?;
        self.entry(req, &np, &npfd, newname, false)
    }
}
