//! The write-intent log: which rows of which files were being written, so that after an
//! unclean stop exactly those are resynchronised before the volume is served (md's
//! write-intent bitmap), and, while a branch is failed, what the rows being written need to be
//! rebuilt (md's partial-parity log).
//!
//! # Why
//!
//! A RAIF4/5 write updates a data unit and then the row's parity (a RAIF1 write, one copy after
//! the other). A crash in between leaves the row *torn*: its parity does not match the data.
//! Nothing looks wrong while every branch is there, but when one fails, its unit is computed
//! from the torn parity and comes out wrong, even where it holds bytes fsync'd long ago (the
//! RAID-5 write hole).
//!
//! # Entries
//!
//! Before a striped file's row or a mirrored file's range is written, an entry naming the file
//! and the *region* (a [`REGION`]-sized, aligned range of the file) is appended to the log of
//! one branch: a branch the write does not touch where there is one (so the log write does not
//! queue behind the data), else any online one. A region stays *live* until the next clearing
//! cycle, so a run of writes to one region costs one entry.
//!
//! * A write that could tear bytes it does not write (a read-modify-write of part of a row
//!   whose other units hold data; any rewrite of a whole row within the file) waits for its
//!   entry to be on stable storage (`fdatasync` of the log, shared by the writers waiting at
//!   that moment).
//! * Other writes (appends: every other unit of the row lies past the end of the file; mirror
//!   copies, which tear into an old and a new version, each byte one or the other) do not wait:
//!   their entry is written first, so a crash of the daemon always finds it; a power cut may
//!   lose it, and then nothing written before is at risk, only the consistency of the rows
//!   being written (scrub finds and repairs those).
//! * A write while a branch is failed that leaves another unit of the row (one that lives only
//!   in the parity now) at risk logs *partial parity*: the XOR of the row's units it does not
//!   write, over the range it writes, with which the parity is rebuilt after a crash without the
//!   missing branch (and it waits for stable storage).
//! * A hole punched (or a range zeroed) over whole rows while a branch is failed logs those
//!   rows as being *zeroed*: after a crash without the missing branch, zeros are written again
//!   on every part, parity included, where they are not zeros already (and it waits for stable
//!   storage). While a branch is failed every write logs partial parity, so a write into such
//!   rows after the punch always has an entry of its own that keeps its bytes.
//!
//! # Clearing
//!
//! Each branch keeps two log files and appends to one of them. Every [`Journal::cycle`] (the
//! mount's clearing thread, every couple of seconds): appends switch to the other file, the
//! epoch is raised (writes from then on log their regions again), the writes of the old epoch
//! are waited for, the branches are synced if any of its entries was of the waiting kind (their
//! data and parity must be on stable storage before the entry goes), and the file appended to
//! before the switch is emptied. So the logs hold the entries of about two cycles, clearing
//! costs a `syncfs` only where overwrites happened, and it needs no new inode or block on a
//! full branch. A clean unmount removes the files.
//!
//! # Replay
//!
//! At mount, before anything is served ([`replay`]): every online branch's log is read; for each
//! file named there the parts are opened (by the path recorded, or, for a file renamed since,
//! found by a walk of one branch), the size the parts imply is adopted where it is larger than
//! the one recorded (an append cut short before the record was written), and every logged
//! region is resynchronised: RAIF4/5 parity recomputed from the data units, RAIF1 copies made
//! equal to one copy. With a branch failed, partial-parity entries rebuild the parity of the
//! rows they cover and zeroing entries zero their rows again, each byte from the latest entry
//! that covers it; entries that cannot be replayed without the missing branch are kept for a
//! mount that has it.
//!
//! # Format
//!
//! `.raif-intent` and `.raif-intent.1` at each branch root (hidden from the mount), each a
//! sequence of records, each
//! `"RIL1" LEN CRC SEQ KIND ID PATHLEN PATH BODY` (little-endian; `LEN` the whole record, `CRC`
//! a CRC-32 of what follows it); `KIND` 1 is a region (`BODY` = `START END`, byte offsets),
//! 2 partial parity (`BODY` = `ROW COL OFFSET LEN BYTES`), 3 rows being zeroed (`BODY` =
//! `FIRST END`, rows). A record that does not check out (a write cut short) ends the log.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use fsprof_fuse::sys;
use parking_lot::Mutex;

use crate::branch::BranchSet;
use crate::layout::{Layout, Level, Meta, XATTR};
use crate::parts::{self, How, Parts};
use crate::reserved::{LOG_KEPT as KEPT, LOG_KEPT_TMP as KEPT_TMP, LOGS};
use crate::stripe;

/// Bytes of a file one entry covers (aligned).
pub const REGION: u64 = 4 << 20;

const MAGIC: &[u8; 4] = b"RIL1";
const HEAD: usize = 4 + 4 + 4;
/// Largest record read back (a partial parity of the largest stripe unit, and a path).
const MAX_RECORD: usize = (64 << 20) + 8192;

/// A record of the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Order of writing.
    pub seq: u64,
    /// The file's identity.
    pub id: u64,
    /// Its path from the volume root when the record was made.
    pub path: Vec<u8>,
    /// What is logged.
    pub body: Body,
}

/// What a record says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// Bytes `[start, end)` of the file may be torn.
    Region {
        /// First byte.
        start: u64,
        /// Past the last byte.
        end: u64,
    },
    /// Partial parity of a row (see [`How::Parity`]).
    Parity {
        /// Row.
        row: u64,
        /// The column being written.
        col: u32,
        /// Offset in the unit.
        a: u64,
        /// The XOR of the row's other units over the range.
        pp: Vec<u8>,
    },
    /// Rows being zeroed (see [`How::Zeros`]).
    Zeros {
        /// First row.
        first: u64,
        /// Past the last row.
        end: u64,
    },
}

impl Record {
    /// The record's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(64 + self.path.len());
        v.extend_from_slice(MAGIC);
        v.extend_from_slice(&[0; 8]); // length and CRC, below
        v.extend_from_slice(&self.seq.to_le_bytes());
        v.push(match self.body {
            Body::Region { .. } => 1,
            Body::Parity { .. } => 2,
            Body::Zeros { .. } => 3,
        });
        v.extend_from_slice(&self.id.to_le_bytes());
        v.extend_from_slice(&(self.path.len() as u16).to_le_bytes());
        v.extend_from_slice(&self.path);
        match &self.body {
            Body::Region { start, end } | Body::Zeros { first: start, end } => {
                v.extend_from_slice(&start.to_le_bytes());
                v.extend_from_slice(&end.to_le_bytes());
            }
            Body::Parity { row, col, a, pp } => {
                v.extend_from_slice(&row.to_le_bytes());
                v.extend_from_slice(&col.to_le_bytes());
                v.extend_from_slice(&a.to_le_bytes());
                v.extend_from_slice(&(pp.len() as u32).to_le_bytes());
                v.extend_from_slice(pp);
            }
        }
        let len = v.len() as u32;
        v[4..8].copy_from_slice(&len.to_le_bytes());
        let crc = crc32fast::hash(&v[HEAD..]);
        v[8..12].copy_from_slice(&crc.to_le_bytes());
        v
    }

    /// Decodes the records of a log, up to the first one that does not check out.
    pub fn decode_all(mut b: &[u8]) -> Vec<Record> {
        let mut out = Vec::new();
        while let Some((r, len)) = Record::decode(b) {
            out.push(r);
            b = &b[len..];
        }
        out
    }

    /// One record at the start of `b`, and its length.
    fn decode(b: &[u8]) -> Option<(Record, usize)> {
        if b.len() < HEAD || &b[..4] != MAGIC {
            return None;
        }
        let len = u32::from_le_bytes(b[4..8].try_into().ok()?) as usize;
        if len < HEAD || len > b.len() || len > MAX_RECORD {
            return None;
        }
        let crc = u32::from_le_bytes(b[8..12].try_into().ok()?);
        if crc32fast::hash(&b[HEAD..len]) != crc {
            return None;
        }
        let mut r = Reader(&b[HEAD..len]);
        let seq = r.u64()?;
        let kind = r.bytes(1)?[0];
        let id = r.u64()?;
        let plen = u16::from_le_bytes(r.bytes(2)?.try_into().ok()?) as usize;
        let path = r.bytes(plen)?.to_vec();
        let body = match kind {
            1 => Body::Region {
                start: r.u64()?,
                end: r.u64()?,
            },
            2 => {
                let row = r.u64()?;
                let col = u32::from_le_bytes(r.bytes(4)?.try_into().ok()?);
                let a = r.u64()?;
                let n = u32::from_le_bytes(r.bytes(4)?.try_into().ok()?) as usize;
                Body::Parity {
                    row,
                    col,
                    a,
                    pp: r.bytes(n)?.to_vec(),
                }
            }
            3 => Body::Zeros {
                first: r.u64()?,
                end: r.u64()?,
            },
            _ => return None,
        };
        Some((
            Record {
                seq,
                id,
                path,
                body,
            },
            len,
        ))
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let (a, b) = (self.0.get(..n)?, self.0.get(n..)?);
        self.0 = b;
        Some(a)
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.bytes(8)?.try_into().ok()?))
    }
}

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
        fds: [a, b],
        active: 0,
        end,
    })
}

struct LogState {
    /// The two files.
    fds: [OwnedFd; 2],
    /// The one appended to.
    active: usize,
    /// Where the next record of each goes.
    end: [u64; 2],
}

/// The mount's write-intent log over the online branches' logs.
pub struct Journal {
    /// Each branch's log files (none: the branch holds no log).
    logs: Box<[Mutex<Option<LogState>>]>,
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
    /// after [`replay`], with the highest sequence number it read (`after`; entries are
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
    /// not in `written` where one is online; `bs` decides about branches that fail.
    #[allow(clippy::too_many_arguments)]
    pub fn note(
        &self,
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
        let wait = !matches!(how, How::Fresh);
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
        let mut bytes = Vec::new();
        for r in &missing {
            bytes.extend_from_slice(
                &Record {
                    seq: self.seq.fetch_add(1, Ordering::Relaxed),
                    id,
                    path: path.clone(),
                    body: Body::Region {
                        start: r * REGION,
                        end: (r + 1) * REGION,
                    },
                }
                .encode(),
            );
        }
        let body = match how {
            How::Parity { row, col, a, pp } => Some(Body::Parity {
                row,
                col: col as u32,
                a,
                pp: pp.to_vec(),
            }),
            How::Zeros { first, end } => Some(Body::Zeros { first, end }),
            How::Fresh | How::Overwrite => None,
        };
        if let Some(body) = body {
            bytes.extend_from_slice(
                &Record {
                    seq: self.seq.fetch_add(1, Ordering::Relaxed),
                    id,
                    path,
                    body,
                }
                .encode(),
            );
        }
        self.append(w, bs, id.wrapping_add(first), written, &bytes, wait)?;
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
    fn append(
        &self,
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
            match self.append_to(b, bytes, wait) {
                Ok(()) => {
                    if wait {
                        self.synced_kind[(w.epoch & 1) as usize].store(true, Ordering::SeqCst);
                    }
                    return Ok(());
                }
                Err(e) if parts::no_room(&e) => return Err(e),
                Err(e) => {
                    bs.error(b, &e, "intent log");
                    tried |= 1 << b;
                }
            }
        }
    }

    fn append_to(&self, b: usize, bytes: &[u8], wait: bool) -> io::Result<()> {
        let mut st = self.logs[b].lock();
        let st = st
            .as_mut()
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EIO))?;
        let i = st.active;
        let at = st.end[i];
        parts::write_full(&One(st.fds[i].as_fd()), 0, bytes, at)?;
        st.end[i] = at + bytes.len() as u64;
        if wait {
            sys::fsync(st.fds[i].as_fd(), true)?;
            self.syncs.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
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
                Ok(()) => st.end[i] = 0,
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

/// One descriptor as the only part (for [`parts::write_full`] and friends).
struct One<'a>(BorrowedFd<'a>);

impl Parts for One<'_> {
    fn usable(&self, _b: usize) -> bool {
        true
    }
    fn pread(&self, _b: usize, buf: &mut [u8], off: u64) -> io::Result<usize> {
        sys::pread(self.0, buf, off)
    }
    fn pwrite(&self, _b: usize, buf: &[u8], off: u64) -> io::Result<usize> {
        sys::pwrite(self.0, buf, off)
    }
    fn truncate(&self, _b: usize, len: u64) -> io::Result<()> {
        sys::ftruncate(self.0, len)
    }
    fn failed(&self, _b: usize, _e: &io::Error, _missed: bool) -> bool {
        false
    }
    fn out_of_date(&self, _what: parts::OutOfDate) {}
    fn parity_stale(&self) -> bool {
        false
    }
}

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
/// for the entries that need a missing branch. Call before the volume is served.
pub fn replay(bs: &BranchSet) -> Replayed {
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
        match replay_file(bs, &roots, &sum_dirs, id, f, &mut out) {
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
                    match replay_file(bs, &roots, &sum_dirs, id, f, &mut out) {
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
    let mut bytes = Vec::new();
    for r in keep {
        bytes.extend_from_slice(&r.encode());
    }
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
                parts::write_full(&One(fd.as_fd()), 0, &bytes, 0)?;
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
        .with_sums(sum_dirs, id, &l, true, false);
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
                parts::read_full(p, reference, &mut want[..n], off)?;
                for &b in others {
                    stripe::rewrite_differing(p, b, &want[..n], off)?;
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
            stripe::rewrite_differing(p, b, &ZEROS[..n], off)?;
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
    parts::read_full(p, db, &mut par, off)?;
    stripe::xor_into(&mut par, pp);
    parts::write_full(p, pb, &par, off)
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

    #[test]
    fn records_round_trip_and_a_torn_tail_ends_the_log() {
        let a = Record {
            seq: 7,
            id: 0x1234,
            path: b"d/f".to_vec(),
            body: Body::Region {
                start: 0,
                end: REGION,
            },
        };
        let b = Record {
            seq: 8,
            id: 0x99,
            path: b"x".to_vec(),
            body: Body::Parity {
                row: 3,
                col: 1,
                a: 512,
                pp: vec![1, 2, 3, 4, 5],
            },
        };
        let z = Record {
            seq: 9,
            id: 0x99,
            path: b"x".to_vec(),
            body: Body::Zeros { first: 2, end: 40 },
        };
        let mut log = a.encode();
        log.extend_from_slice(&b.encode());
        log.extend_from_slice(&z.encode());
        assert_eq!(
            Record::decode_all(&log),
            vec![a.clone(), b.clone(), z.clone()]
        );
        log.truncate(log.len() - z.encode().len());
        // Cut anywhere inside the second record: the first is all that is read.
        let first = a.encode().len();
        for cut in first..log.len() {
            assert_eq!(
                Record::decode_all(&log[..cut]),
                vec![a.clone()],
                "cut {cut}"
            );
        }
        // A flipped byte fails the CRC.
        let mut bad = log.clone();
        bad[first + 20] ^= 1;
        assert_eq!(Record::decode_all(&bad), vec![a]);
        assert!(Record::decode_all(b"garbage").is_empty());
    }
}
