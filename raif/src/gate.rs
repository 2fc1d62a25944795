//! The mount's gate: every request holds it shared while the file system runs it, and a rebuild
//! while mounted ([`crate::online`]) holds it exclusively for each step that must see no
//! request under way. It is a layer over the operation trait ([`Gated`], a [`Hook`]), stacked in
//! `app.rs` with the profiling and control-file layers, rather than a line at the start of each
//! of RAIF's operations.
//!
//! A request takes one uncontended shared lock (a reader count in one cache line) when no
//! rebuild runs; while a step holds the gate, requests wait for it.

use std::io;
use std::sync::Arc;

use fsprof_fuse::filesystem::Request;
use fsprof_fuse::filesystem::request::Span;
use fsprof_fuse::layers::{Hook, Hooked};
use parking_lot::{RwLock, RwLockWriteGuard};

/// The gate, shared by the layer and the rebuild (clones are the same gate).
#[derive(Clone, Default)]
pub struct Gate(Arc<RwLock<()>>);

impl Gate {
    /// Holds off every request: once this returns, none is under way, and none starts until
    /// the guard is dropped.
    pub fn exclusive(&self) -> RwLockWriteGuard<'_, ()> {
        self.0.write()
    }
}

impl Hook for Gate {
    #[inline(always)]
    fn around<R>(
        &self,
        req: &Request,
        _span: Span<'_>,
        serve: impl FnOnce(&Request) -> io::Result<R>,
    ) -> io::Result<R> {
        let _shared = self.0.read();
        serve(req)
    }
}

/// A file system whose requests pass the gate.
pub type Gated<F> = Hooked<Gate, F>;

/// `inner` behind `gate`.
pub fn gated<F: fsprof_fuse::filesystem::FileSystem>(inner: F, gate: Gate) -> Gated<F> {
    Hooked::new(gate, inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    use fsprof_fuse::filesystem::{AttrOut, Entry, FileSystem, Ino, Key};
    use fsprof_fuse::protocol::ops::Op;

    /// A file system that checks, inside every request, that the gate is held shared, and
    /// whose `getattr` can be held inside until told to go on.
    struct Fake {
        gate: Gate,
        served: AtomicUsize,
        hold: parking_lot::Mutex<Option<(mpsc::Sender<()>, mpsc::Receiver<()>)>>,
    }

    impl Fake {
        fn inside(&self) {
            assert!(self.gate.0.try_write().is_none(), "served outside the gate");
            self.served.fetch_add(1, Ordering::SeqCst);
        }
    }

    impl FileSystem for Fake {
        type File = Key;
        type Dir = Key;

        fn lookup(&self, _req: &Request, _parent: Ino, _name: &OsStr) -> io::Result<Entry> {
            self.inside();
            Err(io::Error::from_raw_os_error(libc::ENOENT))
        }

        fn getattr(&self, _req: &Request, _ino: Ino, _fh: Option<&Key>) -> io::Result<AttrOut> {
            self.inside();
            if let Some((entered, go)) = self.hold.lock().take() {
                entered.send(()).unwrap();
                go.recv().unwrap();
            }
            Err(io::Error::from_raw_os_error(libc::EIO))
        }

        fn forget(&self, _req: &Request, _ino: Ino, _nlookup: u64) {
            self.inside();
        }
    }

    fn fake(gate: &Gate) -> Arc<Gated<Fake>> {
        let fs = Fake {
            gate: gate.clone(),
            served: AtomicUsize::new(0),
            hold: parking_lot::Mutex::new(None),
        };
        Arc::new(gated(fs, gate.clone()))
    }

    fn req(op: Op) -> Request<'static> {
        Request::internal(op, Ino(1))
    }

    #[test]
    fn every_request_is_served_inside_the_gate_and_answers_pass_through() {
        let gate = Gate::default();
        let fs = fake(&gate);
        let e = fs
            .lookup(&req(Op::Lookup), Ino(1), OsStr::new("x"))
            .unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
        let e = fs.getattr(&req(Op::Getattr), Ino(1), None).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EIO));
        fs.forget(&req(Op::Forget), Ino(1), 1);
        assert_eq!(fs.inner().served.load(Ordering::SeqCst), 3);
        // Outside a request the gate is open.
        assert!(gate.0.try_write().is_some());
    }

    #[test]
    fn a_step_waits_for_the_request_under_way_and_holds_off_new_ones() {
        let gate = Gate::default();
        let fs = fake(&gate);
        let (entered_tx, entered) = mpsc::channel();
        let (go, go_rx) = mpsc::channel();
        *fs.inner().hold.lock() = Some((entered_tx, go_rx));
        let inflight = {
            let fs = fs.clone();
            std::thread::spawn(move || {
                let _ = fs.getattr(&req(Op::Getattr), Ino(1), None);
            })
        };
        entered.recv().unwrap();
        // A step that starts now waits for the request under way.
        let stepped = Arc::new(AtomicBool::new(false));
        let (release, released) = mpsc::channel::<()>();
        let step = {
            let (gate, stepped) = (gate.clone(), stepped.clone());
            std::thread::spawn(move || {
                let _g = gate.exclusive();
                stepped.store(true, Ordering::SeqCst);
                released.recv().unwrap();
            })
        };
        assert!(gate.0.try_write().is_none());
        assert!(
            !stepped.load(Ordering::SeqCst),
            "a step ran under a request"
        );
        go.send(()).unwrap();
        inflight.join().unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while !stepped.load(Ordering::SeqCst) {
            assert!(Instant::now() < deadline, "the step never got the gate");
            std::thread::yield_now();
        }
        // While the step holds it, a request cannot start.
        assert!(gate.0.try_read().is_none());
        let before = fs.inner().served.load(Ordering::SeqCst);
        release.send(()).unwrap();
        step.join().unwrap();
        fs.forget(&req(Op::Forget), Ino(1), 1);
        assert_eq!(fs.inner().served.load(Ordering::SeqCst), before + 1);
    }
}
