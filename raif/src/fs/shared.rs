//! What a rebuild while mounted ([`crate::online`]) shares of the file system that serves the
//! volume: [`Raif::shared`] hands it out, so that nothing outside reaches into a [`Raif`]'s
//! fields.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use super::{DirtySums, Raif, SumDirs};
use crate::branch::BranchSet;
use crate::inode::InodeTable;
use crate::intent::Journal;

/// The file system's shared state, as a rebuild while mounted sees it.
#[derive(Clone)]
pub struct Shared {
    /// The branches.
    pub bs: Arc<BranchSet>,
    /// The inodes known to the mount.
    pub inodes: Arc<InodeTable>,
    /// Each branch's sum directory.
    pub sum_dirs: Arc<SumDirs>,
    /// Files with checksum attributes to write back.
    pub dirty_sums: Arc<DirtySums>,
    /// The write-intent log (none: writes are not logged).
    pub journal: Option<Arc<Journal>>,
    /// Set when the mount ends.
    pub stop: Arc<AtomicBool>,
}

impl Raif {
    /// The state a rebuild while mounted shares with this file system.
    pub fn shared(&self) -> Shared {
        Shared {
            bs: self.bs.clone(),
            inodes: self.inodes.clone(),
            sum_dirs: self.sum_dirs.clone(),
            dirty_sums: self.dirty_sums.clone(),
            journal: self.journal.clone(),
            stop: self.stop.clone(),
        }
    }
}
