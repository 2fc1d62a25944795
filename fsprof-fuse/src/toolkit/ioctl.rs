//! `ioctl` requests: what fsprof's file systems answer.
//!
//! None is passed to the lower file: an ioctl's argument may hold pointers into the caller's
//! memory, which the daemon cannot follow, and a daemon running as root would run it with rights
//! the caller may lack. Every request is answered `ENOTTY` ("inappropriate ioctl for device"),
//! which is what a local file system answers for requests it does not know (the kernel turns a
//! file system's `ENOSYS` into `ENOTTY` as well, so callers see the same either way).
//!
//! Terminal requests (type `'T'`: `TCGETS` from every `isatty(3)`, so from every Python
//! `open()`, `TIOCGWINSZ`, ...) never apply to a file, on any file system: they are answered
//! silently. Any other request is logged once, the first time it arrives (at most
//! [`MAX_LOGGED`] distinct ones), so that a tool that needs one is visible in the log without
//! flooding it.

use std::io;

use parking_lot::Mutex;

/// Distinct unknown requests logged; those beyond are answered without a word.
pub const MAX_LOGGED: usize = 64;

/// Requests logged so far (at most [`MAX_LOGGED`]).
static LOGGED: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// The `'T'` type of terminal requests (`_IOC_TYPE(cmd)`; the old `TCGETS`-style numbers put
/// it in the same byte).
const TERMINAL: u32 = b'T' as u32;

/// Whether `cmd` is a terminal request (which no file answers).
pub fn is_terminal(cmd: u32) -> bool {
    (cmd >> 8) & 0xff == TERMINAL
}

/// The answer to ioctl `cmd` on a file or directory of the mount: `ENOTTY`, as a local file
/// system answers a request it does not serve. Requests other than terminal ones are logged
/// the first time each arrives.
pub fn answer(cmd: u32) -> io::Error {
    if !is_terminal(cmd) && first_time(cmd) {
        log::warn!(
            "ioctl {cmd:#010x} (type {:#04x}, number {}) is not passed to lower files: \
             answered ENOTTY (logged once)",
            (cmd >> 8) & 0xff,
            cmd & 0xff
        );
    }
    io::Error::from_raw_os_error(libc::ENOTTY)
}

/// Whether `cmd` has not been seen before (and is now recorded as seen). Past
/// [`MAX_LOGGED`] distinct requests, says no to all (after one line saying so).
fn first_time(cmd: u32) -> bool {
    let mut seen = LOGGED.lock();
    if seen.contains(&cmd) || seen.len() > MAX_LOGGED {
        return false;
    }
    if seen.len() == MAX_LOGGED {
        seen.push(cmd);
        log::warn!("more than {MAX_LOGGED} distinct unknown ioctls: no more are logged");
        return false;
    }
    seen.push(cmd);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_requests_are_recognized() {
        assert!(is_terminal(libc::TCGETS as u32));
        assert!(is_terminal(libc::TIOCGWINSZ as u32));
        assert!(!is_terminal(libc::FS_IOC_GETFLAGS as u32));
        assert_eq!(
            answer(libc::TCGETS as u32).raw_os_error(),
            Some(libc::ENOTTY)
        );
    }

    /// Each unknown request is logged once; the record is bounded.
    #[test]
    fn unknown_requests_are_logged_once_and_the_record_is_bounded() {
        let cmd = 0x8000_6600;
        assert!(first_time(cmd));
        assert!(!first_time(cmd));
        for c in 0..(2 * MAX_LOGGED as u32) {
            first_time(0x4000_7700 + c);
        }
        assert!(LOGGED.lock().len() <= MAX_LOGGED + 1);
        assert!(!first_time(0x4000_7800));
    }
}
