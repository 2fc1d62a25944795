//! Operation names (`docs/format.md#operation-names`) and the order in which profiles list them.
//!
//! A profile names an operation `OP_` plus the FUSE operation in upper case. The writer lists the
//! operations of [`STANDARD`] first, in that order, then any other name alphabetically.

use std::cmp::Ordering;

/// The standard FUSE operations, in the order profiles list them
/// (`docs/format.md#fuse-operations`).
pub const STANDARD: &[&str] = &[
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
];

/// Position of a name in the listing order: standard operations by their index, others after.
fn rank(name: &str) -> usize {
    STANDARD
        .iter()
        .position(|s| *s == name)
        .unwrap_or(STANDARD.len())
}

/// Compares two operation names in the listing order: [`STANDARD`] order, others after,
/// alphabetically (`docs/format.md#writer-order`).
pub fn listing_order(a: &str, b: &str) -> Ordering {
    rank(a).cmp(&rank(b)).then_with(|| a.cmp(b))
}

/// Whether `name` is a valid operation name: `OP_` (a FUSE operation), `SYS_` (a C library call
/// timed in the application) or `BLK_` (a block-device request; `docs/format.md#operation-names`)
/// followed by upper-case letters, digits and underscores.
pub fn is_valid_name(name: &str) -> bool {
    name.strip_prefix("OP_")
        .or_else(|| name.strip_prefix("SYS_"))
        .or_else(|| name.strip_prefix("BLK_"))
        .is_some_and(|rest| {
            !rest.is_empty()
                && rest
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
        })
}

/// Whether `name` is a user-level call (`SYS_...`), which only version 2 writes.
pub fn is_user_call(name: &str) -> bool {
    name.starts_with("SYS_")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_is_standard_then_alphabetical() {
        let mut names = vec![
            "OP_ZETA",
            "OP_WRITE",
            "OP_ALPHA",
            "OP_LOOKUP",
            "OP_COPY_FILE_RANGE",
        ];
        names.sort_by(|a, b| listing_order(a, b));
        assert_eq!(
            names,
            [
                "OP_LOOKUP",
                "OP_WRITE",
                "OP_COPY_FILE_RANGE",
                "OP_ALPHA",
                "OP_ZETA"
            ]
        );
    }

    #[test]
    fn names() {
        assert!(is_valid_name("OP_WRITE_SUPER"));
        assert!(is_valid_name("OP_X2"));
        assert!(!is_valid_name("OP_"));
        assert!(!is_valid_name("OP_read"));
        assert!(!is_valid_name("READ"));
        assert!(is_valid_name("SYS_OPENAT") && is_user_call("SYS_OPENAT"));
        assert!(!is_valid_name("SYS_") && !is_valid_name("SYS_read"));
        assert!(!is_user_call("OP_READ"));
        assert!(is_valid_name("BLK_READ_SYNC") && !is_valid_name("BLK_"));
        for n in STANDARD {
            assert!(is_valid_name(n));
        }
    }
}
