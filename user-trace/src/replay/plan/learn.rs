//! What each traced call says about the tree at the start, and what it does to the simulated
//! descriptors, by call family: descriptors (opens, closes, duplicates), metadata (stats,
//! attributes), directories (mkdir, removal, chdir), links (rename, link, symlink, readlink)
//! and data (reads, writes, positions).

use std::path::PathBuf;

use super::calls::{fopen_flags, moves, reads, writes};
use super::sim::{FdSim, ProcSim};
use super::tree::{Initial, Seen, Tree};
use crate::abi::id::*;
use crate::trace::Record;

/// A traced call, with its paths resolved.
pub(super) struct Call<'a> {
    /// The record.
    pub(super) rec: &'a Record,
    /// It succeeded.
    pub(super) ok: bool,
    /// Its errno when it failed, else 0.
    pub(super) errno: i32,
    /// Its descriptor items.
    pub(super) fds: &'a [i64],
    /// Its first and second path items, as absolute traced paths.
    pub(super) p0: Option<PathBuf>,
    pub(super) p1: Option<PathBuf>,
}

impl Call<'_> {
    /// The traced path behind the first descriptor item.
    fn fd_path(&self, proc: &ProcSim) -> Option<PathBuf> {
        self.fds.first().and_then(|&f| proc.fd_path(f))
    }
}

/// Learns from `c`, whatever its family.
pub(super) fn learn(tree: &mut Tree, proc: &mut ProcSim, c: &Call) {
    descriptors(tree, proc, c);
    metadata(tree, proc, c);
    directories(tree, proc, c);
    links(tree, c);
    data(tree, proc, c);
}

/// Opens, closes and duplicates.
fn descriptors(tree: &mut Tree, proc: &mut ProcSim, c: &Call) {
    let (rec, ok) = (c.rec, c.ok);
    match rec.call {
        OPEN | OPENAT | CREAT | FOPEN | FREOPEN => open(tree, proc, c),
        OPENDIR => {
            if let Some(p) = &c.p0 {
                if ok {
                    tree.first(p, Initial::Exists(Seen::Dir));
                    tree.parent_used(p);
                    proc.fds.insert(
                        rec.result,
                        FdSim {
                            path: Some(p.clone()),
                            pos: None,
                        },
                    );
                } else if c.errno == libc::ENOENT {
                    tree.first(p, Initial::Absent);
                }
            }
        }
        CLOSE | FCLOSE | CLOSEDIR => {
            if let Some(fd) = c.fds.first() {
                proc.fds.remove(fd);
            }
        }
        DUP | DUP2 | DUP3 if ok => {
            let src = proc.fd(c.fds.first());
            proc.fds.insert(rec.result, src);
        }
        FCNTL => {
            let cmd = rec.int(0).unwrap_or(0) as i32;
            if ok && (cmd == libc::F_DUPFD || cmd == libc::F_DUPFD_CLOEXEC) {
                let src = proc.fd(c.fds.first());
                proc.fds.insert(rec.result, src);
            }
        }
        _ => {}
    }
}

/// open, openat, creat, fopen, freopen.
fn open(tree: &mut Tree, proc: &mut ProcSim, c: &Call) {
    let (rec, call, ok) = (c.rec, c.rec.call, c.ok);
    let flags = match call {
        CREAT => libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC,
        FOPEN | FREOPEN => fopen_flags(rec.path(1).unwrap_or(b"r")),
        _ => rec.flags() as i32,
    };
    if call == FREOPEN {
        if let Some(old) = c.fds.first() {
            proc.fds.remove(old);
        }
    }
    if let Some(p) = &c.p0 {
        if ok {
            if flags & libc::O_CREAT == 0 {
                let seen = if flags & libc::O_DIRECTORY != 0 {
                    Seen::Dir
                } else {
                    Seen::Unknown
                };
                tree.first(p, Initial::Exists(seen));
            } else if flags & libc::O_EXCL != 0 {
                tree.first(p, Initial::Absent);
            } else {
                tree.first(p, Initial::Maybe);
            }
            if flags & libc::O_TRUNC != 0 {
                tree.modified(p);
            }
            tree.parent_used(p);
        } else {
            match c.errno {
                libc::ENOENT => tree.first(p, Initial::Absent),
                libc::EEXIST => {
                    tree.first(p, Initial::Exists(Seen::Unknown));
                    tree.parent_used(p);
                }
                libc::EISDIR => {
                    tree.first(p, Initial::Exists(Seen::Dir));
                    tree.parent_used(p);
                }
                _ => {}
            }
        }
    }
    if ok {
        let path =
            c.p0.clone()
                .or_else(|| (call == FREOPEN).then(|| c.fd_path(proc)).flatten());
        let pos = (flags & libc::O_APPEND == 0).then_some(0);
        proc.fds.insert(rec.result, FdSim { path, pos });
    }
}

/// Stats, truncate, and the calls that only need their path to exist (access, statfs,
/// ownership, modes, times, extended attributes).
fn metadata(tree: &mut Tree, proc: &ProcSim, c: &Call) {
    let (rec, ok, errno) = (c.rec, c.ok, c.errno);
    match rec.call {
        STAT | LSTAT | FSTATAT | STATX => match (&c.p0, ok) {
            (Some(p), true) => {
                let (mode, size) = rec.stat().unwrap_or((0, 0));
                let seen = match mode as u32 & libc::S_IFMT {
                    libc::S_IFDIR => Seen::Dir,
                    libc::S_IFREG => Seen::File,
                    libc::S_IFLNK => Seen::Symlink,
                    _ => Seen::Unknown,
                };
                tree.first(p, Initial::Exists(seen));
                if seen == Seen::File {
                    tree.exact_size(p, size);
                }
                if seen == Seen::Symlink {
                    tree.link_len(p, size);
                }
                tree.parent_used(p);
            }
            (Some(p), false) if errno == libc::ENOENT => tree.first(p, Initial::Absent),
            // fstatat/statx on a descriptor (empty path).
            (None, true) => fstat(tree, proc, c),
            _ => {}
        },
        FSTAT => fstat(tree, proc, c),
        TRUNCATE => {
            if let (Some(p), true) = (&c.p0, ok) {
                tree.first(p, Initial::Exists(Seen::File));
                tree.parent_used(p);
                tree.modified(p);
            }
        }
        ACCESS | FACCESSAT | STATFS | CHMOD | FCHMODAT | CHOWN | LCHOWN | FCHOWNAT | UTIMENSAT
        | SETXATTR | LSETXATTR | GETXATTR | LGETXATTR | LISTXATTR | LLISTXATTR | REMOVEXATTR
        | LREMOVEXATTR => {
            if let Some(p) = &c.p0 {
                if ok || errno == libc::ENODATA || errno == libc::ERANGE {
                    tree.first(p, Initial::Exists(Seen::Unknown));
                    tree.parent_used(p);
                } else if errno == libc::ENOENT {
                    tree.first(p, Initial::Absent);
                }
            }
        }
        _ => {}
    }
}

/// A stat of a descriptor: the size of a regular file.
fn fstat(tree: &mut Tree, proc: &ProcSim, c: &Call) {
    if let (Some(p), Some((mode, size))) = (c.fd_path(proc), c.rec.stat()) {
        if mode as u32 & libc::S_IFMT == libc::S_IFREG {
            tree.exact_size(&p, size);
        }
    }
}

/// mkdir, rmdir, unlink, remove, chdir.
fn directories(tree: &mut Tree, proc: &mut ProcSim, c: &Call) {
    let (rec, call, ok, errno) = (c.rec, c.rec.call, c.ok, c.errno);
    match call {
        MKDIR | MKDIRAT => {
            if let Some(p) = &c.p0 {
                if ok {
                    tree.first(p, Initial::Absent);
                    tree.parent_used(p);
                } else if errno == libc::EEXIST {
                    tree.first(p, Initial::Exists(Seen::Dir));
                    tree.parent_used(p);
                }
            }
        }
        RMDIR | UNLINK | UNLINKAT | REMOVE => {
            if let Some(p) = &c.p0 {
                if ok {
                    let dir = call == RMDIR
                        || call == UNLINKAT && rec.flags() as i32 & libc::AT_REMOVEDIR != 0;
                    tree.first(
                        p,
                        Initial::Exists(if dir { Seen::Dir } else { Seen::Unknown }),
                    );
                    tree.parent_used(p);
                    tree.modified(p);
                } else if errno == libc::ENOENT {
                    tree.first(p, Initial::Absent);
                }
            }
        }
        CHDIR => {
            if let (Some(p), true) = (&c.p0, ok) {
                tree.first(p, Initial::Exists(Seen::Dir));
                tree.parent_used(p);
                proc.cwd = p.clone();
            }
        }
        FCHDIR => {
            if let (Some(p), true) = (c.fd_path(proc), ok) {
                proc.cwd = p;
            }
        }
        _ => {}
    }
}

/// rename, link, symlink, readlink.
fn links(tree: &mut Tree, c: &Call) {
    let (rec, call, ok) = (c.rec, c.rec.call, c.ok);
    match call {
        RENAME | RENAMEAT | RENAMEAT2 | LINK | LINKAT => {
            if let Some(p) = &c.p0 {
                if ok {
                    tree.first(p, Initial::Exists(Seen::Unknown));
                    tree.parent_used(p);
                    if call != LINK && call != LINKAT {
                        tree.modified(p);
                    }
                } else if c.errno == libc::ENOENT {
                    tree.first(p, Initial::Absent);
                }
            }
            if let (Some(p), true) = (&c.p1, ok) {
                tree.modified(p);
                tree.parent_used(p);
            }
        }
        SYMLINK | SYMLINKAT => {
            if let (Some(p), true) = (&c.p1, ok) {
                tree.first(p, Initial::Absent);
                tree.parent_used(p);
            }
        }
        READLINK | READLINKAT => {
            if let (Some(p), true) = (&c.p0, ok) {
                tree.first(p, Initial::Exists(Seen::Symlink));
                tree.link_len(p, rec.result as u64);
                tree.parent_used(p);
            }
        }
        _ => {}
    }
}

/// Data: what reads say about sizes, what writes change, where positions move.
fn data(tree: &mut Tree, proc: &mut ProcSim, c: &Call) {
    let Some(&fd) = c.fds.first() else {
        return;
    };
    let (rec, call, ok) = (c.rec, c.rec.call, c.ok);
    let size = rec.size().unwrap_or(0);
    if reads(call) && ok {
        let f = proc.fd(Some(&fd));
        let at = match call {
            PREAD | PREADV | PREADV2 => rec.off(0).map(|o| o.max(0) as u64),
            _ => f.pos,
        };
        if let (Some(p), Some(at)) = (f.path, at) {
            let got = rec.result as u64;
            let eof = if call == FGETS { got == 0 } else { got < size };
            tree.extent(&p, at + got, eof);
        }
    }
    if writes(call) {
        if let Some(p) = proc.fd_path(fd) {
            tree.modified(&p);
        }
    }
    if ok {
        positions(tree, proc, c, fd);
    }
    if call == SENDFILE || call == COPY_FILE_RANGE {
        // Output descriptor first for sendfile, second for copy_file_range.
        let out = if call == SENDFILE {
            c.fds.first()
        } else {
            c.fds.get(1)
        };
        if let Some(p) = out.and_then(|&f| proc.fd_path(f)) {
            tree.modified(&p);
        }
    }
}

/// Where a successful call left the position of `fd` (and the size a seek to the end
/// revealed).
fn positions(tree: &mut Tree, proc: &mut ProcSim, c: &Call, fd: i64) {
    let (rec, call) = (c.rec, c.rec.call);
    let Some(f) = proc.fds.get_mut(&fd) else {
        return;
    };
    if call == LSEEK {
        let whence = rec.int(0).unwrap_or(0) as i32;
        let off = rec.off(0).unwrap_or(0);
        f.pos = Some(rec.result as u64);
        if whence == libc::SEEK_END {
            if let Some(p) = f.path.clone() {
                tree.exact_size(&p, (rec.result - off).max(0) as u64);
            }
        }
    }
    if matches!(call, FSEEK | FSEEKO) {
        let whence = rec.int(0).unwrap_or(0) as i32;
        let off = rec.off(0).unwrap_or(0);
        f.pos = match whence {
            libc::SEEK_SET => Some(off.max(0) as u64),
            libc::SEEK_CUR => f.pos.map(|p| (p as i64 + off).max(0) as u64),
            _ => None,
        };
    }
    if matches!(call, FTELL | FTELLO) {
        f.pos = Some(rec.result as u64);
    }
    if moves(call) {
        let n = if call == FPUTS {
            rec.size().unwrap_or(0)
        } else {
            rec.result as u64
        };
        f.pos = f.pos.map(|p| p + n);
    }
}
