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

/// Largest attribute value or name list (Linux's `XATTR_SIZE_MAX`).
const XATTR_MAX: usize = 64 * 1024;

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

    /// Replies with the size when `size` is 0, else with the value (`ERANGE` if larger).
    fn reply_sized(size: u32, r: io::Result<usize>, buf: &[u8], reply: ReplyXattr) {
        match ready(r) {
            Ok(n) if size == 0 => reply.size(n as u32),
            Ok(n) if n > size as usize => reply.error(errno(&err(libc::ERANGE))),
            Ok(n) => reply.data(&buf[..n]),
            Err(e) => reply.error(errno(&e)),
        }
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
            Self::reply_sized(size, r, buf, reply)
        })
    }

    /// Lists the names; `trusted.*` ones only for root, as a local file system does (the daemon
    /// reads them with its own privilege).
    pub(crate) fn do_listxattr(&self, uid: u32, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let (_, fd) = match self.node(ino) {
            Ok(n) => n,
            Err(e) => return reply.error(errno(&ready(e))),
        };
        with_buf(XATTR_MAX, |buf| {
            let r = self
                .lower
                .call(Op::Listxattr, || sys::listxattr_fd(fd.as_fd(), buf));
            let r = r.map(|n| {
                if uid == 0 {
                    n
                } else {
                    drop_trusted(&mut buf[..n])
                }
            });
            Self::reply_sized(size, r, buf, reply)
        })
    }

    pub(crate) fn do_removexattr(&self, ino: INodeNo, name: &OsStr) -> io::Result<()> {
        let (_, fd) = self.node(ino)?;
        self.lower
            .call(Op::Removexattr, || sys::removexattr_fd(fd.as_fd(), name))
    }
}

/// Removes `trusted.*` names from a NUL-separated list in place; returns the new length.
fn drop_trusted(list: &mut [u8]) -> usize {
    let mut out = 0;
    let mut start = 0;
    while start < list.len() {
        let end = list[start..]
            .iter()
            .position(|&b| b == 0)
            .map_or(list.len(), |p| start + p + 1);
        if !list[start..end].starts_with(b"trusted.") {
            list.copy_within(start..end, out);
            out += end - start;
        }
        start = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::drop_trusted;

    #[test]
    fn trusted_names_are_dropped() {
        let mut l = b"user.a\0trusted.x\0security.s\0trusted.y\0".to_vec();
        let n = drop_trusted(&mut l);
        assert_eq!(&l[..n], b"user.a\0security.s\0");
        let mut empty: Vec<u8> = Vec::new();
        assert_eq!(drop_trusted(&mut empty), 0);
    }
}
