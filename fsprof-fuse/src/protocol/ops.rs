//! The operations a FUSE file system serves, as indices into the profile's operation table.

/// A FUSE operation, named as in `docs/format.md#fuse-operations`; `op as usize` is its index
/// in [`NAMES`].
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(usize)]
pub enum Op {
    Lookup,
    Forget,
    Getattr,
    Setattr,
    Readlink,
    Mknod,
    Mkdir,
    Unlink,
    Rmdir,
    Symlink,
    Rename,
    Link,
    Open,
    Read,
    Write,
    Flush,
    Release,
    Fsync,
    Opendir,
    Readdir,
    Readdirplus,
    Releasedir,
    Fsyncdir,
    Statfs,
    Setxattr,
    Getxattr,
    Listxattr,
    Removexattr,
    Access,
    Create,
    Getlk,
    Setlk,
    Fallocate,
    Lseek,
    CopyFileRange,
    Bmap,
    Ioctl,
    Poll,
}

/// Operations served beyond the standard list ([`profile_store::ops::STANDARD`]), in [`Op`]
/// order after the standard ones.
const EXTRA: [&str; 3] = ["OP_BMAP", "OP_IOCTL", "OP_POLL"];

const fn concat<const N: usize>(a: &[&'static str], b: &[&'static str]) -> [&'static str; N] {
    let mut out = [""; N];
    let mut i = 0;
    while i < a.len() {
        out[i] = a[i];
        i += 1;
    }
    let mut j = 0;
    while j < b.len() {
        out[i + j] = b[j];
        j += 1;
    }
    out
}

/// Profile names of the operations, in [`Op`] order: the standard list (from profile-store),
/// then the rest.
pub const NAMES: [&str; profile_store::ops::STANDARD.len() + EXTRA.len()] =
    concat(profile_store::ops::STANDARD, &EXTRA);

impl Op {
    /// The profile name (`OP_...`).
    pub fn name(self) -> &'static str {
        NAMES[self as usize]
    }

    /// Index in the recorder's operation table.
    pub fn id(self) -> usize {
        self as usize
    }
}

/// A system call a file system makes on a lower directory or branch, named as inner calls are
/// named (`docs/format.md#inner-calls`): the system call in lower case (`pread`, `statx`,
/// `getdents64`). Calls through `/proc/self/fd` paths (`chmod`, `getxattr`...) are named after the
/// call made.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Sys {
    Statx,
    Openat,
    OpenByHandleAt,
    NameToHandleAt,
    Close,
    Dup,
    Pread,
    Pwrite,
    Fsync,
    Fdatasync,
    Fallocate,
    Lseek,
    CopyFileRange,
    Getdents64,
    Fstatvfs,
    Readlinkat,
    Fchmod,
    Chmod,
    Fchownat,
    Ftruncate,
    Truncate,
    Utimensat,
    Mkdirat,
    Mknodat,
    Symlinkat,
    Unlinkat,
    Renameat2,
    Linkat,
    Fgetxattr,
    Fsetxattr,
    Flistxattr,
    Fremovexattr,
    Getxattr,
    Setxattr,
    Listxattr,
    Removexattr,
    Ioctl,
    Lgetxattr,
    Lsetxattr,
}

impl Sys {
    /// Every call, in declaration order.
    pub const ALL: [Sys; 39] = [
        Sys::Statx,
        Sys::Openat,
        Sys::OpenByHandleAt,
        Sys::NameToHandleAt,
        Sys::Close,
        Sys::Dup,
        Sys::Pread,
        Sys::Pwrite,
        Sys::Fsync,
        Sys::Fdatasync,
        Sys::Fallocate,
        Sys::Lseek,
        Sys::CopyFileRange,
        Sys::Getdents64,
        Sys::Fstatvfs,
        Sys::Readlinkat,
        Sys::Fchmod,
        Sys::Chmod,
        Sys::Fchownat,
        Sys::Ftruncate,
        Sys::Truncate,
        Sys::Utimensat,
        Sys::Mkdirat,
        Sys::Mknodat,
        Sys::Symlinkat,
        Sys::Unlinkat,
        Sys::Renameat2,
        Sys::Linkat,
        Sys::Fgetxattr,
        Sys::Fsetxattr,
        Sys::Flistxattr,
        Sys::Fremovexattr,
        Sys::Getxattr,
        Sys::Setxattr,
        Sys::Listxattr,
        Sys::Removexattr,
        Sys::Ioctl,
        Sys::Lgetxattr,
        Sys::Lsetxattr,
    ];

    /// The name (`docs/format.md#inner-calls`): the system call in lower case.
    pub fn name(self) -> &'static str {
        match self {
            Sys::Statx => "statx",
            Sys::Openat => "openat",
            Sys::OpenByHandleAt => "open_by_handle_at",
            Sys::NameToHandleAt => "name_to_handle_at",
            Sys::Close => "close",
            Sys::Dup => "dup",
            Sys::Pread => "pread",
            Sys::Pwrite => "pwrite",
            Sys::Fsync => "fsync",
            Sys::Fdatasync => "fdatasync",
            Sys::Fallocate => "fallocate",
            Sys::Lseek => "lseek",
            Sys::CopyFileRange => "copy_file_range",
            Sys::Getdents64 => "getdents64",
            Sys::Fstatvfs => "fstatvfs",
            Sys::Readlinkat => "readlinkat",
            Sys::Fchmod => "fchmod",
            Sys::Chmod => "chmod",
            Sys::Fchownat => "fchownat",
            Sys::Ftruncate => "ftruncate",
            Sys::Truncate => "truncate",
            Sys::Utimensat => "utimensat",
            Sys::Mkdirat => "mkdirat",
            Sys::Mknodat => "mknodat",
            Sys::Symlinkat => "symlinkat",
            Sys::Unlinkat => "unlinkat",
            Sys::Renameat2 => "renameat2",
            Sys::Linkat => "linkat",
            Sys::Fgetxattr => "fgetxattr",
            Sys::Fsetxattr => "fsetxattr",
            Sys::Flistxattr => "flistxattr",
            Sys::Fremovexattr => "fremovexattr",
            Sys::Getxattr => "getxattr",
            Sys::Setxattr => "setxattr",
            Sys::Listxattr => "listxattr",
            Sys::Removexattr => "removexattr",
            Sys::Ioctl => "ioctl",
            Sys::Lgetxattr => "lgetxattr",
            Sys::Lsetxattr => "lsetxattr",
        }
    }

    /// The call of a name, as [`Sys::name`] gives it.
    pub fn from_name(name: &str) -> Option<Sys> {
        Sys::ALL.into_iter().find(|s| s.name() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_spec_order() {
        assert_eq!(
            &NAMES[..profile_store::ops::STANDARD.len()],
            profile_store::ops::STANDARD
        );
        assert_eq!(Op::CopyFileRange.name(), "OP_COPY_FILE_RANGE");
        assert_eq!(Op::Poll.id(), NAMES.len() - 1);
    }

    #[test]
    fn inner_call_names_are_distinct_and_round_trip() {
        for (i, s) in Sys::ALL.iter().enumerate() {
            assert_eq!(*s as usize, i);
            assert_eq!(Sys::from_name(s.name()), Some(*s));
            assert!(
                s.name()
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            );
        }
        assert_eq!(Sys::from_name("nope"), None);
    }
}
