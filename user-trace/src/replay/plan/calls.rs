//! What the traced calls mean to a plan: which string items are paths, which calls make,
//! read, write or move descriptors, fopen modes as open flags, and lexical path normalization.

use std::path::{Component, Path, PathBuf};

use crate::abi::id;
use crate::trace::Record;

/// Whether `rec` makes a descriptor (when it succeeds).
pub(super) fn makes_fd(rec: &Record) -> bool {
    use crate::abi::id::*;
    let call = rec.call;
    matches!(
        call,
        OPEN | OPENAT | CREAT | DUP | DUP2 | DUP3 | FOPEN | FREOPEN | OPENDIR
    ) || call == FCNTL
        && matches!(
            rec.int(0).map(|c| c as i32),
            Some(libc::F_DUPFD | libc::F_DUPFD_CLOEXEC)
        )
}

/// Whether the `k`-th string item of `call` is a path (and which descriptor item it is
/// relative to), or something else (a mode, a name, a link's target).
pub(super) fn path_role(call: u8, k: usize) -> Option<Option<usize>> {
    use id::*;
    match (call, k) {
        (
            OPENAT | FSTATAT | STATX | FACCESSAT | MKDIRAT | UNLINKAT | READLINKAT | FCHMODAT
            | FCHOWNAT | UTIMENSAT,
            0,
        ) => Some(Some(0)),
        (RENAMEAT | RENAMEAT2 | LINKAT, 0) => Some(Some(0)),
        (RENAMEAT | RENAMEAT2 | LINKAT, 1) => Some(Some(1)),
        (SYMLINK, 0) | (SYMLINKAT, 0) => None,
        (SYMLINK, 1) => Some(None),
        (SYMLINKAT, 1) => Some(Some(0)),
        (FSETXATTR | FGETXATTR | FREMOVEXATTR | FDOPEN, _) => None,
        (SETXATTR | LSETXATTR | GETXATTR | LGETXATTR | REMOVEXATTR | LREMOVEXATTR, 1) => None,
        (FOPEN | FREOPEN, 1) => None,
        (_, 0 | 1) => Some(None),
        _ => None,
    }
}

/// Whether `call`'s paths are resolved against its descriptor items (the `*at` calls):
/// their descriptors name directories, not the objects the call acts on.
pub(super) fn is_at_call(call: u8) -> bool {
    use id::*;
    matches!(
        call,
        OPENAT
            | FSTATAT
            | STATX
            | FACCESSAT
            | MKDIRAT
            | UNLINKAT
            | RENAMEAT
            | RENAMEAT2
            | LINKAT
            | SYMLINKAT
            | READLINKAT
            | FCHMODAT
            | FCHOWNAT
    )
}

/// Whether `rec` creates or removes a name (and so changes the directory holding it).
pub(super) fn changes_dir(rec: &Record) -> bool {
    use id::*;
    match rec.call {
        OPEN | OPENAT => rec.flags() as i32 & libc::O_CREAT != 0,
        FOPEN => fopen_flags(rec.path(1).unwrap_or(b"r")) & libc::O_CREAT != 0,
        CREAT | MKDIR | MKDIRAT | RMDIR | UNLINK | UNLINKAT | REMOVE | RENAME | RENAMEAT
        | RENAMEAT2 | LINK | LINKAT | SYMLINK | SYMLINKAT => true,
        _ => false,
    }
}

/// Lexically normalized absolute path (`.` and `..` resolved without the file system).
pub(super) fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
            _ => {}
        }
    }
    out
}

/// fopen mode to open flags.
pub(crate) fn fopen_flags(mode: &[u8]) -> i32 {
    let plus = mode.contains(&b'+');
    let excl = if mode.contains(&b'x') {
        libc::O_EXCL
    } else {
        0
    };
    match mode.first() {
        Some(b'w') => {
            (if plus { libc::O_RDWR } else { libc::O_WRONLY })
                | libc::O_CREAT
                | libc::O_TRUNC
                | excl
        }
        Some(b'a') => {
            (if plus { libc::O_RDWR } else { libc::O_WRONLY })
                | libc::O_CREAT
                | libc::O_APPEND
                | excl
        }
        _ => {
            if plus {
                libc::O_RDWR
            } else {
                libc::O_RDONLY
            }
        }
    }
}

/// Which calls read data from their (first) descriptor, and which write.
pub(super) fn reads(call: u8) -> bool {
    use id::*;
    matches!(
        call,
        READ | PREAD | READV | PREADV | PREADV2 | FREAD | FGETS
    )
}

pub(super) fn writes(call: u8) -> bool {
    use id::*;
    matches!(
        call,
        WRITE
            | PWRITE
            | WRITEV
            | PWRITEV
            | PWRITEV2
            | FWRITE
            | FPUTS
            | FTRUNCATE
            | FALLOCATE
            | POSIX_FALLOCATE
    )
}

/// Calls that move the descriptor's position by their result.
pub(super) fn moves(call: u8) -> bool {
    use id::*;
    matches!(call, READ | READV | WRITE | WRITEV | FREAD | FWRITE | FGETS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_normalize_lexically() {
        assert_eq!(normalize(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
        assert_eq!(normalize(Path::new("/../x")), PathBuf::from("/x"));
    }

    #[test]
    fn fopen_modes() {
        assert_eq!(fopen_flags(b"r"), libc::O_RDONLY);
        assert_eq!(fopen_flags(b"r+"), libc::O_RDWR);
        assert_eq!(
            fopen_flags(b"w"),
            libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC
        );
        assert_eq!(
            fopen_flags(b"a+"),
            libc::O_RDWR | libc::O_CREAT | libc::O_APPEND
        );
        assert_eq!(
            fopen_flags(b"wx"),
            libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_EXCL
        );
    }

    #[test]
    fn roles_of_string_items() {
        assert_eq!(path_role(id::OPENAT, 0), Some(Some(0)));
        assert_eq!(path_role(id::RENAMEAT, 1), Some(Some(1)));
        assert_eq!(path_role(id::FOPEN, 1), None);
        assert_eq!(path_role(id::SETXATTR, 1), None);
        assert_eq!(path_role(id::SYMLINK, 0), None);
        assert_eq!(path_role(id::SYMLINK, 1), Some(None));
        assert_eq!(path_role(id::STAT, 0), Some(None));
    }
}
