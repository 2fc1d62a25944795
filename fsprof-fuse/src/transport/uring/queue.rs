//! One ring queue's thread: registers the queue's entries, then serves every request the
//! kernel puts on them until the connection ends.
//!
//! The thread that creates the ring submits to it and reaps it (the kernel delivers a request
//! by task work to the task that queued the command). It must never die while the mount
//! lives: a queue without entries leaves its CPU's requests waiting forever. So a panic in a
//! request is contained by the dispatcher (`EIO`), and if the queue fails anyway (an entry's
//! command is refused, the ring cannot be entered), the thread aborts the connection
//! (`umount -f`), which fails every waiting request with `ENOTCONN` and ends the daemon,
//! instead of leaving callers hanging.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc::Sender;

use super::dispatch::Dispatch;
use crate::filesystem::FileSystem;
use crate::sys;
use crate::sys::uring::{Event, RingQueue};

/// How one queue is built.
#[derive(Debug, Clone, Copy)]
pub struct QueueConfig {
    /// The queue's index: the CPU whose requests it receives.
    pub qid: u16,
    /// Entries: requests the kernel can hand this queue at once.
    pub depth: u16,
    /// Bytes of each entry's payload buffer.
    pub payload_size: usize,
}

/// How a queue ended.
#[derive(Debug, Default)]
pub struct QueueEnd {
    /// The queue.
    pub qid: u16,
    /// Requests served.
    pub requests: u64,
    /// Why it failed, if it did (anything but the connection ending).
    pub failure: Option<String>,
}

/// Runs queue `cfg` on the FUSE device `dev` for the mount at `mnt` until the connection ends.
/// `started` gets `Ok` once the entries are registered, or the error that stopped them (the
/// caller then unmounts, which ends the entries that did register).
pub fn run<F: FileSystem>(
    cfg: QueueConfig,
    dev: Arc<OwnedFd>,
    dispatch: Arc<Dispatch<F>>,
    mnt: Arc<Path>,
    started: Sender<io::Result<()>>,
) -> QueueEnd {
    let mut end = QueueEnd {
        qid: cfg.qid,
        ..QueueEnd::default()
    };
    // Requests come to the queue of the CPU the caller runs on: serve them there. A CPU that is
    // possible but offline cannot be pinned to; its queue must exist all the same.
    if let Err(e) = sys::pin_to_cpu(usize::from(cfg.qid)) {
        log::debug!("ring queue {}: not pinned: {e}", cfg.qid);
    }
    let mut queue = match RingQueue::new(dev.as_fd(), cfg.qid, cfg.depth, cfg.payload_size)
        .and_then(|mut q| q.register().map(|()| q))
    {
        Ok(q) => q,
        Err(e) => {
            let _ = started.send(Err(e));
            return end;
        }
    };
    // Refused registrations complete at once; registered entries stay pending until a request
    // comes. So a first look without waiting tells whether the queue started.
    let mut refused: Option<io::Error> = None;
    let mut first = true;
    let mut aborted = false;
    while queue.live() > 0 {
        let mut failure: Option<String> = None;
        let waited = queue.wait(usize::from(!first), |ev| match ev {
            Event::Request { header, payload } => {
                end.requests += 1;
                dispatch.serve(header, payload);
            }
            Event::Ended => {}
            Event::Failed { errno, registering } => {
                let e = io::Error::from_raw_os_error(errno);
                if first && registering {
                    refused.get_or_insert(e);
                } else {
                    let what = if registering { "register" } else { "commit" };
                    failure.get_or_insert(format!("ring queue {}: {what}: {e}", cfg.qid));
                }
            }
        });
        if let Err(e) = &waited {
            failure.get_or_insert(format!("ring queue {}: io_uring_enter: {e}", cfg.qid));
        }
        if first {
            first = false;
            let _ = started.send(match refused.take() {
                Some(e) => Err(e),
                None => Ok(()),
            });
        }
        if let Some(f) = failure {
            log::error!("{f}; aborting the mount of {}", mnt.display());
            end.failure.get_or_insert(f);
            if !aborted {
                aborted = true;
                abort(&mnt);
            }
            if waited.is_err() {
                // The ring is unusable: leave (its buffers are leaked, not freed under the
                // kernel); the abort ends the other queues and the session.
                break;
            }
        }
    }
    end
}

/// Aborts the FUSE connection of `mnt` so that nothing waits on a queue that cannot serve:
/// `umount -f` (which aborts a FUSE connection before unmounting), else a lazy unmount.
fn abort(mnt: &Path) {
    if let Err(e) = sys::force_unmount(mnt) {
        log::error!("umount -f {}: {e}", mnt.display());
        let _ = sys::umount(mnt, true);
    }
}
