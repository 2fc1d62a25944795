//! Attribute operations: getattr, setattr (owner, mode, times and truncation, on every branch,
//! undone where a later one refuses), readlink, and the records and generations a change of
//! attributes writes.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use fsprof_fuse::filesystem::{Attr, Ino, Key, Request, SetAttr};
use fsprof_fuse::protocol::errno::err;
use fsprof_fuse::protocol::ops::Sys;
use fsprof_fuse::sys::{self, SetTime};
use fsprof_fuse::toolkit::attr::set_time;
use fsprof_fuse::toolkit::fdcache::Fd;

use super::{Held, Raif};
use crate::inode::{FileState, Inode};
use crate::layout::{Meta, XATTR};

impl Raif {
    pub(crate) fn do_getattr(&self, req: &Request, ino: Ino, fh: Option<&Key>) -> io::Result<Attr> {
        let inode = self.inodes.get(ino.0)?;
        if let Some(h) = fh
            .filter(|_| inode.file.is_some())
            .and_then(|fh| self.files.get(fh.get()))
        {
            return self.fstat_open(&h, req);
        }
        self.getattr_of(&inode, req)
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn do_setattr(
        &self,
        req: &Request,
        ino: Ino,
        set: &SetAttr,
        fh: Option<&Key>,
    ) -> io::Result<Attr> {
        let SetAttr {
            mode,
            uid,
            gid,
            size,
            atime,
            mtime,
            kill_suidgid: _,
        } = *set;
        let inode = self.inodes.get(ino.0)?;
        let old_gid = self.group_before(&inode, req, set)?;
        if let Some(size) = size {
            let Some(file) = inode.file.as_ref() else {
                return Err(err(if inode.is_dir() {
                    libc::EISDIR
                } else {
                    libc::EINVAL
                }));
            };
            match fh.and_then(|fh| self.files.get(fh.get())) {
                Some(h) => {
                    let fds = self.fds(&h, req)?;
                    self.truncate_file(&inode, fds.parts(), fds.sums(), size, req)?
                }
                None => {
                    let fds = self.parts_of(&inode, file, req)?;
                    let r = self.truncate_unopened(&inode, file, &fds, size, req);
                    // Parts opened for this request alone are closed as its calls.
                    self.bs.release_all(req, fds.into_vec());
                    r?;
                }
            }
        }
        if mode.is_some() || uid.is_some() || gid.is_some() || atime.is_some() || mtime.is_some() {
            if let Some(f) = &inode.file {
                if mtime.is_some() {
                    // Explicit times win over the modification time set at close.
                    f.touched.store(false, Ordering::Release);
                }
            }
            self.set_attrs(
                req,
                &inode,
                mode,
                uid,
                gid,
                set_time(atime),
                set_time(mtime),
            )?;
        }
        self.setattr_privileges(&inode, req, set, old_gid)?;
        self.getattr_of(&inode, req)
    }

    /// Truncates `inode`, a file without a handle, whose parts are `fds`, to `size`.
    fn truncate_unopened(
        &self,
        inode: &Arc<Inode>,
        file: &FileState,
        fds: &[Option<Fd>],
        size: u64,
        req: &Request,
    ) -> io::Result<()> {
        let empty = size == 0 && inode.opens() == 0;
        let gain = super::open::Gain::when(empty);
        let sums = self.sums_of(inode, file, fds, req, gain)?;
        let r = self.truncate_file(inode, fds, &sums, size, req);
        // No handle to write back the checksums it changed later: now.
        if inode.opens() == 0 {
            super::release_sums(&self.bs, file, Some(req));
        }
        let width = file.layout.width as usize;
        for (b, fd) in sums.into_vec().into_iter().enumerate() {
            if let Some((h, fd)) = crate::sums::home(b, width).zip(fd) {
                self.bs.release(req, h, fd);
            }
        }
        r
    }

    /// Mode, owner and times on every branch, restored where a later branch refuses.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn set_attrs(
        &self,
        req: &Request,
        inode: &Arc<Inode>,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        atime: SetTime,
        mtime: SetTime,
    ) -> io::Result<()> {
        let old = self.on_one(self.first_for(inode), self.answering(inode), "stat", |b| {
            self.stat_on(inode, b, req)
        })?;
        let times = !matches!((atime, mtime), (SetTime::Omit, SetTime::Omit));
        let apply = |b: usize,
                     fd: &Arc<OwnedFd>,
                     mode: Option<u32>,
                     owner: Option<(u32, u32)>,
                     t: Option<(SetTime, SetTime)>| {
            let br = self.bs.get(b);
            if let Some(m) = mode {
                br.call(req, Sys::Chmod, || sys::chmod_fd(fd.as_fd(), m & 0o7777))?;
            }
            if let Some((u, g)) = owner {
                br.call(req, Sys::Fchownat, || sys::chown_fd(fd.as_fd(), u, g))?;
            }
            if let Some((a, m)) = t {
                br.call(req, Sys::Utimensat, || sys::utimens_fd(fd.as_fd(), a, m))?;
            }
            Ok(())
        };
        let owner = (uid.is_some() || gid.is_some())
            .then(|| (uid.unwrap_or(u32::MAX), gid.unwrap_or(u32::MAX)));
        let mut undo = |b: usize, fd: &Held| {
            apply(
                b,
                fd,
                mode.map(|_| old.mode),
                owner.map(|_| (old.uid, old.gid)),
                times.then_some((
                    SetTime::At(old.atime.0, old.atime.1),
                    SetTime::At(old.mtime.0, old.mtime.1),
                )),
            )
        };
        let raised = self.before_attr_change(inode, req);
        let done = self.fan_out(
            "setattr",
            |b| self.obj_fd(inode, b, req),
            |b, fd| apply(b, fd, mode, owner, times.then_some((atime, mtime))),
            Some(&mut undo),
        )?;
        self.after_attr_change(inode, raised, done, req);
        Ok(())
    }

    /// Before a change of `inode`'s owner, mode, times or extended attributes: if a branch is
    /// failed, the change will miss it, so a regular file's generation is raised first (as for
    /// a write), and the branch is stale for the file when it comes back: its old mode or
    /// attributes are never served. The raised record goes to the online branches now, and to
    /// a stale branch only once the change reached it too ([`Raif::after_attr_change`]).
    /// Directories, symlinks and special files need no generation: only online branches answer
    /// for them. Returns whether the generation was raised.
    pub(crate) fn before_attr_change(&self, inode: &Arc<Inode>, req: &Request) -> bool {
        let Some(file) = &inode.file else {
            return false;
        };
        if self.bs.failed_mask() == 0 {
            return false;
        }
        let epoch = self.bs.epoch();
        let _shared = file.lock.read();
        if file.generation.fetch_max(epoch, Ordering::AcqRel) >= epoch {
            return false;
        }
        self.write_record_at(inode, file, self.bs.online_mask(), req);
        true
    }

    /// After such a change reached the branches `done`: a stale branch the file is current on
    /// gets the raised record if it got the change, and is out of date for the file if it did
    /// not (a stale branch's refusal is not an answer).
    pub(crate) fn after_attr_change(
        &self,
        inode: &Arc<Inode>,
        raised: bool,
        done: u64,
        req: &Request,
    ) {
        let Some(file) = &inode.file else { return };
        let current_stale = self.bs.stale_mask() & !file.down(&self.bs);
        let missed = current_stale & !done;
        if missed != 0 {
            file.stale.fetch_or(missed, Ordering::AcqRel);
        }
        let mut mask = 0;
        if raised {
            mask = current_stale & done;
        } else if missed != 0 {
            // Raise it now; the branches that got the change get the record.
            let epoch = self.bs.epoch();
            if file.generation.fetch_max(epoch, Ordering::AcqRel) < epoch {
                mask = done & !file.down(&self.bs);
            }
        }
        if mask != 0 {
            let _shared = file.lock.read();
            self.write_record_at(inode, file, mask, req);
        }
    }

    /// Writes `file`'s record on the branches of `mask` it is usable on, by name (the file need
    /// not be open).
    fn write_record_at(&self, inode: &Arc<Inode>, file: &FileState, mask: u64, req: &Request) {
        let rec = Meta::File(file.meta()).encode();
        let Some(parent) = inode.with_loc(|p, _| p.cloned()) else {
            return;
        };
        let down = file.down(&self.bs);
        for b in (0..self.bs.len()).filter(|b| mask & !down & (1 << b) != 0) {
            let br = self.bs.get(b);
            let r = match inode.open_part(b) {
                // Open: through its part, whatever happened to its name.
                Some(fd) => self.set_record(file, b, fd.as_fd(), rec.as_bytes(), req),
                None => self.dir_fd(&parent, b, req).and_then(|pfd| {
                    inode.with_loc(|_, name| {
                        let x = OsStr::new(XATTR);
                        super::put_record(
                            file,
                            b,
                            rec.as_bytes(),
                            |buf| {
                                br.call(req, Sys::Lgetxattr, || {
                                    sys::getxattr_at(pfd.as_fd(), name, x, buf)
                                })
                            },
                            |v| {
                                br.call(req, Sys::Lsetxattr, || {
                                    sys::setxattr_at(pfd.as_fd(), name, x, v, 0)
                                })
                            },
                        )
                    })
                }),
            };
            if let Err(e) = r {
                if !self.bs.error(b, &e, "record") {
                    log::warn!("branch {b}: cannot write a file record: {e}");
                }
            }
        }
    }

    pub(crate) fn do_readlink(&self, req: &Request, ino: Ino, buf: &mut [u8]) -> io::Result<usize> {
        let inode = self.inodes.get(ino.0)?;
        self.on_one(self.first_for(&inode), self.readable(), "readlink", |b| {
            let fd = self.obj_fd(&inode, b, req)?;
            self.bs
                .get(b)
                .call(req, Sys::Readlinkat, || sys::readlink_fd(fd.as_fd(), buf))
        })
    }
}
