//! Errors inside file-system operations are raw `io::Error`s carrying the OS errno (adding
//! context to them would lose it); each transport turns them into the reply's errno in one
//! place (e.g. [`crate::transport::classic::errno`]). Also how such an error reads in a
//! one-line message ([`plain`]).

use std::io;

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
