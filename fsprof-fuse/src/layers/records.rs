//! The records layer: around each request, applies the request records that are switched on
//! ([`crate::records`]): `op` injections, per-key profiles, the inner-call trace and its
//! breakdown, the slow log, the slowest requests.
//! With none on it is an `Option` check per request.
//!
//! It sits below the profiling layer, so the `fuse` layer's latency of a request includes an
//! injected delay and the records' own small work.

use std::io;

use profile_store::clock;

use super::{Hook, Hooked, Span};
use crate::errno::err;
use crate::filesystem::{FileSystem, Request};
use crate::ops::Op;
use crate::records::RecordSet;
use crate::records::inject;
use crate::records::trace::Trace;

/// A file system with request records.
pub type Recorded<F> = Hooked<Records, F>;

#[cfg(test)]
mod hook_tests;

/// The records hook: nothing, or a [`RecordSet`].
#[derive(Debug, Default)]
pub struct Records {
    set: Option<Box<RecordSet>>,
    /// Whether the requests need the full path (a trace, the end time): a breakdown, a slow
    /// log, the slowest requests or hot files.
    traced: bool,
}

impl Records {
    /// Records `set` (nothing when every part is off).
    pub fn new(set: RecordSet) -> Records {
        let traced = set.breakdown.is_some()
            || set.slow.is_some()
            || set.hot.is_some()
            || set.slowest.is_some();
        Records {
            set: (!set.is_empty()).then(|| Box::new(set)),
            traced,
        }
    }
}

impl Hook for Records {
    #[inline(always)]
    fn around<R>(
        &self,
        req: &Request,
        span: Span<'_>,
        serve: impl FnOnce(&Request) -> io::Result<R>,
    ) -> io::Result<R> {
        match &self.set {
            Some(set) if req.recorded() => run(set, self.traced, req, span, serve),
            _ => serve(req),
        }
    }
}

fn run<R>(
    set: &RecordSet,
    traced: bool,
    req: &Request,
    span: Span<'_>,
    serve: impl FnOnce(&Request) -> io::Result<R>,
) -> io::Result<R> {
    // A listed hot file's path, while the daemon still knows the node.
    if req.op == Op::Forget {
        if let Some(h) = &set.hot {
            h.forgetting(req.nodeid);
        }
    }
    // Timed into the key's layer until dropped (after `serve`, or while a panic unwinds).
    let _by = set.by.as_ref().map(|b| b.start(req));
    let start = clock::now();
    let failed = set
        .inject
        .as_ref()
        .and_then(|i| i.for_request(req))
        .and_then(inject::apply);
    if !traced {
        return match failed {
            Some(e) => Err(err(e)),
            None => serve(req),
        };
    }
    let trace = Trace::new();
    let r = match failed {
        Some(e) => Err(err(e)),
        None => serve(&req.traced(&trace)),
    };
    let cycles = clock::now().saturating_sub(start);
    if let Some(b) = &set.breakdown {
        b.record(req.op.id(), cycles, &trace);
    }
    if let Some(h) = &set.hot {
        h.record(req, cycles);
    }
    let errno = |r: &io::Result<R>| match r {
        Ok(_) => 0,
        Err(e) => e.raw_os_error().unwrap_or(libc::EIO),
    };
    if let Some(s) = &set.slow {
        if cycles >= s.threshold_cycles() {
            s.record(req, span, cycles, errno(&r), &trace);
        }
    }
    if let Some(s) = &set.slowest {
        if s.offers(req.op, cycles) {
            let path = s.record(req, span, cycles, errno(&r), &trace);
            if let (Some(h), Some(p)) = (&set.hot, path) {
                h.remember(req.nodeid, &p);
            }
        }
    }
    r
}

/// `inner` with the records of `set`.
pub fn recorded<F: FileSystem>(inner: F, set: RecordSet) -> Recorded<F> {
    Hooked::new(Records::new(set), inner)
}
