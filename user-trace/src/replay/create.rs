//! Creating the tree the trace needed at its start, beneath the replay directory (a directory
//! replayed in before may hold the links a trace made: nothing here follows one).

use std::ffi::CString;
use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::plan::Kind;
use super::root::{Denied, Root};
use crate::error::Error;
use crate::sys::at;

/// Creates what the trace needed at its start (paths relative to `dir`, opened as `root`):
/// files filled with a pattern, or with `sparse` only given their sizes. Filling more than the
/// space free in `dir` is refused before anything is created. Entries that exist are kept.
/// Returns the directories, files and bytes created.
pub(super) fn tree(
    tree: &[(PathBuf, Kind)],
    root: &Root,
    dir: &Path,
    sparse: bool,
) -> Result<(u64, u64, u64), Error> {
    let fail = |p: &Path, d: Denied| match d {
        Denied::Errno(e) => Error::io(
            format!("creating {}", dir.join(p).display()),
            std::io::Error::from_raw_os_error(-e as i32),
        ),
        Denied::Refused(r) => Error::Config(format!(
            "creating {}: not created: {}",
            dir.join(p).display(),
            r.reason()
        )),
    };
    let c = |p: &Path| {
        CString::new(p.as_os_str().as_bytes())
            .map_err(|_| Error::Config(format!("{}: a NUL in the path", p.display())))
    };
    let mut missing = Vec::new();
    for (p, kind) in tree {
        if !root.exists(&c(p)?).map_err(|d| fail(p, d))? {
            missing.push((p, *kind));
        }
    }
    if !sparse {
        let need: u64 = missing
            .iter()
            .map(|(_, k)| match k {
                Kind::File(size) => *size,
                _ => 0,
            })
            .fold(0, u64::saturating_add);
        let free = crate::sys::available_bytes(dir)
            .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        if need > free {
            return Err(Error::Config(format!(
                "the files the trace needs hold {need} bytes, more than the {free} free in {}: \
                 replay with --sparse (files get their sizes but no data; reads then read holes)",
                dir.display()
            )));
        }
    }
    let (mut dirs, mut files, mut bytes) = (0, 0, 0);
    let block = vec![b'x'; 1 << 20];
    for (p, kind) in missing {
        let rel = c(p)?;
        let errno = |v: i64| if v < 0 { Err(Denied::Errno(v)) } else { Ok(()) };
        match kind {
            Kind::Dir => {
                let (d, name) = root.parent(&rel).map_err(|d| fail(p, d))?;
                errno(at::mkdirat(d.as_fd(), name, 0o755)).map_err(|d| fail(p, d))?;
                dirs += 1;
            }
            Kind::File(size) => {
                let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL;
                let fd = root.open_at(&rel, flags, 0o644).map_err(|d| fail(p, d))?;
                let mut f = std::fs::File::from(fd);
                let io = |e| Error::io(format!("creating {}", dir.join(p).display()), e);
                let mut left = if sparse {
                    f.set_len(size).map_err(io)?;
                    0
                } else {
                    size
                };
                while left > 0 {
                    let n = left.min(block.len() as u64) as usize;
                    f.write_all(&block[..n]).map_err(io)?;
                    left -= n as u64;
                }
                files += 1;
                bytes += size;
            }
            Kind::Symlink(len) => {
                let target =
                    CString::new("x".repeat(len.clamp(1, 4095) as usize)).expect("no NUL in x's");
                let (d, name) = root.parent(&rel).map_err(|d| fail(p, d))?;
                errno(at::symlinkat(&target, d.as_fd(), name)).map_err(|d| fail(p, d))?;
                files += 1;
            }
        }
    }
    Ok((dirs, files, bytes))
}
