//! The one place where an `io::Error` from the lower file system becomes a FUSE reply errno.
//!
//! Operations keep raw `io::Error`s carrying the OS errno; adding context to them would lose it.

use std::io;

use fuser::Errno;

/// The errno to reply with: the OS error's own number, `EIO` when there is none.
#[inline]
pub fn errno(e: &io::Error) -> Errno {
    Errno::from_i32(e.raw_os_error().unwrap_or(libc::EIO))
}

/// An `io::Error` carrying `code`.
#[inline]
pub fn err(code: i32) -> io::Error {
    io::Error::from_raw_os_error(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_is_preserved() {
        assert_eq!(errno(&err(libc::ENOENT)).code(), libc::ENOENT);
        assert_eq!(errno(&err(libc::EXDEV)).code(), libc::EXDEV);
        assert_eq!(errno(&io::Error::other("no errno")).code(), libc::EIO);
    }
}
