//! Naming nodes by their path in the mount, for the records that report or target a file
//! (the slow log, the hottest files, `path=` injection rules).

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use crate::filesystem::Ino;

/// Names nodes by their path in the mount (`/dir/file`), best effort: the last name the daemon
/// knows, or none once it has forgotten the node.
pub trait Paths: Send + Sync {
    /// The path of node `ino`.
    fn path(&self, ino: Ino) -> Option<String>;
}

/// A path from the absolute `lower` path of an object in a lower directory `root`.
pub fn mount_path(root: &std::path::Path, lower: PathBuf) -> Option<String> {
    let rel = lower.strip_prefix(root).ok()?;
    let s = rel.to_string_lossy();
    Some(format!("/{s}"))
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
    fn path(&self, ino: Ino) -> Option<String> {
        self.0.get()?.path(ino)
    }
}
