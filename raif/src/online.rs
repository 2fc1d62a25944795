//! Rebuilding a failed branch while the volume is mounted (`rebuild N NEWDIR` written to
//! `MNT/.raif`, which `raif rebuild --mounted MNT --replace N NEWDIR` does).
//!
//! # How
//!
//! NEWDIR becomes branch N in the state *rebuilding*: nothing is read from it, and a file's
//! part there is written only once the file has *joined* it. A thread walks the tree of an
//! online branch as the offline rebuild does ([`crate::rebuild`]), and for each entry, with no
//! request under way (every request holds the mount's gate shared, the step holds it
//! exclusively), makes it on NEWDIR: directories, symlinks and special files, and every regular
//! file's part, computed from the other branches from the mount's own state of the file (its
//! size and generation may be ahead of its record). The file then joins: writes reach its new
//! part from then on, through the handles already open too (their part is replaced in the
//! inode's slots). New files made while it runs are made there too and join at once; changes
//! of the namespace reach NEWDIR where they can, and what they miss the next pass finds.
//!
//! Passes repeat until one finds nothing to do; the last runs with the gate held for the whole
//! walk, so nothing can change between it and the branch going online (markers written, the
//! intent log kept there again).
//!
//! # Checksums
//!
//! A rebuilt part gets its checksums as offline. Where a file's open handles keep checksums is
//! kept in step with them: for a file open during its step, those of the part before the
//! rebuilt one (kept on the rebuilt branch, which its handles never had) are dropped, and that
//! part's blocks go unverified until written again (checksums in an attribute), or until the
//! file is emptied or `raif scrub --add-checksums` runs (a sum file).
//!
//! # Stopping half-way
//!
//! NEWDIR carries branch N's marker from the start, saying it is the failed branch back. If the
//! daemon stops during the rebuild (an unmount, a kill), the next mount finds N *stale*, and
//! the same command resumes: parts already at their file's generation are kept.

use std::fmt::Write as _;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use fsprof_fuse::daemon::mount::plain;
use fsprof_fuse::sys;
use parking_lot::{Mutex, RwLockWriteGuard};

use crate::branch::{BranchSet, State};
use crate::fs::Shared;
use crate::fs::writeback::flush_sums;
use crate::gate::Gate;
use crate::inode::Inode;
use crate::rebuild::{Meter, Mounted, in_mount, ours_or_empty};

#[derive(Debug, Clone)]
enum Outcome {
    Running,
    Done(String),
    Failed(String),
}

#[derive(Debug, Clone)]
struct Run {
    branch: usize,
    dir: PathBuf,
    started: Instant,
    ended: Option<Instant>,
    outcome: Outcome,
}

/// The mount's side of a rebuild while mounted (shared by the `.raif` control file and the
/// thread that rebuilds).
pub struct Online {
    /// The file system's state it works on.
    fs: Shared,
    gate: Gate,
    mnt: PathBuf,
    pub(crate) meter: Arc<Meter>,
    run: Mutex<Option<Run>>,
    /// Files being written when the volume last stopped: their part on a branch that was
    /// being rebuilt then may be torn (the log's replay does not reach a stale branch), so a
    /// resumed rebuild does not keep it.
    torn: std::collections::HashSet<u64>,
}

impl Mounted for Online {
    fn branches(&self) -> &BranchSet {
        &self.fs.bs
    }

    fn torn(&self, id: u64) -> bool {
        self.torn.contains(&id)
    }

    fn file(&self, id: u64) -> Option<Arc<Inode>> {
        self.fs.inodes.get(id).ok().filter(|i| i.file.is_some())
    }

    fn join(&self, n: usize, id: u64, inode: Option<&Arc<Inode>>, part: Option<OwnedFd>) {
        self.fs.bs.join(id);
        let Some(inode) = inode else { return };
        let Some(f) = inode.file.as_ref() else { return };
        if let Some(fd) = part {
            self.fs.inodes.replace_part(inode, n, Arc::new(fd));
            let s = self.fs.bs.swaps.fetch_add(1, Ordering::AcqRel) + 1;
            f.swapped.store(s, Ordering::Release);
        }
        f.stale.fetch_and(!(1 << n), Ordering::AcqRel);
        f.joined.fetch_or(1 << n, Ordering::AcqRel);
        // Its sum files on the branch were just settled (some removed, some parts given
        // checksums): reopened, and asked again, when needed.
        self.fs.inodes.drop_sums(inode, |_, fd| drop(fd));
        f.sums_none.store(0, Ordering::Release);
        // What the mount cached of its checksum attributes goes (written back first: no
        // request is under way), to be read again: the rebuild rewrote some, and those kept
        // on the rebuilt branch were the old part's.
        f.xcache.lock().retain(|c| c.h != n);
        flush_sums(&self.fs.bs, f, None);
        let mut cache = f.xcache.lock();
        cache.clear();
        // The rebuild wrote entries after records, here and on the branch after it.
        f.bare.store(0, Ordering::Release);
        drop(cache);
    }

    fn quiesce(&self) -> RwLockWriteGuard<'_, ()> {
        self.gate.exclusive()
    }

    fn meter(&self) -> Arc<Meter> {
        self.meter.clone()
    }

    fn settle_sums(&self) {
        self.fs.dirty_sums.flush_all(&self.fs.bs);
    }

    fn stopping(&self) -> bool {
        self.fs.stop.load(Ordering::Relaxed)
    }
}

/// An `EINVAL` with `why` logged (the reason is also shown in `.raif`).
fn refused(why: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, why)
}

impl Online {
    /// The rebuild while mounted of the file system `fs`, whose requests all pass `gate`,
    /// mounted at `mnt`; `torn`: the files being written when the volume last stopped.
    pub(crate) fn new(
        fs: Shared,
        gate: Gate,
        mnt: PathBuf,
        torn: std::collections::HashSet<u64>,
    ) -> Online {
        Online {
            fs,
            gate,
            mnt,
            meter: Arc::default(),
            run: Mutex::new(None),
            torn,
        }
    }

    /// Starts rebuilding branch `n` onto `dir`: checks, makes it branch `n` (rebuilding) and
    /// starts the thread. Refusals are `EINVAL` (`EBUSY` while one runs), said in the log and
    /// in `.raif`.
    pub fn start(self: &Arc<Self>, n: usize, dir: &Path) -> io::Result<()> {
        {
            let run = self.run.lock();
            if run
                .as_ref()
                .is_some_and(|r| matches!(r.outcome, Outcome::Running))
            {
                log::warn!("rebuild: one is under way already");
                return Err(io::Error::from_raw_os_error(libc::EBUSY));
            }
        }
        let r = self.prepare(n, dir);
        let mut run = Run {
            branch: n,
            dir: dir.to_path_buf(),
            started: Instant::now(),
            ended: None,
            outcome: Outcome::Running,
        };
        let (root, trust) = match r {
            Ok(x) => x,
            Err(e) => {
                let why = e.to_string();
                log::error!("rebuild of branch {n} onto {}: {why}", dir.display());
                run.outcome = Outcome::Failed(why);
                run.ended = Some(Instant::now());
                *self.run.lock() = Some(run);
                return Err(io::Error::from_raw_os_error(libc::EINVAL));
            }
        };
        *self.run.lock() = Some(run);
        let me = self.clone();
        let dir = dir.to_path_buf();
        let spawned = std::thread::Builder::new()
            .name("raif-rebuild".into())
            .spawn(move || me.work(n, &dir, root, trust));
        if let Err(e) = spawned {
            self.fs.bs.fail(n, &format!("rebuild could not start: {e}"));
            self.end(Outcome::Failed(format!("cannot start a thread: {e}")));
            return Err(e);
        }
        Ok(())
    }

    /// Checks `dir` and makes it branch `n`, rebuilding. Returns its root and whether parts
    /// there at their file's generation are current (the branch is stale: back, or the
    /// rebuild resumes).
    fn prepare(&self, n: usize, dir: &Path) -> io::Result<(Arc<OwnedFd>, bool)> {
        let bs = &self.fs.bs;
        if n >= bs.len() {
            return Err(refused(format!("the volume has {} branches", bs.len())));
        }
        let state = bs.state(n);
        if !matches!(state, State::Failed | State::Stale) {
            return Err(refused(format!(
                "branch {n} is {}: only a failed or stale branch is rebuilt",
                state.name()
            )));
        }
        if bs.online_mask() & !(1 << n) == 0 {
            return Err(refused("no other branch is online to rebuild from".into()));
        }
        if !dir.is_absolute() {
            return Err(refused(format!("{}: not an absolute path", dir.display())));
        }
        let dir = &dir
            .canonicalize()
            .map_err(|e| refused(format!("{}: {}", dir.display(), plain(&e))))?;
        if dir.starts_with(&self.mnt) || self.mnt.starts_with(dir) {
            return Err(refused(format!(
                "{}: inside the mount (or holding it)",
                dir.display()
            )));
        }
        let mut paths: Vec<PathBuf> = bs.iter().map(|b| b.path()).collect();
        paths[n] = dir.clone();
        crate::branch::check_branches(&paths).map_err(|e| refused(e.to_string()))?;
        let root = sys::open_path(dir, libc::O_PATH | libc::O_DIRECTORY)
            .map_err(|e| refused(format!("{}: {}", dir.display(), plain(&e))))?;
        let st = sys::fstat(root.as_fd())?;
        let (ours, empty) = ours_or_empty(bs, n, &root, dir)?;
        if !empty && !ours {
            return Err(refused(format!(
                "{}: not empty and not branch {n} of this volume",
                dir.display()
            )));
        }
        let trust = state == State::Stale && ours;
        let sums = crate::sums::open_dir(root.as_fd(), true).ok();
        let root = Arc::new(root);
        // No request under way while the branch changes.
        let _g = self.gate.exclusive();
        bs.begin_rebuild(n, dir, root.try_clone()?, (st.dev, st.ino))?;
        self.fs
            .inodes
            .replace_branch(n, Some(Arc::new(root.try_clone()?)));
        self.fs.sum_dirs.replace(n, sums);
        for i in self.fs.inodes.all() {
            if let Some(f) = &i.file {
                f.joined.fetch_and(!(1 << n), Ordering::AcqRel);
            }
        }
        log::warn!(
            "rebuilding branch {n} at {} while mounted{}",
            dir.display(),
            if trust {
                " (resuming: parts at their file's generation are kept)"
            } else {
                ""
            }
        );
        Ok((root, trust))
    }

    fn work(self: Arc<Self>, n: usize, dir: &Path, root: Arc<OwnedFd>, trust: bool) {
        let live: Arc<dyn Mounted> = self.clone();
        let outcome = match in_mount(&live, n, dir, trust) {
            Ok(summary) => {
                if let Some(j) = &self.fs.journal {
                    j.attach(n, root);
                }
                log::warn!("{summary}");
                Outcome::Done(summary)
            }
            Err(e) => {
                let why = plain(&e);
                if self.stopping() {
                    log::warn!(
                        "rebuild of branch {n} stopped by the unmount; run it again to resume"
                    );
                } else {
                    self.fs.bs.fail(n, &format!("rebuild stopped: {why}"));
                }
                Outcome::Failed(why)
            }
        };
        self.end(outcome);
    }

    fn end(&self, outcome: Outcome) {
        if let Some(r) = self.run.lock().as_mut() {
            r.outcome = outcome;
            r.ended = Some(Instant::now());
        }
    }

    /// The rebuild of this mount, if one ran (or was refused): its progress and outcome.
    pub fn progress(&self) -> Option<crate::report::Rebuild> {
        crate::report::Rebuild::parse(&self.status_line()?)
    }

    /// The `rebuild ...` line of `.raif` (none if no rebuild ran in this mount):
    /// `rebuild branch N dir=DIR state=running|done|failed pass=P files=A/B bytes=C/D
    /// rate=R eta=S`, with `reason="..."` when failed: files of the current pass, bytes of
    /// every pass so far.
    pub fn status_line(&self) -> Option<String> {
        let run = self.run.lock().clone()?;
        let m = &self.meter;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let secs = run
            .ended
            .unwrap_or_else(Instant::now)
            .duration_since(run.started)
            .as_secs_f64();
        let mut s = format!(
            "rebuild branch {} dir={} state={} pass={} files={}/{} bytes={}/{} elapsed={:.1}s",
            run.branch,
            run.dir.display(),
            match run.outcome {
                Outcome::Running => "running",
                Outcome::Done(_) => "done",
                Outcome::Failed(_) => "failed",
            },
            get(&m.pass),
            get(&m.files_done),
            get(&m.files_total),
            get(&m.bytes_done),
            get(&m.bytes_total),
            secs
        );
        if matches!(run.outcome, Outcome::Running) && secs > 0.0 {
            let rate = get(&m.bytes_done) as f64 / secs;
            let left = get(&m.bytes_total).saturating_sub(get(&m.bytes_done));
            let _ = write!(s, " rate={:.0}B/s", rate);
            if rate > 0.0 {
                let _ = write!(s, " eta={:.0}s", left as f64 / rate);
            }
        }
        match run.outcome {
            Outcome::Failed(why) => {
                let _ = write!(s, " reason=\"{}\"", why.replace('"', "'"));
            }
            Outcome::Done(summary) => {
                let _ = write!(s, " summary=\"{}\"", summary.replace('"', "'"));
            }
            Outcome::Running => {}
        }
        Some(s)
    }
}
