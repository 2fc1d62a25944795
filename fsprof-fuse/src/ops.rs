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
    Bmap,
    Ioctl,
    Poll,
}

/// Operations served beyond SPEC §6, in [`Op`] order after the standard ones.
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

/// Profile names of the operations, in [`Op`] order: SPEC §6 (from profile-store), then the rest.
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
