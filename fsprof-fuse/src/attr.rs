//! Conversions between lower `statx` results and FUSE attributes.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{FileAttr, FileType, INodeNo, TimeOrNow};

use crate::sys::{SetTime, Stat};

/// FUSE file type of a mode's `S_IFMT` bits.
pub fn file_type(mode: u32) -> FileType {
    match mode & libc::S_IFMT {
        libc::S_IFDIR => FileType::Directory,
        libc::S_IFLNK => FileType::Symlink,
        libc::S_IFIFO => FileType::NamedPipe,
        libc::S_IFSOCK => FileType::Socket,
        libc::S_IFCHR => FileType::CharDevice,
        libc::S_IFBLK => FileType::BlockDevice,
        _ => FileType::RegularFile,
    }
}

/// The permission bits left when a file is modified by a caller without `CAP_FSETID`: the
/// setuid bit, and the setgid bit of a group-executable file, cleared (as the kernel does).
/// `None` when there is nothing to clear.
pub fn mode_without_privs(mode: u32) -> Option<u32> {
    let perm = mode & 0o7777;
    let sgid = libc::S_ISGID | libc::S_IXGRP;
    let kill = (perm & libc::S_ISUID)
        | if perm & sgid == sgid {
            libc::S_ISGID
        } else {
            0
        };
    (kill != 0).then_some(perm & !kill)
}

/// The `S_IFMT` bits of a FUSE file type.
pub fn mode_bits(t: FileType) -> u32 {
    match t {
        FileType::Directory => libc::S_IFDIR,
        FileType::Symlink => libc::S_IFLNK,
        FileType::NamedPipe => libc::S_IFIFO,
        FileType::Socket => libc::S_IFSOCK,
        FileType::CharDevice => libc::S_IFCHR,
        FileType::BlockDevice => libc::S_IFBLK,
        FileType::RegularFile => libc::S_IFREG,
    }
}

/// FUSE file type of a `getdents64` `d_type`; `None` for `DT_UNKNOWN`.
pub fn dirent_type(d_type: u8) -> Option<FileType> {
    Some(match d_type {
        libc::DT_DIR => FileType::Directory,
        libc::DT_LNK => FileType::Symlink,
        libc::DT_FIFO => FileType::NamedPipe,
        libc::DT_SOCK => FileType::Socket,
        libc::DT_CHR => FileType::CharDevice,
        libc::DT_BLK => FileType::BlockDevice,
        libc::DT_REG => FileType::RegularFile,
        _ => return None,
    })
}

fn time(t: (i64, u32)) -> SystemTime {
    if t.0 >= 0 {
        UNIX_EPOCH + Duration::new(t.0 as u64, t.1)
    } else {
        UNIX_EPOCH - Duration::from_secs(t.0.unsigned_abs()) + Duration::from_nanos(t.1 as u64)
    }
}

/// The attributes of a lower object as served under node id `nodeid`.
pub fn to_attr(nodeid: u64, st: &Stat) -> FileAttr {
    FileAttr {
        ino: INodeNo(nodeid),
        size: st.size,
        blocks: st.blocks,
        atime: time(st.atime),
        mtime: time(st.mtime),
        ctime: time(st.ctime),
        crtime: UNIX_EPOCH,
        kind: file_type(st.mode),
        perm: (st.mode & 0o7777) as u16,
        nlink: st.nlink,
        uid: st.uid,
        gid: st.gid,
        rdev: st.rdev,
        blksize: st.blksize,
        flags: 0,
    }
}

/// A `setattr` time as a `utimensat` time.
pub fn set_time(t: Option<TimeOrNow>) -> SetTime {
    match t {
        None => SetTime::Omit,
        Some(TimeOrNow::Now) => SetTime::Now,
        Some(TimeOrNow::SpecificTime(t)) => match t.duration_since(UNIX_EPOCH) {
            Ok(d) => SetTime::At(d.as_secs() as i64, d.subsec_nanos()),
            Err(e) => {
                let d = e.duration();
                let (s, ns) = (d.as_secs() as i64, d.subsec_nanos());
                if ns == 0 {
                    SetTime::At(-s, 0)
                } else {
                    SetTime::At(-s - 1, 1_000_000_000 - ns)
                }
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::mode_without_privs;

    #[test]
    fn privileges_cleared_as_the_kernel_does() {
        assert_eq!(mode_without_privs(libc::S_IFREG | 0o6755), Some(0o755));
        assert_eq!(mode_without_privs(0o4644), Some(0o644));
        // setgid without group execute marks mandatory locking: kept.
        assert_eq!(mode_without_privs(0o2644), None);
        assert_eq!(mode_without_privs(0o0777), None);
    }
}
