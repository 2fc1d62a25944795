//! Directory listing: opendir, readdir, releasedir.
//!
//! A directory is listed from one branch (every branch has the same entries), chosen by node
//! id so listings spread; RAIF's own names at the root are left out. The offsets given to the
//! kernel are that branch's own cookies ([`fsprof_fuse::passthrough::walk`]). Entries carry
//! the branch's inode numbers, not the mount's: `stat` gives the mount's.
//!
//! While open, a directory's descriptors on every online branch are cached and pinned, so one
//! removed (or replaced by a rename) while open still answers `fstat` and the like, as on a
//! branch.

use fsprof_fuse::profiled::ready;
use std::ffi::OsStr;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;

use fsprof_fuse::errno::{err, errno};
use fsprof_fuse::ops::Op;
use fsprof_fuse::passthrough::{DirHandle, walk};
use fsprof_fuse::sys;
use fuser::{FileHandle, FopenFlags, INodeNo, ReplyDirectory};

use super::{Raif, trouble};
use crate::inode::Inode;

/// An open directory: a handle on one branch.
pub struct DirOpen {
    h: DirHandle,
    b: usize,
    inode: Arc<Inode>,
}

impl Raif {
    pub(crate) fn do_opendir(&self, ino: INodeNo) -> io::Result<(FileHandle, FopenFlags)> {
        let inode = self.inodes.get(ino.0)?;
        if !inode.is_dir() {
            return Err(err(libc::ENOTDIR));
        }
        let op = Op::Opendir;
        self.inodes.pin(&inode);
        let r = self.on_one(self.first_for(&inode), self.readable(), "opendir", |b| {
            let o = self.dir_fd(&inode, b, op)?;
            let d = self.bs.get(b).call(op, || {
                sys::reopen(o.as_fd(), libc::O_RDONLY | libc::O_DIRECTORY)
            })?;
            Ok((b, d))
        });
        let (b, fd) = match r {
            Ok(r) => r,
            Err(e) => {
                self.inodes.unpin(&inode);
                return Err(e);
            }
        };
        // The other online branches' descriptors too (usually cached already); one that
        // cannot be had now is looked up by name later, as for any directory.
        for other in (0..self.bs.len()).filter(|&o| o != b && self.readable() & (1 << o) != 0) {
            let _ = self.dir_fd(&inode, other, op);
        }
        let fh = self.dirs.insert(DirOpen {
            h: DirHandle::new(fd),
            b,
            inode,
        });
        Ok((FileHandle(fh), FopenFlags::empty()))
    }

    pub(crate) fn do_releasedir(&self, fh: FileHandle) {
        if let Some(d) = self.dirs.remove(fh.0) {
            self.inodes.unpin(&d.inode);
        }
    }

    pub(crate) fn do_readdir(
        &self,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let Some(d) = self.dirs.get(fh.0) else {
            return reply.error(errno(&ready(err(libc::EBADF))));
        };
        let lower = self.bs.get(d.b).lower();
        let r = walk(&d.h, offset, lower, Op::Readdir, |e| {
            if self.hidden(ino.0, e.name) {
                return Ok(true);
            }
            let kind = d.h.entry_type(e);
            Ok(!reply.add(
                INodeNo(e.ino),
                e.next_off as u64,
                kind,
                OsStr::from_bytes(e.name),
            ))
        });
        if let Err(e) = &r {
            if trouble(e) {
                self.bs.error(d.b, e, "readdir");
            }
        }
        match ready(r) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }
}
