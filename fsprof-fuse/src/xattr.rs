//! Extended-attribute replies shared by the passthrough and RAIF: the size-or-value answer and
//! the list of names a caller may see.

use std::io;

use fuser::ReplyXattr;

use crate::errno::{err, errno};

/// Largest attribute value or name list (Linux's `XATTR_SIZE_MAX`).
pub const XATTR_MAX: usize = 64 * 1024;

/// Replies to `getxattr`/`listxattr` asked with buffer size `size`: the length `n` of the
/// value when `size` is 0 (then `buf` is not read), `ERANGE` when it is larger than `size`,
/// else the value, `buf[..n]`.
pub fn reply_sized(size: u32, r: io::Result<usize>, buf: &[u8], reply: ReplyXattr) {
    match crate::profiled::ready(r) {
        Ok(n) if size == 0 => reply.size(n as u32),
        Ok(n) if n > size as usize => reply.error(errno(&err(libc::ERANGE))),
        Ok(n) => reply.data(&buf[..n]),
        Err(e) => reply.error(errno(&e)),
    }
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
