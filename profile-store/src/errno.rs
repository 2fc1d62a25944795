//! Errno names, for printing results and reading them in rules and metrics.

/// The errnos known by name (those a file system answers).
const NAMES: &[(&str, i32)] = &[
    ("EPERM", libc::EPERM),
    ("ENOENT", libc::ENOENT),
    ("ESRCH", libc::ESRCH),
    ("EINTR", libc::EINTR),
    ("EIO", libc::EIO),
    ("ENXIO", libc::ENXIO),
    ("E2BIG", libc::E2BIG),
    ("EBADF", libc::EBADF),
    ("EAGAIN", libc::EAGAIN),
    ("ENOMEM", libc::ENOMEM),
    ("EACCES", libc::EACCES),
    ("EFAULT", libc::EFAULT),
    ("EBUSY", libc::EBUSY),
    ("EEXIST", libc::EEXIST),
    ("EXDEV", libc::EXDEV),
    ("ENODEV", libc::ENODEV),
    ("ENOTDIR", libc::ENOTDIR),
    ("EISDIR", libc::EISDIR),
    ("EINVAL", libc::EINVAL),
    ("ENFILE", libc::ENFILE),
    ("EMFILE", libc::EMFILE),
    ("ENOTTY", libc::ENOTTY),
    ("EFBIG", libc::EFBIG),
    ("ENOSPC", libc::ENOSPC),
    ("ESPIPE", libc::ESPIPE),
    ("EROFS", libc::EROFS),
    ("EMLINK", libc::EMLINK),
    ("EPIPE", libc::EPIPE),
    ("ERANGE", libc::ERANGE),
    ("EDEADLK", libc::EDEADLK),
    ("ENAMETOOLONG", libc::ENAMETOOLONG),
    ("ENOLCK", libc::ENOLCK),
    ("ENOSYS", libc::ENOSYS),
    ("ENOTEMPTY", libc::ENOTEMPTY),
    ("ELOOP", libc::ELOOP),
    ("ENODATA", libc::ENODATA),
    ("EOVERFLOW", libc::EOVERFLOW),
    ("EOPNOTSUPP", libc::EOPNOTSUPP),
    ("ESTALE", libc::ESTALE),
    ("EDQUOT", libc::EDQUOT),
];

/// The name of errno `e` (`ENOENT`), if it is one of those a file system answers.
pub fn name(e: i32) -> Option<&'static str> {
    NAMES.iter().find(|(_, v)| *v == e).map(|(n, _)| *n)
}

/// The errno called `name` (`ENOENT`).
pub fn by_name(name: &str) -> Option<i32> {
    NAMES.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
}

/// The name of errno `e`, or its number.
pub fn label(e: i32) -> String {
    name(e).map_or_else(|| e.to_string(), str::to_string)
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_round_trip() {
        assert_eq!(super::name(libc::ENOENT), Some("ENOENT"));
        assert_eq!(super::by_name("EDQUOT"), Some(libc::EDQUOT));
        assert_eq!(super::label(4000), "4000");
        for (n, v) in super::NAMES {
            assert_eq!(super::by_name(n), Some(*v));
        }
    }
}
