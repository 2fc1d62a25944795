//! The file system's routing without a mount: a [`Raif`] over branches in temporary
//! directories, asked through the operation trait as a transport would, with a branch made to
//! disagree in the middle of a fan-out.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use fsprof_fuse::filesystem::{FileSystem, Ino, Request};
use fsprof_fuse::passthrough::inode_store::ROOT_ID;
use fsprof_fuse::protocol::ops::Op;
use fsprof_fuse::toolkit::lower::Lower;

use super::{FsConfig, Raif};
use crate::branch::BranchSet;

/// A new volume over `n` temporary branch directories, served by a [`Raif`] that is not
/// mounted.
pub(super) struct Volume {
    dirs: Vec<tempfile::TempDir>,
    pub raif: Raif,
}

impl Volume {
    pub(super) fn new(n: usize) -> Volume {
        let dirs: Vec<tempfile::TempDir> = (0..n).map(|_| tempfile::tempdir().unwrap()).collect();
        let paths: Vec<PathBuf> = dirs.iter().map(|d| d.path().to_path_buf()).collect();
        let lowers = paths.iter().map(|_| Lower::default()).collect();
        let bs = BranchSet::open(&paths, lowers, true, crate::branch::Admit::Refuse).unwrap();
        let raif = Raif::new(FsConfig::default(), Arc::new(bs)).unwrap();
        Volume { dirs, raif }
    }

    /// Branch `b`'s directory.
    pub(super) fn branch(&self, b: usize) -> &Path {
        self.dirs[b].path()
    }

    /// Which branches hold `name` at their root.
    fn holding(&self, name: &str) -> Vec<usize> {
        (0..self.dirs.len())
            .filter(|&b| self.branch(b).join(name).symlink_metadata().is_ok())
            .collect()
    }
}

pub(super) fn req(op: Op) -> Request<'static> {
    Request::internal(op, Ino(ROOT_ID))
}

const ROOT: Ino = Ino(ROOT_ID);

#[test]
fn mkdir_refused_by_a_later_branch_is_undone_on_the_earlier_ones() {
    let v = Volume::new(3);
    // Branch 1 already has a file of that name (made behind the volume's back).
    std::fs::write(v.branch(1).join("d"), b"x").unwrap();
    let e = v
        .raif
        .mkdir(&req(Op::Mkdir), ROOT, OsStr::new("d"), 0o755)
        .unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EEXIST));
    assert_eq!(v.holding("d"), vec![1], "branch 0's directory was removed");
    assert!(
        v.branch(1).join("d").is_file(),
        "branch 1's file is left alone"
    );
    assert_eq!(v.raif.branches().failed_mask(), 0, "no branch is failed");
    // Nothing was left half-made: once the odd one is gone, the name can be made.
    std::fs::remove_file(v.branch(1).join("d")).unwrap();
    v.raif
        .mkdir(&req(Op::Mkdir), ROOT, OsStr::new("d"), 0o755)
        .unwrap();
    assert_eq!(v.holding("d"), vec![0, 1, 2]);
}

#[test]
fn a_create_refused_by_a_later_branch_leaves_no_part_behind() {
    let v = Volume::new(3);
    std::fs::create_dir(v.branch(2).join("f")).unwrap();
    let fl = libc::O_RDWR | libc::O_CREAT | libc::O_EXCL;
    let e = v
        .raif
        .create(&req(Op::Create), ROOT, OsStr::new("f"), 0o644, fl)
        .map(drop)
        .unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EEXIST));
    assert_eq!(
        v.holding("f"),
        vec![2],
        "the parts made on 0 and 1 were removed"
    );
    assert_eq!(v.raif.branches().failed_mask(), 0);
}

#[test]
fn an_unlink_that_diverges_on_a_branch_fails_that_branch_and_goes_on() {
    let v = Volume::new(3);
    let (_, opened) = v
        .raif
        .create(&req(Op::Create), ROOT, OsStr::new("f"), 0o644, libc::O_RDWR)
        .unwrap();
    v.raif.release(&req(Op::Release), ROOT, opened.fh).unwrap();
    assert_eq!(v.holding("f"), vec![0, 1, 2]);
    // On branch 1 the name now leads to a directory: an unlink cannot be undone, so the
    // branch that refuses is failed and the others go on.
    std::fs::remove_file(v.branch(1).join("f")).unwrap();
    std::fs::create_dir(v.branch(1).join("f")).unwrap();
    v.raif
        .unlink(&req(Op::Unlink), ROOT, OsStr::new("f"))
        .unwrap();
    assert_eq!(v.holding("f"), vec![1]);
    assert_eq!(v.raif.branches().failed_mask(), 1 << 1);
    assert!(
        v.raif.branches().describe(1).contains("unlink diverged"),
        "{}",
        v.raif.branches().describe(1)
    );
}

#[test]
fn an_unlink_missing_on_a_branch_is_as_wanted_there() {
    let v = Volume::new(3);
    let (_, opened) = v
        .raif
        .create(&req(Op::Create), ROOT, OsStr::new("f"), 0o644, libc::O_RDWR)
        .unwrap();
    v.raif.release(&req(Op::Release), ROOT, opened.fh).unwrap();
    std::fs::remove_file(v.branch(2).join("f")).unwrap();
    v.raif
        .unlink(&req(Op::Unlink), ROOT, OsStr::new("f"))
        .unwrap();
    assert!(v.holding("f").is_empty());
    assert_eq!(v.raif.branches().failed_mask(), 0);
}

#[test]
fn a_rename_refused_by_a_later_branch_is_renamed_back() {
    let v = Volume::new(3);
    v.raif
        .mkdir(&req(Op::Mkdir), ROOT, OsStr::new("a"), 0o755)
        .unwrap();
    // On branch 2 the target is a directory that is not empty.
    std::fs::create_dir_all(v.branch(2).join("b/x")).unwrap();
    let e = v
        .raif
        .rename(
            &req(Op::Rename),
            ROOT,
            OsStr::new("a"),
            ROOT,
            OsStr::new("b"),
            0,
        )
        .unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOTEMPTY));
    assert_eq!(v.holding("a"), vec![0, 1, 2], "renamed back on 0 and 1");
    assert_eq!(v.holding("b"), vec![2]);
    assert_eq!(v.raif.branches().failed_mask(), 0);
}
