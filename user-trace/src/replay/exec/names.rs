//! Replaying the calls on paths, every one resolved beneath the replay directory (see
//! [`crate::replay::root`] for how, and why): opens, stats and the other calls on an object,
//! and the calls on a name in a directory.

use std::ffi::CStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use super::table::{Call, Outcome, Skip, denied, plain};
use crate::abi::id::*;
use crate::replay::root::Denied;
use crate::sys::at;
use crate::sys::calls::{self, Xattr};

/// Replays `c` if it is a call on paths.
pub(super) fn run(c: &mut Call) -> Option<Outcome> {
    let (call, flags) = (c.rec.call, c.flags());
    let nofollow = flags & libc::AT_SYMLINK_NOFOLLOW != 0;
    Some(match call {
        OPEN | OPENAT => open(c, flags, c.mode()),
        CREAT => open(c, libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC, c.mode()),
        STAT | LSTAT | FSTATAT => on_object(c, 0, call != LSTAT && !nofollow, |o, _| {
            Ok(at::fstatat(o, c"", libc::AT_EMPTY_PATH))
        }),
        STATX => on_object(c, 0, !nofollow, |o, c| {
            let flags = (c.flags() & !libc::AT_SYMLINK_NOFOLLOW) | libc::AT_EMPTY_PATH;
            Ok(calls::statx(raw(o), c"", flags, c.mode()))
        }),
        STATFS => on_object(c, 0, true, |o, _| plain(calls::fstatfs(raw(o)))),
        ACCESS | FACCESSAT => on_object(c, 0, !nofollow, |o, c| {
            let flags = if call == FACCESSAT { c.flags() } else { 0 };
            plain(calls::access(
                &at::proc_path(o),
                c.int(0),
                flags & libc::AT_EACCESS,
            ))
        }),
        TRUNCATE => on_object(c, 0, true, |o, c| {
            plain(calls::truncate(Some(&at::proc_path(o)), -1, c.off(0)))
        }),
        CHMOD | FCHMODAT => chmod(c, call == FCHMODAT && nofollow),
        CHOWN | LCHOWN | FCHOWNAT => {
            let follow = call == CHOWN || call == FCHOWNAT && !nofollow;
            on_object(c, 0, follow, |o, c| {
                plain(at::fchown_empty(o, c.int(0) as u32, c.int(1) as u32))
            })
        }
        UTIMENSAT => on_object(c, 0, !nofollow, |o, _| {
            plain(calls::utimens(libc::AT_FDCWD, Some(&at::proc_path(o)), 0))
        }),
        SETXATTR | LSETXATTR | GETXATTR | LGETXATTR | LISTXATTR | LLISTXATTR | REMOVEXATTR
        | LREMOVEXATTR => xattr(c),
        READLINK | READLINKAT => on_object(c, 0, false, |o, c| {
            let n = c.size();
            plain(at::readlinkat(o, c"", c.buffer(n)))
        }),
        CHDIR => on_object(c, 0, true, |o, _| {
            // Paths are resolved against the traced working directory already; the replay
            // checks the directory as chdir would.
            let (v, st) = at::fstatat(o, c"", libc::AT_EMPTY_PATH);
            plain(match st {
                Some((mode, _)) if mode as u32 & libc::S_IFMT != libc::S_IFDIR => {
                    -(libc::ENOTDIR as i64)
                }
                _ => v,
            })
        }),
        MKDIR | MKDIRAT => in_parent(c, 0, |d, n, c| plain(at::mkdirat(d, n, c.mode()))),
        RMDIR => in_parent(c, 0, |d, n, _| {
            plain(at::unlinkat(d, n, libc::AT_REMOVEDIR))
        }),
        UNLINK => in_parent(c, 0, |d, n, _| plain(at::unlinkat(d, n, 0))),
        UNLINKAT => in_parent(c, 0, |d, n, c| plain(at::unlinkat(d, n, c.flags()))),
        REMOVE => in_parent(c, 0, |d, n, _| plain(remove(d, n))),
        RENAME | RENAMEAT | RENAMEAT2 => {
            let flags = if call == RENAMEAT2 { flags as u32 } else { 0 };
            two_names(c, |(d0, n0), (d1, n1)| {
                plain(at::renameat2(d0, n0, d1, n1, flags))
            })
        }
        LINK | LINKAT => link(c, if call == LINKAT { flags } else { 0 }),
        SYMLINK | SYMLINKAT => symlink(c),
        _ => return None,
    })
}

fn raw(fd: BorrowedFd<'_>) -> std::ffi::c_int {
    use std::os::fd::AsRawFd;
    fd.as_raw_fd()
}

/// open, openat, creat: beneath the replay directory, in the table under the traced result.
fn open(c: &mut Call, flags: i32, mode: u32) -> Outcome {
    match c.root.open_at(c.path(0)?, flags, mode) {
        Ok(fd) => c.new_fd(super::table::Owned::from(fd).into_raw() as i64),
        Err(d) => denied(d),
    }
}

/// Runs `f` on what path item `k` names (its final symbolic link followed when `follow`),
/// opened with `O_PATH`.
fn on_object(
    c: &mut Call,
    k: usize,
    follow: bool,
    f: impl FnOnce(BorrowedFd<'_>, &mut Call) -> Outcome,
) -> Outcome {
    let object = c.root.object(c.path(k)?, follow);
    match object {
        Ok(o) => f(o.as_fd(), c),
        Err(d) => denied(d),
    }
}

/// The directory holding path item `k` and its final name.
fn parent<'a>(c: &'a Call, k: usize) -> Result<(OwnedFd, &'a CStr), Result<Denied, Skip>> {
    let path = c.path(k).map_err(Err)?;
    c.root.parent(path).map_err(Ok)
}

/// Runs `f` on the directory holding path item `k` and its final name.
fn in_parent(
    c: &mut Call,
    k: usize,
    f: impl FnOnce(BorrowedFd<'_>, &CStr, &Call) -> Outcome,
) -> Outcome {
    match parent(c, k) {
        Ok((d, n)) => f(d.as_fd(), n, c),
        Err(Ok(d)) => denied(d),
        Err(Err(s)) => Err(s),
    }
}

/// Runs `f` on the directories holding path items 0 and 1, and their final names.
fn two_names(
    c: &mut Call,
    f: impl FnOnce((BorrowedFd<'_>, &CStr), (BorrowedFd<'_>, &CStr)) -> Outcome,
) -> Outcome {
    let from = parent(c, 0);
    let to = parent(c, 1);
    match (from, to) {
        (Ok((d0, n0)), Ok((d1, n1))) => f((d0.as_fd(), n0), (d1.as_fd(), n1)),
        (Err(Err(s)), _) | (_, Err(Err(s))) => Err(s),
        (Err(Ok(d)), _) | (_, Err(Ok(d))) => denied(d),
    }
}

/// remove: unlink, or rmdir where unlink says it is a directory (as glibc does).
fn remove(dir: BorrowedFd<'_>, name: &CStr) -> i64 {
    let v = at::unlinkat(dir, name, 0);
    if v == -(libc::EISDIR as i64) || v == -(libc::EPERM as i64) {
        at::unlinkat(dir, name, libc::AT_REMOVEDIR)
    } else {
        v
    }
}

/// chmod, fchmodat; with `AT_SYMLINK_NOFOLLOW` on a symbolic link, `EOPNOTSUPP` (as glibc).
fn chmod(c: &mut Call, nofollow: bool) -> Outcome {
    on_object(c, 0, !nofollow, |o, c| {
        if nofollow {
            if let (_, Some((mode, _))) = at::fstatat(o, c"", libc::AT_EMPTY_PATH) {
                if mode as u32 & libc::S_IFMT == libc::S_IFLNK {
                    return plain(-(libc::EOPNOTSUPP as i64));
                }
            }
        }
        plain(calls::chmod(Some(&at::proc_path(o)), -1, c.mode(), 0))
    })
}

/// The extended-attribute calls on a path (the `l` ones on a final symbolic link itself).
fn xattr(c: &mut Call) -> Outcome {
    let call = c.rec.call;
    let follow = !matches!(call, LSETXATTR | LGETXATTR | LLISTXATTR | LREMOVEXATTR);
    let op = match call {
        SETXATTR | LSETXATTR => Xattr::Set(c.flags()),
        GETXATTR | LGETXATTR => Xattr::Get,
        LISTXATTR | LLISTXATTR => Xattr::List,
        _ => Xattr::Remove,
    };
    on_object(c, 0, follow, |o, c| {
        let name = c.string(1);
        let n = c.size();
        let path = at::proc_path(o);
        plain(calls::xattr(
            Some(&path),
            false,
            -1,
            name.as_deref(),
            c.buffer(n),
            op,
        ))
    })
}

/// link, linkat: with `AT_SYMLINK_FOLLOW`, what the old path names (through
/// `/proc/self/fd`), else the old name itself.
fn link(c: &mut Call, flags: i32) -> Outcome {
    if flags & libc::AT_SYMLINK_FOLLOW != 0 {
        return on_object(c, 0, true, |o, c| {
            let path = at::proc_path(o);
            in_parent(c, 1, |d, n, _| {
                plain(at::linkat(None, &path, d, n, libc::AT_SYMLINK_FOLLOW))
            })
        });
    }
    two_names(c, |(d0, n0), (d1, n1)| {
        plain(at::linkat(Some(d0), n0, d1, n1, 0))
    })
}

/// symlink, symlinkat: the link is made beneath the replay directory with the planned
/// target (see the plan), or the traced one.
fn symlink(c: &mut Call) -> Outcome {
    let target = c
        .paths
        .first()
        .cloned()
        .flatten()
        .or_else(|| c.string(0))
        .ok_or(Skip::Fd)?;
    in_parent(c, 1, |d, n, _| plain(at::symlinkat(&target, d, n)))
}
