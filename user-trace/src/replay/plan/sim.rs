//! What the plan simulates of each traced process: its working directory, and the traced
//! path and position behind each of its descriptors.

use std::collections::HashMap;
use std::path::PathBuf;

/// A traced descriptor.
#[derive(Debug, Clone, Default)]
pub(super) struct FdSim {
    /// The traced path it was opened on, when the trace opened it.
    pub(super) path: Option<PathBuf>,
    /// Position of reads and writes without an offset; `None` once unknown.
    pub(super) pos: Option<u64>,
}

/// A traced process.
#[derive(Debug, Clone, Default)]
pub(super) struct ProcSim {
    /// Its working directory (traced path).
    pub(super) cwd: PathBuf,
    /// Its descriptors, by traced number.
    pub(super) fds: HashMap<i64, FdSim>,
}

impl ProcSim {
    /// A process whose working directory is `cwd`.
    pub(super) fn new(cwd: PathBuf) -> ProcSim {
        ProcSim {
            cwd,
            ..ProcSim::default()
        }
    }

    /// The traced path behind descriptor `fd`, when the trace opened it.
    pub(super) fn fd_path(&self, fd: i64) -> Option<PathBuf> {
        self.fds.get(&fd).and_then(|f| f.path.clone())
    }

    /// The descriptor `fd` (a default one, of unknown path, if the trace did not open it).
    pub(super) fn fd(&self, fd: Option<&i64>) -> FdSim {
        fd.and_then(|f| self.fds.get(f))
            .cloned()
            .unwrap_or_default()
    }
}
