//! `raif rebuild --branches ... --replace N NEWDIR`: makes NEWDIR branch N of the volume (the
//! engine is [`crate::rebuild`]); checks the arguments and prints what it did.

use std::path::{Path, PathBuf};

use fsprof_fuse::daemon::mount::{SetupError, absolute_dir, plain, setup_err};

use super::open_volume;
use crate::branch::check_branches;

/// Rebuilds branch `n` of the volume `branches` onto `newdir`; returns whether nothing was
/// lost.
pub fn rebuild(branches: &[PathBuf], n: usize, newdir: &Path) -> Result<bool, SetupError> {
    if n >= branches.len() {
        return Err(setup_err(format!(
            "--replace {n}: the volume has {} branches",
            branches.len()
        )));
    }
    let newdir = absolute_dir(newdir, "NEWDIR")?;
    let mut paths = branches.to_vec();
    paths[n] = newdir.clone();
    let paths = check_branches(&paths)?;
    let bs = open_volume(&paths)?;
    let t = crate::rebuild::offline(&bs, n, &newdir, None).map_err(|e| setup_err(plain(&e)))?;
    println!(
        "rebuilt branch {n} at {}: {} files ({} bytes written, {} already current), {} directories, {} hard links, {} stale entries removed",
        newdir.display(),
        t.files,
        t.bytes,
        t.kept,
        t.dirs,
        t.links,
        t.removed
    );
    for l in &t.lost {
        println!("lost: {l}");
    }
    if !t.lost.is_empty() {
        println!(
            "{} files could not be restored (their part on branch {n} reads as an I/O error)",
            t.lost.len()
        );
    }
    Ok(t.lost.is_empty())
}
