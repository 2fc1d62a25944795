//! Extended attributes: set and remove on every branch (undone where a later branch refuses),
//! get and list from one. RAIF's own record (`user.raif`) is neither shown nor changeable.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;

use fsprof_fuse::filesystem::{Ino, Request};
use fsprof_fuse::protocol::errno::err;
use fsprof_fuse::protocol::ops::Sys;
use fsprof_fuse::sys;
use fsprof_fuse::toolkit::xattr_names::visible_names_into;

use super::{Held, Raif};
use crate::inode::Inode;
use crate::layout::ours;
use crate::offline::read_sized;

impl Raif {
    /// The value of attribute `name` of `inode` on branch `b` (`None` if unset). Asked by
    /// parent and name (one call, nothing opened) unless it is a directory or an open file.
    fn value(
        &self,
        inode: &Arc<Inode>,
        b: usize,
        name: &OsStr,
        req: &Request,
    ) -> io::Result<Option<Vec<u8>>> {
        let br = self.bs.get(b);
        let fd = if inode.is_dir() {
            Some(self.dir_fd(inode, b, req)?)
        } else {
            inode.open_part(b)
        };
        let r = if let Some(fd) = fd {
            read_sized(|buf| {
                br.call(req, Sys::Getxattr, || {
                    sys::getxattr_fd(fd.as_fd(), name, buf)
                })
            })
        } else {
            let parent = inode
                .with_loc(|p, _| p.cloned())
                .ok_or_else(|| err(libc::EIO))?;
            let pfd = self.dir_fd(&parent, b, req)?;
            inode.with_loc(|_, own| {
                read_sized(|buf| {
                    br.call(req, Sys::Lgetxattr, || {
                        sys::getxattr_at(pfd.as_fd(), own, name, buf)
                    })
                })
            })
        };
        match r {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.raw_os_error() == Some(libc::ENODATA) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Sets (`Some`) or removes (`None`) attribute `name` on every branch; a later branch's
    /// refusal puts the old value back on the branches done.
    fn change_xattr(
        &self,
        req: &Request,
        ino: Ino,
        name: &OsStr,
        value: Option<&[u8]>,
        flags: i32,
    ) -> io::Result<()> {
        if ours(name.as_bytes()) {
            return Err(err(libc::EPERM));
        }
        let inode = self.inodes.get(ino.0)?;
        let old = self.on_one(
            self.first_for(&inode),
            self.answering(&inode),
            "getxattr",
            |b| self.value(&inode, b, name, req),
        )?;
        let set = |b: usize, fd: &Arc<OwnedFd>, v: Option<&[u8]>, flags: i32| {
            let br = self.bs.get(b);
            match v {
                Some(v) => br.call(req, Sys::Setxattr, || {
                    sys::setxattr_fd(fd.as_fd(), name, v, flags)
                }),
                None => br.call(req, Sys::Removexattr, || {
                    sys::removexattr_fd(fd.as_fd(), name)
                }),
            }
        };
        let mut undo = |b: usize, fd: &Held| set(b, fd, old.as_deref(), 0);
        let raised = self.before_attr_change(&inode, req);
        let done = self.fan_out(
            req.op.name(),
            |b| self.obj_fd(&inode, b, req),
            |b, fd| set(b, fd, value, flags),
            Some(&mut undo),
        )?;
        self.after_attr_change(&inode, raised, done, req);
        Ok(())
    }

    pub(crate) fn do_setxattr(
        &self,
        req: &Request,
        ino: Ino,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        position: u32,
    ) -> io::Result<()> {
        if position != 0 {
            return Err(err(libc::EINVAL));
        }
        self.change_xattr(req, ino, name, Some(value), flags)
    }

    pub(crate) fn do_removexattr(&self, req: &Request, ino: Ino, name: &OsStr) -> io::Result<()> {
        self.change_xattr(req, ino, name, None, 0)
    }

    /// The value of `name` into `buf` (empty: the length only; `ERANGE` if it does not fit).
    pub(crate) fn do_getxattr(
        &self,
        req: &Request,
        ino: Ino,
        name: &OsStr,
        buf: &mut [u8],
    ) -> io::Result<usize> {
        if ours(name.as_bytes()) {
            return Err(err(libc::ENODATA));
        }
        let inode = self.inodes.get(ino.0)?;
        let v = self.on_one(
            self.first_for(&inode),
            self.answering(&inode),
            "getxattr",
            |b| {
                self.value(&inode, b, name, req)?
                    .ok_or_else(|| err(libc::ENODATA))
            },
        )?;
        if !buf.is_empty() {
            buf.get_mut(..v.len())
                .ok_or_else(|| err(libc::ERANGE))?
                .copy_from_slice(&v);
        }
        Ok(v.len())
    }

    /// Lists the names but RAIF's own into `buf` (as [`Raif::do_getxattr`]); `trusted.*` ones
    /// only for root (see [`fsprof_fuse::toolkit::xattr_names::visible_names`]).
    pub(crate) fn do_listxattr(
        &self,
        req: &Request,
        ino: Ino,
        buf: &mut [u8],
    ) -> io::Result<usize> {
        let inode = self.inodes.get(ino.0)?;
        visible_names_into(req.uid == 0, ours, buf, |all| {
            self.on_one(
                self.first_for(&inode),
                self.answering(&inode),
                "listxattr",
                |b| {
                    let fd = self.obj_fd(&inode, b, req)?;
                    self.bs
                        .get(b)
                        .call(req, Sys::Listxattr, || sys::listxattr_fd(fd.as_fd(), all))
                },
            )
        })
    }
}
