//! Extended attributes: set and remove on every branch (undone where a later branch refuses),
//! get and list from one. RAIF's own record (`user.raif`) is neither shown nor changeable.

use fsprof_fuse::profiled::ready;
use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;

use fsprof_fuse::errno::{err, errno};
use fsprof_fuse::ops::Op;
use fsprof_fuse::sys;
use fsprof_fuse::xattr::{reply_sized, visible_names};
use fuser::{INodeNo, ReplyXattr};

use super::Raif;
use crate::inode::Inode;
use crate::layout::XATTR;

/// Whether `name` is one of RAIF's own attributes.
pub(crate) fn ours(name: &[u8]) -> bool {
    name.starts_with(XATTR.as_bytes())
}

/// Reads a whole attribute value (or name list) with `get(buf)`, sizing the buffer first.
pub(crate) fn read_sized(
    mut get: impl FnMut(&mut [u8]) -> io::Result<usize>,
) -> io::Result<Vec<u8>> {
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

impl Raif {
    /// The value of attribute `name` of `inode` on branch `b` (`None` if unset). Asked by
    /// parent and name (one call, nothing opened) unless it is a directory or an open file.
    fn value(
        &self,
        inode: &Arc<Inode>,
        b: usize,
        name: &OsStr,
        op: Op,
    ) -> io::Result<Option<Vec<u8>>> {
        let br = self.bs.get(b);
        let fd = if inode.is_dir() {
            Some(self.dir_fd(inode, b, op)?)
        } else {
            inode.open_part(b)
        };
        let r = if let Some(fd) = fd {
            read_sized(|buf| br.call(op, || sys::getxattr_fd(fd.as_fd(), name, buf)))
        } else {
            let parent = inode
                .with_loc(|p, _| p.cloned())
                .ok_or_else(|| err(libc::EIO))?;
            let pfd = self.dir_fd(&parent, b, op)?;
            inode.with_loc(|_, own| {
                read_sized(|buf| br.call(op, || sys::getxattr_at(pfd.as_fd(), own, name, buf)))
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
        ino: INodeNo,
        name: &OsStr,
        value: Option<&[u8]>,
        flags: i32,
        op: Op,
    ) -> io::Result<()> {
        if ours(name.as_bytes()) {
            return Err(err(libc::EPERM));
        }
        let inode = self.inodes.get(ino.0)?;
        let old = self.on_one(
            self.first_for(&inode),
            self.answering(&inode),
            "getxattr",
            |b| self.value(&inode, b, name, op),
        )?;
        let set = |b: usize, fd: &Arc<OwnedFd>, v: Option<&[u8]>, flags: i32| {
            let br = self.bs.get(b);
            match v {
                Some(v) => br.call(op, || sys::setxattr_fd(fd.as_fd(), name, v, flags)),
                None => br.call(op, || sys::removexattr_fd(fd.as_fd(), name)),
            }
        };
        let mut undo = |b: usize, fd: &Arc<OwnedFd>| set(b, fd, old.as_deref(), 0);
        let raised = self.before_attr_change(&inode, op);
        let done = self.fan_out(
            op.name(),
            |b| self.obj_fd(&inode, b, op),
            |b, fd| set(b, fd, value, flags),
            Some(&mut undo),
        )?;
        self.after_attr_change(&inode, raised, done, op);
        Ok(())
    }

    pub(crate) fn do_setxattr(
        &self,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        position: u32,
    ) -> io::Result<()> {
        if position != 0 {
            return Err(err(libc::EINVAL));
        }
        self.change_xattr(ino, name, Some(value), flags, Op::Setxattr)
    }

    pub(crate) fn do_removexattr(&self, ino: INodeNo, name: &OsStr) -> io::Result<()> {
        self.change_xattr(ino, name, None, 0, Op::Removexattr)
    }

    pub(crate) fn do_getxattr(&self, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        if ours(name.as_bytes()) {
            return reply.error(errno(&ready(err(libc::ENODATA))));
        }
        let op = Op::Getxattr;
        let r = self.inodes.get(ino.0).and_then(|inode| {
            self.on_one(
                self.first_for(&inode),
                self.answering(&inode),
                "getxattr",
                |b| {
                    self.value(&inode, b, name, op)?
                        .ok_or_else(|| err(libc::ENODATA))
                },
            )
        });
        match r {
            Ok(v) => reply_sized(size, Ok(v.len()), &v, reply),
            Err(e) => reply.error(errno(&ready(e))),
        }
    }

    /// Lists the names but RAIF's own; `trusted.*` ones only for root (see
    /// [`visible_names`]).
    pub(crate) fn do_listxattr(&self, uid: u32, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let op = Op::Listxattr;
        let r = self.inodes.get(ino.0).and_then(|inode| {
            self.on_one(
                self.first_for(&inode),
                self.answering(&inode),
                "listxattr",
                |b| {
                    let fd = self.obj_fd(&inode, b, op)?;
                    let br = self.bs.get(b);
                    read_sized(|buf| br.call(op, || sys::listxattr_fd(fd.as_fd(), buf)))
                },
            )
        });
        let r = r.map(|mut list| {
            let n = visible_names(&mut list, uid == 0, ours);
            list.truncate(n);
            list
        });
        match r {
            Ok(list) => reply_sized(size, Ok(list.len()), &list, reply),
            Err(e) => reply.error(errno(&ready(e))),
        }
    }
}
