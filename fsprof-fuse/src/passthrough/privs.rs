//! Setuid and setgid bits cleared where the kernel clears them on a local file system, and the
//! kernel's attributes right at once.
//!
//! With `FUSE_HANDLE_KILLPRIV_V2` (asked for by every fsprof file system, see [`crate::toolkit::init_flags`])
//! the clearing is the file system's: the daemon runs as root, and root's writes keep the bits.
//! The kernel says when: `FUSE_WRITE_KILL_SUIDGID` on a write, `FATTR_KILL_SUIDGID` on a
//! truncation or a change of owner, `FUSE_OPEN_KILL_SUIDGID` on an `O_TRUNC` open (each sent
//! when the caller lacks `CAP_FSETID`), and a `SETATTR` that changes nothing before a write,
//! `fallocate` or `copy_file_range` by such a caller of a file the kernel holds to have the
//! bits (see [`crate::filesystem::SetAttr::is_empty`]). Which bits go is the kernel's own rule
//! ([`crate::toolkit::attr::mode_after_change`]): setuid, setgid with group execute, and setgid without
//! it when the caller is not in the file's group.
//!
//! A `SETATTR` reply carries the new attributes. A write's, an open's and a `fallocate`'s carry
//! none, and the kernel keeps the mode it had: where one of those changed the mode, the kernel
//! is told its attributes are stale ([`crate::sys::fuse::Device::invalidate_attributes`])
//! before the reply, so the next `stat` shows the new mode. A write by the owner, or to a file
//! without the bits, costs what it did: the `fstat` the check needs, nothing more.
//!
//! A daemon that is not root lacks `CAP_FSETID` itself: LOWER clears the bits on the writes it
//! makes, and nothing is done here but what `SETATTR` asks (a `chmod` it may not be allowed).

use std::io;
use std::os::fd::BorrowedFd;

use super::Passthrough;
use crate::filesystem::{Ino, Request, SetAttr};
use crate::protocol::ops::Sys;
use crate::sys::{self, Stat};

impl Passthrough {
    /// After a change of the regular file `fd` (node `ino`) by a caller without `CAP_FSETID`:
    /// clears its setuid/setgid bits by the kernel's rule (`in_group` tells whether the caller
    /// is in a group) and, if its mode changed, tells the kernel. The caller's change has
    /// happened: an error here is logged, not answered.
    pub(crate) fn privileges_dropped(
        &self,
        req: &Request,
        ino: Ino,
        fd: BorrowedFd,
        in_group: impl FnOnce(u32) -> bool,
    ) {
        if !self.privileged {
            return;
        }
        match self.clear_privileges(req, fd, None, in_group) {
            Ok(Some(_)) => self.attributes_changed(ino),
            Ok(None) => {}
            Err(e) => log::warn!("node {}: cannot clear setuid/setgid bits: {e}", ino.0),
        }
    }

    /// Clears the setuid/setgid bits of `fd` (`fstat`ed as `st`, or now) that a change by a
    /// caller without `CAP_FSETID` clears ([`crate::toolkit::attr::mode_after_change`]); returns the
    /// object's attributes after the `chmod`, or `None` when nothing changed.
    pub(crate) fn clear_privileges(
        &self,
        req: &Request,
        fd: BorrowedFd,
        st: Option<&Stat>,
        in_group: impl FnOnce(u32) -> bool,
    ) -> io::Result<Option<Stat>> {
        let now;
        let st = match st {
            Some(st) => st,
            None => {
                now = self.lower.call(req, Sys::Statx, || sys::fstat(fd))?;
                &now
            }
        };
        let Some(mode) = crate::toolkit::attr::mode_after_change(st.mode, st.gid, in_group) else {
            return Ok(None);
        };
        self.lower
            .call(req, Sys::Chmod, || sys::chmod_fd(fd, mode))?;
        self.lower
            .call(req, Sys::Statx, || sys::fstat(fd))
            .map(Some)
    }

    /// The attributes of the regular file `fd` after a `SETATTR` (`st`: its `fstat` after the
    /// changes asked; `old_gid`: its group before a change of group by a caller other than
    /// root), with the setuid/setgid bits cleared that the kernel asks to clear: before a
    /// write, `fallocate` or `copy_file_range` (a `SETATTR` that changes nothing), after a
    /// truncation (`FATTR_KILL_SUIDGID`), after a change of group (LOWER has cleared what a
    /// change of owner by root clears; the setgid bit of a file without group execute goes
    /// too when the caller was outside its group).
    pub(crate) fn setattr_privileges(
        &self,
        req: &Request,
        set: &SetAttr,
        fd: BorrowedFd,
        st: Stat,
        old_gid: Option<u32>,
    ) -> io::Result<Stat> {
        let in_group = |g| crate::toolkit::create_as::in_group(req, g);
        let cleared = if set.is_empty() {
            // Root stands for a caller with CAP_FSETID (chown(path, -1, -1)), whose rule keeps
            // the setgid bit of a file without group execute. Never an error: the caller's
            // write waits for this answer (a daemon that is not root may not chmod the file;
            // LOWER then clears the bits at the write).
            self.clear_privileges(req, fd, Some(&st), |g| req.uid == 0 || in_group(g))
                .unwrap_or_else(|e| {
                    log::debug!("cannot clear setuid/setgid bits: {e}");
                    None
                })
        } else if !set.kill_suidgid || set.mode.is_some() || !self.privileged {
            None
        } else if set.size.is_some() {
            self.clear_privileges(req, fd, Some(&st), in_group)?
        } else if let Some(gid) = old_gid {
            self.clear_privileges(req, fd, Some(&st), |_| in_group(gid))?
        } else {
            None
        };
        Ok(cleared.unwrap_or(st))
    }

    /// A new object `fd` (`fstat`ed as `st`), created in mode `asked` by the caller of `req`:
    /// gives it back the setgid bit that LOWER took. The kernel has already cleared the bit of
    /// a file made in a setgid directory by a caller outside the directory's group, as
    /// `inode_init_owner` would, with the caller's groups; LOWER clears it again with those of
    /// the daemon's thread, which has the caller's fs uid and gid but not its supplementary
    /// groups, so a caller in the group through one of those loses a bit it keeps locally.
    /// Returns the attributes after the `chmod`, or `None` when nothing changed. Directories
    /// inherit the bit, and are never asked about.
    pub(crate) fn keep_setgid(
        &self,
        req: &Request,
        fd: BorrowedFd,
        st: &Stat,
        asked: u32,
    ) -> io::Result<Option<Stat>> {
        let lost = asked & libc::S_ISGID != 0
            && st.mode & libc::S_ISGID == 0
            && st.mode & libc::S_IFMT != libc::S_IFDIR;
        if !lost || !self.privileged {
            return Ok(None);
        }
        let mode = (st.mode & 0o7777) | libc::S_ISGID;
        self.lower
            .call(req, Sys::Chmod, || sys::chmod_fd(fd, mode))?;
        self.lower
            .call(req, Sys::Statx, || sys::fstat(fd))
            .map(Some)
    }

    /// Tells the kernel that the attributes it holds of `ino` are stale (a reply that carries
    /// none follows a change of them).
    pub(crate) fn attributes_changed(&self, ino: Ino) {
        if let Err(e) = self.device.invalidate_attributes(ino.0) {
            // ENOENT: the kernel holds no such node; ENODEV: not mounted (tests).
            if !matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENODEV)) {
                log::warn!(
                    "node {}: cannot invalidate the kernel's attributes: {e}",
                    ino.0
                );
            }
        }
    }
}
