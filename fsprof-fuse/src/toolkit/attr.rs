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

/// The permission bits left when a caller without `CAP_FSETID` modifies the regular file of
/// mode `mode` and group `gid` (a write, a truncation, `fallocate`, `copy_file_range`), as the
/// kernel's `setattr_should_drop_suidgid` has it: the setuid bit goes; the setgid bit goes
/// when group execute is set, and without group execute (where it marks mandatory locking)
/// when the caller is not in the file's group (`in_group`, asked only then). `None` when
/// nothing changes (and for anything but a regular file).
pub fn mode_after_change(mode: u32, gid: u32, in_group: impl FnOnce(u32) -> bool) -> Option<u32> {
    if mode & libc::S_IFMT != libc::S_IFREG || mode & (libc::S_ISUID | libc::S_ISGID) == 0 {
        return None;
    }
    match mode_without_privs(mode) {
        Some(m) if m & libc::S_ISGID == 0 => Some(m),
        // Only setgid without group execute is left (if anything).
        kept => {
            let perm = kept.unwrap_or(mode & 0o7777);
            if perm & libc::S_ISGID != 0 && !in_group(gid) {
                Some(perm & !libc::S_ISGID)
            } else {
                kept
            }
        }
    }
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

    #[test]
    fn a_change_by_a_caller_outside_the_group_clears_setgid_too() {
        use super::mode_after_change;
        let reg = libc::S_IFREG;
        let member = |_| true;
        let outsider = |_| false;
        assert_eq!(mode_after_change(reg | 0o4777, 5, member), Some(0o777));
        assert_eq!(mode_after_change(reg | 0o6755, 5, member), Some(0o755));
        // setgid without group execute: kept for a member, cleared for anyone else.
        assert_eq!(mode_after_change(reg | 0o2745, 5, member), None);
        assert_eq!(mode_after_change(reg | 0o2745, 5, outsider), Some(0o745));
        assert_eq!(mode_after_change(reg | 0o6745, 5, outsider), Some(0o745));
        assert_eq!(mode_after_change(reg | 0o6745, 5, member), Some(0o2745));
        // Membership is asked only where it matters, of the file's group.
        let never = |_| -> bool { panic!("membership asked") };
        assert_eq!(mode_after_change(reg | 0o777, 5, never), None);
        assert_eq!(mode_after_change(reg | 0o4755, 5, never), Some(0o755));
        let asked = std::cell::Cell::new(0);
        mode_after_change(reg | 0o2700, 42, |g| {
            asked.set(g);
            true
        });
        assert_eq!(asked.get(), 42);
        // Not for directories (setgid there means inheritance) nor other objects.
        assert_eq!(mode_after_change(libc::S_IFDIR | 0o2777, 5, outsider), None);
        assert_eq!(mode_after_change(libc::S_IFIFO | 0o4777, 5, outsider), None);
    }
}
