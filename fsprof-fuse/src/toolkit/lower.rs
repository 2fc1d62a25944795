//! The lower (or branch) system-call layer: where a file system times each system call it makes
//! on a lower directory, under the operation of the request that made it; where a request's
//! trace learns its inner calls ([`crate::filesystem::trace`]); and where `lower` and `branch`
//! injection rules act ([`crate::records::inject`]).
//!
//! Every system call a request makes on LOWER goes through [`Lower::call`] under its own name,
//! down to those the inode store makes to find an object (the `O_PATH` `openat`, `statx`,
//! `name_to_handle_at`, `open_by_handle_at`) and the `close` of a descriptor the request lets
//! go: code that serves a request but does not hold the [`Lower`] gets a [`Via`].

use std::io;
use std::sync::Arc;

use profile_store::{Recorder, Token, clock};

use crate::filesystem::Request;
use crate::filesystem::trace::CallId;
use crate::protocol::errno::err;
use crate::protocol::ops::Sys;
use crate::records::inject::Injector;

/// What a lower call returns, so an injected error can stand in for it.
pub trait CallResult: Sized {
    /// The result of a call failing with `errno`, if this kind of result can say so.
    fn failed(errno: i32) -> Option<Self>;
}

impl<T> CallResult for io::Result<T> {
    fn failed(errno: i32) -> Option<Self> {
        Some(Err(err(errno)))
    }
}

impl CallResult for () {
    fn failed(_: i32) -> Option<Self> {
        None
    }
}

/// Times lower-level system calls into a layer (`lower`, `branch0`...), each under the FUSE
/// operation of the request that made it ([`Request::op`]).
#[derive(Debug, Clone, Default)]
pub struct Lower {
    rec: Option<Recorder>,
    branch: Option<u16>,
    inject: Option<Arc<Injector>>,
}

impl Lower {
    /// Records into `rec` (a recorder over [`crate::protocol::ops::NAMES`]), or nothing.
    pub fn new(rec: Option<Recorder>) -> Lower {
        Lower {
            rec,
            branch: None,
            inject: None,
        }
    }

    /// These are the calls on branch `b` (inner calls named `branchB:call`).
    pub fn on_branch(mut self, b: u16) -> Lower {
        self.branch = Some(b);
        self
    }

    /// Applies the `lower` or `branch` rules of `inject`.
    pub fn injecting(mut self, inject: Option<Arc<Injector>>) -> Lower {
        self.inject = inject.filter(|i| i.targets_calls());
        self
    }

    /// Runs the system call `f` (`call`) for `req`, recorded unless the request is not
    /// ([`Request::recorded`]), added to the request's trace if it carries one, and with an
    /// injected delay or error if a rule says so.
    #[inline(always)]
    pub fn call<R: CallResult>(&self, req: &Request, call: Sys, f: impl FnOnce() -> R) -> R {
        if self.inject.is_none() && req.trace().is_none() {
            return match &self.rec {
                Some(r) if req.recorded() => r.measure(req.op.id(), f),
                _ => f(),
            };
        }
        self.call_recorded(req, call, f)
    }

    fn call_recorded<R: CallResult>(&self, req: &Request, call: Sys, f: impl FnOnce() -> R) -> R {
        let id = CallId::new(self.branch, call);
        let token = match &self.rec {
            Some(r) if req.recorded() => Some(r.start(req.op.id())),
            _ => None,
        };
        let start = token.as_ref().map_or_else(clock::now, Token::start_cycles);
        let failed = match &self.inject {
            Some(i) if req.recorded() => i.on_call(req, id),
            _ => None,
        };
        let out = match failed.and_then(R::failed) {
            Some(e) => e,
            None => f(),
        };
        let end = clock::now();
        if let (Some(r), Some(t)) = (&self.rec, token) {
            r.record(t, end);
        }
        if let Some(t) = req.trace() {
            t.push(id, end.saturating_sub(start));
        }
        out
    }

    /// Whether calls are recorded at all.
    pub fn is_recording(&self) -> bool {
        self.rec.is_some()
    }

    /// The calls of request `req` through this layer, for code that serves it without holding
    /// the layer (the inode store).
    #[inline]
    pub fn via<'a>(&'a self, req: &'a Request<'a>) -> Via<'a> {
        Via {
            at: Some((self, req)),
        }
    }
}

/// Where a lower call is recorded: in a request's [`Lower`] layer, under the request
/// ([`Lower::via`]), or nowhere ([`Via::NONE`]: the daemon's own calls outside any request, such
/// as setting up, or the records naming a file).
#[derive(Debug, Clone, Copy)]
pub struct Via<'a> {
    at: Option<(&'a Lower, &'a Request<'a>)>,
}

impl Via<'static> {
    /// Calls made outside any request: not recorded.
    pub const NONE: Via<'static> = Via { at: None };
}

impl Via<'_> {
    /// Runs the system call `f` (`call`) as [`Lower::call`] does for the request, or just runs
    /// it outside any request.
    #[inline(always)]
    pub fn call<R: CallResult>(self, call: Sys, f: impl FnOnce() -> R) -> R {
        match self.at {
            Some((lower, req)) => lower.call(req, call, f),
            None => f(),
        }
    }

    /// Lets `fd` go: where this is its last holder, its `close(2)` is made now as a call of
    /// the request; otherwise its last holder closes it.
    #[inline]
    pub fn release(self, fd: Arc<std::os::fd::OwnedFd>) {
        if Arc::strong_count(&fd) == 1 {
            self.call(Sys::Close, || drop(fd));
        }
    }

    /// [`Via::release`] of an owned descriptor: always its close.
    #[inline]
    pub fn close(self, fd: std::os::fd::OwnedFd) {
        self.call(Sys::Close, || drop(fd));
    }
}
