//! The admin commands' front ends (the work is done below: the rebuild in [`crate::rebuild`],
//! the rest in [`crate::offline`]). `raif rebuild` and `raif scrub` work offline (`raif rebuild --mounted`
//! asks a mount to rebuild while it serves, see [`crate::online`]): they refuse to run while
//! the volume is mounted, open the branches as the mount does (markers decide which are
//! usable), walk the tree of one usable branch and work on every branch's copy of each entry
//! through descriptors ([`crate::offline`]), with the data path of [`crate::stripe`]. `raif split` cuts a profile
//! into one file per layer, for comparing branch layers with `fsprof compare`.

mod mounted;
mod rebuild;
mod scrub;
mod show;
mod split;

use std::path::PathBuf;

use fsprof_fuse::daemon::mount::{SetupError, setup_err};
use fsprof_fuse::toolkit::lower::Lower;

use crate::branch::{Admit, BranchSet};

pub use mounted::fail_mounted;
pub use mounted::rebuild_mounted as rebuild_while_mounted;
pub use rebuild::rebuild;
pub use scrub::scrub;
pub use show::{Source, report, status};
pub use split::split;

/// Opens the volume of `paths` for an admin command: refuses a mounted volume. A directory
/// that is not the member it is given as is taken as failed (and said).
fn open_volume(paths: &[PathBuf]) -> Result<BranchSet, SetupError> {
    if let Some(mnt) = crate::branch::mounted_over(paths) {
        return Err(setup_err(format!(
            "the volume is mounted at {mnt}: unmount it first"
        )));
    }
    let lowers = paths.iter().map(|_| Lower::default()).collect();
    BranchSet::open(paths, lowers, false, Admit::AsFailed).map_err(setup_err)
}
