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

use fuser::{FileAttr, FileHandle, Generation, INodeNo, Request, TimeOrNow};

use super::Passthrough;
use crate::attr::{set_time, to_attr};
use crate::errno::err;
use crate::inode::Inode;
use crate::ops::Op;
use crate::sys;

impl Passthrough {
    pub(crate) fn do_lookup(
        &self,
        parent: INodeNo,
        name: &OsStr,
    ) -> io::Result<(FileAttr, Generation)> {
        // Nothing resolves outside LOWER: the kernel sends no "." or ".." lookups except for
        // export, and those are refused rather than followed.
        if name == "." || name == ".." {
            return Err(err(libc::ENOENT));
        }
        if self.hidden(parent.0, name.as_bytes()) {
            return Err(err(libc::ENOENT));
        }
        let (parent, pfd) = self.node(parent)?;
        self.entry(Op::Lookup, &parent, &pfd, name, false)
    }

    pub(crate) fn do_getattr(&self, ino: INodeNo, fh: Option<FileHandle>) -> io::Result<FileAttr> {
        let st = match fh {
            // The kernel passes a handle only for regular files (FUSE_GETATTR_FH), whose handles
            // are descriptors; it keeps an unlinked open file reachable.
            Some(fh) => {
                let fd = Self::file(fh);
                self.lower.call(Op::Getattr, || sys::fstat(fd))?
            }
            None => {
                let (_, fd) = self.node(ino)?;
                self.lower.call(Op::Getattr, || sys::fstat(fd.as_fd()))?
            }
        };
        Ok(to_attr(ino.0, &st))
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn do_setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        fh: Option<FileHandle>,
    ) -> io::Result<FileAttr> {
        let inode = self.store.get(ino.0)?;
        // With a handle (ftruncate; the kernel passes one for regular files only) every call
        // goes to its open descriptor, which reaches the object whatever became of its name;
        // otherwise to the inode's cached one (pinned while the file is open elsewhere).
        let open = fh.filter(|_| inode.kind() == libc::S_IFREG).map(Self::file);
        let cached;
        let fd = match open {
            Some(f) => f,
            None => {
                cached = self.store.fd(&inode)?;
                cached.as_fd()
            }
        };
        let l = &self.lower;
        if let Some(mode) = mode {
            match open {
                Some(f) => l.call(Op::Setattr, || sys::fchmod(f, mode & 0o7777))?,
                None => l.call(Op::Setattr, || sys::chmod_fd(fd, mode & 0o7777))?,
            }
        }
        if uid.is_some() || gid.is_some() {
            let (u, g) = (uid.unwrap_or(u32::MAX), gid.unwrap_or(u32::MAX));
            l.call(Op::Setattr, || sys::chown_fd(fd, u, g))?;
        }
        if let Some(size) = size {
            match open {
                Some(f) => l.call(Op::Setattr, || sys::ftruncate(f, size))?,
                None => l.call(Op::Setattr, || sys::truncate_fd(fd, size))?,
            }
            if req.uid() != 0 && mode.is_none() {
                self.kill_suid(Op::Setattr, fd)?;
            }
        }
        if atime.is_some() || mtime.is_some() {
            let (a, m) = (set_time(atime), set_time(mtime));
            // utimensat with AT_EMPTY_PATH serves open and O_PATH descriptors alike.
            l.call(Op::Setattr, || sys::utimens_fd(fd, a, m))?;
        }
        let st = l.call(Op::Setattr, || sys::fstat(fd))?;
        Ok(to_attr(ino.0, &st))
    }

    /// Runs `create` with the caller's rights (see [`crate::creds::create_as`]).
    pub(crate) fn create_as<T>(
        &self,
        req: &Request,
        umask: u32,
        create: impl FnMut() -> io::Result<T>,
    ) -> io::Result<T> {
        crate::creds::create_as(self.privileged, req, umask, create)
    }

    pub(crate) fn do_mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
    ) -> io::Result<(FileAttr, Generation)> {
        let (p, pfd) = self.node(parent)?;
        // FUSE encodes rdev as the kernel's new_encode_dev; makedev wants major and minor.
        let (major, minor) = (
            (rdev & 0xfff00) >> 8,
            (rdev & 0xff) | ((rdev >> 12) & 0xfff00),
        );
        let dev = libc::makedev(major, minor);
        self.create_as(req, umask, || {
            self.lower
                .call(Op::Mknod, || sys::mknodat(pfd.as_fd(), name, mode, dev))
        })?;
        self.entry(Op::Mknod, &p, &pfd, name, true)
    }

    pub(crate) fn do_mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
    ) -> io::Result<(FileAttr, Generation)> {
        let (p, pfd) = self.node(parent)?;
        self.create_as(req, umask, || {
            self.lower
                .call(Op::Mkdir, || sys::mkdirat(pfd.as_fd(), name, mode))
        })?;
        self.entry(Op::Mkdir, &p, &pfd, name, true)
    }

    pub(crate) fn do_symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        target: &Path,
    ) -> io::Result<(FileAttr, Generation)> {
        let (p, pfd) = self.node(parent)?;
        let t = target.as_os_str().as_bytes();
        self.create_as(req, 0, || {
            self.lower
                .call(Op::Symlink, || sys::symlinkat(t, pfd.as_fd(), name))
        })?;
        self.entry(Op::Symlink, &p, &pfd, name, true)
    }

    pub(crate) fn do_remove(
        &self,
        op: Op,
        parent: INodeNo,
        name: &OsStr,
        dir: bool,
    ) -> io::Result<()> {
        let (_, pfd) = self.node(parent)?;
        self.lower
            .call(op, || sys::unlinkat(pfd.as_fd(), name, dir))
    }

    pub(crate) fn do_rename(
        &self,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: u32,
    ) -> io::Result<()> {
        let (_, pfd) = self.node(parent)?;
        let (np, npfd) = self.node(newparent)?;
        self.lower.call(Op::Rename, || {
            sys::renameat2(pfd.as_fd(), name, npfd.as_fd(), newname, flags)
        })?;
        if !self.store.uses_handles() {
            self.store.renamed(&np, npfd.as_fd(), newname);
            if flags & libc::RENAME_EXCHANGE != 0 {
                let p = self.store.get(parent.0)?;
                self.store.renamed(&p, pfd.as_fd(), name);
            }
        }
        Ok(())
    }

    pub(crate) fn do_link(
        &self,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
    ) -> io::Result<(FileAttr, Generation)> {
        let (_, fd) = self.node(ino)?;
        let (np, npfd): (Arc<Inode>, Arc<OwnedFd>) = self.node(newparent)?;
        self.lower.call(Op::Link, || {
            sys::link_fd(fd.as_fd(), npfd.as_fd(), newname, self.store.uses_handles())
        })?;
        self.entry(Op::Link, &np, &npfd, newname, false)
    }
}
