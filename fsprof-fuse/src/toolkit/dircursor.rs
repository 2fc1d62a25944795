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
use crate::protocol::ops::Sys;
use crate::sys;
use crate::toolkit::lower::{Lower, Via};

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

    /// The directory's descriptor, the cursor done with.
    pub fn into_fd(self) -> OwnedFd {
        self.fd
    }

    /// File type of entry `e` of this directory: its `d_type`, or where that is unknown, what
    /// a `stat` of it says (a regular file if it is gone; the `statx` made `via` a request).
    pub fn entry_type(&self, via: Via, e: &sys::DirEntry) -> FileType {
        FileType::from_dirent(e.d_type).unwrap_or_else(|| {
            via.call(Sys::Statx, || {
                sys::statat(self.fd.as_fd(), OsStr::from_bytes(e.name))
            })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filesystem::trace::Trace;

    /// A directory of `n` files with long names (more than one `getdents64` buffer for a few
    /// hundred), and a cursor on it.
    fn cursor(n: usize) -> (tempfile::TempDir, DirCursor) {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..n {
            let name = format!("file-{i:04}-with-a-long-name-to-fill-the-buffer");
            std::fs::write(dir.path().join(name), b"").unwrap();
        }
        let fd = sys::open_path(dir.path(), libc::O_RDONLY | libc::O_DIRECTORY).unwrap();
        (dir, DirCursor::new(fd))
    }

    /// (name, offset after it) of at most `room` entries from `offset`, by a walk of `c` for
    /// `req`.
    fn walk(c: &DirCursor, req: &Request, offset: u64, room: usize) -> Vec<(String, i64)> {
        let mut out = Vec::new();
        c.walk(req, offset, &Lower::new(None), |e| {
            if out.len() == room {
                return Ok(false);
            }
            out.push((String::from_utf8_lossy(e.name).into_owned(), e.next_off));
            Ok(true)
        })
        .unwrap();
        out
    }

    fn req() -> Request<'static> {
        Request::internal(
            crate::protocol::ops::Op::Readdir,
            crate::filesystem::Ino::ROOT,
        )
    }

    #[test]
    fn a_listing_continues_from_any_offset_it_gave() {
        let (_dir, c) = cursor(700);
        let all = walk(&c, &req(), 0, usize::MAX);
        assert_eq!(all.len(), 702, "every file, . and ..");
        // From each offset (forwards, then backwards), the rest of the listing, in order.
        let starts: Vec<usize> = (0..all.len()).step_by(37).collect();
        for &k in starts.iter().chain(starts.iter().rev()) {
            let from = if k == 0 { 0 } else { all[k - 1].1 as u64 };
            let got = walk(&c, &req(), from, 5);
            let want = &all[k..(k + 5).min(all.len())];
            assert_eq!(got, want, "from entry {k}");
        }
        // From the last offset: nothing more.
        let end = all.last().unwrap().1 as u64;
        assert!(walk(&c, &req(), end, 10).is_empty());
    }

    #[test]
    fn a_walk_that_goes_on_where_the_last_stopped_does_not_seek() {
        let (_dir, c) = cursor(10);
        let trace = Trace::new();
        let traced = req().traced(&trace);
        let seeks = || {
            trace
                .calls()
                .filter(|call| call.call.sys() == Sys::Lseek)
                .count()
        };
        let first = walk(&c, &traced, 0, 4);
        assert_eq!(seeks(), 0, "a new cursor starts at 0");
        // The entry refused (the reply was full) comes first next time.
        let next = walk(&c, &traced, first[3].1 as u64, 4);
        assert_eq!(seeks(), 0);
        let again = walk(&c, &traced, first[3].1 as u64, 4);
        assert_eq!(seeks(), 1, "going back takes one seek");
        assert_eq!(again, next);
        let all = walk(&c, &req(), 0, usize::MAX);
        assert_eq!([first, next].concat(), all[..8]);
    }

    #[test]
    fn an_error_while_emitting_leaves_the_entry_for_the_next_walk() {
        let (_dir, c) = cursor(3);
        let mut seen = Vec::new();
        let r = c.walk(&req(), 0, &Lower::new(None), |e| {
            seen.push(e.next_off);
            if seen.len() == 2 {
                return Err(io::Error::from_raw_os_error(libc::EIO));
            }
            Ok(true)
        });
        assert_eq!(r.unwrap_err().raw_os_error(), Some(libc::EIO));
        let rest = walk(&c, &req(), seen[0] as u64, usize::MAX);
        assert_eq!(rest.len(), 4);
        assert_eq!(rest[0].1, seen[1], "the failed entry again, then the rest");
    }
}
