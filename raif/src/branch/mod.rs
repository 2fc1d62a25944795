//! The branches of a volume: their root directories, identity, health and profiling layers.
//!
//! # States
//!
//! * **online**: served.
//! * **failed**: missing, unreadable, carrying no marker, replaced or moved while mounted, or
//!   answering `EIO`; or, with [`Admit::AsFailed`], not the member it is given as (an old copy
//!   of it, another volume's member: refused at mount otherwise). Never read or written again
//!   by this mount.
//! * **stale**: back in place after having been failed: the surviving branches' markers say it
//!   missed changes. A stale branch is used only for the files whose generation it has (see
//!   [`crate::inode::FileState::stale`]); it becomes online again after `raif rebuild`.
//!
//! A failure found while mounted raises the volume's epoch and is written into the markers of
//! the branches still online ([`crate::marker`]); files changed from then on carry the new
//! epoch as their generation, which the failed branch does not have.
//!
//! A generation proves a file current only on a branch that missed nothing but what it was
//! failed for. A branch put back from an older copy (a backup, a snapshot) carries this
//! volume's marker but missed whole mounts, during which files changed without a new
//! generation; so every marker also counts mounts, and the failure record keeps the last mount
//! of each failed branch. A branch behind the volume's count, or behind the mount it was
//! recorded failed after, is failed (never read) until `raif rebuild` has copied everything
//! onto it.

mod discovery;
mod open_volume;
mod reserve;

use std::collections::{HashSet, VecDeque};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::SystemTime;

use fsprof_fuse::daemon::mount::plain;
use fsprof_fuse::filesystem::Request;
use fsprof_fuse::protocol::ops::Sys;
use fsprof_fuse::sys;
use fsprof_fuse::toolkit::lower::{CallResult, Lower};
use parking_lot::{Mutex, RwLock};

use crate::layout::all_mask;
use crate::marker::{Marker, Stored};
use crate::part_io::own_limits;
use reserve::Reserve;

pub use discovery::{check_branches, fsname, inside_raif, mounted_over};
pub use open_volume::Admit;

/// How many of the last errors [`BranchSet::errors`] keeps.
const ERRORS_KEPT: usize = 8;

/// Health of a branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Served.
    Online,
    /// Not used at all.
    Failed,
    /// Used only for files it is up to date for.
    Stale,
    /// Being rebuilt while mounted ([`crate::online`]): written for the files rebuilt so far,
    /// read for none, and changes of the namespace made there where they can be.
    Rebuilding,
}

impl State {
    /// Lower-case name (in `.raif`).
    pub fn name(self) -> &'static str {
        match self {
            State::Online => "online",
            State::Failed => "failed",
            State::Stale => "stale",
            State::Rebuilding => "rebuilding",
        }
    }
}

#[derive(Debug, Default)]
struct Health {
    since: Option<SystemTime>,
    reason: String,
}

/// One branch directory.
pub struct Branch {
    /// Index in the volume.
    pub index: usize,
    /// The directory as given (absolute; another one once replaced while mounted).
    path: RwLock<PathBuf>,
    root: RwLock<Option<Arc<OwnedFd>>>,
    root_id: Mutex<(u64, u64)>,
    lower: Lower,
    health: Mutex<Health>,
}

impl Branch {
    /// The branch root (`O_PATH`); `EIO` for a branch that was missing at mount.
    #[inline]
    pub fn root(&self) -> io::Result<Arc<OwnedFd>> {
        self.root
            .read()
            .clone()
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EIO))
    }

    /// The directory (absolute).
    pub fn path(&self) -> PathBuf {
        self.path.read().clone()
    }

    fn new(index: usize, path: &Path, root: Option<OwnedFd>, id: (u64, u64), lower: Lower) -> Self {
        Branch {
            index,
            path: RwLock::new(path.to_path_buf()),
            root: RwLock::new(root.map(Arc::new)),
            root_id: Mutex::new(id),
            lower,
            health: Mutex::new(Health::default()),
        }
    }

    /// The branch's profiling layer.
    pub fn lower(&self) -> &Lower {
        &self.lower
    }

    /// Runs the system call `f` (`call`) on this branch for `req`, recorded in its layer under
    /// the request's operation.
    #[inline(always)]
    pub fn call<R: CallResult>(&self, req: &Request, call: Sys, f: impl FnOnce() -> R) -> R {
        self.lower.call(req, call, f)
    }
}

/// The branches of one volume.
pub struct BranchSet {
    branches: Box<[Branch]>,
    volume: u128,
    failed: AtomicU64,
    stale: AtomicU64,
    /// The branch being rebuilt while mounted (at most one; see [`crate::online`]).
    rebuilding: AtomicU64,
    /// Files whose part on the branch being rebuilt is current (ids).
    rebuilt: Mutex<HashSet<u64>>,
    /// Open files whose part a rebuild while mounted replaced (see [`crate::inode::FileState::swapped`]).
    pub swaps: AtomicU64,
    epoch: AtomicU64,
    /// This mount's number once [`BranchSet::begin_mount`] ran; before, the volume's last.
    mount: AtomicU64,
    /// Failed and stale branches: the last mount each took part in.
    last_mount: Box<[AtomicU64]>,
    /// Stopped uncleanly since the last complete `raif scrub --repair`.
    crashed: AtomicBool,
    /// The volume keeps a write-intent log (this mount does).
    logged: AtomicBool,
    /// It did at the last mount (so an unclean stop then left the rows being written known).
    pub was_logged: bool,
    markers: Mutex<()>,
    /// Failed branches as the markers recorded them at open.
    recorded: u64,
    /// Reads served by reconstruction (another copy or parity) because a branch was missing.
    pub degraded_reads: AtomicU64,
    /// Writes that could not reach every branch holding a part.
    pub degraded_writes: AtomicU64,
    /// Blocks that failed their checksum ([`crate::sums`]).
    pub checksum_errors: AtomicU64,
    /// Of those, the blocks rewritten from redundancy.
    pub checksum_repairs: AtomicU64,
    /// The last mount did not end cleanly (markers still said so).
    pub unclean: bool,
    /// The volume was created by this open.
    pub created: bool,
    /// The branches' locks ([`lock_branches`]), held while the set lives.
    _locks: Vec<OwnedFd>,
    /// Descriptors held back for checks and marker writes (see [`reserve`]).
    reserve: Reserve,
    /// Some online branch's marker could not be written for want of a descriptor (or
    /// memory): written again by the next [`BranchSet::check_all`].
    markers_pending: AtomicBool,
    /// Each member's generation (see [`crate::marker`]).
    gens: Box<[AtomicU64]>,
    /// The volume's settings for new files, as the markers keep them.
    settings: Mutex<Option<Stored>>,
    /// Old copies of their members taken in as failed at open ([`Admit::AsFailed`]): to be
    /// rebuilt in place.
    pub take_in: u64,
    /// The last errors (branch failures, refused commands), oldest first, with their time.
    errors: Mutex<VecDeque<(SystemTime, String)>>,
}

/// Whether `e` says a branch is failing or gone rather than answering a request: `EIO`, a
/// device or file system that went away (`ENXIO`, `ENODEV`, `ESTALE`), or a FUSE branch whose
/// daemon died (`ENOTCONN`; `ECONNABORTED` for the requests in flight when it did).
pub fn gone(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(
            libc::EIO
                | libc::ENXIO
                | libc::ENODEV
                | libc::ESTALE
                | libc::ENOTCONN
                | libc::ECONNABORTED
        )
    )
}

impl BranchSet {
    /// Branch `index`'s marker for the volume's state now.
    fn marker_for(&self, index: usize, clean: bool, starting: bool) -> Marker {
        let mut m = Marker::new(self.volume, index, self.len());
        m.epoch = self.epoch();
        m.failed = self.failed_mask() | self.stale_mask() | self.rebuilding_mask();
        for b in (0..self.len()).filter(|b| m.failed & (1 << b) != 0) {
            m.failed_mount[b] = self.last_mount[b].load(Ordering::Acquire);
        }
        m.mount = self.mount();
        m.starting = starting;
        m.clean = clean;
        m.crashed = self.crashed();
        m.logged = self.logged.load(Ordering::Acquire);
        for (g, x) in m.gens.iter_mut().zip(self.gens.iter()) {
            *g = x.load(Ordering::Acquire);
        }
        m.settings = self.settings.lock().clone();
        m
    }

    /// Member `i`'s generation.
    pub fn generation(&self, i: usize) -> u64 {
        self.gens[i].load(Ordering::Acquire)
    }

    /// The volume's settings for new files, as its markers keep them (none on a volume made
    /// before they were kept).
    pub fn stored(&self) -> Option<Stored> {
        self.settings.lock().clone()
    }

    /// Keeps `st` as the volume's settings (written with the markers at [`BranchSet::begin_mount`]).
    pub fn set_stored(&self, st: Stored) {
        *self.settings.lock() = Some(st);
    }

    /// Remembers `what` among the last errors (shown by `raif status`).
    pub fn note_error(&self, what: &str) {
        let mut e = self.errors.lock();
        if e.len() == ERRORS_KEPT {
            e.pop_front();
        }
        e.push_back((SystemTime::now(), what.to_string()));
    }

    /// The last errors, oldest first, with their time.
    pub fn errors(&self) -> Vec<(SystemTime, String)> {
        self.errors.lock().iter().cloned().collect()
    }

    /// Records the mount's start in the markers of the online branches: a new mount number
    /// (in two steps, see [`crate::marker`]), `clean = false`, and any branch found failed at
    /// open (which raises the epoch). Call it before serving anything.
    pub fn begin_mount(&self) {
        let _g = self.markers.lock();
        if self.failed_mask() & !self.recorded != 0 {
            let e = self.epoch.fetch_add(1, Ordering::AcqRel) + 1;
            log::warn!("failure record raised to epoch {e}");
        }
        if self.unclean && !self.was_logged {
            self.crashed.store(true, Ordering::Release);
        }
        self.mount.fetch_add(1, Ordering::AcqRel);
        self.write_markers(false, true);
        self.write_markers(false, false);
    }

    /// This mount keeps a write-intent log (said in the markers from [`BranchSet::begin_mount`]
    /// on); `deferred`: the replay of the last one left rows it could not resynchronise
    /// (a branch they need is missing), so the volume counts as crashed until a scrub.
    pub fn set_logged(&self, deferred: bool) {
        self.logged.store(true, Ordering::Release);
        if deferred {
            self.crashed.store(true, Ordering::Release);
        }
    }

    /// Records a clean unmount in the markers of the online branches.
    pub fn end_mount(&self) {
        let _g = self.markers.lock();
        self.write_markers(true, false);
    }

    /// Writes the markers of the online branches. A branch whose marker cannot be written is
    /// failed (its marker no longer tells the truth about it) and the others' rewritten; one
    /// that cannot be written for want of a descriptor or memory even with the reserve's
    /// ([`reserve`]) is written again by the next [`BranchSet::check_all`] (the daemon's
    /// limits say nothing about the branch).
    fn write_markers(&self, clean: bool, starting: bool) {
        loop {
            let mut bad = Vec::new();
            let mut pending = false;
            for b in self.branches.iter() {
                if self.state(b.index) != State::Online {
                    continue;
                }
                let m = self.marker_for(b.index, clean, starting);
                match b
                    .root()
                    .and_then(|r| self.reserve.run(|| m.write(r.as_fd())))
                {
                    Ok(()) => {}
                    Err(e) if own_limits(&e) => {
                        log::warn!(
                            "branch {}: marker not written for now: {} (the daemon's own \
                             limit); written again at the next check",
                            b.index,
                            plain(&e)
                        );
                        pending = true;
                    }
                    Err(e) => bad.push((b.index, e)),
                }
            }
            self.markers_pending.store(pending, Ordering::Release);
            if bad.is_empty() {
                return;
            }
            for (i, e) in bad {
                // Its marker still names the mount before this one if this write raised it.
                let last = self.mount().saturating_sub(starting as u64);
                self.mark_failed(i, last, &format!("cannot write its marker: {}", plain(&e)));
            }
            if self.online_mask() == 0 {
                return;
            }
        }
    }

    /// Records branch `i` failed after mount `last`, raising the epoch (markers not written).
    fn mark_failed(&self, i: usize, last: u64, reason: &str) {
        let b = &self.branches[i];
        {
            let mut h = b.health.lock();
            h.since = Some(SystemTime::now());
            h.reason = reason.to_string();
        }
        self.last_mount[i].store(last, Ordering::Release);
        let epoch = self.epoch.fetch_add(1, Ordering::AcqRel) + 1;
        self.failed.fetch_or(1 << i, Ordering::AcqRel);
        self.stale.fetch_and(!(1 << i), Ordering::AcqRel);
        self.rebuilding.fetch_and(!(1 << i), Ordering::AcqRel);
        log::error!(
            "branch {i} ({}) failed: {reason}; serving degraded (epoch {epoch})",
            b.path().display()
        );
        self.note_error(&format!("branch {i} failed: {reason}"));
    }

    /// Admin: branch `n`, rebuilt at `target`, is online again. Writes its marker (this
    /// volume's mount number, so the next mount finds it current) and the others' failure
    /// record without it. With `advance` (an offline rebuild; one while mounted raised it when
    /// it began), member `n`'s generation is raised first: every other copy of the member is
    /// an old one from now on. The target's marker goes first: a stop between the writes
    /// leaves it current, and still in the others' failure record (stale, rebuilt again).
    pub fn record_rebuilt(&self, n: usize, target: BorrowedFd, advance: bool) -> io::Result<()> {
        let _g = self.markers.lock();
        if advance {
            self.gens[n].fetch_add(1, Ordering::AcqRel);
        }
        self.failed.fetch_and(!(1 << n), Ordering::AcqRel);
        self.stale.fetch_and(!(1 << n), Ordering::AcqRel);
        self.rebuilding.fetch_and(!(1 << n), Ordering::AcqRel);
        let m = self.marker_for(n, true, false);
        self.reserve.run(|| m.write(target))?;
        for b in self.branches.iter() {
            if b.index != n && self.state(b.index) == State::Online {
                let m = self.marker_for(b.index, true, false);
                let root = b.root()?;
                self.reserve.run(|| m.write(root.as_fd()))?;
            }
        }
        Ok(())
    }

    /// Admin: a `raif scrub --repair` found nothing it could not repair: the unclean stop
    /// is behind the volume (scrub no longer mentions it).
    pub fn record_scrubbed(&self) -> io::Result<()> {
        let _g = self.markers.lock();
        self.crashed.store(false, Ordering::Release);
        for b in self.branches.iter() {
            if self.state(b.index) == State::Online {
                let m = self.marker_for(b.index, true, false);
                let root = b.root()?;
                self.reserve.run(|| m.write(root.as_fd()))?;
            }
        }
        Ok(())
    }

    /// Number of branches.
    #[inline]
    pub fn len(&self) -> usize {
        self.branches.len()
    }

    /// Whether there are no branches (never: a volume has at least two).
    pub fn is_empty(&self) -> bool {
        self.branches.is_empty()
    }

    /// Branch `i`.
    #[inline]
    pub fn get(&self, i: usize) -> &Branch {
        &self.branches[i]
    }

    /// Lets `fd`, a descriptor on branch `b` that `req` held, go: where the request holds the
    /// last copy, its `close(2)` is made now as a call of the request on that branch
    /// ([`fsprof_fuse::toolkit::lower::Via::release`]); one still cached or held by another request
    /// closes with its last holder.
    #[inline]
    pub fn release(&self, req: &Request, b: usize, fd: Arc<OwnedFd>) {
        self.get(b).lower.via(req).release(fd);
    }

    /// The `close(2)` of `fd`, a descriptor on branch `b` that `req` opened for itself, as a
    /// call of the request.
    #[inline]
    pub fn close(&self, req: &Request, b: usize, fd: OwnedFd) {
        self.get(b).lower.via(req).close(fd);
    }

    /// [`BranchSet::release`] of each descriptor of `fds`, by branch.
    pub fn release_all(&self, req: &Request, fds: impl IntoIterator<Item = Option<Arc<OwnedFd>>>) {
        for (b, fd) in fds.into_iter().enumerate() {
            if let Some(fd) = fd {
                self.release(req, b, fd);
            }
        }
    }

    /// All branches.
    pub fn iter(&self) -> impl Iterator<Item = &Branch> {
        self.branches.iter()
    }

    /// The volume id.
    pub fn volume(&self) -> u128 {
        self.volume
    }

    /// This mount's number (the volume's last before [`BranchSet::begin_mount`]).
    pub fn mount(&self) -> u64 {
        self.mount.load(Ordering::Acquire)
    }

    /// Whether the volume stopped uncleanly since its last complete `raif scrub --repair`.
    pub fn crashed(&self) -> bool {
        self.crashed.load(Ordering::Acquire)
    }

    /// The current failure epoch (generation given to files changed from now on while
    /// degraded).
    #[inline]
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// Failed branches.
    #[inline]
    pub fn failed_mask(&self) -> u64 {
        self.failed.load(Ordering::Acquire)
    }

    /// Stale branches.
    #[inline]
    pub fn stale_mask(&self) -> u64 {
        self.stale.load(Ordering::Acquire)
    }

    /// The branch being rebuilt while mounted (a mask, of one branch or none).
    #[inline]
    pub fn rebuilding_mask(&self) -> u64 {
        self.rebuilding.load(Ordering::Acquire)
    }

    /// Online branches.
    pub fn online_mask(&self) -> u64 {
        all_mask(self.len()) & !self.failed_mask() & !self.stale_mask() & !self.rebuilding_mask()
    }

    /// Branch `i`'s state.
    pub fn state(&self, i: usize) -> State {
        if self.failed_mask() & (1 << i) != 0 {
            State::Failed
        } else if self.rebuilding_mask() & (1 << i) != 0 {
            State::Rebuilding
        } else if self.stale_mask() & (1 << i) != 0 {
            State::Stale
        } else {
            State::Online
        }
    }

    /// Branches whose sum files are not to be used for a file that joined `joined`: failed
    /// and stale ones (theirs may have missed changes), and one being rebuilt it has not
    /// joined.
    #[inline]
    pub fn sums_down(&self, joined: u64) -> u64 {
        self.failed_mask() | self.stale_mask() | (self.rebuilding_mask() & !joined)
    }

    /// The branches being rebuilt that the file `id` has joined (for a file's new state).
    pub fn joined(&self, id: u64) -> u64 {
        let r = self.rebuilding_mask();
        if r != 0 && self.rebuilt.lock().contains(&id) {
            r
        } else {
            0
        }
    }

    /// Whether the file `id` is current on the branch being rebuilt.
    pub fn is_joined(&self, id: u64) -> bool {
        self.rebuilt.lock().contains(&id)
    }

    /// Records the file `id` current on the branch being rebuilt.
    pub fn join(&self, id: u64) {
        self.rebuilt.lock().insert(id);
    }

    /// Starts rebuilding branch `n` (failed or stale) while mounted, at the directory `path`
    /// (`root`, `id` its device and inode): from now on it is written for the files that
    /// join it. Its marker is written saying it is the failed branch, back (so a mount after a
    /// stop half-way finds it stale and the rebuild resumes where it was).
    pub fn begin_rebuild(
        &self,
        n: usize,
        path: &Path,
        root: OwnedFd,
        id: (u64, u64),
    ) -> io::Result<()> {
        let _g = self.markers.lock();
        let b = &self.branches[n];
        // A new generation of the member: the directory it is rebuilt away from is an old
        // copy from now on, in every marker (the new directory's first).
        self.gens[n].fetch_add(1, Ordering::AcqRel);
        let mut m = self.marker_for(n, false, false);
        m.mount = self.last_mount[n].load(Ordering::Acquire);
        if let Err(e) = self.reserve.run(|| m.write(root.as_fd())) {
            self.gens[n].fetch_sub(1, Ordering::AcqRel);
            return Err(e);
        }
        *b.root.write() = Some(Arc::new(root));
        *b.root_id.lock() = id;
        *b.path.write() = path.to_path_buf();
        {
            let mut h = b.health.lock();
            h.since = Some(SystemTime::now());
            h.reason = "being rebuilt".into();
        }
        self.rebuilt.lock().clear();
        // Still in the failure record (see `marker_for`) until it is complete.
        self.rebuilding.store(1 << n, Ordering::Release);
        self.failed.fetch_and(!(1 << n), Ordering::AcqRel);
        self.stale.fetch_and(!(1 << n), Ordering::AcqRel);
        self.write_markers(false, false);
        Ok(())
    }

    /// The rebuild of branch `n` while mounted is complete: it is online (markers written as
    /// [`BranchSet::record_rebuilt`] does).
    pub fn finish_rebuild(&self, n: usize) -> io::Result<()> {
        let root = self.branches[n].root()?;
        self.record_rebuilt(n, root.as_fd(), false)?;
        self.rebuilt.lock().clear();
        *self.branches[n].health.lock() = Health::default();
        Ok(())
    }

    /// Marks branch `i` failed (once): logs, raises the epoch and records it on the online
    /// branches. Operations under way on it finish; nothing new is sent to it.
    pub fn fail(&self, i: usize, reason: &str) {
        if self.failed_mask() & (1 << i) != 0 {
            return;
        }
        let _g = self.markers.lock();
        if self.failed_mask() & (1 << i) != 0 {
            return;
        }
        // An online branch took part in this mount; a stale one keeps its record.
        let last = if self.state(i) == State::Stale {
            self.last_mount[i].load(Ordering::Acquire)
        } else {
            self.mount()
        };
        self.mark_failed(i, last, reason);
        self.write_markers(false, false);
    }

    /// Admin: fails branch `i` by hand, unless another branch is out of service (a second
    /// would leave RAIF4/5 files unreadable; md will not fail a device of a degraded RAID5
    /// either: refused whatever the levels the volume holds, which are not known here).
    /// Checked and applied under the markers' lock, so two commands cannot both pass the
    /// check. Failing a failed branch again is no error. The refusal says why, in words.
    pub fn fail_by_hand(&self, i: usize) -> Result<(), String> {
        if i >= self.len() {
            return Err(format!(
                "there is no branch {i}: the volume has {} (0 to {})",
                self.len(),
                self.len() - 1
            ));
        }
        let _g = self.markers.lock();
        if self.failed_mask() & (1 << i) != 0 {
            return Ok(());
        }
        let others_out = all_mask(self.len()) & !self.online_mask() & !(1u64 << i);
        if others_out != 0 && self.online_mask() & (1 << i) != 0 {
            let o = others_out.trailing_zeros() as usize;
            return Err(format!(
                "branch {o} is {} already: failing branch {i} too would leave RAIF4/5 files \
                 unreadable (rebuild branch {o} first: raif replace MNT {o} NEWDIR)",
                self.state(o).name()
            ));
        }
        let last = if self.state(i) == State::Stale {
            self.last_mount[i].load(Ordering::Acquire)
        } else {
            self.mount()
        };
        self.mark_failed(i, last, "failed by the administrator");
        self.write_markers(false, false);
        Ok(())
    }

    /// Checks that branch `i` is still the directory it was at mount and carries its marker;
    /// marks it failed otherwise. Returns whether it is (still) healthy. A check the daemon
    /// cannot make for want of a descriptor (even with the reserve's) or memory decides
    /// nothing: the branch stays as it is.
    pub fn check(&self, i: usize) -> bool {
        if self.state(i) == State::Failed {
            return false;
        }
        let b = &self.branches[i];
        let path = b.path();
        let found = self.reserve.run(|| {
            sys::open_path(&path, libc::O_PATH | libc::O_DIRECTORY)
                .and_then(|fd| sys::fstat(fd.as_fd()))
        });
        let why = match found {
            Err(e) if own_limits(&e) => return self.unchecked(i, &e),
            Err(e) => Some(format!("{}: {}", path.display(), plain(&e))),
            Ok(st) if (st.dev, st.ino) != *b.root_id.lock() => {
                Some(format!("{} was replaced or moved", path.display()))
            }
            // Not while this mount writes markers (one overwritten in place is not whole).
            Ok(_) => match b.root().and_then(|r| {
                let _g = self.markers.lock();
                self.reserve.run(|| Marker::read(r.as_fd()))
            }) {
                Ok(Some(m)) if m.volume == self.volume && m.index == i => None,
                Ok(Some(_)) => Some("marker changed".to_string()),
                Ok(None) => Some("marker missing".to_string()),
                Err(e) if own_limits(&e) => return self.unchecked(i, &e),
                Err(e) => Some(format!("marker: {}", plain(&e))),
            },
        };
        match why {
            None => true,
            Some(w) => {
                self.fail(i, &w);
                false
            }
        }
    }

    /// A check of branch `i` that the daemon's own limits kept from being made (`e`): the
    /// branch is taken to be as it was.
    fn unchecked(&self, i: usize, e: &io::Error) -> bool {
        log::warn!(
            "branch {i}: not checked for now: {} (the daemon's own limit)",
            plain(e)
        );
        true
    }

    /// Checks every branch that is not failed, and writes the markers that could not be
    /// written for want of a descriptor.
    pub fn check_all(&self) {
        for i in 0..self.len() {
            self.check(i);
        }
        if self.markers_pending.load(Ordering::Acquire) {
            let _g = self.markers.lock();
            if self.markers_pending.load(Ordering::Acquire) {
                self.write_markers(false, false);
            }
        }
    }

    /// An error `e` from branch `i`: decides whether the branch has failed. `EIO` (and errors
    /// that mean the branch is gone) fail it; the daemon's own limits
    /// ([`own_limits`](crate::part_io::own_limits)) never do; a health check decides the rest.
    /// Returns whether the branch is now failed.
    pub fn error(&self, i: usize, e: &io::Error, what: &str) -> bool {
        if own_limits(e) {
            // The daemon's, not the branch's: the error goes to the caller.
            return false;
        }
        if gone(e) {
            self.fail(i, &format!("{what}: {}", plain(e)));
            true
        } else {
            !self.check(i)
        }
    }

    /// Branch `i`'s health as shown in `.raif`: state, since when, why.
    pub fn describe(&self, i: usize) -> String {
        let b = &self.branches[i];
        let h = b.health.lock();
        let mut s = format!("branch {i} {} {}", self.state(i).name(), b.path().display());
        if let Some(t) = h.since {
            let secs = t
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            s.push_str(&format!(" since_unix={secs}"));
        }
        if !h.reason.is_empty() {
            s.push_str(&format!(" reason=\"{}\"", h.reason));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `fail N` by hand is checked and applied under the markers' lock: a command that waits
    /// for the lock while another branch is failed is refused once it gets it (it checked
    /// before taking any lock, passed, and failed a second branch).
    #[test]
    fn a_fail_by_hand_checks_under_the_lock_it_fails_under() {
        let tmp = tempfile::tempdir().unwrap();
        let paths: Vec<PathBuf> = (0..3).map(|i| tmp.path().join(format!("b{i}"))).collect();
        for p in &paths {
            std::fs::create_dir(p).unwrap();
        }
        let lowers = paths.iter().map(|_| Lower::default()).collect();
        let bs = Arc::new(BranchSet::open(&paths, lowers, true, Admit::Refuse).unwrap());
        let held = bs.markers.lock();
        let second = {
            let bs = bs.clone();
            std::thread::spawn(move || bs.fail_by_hand(1))
        };
        // Give it time to reach the lock (the refusal does not depend on it: a command that
        // comes later is refused all the more).
        std::thread::sleep(std::time::Duration::from_millis(100));
        bs.mark_failed(0, bs.mount(), "failed by the administrator");
        drop(held);
        let r = second.join().unwrap();
        assert!(
            r.as_ref()
                .is_err_and(|e| e.contains("branch 0 is failed already")),
            "{r:?}"
        );
        assert_eq!(bs.failed_mask(), 1);
    }
}
