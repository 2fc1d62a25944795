//! A descriptor on a branch that a request holds for itself ([`Held`]).

use std::ops::Deref;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use fsprof_fuse::filesystem::Request;

use crate::branch::BranchSet;

/// A descriptor on branch `b` that a request holds: when dropped it is let go as a call of the
/// request ([`BranchSet::release`]), so the `close(2)` of one the request opened for itself
/// (not cached) is timed in its breakdown; a cached one just loses a holder. No allocation:
/// it borrows the branch set and the request.
pub(crate) struct Held<'a> {
    fd: Option<Arc<OwnedFd>>,
    b: usize,
    bs: &'a BranchSet,
    req: &'a Request<'a>,
}

impl<'a> Held<'a> {
    /// `fd`, on branch `b`, held by `req`.
    #[inline]
    pub(crate) fn new(bs: &'a BranchSet, req: &'a Request<'a>, b: usize, fd: Arc<OwnedFd>) -> Self {
        Held {
            fd: Some(fd),
            b,
            bs,
            req,
        }
    }
}

impl Deref for Held<'_> {
    type Target = Arc<OwnedFd>;

    #[inline]
    fn deref(&self) -> &Arc<OwnedFd> {
        self.fd.as_ref().expect("taken only when dropped")
    }
}

impl Drop for Held<'_> {
    #[inline]
    fn drop(&mut self) {
        if let Some(fd) = self.fd.take() {
            self.bs.release(self.req, self.b, fd);
        }
    }
}
