//! Conversions between lower `statx` results and the attributes served.

use crate::filesystem::{Attr, SetTime, Timespec};
use crate::sys::{self, Stat};

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

fn time(t: (i64, u32)) -> Timespec {
    Timespec {
        sec: t.0,
        nsec: t.1,
    }
}

/// The attributes of a lower object as served under node id `nodeid`.
pub fn to_attr(nodeid: u64, st: &Stat) -> Attr {
    Attr {
        ino: nodeid,
        size: st.size,
        blocks: st.blocks,
        atime: time(st.atime),
        mtime: time(st.mtime),
        ctime: time(st.ctime),
        mode: st.mode,
        nlink: st.nlink,
        uid: st.uid,
        gid: st.gid,
        rdev: st.rdev,
        blksize: st.blksize,
    }
}

/// A `setattr` time as a `utimensat` time.
pub fn set_time(t: Option<SetTime>) -> sys::SetTime {
    match t {
        None => sys::SetTime::Omit,
        Some(SetTime::Now) => sys::SetTime::Now,
        Some(SetTime::At(t)) => sys::SetTime::At(t.sec, t.nsec),
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
