//! Directory operations: opendir, readdir, readdirplus, fsyncdir.
//!
//! A directory handle holds a lower directory descriptor and a `getdents64` buffer. Offsets given
//! to the kernel are the lower file system's own `d_off` cookies, so a later `readdir` at any
//! offset seeks the lower directory there.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;

use fuser::{FileHandle, FileType, Generation, INodeNo, ReplyDirectory, ReplyDirectoryPlus};
use parking_lot::Mutex;

use super::Passthrough;
use crate::attr::{dirent_type, file_type, to_attr};
use crate::errno::errno;
use crate::inode::Inode;
use crate::ops::Op;
use crate::profiled::ready;
use crate::sys;

/// Bytes of directory entries read per `getdents64`.
const DIRBUF: usize = 32 * 1024;

/// An open directory.
pub struct DirHandle {
    fd: OwnedFd,
    state: Mutex<DirState>,
}

struct DirState {
    /// `getdents64` buffer: allocated (zeroed, once) at the first read, not at open. Zeroed
    /// because the kernel does not write the padding between records.
    buf: Vec<u8>,
    /// Bytes of `buf` filled by the last `getdents64`.
    len: usize,
    /// Position of the next unread entry in `buf`.
    pos: usize,
    /// Directory offset the next unread entry sits at (0 at the start).
    offset: i64,
}

impl DirHandle {
    /// A handle reading the open directory `fd` from its start.
    pub fn new(fd: OwnedFd) -> DirHandle {
        DirHandle {
            fd,
            state: Mutex::new(DirState {
                buf: Vec::new(),
                len: 0,
                pos: 0,
                offset: 0,
            }),
        }
    }

    /// The lower directory descriptor.
    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// File type of entry `e` of this directory: its `d_type`, or where that is unknown, what
    /// a `stat` of it says (a regular file if it is gone).
    pub fn entry_type(&self, e: &sys::DirEntry) -> FileType {
        dirent_type(e.d_type).unwrap_or_else(|| {
            sys::statat(self.fd.as_fd(), OsStr::from_bytes(e.name))
                .map(|st| file_type(st.mode))
                .unwrap_or(FileType::RegularFile)
        })
    }
}

/// Calls `emit(entry)` for entries from `offset` on until it returns `false` (reply full) or the
/// directory ends; an entry `emit` refused is read again next time. The `getdents64` and
/// `lseek` calls are recorded in `lower` as `op`.
pub fn walk(
    h: &DirHandle,
    offset: u64,
    lower: &super::Lower,
    op: Op,
    mut emit: impl FnMut(&sys::DirEntry) -> io::Result<bool>,
) -> io::Result<()> {
    let mut st = h.state.lock();
    let st = &mut *st;
    if offset as i64 != st.offset {
        lower.call(op, || {
            sys::lseek(h.fd.as_fd(), offset as i64, libc::SEEK_SET)
        })?;
        st.len = 0;
        st.pos = 0;
        st.offset = offset as i64;
    }
    loop {
        if st.pos >= st.len {
            if st.buf.is_empty() {
                st.buf = vec![0; DIRBUF];
            }
            st.len = lower.call(op, || sys::getdents64(h.fd.as_fd(), &mut st.buf))?;
            st.pos = 0;
            if st.len == 0 {
                return Ok(());
            }
        }
        let Some((e, next)) = sys::parse_dirent(&st.buf[..st.len], st.pos) else {
            st.pos = st.len;
            continue;
        };
        if !emit(&e)? {
            return Ok(());
        }
        st.pos = next;
        st.offset = e.next_off;
    }
}

impl Passthrough {
    pub(crate) fn do_opendir(&self, ino: INodeNo, flags: i32) -> io::Result<FileHandle> {
        let inode = self.store.get(ino.0)?;
        let f = (flags & libc::O_ACCMODE & !libc::O_WRONLY) | libc::O_RDONLY | libc::O_DIRECTORY;
        let fd = self
            .lower
            .call(Op::Opendir, || self.store.open_pinned(&inode, f))?;
        let fh = self.dirs.insert(DirHandle::new(fd));
        Ok(FileHandle(fh))
    }

    pub(crate) fn do_releasedir(&self, ino: INodeNo, fh: FileHandle) {
        let h = self.dirs.remove(fh.0);
        if let Ok(inode) = self.store.get(ino.0) {
            self.store.unpin(&inode);
        }
        drop(h);
    }

    fn dir(&self, fh: FileHandle) -> io::Result<Arc<DirHandle>> {
        self.dirs
            .get(fh.0)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EBADF))
    }

    pub(crate) fn do_readdir(
        &self,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let h = match self.dir(fh) {
            Ok(h) => h,
            Err(e) => return reply.error(errno(&ready(e))),
        };
        let r = walk(&h, offset, &self.lower, Op::Readdir, |e| {
            if self.hidden(ino.0, e.name) {
                return Ok(true);
            }
            let kind = h.entry_type(e);
            Ok(!reply.add(
                INodeNo(e.ino),
                e.next_off as u64,
                kind,
                OsStr::from_bytes(e.name),
            ))
        });
        match ready(r) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    pub(crate) fn do_readdirplus(
        &self,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let (h, parent) = match self.dir(fh).and_then(|h| Ok((h, self.store.get(ino.0)?))) {
            Ok(x) => x,
            Err(e) => return reply.error(errno(&ready(e))),
        };
        let r = walk(&h, offset, &self.lower, Op::Readdirplus, |e| {
            let name = OsStr::from_bytes(e.name);
            if self.hidden(ino.0, e.name) {
                return Ok(true);
            }
            if e.name == b"." || e.name == b".." {
                // The kernel makes no dentry for these and counts no lookup.
                let st = sys::Stat {
                    ino: e.ino,
                    mode: libc::S_IFDIR,
                    ..zero_stat()
                };
                let attr = to_attr(e.ino, &st);
                return Ok(!reply.add(
                    INodeNo(e.ino),
                    e.next_off as u64,
                    name,
                    &self.cfg.entry_ttl,
                    &attr,
                    Generation(0),
                ));
            }
            let found = self
                .lower
                .call(Op::Readdirplus, || sys::statat(h.fd.as_fd(), name))
                .and_then(|st| {
                    Ok((
                        self.store.lookup(&parent, h.fd.as_fd(), name, &st, false)?,
                        st,
                    ))
                });
            let (inode, st): (Arc<Inode>, sys::Stat) = match found {
                Ok(x) => x,
                // Removed since getdents: skip it.
                Err(err) if err.raw_os_error() == Some(libc::ENOENT) => return Ok(true),
                Err(_) => {
                    // Listed without attributes (node id 0: the kernel makes no dentry and
                    // counts no lookup) rather than failing the whole listing.
                    let st = sys::Stat {
                        mode: dirent_type(e.d_type).map_or(libc::S_IFREG, crate::attr::mode_bits),
                        ..zero_stat()
                    };
                    return Ok(!reply.add(
                        INodeNo(0),
                        e.next_off as u64,
                        name,
                        &self.cfg.entry_ttl,
                        &to_attr(0, &st),
                        Generation(0),
                    ));
                }
            };
            let attr = to_attr(inode.nodeid, &st);
            let full = reply.add(
                INodeNo(inode.nodeid),
                e.next_off as u64,
                name,
                &self.cfg.entry_ttl,
                &attr,
                Generation(inode.generation()),
            );
            if full {
                // Not sent: the kernel will not count this lookup.
                self.store.forget(inode.nodeid, 1);
            }
            Ok(!full)
        });
        match ready(r) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    pub(crate) fn do_fsyncdir(&self, fh: FileHandle, datasync: bool) -> io::Result<()> {
        let h = self.dir(fh)?;
        self.lower
            .call(Op::Fsyncdir, || sys::fsync(h.fd.as_fd(), datasync))
    }
}

fn zero_stat() -> sys::Stat {
    sys::Stat {
        dev: 0,
        ino: 0,
        btime_ns: 0,
        mode: 0,
        nlink: 1,
        uid: 0,
        gid: 0,
        rdev: 0,
        size: 0,
        blocks: 0,
        blksize: 4096,
        atime: (0, 0),
        mtime: (0, 0),
        ctime: (0, 0),
    }
}
