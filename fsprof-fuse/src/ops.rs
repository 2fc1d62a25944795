//! The operations a FUSE file system serves, as indices into the profile's operation table.

/// A FUSE operation, named as in SPEC §6; `op as usize` is its index in [`NAMES`].
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
    BatchForget,
    Bmap,
    Ioctl,
    Poll,
}

/// Profile names of the operations, in [`Op`] order: SPEC §6 first, then the rest.
pub const NAMES: &[&str] = &[
    "OP_LOOKUP",
    "OP_FORGET",
    "OP_GETATTR",
    "OP_SETATTR",
    "OP_READLINK",
    "OP_MKNOD",
    "OP_MKDIR",
    "OP_UNLINK",
    "OP_RMDIR",
    "OP_SYMLINK",
    "OP_RENAME",
    "OP_LINK",
    "OP_OPEN",
    "OP_READ",
    "OP_WRITE",
    "OP_FLUSH",
    "OP_RELEASE",
    "OP_FSYNC",
    "OP_OPENDIR",
    "OP_READDIR",
    "OP_READDIRPLUS",
    "OP_RELEASEDIR",
    "OP_FSYNCDIR",
    "OP_STATFS",
    "OP_SETXATTR",
    "OP_GETXATTR",
    "OP_LISTXATTR",
    "OP_REMOVEXATTR",
    "OP_ACCESS",
    "OP_CREATE",
    "OP_GETLK",
    "OP_SETLK",
    "OP_FALLOCATE",
    "OP_LSEEK",
    "OP_COPY_FILE_RANGE",
    "OP_BATCH_FORGET",
    "OP_BMAP",
    "OP_IOCTL",
    "OP_POLL",
];

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
}
