//! Setuid and setgid bits cleared on every part where the kernel clears them on a local file
//! system, and the kernel's attributes right at once: the passthrough's rules
//! (`fsprof_fuse::passthrough`'s `privs` module says when the kernel asks, and why), applied to
//! each branch's copy or part of a file, so that `getattr`, which answers from one of them,
//! shows the new mode whichever answers.

use std::io;
use std::sync::Arc;

use fsprof_fuse::filesystem::{Attr, Request, SetAttr};
use fsprof_fuse::sys::{SetTime, Stat};
use fsprof_fuse::toolkit::attr::mode_after_change;
use fsprof_fuse::toolkit::create_as::in_group;

use super::Raif;
use crate::inode::Inode;

impl Raif {
    /// The mode of `inode` as its first usable branch has it.
    fn stat_first(&self, inode: &Arc<Inode>, req: &Request) -> io::Result<Stat> {
        self.on_one(self.first_for(inode), self.answering(inode), "stat", |b| {
            self.stat_on(inode, b, req)
        })
    }

    /// Clears on every branch the setuid/setgid bits of the regular file `inode` that a change
    /// by a caller without `CAP_FSETID` clears (`in_group` tells whether the caller is in a
    /// group); returns whether its mode changed.
    pub(crate) fn clear_privileges(
        &self,
        inode: &Arc<Inode>,
        req: &Request,
        in_group: impl FnOnce(u32) -> bool,
    ) -> io::Result<bool> {
        if inode.file.is_none() {
            return Ok(false);
        }
        let st = self.stat_first(inode, req)?;
        let Some(mode) = mode_after_change(st.mode, st.gid, in_group) else {
            return Ok(false);
        };
        self.chmod_all(inode, req, mode).map(|()| true)
    }

    fn chmod_all(&self, inode: &Arc<Inode>, req: &Request, mode: u32) -> io::Result<()> {
        self.set_attrs(
            req,
            inode,
            Some(mode),
            None,
            None,
            SetTime::Omit,
            SetTime::Omit,
        )
    }

    /// After a write or an `O_TRUNC` open of `inode` by a caller without `CAP_FSETID`: clears
    /// its bits and, if its mode changed, tells the kernel (those replies carry no
    /// attributes). A daemon that is not root lacks `CAP_FSETID` itself, and the branches clear
    /// them on its writes. Errors are logged: the caller's change has happened.
    pub(crate) fn privileges_dropped(&self, inode: &Arc<Inode>, req: &Request) {
        if !self.privileged {
            return;
        }
        match self.clear_privileges(inode, req, |g| in_group(req, g)) {
            Ok(true) => {
                if let Err(e) = self.device.invalidate_attributes(inode.nodeid) {
                    if !matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENODEV)) {
                        log::warn!("cannot invalidate the kernel's attributes: {e}");
                    }
                }
            }
            Ok(false) => {}
            Err(e) => log::warn!("cannot clear setuid/setgid bits: {e}"),
        }
    }

    /// What a `SETATTR` of `inode` asks to clear, once its changes are made (`old_gid`: the
    /// group before a change of group by a caller other than root): before a write or
    /// `fallocate` (a `SETATTR` that changes nothing), after a truncation, after a change of
    /// group (each branch cleared what a change of owner by root clears; the setgid bit of a
    /// file without group execute goes too when the caller was outside its group).
    pub(crate) fn setattr_privileges(
        &self,
        inode: &Arc<Inode>,
        req: &Request,
        set: &SetAttr,
        old_gid: Option<u32>,
    ) -> io::Result<()> {
        if set.is_empty() {
            // Root stands for a caller with CAP_FSETID (chown(path, -1, -1)). Never an error:
            // the caller's write waits for this answer.
            let r = self.clear_privileges(inode, req, |g| req.uid == 0 || in_group(req, g));
            if let Err(e) = r {
                log::debug!("cannot clear setuid/setgid bits: {e}");
            }
            return Ok(());
        }
        if !set.kill_suidgid || set.mode.is_some() || !self.privileged {
            return Ok(());
        }
        if set.size.is_some() {
            self.clear_privileges(inode, req, |g| in_group(req, g))?;
        } else if let Some(gid) = old_gid {
            self.clear_privileges(inode, req, |_| in_group(req, gid))?;
        }
        Ok(())
    }

    /// The group of `inode` before a `SETATTR` changes it, where that matters (see
    /// [`Raif::setattr_privileges`]).
    pub(crate) fn group_before(
        &self,
        inode: &Arc<Inode>,
        req: &Request,
        set: &SetAttr,
    ) -> io::Result<Option<u32>> {
        if inode.file.is_none()
            || !set.kill_suidgid
            || set.gid.is_none()
            || req.uid == 0
            || !self.privileged
        {
            return Ok(None);
        }
        self.stat_first(inode, req).map(|st| Some(st.gid))
    }

    /// A new object `inode` made in mode `asked` (its attributes `attr`): gives it back, on
    /// every branch, the setgid bit the branches took (see the passthrough's `keep_setgid`:
    /// the kernel has applied the rule with the caller's groups, the branches again with the
    /// daemon's thread's). Returns whether the mode changed.
    pub(crate) fn keep_setgid(
        &self,
        inode: &Arc<Inode>,
        req: &Request,
        attr: &Attr,
        asked: u32,
    ) -> io::Result<bool> {
        let lost = asked & libc::S_ISGID != 0
            && attr.mode & libc::S_ISGID == 0
            && attr.mode & libc::S_IFMT != libc::S_IFDIR;
        if !lost || !self.privileged {
            return Ok(false);
        }
        self.chmod_all(inode, req, (attr.mode & 0o7777) | libc::S_ISGID)
            .map(|()| true)
    }
}
