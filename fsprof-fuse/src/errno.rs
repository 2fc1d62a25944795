//! Errors inside file-system operations are raw `io::Error`s carrying the OS errno (adding
//! context to them would lose it); each transport turns them into the reply's errno in one
//! place (e.g. [`crate::transport::classic::errno`]).

use std::io;

/// An `io::Error` carrying `code`.
#[inline]
pub fn err(code: i32) -> io::Error {
    io::Error::from_raw_os_error(code)
}
