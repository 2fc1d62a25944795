//! Opening an input file (a profile, a mount's control file, a slow log, a trace) for reading
//! without ever blocking on something that is not a file.
//!
//! `open(2)` of a FIFO for reading waits for a writer, and a read of a terminal or some devices
//! waits for input: a FIFO named `.fsprof` in a directory, or given as a profile, hung the
//! tools. So an input is opened with `O_NONBLOCK` (a FIFO opens at once, a socket fails),
//! checked with `fstat`, and refused in one line unless it is a regular file; only then is
//! `O_NONBLOCK` cleared. The type is also checked before the open, so that a device is not
//! even opened (opening one can have effects of its own); the check after it closes the race
//! with a file replaced in between. Standard input (`-`) is not opened here: a pipe there is
//! what the user asked for.

#![allow(unsafe_code)]

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// What a file of type `t` is, when it is not a regular file (a directory is left to the
/// caller, which may read a mount's control file in it).
fn not_regular(t: std::fs::FileType) -> Option<&'static str> {
    if t.is_fifo() {
        Some("a FIFO")
    } else if t.is_socket() {
        Some("a socket")
    } else if t.is_char_device() {
        Some("a character device")
    } else if t.is_block_device() {
        Some("a block device")
    } else if t.is_dir() {
        Some("a directory")
    } else {
        None
    }
}

/// The error for an input that is `what` (a FIFO...).
fn refused(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{what}, not a regular file: only files are read (or - for standard input)"),
    )
}

/// Opens `path` for reading if it is a regular file (following symbolic links); anything else
/// is refused with an [`io::ErrorKind::InvalidInput`] error that says what it is, without
/// blocking.
pub fn regular(path: &Path) -> io::Result<File> {
    if let Some(what) = not_regular(std::fs::metadata(path)?.file_type()) {
        return Err(refused(what));
    }
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    if let Some(what) = not_regular(f.metadata()?.file_type()) {
        return Err(refused(what));
    }
    clear_nonblock(&f)?;
    Ok(f)
}

/// Clears `O_NONBLOCK` on `f`.
fn clear_nonblock(f: &File) -> io::Result<()> {
    let fd = f.as_raw_fd();
    // SAFETY: fcntl on a descriptor `f` owns, without pointer arguments.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_a_socket_and_a_device_are_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("p.fsprof");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = regular(&fifo).unwrap_err();
        assert_eq!(
            e.to_string(),
            "a FIFO, not a regular file: only files are read (or - for standard input)"
        );
        let sock = dir.path().join("s");
        let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        assert!(
            regular(&sock)
                .unwrap_err()
                .to_string()
                .starts_with("a socket")
        );
        let e = regular(Path::new("/dev/null")).unwrap_err();
        assert!(e.to_string().starts_with("a character device"), "{e}");
        let file = dir.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        let mut s = String::new();
        io::Read::read_to_string(&mut regular(&file).unwrap(), &mut s).unwrap();
        assert_eq!(s, "x");
    }
}
