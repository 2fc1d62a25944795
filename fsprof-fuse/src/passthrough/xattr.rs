//! Extended attributes: setxattr, getxattr, listxattr, removexattr, the passthrough's
//! operations. The same concern one level down is the system calls they make
//! ([`crate::sys::xattr`]); which names a caller sees is [`crate::toolkit::xattr_names`].

use std::ffi::OsStr;
use std::io;
use std::os::fd::AsFd;

use super::Passthrough;
use crate::filesystem::{Ino, Request};
use crate::protocol::errno::err;
use crate::protocol::ops::Sys;
use crate::sys;
use crate::toolkit::xattr_names::visible_names_into;

impl Passthrough {
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
        let (_, fd) = self.node(req, ino)?;
        self.lower.call(req, Sys::Setxattr, || {
            sys::setxattr_fd(fd.as_fd(), name, value, flags)
        })
    }

    pub(crate) fn do_getxattr(
        &self,
        req: &Request,
        ino: Ino,
        name: &OsStr,
        buf: &mut [u8],
    ) -> io::Result<usize> {
        let (_, fd) = self.node(req, ino)?;
        self.lower.call(req, Sys::Getxattr, || {
            sys::getxattr_fd(fd.as_fd(), name, buf)
        })
    }

    /// Lists the names; `trusted.*` ones only for root (see [`crate::toolkit::xattr_names::visible_names`]).
    pub(crate) fn do_listxattr(
        &self,
        req: &Request,
        ino: Ino,
        buf: &mut [u8],
    ) -> io::Result<usize> {
        let (_, fd) = self.node(req, ino)?;
        visible_names_into(
            req.uid == 0,
            |_| false,
            buf,
            |all| {
                self.lower
                    .call(req, Sys::Listxattr, || sys::listxattr_fd(fd.as_fd(), all))
            },
        )
    }

    pub(crate) fn do_removexattr(&self, req: &Request, ino: Ino, name: &OsStr) -> io::Result<()> {
        let (_, fd) = self.node(req, ino)?;
        self.lower.call(req, Sys::Removexattr, || {
            sys::removexattr_fd(fd.as_fd(), name)
        })
    }
}
