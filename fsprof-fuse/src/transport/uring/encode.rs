//! The io_uring transport's replies built from the operation trait's types: the kernel's
//! structs ([`crate::protocol::abi`]) filled from attributes, entries, locks and directory
//! listings. The protocol below knows nothing of the trait; this is where the two meet.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use zerocopy::IntoBytes;

use crate::filesystem;
use crate::protocol::abi::*;

/// A `fuse_attr` of `a` (the mode's type bits normalised as fuser does: a regular file for an
/// unknown type).
pub fn attr(a: &filesystem::Attr) -> Attr {
    Attr {
        ino: a.ino,
        size: a.size,
        blocks: a.blocks,
        atime: a.atime.sec,
        mtime: a.mtime.sec,
        ctime: a.ctime.sec,
        atimensec: a.atime.nsec,
        mtimensec: a.mtime.nsec,
        ctimensec: a.ctime.nsec,
        mode: a.kind().mode_bits() | (a.mode & 0o7777),
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: a.rdev,
        blksize: a.blksize,
        flags: 0,
    }
}

/// A `fuse_entry_out` of `e`, with separate name and attribute time-outs.
pub fn entry_out(e: &filesystem::Entry) -> EntryOut {
    EntryOut {
        nodeid: e.attr.ino,
        generation: e.generation,
        entry_valid: e.entry_ttl.as_secs(),
        attr_valid: e.attr_ttl.as_secs(),
        entry_valid_nsec: e.entry_ttl.subsec_nanos(),
        attr_valid_nsec: e.attr_ttl.subsec_nanos(),
        attr: attr(&e.attr),
    }
}

/// A `fuse_entry_out` of `e` whose attributes are valid as long as its name, as the classic
/// transport answers `CREATE` and `READDIRPLUS` entries.
pub fn entry_out_one_ttl(e: &filesystem::Entry) -> EntryOut {
    EntryOut {
        attr_valid: e.entry_ttl.as_secs(),
        attr_valid_nsec: e.entry_ttl.subsec_nanos(),
        ..entry_out(e)
    }
}

/// A `fuse_attr_out` of `a`.
pub fn attr_out(a: &filesystem::AttrOut) -> AttrOut {
    AttrOut {
        attr_valid: a.ttl.as_secs(),
        attr_valid_nsec: a.ttl.subsec_nanos(),
        dummy: 0,
        attr: attr(&a.attr),
    }
}

/// A `fuse_open_out` for handle number `fh` opened with `flags` and, for kernel passthrough,
/// backing file `backing` (which implies `FOPEN_PASSTHROUGH`).
pub fn open_out(fh: u64, flags: filesystem::FopenFlags, backing: Option<u32>) -> OpenOut {
    match backing {
        None => OpenOut {
            fh,
            open_flags: flags.0,
            backing_id: 0,
        },
        Some(id) => OpenOut {
            fh,
            open_flags: flags.0 | FOPEN_PASSTHROUGH,
            backing_id: id,
        },
    }
}

/// A `fuse_statfs_out` of `s`.
pub fn statfs_out(s: &filesystem::Statfs) -> StatfsOut {
    StatfsOut {
        blocks: s.blocks,
        bfree: s.bfree,
        bavail: s.bavail,
        files: s.files,
        ffree: s.ffree,
        bsize: s.bsize,
        namelen: s.namelen,
        frsize: s.frsize,
        padding: 0,
        spare: [0; 6],
    }
}

/// A `fuse_file_lock` of `l`.
pub fn file_lock(l: &filesystem::Lock) -> FileLock {
    FileLock {
        start: l.start,
        end: l.end,
        typ: l.typ as u32,
        pid: l.pid,
    }
}

/// The lock a `fuse_file_lock` describes.
pub fn lock(l: &FileLock) -> filesystem::Lock {
    filesystem::Lock {
        start: l.start,
        end: l.end,
        typ: l.typ as i32,
        pid: l.pid,
    }
}

/// A directory listing written straight into the payload buffer: `fuse_dirent`s
/// ([`DirSink`](filesystem::DirSink)) or `fuse_direntplus`es
/// ([`DirPlusSink`](filesystem::DirPlusSink)), each padded to 8 bytes, up to the size the kernel
/// asked for.
pub struct DirBuf<'a> {
    out: &'a mut [u8],
    used: usize,
}

impl<'a> DirBuf<'a> {
    /// A listing into `out` (the payload, cut to the size asked for).
    pub fn new(out: &'a mut [u8]) -> DirBuf<'a> {
        DirBuf { out, used: 0 }
    }

    /// Bytes written.
    pub fn len(&self) -> usize {
        self.used
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.used == 0
    }

    /// Appends `head` and `name`, zero-padded to 8 bytes; `true` if it does not fit.
    fn push(&mut self, head: &[u8], name: &[u8]) -> bool {
        let len = head.len() + name.len();
        let size = len.next_multiple_of(8);
        let Some(at) = self.out.get_mut(self.used..self.used + size) else {
            return true;
        };
        at[..head.len()].copy_from_slice(head);
        at[head.len()..len].copy_from_slice(name);
        at[len..].fill(0);
        self.used += size;
        false
    }
}

impl filesystem::DirSink for DirBuf<'_> {
    #[inline]
    fn add(&mut self, ino: u64, offset: u64, kind: filesystem::FileType, name: &OsStr) -> bool {
        let name = name.as_bytes();
        let d = Dirent {
            ino,
            off: offset,
            namelen: name.len() as u32,
            typ: kind.mode_bits() >> 12,
        };
        self.push(d.as_bytes(), name)
    }
}

impl filesystem::DirPlusSink for DirBuf<'_> {
    #[inline]
    fn add(&mut self, e: &filesystem::Entry, offset: u64, name: &OsStr) -> bool {
        let name = name.as_bytes();
        let entry_out = entry_out_one_ttl(e);
        let d = DirentPlus {
            dirent: Dirent {
                ino: entry_out.attr.ino,
                off: offset,
                namelen: name.len() as u32,
                typ: entry_out.attr.mode >> 12,
            },
            entry_out,
        };
        self.push(d.as_bytes(), name)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::filesystem::{DirPlusSink, DirSink, FileType, Timespec};
    use zerocopy::FromBytes;

    use crate::protocol::abi::tests::{Le, name};

    fn sample_attr() -> filesystem::Attr {
        filesystem::Attr {
            ino: 5,
            size: 10,
            blocks: 8,
            atime: Timespec { sec: -2, nsec: 800 },
            mtime: Timespec { sec: 3, nsec: 4 },
            ctime: Timespec { sec: 5, nsec: 6 },
            mode: libc::S_IFREG | 0o4755,
            nlink: 2,
            uid: 7,
            gid: 8,
            rdev: 0,
            blksize: 4096,
        }
    }

    #[test]
    fn entry_reply_bytes() {
        let e = filesystem::Entry {
            attr: sample_attr(),
            generation: 3,
            entry_ttl: Duration::new(1, 500),
            attr_ttl: Duration::new(2, 600),
        };
        let mut out = [0u8; 200];
        assert_eq!(put(&mut out, &entry_out(&e)), 128);
        let want = Le::default()
            .u64(5) // nodeid
            .u64(3) // generation
            .u64(1) // entry_valid
            .u64(2) // attr_valid
            .u32(500)
            .u32(600)
            .u64(5) // attr.ino
            .u64(10)
            .u64(8)
            .u64(-2i64 as u64)
            .u64(3)
            .u64(5)
            .u32(800)
            .u32(4)
            .u32(6)
            .u32(libc::S_IFREG | 0o4755)
            .u32(2)
            .u32(7)
            .u32(8)
            .u32(0)
            .u32(4096)
            .u32(0);
        assert_eq!(&out[..128], &want.0[..]);
        // CREATE and READDIRPLUS entries give the attributes the name's time-out.
        let one = entry_out_one_ttl(&e);
        assert_eq!((one.attr_valid, one.attr_valid_nsec), (1, 500));
    }

    #[test]
    fn an_unknown_file_type_is_sent_as_a_regular_file() {
        let mut a = sample_attr();
        a.mode = 0o644; // no type bits
        assert_eq!(attr(&a).mode, libc::S_IFREG | 0o644);
    }

    #[test]
    fn open_reply_with_and_without_a_backing_file() {
        let mut out = [0u8; 16];
        put(
            &mut out,
            &open_out(9, filesystem::FopenFlags::KEEP_CACHE, None),
        );
        assert_eq!(out, Le::default().u64(9).u32(2).u32(0).0[..]);
        put(
            &mut out,
            &open_out(9, filesystem::FopenFlags::empty(), Some(4)),
        );
        assert_eq!(out, Le::default().u64(9).u32(1 << 7).u32(4).0[..]);
    }

    #[test]
    fn dirents_are_padded_to_8_bytes_and_stop_when_full() {
        let mut out = [0xffu8; 64];
        let mut d = DirBuf::new(&mut out);
        assert!(!DirSink::add(
            &mut d,
            7,
            1,
            FileType::Directory,
            name("abc")
        ));
        assert_eq!(d.len(), 32);
        // 24 + 9 = 33 bytes, padded to 40: does not fit in the 32 left.
        assert!(DirSink::add(
            &mut d,
            8,
            2,
            FileType::RegularFile,
            name("123456789")
        ));
        assert_eq!(d.len(), 32);
        let want = Le::default()
            .u64(7)
            .u64(1)
            .u32(3)
            .u32(libc::DT_DIR as u32)
            .raw(b"abc\0\0\0\0\0");
        assert_eq!(&out[..32], &want.0[..]);
    }

    #[test]
    fn direntplus_carries_the_entry() {
        let e = filesystem::Entry {
            attr: sample_attr(),
            generation: 1,
            entry_ttl: Duration::from_secs(1),
            attr_ttl: Duration::from_secs(9),
        };
        let mut out = [0u8; 256];
        let mut d = DirBuf::new(&mut out);
        assert!(!DirPlusSink::add(&mut d, &e, 3, name("f")));
        assert_eq!(d.len(), 160);
        let (plus, rest) = DirentPlus::read_from_prefix(&out).unwrap();
        assert_eq!(plus.entry_out, entry_out_one_ttl(&e));
        assert_eq!(
            plus.dirent,
            Dirent {
                ino: 5,
                off: 3,
                namelen: 1,
                typ: libc::DT_REG as u32
            }
        );
        assert_eq!(&rest[..8], b"f\0\0\0\0\0\0\0");
    }

    #[test]
    fn statfs_lock_and_small_replies() {
        let s = filesystem::Statfs {
            blocks: 1,
            bfree: 2,
            bavail: 3,
            files: 4,
            ffree: 5,
            bsize: 6,
            namelen: 7,
            frsize: 8,
        };
        let mut out = [0u8; 80];
        put(&mut out, &statfs_out(&s));
        let want = Le::default()
            .u64(1)
            .u64(2)
            .u64(3)
            .u64(4)
            .u64(5)
            .u32(6)
            .u32(7)
            .u32(8)
            .raw(&[0; 28]);
        assert_eq!(&out[..], &want.0[..]);
        let l = filesystem::Lock {
            start: 1,
            end: 2,
            typ: libc::F_RDLCK,
            pid: 3,
        };
        assert_eq!(lock(&file_lock(&l)), l);
        let mut out = [0u8; 16];
        put(
            &mut out,
            &IoctlOut {
                result: -1,
                flags: 0,
                in_iovs: 1,
                out_iovs: 1,
            },
        );
        assert_eq!(out, Le::default().u32(u32::MAX).u32(0).u32(1).u32(1).0[..]);
    }
}
