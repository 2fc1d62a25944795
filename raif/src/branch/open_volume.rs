//! Opening a volume's branches: each branch's lock, what is found at each path, and the
//! judgement of each marker against the volume's (online, stale, failed, or refused).
//!
//! A directory that is not the member it is given as is *refused*: an old copy of its member
//! (a generation behind the volume's, or behind its mount count), a member of another volume,
//! or another member of this one. A mount refuses the volume then, naming the branch, what it
//! is and what fixes it; with [`Admit::AsFailed`] it is taken in as failed instead (never
//! read or written), and an old copy of its member is to be rebuilt in place
//! ([`BranchSet::take_in`]). A missing, unreadable or unmarked directory is a failed branch,
//! and the volume is served degraded.

use std::collections::HashSet;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use fsprof_fuse::daemon::mount::plain;
use fsprof_fuse::sys;
use fsprof_fuse::toolkit::lower::Lower;
use parking_lot::Mutex;

use super::reserve::Reserve;
use super::{Branch, BranchSet, Health};
use crate::layout::{MAX_BRANCHES, all_mask};
use crate::marker::{Marker, random_u128};

/// What opening a volume does with a directory that is not the member it is given as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Refuses the volume (a mount, by default).
    Refuse,
    /// Takes it in as failed: never read or written (a mount with `--take-failed`, and the
    /// admin commands, which report it).
    AsFailed,
}

/// Why a directory is not the member it is given as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wrong {
    /// An old copy of its member: rebuilt in place when taken in.
    OldCopy,
    /// Another volume's member, or another member of this one: never written.
    Other,
}

/// What was found at a branch path.
enum Found {
    /// Not usable, and why.
    Unusable(String),
    /// A directory with our kind of marker.
    Marked(OwnedFd, (u64, u64), Box<Marker>),
    /// A directory without a marker.
    Unmarked(OwnedFd, (u64, u64), bool),
}

fn probe(path: &Path) -> Found {
    let root = match sys::open_path(path, libc::O_PATH | libc::O_DIRECTORY) {
        Ok(fd) => fd,
        Err(e) => return Found::Unusable(plain(&e)),
    };
    let st = match sys::fstat(root.as_fd()) {
        Ok(st) => st,
        Err(e) => return Found::Unusable(plain(&e)),
    };
    let id = (st.dev, st.ino);
    match Marker::read(root.as_fd()) {
        Ok(Some(m)) => Found::Marked(root, id, Box::new(m)),
        Ok(None) => match std::fs::read_dir(path) {
            Ok(mut rd) => {
                let empty = rd.next().is_none();
                Found::Unmarked(root, id, empty)
            }
            Err(e) => Found::Unusable(plain(&e)),
        },
        Err(e) => Found::Unusable(format!("marker: {}", plain(&e))),
    }
}

/// What opening a volume makes of one branch ([`judge`]).
struct Judged {
    /// Its root, if it is usable.
    root: Option<OwnedFd>,
    /// The root's device and inode.
    id: (u64, u64),
    /// Why it is failed, if it is.
    why: Option<String>,
    /// Its marker says the last mount it took part in did not end cleanly.
    unclean: bool,
    /// It is not the member it is given as (`why` says what it is).
    wrong: Option<Wrong>,
}

/// Judges branch `i` (`f` found at its path) of the volume whose highest marker is `best`:
/// usable, or failed and why. `last` is the last mount it should have taken part in,
/// `recorded` whether the failure record names it, `volume_mount` the volume's last mount,
/// `generation` the generation of member `i` (the highest any marker records).
fn judge(
    i: usize,
    f: Found,
    best: &Marker,
    last: u64,
    recorded: bool,
    volume_mount: u64,
    generation: u64,
) -> Judged {
    let failed = |why: String, wrong: Option<Wrong>| Judged {
        root: None,
        id: (0, 0),
        why: Some(why),
        unclean: false,
        wrong,
    };
    match f {
        Found::Marked(root, id, m) if m.volume == best.volume => {
            if m.index != i {
                return failed(
                    format!("member {} of this volume, given as branch {i}", m.index),
                    Some(Wrong::Other),
                );
            }
            if m.own_gen() < generation {
                return failed(
                    format!(
                        "an old copy of member {i}, replaced at generation {} (it is \
                         generation {}; the member is generation {generation} now)",
                        m.own_gen() + 1,
                        m.own_gen()
                    ),
                    Some(Wrong::OldCopy),
                );
            }
            // The branch as it was after mount `last`, or an older copy of it?
            let same = if recorded {
                last == 0 || m.mount == last || (m.starting && m.mount == last + 1)
            } else {
                m.mount >= volume_mount
            };
            if same {
                Judged {
                    root: Some(root),
                    id,
                    why: None,
                    unclean: !m.clean && !recorded,
                    wrong: None,
                }
            } else {
                failed(
                    format!(
                        "an old copy of member {i}: its marker says mount {}, the volume \
                         expects mount {last} (it missed whole mounts)",
                        m.mount
                    ),
                    Some(Wrong::OldCopy),
                )
            }
        }
        Found::Marked(_, _, m) => failed(
            format!("a member of another volume ({:032x})", m.volume),
            Some(Wrong::Other),
        ),
        Found::Unmarked(_, _, true) => failed("empty directory without a marker".to_string(), None),
        Found::Unmarked(_, _, false) => failed("no marker".to_string(), None),
        Found::Unusable(why) => failed(why, None),
    }
}

/// The one line that refuses a volume for branch `i` at `p`, which is `what` (`wrong`).
fn refusal(i: usize, p: &Path, what: &str, wrong: Wrong) -> String {
    let fix = match wrong {
        Wrong::OldCopy => format!(
            "give the directory that is member {i} now in its place, or mount with \
             --take-failed to take this one in as failed and rebuild it in place"
        ),
        Wrong::Other => format!(
            "give member {i}'s directory in its place (--branches lists the members in \
             order), or mount with --take-failed to serve without it and then \
             `raif replace MNT {i} EMPTYDIR`"
        ),
    };
    format!("branch {i} ({}) is {what}: {fix}", p.display())
}

/// How long an open waits for another raif process to let go of a branch: a daemon that is
/// stopping (its mount just unmounted) still writes its markers and removes its intent logs.
const LOCK_WAIT: Duration = Duration::from_secs(10);

/// Takes each branch's lock, an exclusive `flock` of its root directory held while the
/// returned descriptors are open (by a daemon across its fork to the background), so that one
/// raif process at a time serves a volume or works on it offline: a second mount of it, or a
/// scrub or offline rebuild while it is mounted, would each take the other's intent log and
/// markers for those of a crashed mount. Waits up to [`LOCK_WAIT`] for a process that is
/// stopping. A branch that cannot be opened is left to the probe; one whose file system has no
/// `flock` is not locked.
fn lock_branches(paths: &[PathBuf]) -> Result<Vec<OwnedFd>, String> {
    let start = Instant::now();
    let mut held = Vec::with_capacity(paths.len());
    for p in paths {
        let Ok(fd) = sys::open_path(p, libc::O_RDONLY | libc::O_DIRECTORY) else {
            continue;
        };
        let mut said = false;
        loop {
            match sys::flock(fd.as_fd(), libc::LOCK_EX | libc::LOCK_NB) {
                Ok(()) => break,
                Err(e) if e.raw_os_error() == Some(libc::EWOULDBLOCK) => {
                    if start.elapsed() >= LOCK_WAIT {
                        return Err(format!(
                            "branch {} is in use by another raif process (a mount of the \
                             volume, or a scrub or rebuild of it); gave up after {} s",
                            p.display(),
                            LOCK_WAIT.as_secs()
                        ));
                    }
                    if !said && start.elapsed() >= Duration::from_secs(1) {
                        log::warn!(
                            "waiting for another raif process to let go of branch {}",
                            p.display()
                        );
                        said = true;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => {
                    log::debug!("branch {}: not locked: {e}", p.display());
                    break;
                }
            }
        }
        held.push(fd);
    }
    Ok(held)
}

impl BranchSet {
    /// Opens the branches at `paths` (absolute) as one volume; `layers` are their profiling
    /// recorders (or none). With `create`, a set of branches that are all new, empty
    /// directories becomes a new volume (its markers are written). Nothing else is written.
    pub fn open(
        paths: &[PathBuf],
        layers: Vec<Lower>,
        create: bool,
        admit: Admit,
    ) -> Result<BranchSet, String> {
        let n = paths.len();
        if !(2..=MAX_BRANCHES).contains(&n) {
            return Err(format!("need 2 to {MAX_BRANCHES} branches, {n} given"));
        }
        let locks = lock_branches(paths)?;
        let found: Vec<Found> = paths.iter().map(|p| probe(p)).collect();
        let best = found
            .iter()
            .filter_map(|f| match f {
                Found::Marked(_, _, m) => Some(m.as_ref().clone()),
                _ => None,
            })
            .max_by_key(|m| (m.mount, !m.starting, m.epoch));
        let set = BranchSet::unopened(n, locks);
        match best {
            // No marker anywhere: a new volume, if every branch is a new, empty directory.
            None => set.create(paths, found, layers, create),
            Some(best) => set.reopen(paths, found, layers, &best, admit),
        }
    }

    /// A set of `n` branches not opened yet, holding the branches' `locks`.
    fn unopened(n: usize, locks: Vec<OwnedFd>) -> BranchSet {
        BranchSet {
            branches: Box::new([]),
            volume: 0,
            failed: AtomicU64::new(0),
            stale: AtomicU64::new(0),
            rebuilding: AtomicU64::new(0),
            rebuilt: Mutex::new(HashSet::new()),
            swaps: AtomicU64::new(0),
            epoch: AtomicU64::new(1),
            mount: AtomicU64::new(0),
            last_mount: (0..n).map(|_| AtomicU64::new(0)).collect(),
            crashed: AtomicBool::new(false),
            logged: AtomicBool::new(false),
            was_logged: false,
            markers: Mutex::new(()),
            recorded: 0,
            degraded_reads: AtomicU64::new(0),
            checksum_errors: AtomicU64::new(0),
            checksum_repairs: AtomicU64::new(0),
            degraded_writes: AtomicU64::new(0),
            unclean: false,
            created: false,
            _locks: locks,
            reserve: Reserve::new(),
            markers_pending: AtomicBool::new(false),
            gens: (0..n).map(|_| AtomicU64::new(0)).collect(),
            settings: Mutex::new(None),
            take_in: 0,
            errors: Mutex::new(std::collections::VecDeque::new()),
        }
    }

    /// A new volume over `paths`, where nothing carries a marker (`found`): refused unless
    /// every branch is an empty directory and `create` allows it; their markers are written.
    fn create(
        mut self,
        paths: &[PathBuf],
        found: Vec<Found>,
        layers: Vec<Lower>,
        create: bool,
    ) -> Result<BranchSet, String> {
        for (p, f) in paths.iter().zip(&found) {
            match f {
                Found::Unusable(why) => return Err(format!("branch {}: {why}", p.display())),
                Found::Unmarked(_, _, false) => {
                    return Err(format!(
                        "branch {}: not empty and carries no RAIF marker (not a branch of a RAIF volume)",
                        p.display()
                    ));
                }
                _ => {}
            }
        }
        if !create {
            return Err("no branch carries a RAIF marker: not a RAIF volume".into());
        }
        let n = paths.len();
        self.volume = random_u128();
        self.created = true;
        let mut branches = Vec::with_capacity(n);
        for (i, (p, (f, lower))) in paths.iter().zip(found.into_iter().zip(layers)).enumerate() {
            let Found::Unmarked(root, id, _) = f else {
                unreachable!("checked above")
            };
            let m = Marker::new(self.volume, i, n);
            m.write(root.as_fd()).map_err(|e| {
                format!("branch {}: cannot write marker: {}", p.display(), plain(&e))
            })?;
            branches.push(Branch::new(i, p, Some(root), id, lower));
        }
        self.branches = branches.into_boxed_slice();
        Ok(self)
    }

    /// The volume whose highest marker is `best`, over `paths` (`found` there): each branch
    /// online, stale (back after a failure) or failed (see [`judge`]).
    fn reopen(
        mut self,
        paths: &[PathBuf],
        found: Vec<Found>,
        layers: Vec<Lower>,
        best: &Marker,
        admit: Admit,
    ) -> Result<BranchSet, String> {
        let n = paths.len();
        if best.branches != n {
            return Err(format!(
                "the volume has {} branches, {n} given",
                best.branches
            ));
        }
        self.volume = best.volume;
        self.epoch.store(best.epoch, Ordering::Relaxed);
        self.mount.store(best.mount, Ordering::Relaxed);
        // While the highest marker still says `starting`, nothing was served at its number.
        let volume_mount = if best.starting {
            best.mount.saturating_sub(1)
        } else {
            best.mount
        };
        let known_failed = best.failed;
        // Each member's generation: the highest any of its markers records (they only grow).
        for m in found.iter().filter_map(|f| match f {
            Found::Marked(_, _, m) if m.volume == best.volume => Some(m),
            _ => None,
        }) {
            for (g, mg) in self.gens.iter().zip(&m.gens[..n.min(MAX_BRANCHES)]) {
                g.fetch_max(*mg, Ordering::Relaxed);
            }
        }
        *self.settings.lock() = best.settings.clone();
        let (mut failed, mut stale, mut unclean) = (0u64, 0u64, false);
        let mut branches = Vec::with_capacity(n);
        for (i, (p, (f, lower))) in paths.iter().zip(found.into_iter().zip(layers)).enumerate() {
            let recorded = known_failed & (1 << i) != 0;
            let last = if recorded {
                best.failed_mount[i]
            } else {
                volume_mount
            };
            self.last_mount[i].store(last, Ordering::Relaxed);
            let generation = self.gens[i].load(Ordering::Relaxed);
            let j = judge(i, f, best, last, recorded, volume_mount, generation);
            if let (Some(wrong), Some(why)) = (j.wrong, &j.why) {
                match admit {
                    Admit::Refuse => return Err(refusal(i, p, why, wrong)),
                    Admit::AsFailed => {
                        log::warn!("branch {i} ({}) is {why}: taken in as failed", p.display());
                        if wrong == Wrong::OldCopy {
                            self.take_in |= 1 << i;
                        }
                    }
                }
            }
            unclean |= j.unclean;
            let mut health = Health::default();
            if let Some(why) = j.why {
                failed |= 1 << i;
                health.since = Some(SystemTime::now());
                health.reason = why;
            } else if recorded {
                stale |= 1 << i;
                health.reason = format!("missed changes up to epoch {}", best.epoch);
            }
            let b = Branch::new(i, p, j.root, j.id, lower);
            *b.health.lock() = health;
            branches.push(b);
        }
        if failed | stale == all_mask(n) {
            return Err("no branch is online".into());
        }
        // Branches known failed but absent again stay failed, not stale.
        self.failed.store(failed, Ordering::Relaxed);
        self.stale.store(stale, Ordering::Relaxed);
        self.unclean = unclean;
        // Without a log, an unclean stop may have left torn rows anywhere; so it may with a
        // branch missing that was in service at the stop (its log may have named them).
        self.was_logged = best.logged && (failed | stale) & !known_failed == 0;
        self.crashed.store(
            best.crashed || (unclean && !self.was_logged),
            Ordering::Relaxed,
        );
        self.recorded = known_failed;
        self.branches = branches.into_boxed_slice();
        Ok(self)
    }
}
