//! Directory operations: opendir, readdir, readdirplus, releasedir (a directory's fsync is one
//! call, in the [`FileSystem`](crate::filesystem::FileSystem) implementation).
//!
//! A directory handle is a key into the table of open [`DirCursor`]s.

use std::ffi::OsStr;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;

use super::Passthrough;
use crate::filesystem::{
    Attr, DirPlusSink, DirSink, Entry, FileType, FopenFlags, Ino, Key, Opened, Request,
};
use crate::passthrough::inode_store::Inode;
use crate::protocol::errno::err;
use crate::protocol::ops::Sys;
use crate::sys;
use crate::toolkit::dircursor::DirCursor;

impl Passthrough {
    pub(crate) fn do_opendir(
        &self,
        req: &Request,
        ino: Ino,
        flags: i32,
    ) -> io::Result<Opened<Key>> {
        let inode = self.store.get(ino.0)?;
        let f = (flags & libc::O_ACCMODE & !libc::O_WRONLY) | libc::O_RDONLY | libc::O_DIRECTORY;
        let fd = self.store.open_pinned(self.lower.via(req), &inode, f)?;
        let fh = self.dirs.insert(DirCursor::new(fd));
        Ok(Opened::new(Key::new(fh), FopenFlags::empty()))
    }

    pub(crate) fn do_releasedir(&self, req: &Request, ino: Ino, dh: Key) {
        let h = self.dirs.remove(dh.get());
        if let Ok(inode) = self.store.get(ino.0) {
            self.store.unpin(&inode);
        }
        // The directory's descriptor is closed with its last holder (a readdir still running
        // on it holds it a moment longer).
        if let Some(h) = h.and_then(Arc::into_inner) {
            self.lower.via(req).close(h.into_fd());
        }
    }

    pub(crate) fn dir(&self, dh: &Key) -> io::Result<Arc<DirCursor>> {
        self.dirs.get(dh.get()).ok_or_else(|| err(libc::EBADF))
    }

    pub(crate) fn do_readdir(
        &self,
        req: &Request,
        ino: Ino,
        dh: &Key,
        offset: u64,
        out: &mut dyn DirSink,
    ) -> io::Result<()> {
        let h = self.dir(dh)?;
        h.walk(req, offset, &self.lower, |e| {
            if self.hidden(ino.0, e.name) {
                return Ok(true);
            }
            let kind = h.entry_type(self.lower.via(req), e);
            Ok(!out.add(e.ino, e.next_off as u64, kind, OsStr::from_bytes(e.name)))
        })
    }

    pub(crate) fn do_readdirplus(
        &self,
        req: &Request,
        ino: Ino,
        dh: &Key,
        offset: u64,
        out: &mut dyn DirPlusSink,
    ) -> io::Result<()> {
        let h = self.dir(dh)?;
        let parent = self.store.get(ino.0)?;
        h.walk(req, offset, &self.lower, |e| {
            let name = OsStr::from_bytes(e.name);
            if self.hidden(ino.0, e.name) {
                return Ok(true);
            }
            if e.name == b"." || e.name == b".." {
                // The kernel makes no dentry for these and counts no lookup.
                let entry = self.bare_entry(e.ino, libc::S_IFDIR);
                return Ok(!out.add(&entry, e.next_off as u64, name));
            }
            let found = self
                .lower
                .call(req, Sys::Statx, || sys::statat(h.fd().as_fd(), name))
                .and_then(|st| {
                    Ok((
                        self.store.lookup(
                            self.lower.via(req),
                            &parent,
                            h.fd().as_fd(),
                            name,
                            &st,
                            false,
                        )?,
                        st,
                    ))
                });
            let (inode, st): (Arc<Inode>, sys::Stat) = match found {
                Ok(x) => x,
                // Removed since getdents: skip it.
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(true),
                Err(_) => {
                    // Listed without attributes (node id 0: the kernel makes no dentry and
                    // counts no lookup) rather than failing the whole listing.
                    let mode =
                        FileType::from_dirent(e.d_type).map_or(libc::S_IFREG, FileType::mode_bits);
                    return Ok(!out.add(&self.bare_entry(0, mode), e.next_off as u64, name));
                }
            };
            let full = out.add(&self.entry_of(&inode, &st), e.next_off as u64, name);
            if full {
                // Not sent: the kernel will not count this lookup.
                self.store.forget(self.lower.via(req), inode.nodeid, 1);
            }
            Ok(!full)
        })
    }

    /// An entry with only a node id and a type (no lookup is counted for it).
    fn bare_entry(&self, ino: u64, mode: u32) -> Entry {
        Entry {
            attr: Attr {
                ino,
                mode,
                nlink: 1,
                blksize: 4096,
                ..Attr::default()
            },
            generation: 0,
            entry_ttl: self.cfg.entry_ttl,
            attr_ttl: self.cfg.attr_ttl,
        }
    }
}
