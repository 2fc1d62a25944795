//! The replay at mount of what the logs name (see [`crate::intent`]), before the volume is
//! served.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

use fsprof_fuse::sys;

use super::record::{Body, Record};
use crate::branch::BranchSet;
use crate::layout::{Layout, Level, Meta, XATTR};
use crate::part_io::{self, Parts, Plain};
use crate::reserved::{LOG_KEPT as KEPT, LOG_KEPT_TMP as KEPT_TMP, LOGS};
use crate::stripe;

/// What [`replay`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Replayed {
    /// Files resynchronised.
    pub files: u64,
    /// Regions resynchronised.
    pub regions: u64,
    /// Rows whose parity partial-parity entries rebuilt.
    pub parity: u64,
    /// Entries kept for a mount with every branch (they need the one missing).
    pub deferred: u64,
    /// Entries of files that no longer exist.
    pub gone: u64,
    /// The files the log named (being written at the stop).
    pub ids: Vec<u64>,
    /// The highest sequence number read: the next mount's entries are numbered after it, so
    /// that an entry kept for later never counts as later than theirs.
    pub last_seq: u64,
}

/// Reads the log of every online branch of `bs`.
pub fn read_logs(bs: &BranchSet) -> Vec<Record> {
    let mut all = Vec::new();
    for b in bs.iter() {
        if bs.online_mask() & (1 << b.index) == 0 {
            continue;
        }
        let Ok(root) = b.root() else { continue };
        for name in [LOGS[0], LOGS[1], KEPT] {
            let fd = match sys::openat(
                root.as_fd(),
                OsStr::new(name),
                libc::O_RDONLY | libc::O_NOFOLLOW,
                0,
            ) {
                Ok(fd) => fd,
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => continue,
                Err(e) => {
                    log::warn!("branch {}: cannot read its intent log: {e}", b.index);
                    continue;
                }
            };
            let mut text = Vec::new();
            if let Err(e) = std::io::Read::read_to_end(&mut std::fs::File::from(fd), &mut text) {
                log::warn!("branch {}: cannot read its intent log: {e}", b.index);
                continue;
            }
            all.extend(Record::decode_all(&text));
        }
    }
    all.sort_by_key(|r| r.seq);
    all
}

/// Work on one file found in the logs.
struct FileWork {
    path: Vec<u8>,
    regions: Vec<(u64, u64)>,
    parity: Vec<Record>,
    records: Vec<Record>,
}

/// Resynchronises what the logs of `bs` name (see the module docs), then empties the logs but
/// for the entries that need a missing branch. Call before the volume is served. With `gain`
/// (checksums on), a part that keeps no checksums gains them over its logged regions: a new
/// file's reach its home part only when it is synced or released (or by a clearing cycle),
/// so one written just before the stop has none, and would stay without them for good.
pub fn replay(bs: &BranchSet, gain: bool) -> Replayed {
    let records = read_logs(bs);
    let mut out = Replayed {
        last_seq: records.iter().map(|r| r.seq).max().unwrap_or(0),
        ..Replayed::default()
    };
    let mut files: BTreeMap<u64, FileWork> = BTreeMap::new();
    for r in records {
        let f = files.entry(r.id).or_insert_with(|| FileWork {
            path: Vec::new(),
            regions: Vec::new(),
            parity: Vec::new(),
            records: Vec::new(),
        });
        f.path = r.path.clone();
        match &r.body {
            Body::Region { start, end } => {
                // A region is logged again when a write must wait for its entry.
                if !f.regions.contains(&(*start, *end)) {
                    f.regions.push((*start, *end));
                }
            }
            Body::Parity { .. } | Body::Zeros { .. } => f.parity.push(r.clone()),
        }
        f.records.push(r);
    }
    let mut deferred: Vec<Record> = Vec::new();
    let mut unresolved: Vec<u64> = Vec::new();
    let roots: Vec<Option<OwnedFd>> = bs
        .iter()
        .map(|b| {
            (bs.online_mask() & (1 << b.index) != 0)
                .then(|| b.root().ok()?.try_clone().ok())
                .flatten()
        })
        .collect();
    let sum_dirs = crate::sums::open_dirs(&roots, false);
    for (&id, f) in &files {
        match replay_file(bs, &roots, &sum_dirs, gain, id, f, &mut out) {
            Ok(true) => {}
            Ok(false) => unresolved.push(id),
            Err(e) => {
                log::warn!(
                    "{}: cannot resynchronise after the unclean stop: {e}; kept for the next mount",
                    String::from_utf8_lossy(&f.path)
                );
                deferred.extend(f.records.iter().cloned());
            }
        }
    }
    if !unresolved.is_empty() {
        // Renamed since its entries were made: found by its identity.
        let found = find_ids(&roots, &unresolved);
        for id in unresolved {
            let f = files.get_mut(&id).expect("listed");
            match found.get(&id) {
                Some(p) => {
                    f.path = p.clone();
                    match replay_file(bs, &roots, &sum_dirs, gain, id, f, &mut out) {
                        Ok(true) => {}
                        Ok(false) => out.gone += 1,
                        Err(e) => {
                            log::warn!(
                                "{}: cannot resynchronise after the unclean stop: {e}",
                                String::from_utf8_lossy(&f.path)
                            );
                            deferred.extend(f.records.iter().cloned());
                        }
                    }
                }
                None => out.gone += 1,
            }
        }
    }
    out.deferred = deferred.len() as u64;
    out.ids = files.keys().copied().collect();
    rewrite_logs(bs, &deferred);
    out
}

/// Writes `keep` as the kept entries of every online branch (each replaced whole), then
/// empties their logs.
fn rewrite_logs(bs: &BranchSet, keep: &[Record]) {
    let bytes: Vec<u8> = keep
        .iter()
        .flat_map(|r| Record::append(std::slice::from_ref(r)))
        .collect();
    for b in bs.iter() {
        if bs.online_mask() & (1 << b.index) == 0 {
            continue;
        }
        let Ok(root) = b.root() else { continue };
        let root = root.as_fd();
        let r = if keep.is_empty() {
            match sys::unlinkat(root, OsStr::new(KEPT), false) {
                Err(e) if e.raw_os_error() != Some(libc::ENOENT) => Err(e),
                _ => Ok(()),
            }
        } else {
            sys::openat(
                root,
                OsStr::new(KEPT_TMP),
                libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                0o600,
            )
            .and_then(|fd| {
                part_io::write_full(&Plain(fd.as_fd()), 0, &bytes, 0)?;
                sys::fsync(fd.as_fd(), true)?;
                sys::renameat2(root, OsStr::new(KEPT_TMP), root, OsStr::new(KEPT), 0)
            })
        };
        if let Err(e) = r {
            log::warn!("branch {}: cannot keep intent log entries: {e}", b.index);
            continue; // its logs still hold them
        }
        for name in LOGS {
            match sys::openat(root, OsStr::new(name), libc::O_WRONLY | libc::O_NOFOLLOW, 0) {
                Ok(fd) => {
                    if let Err(e) = sys::ftruncate(fd.as_fd(), 0) {
                        log::warn!("branch {}: cannot clear its intent log: {e}", b.index);
                    }
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
                Err(e) => log::warn!("branch {}: cannot clear its intent log: {e}", b.index),
            }
        }
    }
}

/// The directory holding `path` (relative to the volume root) on each branch of `roots`, and
/// the file's name; directories are opened one component at a time, never following a
/// symlink.
fn parents(roots: &[Option<OwnedFd>], path: &[u8]) -> Option<(Vec<Option<OwnedFd>>, OsString)> {
    let comps: Vec<&[u8]> = path
        .split(|&c| c == b'/')
        .filter(|c| !c.is_empty())
        .collect();
    let (name, dirs) = comps.split_last()?;
    let opened = roots
        .iter()
        .map(|r| {
            let mut cur = r.as_ref()?.try_clone().ok()?;
            for d in dirs {
                cur = sys::openat(
                    cur.as_fd(),
                    OsStr::from_bytes(d),
                    libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
                    0,
                )
                .ok()?;
            }
            Some(cur)
        })
        .collect();
    Some((opened, OsStr::from_bytes(name).to_os_string()))
}

/// Resynchronises the file `id` as `f` says. `Ok(false)`: not at its path (renamed or gone).
fn replay_file(
    bs: &BranchSet,
    roots: &[Option<OwnedFd>],
    sum_dirs: &[Option<OwnedFd>],
    gain: bool,
    id: u64,
    f: &FileWork,
    out: &mut Replayed,
) -> io::Result<bool> {
    let Some((dirs, name)) = parents(roots, &f.path) else {
        return Ok(false);
    };
    let meta = dirs.iter().flatten().find_map(|d| {
        let mut buf = [0u8; crate::layout::ATTR_MAX];
        let n = sys::getxattr_at(d.as_fd(), &name, OsStr::new(XATTR), &mut buf).ok()?;
        match Meta::decode(&buf[..n]) {
            Some(Meta::File(m)) if m.id == id => Some(m),
            _ => None,
        }
    });
    let Some(mut meta) = meta else {
        return Ok(false);
    };
    let l = meta.layout;
    let parts = crate::offline::AdminParts::open(&dirs, &name, bs.online_mask(), libc::O_RDWR)
        .with_sums(sum_dirs, id, &l, true, gain);
    parts.stale.set(meta.parity_stale);
    // Parts the record says are out of date for the file are not used.
    parts.down.set(meta.lost);
    let holders: Vec<usize> = (0..l.width as usize).filter(|&b| l.holds(b)).collect();
    let whole = holders.iter().all(|&b| parts.usable(b));
    let lens: Vec<Option<u64>> = (0..l.width as usize)
        .map(|b| {
            let fd = parts.fds[b].as_ref().filter(|_| parts.usable(b))?;
            Some(sys::fstat(fd.as_fd()).ok()?.size)
        })
        .collect();
    let size = if l.level.striped() {
        meta.size.max(l.implied_size(&lens))
    } else {
        holders.iter().filter_map(|&b| lens[b]).max().unwrap_or(0)
    };
    out.files += 1;
    if whole {
        for &(start, end) in &f.regions {
            resync(&l, size, &parts, start, end.min(size))?;
            resum_region(&l, size, &parts, start, end.min(size))?;
            out.regions += 1;
        }
        if l.level.striped() && size != meta.size {
            // An append the crash kept from being recorded: the data is what was written.
            stripe::truncate(&l, u64::MAX, size, &parts)?;
        }
    } else {
        // Each byte of a row's parity is rebuilt from the latest entry that covers it: an
        // earlier entry's partial parity holds the row's other units as they were before the
        // later write (a write of the unit that lives only in the parity, whose own entry
        // rebuilds nothing, would get its old bytes back; a punch, its bytes from before the
        // punch). `taken`: per row, the unit offsets later partial parity covers; `zeroed`:
        // the rows later zeroing entries cover whole.
        let mut taken: BTreeMap<u64, Vec<(u64, u64)>> = BTreeMap::new();
        let mut zeroed: Vec<(u64, u64)> = Vec::new();
        let su = l.stripe as u64;
        for r in f.parity.iter().rev() {
            match &r.body {
                Body::Parity { row, col, a, pp } => {
                    if zeroed.iter().any(|&(s, e)| (s..e).contains(row)) {
                        continue;
                    }
                    let end = a + pp.len() as u64;
                    let row_taken = taken.entry(*row).or_default();
                    for (s, e) in uncovered(row_taken, *a, end) {
                        let piece = &pp[(s - a) as usize..(e - a) as usize];
                        rebuild_parity(&l, &parts, *row, *col as usize, s, piece)?;
                    }
                    row_taken.push((*a, end));
                }
                Body::Zeros { first, end } => {
                    for (s, e) in uncovered(&zeroed, *first, *end) {
                        // Rows some later entry wrote part of: only the rest of them.
                        let mut row = s;
                        for (&t, spans) in taken.range(s..e) {
                            zero_units(&l, &parts, row * su, t * su)?;
                            for (a, b) in uncovered(spans, 0, su) {
                                zero_units(&l, &parts, t * su + a, t * su + b)?;
                            }
                            row = t + 1;
                        }
                        zero_units(&l, &parts, row * su, e * su)?;
                    }
                    zeroed.push((*first, *end));
                }
                Body::Region { .. } => continue,
            }
            out.parity += 1;
        }
        // Then the checksums of what each entry's write (and the rebuilds) may have changed
        // (those of zeroed units are recomputed as they are zeroed).
        for r in &f.parity {
            let Body::Parity { row, col, a, pp } = &r.body else {
                continue;
            };
            let off = row * l.stripe as u64 + a;
            for b in [l.data_branch(*row, *col as usize)]
                .into_iter()
                .chain(l.parity_branch(*row))
                .filter(|&b| parts.usable(b))
            {
                crate::sums::resum(&parts, b, off, pp.len() as u64)?;
            }
        }
        if !f.regions.is_empty() && f.parity.is_empty() {
            return Err(io::Error::other(
                "a branch holding part of it is missing, and nothing was logged to rebuild \
                 its rows without it",
            ));
        }
    }
    if l.level.striped() && size != meta.size {
        meta.size = size;
        for fd in parts.fds.iter().flatten() {
            crate::offline::write_record(fd.as_fd(), &Meta::File(meta))?;
        }
    }
    Ok(true)
}

/// Recomputes the block checksums of every part over the logical range `[start, end)` of a
/// file of `size` bytes (the rows or copies a crash may have torn, just resynchronised): the
/// data is what was written, its checksum entries may not have been.
pub fn resum_region(l: &Layout, size: u64, p: &impl Parts, start: u64, end: u64) -> io::Result<()> {
    if end <= start {
        return Ok(());
    }
    let (lo, hi) = if l.level.striped() {
        let (rb, su) = (l.row_bytes(), l.stripe as u64);
        (start / rb * su, end.div_ceil(rb) * su)
    } else {
        (start, end)
    };
    for b in (0..l.width as usize).filter(|&b| l.holds(b) && p.usable(b)) {
        let hi = hi.min(l.part_size(b, size));
        if hi > lo {
            crate::sums::resum(p, b, lo, hi - lo)?;
        }
    }
    Ok(())
}

/// Makes the rows (RAIF4/5) or copies (RAIF1) over `[start, end)` of a file of `size` bytes
/// agree: parity recomputed from the data units, copies made equal to the first holder's.
pub fn resync(l: &Layout, size: u64, p: &impl Parts, start: u64, end: u64) -> io::Result<()> {
    if end <= start {
        return Ok(());
    }
    match l.level {
        Level::Raif0 => Ok(()),
        Level::Raif4 | Level::Raif5 => {
            let rb = l.row_bytes();
            stripe::resync_rows(l, size, p, start / rb, end.div_ceil(rb))
        }
        Level::Raif1 => {
            let holders: Vec<usize> = (0..l.width as usize)
                .filter(|&b| l.holds(b) && p.usable(b))
                .collect();
            let Some((&reference, others)) = holders.split_first() else {
                return Ok(());
            };
            let mut want = vec![0u8; (end - start).min(1 << 20) as usize];
            let mut off = start;
            while off < end {
                let n = ((end - off) as usize).min(want.len());
                part_io::read_full(p, reference, &mut want[..n], off)?;
                for &b in others {
                    part_io::rewrite_differing(p, b, &want[..n], off)?;
                }
                off += n as u64;
            }
            for &b in others {
                p.truncate(b, size)?;
            }
            p.truncate(reference, size)
        }
    }
}

/// The parts of `[a, b)` that no range of `taken` covers, in order.
fn uncovered(taken: &[(u64, u64)], a: u64, b: u64) -> Vec<(u64, u64)> {
    let mut out = vec![(a, b)];
    for &(s, e) in taken {
        out = out
            .into_iter()
            .flat_map(|(x, y)| {
                if s >= y || e <= x {
                    vec![(x, y)]
                } else {
                    [(x, s.max(x)), (e.min(y), y)]
                        .into_iter()
                        .filter(|(p, q)| p < q)
                        .collect()
                }
            })
            .collect();
    }
    out
}

/// Makes part offsets `[lo, hi)` of every usable part of a RAIF4/5 file zeros (the units and
/// parity of the rows there, as a punch left them), without growing a part (past its end it
/// reads as zeros already), and recomputes their checksums.
fn zero_units(l: &Layout, p: &impl Parts, lo: u64, hi: u64) -> io::Result<()> {
    static ZEROS: [u8; 64 << 10] = [0; 64 << 10];
    for b in (0..l.width as usize).filter(|&b| l.holds(b) && p.usable(b)) {
        let mut off = lo;
        while off < hi {
            let n = ((hi - off) as usize).min(ZEROS.len());
            part_io::rewrite_differing(p, b, &ZEROS[..n], off)?;
            off += n as u64;
        }
        if hi > lo {
            crate::sums::resum(p, b, lo, hi - lo)?;
        }
    }
    Ok(())
}

/// Rebuilds the parity of `row` over `[a, a + pp.len())` from a partial-parity entry: the XOR
/// of the row's other units `pp` and column `col` as it now is.
fn rebuild_parity(
    l: &Layout,
    p: &impl Parts,
    row: u64,
    col: usize,
    a: u64,
    pp: &[u8],
) -> io::Result<()> {
    let Some(pb) = l.parity_branch(row) else {
        return Ok(());
    };
    let db = l.data_branch(row, col);
    if !p.usable(pb) || !p.usable(db) {
        return Ok(()); // the parity is gone, or the unit lives in it alone: nothing torn
    }
    let off = row * l.stripe as u64 + a;
    let mut par = vec![0u8; pp.len()];
    part_io::read_full(p, db, &mut par, off)?;
    part_io::xor_into(&mut par, pp);
    part_io::write_full(p, pb, &par, off)
}

/// Paths of the files with identities `ids`, found by walking the first online branch.
fn find_ids(roots: &[Option<OwnedFd>], ids: &[u64]) -> BTreeMap<u64, Vec<u8>> {
    let mut found = BTreeMap::new();
    let Some(reference) = roots.iter().position(Option::is_some) else {
        return found;
    };
    let mut visit = |e: &crate::offline::Entry| {
        if e.st.mode & libc::S_IFMT == libc::S_IFREG {
            let d = e.dirs[reference].as_ref().expect("reference").as_fd();
            if let Some(Meta::File(m)) = crate::offline::record(d, e.name) {
                if ids.contains(&m.id) {
                    found.insert(m.id, e.path.as_os_str().as_bytes().to_vec());
                }
            }
        }
        Ok(())
    };
    let _ = crate::offline::walk(roots, reference, &mut visit, &mut |_| Ok(()));
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uncovered_leaves_what_no_later_entry_took() {
        assert_eq!(uncovered(&[], 0, 10), vec![(0, 10)]);
        assert_eq!(uncovered(&[(3, 5)], 0, 10), vec![(0, 3), (5, 10)]);
        assert_eq!(uncovered(&[(0, 4), (6, 20)], 0, 10), vec![(4, 6)]);
        assert_eq!(uncovered(&[(0, 10)], 2, 8), Vec::<(u64, u64)>::new());
        assert_eq!(uncovered(&[(10, 12)], 0, 10), vec![(0, 10)]);
        assert_eq!(uncovered(&[(8, 12), (0, 1)], 0, 10), vec![(1, 8)]);
    }
}
