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

    fn interrupt(&self, unique: u64) {
        if let Some(i) = self.set.as_ref().and_then(|s| s.inject.as_ref()) {
            i.interrupt(unique);
        }
    }

    fn disconnected(&self) {
        if let Some(i) = self.set.as_ref().and_then(|s| s.inject.as_ref()) {
            i.disconnect();
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
    let failed = set.inject.as_ref().and_then(|i| i.on_request(req));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filesystem::{AttrOut, Ino, Key};
    use crate::layers::control::Control;
    use crate::ops::Op;
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
    fn stack(delay: &str) -> (Arc<Control<Recorded<Counting>>>, Arc<Injector>) {
        let rule = Rule::parse(&format!("op=getattr,every=1,delay={delay}")).unwrap();
        let inject = Arc::new(Injector::new(vec![rule], None));
        let set = RecordSet {
            inject: Some(inject.clone()),
            ..RecordSet::default()
        };
        let fs = Arc::new(Control::new(recorded(Counting::default(), set), None));
        (fs, inject)
    }

    /// Starts getattr request `unique` on another thread; returns once it waits in its delay.
    fn delayed(
        fs: &Arc<Control<Recorded<Counting>>>,
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
