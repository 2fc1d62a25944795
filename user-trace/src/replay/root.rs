//! Where a replay acts: only beneath its directory.
//!
//! A trace is input, and may be hostile: a traced `symlink("/etc", "esc")` followed by
//! `open("esc/passwd", O_WRONLY|O_TRUNC)` must not truncate `/etc/passwd` when it is replayed
//! as root. So the replay never hands the kernel a path to walk from anywhere but its
//! directory, and never lets a walk leave it:
//!
//! * Every path is resolved with `openat2(2)` from a descriptor of the replay directory, with
//!   `RESOLVE_BENEATH` (and `RESOLVE_NO_MAGICLINKS`). Calls that open something open it that
//!   way. Calls on an object (stat, chmod, chown, utimens, access, truncate, statfs, extended
//!   attributes) first open it with `O_PATH` that way (`O_NOFOLLOW` for the calls that do not
//!   follow a final symbolic link), then act on that descriptor, or, where the call has no
//!   form that takes an `O_PATH` descriptor, on `/proc/self/fd/N`, which names exactly that
//!   object. Calls on a name in a directory (mkdir, unlink, rmdir, rename, link, symlink)
//!   open the parent directory that way, and act with the `*at` call on the final name,
//!   which is checked to be one component (not empty, `.` or `..`); none of these follow a
//!   final symbolic link.
//! * `RESOLVE_BENEATH` rather than `RESOLVE_IN_ROOT`: `IN_ROOT` would resolve an absolute
//!   symbolic link, or a `..` above the directory, inside it, and so silently replay another
//!   call than the traced one (the write to `/etc/passwd` would land in `DIR/etc/passwd`).
//!   `BENEATH` refuses such a walk (`EXDEV`), which the replay reports as a refused call: it
//!   is counted, and the first ones are listed, never silently skipped. The cost: an absolute
//!   symbolic link inside the traced root would be refused too, so the plan recreates one
//!   whose target lies under the traced root as a relative link to the same place (see
//!   `plan`); a link to a target outside it is recreated as traced, and refused when followed.
//! * A call that would remove, rename or replace the replay directory itself is refused too.
//! * Cost: a call on an object or a name takes one or two system calls more than the traced
//!   one (the `openat2`, and the `close` of what it opened), and the replay's profile times
//!   the call with them; an open takes none more.

use std::ffi::{CStr, CString};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::error::Error;
use crate::sys::at;

/// Why a call was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Its path leads out of the replay directory (an absolute symbolic link, or `..` above
    /// it, met on the way).
    Escapes,
    /// It would remove, rename or replace the replay directory itself.
    IsRoot,
}

impl Refusal {
    /// Why, in words.
    pub fn reason(self) -> &'static str {
        match self {
            Refusal::Escapes => "its path leads out of the replay directory",
            Refusal::IsRoot => "it names the replay directory itself",
        }
    }
}

/// Why a path gave no descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denied {
    /// The walk failed as the traced call could have (`-errno`: `ENOENT`, `ENOTDIR`...): the
    /// call's result.
    Errno(i64),
    /// The walk was refused.
    Refused(Refusal),
}

/// How often a walk is retried when the kernel saw a concurrent rename (`EAGAIN`).
const RETRIES: usize = 16;

/// Open flags the kernel knows (`openat2` refuses others, where `open` ignored them).
const OPEN_FLAGS: i32 = libc::O_ACCMODE
    | libc::O_CREAT
    | libc::O_EXCL
    | libc::O_NOCTTY
    | libc::O_TRUNC
    | libc::O_APPEND
    | libc::O_NONBLOCK
    | libc::O_DSYNC
    | libc::O_ASYNC
    | libc::O_DIRECT
    | libc::O_LARGEFILE
    | libc::O_DIRECTORY
    | libc::O_NOFOLLOW
    | libc::O_NOATIME
    | libc::O_CLOEXEC
    | libc::O_SYNC
    | libc::O_PATH
    | libc::O_TMPFILE;

/// The replay directory, to resolve paths beneath.
#[derive(Debug)]
pub struct Root {
    fd: OwnedFd,
}

impl Root {
    /// Opens `dir` to resolve beneath; refused where `openat2` or `/proc/self/fd` is missing.
    pub fn open(dir: &Path) -> Result<Root, Error> {
        let io = |e: i64| {
            Error::io(
                format!("opening {}", dir.display()),
                std::io::Error::from_raw_os_error(-e as i32),
            )
        };
        let c = CString::new(dir.as_os_str().as_bytes())
            .map_err(|_| Error::Config(format!("{}: a NUL in the path", dir.display())))?;
        let root = Root {
            fd: at::open_dir_path(&c).map_err(io)?,
        };
        match root.object(c".", true) {
            Err(Denied::Errno(e)) if e == -(libc::ENOSYS as i64) => {
                return Err(Error::Config(
                    "replay needs openat2(2) (Linux 5.6 or later) to keep to its directory".into(),
                ));
            }
            Err(Denied::Errno(e)) => return Err(io(e)),
            _ => {}
        }
        if !Path::new("/proc/self/fd").is_dir() {
            return Err(Error::Config(
                "replay needs /proc (/proc/self/fd) to act on what it resolved".into(),
            ));
        }
        Ok(root)
    }

    /// Opens `rel` beneath the directory with `flags` (and `mode` when creating).
    pub fn open_at(&self, rel: &CStr, flags: i32, mode: u32) -> Result<OwnedFd, Denied> {
        let flags = (flags & OPEN_FLAGS) | libc::O_CLOEXEC;
        let creates = flags & libc::O_CREAT != 0 || flags & libc::O_TMPFILE == libc::O_TMPFILE;
        let mode = if creates { mode & 0o7777 } else { 0 };
        let resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;
        let mut left = RETRIES;
        loop {
            match at::openat2(self.fd.as_fd(), rel, flags as u64, mode as u64, resolve) {
                Ok(fd) => return Ok(fd),
                Err(e) if e == -(libc::EAGAIN as i64) && left > 0 => left -= 1,
                Err(e) if e == -(libc::EXDEV as i64) => {
                    return Err(Denied::Refused(Refusal::Escapes));
                }
                Err(e) => return Err(Denied::Errno(e)),
            }
        }
    }

    /// What `rel` names, as an `O_PATH` descriptor: the target of a final symbolic link when
    /// `follow`, else the link itself.
    pub fn object(&self, rel: &CStr, follow: bool) -> Result<OwnedFd, Denied> {
        let nofollow = if follow { 0 } else { libc::O_NOFOLLOW };
        self.open_at(rel, libc::O_PATH | nofollow, 0)
    }

    /// The directory holding `rel`'s final name (opened beneath), and that name.
    pub fn parent<'a>(&self, rel: &'a CStr) -> Result<(OwnedFd, &'a CStr), Denied> {
        let (dir, name) = split(rel)?;
        let dir = match dir {
            Some(d) => {
                let d = CString::new(d).expect("a part of a C string");
                self.open_at(&d, libc::O_PATH | libc::O_DIRECTORY, 0)?
            }
            None => self
                .fd
                .try_clone()
                .map_err(|e| Denied::Errno(-(e.raw_os_error().unwrap_or(libc::EMFILE) as i64)))?,
        };
        Ok((dir, name))
    }

    /// Whether `rel` exists (a final symbolic link not followed).
    pub fn exists(&self, rel: &CStr) -> Result<bool, Denied> {
        match self.object(rel, false) {
            Ok(_) => Ok(true),
            Err(Denied::Errno(e)) if e == -(libc::ENOENT as i64) => Ok(false),
            Err(d) => Err(d),
        }
    }
}

/// `rel` cut into its directory (`None`: the replay directory) and its final name, which is
/// one component: not empty, `.` or `..`.
fn split(rel: &CStr) -> Result<(Option<&[u8]>, &CStr), Denied> {
    let bytes = rel.to_bytes();
    if bytes.starts_with(b"/") {
        return Err(Denied::Refused(Refusal::Escapes));
    }
    let trimmed = bytes.strip_suffix(b"/").unwrap_or(bytes);
    let (dir, name) = match trimmed.iter().rposition(|&b| b == b'/') {
        Some(i) => (Some(&trimmed[..i]), &bytes[i + 1..]),
        None => (None, bytes),
    };
    let name_only = name.strip_suffix(b"/").unwrap_or(name);
    if name_only == b".." {
        return Err(Denied::Refused(Refusal::Escapes));
    }
    if name_only.is_empty() || name_only == b"." {
        return Err(Denied::Refused(Refusal::IsRoot));
    }
    // The name with its NUL: a suffix of `rel`'s bytes.
    let with_nul = &rel.to_bytes_with_nul()[bytes.len() - name.len()..];
    let name = CStr::from_bytes_with_nul(with_nul).expect("a suffix of a C string");
    Ok((dir.filter(|d| !d.is_empty()), name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_splits_into_its_directory_and_one_final_name() {
        let s = |p: &CStr| split(p).map(|(d, n)| (d.map(<[u8]>::to_vec), n.to_bytes().to_vec()));
        assert_eq!(s(c"a"), Ok((None, b"a".to_vec())));
        assert_eq!(s(c"a/b/c"), Ok((Some(b"a/b".to_vec()), b"c".to_vec())));
        assert_eq!(s(c"a/b/"), Ok((Some(b"a".to_vec()), b"b/".to_vec())));
        for whole in [c".", c"", c"a/.", c"a//"] {
            assert_eq!(s(whole), Err(Denied::Refused(Refusal::IsRoot)), "{whole:?}");
        }
        for out in [c"..", c"a/..", c"/x", c"/"] {
            assert_eq!(s(out), Err(Denied::Refused(Refusal::Escapes)), "{out:?}");
        }
    }
}
