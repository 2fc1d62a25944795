//! `raif status MNT` and `raif status --branches ...`: the volume's status ([`Report`]), read
//! from a mount's control file, or from the branches of a volume that is not mounted (a
//! mounted one's branches are read through its mount). `--json` prints it as JSON.

use std::path::{Path, PathBuf};

use fsprof_fuse::daemon::mount::{SetupError, absolute_dir, plain, setup_err};
use fsprof_fuse::toolkit::lower::Lower;

use crate::branch::{Admit, BranchSet, check_branches, mounted_over};
use crate::report::Report;

/// Where `raif status` reads from.
pub enum Source<'a> {
    /// A mount point.
    Mount(&'a Path),
    /// The branches, in order.
    Branches(&'a [PathBuf]),
}

/// The status of the volume at `src`.
pub fn report(src: Source) -> Result<Report, SetupError> {
    match src {
        Source::Mount(mnt) => of_mount(&absolute_dir(mnt, "MNT")?),
        Source::Branches(list) => {
            let paths = check_branches(list)?;
            if let Some(mnt) = mounted_over(&paths) {
                return of_mount(Path::new(&mnt));
            }
            let lowers = paths.iter().map(|_| Lower::default()).collect();
            let bs = BranchSet::open(&paths, lowers, false, Admit::AsFailed).map_err(setup_err)?;
            Ok(Report::offline(&bs))
        }
    }
}

fn of_mount(mnt: &Path) -> Result<Report, SetupError> {
    let ctl = mnt.join(crate::status::NAME);
    let text = std::fs::read_to_string(&ctl).map_err(|e| {
        setup_err(format!(
            "{}: {} (not a raif mount, or mounted with --no-profile)",
            ctl.display(),
            plain(&e)
        ))
    })?;
    Report::parse(&text, &mnt.display().to_string())
        .map_err(|e| setup_err(format!("{}: {e}", ctl.display())))
}

/// Prints the status of the volume at `src` (as JSON with `json`); returns whether every
/// member is online.
pub fn status(src: Source, json: bool) -> Result<bool, SetupError> {
    let r = report(src)?;
    if json {
        let text = serde_json::to_string_pretty(&r).map_err(|e| setup_err(e.to_string()))?;
        println!("{text}");
    } else {
        print!("{}", r.render(std::time::SystemTime::now()));
    }
    Ok(r.online == r.members.len())
}
