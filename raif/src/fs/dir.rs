//! Directory listing: opendir, readdir, releasedir.
//!
//! A directory is listed from one branch (every branch has the same entries), chosen by node
//! id so listings spread; RAIF's own names at the root are left out. The offsets given to the
//! kernel are that branch's own cookies ([`fsprof_fuse::toolkit::dircursor`]). Entries carry
//! the branch's inode numbers, not the mount's: `stat` gives the mount's.
//!
//! While open, a directory's descriptors on every online branch are cached and pinned, so one
//! removed (or replaced by a rename) while open still answers `fstat` and the like, as on a
//! branch.

use std::ffi::OsStr;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;

use fsprof_fuse::filesystem::{DirSink, FopenFlags, Ino, Key, Opened, Request};
use fsprof_fuse::protocol::errno::err;
use fsprof_fuse::protocol::ops::Sys;
use fsprof_fuse::sys;
use fsprof_fuse::toolkit::dircursor::DirCursor;

use super::{Raif, trouble};
use crate::inode::Inode;

/// An open directory: a handle on one branch.
pub struct DirOpen {
    h: DirCursor,
    b: usize,
    inode: Arc<Inode>,
}

impl Raif {
    pub(crate) fn do_opendir(&self, req: &Request, ino: Ino) -> io::Result<Opened<Key>> {
        let inode = self.inodes.get(ino.0)?;
        if !inode.is_dir() {
            return Err(err(libc::ENOTDIR));
        }
        self.inodes.pin(&inode);
        let r = self.on_one(self.first_for(&inode), self.readable(), "opendir", |b| {
            let o = self.dir_fd(&inode, b, req)?;
            let d = self.bs.get(b).call(req, Sys::Openat, || {
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
            let _ = self.dir_fd(&inode, other, req);
        }
        let fh = self.dirs.insert(DirOpen {
            h: DirCursor::new(fd),
            b,
            inode,
        });
        Ok(Opened::new(Key::new(fh), FopenFlags::empty()))
    }

    /// The listing descriptor's `close(2)` is a call of `req` on its branch.
    pub(crate) fn do_releasedir(&self, req: &Request, fh: Key) {
        if let Some(d) = self.dirs.remove(fh.get()) {
            self.inodes.unpin(&d.inode);
            // The last holder (a readdir in flight keeps its own reference until it ends).
            if let Ok(d) = Arc::try_unwrap(d) {
                self.bs.close(req, d.b, d.h.into_fd());
            }
        }
    }

    pub(crate) fn do_readdir(
        &self,
        req: &Request,
        ino: Ino,
        fh: &Key,
        offset: u64,
        out: &mut dyn DirSink,
    ) -> io::Result<()> {
        let d = self.dirs.get(fh.get()).ok_or_else(|| err(libc::EBADF))?;
        let lower = self.bs.get(d.b).lower();
        let r = d.h.walk(req, offset, lower, |e| {
            if self.hidden(ino.0, e.name) {
                return Ok(true);
            }
            let kind = d.h.entry_type(lower.via(req), e);
            Ok(!out.add(e.ino, e.next_off as u64, kind, OsStr::from_bytes(e.name)))
        });
        if let Err(e) = &r {
            if trouble(e) {
                self.bs.error(d.b, e, "readdir");
            }
        }
        r
    }
}
