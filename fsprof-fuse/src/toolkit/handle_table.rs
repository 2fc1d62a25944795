//! A table of open handles (directories, control-file snapshots): handle number → object.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;

use crate::toolkit::sharded::{IntMap, Sharded};

const SHARDS: usize = 16;

/// Sharded map from FUSE file handle numbers to shared objects.
pub struct HandleTable<T> {
    next: AtomicU64,
    shards: Sharded<u64, Arc<T>>,
}

impl<T> Default for HandleTable<T> {
    fn default() -> Self {
        HandleTable {
            next: AtomicU64::new(1),
            shards: (0..SHARDS)
                .map(|_| RwLock::new(IntMap::default()))
                .collect(),
        }
    }
}

impl<T> HandleTable<T> {
    /// Stores `v` under a new handle number.
    pub fn insert(&self, v: T) -> u64 {
        let fh = self.next.fetch_add(1, Ordering::Relaxed);
        self.shards[fh as usize % SHARDS]
            .write()
            .insert(fh, Arc::new(v));
        fh
    }

    /// Stores `v` under a handle number chosen elsewhere (e.g. a descriptor number).
    pub fn insert_at(&self, fh: u64, v: Arc<T>) {
        self.shards[fh as usize % SHARDS].write().insert(fh, v);
    }

    /// The object of `fh`.
    pub fn get(&self, fh: u64) -> Option<Arc<T>> {
        self.shards[fh as usize % SHARDS].read().get(&fh).cloned()
    }

    /// Removes and returns the object of `fh`.
    pub fn remove(&self, fh: u64) -> Option<Arc<T>> {
        self.shards[fh as usize % SHARDS].write().remove(&fh)
    }

    /// Number of open handles.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.read().len()).sum()
    }

    /// Whether no handle is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
