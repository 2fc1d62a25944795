//! Finding where a volume's branches are: the checks of a branch list, and the raif volumes
//! mounted on the machine (read from mountinfo), so that a volume is neither mounted twice,
//! nor worked on offline while mounted, nor stacked on another.

use std::path::{Path, PathBuf};

use fsprof_fuse::daemon::mount::{self, SetupError, setup_err};

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

/// The branch paths as shown in `/proc/mounts` (the mount's source, `:`-separated as mount(8)
/// and fstab give them: `mount -a` finds an fstab line of absolute paths mounted by it).
pub fn fsname(branches: &[PathBuf]) -> String {
    let list: Vec<String> = branches.iter().map(|p| p.display().to_string()).collect();
    list.join(":")
}

/// The mounted raif volumes, as `(mount point, branch list)` lines of mountinfo: a mount of
/// type `fuse.raif` (whose source is the branch list, [`fsname`]), or, from a raif before
/// issue 41, any FUSE mount whose source is `raif:A:B...`.
fn raif_mounts(text: &str) -> impl Iterator<Item = (&str, &str)> {
    text.lines().filter_map(|l| {
        let (_, after) = l.split_once(" - ")?;
        let mut f = after.split(' ');
        let (fstype, source) = (f.next()?, f.next()?);
        let list = match source.strip_prefix("raif:") {
            Some(list) if fstype == "fuse" || fstype.starts_with("fuse.") => list,
            None if fstype == "fuse.raif" => source,
            _ => return None,
        };
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A raif mount is known by its type and its source, the branch list as fstab gives it;
    /// one made before raif named it so (`raif:` before the list), too; a mergerfs mount with
    /// a list of the same form is not one.
    #[test]
    fn raif_mounts_are_found_by_type_and_source() {
        let text = "61 25 0:52 / /m1 rw - fuse.raif /b0:/b1:/b2 rw,user_id=0\n\
                    62 25 0:53 / /m2 rw - fuse raif:/c0:/c1 rw,user_id=0\n\
                    63 25 0:54 / /m3 rw - fuse.mergerfs /b0:/b1 rw,user_id=0\n\
                    64 25 0:55 / /m4 rw - ext4 /dev/vda rw\n";
        let found: Vec<(&str, &str)> = raif_mounts(text).collect();
        assert_eq!(found, [("/m1", "/b0:/b1:/b2"), ("/m2", "/c0:/c1")]);
        assert_eq!(
            fsname(&[PathBuf::from("/b0"), PathBuf::from("/b1")]),
            "/b0:/b1"
        );
    }
}
