//! Safe wrappers around the raw system calls the file systems use: one function per call, each
//! returning `io::Result` with the OS errno intact (a transport turns it into the reply's
//! errno in one place). Split by domain: [`fs`] (files, directories, data), [`xattr`],
//! [`creds`] (the calling thread's credentials), [`process`] (the daemon), [`fuse`] (the FUSE
//! device), [`uring`] (the FUSE ring queues of the io_uring transport). Apart from the
//! transports' handle conversions, this is the only module with `unsafe`.
//!
//! Names passed to the kernel are copied into stack buffers (no allocation per call); names
//! longer than `NAME_MAX` fail with `ENAMETOOLONG` as they would on the lower file system.

#![allow(unsafe_code)]

pub mod cnproc;
pub mod creds;
pub mod fs;
pub mod fuse;
pub mod process;
pub mod uring;
pub mod xattr;

pub use creds::*;
pub use fs::*;
pub use process::*;
pub use xattr::*;

use std::ffi::{CStr, OsStr};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;

/// Longest name component (bytes) accepted, as on Linux.
pub const NAME_MAX: usize = 255;
/// Longest path (bytes, with the terminating NUL) accepted for symlink targets.
pub const PATH_MAX: usize = 4096;

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn cvt_size(r: isize) -> io::Result<usize> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// Runs `f` with `bytes` as a NUL-terminated C string held on the stack (a name-sized buffer
/// for short strings, so the common case fills 256 bytes, not 4 KiB).
fn with_cstr<R>(bytes: &[u8], max: usize, f: impl FnOnce(&CStr) -> io::Result<R>) -> io::Result<R> {
    if bytes.len() > max || bytes.len() > PATH_MAX {
        return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
    }
    if bytes.len() <= NAME_MAX {
        cstr_in(&mut [0u8; NAME_MAX + 1], bytes, f)
    } else {
        cstr_in(&mut [0u8; PATH_MAX + 1], bytes, f)
    }
}

fn cstr_in<R>(
    buf: &mut [u8],
    bytes: &[u8],
    f: impl FnOnce(&CStr) -> io::Result<R>,
) -> io::Result<R> {
    buf[..bytes.len()].copy_from_slice(bytes);
    let c = CStr::from_bytes_until_nul(&buf[..=bytes.len()])
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    if c.to_bytes().len() != bytes.len() {
        // An interior NUL: no such name can exist.
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    f(c)
}

/// Runs `f` with a directory entry name as a C string (at most `NAME_MAX` bytes, no `/`).
pub fn with_name<R>(name: &OsStr, f: impl FnOnce(&CStr) -> io::Result<R>) -> io::Result<R> {
    let b = name.as_bytes();
    if b.contains(&b'/') {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    with_cstr(b, NAME_MAX, f)
}

/// Runs `f` with `/proc/self/fd/N` for `fd`: re-opens an `O_PATH` descriptor with real access
/// modes, or reaches the object for calls that have no descriptor-relative form.
pub fn with_proc_path<R>(fd: BorrowedFd, f: impl FnOnce(&CStr) -> io::Result<R>) -> io::Result<R> {
    let mut buf = [0u8; 32];
    let prefix = b"/proc/self/fd/";
    buf[..prefix.len()].copy_from_slice(prefix);
    let mut n = fd.as_raw_fd() as u32;
    let mut digits = [0u8; 10];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let d = &digits[i..];
    buf[prefix.len()..prefix.len() + d.len()].copy_from_slice(d);
    let c = CStr::from_bytes_until_nul(&buf).expect("NUL-terminated");
    f(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn proc_path_formats_fd_numbers() {
        let f = std::fs::File::open("/").unwrap();
        let fd = std::os::fd::AsFd::as_fd(&f);
        let s = with_proc_path(fd, |p| Ok(p.to_str().unwrap().to_string())).unwrap();
        assert_eq!(s, format!("/proc/self/fd/{}", fd.as_raw_fd()));
    }

    #[test]
    fn names_are_checked() {
        let long = OsStr::from_bytes(&[b'a'; 256]);
        let e = with_name(long, |_| Ok(())).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENAMETOOLONG));
        assert_eq!(
            with_name(OsStr::new("a/b"), |_| Ok(()))
                .unwrap_err()
                .raw_os_error(),
            Some(libc::EINVAL)
        );
        assert_eq!(
            with_name(OsStr::from_bytes(b"a\0b"), |_| Ok(()))
                .unwrap_err()
                .raw_os_error(),
            Some(libc::EINVAL)
        );
        with_name(OsStr::from_bytes(&[b'a'; 255]), |c| {
            assert_eq!(c.to_bytes().len(), 255);
            Ok(())
        })
        .unwrap();
    }
}
