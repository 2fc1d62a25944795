//! Reading RAIF's records straight from the branches.

use std::ffi::OsStr;
use std::os::fd::AsFd;
use std::path::Path;

use fsprof_fuse::sys;
use raif::layout::{ATTR_MAX, FileMeta, Meta, XATTR};

/// The file record of the branch file `p`, if it has a valid one.
pub fn record(p: &Path) -> Option<FileMeta> {
    let dir = sys::open_path(p.parent()?, libc::O_PATH | libc::O_DIRECTORY).ok()?;
    let mut buf = [0u8; ATTR_MAX];
    let n = sys::getxattr_at(dir.as_fd(), p.file_name()?, OsStr::new(XATTR), &mut buf).ok()?;
    match Meta::decode(&buf[..n])? {
        Meta::File(m) => Some(m),
        Meta::Dir(_) | Meta::Other(_) => None,
    }
}

/// The checksum entries that follow the record of the branch file `p` (after a NUL), if it
/// holds any.
pub fn sums_attr(p: &Path) -> Option<Vec<u8>> {
    let v = crate::fixture::xattr_get(p, XATTR)?;
    let at = v.iter().position(|&c| c == 0)?;
    Some(v[at + 1..].to_vec())
}
