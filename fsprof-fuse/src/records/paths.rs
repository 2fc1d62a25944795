//! Naming nodes by their path in the mount, for the records that report or target a file
//! (the slow log, the hottest files, `path=` injection rules).

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use crate::filesystem::Ino;

/// Names nodes by their path in the mount (`/dir/file`), best effort: the last name the daemon
/// knows, or none once it has forgotten the node. A path is bytes, as Linux names are: the
/// records write it in a form that keeps every byte (`profile_store::name`).
pub trait Paths: Send + Sync {
    /// The path of node `ino`.
    fn path(&self, ino: Ino) -> Option<Vec<u8>>;

    /// Whether `who` may search the directory `dir` of the mount (a path from its root, without
    /// the leading `/`; empty for the root) and every directory above it: whether a path below
    /// it may be shown to them (`crate::layers::access`). By default no.
    fn may_search(&self, who: &crate::toolkit::caller::Caller, dir: &[u8]) -> bool {
        let _ = (who, dir);
        false
    }
}

/// A path from the absolute `lower` path of an object in a lower directory `root`.
pub fn mount_path(root: &std::path::Path, lower: PathBuf) -> Option<Vec<u8>> {
    let rel = lower.strip_prefix(root).ok()?;
    let mut p = Vec::with_capacity(rel.as_os_str().len() + 1);
    p.push(b'/');
    p.extend_from_slice(rel.as_os_str().as_encoded_bytes());
    Some(p)
}

/// Paths known only once the file system is built (injection rules are made before it).
#[derive(Default)]
pub struct LatePaths(OnceLock<Arc<dyn Paths>>);

impl LatePaths {
    /// Sets the paths (once).
    pub fn set(&self, p: Arc<dyn Paths>) {
        let _ = self.0.set(p);
    }
}

impl Paths for LatePaths {
    fn path(&self, ino: Ino) -> Option<Vec<u8>> {
        self.0.get()?.path(ino)
    }

    fn may_search(&self, who: &crate::toolkit::caller::Caller, dir: &[u8]) -> bool {
        self.0.get().is_some_and(|p| p.may_search(who, dir))
    }
}
