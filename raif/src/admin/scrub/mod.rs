//! `raif scrub --branches ... [--repair]`: verifies every mirror copy and every parity block.
//!
//! For each entry of the tree: it must exist on every online branch with the same type, owner,
//! mode and extended attributes (ACLs included); a regular file's record must agree across its
//! parts and no part may be longer than its layout says. RAIF1 copies are compared chunk by
//! chunk; for RAIF4/5 every row's units and parity must XOR to zero (a row that does not is
//! what a crash between a data write and its parity write leaves: the write hole). Each
//! mismatch is reported with the path, the logical offset and the branch and offset in its
//! part.
//!
//! Which side is wrong? Scrub repairs only on evidence, and otherwise reports the mismatch as
//! *ambiguous* and leaves it (exit code 1): rewriting the good copy with the bad one would be
//! worse than doing nothing. The evidence, strongest first:
//!
//! * RAIF1 with three or more copies: a strict majority of the copies agree.
//! * One part's modification time stands out: RAIF gives all parts (and copies) of a file the
//!   same time when it is closed after a write, so a part changed behind RAIF's back (a write
//!   that reached it and not the others, or a change made with ordinary tools) is newer than
//!   the rest, which agree.
//!
//! An unclean stop is no evidence. A volume that keeps a write-intent log ([`crate::intent`])
//! resynchronised the rows being written at the next mount, so a crash leaves no mismatch
//! behind. On one that kept none, the markers say when the volume stopped uncleanly since its
//! last complete `scrub --repair`, but not which rows were being written, so a row torn by the
//! crash cannot be told from one corrupted later (and recomputing a parity over a corrupted
//! data unit would make the corruption permanent). Scrub says so in its report and decides
//! nothing from it.
//!
//! Block checksums ([`crate::sums`]) decide first: every block of every part that has them is
//! verified; a block that fails is rebuilt from the other copies or the rest of its row (whose
//! blocks check out) and, with `--repair`, rewritten; one that agrees with them has a wrong
//! entry, which is rewritten. The copy and parity passes then skip what that reported.
//!
//! Bit rot in a file without checksums leaves the time alone: in a volume with two copies, or
//! in a RAIF4/5 row, it is reported as ambiguous, naming every branch that could hold the bad
//! byte, and not repaired. `--add-checksums` gives such files checksums once they are found
//! consistent; sum files whose file is gone are reported (removed with `--repair`).
//!
//! Data that a file's checksums should cover and do not is reported as *unprotected* (not a
//! mismatch: nothing is known to be wrong): a part that keeps no checksums while the file's
//! other parts do, and blocks holding data whose entries are unknown. Both follow from an
//! attribute removed or cut behind RAIF's back, or from writes made while the home branch of
//! the entries was unusable; `--add-checksums` gives them theirs once the file is found
//! consistent.
//!
//! Owner, mode and extended attributes are compared with the lowest-numbered online branch's,
//! which namespace and attribute changes reach first, and `--repair` copies them from it.

mod blocks;

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;

use fsprof_fuse::daemon::mount::{SetupError, plain, setup_err};
use fsprof_fuse::sys::{self, SetTime};

use super::open_volume;
use crate::branch::{State, check_branches};
use crate::layout::{FileMeta, Layout, Level, Meta};
use crate::offline::{
    AdminParts, Entry, copy_attrs, decided, majority, object, record, roots, stat_opt, walk,
    write_record, xattrs,
};
use crate::part_io::{self, BadBlock, Parts};
use crate::part_io::{next_data_any, xor_into};
use crate::rebuild::Progress;
use crate::stripe;
use crate::sums;

/// Compared per step (RAIF1).
const CHUNK: usize = 1 << 20;

struct Scrubber {
    /// Each branch's sum directory.
    sum_dirs: Vec<Option<OwnedFd>>,
    /// Record ids of the files walked (their sum files are not orphans).
    seen: RefCell<HashSet<u64>>,
    /// Give checksums to files that have none.
    add: bool,
    added: Cell<u64>,
    /// Files with data not covered by their checksums (see [`Scrubber::protection`]).
    unprotected: Cell<u64>,
    /// The current file's blocks that failed their checksum (the copy and parity passes do
    /// not report them again).
    flagged: RefCell<Vec<BadBlock>>,
    online: u64,
    /// The branch the tree is walked on (the lowest-numbered online one).
    reference: usize,
    repair: bool,
    /// The volume stopped uncleanly since its last complete scrub --repair (said in the
    /// report, not taken as evidence).
    crashed: bool,
    files: Cell<u64>,
    dirs: Cell<u64>,
    /// Bytes read from the parts' data.
    bytes: Cell<u64>,
    /// Bytes of data the parts hold (their holes left out).
    stored: Cell<u64>,
    found: Cell<u64>,
    fixed: Cell<u64>,
    ambiguous: Cell<u64>,
    /// Bytes of file data that could not be verified against their redundancy (a copy or
    /// parity out of service or missing), and the files holding them.
    unverified: Cell<u64>,
    unverified_files: Cell<u64>,
    progress: Progress,
}

impl Scrubber {
    /// `n` more bytes of the parts done (for the progress shown; what was read from their
    /// data is counted by the parts).
    fn read(&self, n: u64) {
        self.progress.bytes(n);
    }

    fn report(&self, path: &std::path::Path, what: &str, repaired: bool) {
        self.found.set(self.found.get() + 1);
        if repaired {
            self.fixed.set(self.fixed.get() + 1);
        }
        self.progress.println(&format!(
            "mismatch {}: {what}{}",
            path.display(),
            if repaired { " [repaired]" } else { "" }
        ));
    }

    /// Said of an ambiguous mismatch in a volume that stopped uncleanly: what it may also be.
    fn crash_note(&self) -> &'static str {
        if self.crashed {
            "; the volume stopped uncleanly, so it may be a write the stop cut short, or not"
        } else {
            ""
        }
    }

    /// A mismatch without evidence of which side is right: reported, never repaired.
    fn report_ambiguous(&self, path: &std::path::Path, what: &str) {
        self.found.set(self.found.get() + 1);
        self.ambiguous.set(self.ambiguous.get() + 1);
        self.progress.println(&format!(
            "mismatch {}: {what} [ambiguous: not repaired]",
            path.display()
        ));
    }

    fn visit(&self, e: &Entry) -> io::Result<()> {
        let kind = e.st.mode & libc::S_IFMT;
        for (b, d) in e.dirs.iter().enumerate() {
            if self.online & (1 << b) == 0 {
                continue;
            }
            let Some(d) = d else {
                self.report(
                    e.path,
                    &format!("missing on branch {b} (its directory is)"),
                    false,
                );
                continue;
            };
            match stat_opt(d.as_fd(), e.name)? {
                None => self.report(e.path, &format!("missing on branch {b}"), false),
                Some(st) if st.mode & libc::S_IFMT != kind => {
                    self.report(e.path, &format!("another file type on branch {b}"), false)
                }
                Some(st) if b != self.reference => self.attributes(e, b, &st)?,
                Some(_) => {}
            }
        }
        match kind {
            libc::S_IFDIR => self.dirs.set(self.dirs.get() + 1),
            libc::S_IFREG => {
                self.file(e)?;
                self.progress.file_done(self.files.get());
            }
            _ => {}
        }
        Ok(())
    }

    /// Owner, mode and extended attributes of `e` on branch `b` (`st`) against the
    /// reference's.
    fn attributes(&self, e: &Entry, b: usize, st: &sys::Stat) -> io::Result<()> {
        let symlink = e.st.mode & libc::S_IFMT == libc::S_IFLNK;
        let mut diff = Vec::new();
        if (st.uid, st.gid) != (e.st.uid, e.st.gid) {
            diff.push(format!(
                "owner {}:{} (not {}:{})",
                st.uid, st.gid, e.st.uid, e.st.gid
            ));
        }
        if !symlink && st.mode & 0o7777 != e.st.mode & 0o7777 {
            diff.push(format!(
                "mode {:o} (not {:o})",
                st.mode & 0o7777,
                e.st.mode & 0o7777
            ));
        }
        let rdir = e.dirs[self.reference].as_ref().expect("reference").as_fd();
        let bdir = e.dirs[b].as_ref().expect("checked").as_fd();
        let (r, o) = (object(rdir, e.name)?, object(bdir, e.name)?);
        if !symlink {
            let (want, have) = (xattrs(r.as_fd())?, xattrs(o.as_fd())?);
            let mut names: Vec<String> = want
                .iter()
                .chain(&have)
                .filter(|(n, v)| {
                    want.iter().find(|(w, _)| w == n).map(|x| &x.1) != Some(v)
                        || have.iter().find(|(h, _)| h == n).map(|x| &x.1) != Some(v)
                })
                .map(|(n, _)| n.to_string_lossy().into_owned())
                .collect();
            names.sort();
            names.dedup();
            if !names.is_empty() {
                diff.push(format!("extended attributes {}", names.join(", ")));
            }
        }
        if diff.is_empty() {
            return Ok(());
        }
        let fix = self.repair
            && copy_attrs(o.as_fd(), &e.st, (!symlink).then_some(r.as_fd()), false).is_ok();
        self.report(
            e.path,
            &format!(
                "{} on branch {b} differ from branch {}'s",
                diff.join("; "),
                self.reference
            ),
            fix,
        );
        Ok(())
    }

    fn file(&self, e: &Entry) -> io::Result<()> {
        self.files.set(self.files.get() + 1);
        let flags = if self.repair {
            libc::O_RDWR
        } else {
            libc::O_RDONLY
        };
        let parts = AdminParts::open(e.dirs, e.name, self.online, flags).counting();
        // The records of every part: the one a strict majority of them hold is the file's, and
        // the others are repaired to it. Without a majority nothing says which is right (one
        // bad record must not be copied over good ones), but for a generation (below), and the
        // data is not checked under a layout that may be wrong.
        let records: Vec<(usize, Option<Meta>)> = e
            .dirs
            .iter()
            .enumerate()
            .filter_map(|(b, d)| {
                let d = d.as_ref().filter(|_| parts.fds[b].is_some())?;
                Some((b, record(d.as_fd(), e.name)))
            })
            .collect();
        if records.is_empty() {
            return Ok(());
        }
        for (_, r) in &records {
            if let Some(Meta::File(m)) = r {
                // Sum files of an id some branch records are not orphans.
                self.seen.borrow_mut().insert(m.id);
            }
        }
        let held: Vec<&Option<Meta>> = records.iter().map(|(_, r)| r).collect();
        // Records differing in the generation alone take the newest, as the mount and the
        // rebuild do (a crash while a degraded write raised it).
        let majority = decided(&held);
        let Some(meta) = majority else {
            let held: Vec<String> = records
                .iter()
                .map(|(b, r)| match r {
                    Some(Meta::File(m)) => format!("branch {b} id {:x} size {}", m.id, m.size),
                    Some(_) => format!("branch {b} not a file's"),
                    None => format!("branch {b} none or unreadable"),
                })
                .collect();
            self.report_ambiguous(
                e.path,
                &format!(
                    "its RAIF records disagree and no majority agrees ({})",
                    held.join(", ")
                ),
            );
            return Ok(());
        };
        for (b, r) in &records {
            if *r != Some(Meta::File(meta)) {
                let fix = self.repair
                    && write_record(
                        parts.fds[*b].as_ref().expect("open").as_fd(),
                        &Meta::File(meta),
                    )
                    .is_ok();
                let what = match r {
                    None => format!("record on branch {b} missing or unreadable"),
                    Some(m) => format!(
                        "record on branch {b} differs from the other branches' ({:?} there, {:?} on the others)",
                        String::from_utf8_lossy(m.encode().as_bytes()),
                        String::from_utf8_lossy(Meta::File(meta).encode().as_bytes()),
                    ),
                };
                self.report(e.path, &what, fix);
            }
        }
        let l = meta.layout;
        let parts = parts.with_sums(&self.sum_dirs, meta.id, &l, self.repair, false);
        let size = if l.level.striped() {
            // Data written past the recorded end: the size was not recorded (a crash before
            // the close); keep the data, record the size the parts imply.
            let lens: Vec<Option<u64>> = parts
                .fds
                .iter()
                .map(|fd| Some(sys::fstat(fd.as_ref()?.as_fd()).ok()?.size))
                .collect();
            let implied = l.implied_size(&lens);
            if implied > meta.size && (0..l.width as usize).all(|b| parts.fds[b].is_some()) {
                let grown = Meta::File(FileMeta {
                    size: implied,
                    ..meta
                });
                let fix = self.repair
                    && parts
                        .fds
                        .iter()
                        .flatten()
                        .all(|fd| write_record(fd.as_fd(), &grown).is_ok());
                self.report(
                    e.path,
                    &format!(
                        "recorded size {} but the parts hold data up to offset {implied}",
                        meta.size
                    ),
                    fix,
                );
                implied
            } else {
                meta.size
            }
        } else {
            // From a copy that is not out of date.
            (0..l.width as usize)
                .filter(|&b| l.holds(b) && meta.lost & (1 << b) == 0)
                .find_map(|b| sys::fstat(parts.fds[b].as_ref()?.as_fd()).ok())
                .map_or(0, |st| st.size)
        };
        self.part_lengths(e, &parts, &meta, size)?;
        let meta = self.out_of_date(e, &parts, meta, size)?;
        self.flagged.borrow_mut().clear();
        let found = self.found.get() - self.fixed.get();
        // One read of each part: the copy or parity pass verifies checksums as it reads, and
        // what it did not read is read on its own.
        let compared = match l.level {
            Level::Raif1 => self.mirrors(e, &parts, &l, meta.lost, size)?,
            Level::Raif4 | Level::Raif5 if !meta.parity_stale => {
                self.parity(e, &parts, &l, size)?
            }
            Level::Raif4 | Level::Raif5 | Level::Raif0 => 0,
        };
        self.unverifiable(&parts, &meta, size, compared);
        self.read_parts(e, &parts, &meta, size, !compared)?;
        self.bytes.set(self.bytes.get() + parts.read.get());
        for b in 0..parts.fds.len() {
            self.stored.set(self.stored.get() + parts.stored(b)?);
        }
        let consistent = found == self.found.get() - self.fixed.get();
        self.protection(e, &parts, &meta, size, consistent)
    }

    /// Counts the bytes of the file (of `size` bytes, its parts `parts`) that could not be
    /// verified against its redundancy: all of a RAIF1 file's when fewer than two copies could
    /// be compared, all of a RAIF4/5 file's when a part is out of service or missing (no row can
    /// be checked against its parity), a RAIF0 file's parts out of service (its data there
    /// could not even be read). `compared` says which parts the copy or parity pass read.
    fn unverifiable(&self, parts: &AdminParts, meta: &FileMeta, size: u64, compared: u64) {
        let l = &meta.layout;
        let missing = |b: usize| l.holds(b) && parts.fds[b].is_none();
        let bytes = match l.level {
            Level::Raif1 if compared == 0 => size,
            Level::Raif4 | Level::Raif5 if !meta.parity_stale && compared == 0 => size,
            Level::Raif0 => (0..l.width as usize)
                .filter(|&b| missing(b))
                .map(|b| l.part_size(b, size))
                .sum(),
            _ => 0,
        };
        if bytes > 0 {
            self.unverified.set(self.unverified.get() + bytes);
            self.unverified_files.set(self.unverified_files.get() + 1);
        }
    }

    /// Data without checksums in a file that keeps them: a part that keeps none while the
    /// others do, or blocks holding data whose entries are unknown (an attribute removed or
    /// cut behind RAIF's back, or blocks written while their home branch was unusable). Such
    /// blocks are not verified, so this is said (it is no mismatch); with `--add-checksums`
    /// they get their checksums once the file is found consistent, as do files with none.
    fn protection(
        &self,
        e: &Entry,
        parts: &AdminParts,
        meta: &FileMeta,
        size: u64,
        consistent: bool,
    ) -> io::Result<()> {
        let l = &meta.layout;
        if !sums::covered(l) {
            return Ok(());
        }
        let usable = |b: usize| {
            l.holds(b)
                && parts.fds[b].is_some()
                && parts
                    .homes
                    .get(b)
                    .copied()
                    .flatten()
                    .is_some_and(|h| self.sum_dirs[h].is_some() && self.online & (1 << h) != 0)
        };
        let keeping = (0..l.width as usize).any(|b| l.holds(b) && parts.keeps_sums(b));
        let mut lacking = Vec::new();
        let mut gaps = Vec::new();
        for b in (0..l.width as usize).filter(|&b| usable(b)) {
            if !parts.keeps_sums(b) {
                lacking.push(b);
                let plen = sys::fstat(parts.fds[b].as_ref().expect("usable").as_fd())?.size;
                if keeping && parts.next_data(b, 0).is_some_and(|d| d < plen) {
                    gaps.push(format!(
                        "branch {b}'s part keeps no checksums, while the file's other parts do"
                    ));
                }
            } else if parts.has_sums(b) {
                let plen = l.part_size(b, size);
                if let (n @ 1.., Some(first)) = sums::unknown(parts, b, plen)? {
                    lacking.push(b);
                    gaps.push(format!(
                        "{n} block{} of branch {b}'s part hold data without a checksum (the \
                         first at part offset {first})",
                        if n == 1 { "" } else { "s" }
                    ));
                }
            }
        }
        let add = self.add && consistent && !lacking.is_empty();
        if add {
            let with = AdminParts::open(e.dirs, e.name, self.online, libc::O_RDONLY).with_sums(
                &self.sum_dirs,
                meta.id,
                l,
                true,
                true,
            );
            for &b in &lacking {
                // Whatever an older format left where the entries go is not kept.
                with.sums_truncate(b, 0)?;
                sums::resum(&with, b, 0, l.part_size(b, size))?;
                if let Some(home) = with.homes[b].and_then(|h| with.fds[h].as_ref()) {
                    sums::drop_old_xattr(home.as_fd())?;
                }
            }
            self.added.set(self.added.get() + 1);
            self.progress
                .println(&format!("checksums added: {}", e.path.display()));
        }
        if !gaps.is_empty() {
            self.unprotected.set(self.unprotected.get() + 1);
            self.progress.println(&format!(
                "unprotected {}: {}{}",
                e.path.display(),
                gaps.join("; "),
                if add {
                    " [checksums added]"
                } else {
                    " (not verified; --add-checksums gives them theirs)"
                }
            ));
        }
        Ok(())
    }

    /// What the record says is out of date after a write refused for lack of room (see
    /// [`crate::part_io::OutOfDate`]): RAIF1 copies, rebuilt from another copy; a RAIF4/5
    /// parity, recomputed from the data units (which are right). Returns the record as it
    /// stands afterwards.
    fn out_of_date(
        &self,
        e: &Entry,
        parts: &AdminParts,
        meta: FileMeta,
        size: u64,
    ) -> io::Result<FileMeta> {
        let l = meta.layout;
        let mut now = meta;
        if l.level == Level::Raif1 {
            let holders = (0..l.width as usize).filter(|&b| l.holds(b) && parts.fds[b].is_some());
            let stale: Vec<usize> = holders.filter(|&b| meta.lost & (1 << b) != 0).collect();
            parts.down.set(meta.lost);
            for b in stale {
                let fix = self.repair
                    && stripe::rebuild_part(&l, size, parts, b, |off, bytes| {
                        part_io::write_full(parts, b, bytes, off)
                    })
                    .and_then(|()| {
                        sys::ftruncate(parts.fds[b].as_ref().expect("open").as_fd(), size)
                    })
                    .is_ok();
                if fix {
                    now.lost &= !(1 << b);
                }
                self.report(
                    e.path,
                    &format!(
                        "copy on branch {b} is out of date (a write refused for lack of room \
                         could not be taken back there)"
                    ),
                    fix,
                );
            }
            parts.down.set(0);
        } else if meta.parity_stale {
            let whole = (0..l.width as usize).all(|b| parts.fds[b].is_some());
            let fix = self.repair && whole && stripe::resync_parity(&l, size, parts, 0).is_ok();
            if fix {
                now.parity_stale = false;
            }
            self.report(
                e.path,
                "parity out of date (a write refused for lack of room could not be taken back); \
                 the data units are right",
                fix,
            );
        }
        if now != meta {
            for fd in parts.fds.iter().flatten() {
                write_record(fd.as_fd(), &Meta::File(now))?;
            }
        }
        Ok(now)
    }

    /// Parts longer than the layout says (bytes past the end would come back on a truncate up).
    fn part_lengths(
        &self,
        e: &Entry,
        parts: &AdminParts,
        meta: &FileMeta,
        size: u64,
    ) -> io::Result<()> {
        let l = &meta.layout;
        for (b, fd) in parts.fds.iter().enumerate() {
            let Some(fd) = fd else { continue };
            let len = sys::fstat(fd.as_fd())?.size;
            let want = l.part_size(b, size);
            let short_ok = l.level.striped();
            let out_of_date = !short_ok && meta.lost & (1 << b) != 0; // reported on its own
            if !out_of_date && (len > want || (!short_ok && len != want && l.holds(b))) {
                let fix = self.repair && len > want && sys::ftruncate(fd.as_fd(), want).is_ok();
                self.report(
                    e.path,
                    &format!("part on branch {b} is {len} bytes, the layout says {want}"),
                    fix,
                );
            }
        }
        Ok(())
    }

    /// Compares the copies of a RAIF1 file, but those out of date (`skip`, reported already),
    /// verifying their checksums as they are read; returns the parts it read.
    fn mirrors(
        &self,
        e: &Entry,
        parts: &AdminParts,
        l: &Layout,
        skip: u64,
        size: u64,
    ) -> io::Result<u64> {
        let copies: Vec<usize> = (0..l.width as usize)
            .filter(|&b| l.holds(b) && parts.fds[b].is_some() && skip & (1 << b) == 0)
            .collect();
        if copies.len() < 2 {
            return Ok(0);
        }
        let read = copies.iter().fold(0u64, |m, &b| m | 1 << b);
        let mut bufs: Vec<Vec<u8>> = vec![vec![0u8; CHUNK]; copies.len()];
        let mtimes: Vec<(i64, u32)> = copies
            .iter()
            .map(|&b| sys::fstat(parts.fds[b].as_ref().expect("open").as_fd()).map(|s| s.mtime))
            .collect::<io::Result<_>>()?;
        let mut off = 0u64;
        while off < size {
            // Holes in every copy agree.
            match next_data_any(parts, copies.iter().copied(), off) {
                None => break,
                Some(d) => off = off.max(d / sums::BLOCK * sums::BLOCK),
            }
            if off >= size {
                break;
            }
            let n = ((size - off) as usize).min(CHUNK);
            for (i, &b) in copies.iter().enumerate() {
                self.read_checked(e, parts, l, size, b, &mut bufs[i][..n], off)?;
            }
            self.read((n * copies.len()) as u64);
            if bufs.iter().all(|x| x[..n] == bufs[0][..n]) || self.flagged(None, off, n as u64) {
                off += n as u64;
                continue;
            }
            // Which copy is right, on evidence only (see the module docs).
            let chunks: Vec<&[u8]> = bufs.iter().map(|x| &x[..n]).collect();
            let truth = if let Some(i) = majority(&chunks) {
                Some(i)
            } else if let Some(odd) = standout(&mtimes) {
                // The others, which kept their common time, must agree among themselves.
                let rest: Vec<usize> = (0..copies.len()).filter(|&i| i != odd).collect();
                rest.iter()
                    .all(|&i| bufs[i][..n] == bufs[rest[0]][..n])
                    .then_some(rest[0])
            } else {
                None
            };
            let Some(truth) = truth else {
                let at = (0..n)
                    .find(|&k| {
                        copies
                            .iter()
                            .enumerate()
                            .any(|(i, _)| bufs[i][k] != bufs[0][k])
                    })
                    .unwrap_or(0) as u64
                    + off;
                let list: Vec<String> = copies.iter().map(|b| b.to_string()).collect();
                self.report_ambiguous(
                    e.path,
                    &format!(
                        "copies on branches {} differ at offset {at}: no majority, none changed \
                         after the others{}",
                        list.join(", "),
                        self.crash_note()
                    ),
                );
                off += n as u64;
                continue;
            };
            for i in 0..copies.len() {
                if bufs[i][..n] == bufs[truth][..n] {
                    continue;
                }
                let at = bufs[i][..n]
                    .iter()
                    .zip(&bufs[truth][..n])
                    .position(|(x, y)| x != y)
                    .unwrap_or(0) as u64
                    + off;
                let b = copies[i];
                let fix = self.repair && {
                    let truth_bytes = bufs[truth][..n].to_vec();
                    part_io::write_full(parts, b, &truth_bytes, off).is_ok()
                        && set_mtime(parts.fds[b].as_ref().expect("open"), mtimes[truth]).is_ok()
                };
                self.report(
                    e.path,
                    &format!(
                        "copy on branch {b} differs at offset {at} (branch {} holds the reference copy)",
                        copies[truth]
                    ),
                    fix,
                );
            }
            off += n as u64;
        }
        Ok(read)
    }

    /// Checks every row of a RAIF4/5 file against its parity, verifying checksums as it reads;
    /// returns the parts it read (none with a part missing).
    fn parity(&self, e: &Entry, parts: &AdminParts, l: &Layout, size: u64) -> io::Result<u64> {
        let w = l.width as usize;
        if (0..w).any(|b| parts.fds[b].is_none()) {
            return Ok(0); // a part is missing: reported above, nothing to compare with
        }
        let su = l.stripe as usize;
        let mtimes: Vec<(i64, u32)> = (0..w)
            .map(|b| sys::fstat(parts.fds[b].as_ref().expect("open").as_fd()).map(|s| s.mtime))
            .collect::<io::Result<_>>()?;
        let odd = standout(&mtimes);
        let mut acc = vec![0u8; su];
        let mut unit = vec![0u8; su];
        let rows = size.div_ceil(l.row_bytes());
        let mut next = 0;
        while next < rows {
            // Rows that are holes in every part agree with their parity.
            let row = match next_data_any(parts, 0..w, next * su as u64) {
                None => break,
                Some(d) => next.max(d / su as u64),
            };
            if row >= rows {
                break;
            }
            next = row + 1;
            let off = row * su as u64;
            acc.fill(0);
            for b in 0..w {
                self.read_checked(e, parts, l, size, b, &mut unit, off)?;
                xor_into(&mut acc, &unit);
            }
            self.read((su * w) as u64);
            let Some(at) = acc.iter().position(|&x| x != 0) else {
                continue;
            };
            if self.flagged(None, off, su as u64) {
                continue; // a block that failed its checksum: reported
            }
            let pb = l.parity_branch(row).expect("parity");
            // The part to rewrite: one changed behind RAIF's back; else nobody knows.
            let Some(wrong) = odd else {
                // Any unit holding bytes of the file there, or the parity, may be the bad one.
                let candidates: Vec<String> = (0..w)
                    .filter(|&b| match l.role(b, row) {
                        crate::layout::Role::Data(c) => l.unit_start(row, c) + (at as u64) < size,
                        crate::layout::Role::Parity => true,
                    })
                    .map(|b| b.to_string())
                    .collect();
                self.report_ambiguous(
                    e.path,
                    &format!(
                        "row {row} does not match its parity at part offset {}: the bad byte may \
                         be on any of branches {} (no part changed after the others{})",
                        off + at as u64,
                        candidates.join(", "),
                        self.crash_note()
                    ),
                );
                continue;
            };
            let logical = match l.role(wrong, row) {
                crate::layout::Role::Data(c) => l.unit_start(row, c) + at as u64,
                crate::layout::Role::Parity => l.unit_start(row, 0) + at as u64,
            };
            let what = if wrong == pb { "parity" } else { "data" };
            let fix = self.repair && {
                // wrong ⊕ acc = the XOR of all the others = what `wrong` should hold.
                part_io::read_full(parts, wrong, &mut unit, off).is_ok() && {
                    xor_into(&mut unit, &acc);
                    let keep = (l.part_size(wrong, size).saturating_sub(off) as usize).min(su);
                    part_io::write_full(parts, wrong, &unit[..keep], off).is_ok()
                        && set_mtime(
                            parts.fds[wrong].as_ref().expect("open"),
                            mtimes[(wrong + 1) % w],
                        )
                        .is_ok()
                }
            };
            self.report(
                e.path,
                &format!(
                    "row {row} does not match its parity: {what} on branch {wrong} at offset {logical} (part offset {})",
                    off + at as u64
                ),
                fix,
            );
        }
        Ok(crate::layout::all_mask(w))
    }
}

impl Scrubber {
    /// Sum files whose file was not found in the walk (deleted by a rename over it, or while
    /// the branch was away): reported, removed with `--repair`.
    fn orphans(&self, bs: &crate::branch::BranchSet) {
        let seen = self.seen.borrow();
        for (h, d) in self.sum_dirs.iter().enumerate() {
            let Some(d) = d else { continue };
            let Ok(names) = std::fs::read_dir(bs.get(h).path().join(crate::reserved::SUM_DIR))
            else {
                continue;
            };
            for name in names.filter_map(|x| x.ok().map(|x| x.file_name())) {
                let Some(id) = name
                    .to_str()
                    .and_then(|n| n.split('.').next())
                    .and_then(|x| u64::from_str_radix(x, 16).ok())
                else {
                    continue;
                };
                if seen.contains(&id) {
                    continue;
                }
                self.found.set(self.found.get() + 1);
                let fix = self.repair && sys::unlinkat(d.as_fd(), &name, false).is_ok();
                if fix {
                    self.fixed.set(self.fixed.get() + 1);
                }
                self.progress.println(&format!(
                    "orphan sum file {} on branch {h} ({}): its file is gone{}",
                    name.to_string_lossy(),
                    bs.get(h).path().display(),
                    if fix { " [removed]" } else { "" }
                ));
            }
        }
    }
}

/// The index whose time differs from all the others' (which agree), if exactly one does.
fn standout(times: &[(i64, u32)]) -> Option<usize> {
    if times.len() < 3 {
        // With two, the newer one was changed last (RAIF changes both together).
        return match times {
            [a, b] if a != b => Some(if a > b { 0 } else { 1 }),
            _ => None,
        };
    }
    let common = times
        .iter()
        .find(|t| times.iter().filter(|u| u == t).count() > 1)?;
    let odd: Vec<usize> = (0..times.len()).filter(|&i| times[i] != *common).collect();
    (odd.len() == 1).then(|| odd[0])
}

fn set_mtime(fd: &OwnedFd, t: (i64, u32)) -> io::Result<()> {
    sys::futimens(fd.as_fd(), SetTime::Omit, SetTime::At(t.0, t.1))
}

/// The bytes scrub reads for the file `e` (its parts on the branches of `online`): the data
/// each part holds, every byte once. For the progress bar: from one `stat` of each part (its
/// allocated blocks), no data read.
fn to_read(e: &Entry, online: u64) -> u64 {
    (0..e.dirs.len())
        .filter_map(|b| e.dirs[b].as_ref().filter(|_| online & (1 << b) != 0))
        .filter_map(|d| stat_opt(d.as_fd(), e.name).ok().flatten())
        .map(|st| st.size.min(st.blocks * 512))
        .sum()
}

/// Scrubs the volume of `branches`; returns whether it is verified clean: no mismatch remains,
/// and no block went unverified (against its copies or its parity) for a member out of
/// service or a part missing.
pub fn scrub(branches: &[PathBuf], repair: bool, add: bool) -> Result<bool, SetupError> {
    let paths = check_branches(branches)?;
    let bs = open_volume(&paths)?;
    let online = bs.online_mask();
    for b in 0..bs.len() {
        if bs.state(b) != State::Online {
            log::warn!("not verified: {}", bs.describe(b));
        }
    }
    if bs.crashed() {
        println!(
            "the volume stopped uncleanly since its last complete scrub --repair: a mismatch may \
             be a write the stop cut short, or corruption; it is repaired only on other evidence"
        );
    }
    let reference = online.trailing_zeros() as usize;
    let dirs = roots(&bs, online);
    let progress = Progress::start("scrub", &dirs, reference, |e| to_read(e, online));
    let sum_dirs = sums::open_dirs(&dirs, add);
    let s = Scrubber {
        sum_dirs,
        seen: RefCell::new(HashSet::new()),
        add,
        added: Cell::new(0),
        unprotected: Cell::new(0),
        flagged: RefCell::new(Vec::new()),
        online,
        reference,
        repair,
        crashed: bs.crashed(),
        ambiguous: Cell::new(0),
        unverified: Cell::new(0),
        unverified_files: Cell::new(0),
        files: Cell::new(0),
        dirs: Cell::new(0),
        bytes: Cell::new(0),
        stored: Cell::new(0),
        found: Cell::new(0),
        fixed: Cell::new(0),
        progress,
    };
    let mut visit = |e: &Entry| s.visit(e);
    let mut leave = |_: &Entry| Ok(());
    let walked = walk(&dirs, reference, &mut visit, &mut leave);
    s.progress.finish();
    walked.map_err(|e| setup_err(format!("scrub stopped: {}", plain(&e))))?;
    s.orphans(&bs);
    if add {
        println!("checksums added to {} files", s.added.get());
    } else if s.unprotected.get() > 0 {
        println!(
            "{} files hold data without checksums (not verified): --add-checksums gives them theirs",
            s.unprotected.get()
        );
    }
    println!(
        "scrub: {} files, {} directories, {} bytes read of {} stored; {} mismatches, {} repaired, {} ambiguous",
        s.files.get(),
        s.dirs.get(),
        s.bytes.get(),
        s.stored.get(),
        s.found.get(),
        s.fixed.get(),
        s.ambiguous.get()
    );
    if s.unverified.get() > 0 {
        let out: Vec<String> = (0..bs.len())
            .filter(|&b| bs.state(b) != State::Online)
            .map(|b| b.to_string())
            .collect();
        println!(
            "not verified: {} bytes of {} files could not be checked against their redundancy \
             ({}): rebuild the member out of service, or find the missing parts, and scrub \
             again",
            s.unverified.get(),
            s.unverified_files.get(),
            if out.is_empty() {
                "parts missing".to_string()
            } else {
                format!("branch {} out of service", out.join(", "))
            }
        );
    }
    // Clean when no mismatch remains and every block was verified.
    let clean = s.found.get() == s.fixed.get() && s.unverified.get() == 0;
    if repair && clean && bs.crashed() && bs.online_mask() == crate::layout::all_mask(bs.len()) {
        bs.record_scrubbed()
            .map_err(|e| setup_err(format!("writing markers: {}", plain(&e))))?;
        println!("the volume is consistent again after its unclean stop");
    }
    Ok(clean)
}
