//! Conversions between fuser's types and the operation trait's, and the reply helpers the
//! classic transport's methods share.

use std::cell::RefCell;
use std::ffi::OsStr;
use std::io;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    Errno, FileHandle, Generation, INodeNo, ReplyAttr, ReplyDirectory, ReplyDirectoryPlus,
    ReplyEmpty, ReplyEntry, ReplyOpen, ReplyXattr, TimeOrNow,
};

use super::errno;
use crate::filesystem::{
    Attr, DirPlusSink, DirSink, Entry, FileType, Handle, Opened, SetTime, Timespec,
};
use crate::toolkit::buffer::Aligned;

pub(super) fn system_time(t: Timespec) -> SystemTime {
    if t.sec >= 0 {
        UNIX_EPOCH + Duration::new(t.sec as u64, t.nsec)
    } else {
        UNIX_EPOCH - Duration::from_secs(t.sec.unsigned_abs()) + Duration::from_nanos(t.nsec as u64)
    }
}

pub(super) fn file_type(t: FileType) -> fuser::FileType {
    match t {
        FileType::RegularFile => fuser::FileType::RegularFile,
        FileType::Directory => fuser::FileType::Directory,
        FileType::Symlink => fuser::FileType::Symlink,
        FileType::NamedPipe => fuser::FileType::NamedPipe,
        FileType::Socket => fuser::FileType::Socket,
        FileType::CharDevice => fuser::FileType::CharDevice,
        FileType::BlockDevice => fuser::FileType::BlockDevice,
    }
}

pub(super) fn file_attr(a: &Attr) -> fuser::FileAttr {
    fuser::FileAttr {
        ino: INodeNo(a.ino),
        size: a.size,
        blocks: a.blocks,
        atime: system_time(a.atime),
        mtime: system_time(a.mtime),
        ctime: system_time(a.ctime),
        crtime: UNIX_EPOCH,
        kind: file_type(a.kind()),
        perm: (a.mode & 0o7777) as u16,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: a.rdev,
        blksize: a.blksize,
        flags: 0,
    }
}

pub(super) fn set_time(t: Option<TimeOrNow>) -> Option<SetTime> {
    t.map(|t| match t {
        TimeOrNow::Now => SetTime::Now,
        TimeOrNow::SpecificTime(t) => SetTime::At(match t.duration_since(UNIX_EPOCH) {
            Ok(d) => Timespec {
                sec: d.as_secs() as i64,
                nsec: d.subsec_nanos(),
            },
            // fuser 0.18 turns a request's `(sec < 0, nsec)` into the epoch minus `-sec`
            // seconds and `nsec` nanoseconds (not minus `-sec` plus `nsec`: -0.5 s, sent as
            // (-1, 5e8), arrives as -1.5 s). Undone exactly here, so what the kernel sent is
            // what the file gets.
            Err(e) => {
                let d = e.duration();
                Timespec {
                    sec: (d.as_secs() as i64).wrapping_neg(),
                    nsec: d.subsec_nanos(),
                }
            }
        }),
    })
}

pub(super) fn reply_entry(r: io::Result<Entry>, reply: ReplyEntry) {
    match r {
        Ok(e) => reply.entry_with_ttls(
            &e.attr_ttl,
            &e.entry_ttl,
            &file_attr(&e.attr),
            Generation(e.generation),
        ),
        Err(e) => reply.error(errno(&e)),
    }
}

pub(super) fn reply_empty(r: io::Result<()>, reply: ReplyEmpty) {
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(errno(&e)),
    }
}

pub(super) fn reply_attr(r: io::Result<crate::filesystem::AttrOut>, reply: ReplyAttr) {
    match r {
        Ok(a) => reply.attr(&a.ttl, &file_attr(&a.attr)),
        Err(e) => reply.error(errno(&e)),
    }
}

pub(super) fn reply_opened<H: Handle>(r: io::Result<Opened<H>>, reply: ReplyOpen) {
    match r {
        Ok(o) => {
            let flags = fuser::FopenFlags::from_bits_retain(o.flags.0);
            let fh = FileHandle(o.fh.into_raw());
            match o.backing {
                None => reply.opened(fh, flags),
                Some(id) => {
                    // SAFETY: the file system registered `id` on this session's device and
                    // keeps it open while the handle is; fuser's wrapper is given back
                    // (`into_raw`) right after the reply, so it never closes it.
                    let b = unsafe { reply.wrap_backing(id) };
                    reply.opened_passthrough(fh, flags, &b);
                    b.into_raw();
                }
            }
        }
        Err(e) => reply.error(errno(&e)),
    }
}

/// Replies to `getxattr`/`listxattr` asked with buffer size `size`: the length `n` when `size`
/// is 0, `ERANGE` when it is larger than `size`, else the bytes.
pub(super) fn reply_sized(size: u32, r: io::Result<usize>, buf: &[u8], reply: ReplyXattr) {
    match r {
        Ok(n) if size == 0 => reply.size(n as u32),
        Ok(n) if n > size as usize || n > buf.len() => reply.error(Errno::from_i32(libc::ERANGE)),
        Ok(n) => reply.data(&buf[..n]),
        Err(e) => reply.error(errno(&e)),
    }
}

thread_local! {
    /// This thread's reply buffer for reads, `readlink` and xattrs (grown once, reused; aligned
    /// so that `O_DIRECT` reads can land in it).
    static BUF: RefCell<Aligned> = const { RefCell::new(Aligned::new()) };
}

/// Runs `f` with this thread's reply buffer, `len` bytes long. Not reentrant.
pub(super) fn with_buf<R>(len: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
    BUF.with(|b| f(b.borrow_mut().get(len)))
}

pub(super) struct Dir<'a>(pub(super) &'a mut ReplyDirectory);

impl DirSink for Dir<'_> {
    #[inline]
    fn add(&mut self, ino: u64, offset: u64, kind: FileType, name: &OsStr) -> bool {
        self.0.add(INodeNo(ino), offset, file_type(kind), name)
    }
}

pub(super) struct DirPlus<'a>(pub(super) &'a mut ReplyDirectoryPlus);

impl DirPlusSink for DirPlus<'_> {
    #[inline]
    fn add(&mut self, e: &Entry, offset: u64, name: &OsStr) -> bool {
        self.0.add(
            INodeNo(e.attr.ino),
            offset,
            name,
            &e.entry_ttl,
            &file_attr(&e.attr),
            Generation(e.generation),
        )
    }
}
