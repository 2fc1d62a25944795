//! Reading RAIF's records straight from the branches.

use std::ffi::OsStr;
use std::os::fd::AsFd;
use std::path::Path;

use fsprof_fuse::sys;
use raif::layout::{FileMeta, META_MAX, Meta, XATTR};

/// The file record of the branch file `p`, if it has a valid one.
pub fn record(p: &Path) -> Option<FileMeta> {
    let dir = sys::open_path(p.parent()?, libc::O_PATH | libc::O_DIRECTORY).ok()?;
    let mut buf = [0u8; META_MAX];
    let n = sys::getxattr_at(dir.as_fd(), p.file_name()?, OsStr::new(XATTR), &mut buf).ok()?;
    match Meta::decode(&buf[..n])? {
        Meta::File(m) => Some(m),
        Meta::Dir(_) | Meta::Other(_) => None,
    }
}

/// The checksum attribute ([`raif::sums::XATTR_NAME`]) of the branch file `p`, if it has one.
pub fn sums_attr(p: &Path) -> Option<Vec<u8>> {
    let dir = sys::open_path(p.parent()?, libc::O_PATH | libc::O_DIRECTORY).ok()?;
    let mut buf = vec![0u8; 64 << 10];
    let name = OsStr::new(raif::sums::XATTR_NAME);
    let n = sys::getxattr_at(dir.as_fd(), p.file_name()?, name, &mut buf).ok()?;
    buf.truncate(n);
    Some(buf)
}
