//! Extended attributes: setxattr, getxattr, listxattr, removexattr.

use std::ffi::OsStr;
use std::io;
use std::os::fd::AsFd;

use fuser::{INodeNo, ReplyXattr};

use super::{Passthrough, with_buf};
use crate::errno::{err, errno};
use crate::ops::Op;
use crate::profiled::ready;
use crate::sys;
use crate::xattr::{XATTR_MAX, reply_sized, visible_names};

impl Passthrough {
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
        let (_, fd) = self.node(ino)?;
        self.lower.call(Op::Setxattr, || {
            sys::setxattr_fd(fd.as_fd(), name, value, flags)
        })
    }

    pub(crate) fn do_getxattr(&self, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let (_, fd) = match self.node(ino) {
            Ok(n) => n,
            Err(e) => return reply.error(errno(&ready(e))),
        };
        let len = (size as usize).min(XATTR_MAX);
        with_buf(len, |buf| {
            let r = self
                .lower
                .call(Op::Getxattr, || sys::getxattr_fd(fd.as_fd(), name, buf));
            reply_sized(size, r, buf, reply)
        })
    }

    /// Lists the names; `trusted.*` ones only for root (see [`visible_names`]).
    pub(crate) fn do_listxattr(&self, uid: u32, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let (_, fd) = match self.node(ino) {
            Ok(n) => n,
            Err(e) => return reply.error(errno(&ready(e))),
        };
        with_buf(XATTR_MAX, |buf| {
            let r = self
                .lower
                .call(Op::Listxattr, || sys::listxattr_fd(fd.as_fd(), buf));
            let r = r.map(|n| visible_names(&mut buf[..n], uid == 0, |_| false));
            reply_sized(size, r, buf, reply)
        })
    }

    pub(crate) fn do_removexattr(&self, ino: INodeNo, name: &OsStr) -> io::Result<()> {
        let (_, fd) = self.node(ino)?;
        self.lower
            .call(Op::Removexattr, || sys::removexattr_fd(fd.as_fd(), name))
    }
}
