//! Extended-attribute lists shared by the passthrough and RAIF: the names a caller may see.

use std::cell::RefCell;
use std::io;

use crate::protocol::errno::err;

/// Largest attribute value or name list (Linux's `XATTR_SIZE_MAX`).
pub const XATTR_MAX: usize = 64 * 1024;

thread_local! {
    /// This thread's scratch buffer for whole name lists (allocated once).
    static LIST: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// A `listxattr` answer into `out` (empty: the length only; `ERANGE` if it does not fit): the
/// whole list, read by `list` into a scratch buffer of [`XATTR_MAX`] bytes, filtered to what
/// the caller may see ([`visible_names`]). Returns the filtered length.
pub fn visible_names_into(
    root: bool,
    hidden: impl Fn(&[u8]) -> bool,
    out: &mut [u8],
    list: impl FnOnce(&mut [u8]) -> io::Result<usize>,
) -> io::Result<usize> {
    LIST.with(|l| {
        let mut l = l.borrow_mut();
        if l.len() < XATTR_MAX {
            l.resize(XATTR_MAX, 0);
        }
        let n = list(&mut l[..])?;
        let n = visible_names(&mut l[..n], root, hidden);
        if out.is_empty() {
            return Ok(n);
        }
        let dst = out.get_mut(..n).ok_or_else(|| err(libc::ERANGE))?;
        dst.copy_from_slice(&l[..n]);
        Ok(n)
    })
}

/// Filters a NUL-separated list of names in place to those the caller may see; returns the new
/// length. `trusted.*` names are shown to root only, as a local file system does (the daemon
/// reads them with its own privilege, and the kernel refuses them to anyone else); `hidden`
/// names (a file system's own) to no one.
pub fn visible_names(list: &mut [u8], root: bool, hidden: impl Fn(&[u8]) -> bool) -> usize {
    let mut out = 0;
    let mut start = 0;
    while start < list.len() {
        let end = list[start..]
            .iter()
            .position(|&b| b == 0)
            .map_or(list.len(), |p| start + p + 1);
        let name = &list[start..end];
        let name = name.strip_suffix(b"\0").unwrap_or(name);
        if !(hidden(name) || !root && name.starts_with(b"trusted.")) {
            list.copy_within(start..end, out);
            out += end - start;
        }
        start = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::visible_names;

    #[test]
    fn trusted_names_are_shown_to_root_only_and_hidden_ones_to_no_one() {
        let list = b"user.a\0trusted.x\0security.s\0user.raif\0trusted.y\0";
        let mut l = list.to_vec();
        let n = visible_names(&mut l, false, |_| false);
        assert_eq!(&l[..n], b"user.a\0security.s\0user.raif\0");
        let mut l = list.to_vec();
        let n = visible_names(&mut l, true, |n| n == b"user.raif");
        assert_eq!(&l[..n], b"user.a\0trusted.x\0security.s\0trusted.y\0");
        let mut l = list.to_vec();
        let n = visible_names(&mut l, false, |n| n.starts_with(b"user."));
        assert_eq!(&l[..n], b"security.s\0");
        let mut empty: Vec<u8> = Vec::new();
        assert_eq!(visible_names(&mut empty, false, |_| true), 0);
    }
}
