//! The live log of a mount: regions and partial parity appended before the writes they cover,
//! and the clearing cycle (see [`crate::intent`]).

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use fsprof_fuse::filesystem::Request;
use fsprof_fuse::protocol::ops::Sys;
use fsprof_fuse::sys;
use fsprof_fuse::toolkit::lower::Via;
use parking_lot::{Condvar, Mutex};

use super::record::{Body, REGION, Record};
use crate::branch::BranchSet;
use crate::part_io::{self, How, Plain};
use crate::reserved::LOGS;

/// The regions of a file that are live for it in the current epoch (kept with the file's
/// state, under its write lock).
#[derive(Debug, Default)]
pub struct Live {
    epoch: u64,
    /// Region index and whether its entry is on stable storage.
    regions: Vec<(u64, bool)>,
}

/// One branch's log, open for appending.
/// The log files of one branch, opened empty at its root.
fn open_log(root: BorrowedFd) -> io::Result<LogState> {
    let open = |name: &str| {
        sys::openat(
            root,
            OsStr::new(name),
            libc::O_RDWR | libc::O_CREAT | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o600,
        )
    };
    let a = open(LOGS[0])?;
    let b = open(LOGS[1])?;
    let end = [sys::fstat(a.as_fd())?.size, sys::fstat(b.as_fd())?.size];
    Ok(LogState {
        fds: [Arc::new(a), Arc::new(b)],
        active: 0,
        end,
        synced: end,
        syncing: [false; 2],
    })
}

struct LogState {
    /// The two files.
    fds: [Arc<OwnedFd>; 2],
    /// The one appended to.
    active: usize,
    /// Where the next record of each goes.
    end: [u64; 2],
    /// How much of each is known to be on stable storage.
    synced: [u64; 2],
    /// A sync of each is under way (its waiters wait for it, then sync what it missed).
    syncing: [bool; 2],
}

/// The mount's write-intent log over the online branches' logs.
pub struct Journal {
    /// Each branch's log files (none: the branch holds no log).
    logs: Box<[Mutex<Option<LogState>>]>,
    /// Signalled when a sync of a branch's log ends (group commit, see [`Journal::append_to`]).
    synced: Box<[Condvar]>,
    /// The branches that hold one.
    present: AtomicU64,
    roots: Mutex<Box<[Option<Arc<OwnedFd>>]>>,
    seq: AtomicU64,
    epoch: AtomicU64,
    inflight: [AtomicU64; 2],
    /// An entry of the waiting kind was made in the epoch (by parity of the epoch).
    synced_kind: [AtomicBool; 2],
    /// Records appended (for `.raif`).
    pub records: AtomicU64,
    /// Log syncs waited for (for `.raif`).
    pub syncs: AtomicU64,
    /// One clearing cycle at a time.
    cycling: Mutex<()>,
}

/// A write under way, registered with the epoch it started in (see [`Journal::writing`]).
pub struct Writing<'a> {
    j: &'a Journal,
    epoch: u64,
}

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        self.j.inflight[(self.epoch & 1) as usize].fetch_sub(1, Ordering::SeqCst);
    }
}

impl Journal {
    /// Opens (creating where missing) the log of every online branch of `bs`, empty: call
    /// after [`super::replay`], with the highest sequence number it read (`after`; entries are
    /// numbered from the next).
    pub fn open(bs: &BranchSet, after: u64) -> io::Result<Journal> {
        let online = bs.online_mask();
        let mut logs = Vec::with_capacity(bs.len());
        let mut roots = Vec::with_capacity(bs.len());
        let mut present = 0u64;
        for b in bs.iter() {
            let opened = (online & (1 << b.index) != 0)
                .then(|| {
                    let root = b.root()?;
                    let st = open_log(root.as_fd())?;
                    Ok::<_, io::Error>((root, st))
                })
                .transpose();
            match opened {
                Ok(Some((root, st))) => {
                    present |= 1 << b.index;
                    logs.push(Mutex::new(Some(st)));
                    roots.push(Some(root));
                }
                Ok(None) => {
                    logs.push(Mutex::new(None));
                    roots.push(None);
                }
                Err(e) => {
                    // Say, a branch out of inodes: the others take its entries.
                    log::warn!("branch {}: no intent log: {e}", b.index);
                    logs.push(Mutex::new(None));
                    roots.push(None);
                }
            }
        }
        if present == 0 {
            return Err(io::Error::other("no branch can hold it"));
        }
        Ok(Journal {
            synced: logs.iter().map(|_| Condvar::new()).collect(),
            logs: logs.into_boxed_slice(),
            present: AtomicU64::new(present),
            roots: Mutex::new(roots.into_boxed_slice()),
            seq: AtomicU64::new(after + 1),
            epoch: AtomicU64::new(1),
            inflight: [AtomicU64::new(0), AtomicU64::new(0)],
            synced_kind: [AtomicBool::new(false), AtomicBool::new(false)],
            records: AtomicU64::new(0),
            syncs: AtomicU64::new(0),
            cycling: Mutex::new(()),
        })
    }

    /// Branch `b` was replaced under the mount by the directory `root` (rebuilt): its log is
    /// opened there (the old one is dropped; it held no entry the others do not: a failed
    /// branch gets none).
    pub fn attach(&self, b: usize, root: Arc<OwnedFd>) {
        let _one = self.cycling.lock();
        match open_log(root.as_fd()) {
            Ok(st) => {
                *self.logs[b].lock() = Some(st);
                self.roots.lock()[b] = Some(root);
                self.present.fetch_or(1 << b, Ordering::AcqRel);
            }
            Err(e) => {
                log::warn!("branch {b}: no intent log: {e}");
                *self.logs[b].lock() = None;
                self.roots.lock()[b] = None;
                self.present.fetch_and(!(1 << b), Ordering::AcqRel);
            }
        }
    }

    /// Registers a write (or truncation) about to start; the clearing cycle waits for it.
    #[inline]
    pub fn writing(&self) -> Writing<'_> {
        loop {
            let e = self.epoch.load(Ordering::SeqCst);
            self.inflight[(e & 1) as usize].fetch_add(1, Ordering::SeqCst);
            if self.epoch.load(Ordering::SeqCst) == e {
                return Writing { j: self, epoch: e };
            }
            self.inflight[(e & 1) as usize].fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Records the intent of writing `[start, start + len)` of the file `id` (`path`, from the
    /// volume root; `live` its live regions) before it is written, as `how` says, on a branch
    /// not in `written` where one is online; `bs` decides about branches that fail. The log's
    /// `pwrite` and `fdatasync` are branch calls of `req`, the request that writes.
    #[allow(clippy::too_many_arguments)]
    pub fn note(
        &self,
        req: &Request,
        w: &Writing,
        bs: &BranchSet,
        live: &Mutex<Live>,
        id: u64,
        path: &dyn Fn() -> Vec<u8>,
        start: u64,
        len: u64,
        written: u64,
        how: How,
    ) -> io::Result<()> {
        let wait = !matches!(how, How::Fresh | How::Parity { fresh: true, .. });
        let (first, last) = (start / REGION, (start + len.max(1) - 1) / REGION);
        let mut live = live.lock();
        if live.epoch != w.epoch {
            live.epoch = w.epoch;
            live.regions.clear();
        }
        let missing: Vec<u64> = (first..=last)
            .filter(|r| {
                !live
                    .regions
                    .iter()
                    .any(|&(x, synced)| x == *r && (synced || !wait))
            })
            .collect();
        let parity = matches!(how, How::Parity { .. } | How::Zeros { .. });
        if missing.is_empty() && !parity {
            return Ok(());
        }
        let path = path();
        let mut records: Vec<Record> = missing
            .iter()
            .map(|r| Record {
                seq: self.seq.fetch_add(1, Ordering::Relaxed),
                id,
                path: path.clone(),
                body: Body::Region {
                    start: r * REGION,
                    end: (r + 1) * REGION,
                },
            })
            .collect();
        let body = match how {
            How::Parity {
                row, col, a, pp, ..
            } => Some(Body::Parity {
                row,
                col: col as u32,
                a,
                pp: pp.to_vec(),
            }),
            How::Zeros { first, end } => Some(Body::Zeros { first, end }),
            How::Fresh | How::Overwrite => None,
        };
        if let Some(body) = body {
            records.push(Record {
                seq: self.seq.fetch_add(1, Ordering::Relaxed),
                id,
                path,
                body,
            });
        }
        // One append, all of it or none: its entries are read back only if its last is.
        let bytes = Record::append(&records);
        self.append(req, w, bs, id.wrapping_add(first), written, &bytes, wait)?;
        self.records
            .fetch_add(missing.len() as u64 + parity as u64, Ordering::Relaxed);
        for r in missing {
            match live.regions.iter_mut().find(|(x, _)| *x == r) {
                Some(e) => e.1 |= wait,
                None => live.regions.push((r, wait)),
            }
        }
        Ok(())
    }

    /// Appends `bytes` to the log of a branch not in `written` (cycling from `spread`), else
    /// of any online one; with `wait`, returns once they are on stable storage.
    #[allow(clippy::too_many_arguments)]
    fn append(
        &self,
        req: &Request,
        w: &Writing,
        bs: &BranchSet,
        spread: u64,
        written: u64,
        bytes: &[u8],
        wait: bool,
    ) -> io::Result<()> {
        let n = self.logs.len();
        let mut tried = 0u64;
        loop {
            let online = bs.online_mask() & !tried;
            let present = self.present.load(Ordering::Acquire);
            let usable = |b: usize| online & present & (1 << b) != 0;
            let order = (0..n).map(|i| (spread as usize + i) % n);
            let Some(b) = order
                .clone()
                .find(|&b| usable(b) && written & (1 << b) == 0)
                .or_else(|| order.clone().find(|&b| usable(b)))
            else {
                return Err(io::Error::from_raw_os_error(libc::EIO));
            };
            match self.append_to(bs.get(b).lower().via(req), b, bytes, wait) {
                Ok(()) => {
                    if wait {
                        self.synced_kind[(w.epoch & 1) as usize].store(true, Ordering::SeqCst);
                    }
                    return Ok(());
                }
                Err(e) if part_io::refused(&e) => return Err(e),
                Err(e) => {
                    bs.error(b, &e, "intent log");
                    tried |= 1 << b;
                }
            }
        }
    }

    /// Appends `bytes` to branch `b`'s active log file; with `wait`, returns once they are on
    /// stable storage. Group commit: the sync runs outside the log's lock, so the writes in
    /// flight append meanwhile, and one `fdatasync` makes all of them stable; a writer whose
    /// bytes a sync already covers does not sync again.
    fn append_to(&self, via: Via, b: usize, bytes: &[u8], wait: bool) -> io::Result<()> {
        let no_log = || io::Error::from_raw_os_error(libc::EIO);
        let mut guard = self.logs[b].lock();
        let st = guard.as_mut().ok_or_else(no_log)?;
        let i = st.active;
        let at = st.end[i];
        via.call(Sys::Pwrite, || {
            part_io::write_full(&Plain(st.fds[i].as_fd()), 0, bytes, at)
        })?;
        let mine = at + bytes.len() as u64;
        st.end[i] = mine;
        if !wait {
            return Ok(());
        }
        loop {
            let st = guard.as_mut().ok_or_else(no_log)?;
            if st.synced[i] >= mine {
                return Ok(());
            }
            if st.syncing[i] {
                self.synced[b].wait(&mut guard);
                continue;
            }
            st.syncing[i] = true;
            let (fd, upto) = (st.fds[i].clone(), st.end[i]);
            let r = parking_lot::MutexGuard::unlocked(&mut guard, || {
                via.call(Sys::Fdatasync, || sys::fsync(fd.as_fd(), true))
            });
            if let Some(st) = guard.as_mut() {
                st.syncing[i] = false;
                if r.is_ok() {
                    st.synced[i] = st.synced[i].max(upto);
                }
            }
            self.synced[b].notify_all();
            r?;
            self.syncs.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Clears the entries of writes that are complete: switches every log to its other file,
    /// raises the epoch, waits for the writes of the old one, syncs the branches if one of its
    /// entries was of the waiting kind, and empties the files appended to before the switch.
    pub fn cycle(&self, down: u64) {
        self.cycle_then(down, || {});
    }

    /// [`Journal::cycle`], running `written` once the writes of the ending epoch are done and
    /// before their entries go (the mount writes back there what those writes left in memory:
    /// their blocks' checksums).
    pub fn cycle_then(&self, down: u64, written: impl FnOnce()) {
        let _one = self.cycling.lock();
        // Switched before the epoch is raised, so no write of the new epoch logs into a file
        // about to be emptied (one of the old epoch may log into the new file: kept longer).
        let mut old = Vec::with_capacity(self.logs.len());
        for log in self.logs.iter() {
            old.push(log.lock().as_mut().and_then(|st| {
                let i = st.active;
                (st.end[i] > 0).then(|| {
                    st.active = 1 - i;
                    i
                })
            }));
        }
        if old.iter().all(Option::is_none) {
            return;
        }
        let e = self.epoch.fetch_add(1, Ordering::SeqCst);
        let slot = (e & 1) as usize;
        while self.inflight[slot].load(Ordering::SeqCst) != 0 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        written();
        if self.synced_kind[slot].swap(false, Ordering::SeqCst) {
            // Their data and parity on stable storage before the entries go (one sync per
            // file system), through each log file's descriptor: the roots are `O_PATH`, which
            // syncfs refuses. Not a failed branch's (its entries are the others' to keep, and
            // a dead one would keep the logs from ever clearing).
            let mut seen = Vec::new();
            for (b, log) in self.logs.iter().enumerate() {
                if down & (1 << b) != 0 {
                    continue;
                }
                // A copy of the descriptor, so that no append waits for the sync.
                let Some(fd) = log.lock().as_ref().map(|st| st.fds[0].try_clone()) else {
                    continue;
                };
                let r = fd.and_then(|fd| {
                    let dev = sys::fstat(fd.as_fd())?.dev;
                    if seen.contains(&dev) {
                        return Ok(());
                    }
                    seen.push(dev);
                    sys::syncfs(fd.as_fd())
                });
                if let Err(e) = r {
                    log::warn!("branch {b}: syncfs before clearing the intent log: {e}; kept");
                    return;
                }
            }
        }
        for (b, i) in old.into_iter().enumerate() {
            let Some(i) = i else { continue };
            let mut st = self.logs[b].lock();
            let Some(st) = st.as_mut() else { continue };
            match sys::ftruncate(st.fds[i].as_fd(), 0) {
                Ok(()) => {
                    st.end[i] = 0;
                    st.synced[i] = 0;
                }
                Err(e) => log::warn!("branch {b}: cannot clear its intent log: {e}"),
            }
        }
    }

    /// At a clean unmount (no write under way or to come): clears every entry and removes the
    /// log files.
    pub fn close(&self, down: u64) {
        self.cycle(down);
        self.cycle(down);
        for (b, root) in self.roots.lock().iter().enumerate() {
            let Some(root) = root else { continue };
            for name in LOGS {
                if let Err(e) = sys::unlinkat(root.as_fd(), OsStr::new(name), false) {
                    log::warn!("branch {b}: cannot remove its intent log: {e}");
                }
            }
        }
    }
}
