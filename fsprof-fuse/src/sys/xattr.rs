//! Extended attributes, by descriptor and by name: the system calls. The same concern one
//! level up is the passthrough's operations ([`crate::passthrough`]'s `xattr.rs`), which
//! make these calls for a request.

#![allow(unsafe_code)]

use std::ffi::{CStr, OsStr};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;

use super::{NAME_MAX, PATH_MAX, cvt, cvt_size, with_cstr, with_proc_path};

/// `getxattr(2)` on the object `fd` refers to (via `/proc/self/fd`); an empty `buf` asks for
/// the size.
pub fn getxattr_fd(fd: BorrowedFd, name: &OsStr, buf: &mut [u8]) -> io::Result<usize> {
    with_proc_path(fd, |p| getxattr_path(p, name, buf, true))
}

/// `getxattr(2)` (`follow`) or `lgetxattr(2)` of `path`.
fn getxattr_path(path: &CStr, name: &OsStr, buf: &mut [u8], follow: bool) -> io::Result<usize> {
    with_cstr(name.as_bytes(), 255, |n| {
        let (p, n, b, len) = (path.as_ptr(), n.as_ptr(), buf_ptr(buf), buf.len());
        // SAFETY: valid C strings and a writable buffer of its length (or null for size 0).
        cvt_size(unsafe {
            if follow {
                libc::getxattr(p, n, b, len)
            } else {
                libc::lgetxattr(p, n, b, len)
            }
        })
    })
}

/// `setxattr(2)` (`follow`) or `lsetxattr(2)` of `path`.
fn setxattr_path(
    path: &CStr,
    name: &OsStr,
    value: &[u8],
    flags: i32,
    follow: bool,
) -> io::Result<()> {
    with_cstr(name.as_bytes(), 255, |n| {
        let (p, n, v, len) = (
            path.as_ptr(),
            n.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
        );
        // SAFETY: valid C strings and a readable value buffer of its length.
        cvt(unsafe {
            if follow {
                libc::setxattr(p, n, v, len, flags)
            } else {
                libc::lsetxattr(p, n, v, len, flags)
            }
        })
        .map(drop)
    })
}

fn buf_ptr(buf: &mut [u8]) -> *mut libc::c_void {
    if buf.is_empty() {
        std::ptr::null_mut()
    } else {
        buf.as_mut_ptr().cast()
    }
}

/// `listxattr(2)` on the object `fd` refers to; an empty `buf` asks for the size.
pub fn listxattr_fd(fd: BorrowedFd, buf: &mut [u8]) -> io::Result<usize> {
    with_proc_path(fd, |p| {
        // SAFETY: valid C string and buffer.
        cvt_size(unsafe { libc::listxattr(p.as_ptr(), buf_ptr(buf).cast(), buf.len()) })
    })
}

/// `setxattr(2)` on the object `fd` refers to.
pub fn setxattr_fd(fd: BorrowedFd, name: &OsStr, value: &[u8], flags: i32) -> io::Result<()> {
    with_proc_path(fd, |p| setxattr_path(p, name, value, flags, true))
}

/// `removexattr(2)` on the object `fd` refers to.
pub fn removexattr_fd(fd: BorrowedFd, name: &OsStr) -> io::Result<()> {
    with_proc_path(fd, |p| {
        with_cstr(name.as_bytes(), 255, |n| {
            // SAFETY: valid C strings.
            cvt(unsafe { libc::removexattr(p.as_ptr(), n.as_ptr()) }).map(drop)
        })
    })
}

/// Runs `f` with `/proc/self/fd/DIR/NAME`: reaches an entry of a directory for calls that have
/// no descriptor-relative form (the `l*xattr` family), without opening it.
fn with_proc_child<R>(
    dir: BorrowedFd,
    name: &OsStr,
    f: impl FnOnce(&CStr) -> io::Result<R>,
) -> io::Result<R> {
    let nb = name.as_bytes();
    if nb.contains(&b'/') {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    if nb.len() > NAME_MAX {
        return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
    }
    with_proc_path(dir, |p| {
        let pb = p.to_bytes();
        let mut path = [0u8; 32 + 1 + NAME_MAX];
        path[..pb.len()].copy_from_slice(pb);
        path[pb.len()] = b'/';
        path[pb.len() + 1..pb.len() + 1 + nb.len()].copy_from_slice(nb);
        with_cstr(&path[..pb.len() + 1 + nb.len()], PATH_MAX, f)
    })
}

/// `lgetxattr(2)` of the relative path `path` (several components) under directory `dir` (a
/// final symlink is not followed); an empty `buf` asks for the size.
pub fn getxattr_path_at(
    dir: BorrowedFd,
    path: &[u8],
    attr: &OsStr,
    buf: &mut [u8],
) -> io::Result<usize> {
    with_proc_path(dir, |p| {
        let mut full = Vec::with_capacity(p.to_bytes().len() + 1 + path.len());
        full.extend_from_slice(p.to_bytes());
        full.push(b'/');
        full.extend_from_slice(path);
        with_cstr(&full, PATH_MAX, |c| getxattr_path(c, attr, buf, false))
    })
}

/// `lgetxattr(2)` of the entry `name` in directory `dir` (a final symlink is not followed);
/// an empty `buf` asks for the size.
pub fn getxattr_at(
    dir: BorrowedFd,
    name: &OsStr,
    attr: &OsStr,
    buf: &mut [u8],
) -> io::Result<usize> {
    with_proc_child(dir, name, |p| getxattr_path(p, attr, buf, false))
}

/// `lsetxattr(2)` of the entry `name` in directory `dir`.
pub fn setxattr_at(
    dir: BorrowedFd,
    name: &OsStr,
    attr: &OsStr,
    value: &[u8],
    flags: i32,
) -> io::Result<()> {
    with_proc_child(dir, name, |p| setxattr_path(p, attr, value, flags, false))
}

/// `fgetxattr(2)` on an open (not `O_PATH`) descriptor; an empty `buf` asks for the size.
pub fn fgetxattr(fd: BorrowedFd, attr: &OsStr, buf: &mut [u8]) -> io::Result<usize> {
    with_cstr(attr.as_bytes(), 255, |n| {
        // SAFETY: valid descriptor, C string and a writable buffer of its length (or null).
        cvt_size(unsafe { libc::fgetxattr(fd.as_raw_fd(), n.as_ptr(), buf_ptr(buf), buf.len()) })
    })
}

/// `fsetxattr(2)` on an open (not `O_PATH`) descriptor.
pub fn fsetxattr(fd: BorrowedFd, attr: &OsStr, value: &[u8], flags: i32) -> io::Result<()> {
    with_cstr(attr.as_bytes(), 255, |n| {
        // SAFETY: valid descriptor, C string and a readable value buffer of its length.
        cvt(unsafe {
            libc::fsetxattr(
                fd.as_raw_fd(),
                n.as_ptr(),
                value.as_ptr().cast(),
                value.len(),
                flags,
            )
        })
        .map(drop)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xattrs_by_name_and_by_descriptor() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        std::fs::write(dir.join("f"), b"x").unwrap();
        let d = std::fs::File::open(dir).unwrap();
        let d = std::os::fd::AsFd::as_fd(&d);
        let (name, attr) = (OsStr::new("f"), OsStr::new("user.fsprof.test"));
        match setxattr_at(d, name, attr, b"v1", 0) {
            // tmpfs before 6.6 and some others have no user xattrs.
            Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {}
            r => {
                r.unwrap();
                let mut buf = [0u8; 8];
                assert_eq!(getxattr_at(d, name, attr, &mut []).unwrap(), 2);
                assert_eq!(getxattr_at(d, name, attr, &mut buf).unwrap(), 2);
                assert_eq!(&buf[..2], b"v1");
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(dir.join("f"))
                    .unwrap();
                let f = std::os::fd::AsFd::as_fd(&f);
                fsetxattr(f, attr, b"v22", 0).unwrap();
                assert_eq!(fgetxattr(f, attr, &mut buf).unwrap(), 3);
                assert_eq!(&buf[..3], b"v22");
                let e = getxattr_at(d, OsStr::new("a/b"), attr, &mut buf).unwrap_err();
                assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
            }
        }
    }
}
