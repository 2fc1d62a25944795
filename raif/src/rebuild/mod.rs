//! The rebuild engine: makes branch N of the volume again from the other branches, offline
//! ([`offline`], which `raif rebuild --branches ... --replace N NEWDIR` runs, see
//! [`crate::admin`]) or while the volume serves ([`in_mount`], which the mount's
//! [`crate::online`] runs). Both walk the tree of an online branch with one [`Rebuilder`] a
//! pass, made by [`Rebuilder::new`].
//!
//! NEWDIR is either an empty directory (a replacement disk) or branch N itself, back after a
//! failure (stale), or an old copy of branch N (behind the volume's mount count: its files are
//! not trusted at all). The tree of a usable branch is walked; every directory, symlink and
//! special file is made on NEWDIR with the same owner, mode, times and extended attributes
//! (ACLs included); every regular file's part is computed from the other branches (a copy, or
//! the XOR of the rest of each row), except where a stale NEWDIR already has the part at the
//! file's current generation (its owner, mode, times and attributes are copied all the same:
//! cheap, and volumes written before metadata changes raised generations need it). Entries NEWDIR
//! has that the volume does not (removed while it was away) are removed. A RAIF0 part cannot
//! be recovered: the file is kept, the part marked lost in its record (reads of those ranges
//! fail with `EIO`), and listed. Last, NEWDIR gets branch N's marker and the other branches'
//! failure record forgets N.
//!
//! Progress ([`Progress`]) is a bar on a terminal for the offline rebuild, and counters
//! ([`Meter`]) shown in `.raif` for the rebuild while mounted.

mod entry;
mod progress;
#[cfg(test)]
mod tests;

use std::collections::HashSet;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;

use fsprof_fuse::daemon::mount::plain;
use fsprof_fuse::sys;

use crate::branch::{BranchSet, State};
use crate::layout::Meta;
use crate::marker::Marker;
use crate::offline::{Entry, record, roots, walk};
pub use entry::{Mounted, Rebuilder, Tally};
use entry::{reference_dir, remove_extras, to_write};
pub use progress::{Meter, Progress};

/// Whether `newdir` (`root`) may become branch `n` of `bs` though it is not empty: it
/// carries branch `n`'s marker. Empty means holding nothing but RAIF's own files (a sum
/// directory, say, left by the branch's last life: its sum files are rewritten as the parts
/// are rebuilt).
pub fn ours_or_empty(
    bs: &BranchSet,
    n: usize,
    root: &OwnedFd,
    newdir: &Path,
) -> io::Result<(bool, bool)> {
    let ours = Marker::read(root.as_fd())
        .ok()
        .flatten()
        .is_some_and(|m| m.volume == bs.volume() && m.index == n);
    let empty = std::fs::read_dir(newdir)?.filter_map(Result::ok).all(|e| {
        let name = e.file_name();
        let name = name.as_encoded_bytes();
        crate::reserved::is_log_name(name) || crate::reserved::is_sum_dir(name)
    });
    Ok((ours, empty))
}

/// What a pass rebuilding branch `n` (whose root is `target`) walks: the branches it reads
/// from (every other online one), the one whose tree it walks, and every branch's root as
/// [`walk`] takes them.
fn tree(
    bs: &BranchSet,
    n: usize,
    target: OwnedFd,
) -> io::Result<(u64, usize, Vec<Option<OwnedFd>>)> {
    let sources = bs.online_mask() & !(1 << n);
    if sources == 0 {
        return Err(io::Error::other(
            "no other branch is online to rebuild from",
        ));
    }
    let mut dirs = roots(bs, sources);
    dirs[n] = Some(target);
    Ok((sources, sources.trailing_zeros() as usize, dirs))
}

/// Rebuilds branch `n` of the volume `bs` (opened offline, with `newdir` as branch `n`) onto
/// `newdir`; returns what it did. Errors name what failed. Progress is counted in `meter`, or
/// without one drawn as a bar if standard error is a terminal.
pub fn offline(
    bs: &BranchSet,
    n: usize,
    newdir: &Path,
    meter: Option<Arc<Meter>>,
) -> io::Result<Tally> {
    let target = bs.get(n);
    let dir_err = |e: io::Error| {
        io::Error::new(
            e.kind(),
            format!("NEWDIR {}: {}", newdir.display(), plain(&e)),
        )
    };
    // What NEWDIR's files can be trusted for: a stale branch's files at the current generation
    // (it missed only changes that raised generations); nothing on a replacement or on an old
    // copy of the branch (failed at open: it missed whole mounts).
    let (fresh, trust) = match bs.state(n) {
        State::Failed => {
            let root = sys::open_path(newdir, libc::O_PATH | libc::O_DIRECTORY).map_err(dir_err)?;
            let (ours, empty) = ours_or_empty(bs, n, &root, newdir).map_err(dir_err)?;
            if !empty && !ours {
                return Err(io::Error::other(format!(
                    "NEWDIR {}: not empty and not branch {n} of this volume",
                    newdir.display()
                )));
            }
            (empty, false)
        }
        State::Stale | State::Online | State::Rebuilding => (false, true),
    };
    let target_root = if bs.state(n) == State::Failed {
        sys::open_path(newdir, libc::O_PATH | libc::O_DIRECTORY)
    } else {
        target.root().and_then(|r| r.try_clone())
    }
    .map_err(dir_err)?;
    let (sources, reference, dirs) = tree(bs, n, target_root)?;
    let mut seen = HashSet::new();
    let bytes = |e: &Entry| to_write(e, n, trust, sources, &mut seen);
    let progress = match meter {
        Some(m) => Progress::shared(&dirs, reference, bytes, m, 1),
        None => Progress::start("rebuild", &dirs, reference, bytes),
    };
    let r = std::cell::RefCell::new(Rebuilder::new(
        &dirs, n, trust, sources, newdir, progress, None,
    ));
    let mut visit = |e: &Entry| r.borrow_mut().visit(e);
    let mut leave = |e: &Entry| r.borrow_mut().leave(e);
    let walked = walk(&dirs, reference, &mut visit, &mut leave);
    r.borrow().progress.finish();
    walked.map_err(|e| io::Error::new(e.kind(), format!("rebuild stopped: {}", plain(&e))))?;
    let mut t = r.into_inner().t;
    if !fresh {
        t.removed += remove_extras(&dirs, reference, n).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("removing what branch {n} should not have: {}", plain(&e)),
            )
        })?;
    }
    bs.record_rebuilt(n, dirs[n].as_ref().expect("target").as_fd(), true)
        .map_err(|e| io::Error::new(e.kind(), format!("writing markers: {}", plain(&e))))?;
    Ok(t)
}

/// Passes of a rebuild while mounted with the gate taken per entry, before the last one, which
/// holds it for the whole walk.
const MOUNTED_PASSES: u64 = 4;

/// `Ok` while branch `n` is still being rebuilt (a write through the mount may have failed it
/// meanwhile: then it must not go online).
fn still_rebuilding(bs: &BranchSet, n: usize) -> io::Result<()> {
    if bs.state(n) == State::Rebuilding {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "branch {n} is {} now",
            bs.state(n).name()
        )))
    }
}

/// Whether `e` says the entry went away while the walk was at it (removed or renamed by the
/// mount meanwhile): the next pass sees the tree as it is then.
fn vanished(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOENT | libc::ESTALE | libc::ENOTEMPTY)
    )
}

/// Rebuilds branch `n` of a mounted volume onto `newdir` (already made branch `n`, rebuilding;
/// see [`crate::online`]): passes until one finds nothing to do, then a last one with no
/// request served, after which the branch is online. `trust`: parts already at their file's
/// generation are kept. Returns the summary.
pub fn in_mount(
    live: &Arc<dyn Mounted>,
    n: usize,
    newdir: &Path,
    trust: bool,
) -> io::Result<String> {
    let bs = live.branches();
    let mut total = Tally::default();
    let (mut pass, mut ran) = (0, 0);
    loop {
        pass += 1;
        ran += 1;
        let (sources, reference, dirs) = tree(bs, n, bs.get(n).root()?.try_clone()?)?;
        let last = pass >= MOUNTED_PASSES;
        // The last pass: nothing changes between it and the branch going online.
        let whole = last.then(|| live.quiesce());
        let mut seen = HashSet::new();
        let progress = Progress::shared(
            &dirs,
            reference,
            |e| {
                let joined = reference_dir(e, sources)
                    .and_then(|d| record(d, e.name))
                    .is_some_and(|m| matches!(m, Meta::File(f) if bs.is_joined(f.id)));
                if joined {
                    0
                } else {
                    to_write(e, n, trust, sources, &mut seen)
                }
            },
            live.meter(),
            ran,
        );
        let r = std::cell::RefCell::new(Rebuilder::new(
            &dirs,
            n,
            trust,
            sources,
            newdir,
            progress,
            Some(live.clone()),
        ));
        let again = std::cell::Cell::new(false);
        let step = |f: &mut dyn FnMut(&mut Rebuilder) -> io::Result<()>| -> io::Result<()> {
            if live.stopping() {
                return Err(io::Error::other("the mount is stopping"));
            }
            let _g = whole.is_none().then(|| live.quiesce());
            still_rebuilding(bs, n)?;
            live.settle_sums();
            match f(&mut r.borrow_mut()) {
                Err(e) if vanished(&e) => {
                    again.set(true);
                    Ok(())
                }
                other => other,
            }
        };
        walk(
            &dirs,
            reference,
            &mut |e| step(&mut |r| r.visit(e)),
            &mut |e| step(&mut |r| r.leave(e)),
        )?;
        let removed = {
            let _g = whole.is_none().then(|| live.quiesce());
            remove_extras(&dirs, reference, n)?
        };
        let t = r.into_inner().t;
        let busy = t.files > 0 || removed > 0 || again.get();
        total.files += t.files;
        total.bytes += t.bytes;
        total.removed += removed;
        total.lost.extend(t.lost);
        if ran == 1 {
            total.kept = t.kept;
        }
        if last {
            total.dirs = t.dirs;
            total.links = t.links;
            still_rebuilding(bs, n)?;
            bs.finish_rebuild(n)?;
            drop(whole);
            break;
        }
        if !busy {
            // Quiet: the last pass only checks.
            pass = MOUNTED_PASSES - 1;
        }
    }
    let mut s = format!(
        "rebuilt branch {n} at {} while mounted in {ran} passes: {} files ({} bytes written, \
         {} already current), {} directories, {} hard links, {} stale entries removed; online",
        newdir.display(),
        total.files,
        total.bytes,
        total.kept,
        total.dirs,
        total.links,
        total.removed
    );
    if !total.lost.is_empty() {
        s.push_str(&format!(
            "; {} files could not be restored (their part on branch {n} reads as an I/O error): {}",
            total.lost.len(),
            total.lost.join(", ")
        ));
    }
    Ok(s)
}
