//! The threads that serve one mount's ring queues.
//!
//! Each CPU's queue is served by one thread or more, each with an io_uring of its own that
//! holds one entry: a thread serves one request at a time, and the kernel hands a new request
//! of the queue to an entry that waits for one (the one freed last, first). While every thread
//! of a queue is busy, the thread that took the last request starts another, up to the bound
//! (`--max-threads`), so that a request that waits (a slow lower call, an injected delay) holds
//! up no other request of its CPU; with one synchronous caller, one thread serves and one
//! waits. Threads are never retired: the kernel has no command that takes an entry back while
//! the connection lives (closing its ring would leave the kernel's entry unused until
//! unmount), so the threads a burst of waiting requests started stay until unmount.
//!
//! The thread that creates a ring submits to it and reaps it (the kernel delivers a request by
//! task work to the task that queued the command). No thread may die while the mount lives: a
//! queue without entries leaves its CPU's requests waiting forever. So a panic in a request is
//! contained by the dispatcher (`EIO`), and if a ring fails anyway (an entry's command is
//! refused, the ring cannot be entered), its thread aborts the connection (`umount -f`), which
//! fails every waiting request with `ENOTCONN` and ends the daemon, instead of leaving callers
//! hanging.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::thread::JoinHandle;

use parking_lot::Mutex;

use super::dispatch::Dispatch;
use crate::filesystem::FileSystem;
use crate::sys;
use crate::sys::uring::{Event, RingQueue};

/// How one thread's ring ended.
#[derive(Debug, Default)]
pub struct QueueEnd {
    /// The queue it served.
    pub qid: u16,
    /// Requests served.
    pub requests: u64,
    /// Why it failed, if it did (anything but the connection ending).
    pub failure: Option<String>,
}

/// The serving threads not yet joined (those started later are added by the thread that
/// starts them, before it can end).
pub type Threads = Arc<Mutex<Vec<JoinHandle<QueueEnd>>>>;

/// The threads of one queue.
#[derive(Debug)]
struct Queue {
    qid: u16,
    /// Threads waiting for a request.
    idle: AtomicUsize,
    /// Threads in all.
    total: AtomicUsize,
    /// A thread could not register for want of a descriptor (the daemon's limit): the queue
    /// grows no more for the mount's life (each thread's ring takes one).
    starved: AtomicBool,
}

/// What every serving thread of a mount shares.
pub struct Pool<F> {
    dev: Arc<OwnedFd>,
    dispatch: Arc<Dispatch<F>>,
    mnt: Arc<Path>,
    payload_size: usize,
    /// Most threads per queue.
    max: usize,
    queues: Box<[Queue]>,
    threads: Threads,
    aborted: AtomicBool,
}

impl<F: FileSystem + 'static> Pool<F> {
    /// The pool of a mount at `mnt` served through the FUSE device `dev` by `dispatch`, with one
    /// queue per CPU of `qids`, entries of `payload_size` bytes and at most `max` threads per
    /// queue. No thread runs yet.
    pub fn new(
        dev: Arc<OwnedFd>,
        dispatch: Arc<Dispatch<F>>,
        mnt: Arc<Path>,
        payload_size: usize,
        qids: &[u16],
        max: usize,
    ) -> Arc<Pool<F>> {
        let queues = qids
            .iter()
            .map(|&qid| Queue {
                qid,
                idle: AtomicUsize::new(0),
                total: AtomicUsize::new(0),
                starved: AtomicBool::new(false),
            })
            .collect();
        Arc::new(Pool {
            dev,
            dispatch,
            mnt,
            payload_size,
            max: max.max(1),
            queues,
            threads: Threads::default(),
            aborted: AtomicBool::new(false),
        })
    }

    /// The threads to join.
    pub fn threads(&self) -> Threads {
        self.threads.clone()
    }

    /// Queues.
    pub fn queues(&self) -> usize {
        self.queues.len()
    }

    /// Starts the first thread of queue `q` (an index into the queues); `started` gets `Ok`
    /// once its entry is registered, or the error that stopped it (the caller then unmounts,
    /// which ends the entries that did register).
    pub fn start(self: &Arc<Self>, q: usize, started: Sender<io::Result<()>>) -> io::Result<()> {
        self.queues[q].total.fetch_add(1, Ordering::AcqRel);
        self.spawn(q, Some(started))
    }

    /// Starts one more thread on queue `q` if it has room (its last waiting thread just took a
    /// request).
    fn grow(self: &Arc<Self>, q: usize) {
        let queue = &self.queues[q];
        if self.aborted.load(Ordering::Acquire)
            || queue.starved.load(Ordering::Relaxed)
            || queue
                .total
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| {
                    (t < self.max).then_some(t + 1)
                })
                .is_err()
        {
            return;
        }
        if let Err(e) = self.spawn(q, None) {
            log::warn!("ring queue {}: no thread started: {e}", queue.qid);
        }
    }

    /// Starts a thread on queue `q`, already counted in its total; it counts as waiting from
    /// now, so that another busy thread does not start one more meanwhile.
    fn spawn(
        self: &Arc<Self>,
        q: usize,
        started: Option<Sender<io::Result<()>>>,
    ) -> io::Result<()> {
        let queue = &self.queues[q];
        queue.idle.fetch_add(1, Ordering::AcqRel);
        let pool = self.clone();
        let thread = std::thread::Builder::new()
            .name(format!("fuse-ring-{}", queue.qid))
            .spawn(move || pool.serve(q, started));
        match thread {
            Ok(t) => {
                self.threads.lock().push(t);
                Ok(())
            }
            Err(e) => {
                self.left(q);
                Err(e)
            }
        }
    }

    /// One thread of queue `q`: registers its entry, then serves every request the kernel puts
    /// on it until the connection ends.
    fn serve(self: Arc<Self>, q: usize, started: Option<Sender<io::Result<()>>>) -> QueueEnd {
        let queue = &self.queues[q];
        let qid = queue.qid;
        let mut end = QueueEnd {
            qid,
            ..QueueEnd::default()
        };
        // Requests come to the queue of the CPU the caller runs on: serve them there. A CPU
        // that is possible but offline cannot be pinned to; its queue must exist all the same.
        if let Err(e) = sys::pin_to_cpu(usize::from(qid)) {
            log::debug!("ring queue {qid}: not pinned: {e}");
        }
        let mut ring = match RingQueue::new(self.dev.as_fd(), qid, 1, self.payload_size)
            .and_then(|mut r| r.register().map(|()| r))
        {
            Ok(r) => r,
            Err(e) => {
                self.left(q);
                match started {
                    Some(s) => drop(s.send(Err(e))),
                    // The daemon's descriptor limit: the queue keeps the threads it has (said
                    // once), and the descriptors left are the file system's.
                    None if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                        if !queue.starved.swap(true, Ordering::Relaxed) {
                            log::info!(
                                "ring queue {qid}: no more threads: the daemon's descriptor \
                                 limit is reached ({} threads serve it)",
                                queue.total.load(Ordering::Relaxed)
                            );
                        }
                    }
                    None => log::warn!("ring queue {qid}: another thread could not register: {e}"),
                }
                return end;
            }
        };
        // Refused registrations complete at once; a registered entry stays pending until a
        // request comes. So a first look without waiting tells whether the entry started.
        let mut refused: Option<io::Error> = None;
        let mut first = true;
        while ring.live() > 0 {
            let mut failure: Option<String> = None;
            let waited = ring.wait(usize::from(!first), |ev| match ev {
                Event::Request { header, payload } => {
                    end.requests += 1;
                    if queue.idle.fetch_sub(1, Ordering::AcqRel) == 1 {
                        self.grow(q);
                    }
                    self.dispatch.serve(header, payload);
                    queue.idle.fetch_add(1, Ordering::AcqRel);
                }
                Event::Ended => {}
                Event::Failed { errno, registering } => {
                    let e = io::Error::from_raw_os_error(errno);
                    if first && registering {
                        refused.get_or_insert(e);
                    } else {
                        let what = if registering { "register" } else { "commit" };
                        failure.get_or_insert(format!("ring queue {qid}: {what}: {e}"));
                    }
                }
            });
            if let Err(e) = &waited {
                failure.get_or_insert(format!("ring queue {qid}: io_uring_enter: {e}"));
            }
            if first {
                first = false;
                if let Some(e) = refused.take() {
                    self.left(q);
                    match &started {
                        Some(s) => drop(s.send(Err(e))),
                        None => log::warn!("ring queue {qid}: another entry was refused: {e}"),
                    }
                    return end;
                }
                if let Some(s) = &started {
                    let _ = s.send(Ok(()));
                }
            }
            if let Some(f) = failure {
                log::error!("{f}; aborting the mount of {}", self.mnt.display());
                end.failure.get_or_insert(f);
                if !self.aborted.swap(true, Ordering::AcqRel) {
                    abort(&self.mnt);
                }
                if waited.is_err() {
                    // The ring is unusable: leave (its buffers are leaked, not freed under the
                    // kernel); the abort ends the other threads and the session.
                    break;
                }
            }
        }
        end
    }

    /// A thread of queue `q` ends without having served.
    fn left(&self, q: usize) {
        self.queues[q].idle.fetch_sub(1, Ordering::AcqRel);
        self.queues[q].total.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Aborts the FUSE connection of `mnt` so that nothing waits on a queue that cannot serve:
/// `umount -f` (which aborts a FUSE connection before unmounting), else a lazy unmount.
fn abort(mnt: &Path) {
    if let Err(e) = sys::force_unmount(mnt) {
        log::error!("umount -f {}: {e}", mnt.display());
        let _ = sys::umount(mnt, true);
    }
}
