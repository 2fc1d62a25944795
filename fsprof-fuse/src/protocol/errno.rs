//! Errors inside file-system operations are raw `io::Error`s carrying the OS errno (adding
//! context to them would lose it); both transports turn them into the reply's errno with the
//! one conversion here ([`to_reply`]). Also how such an error reads in a one-line message
//! ([`plain`]).

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

/// The largest errno the kernel takes in a FUSE reply. It refuses a reply whose error is
/// `-ERESTARTSYS` (512) or beyond, and the caller then waits for an answer that never comes.
pub const MAX_REPLY: i32 = 511;

/// The one conversion of an operation's error into the errno of its reply, for both
/// transports: the OS error's own number when the kernel takes it (1 to [`MAX_REPLY`]), else
/// `EIO` (the first such error is logged).
#[inline]
pub fn to_reply(e: &io::Error) -> i32 {
    match e.raw_os_error() {
        Some(n) if (1..=MAX_REPLY).contains(&n) => n,
        _ => not_taken(e),
    }
}

/// Logs the first error [`to_reply`] cannot pass on (later ones would only repeat the news).
#[cold]
fn not_taken(e: &io::Error) -> i32 {
    static SAID: AtomicBool = AtomicBool::new(false);
    if !SAID.swap(true, Ordering::Relaxed) {
        log::warn!(
            "an operation failed with \"{e}\", which is no errno a FUSE reply can carry (1 to \
             {MAX_REPLY}): answered EIO (said once)"
        );
    }
    libc::EIO
}

/// An `io::Error` carrying `code`.
#[inline]
pub fn err(code: i32) -> io::Error {
    io::Error::from_raw_os_error(code)
}

/// An I/O error's message without Rust's " (os error N)" suffix.
pub fn plain(e: &io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errnos_the_kernel_would_refuse_become_eio() {
        assert_eq!(to_reply(&err(libc::ENOENT)), libc::ENOENT);
        assert_eq!(to_reply(&err(1)), 1);
        assert_eq!(to_reply(&err(MAX_REPLY)), MAX_REPLY);
        for refused in [0, -1, 512, 4095, i32::MAX] {
            assert_eq!(to_reply(&err(refused)), libc::EIO, "{refused}");
        }
        assert_eq!(to_reply(&io::Error::other("no errno")), libc::EIO);
    }

    #[test]
    fn plain_messages_lose_the_os_error_suffix() {
        assert_eq!(plain(&err(libc::ENOENT)), "No such file or directory");
        assert_eq!(plain(&io::Error::other("as said")), "as said");
    }
}
