//! Finding where a volume's branches are: the checks of a branch list, and the raif volumes
//! mounted on the machine (read from mountinfo), so that a volume is neither mounted twice,
//! nor worked on offline while mounted, nor stacked on another.

use std::path::{Path, PathBuf};

use fsprof_fuse::mount::{self, SetupError, setup_err};

use crate::layout::MAX_BRANCHES;

/// Checks a branch list: absolute paths (canonical where they exist), at least two, no
/// duplicates, none inside another. A branch that does not exist is allowed here (it is a
/// failed branch of an existing volume).
pub fn check_branches(list: &[PathBuf]) -> Result<Vec<PathBuf>, SetupError> {
    if list.len() < 2 {
        return Err(setup_err(format!(
            "--branches: at least two branches needed, {} given",
            list.len()
        )));
    }
    if list.len() > MAX_BRANCHES {
        return Err(setup_err(format!(
            "--branches: at most {} branches",
            MAX_BRANCHES
        )));
    }
    let mut out: Vec<PathBuf> = Vec::with_capacity(list.len());
    // The directories themselves: one reached by two paths (a bind mount) is one branch.
    let mut ids: Vec<((u64, u64), PathBuf)> = Vec::new();
    for p in list {
        if p.as_os_str().is_empty() {
            return Err(setup_err("--branches: empty branch name"));
        }
        let abs = std::path::absolute(p)
            .map_err(|e| setup_err(format!("branch {}: {e}", p.display())))?;
        let abs = if abs.exists() {
            mount::absolute_dir(&abs, "branch")?
        } else {
            abs
        };
        for q in &out {
            if *q == abs {
                return Err(setup_err(format!("branch {} given twice", abs.display())));
            }
            let (inner, outer) = if abs.starts_with(q) {
                (&abs, q)
            } else {
                (q, &abs)
            };
            if inner.starts_with(outer) {
                return Err(setup_err(format!(
                    "branch {} lies inside branch {}",
                    inner.display(),
                    outer.display()
                )));
            }
        }
        if let Ok(m) = std::fs::metadata(&abs) {
            use std::os::unix::fs::MetadataExt;
            let id = (m.dev(), m.ino());
            if let Some((_, q)) = ids.iter().find(|(i, _)| *i == id) {
                return Err(setup_err(format!(
                    "branches {} and {} are the same directory",
                    q.display(),
                    abs.display()
                )));
            }
            ids.push((id, abs.clone()));
        }
        out.push(abs);
    }
    Ok(out)
}

/// The branch paths as shown in `/proc/mounts` (the mount's source; `:`-separated, since mount
/// options are separated by commas).
pub fn fsname(branches: &[PathBuf]) -> String {
    let list: Vec<String> = branches.iter().map(|p| p.display().to_string()).collect();
    format!("raif:{}", list.join(":"))
}

/// The mounted raif volumes, as `(mount point, branch list)` lines of mountinfo: raif mounts
/// without a subtype (`fuse`), and a source of `raif:A:B...` ([`fsname`]) says what it is.
fn raif_mounts(text: &str) -> impl Iterator<Item = (&str, &str)> {
    text.lines().filter_map(|l| {
        let (_, after) = l.split_once(" - ")?;
        let mut f = after.split(' ');
        let (fstype, source) = (f.next()?, f.next()?);
        if fstype != "fuse.raif" && fstype != "fuse" {
            return None;
        }
        let list = source.strip_prefix("raif:")?;
        Some((l.split(' ').nth(4)?, list))
    })
}

/// A branch that lies inside a mounted raif volume, and that volume's mount point: raif
/// reserves the `user.raif*` attributes its records are made of, so a volume cannot be
/// stacked on another (every create would fail with EPERM).
pub fn inside_raif(branches: &[PathBuf]) -> Option<(PathBuf, String)> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    raif_mounts(&text).find_map(|(mnt, _)| {
        let b = branches.iter().find(|b| b.starts_with(mnt))?;
        Some((b.clone(), mnt.to_string()))
    })
}

/// Whether some branch of `branches` is served by a mounted RAIF right now (admin commands
/// refuse to work under a live mount).
pub fn mounted_over(branches: &[PathBuf]) -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    raif_mounts(&text).find_map(|(mnt, list)| {
        let hit = list
            .split(':')
            .any(|s| branches.iter().any(|b| Path::new(s) == b));
        hit.then(|| mnt.to_string())
    })
}
