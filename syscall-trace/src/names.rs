//! The paths the kernel gives as names of files: the path a call was given, or the names of
//! the file's dentries up to its file system's root (leaf first, each ending in NUL), made
//! into a path in the mount (mount scope) or an absolute path through the file system's mount
//! point (process scope, from `/proc/self/mountinfo`).

use std::path::Path;

use crate::abi;

/// How names are made into paths.
#[derive(Debug, Clone, Default)]
pub struct Namer {
    /// Mount scope: the mount's path (a path given under it is shown from the mount's root).
    pub mnt: Option<Vec<u8>>,
    /// Process scope: the mount point of each device (kernel encoding), from mountinfo.
    pub points: Vec<(u32, String)>,
}

impl Namer {
    /// A namer for the mount at `mnt`.
    pub fn mount(mnt: &Path) -> Namer {
        use std::os::unix::ffi::OsStrExt;
        Namer {
            mnt: Some(mnt.as_os_str().as_bytes().to_vec()),
            points: Vec::new(),
        }
    }

    /// A namer for every file system, through the mount table of this process.
    pub fn system() -> Namer {
        Namer {
            mnt: None,
            points: points(&kernel_trace::mountinfo::read()),
        }
    }

    /// The path of a name of kind `kind` (`bytes`, `len` of them used) of a file on `dev`.
    pub fn path(&self, kind: u32, bytes: &[u8], len: u32, dev: u32) -> Option<String> {
        let bytes = &bytes[..(len as usize).min(bytes.len())];
        match kind {
            abi::NAME_ARG => {
                let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
                let p = &bytes[..end];
                if p.is_empty() {
                    return None;
                }
                Some(self.given(p))
            }
            abi::NAME_DENTRIES | abi::NAME_DENTRIES_CUT => {
                let mut parts: Vec<&[u8]> =
                    bytes.split(|&b| b == 0).filter(|p| !p.is_empty()).collect();
                parts.reverse();
                let mut s = String::new();
                if kind == abi::NAME_DENTRIES_CUT {
                    s.push_str("...");
                } else if self.mnt.is_none() {
                    if let Some((_, point)) = self.points.iter().find(|(d, _)| *d == dev) {
                        if point != "/" {
                            s.push_str(point);
                        }
                    } else {
                        s.push_str(&format!("(dev {}:{})", dev >> 20, dev & 0xfffff));
                    }
                }
                for p in parts {
                    s.push('/');
                    s.push_str(&String::from_utf8_lossy(p));
                }
                if s.is_empty() {
                    s.push('/');
                }
                Some(s)
            }
            _ => None,
        }
    }

    /// A path as the call gave it: from the mount's root when it is under the mount.
    fn given(&self, p: &[u8]) -> String {
        if let Some(m) = &self.mnt {
            if let Some(rest) = p.strip_prefix(m.as_slice()) {
                if rest.is_empty() {
                    return "/".into();
                }
                if rest.starts_with(b"/") {
                    return String::from_utf8_lossy(rest).into_owned();
                }
            }
        }
        String::from_utf8_lossy(p).into_owned()
    }
}

/// The mount point of each device whose root is mounted (the first such mount).
fn points(mountinfo: &str) -> Vec<(u32, String)> {
    let mut out: Vec<(u32, String)> = Vec::new();
    for m in kernel_trace::mountinfo::parse(mountinfo) {
        if m.root != Path::new("/") {
            continue;
        }
        let Some(dev) = kernel_trace::devices::Dev::parse(m.dev) else {
            continue;
        };
        let k = dev.kernel();
        if out.iter().all(|(d, _)| *d != k) {
            out.push((k, m.point.to_string_lossy().into_owned()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dentry_names_are_reversed_and_joined() {
        let n = Namer::mount(Path::new("/mnt/x"));
        let b = b"f.txt\0d\0top\0";
        assert_eq!(
            n.path(abi::NAME_DENTRIES, b, b.len() as u32, 5).as_deref(),
            Some("/top/d/f.txt")
        );
        assert_eq!(
            n.path(abi::NAME_DENTRIES_CUT, b, b.len() as u32, 5)
                .as_deref(),
            Some(".../top/d/f.txt")
        );
        assert_eq!(n.path(abi::NAME_DENTRIES, b"", 0, 5).as_deref(), Some("/"));
    }

    #[test]
    fn given_paths_under_the_mount_are_shown_from_its_root() {
        let n = Namer::mount(Path::new("/mnt/x"));
        let p = |s: &[u8]| n.path(abi::NAME_ARG, s, s.len() as u32, 0);
        assert_eq!(p(b"/mnt/x/a/b\0junk").as_deref(), Some("/a/b"));
        assert_eq!(p(b"/mnt/x\0").as_deref(), Some("/"));
        assert_eq!(p(b"/mnt/xy/a\0").as_deref(), Some("/mnt/xy/a"));
        assert_eq!(p(b"rel/f\0").as_deref(), Some("rel/f"));
        assert_eq!(p(b"\0"), None);
    }

    #[test]
    fn process_scope_names_start_at_the_mount_point() {
        let info = "22 1 254:1 / / rw - ext4 /dev/vda1 rw\n\
                    30 22 0:40 / /tmp/t rw - tmpfs tmpfs rw\n";
        let n = Namer {
            mnt: None,
            points: points(info),
        };
        let b = b"f\0d\0";
        let tmp = kernel_trace::devices::kernel_dev(0, 40);
        let root = kernel_trace::devices::kernel_dev(254, 1);
        assert_eq!(
            n.path(abi::NAME_DENTRIES, b, 4, tmp).as_deref(),
            Some("/tmp/t/d/f")
        );
        assert_eq!(
            n.path(abi::NAME_DENTRIES, b, 4, root).as_deref(),
            Some("/d/f")
        );
        assert_eq!(
            n.path(abi::NAME_DENTRIES, b, 4, 99).as_deref(),
            Some("(dev 0:99)/d/f")
        );
    }
}
