//! The request records applied around each request ([`crate::records`]): `op` injections,
//! per-key profiles, the inner-call trace and its breakdown, the slow log, the slowest requests,
//! the hottest files. With none on they cost an `Option` check per request.
//!
//! They are applied by the profiling layer ([`super::profiled`]), within the one span it times
//! per request, so that every record gets that request's one latency: what they look up
//! first (a caller's command name, a forgotten node's path) comes before the span starts;
//! an injected `op` delay or error is inside it (it stands for the daemon's own time); what
//! they write (the breakdown, the hot-file counts, a slow record with its path and process)
//! comes after the span has ended ([`after`]).

use std::io;

use crate::filesystem::Request;
use crate::filesystem::request::Span;
use crate::filesystem::trace::Trace;
use crate::protocol::ops::Op;
use crate::records::RecordSet;

#[cfg(test)]
mod hook_tests;

/// The records of a mount: nothing, or a [`RecordSet`].
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

    /// The records switched on, if any.
    #[inline(always)]
    pub fn set(&self) -> Option<&RecordSet> {
        self.set.as_deref()
    }

    /// Whether requests carry a [`Trace`] down to their lower calls.
    #[inline(always)]
    pub fn traced(&self) -> bool {
        self.traced
    }

    /// Request `unique` should end early: its injected delay ends.
    pub fn interrupt(&self, unique: u64) {
        if let Some(i) = self.set().and_then(|s| s.inject.as_ref()) {
            i.interrupt(unique);
        }
    }

    /// The connection has ended: every injected delay ends.
    pub fn disconnected(&self) {
        if let Some(i) = self.set().and_then(|s| s.inject.as_ref()) {
            i.disconnect();
        }
    }
}

/// What the records do before a request's span starts: a `FORGET` of a listed hot file looks
/// its path up while the daemon still knows the node.
#[inline]
pub fn before(set: &RecordSet, req: &Request) {
    if req.op == Op::Forget {
        if let Some(h) = &set.hot {
            h.forgetting(req.nodeid);
        }
    }
}

/// The errno a request answered: 0 for success.
pub fn errno<R>(r: &io::Result<R>) -> i32 {
    match r {
        Ok(_) => 0,
        Err(e) => e.raw_os_error().unwrap_or(libc::EIO),
    }
}

/// What the records do after a request's span has ended, with its latency `cycles` (the one
/// the `fuse` layer recorded), its answer `errno` and its inner calls `trace`.
pub fn after(
    set: &RecordSet,
    req: &Request,
    span: Span<'_>,
    cycles: u64,
    errno: i32,
    trace: &Trace,
) {
    if let Some(b) = &set.breakdown {
        b.record(req.op.id(), cycles, trace);
    }
    if let Some(h) = &set.hot {
        h.record(req, cycles);
    }
    if let Some(s) = &set.slow {
        if cycles >= s.threshold_cycles() {
            s.record(req, span, cycles, errno, trace);
        }
    }
    if let Some(s) = &set.slowest {
        if s.offers(req.op, cycles) {
            let path = s.record(req, span, cycles, errno, trace);
            if let (Some(h), Some(p)) = (&set.hot, path) {
                h.remember(req.nodeid, &p);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filesystem::{AttrOut, FileSystem, Ino, Key};
    use crate::layers::control::Control;
    use crate::layers::profiled::{Profiled, profiled};
    use crate::protocol::ops::Op;
    use crate::records::inject::{Injector, Rule};
    use profile_store::Extension;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// A file system that counts the getattrs that reach it.
    #[derive(Default)]
    struct Counting(AtomicUsize);

    impl FileSystem for Counting {
        type File = Key;
        type Dir = Key;

        fn getattr(&self, _: &Request, _: Ino, _: Option<&Key>) -> io::Result<AttrOut> {
            self.0.fetch_add(1, Ordering::Relaxed);
            Ok(AttrOut {
                attr: Default::default(),
                ttl: Duration::ZERO,
            })
        }
    }

    /// The stack of a mount (control files over records over the file system) whose getattrs
    /// wait `delay` first.
    fn stack(delay: &str) -> (Arc<Control<Profiled<Counting>>>, Arc<Injector>) {
        let rule = Rule::parse(&format!("op=getattr,every=1,delay={delay}")).unwrap();
        let inject = Arc::new(Injector::new(vec![rule], None));
        let set = RecordSet {
            inject: Some(inject.clone()),
            ..RecordSet::default()
        };
        let fs = Arc::new(Control::new(
            profiled(Counting::default(), None, None, set),
            None,
        ));
        (fs, inject)
    }

    /// Starts getattr request `unique` on another thread; returns once it waits in its delay.
    fn delayed(
        fs: &Arc<Control<Profiled<Counting>>>,
        inject: &Injector,
        unique: u64,
    ) -> std::thread::JoinHandle<io::Result<AttrOut>> {
        let before = inject.delaying();
        let fs2 = fs.clone();
        let t = std::thread::spawn(move || {
            let req = Request::new(Op::Getattr, unique, Ino(5), 7, 0, 0);
            fs2.getattr(&req, Ino(5), None)
        });
        while inject.delaying() == before {
            std::thread::yield_now();
        }
        t
    }

    /// An interrupt of a request, passed down the layers, ends its injected delay at once with
    /// EINTR, and the request never reaches the file system; another request's delay goes on
    /// until the connection ends.
    #[test]
    fn an_interrupted_request_ends_its_delay_with_eintr() {
        let (fs, inject) = stack("600s");
        let first = delayed(&fs, &inject, 41);
        let second = delayed(&fs, &inject, 42);
        fs.interrupt(41);
        let e = first.join().unwrap().unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EINTR));
        assert_eq!(inject.delaying(), 1, "request 42 still waits");
        fs.disconnected();
        let e = second.join().unwrap().unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EINTR));
        assert_eq!(fs.inner().inner().0.load(Ordering::Relaxed), 0);
        let lines = &inject.sections()[0].lines;
        assert_eq!(
            lines,
            &["op=getattr,every=1,delay=600s seen=2 injected=2 cut=2"]
        );
    }

    /// An interrupt that comes before its request reaches the delay (another thread read it
    /// first) still ends that delay; a delay nobody interrupts runs its course and the request
    /// is served.
    #[test]
    fn an_early_interrupt_is_kept_for_its_request() {
        let (fs, inject) = stack("1ms");
        fs.interrupt(9);
        assert_eq!(inject.delaying(), 0);
        let req = |u| Request::new(Op::Getattr, u, Ino(5), 7, 0, 0);
        let e = fs.getattr(&req(9), Ino(5), None).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EINTR));
        assert!(fs.getattr(&req(10), Ino(5), None).is_ok());
        assert_eq!(fs.inner().inner().0.load(Ordering::Relaxed), 1);
        assert_eq!(
            inject.sections()[0].lines,
            ["op=getattr,every=1,delay=1ms seen=2 injected=2 cut=1"]
        );
    }
}
