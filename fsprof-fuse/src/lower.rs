//! The lower (or branch) system-call layer: where a file system times each system call it makes
//! on a lower directory, under the operation of the request that made it.

use profile_store::Recorder;

use crate::filesystem::Request;
use crate::ops::Sys;

/// Times lower-level system calls into a layer (`lower`, `branch0`...), each under the FUSE
/// operation of the request that made it ([`Request::op`]).
#[derive(Debug, Clone, Default)]
pub struct Lower {
    rec: Option<Recorder>,
}

impl Lower {
    /// Records into `rec` (a recorder over [`crate::ops::NAMES`]), or nothing.
    pub fn new(rec: Option<Recorder>) -> Lower {
        Lower { rec }
    }

    /// Runs the system call `f` (`call`) for `req`, recorded unless the request is not
    /// ([`Request::recorded`]).
    #[inline(always)]
    pub fn call<R>(&self, req: &Request, call: Sys, f: impl FnOnce() -> R) -> R {
        let _ = call;
        match &self.rec {
            Some(r) if req.recorded() => r.measure(req.op.id(), f),
            _ => f(),
        }
    }

    /// Whether calls are recorded at all.
    pub fn is_recording(&self) -> bool {
        self.rec.is_some()
    }
}
