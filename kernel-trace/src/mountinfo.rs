//! `/proc/self/mountinfo`, a line at a time (proc_pid_mountinfo(5)): the one parser of the
//! mount table that the workspace's crates share (tracefs here, the devices under a directory,
//! fsprof-fuse's mount-point checks and its connection, fsprof-bench's clean-up).

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

/// One mount of `/proc/self/mountinfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount<'a> {
    /// The device number of the mounted file system, `MAJOR:MINOR` as the kernel writes it.
    pub dev: &'a str,
    /// The directory of the file system mounted there (`/` for its root; another for a bind
    /// mount of a subtree), its escapes undone.
    pub root: PathBuf,
    /// Where it is mounted, its escapes undone.
    pub point: PathBuf,
    /// Its type (`ext4`, `fuse.fsprof`...).
    pub fstype: &'a str,
    /// Its source (a device's path, or what the mounter named), its escapes undone.
    pub source: OsString,
}

/// The mounts listed in `text` (the whole of `/proc/self/mountinfo`), in its order; lines that
/// are not in its format are left out.
pub fn parse(text: &str) -> impl DoubleEndedIterator<Item = Mount<'_>> {
    text.lines().filter_map(line)
}

/// Reads `/proc/self/mountinfo` (empty when it cannot be read).
pub fn read() -> String {
    std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default()
}

fn line(l: &str) -> Option<Mount<'_>> {
    // The optional fields end at " - ", which the type and the source follow.
    let (pre, post) = l.split_once(" - ")?;
    let mut pre = pre.split(' ');
    let dev = pre.nth(2)?;
    let root = pre.next()?;
    let point = pre.next()?;
    let mut post = post.split(' ');
    let fstype = post.next()?;
    let source = post.next()?;
    Some(Mount {
        dev,
        root: PathBuf::from(unescape(root)),
        point: PathBuf::from(unescape(point)),
        fstype,
        source: unescape(source),
    })
}

/// A mountinfo field with its `\NNN` octal escapes (space, tab, newline, backslash) undone.
pub fn unescape(s: &str) -> OsString {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            // Three octal digits fit a byte when the first is 0 to 3, as the kernel writes them.
            let v = u32::from(b[i + 1] - b'0') * 64
                + u32::from(b[i + 2] - b'0') * 8
                + u32::from(b[i + 3] - b'0');
            if let Ok(v) = u8::try_from(v) {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    OsString::from_vec(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_read_and_unescaped() {
        let text = "36 35 0:12 / /sys/kernel/tracing rw,nosuid shared:1 - tracefs nodev rw\n\
                    37 35 0:52 / /tmp/with\\040space rw - fuse.fsprof a\\134b rw\n\
                    garbage\n\
                    38 35 8:1 / / rw - ext4 /dev/vda1 rw\n";
        let all: Vec<Mount> = parse(text).collect();
        assert_eq!(all.len(), 3);
        assert_eq!(all[0].point, PathBuf::from("/sys/kernel/tracing"));
        assert_eq!(all[0].fstype, "tracefs");
        assert_eq!(all[1].dev, "0:52");
        assert_eq!(all[1].point, PathBuf::from("/tmp/with space"));
        assert_eq!(all[1].source, OsString::from("a\\b"));
        assert_eq!(all[2].source, OsString::from("/dev/vda1"));
        assert_eq!(parse(text).next_back().map(|m| m.dev), Some("8:1"));
    }

    #[test]
    fn escapes_that_are_not_bytes_stay_as_they_are() {
        assert_eq!(unescape("/plain"), OsString::from("/plain"));
        assert_eq!(unescape("/end\\"), OsString::from("/end\\"));
        assert_eq!(unescape("/x\\04"), OsString::from("/x\\04"));
        assert_eq!(unescape("/big\\777"), OsString::from("/big\\777"));
        assert_eq!(unescape("/nl\\012"), OsString::from("/nl\n"));
        assert_eq!(
            unescape("/bin\\377"),
            OsString::from_vec(b"/bin\xff".to_vec())
        );
    }
}
