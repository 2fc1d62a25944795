//! The directory cursor: an open lower directory read with `getdents64` from any offset, as
//! a FUSE directory handle needs (the passthrough's, and RAIF's on one branch).
//!
//! Offsets given to the kernel are the lower file system's own `d_off` cookies, so a later
//! `readdir` at any offset seeks the lower directory there.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

use parking_lot::Mutex;

use crate::filesystem::{FileType, Request};
use crate::lower::Lower;
use crate::ops::Sys;
use crate::sys;

/// Bytes of directory entries read per `getdents64`.
const DIRBUF: usize = 32 * 1024;

/// An open lower directory and where its listing stands.
pub struct DirCursor {
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

impl DirCursor {
    /// A cursor reading the open directory `fd` from its start.
    pub fn new(fd: OwnedFd) -> DirCursor {
        DirCursor {
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
        FileType::from_dirent(e.d_type).unwrap_or_else(|| {
            sys::statat(self.fd.as_fd(), OsStr::from_bytes(e.name))
                .map(|st| FileType::from_mode(st.mode))
                .unwrap_or(FileType::RegularFile)
        })
    }

    /// Calls `emit(entry)` for entries from `offset` on until it returns `false` (reply full)
    /// or the directory ends; an entry `emit` refused is read again next time. The
    /// `getdents64` and `lseek` calls are recorded in `lower` for `req`.
    pub fn walk(
        &self,
        req: &Request,
        offset: u64,
        lower: &Lower,
        mut emit: impl FnMut(&sys::DirEntry) -> io::Result<bool>,
    ) -> io::Result<()> {
        let mut st = self.state.lock();
        let st = &mut *st;
        if offset as i64 != st.offset {
            lower.call(req, Sys::Lseek, || {
                sys::lseek(self.fd.as_fd(), offset as i64, libc::SEEK_SET)
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
                st.len = lower.call(req, Sys::Getdents64, || {
                    sys::getdents64(self.fd.as_fd(), &mut st.buf)
                })?;
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
}
