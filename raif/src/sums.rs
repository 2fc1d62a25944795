//! Block checksums: a CRC-32C of every [`BLOCK`]-byte block of every part (a RAIF1 copy, a
//! RAIF0/4/5 data or parity part), kept away from the part it covers.
//!
//! # Where
//!
//! The checksums of branch `b`'s part of a file are kept on the *next* branch,
//! `(b + 1) % width` ([`home`]), which holds a part of the same file: a lost or misdirected
//! write on one branch cannot damage a block and the checksum that covers it. Parts stay plain
//! files (a RAIF1 copy is byte for byte the file, a data part holds only data). A file's parts
//! keep them in one of three ways:
//!
//! - **In the record** (files made since checksums moved there): the entries of the first
//!   [`IN_XATTR`] blocks after the file's record in the home part's record attribute
//!   ([`crate::layout::XATTR`]), those of the blocks after them in the *overflow file*
//!   `.raif-sums/<id>.<b>` at the root of the home branch (`id` the file's record id, 16 hex
//!   digits), made only once a part grows that far. A small file costs no file of its own,
//!   and no attribute of its own either: a record and a few entries fit together in an ext4
//!   inode's own attribute space (a 256-byte inode has 96 bytes), where a second attribute
//!   needs a block of its own, which ext4 allocates at the first write and frees at the
//!   unlink, each a journal update. Creating and removing sum files, and then those blocks,
//!   was most of what checksums cost a small-file workload.
//! - **In an attribute apart** (files that gained checksums in the release before): the same,
//!   in the home part's attribute [`XATTR_NAME`].
//! - **In a sum file** (older files): every entry in `.raif-sums/<id>.<b>`.
//!
//! The home part says which: its record followed by a NUL, or an attribute [`XATTR_NAME`].
//! Hard links share the part and so the attribute (and the record id, so the sum files); a
//! rename touches neither; the last unlink removes the sum files, the attribute goes with its
//! part. Every writer of a record keeps the entries after it ([`with_record`]).
//!
//! # Format
//!
//! Entry `k` (4 bytes, little-endian) is the CRC-32C of the part's bytes
//! `[k·BLOCK, (k+1)·BLOCK)`, with whatever lies past the part's end taken as zeros. In a sum
//! or overflow file it lies at byte `4k`; in the record attribute, at byte `r + 1 + 4k`, where
//! `r` is the record's length (ASCII, with no NUL); in [`XATTR_NAME`], at byte `8 + 4k`, after
//! the file's record id (8 bytes, little-endian). Either way no two files' attributes are
//! equal, so ext4 never shares one attribute block between parts, which would serialize
//! their updates. An entry of 0 (or one past the end of where it is kept) is *unknown*: that
//! block is not verified. So a hole, a block written while the home branch was unusable (the
//! entry is cleared first), or a file from before checksums existed, reads unverified rather
//! than wrong. (A block whose CRC is 0 is never verified: one in 2³² blocks.) An attribute
//! that names another file (a part copied by hand) counts as empty.
//!
//! # Use
//!
//! [`Summed`] wraps the [`Parts`] of an operation: reads verify the blocks they touch and
//! answer a mismatch with [`BadBlock`] (which [`crate::stripe`] repairs from redundancy, then
//! retries); writes verify a block they change only in part (so a corrupt block is never
//! given a fresh checksum), write the data, then the new entries; truncation trims the
//! entries. The [`Parts`] see the entries of a part as one array of bytes
//! ([`Parts::sums_pread`]); [`Xattr`] maps it onto the attribute and the overflow file. An
//! entry and its block are not written atomically: a crash in between leaves a block that does
//! not match, inside a region the write-intent log names, and its replay recomputes the
//! entries of those regions ([`resum`]).

use std::cell::RefCell;
use std::io;

use crate::layout::{Layout, Level, WINDOW};
use crate::parts::{BadBlock, How, OutOfDate, Parts, write_full};
use crate::reserved::SUM_DIR;

/// Bytes covered by one checksum.
pub const BLOCK: u64 = 4096;
const BS: usize = BLOCK as usize;
/// Bytes per entry in a sum file.
pub const ENTRY: u64 = 4;
/// The extended attribute in which a part of a file that gained checksums in the release
/// before holds the first entries of the part before it (hidden from the mount, as every
/// `user.raif*` attribute). Read and kept up to date; new files keep them in the record.
pub const XATTR_NAME: &str = "user.raif.sums";
/// Blocks whose entries the attribute holds (1 MiB of part, 1 KiB of entries: within what
/// ext4 allows one attribute, a block less its headers); those after them are in the overflow
/// file.
pub const IN_XATTR: u64 = WINDOW as u64 / ENTRY;
/// Bytes before the entries in the attribute (the file's record id).
const HEAD: usize = 8;

/// Opens the sum directory at branch root `root`, made first with `create`.
pub fn open_dir(root: std::os::fd::BorrowedFd, create: bool) -> io::Result<std::os::fd::OwnedFd> {
    let name = std::ffi::OsStr::new(SUM_DIR);
    if create
        && let Err(e) = fsprof_fuse::sys::mkdirat(root, name, 0o700)
        && e.raw_os_error() != Some(libc::EEXIST)
    {
        return Err(e);
    }
    fsprof_fuse::sys::openat(
        root,
        name,
        libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
        0,
    )
}

/// The sum directories at the branch roots `roots` (by branch; `None` where there is no root
/// or it cannot be opened), made first with `create`.
pub fn open_dirs(
    roots: &[Option<std::os::fd::OwnedFd>],
    create: bool,
) -> Vec<Option<std::os::fd::OwnedFd>> {
    use std::os::fd::AsFd;
    roots
        .iter()
        .map(|r| open_dir(r.as_ref()?.as_fd(), create).ok())
        .collect()
}

/// The branch whose root holds the sum file of branch `b`'s part, for a file `width` branches
/// wide; `None` when there is no other branch.
#[inline]
pub fn home(b: usize, width: usize) -> Option<usize> {
    (width > 1).then(|| (b + 1) % width)
}

/// The part whose checksums branch `h` keeps for a file of layout `l` (the branch before it),
/// if that branch holds one and checksums cover the file.
#[inline]
pub fn keeps_for(l: &Layout, h: usize) -> Option<usize> {
    let w = l.width as usize;
    if !covered(l) || h >= w {
        return None;
    }
    let b = (h + w - 1) % w;
    l.holds(b).then_some(b)
}

/// The name of the sum file of branch `b`'s part of file `id`, inside [`SUM_DIR`].
pub fn name(id: u64, b: usize) -> String {
    format!("{id:016x}.{b}")
}

/// Whether the parts of `l` are covered by checksums at all: a level with redundancy (RAIF0
/// has nothing to repair a bad block from, and no intent log to tell a block torn by a crash
/// from a corrupt one) over more than one branch.
pub fn covered(l: &Layout) -> bool {
    l.width > 1 && l.level != Level::Raif0
}

/// The CRC-32C of a block whose first `bytes.len()` bytes are `bytes` and the rest zeros.
pub fn crc(bytes: &[u8]) -> u32 {
    static ZEROS: [u8; BS] = [0; BS];
    debug_assert!(bytes.len() <= BS);
    let c = crc32c::crc32c(bytes);
    crc32c::crc32c_append(c, &ZEROS[..BS - bytes.len()])
}

thread_local! {
    static BUF: RefCell<(Vec<u8>, Vec<u8>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// Runs `f` with this thread's block buffer (`len` bytes, contents undefined) and an entry
/// buffer of `entries` entries.
fn with_bufs<R>(len: usize, entries: usize, f: impl FnOnce(&mut [u8], &mut [u8]) -> R) -> R {
    BUF.with(|s| {
        // Re-entrant use (a repair inside a verified read) gets fresh buffers.
        let Ok(mut s) = s.try_borrow_mut() else {
            return f(&mut vec![0; len], &mut vec![0; entries * ENTRY as usize]);
        };
        let (a, e) = &mut *s;
        if a.len() < len {
            a.resize(len, 0);
        }
        let elen = entries * ENTRY as usize;
        if e.len() < elen {
            e.resize(elen, 0);
        }
        f(&mut a[..len], &mut e[..elen])
    })
}

#[inline]
fn entry(e: &[u8], i: usize) -> u32 {
    let i = i * ENTRY as usize;
    u32::from_le_bytes([e[i], e[i + 1], e[i + 2], e[i + 3]])
}

#[inline]
fn set_entry(e: &mut [u8], i: usize, v: u32) {
    let i = i * ENTRY as usize;
    e[i..i + 4].copy_from_slice(&v.to_le_bytes());
}

/// Reads with `pread` as many bytes at `off` as there are (short only at the end).
fn read_at_most(
    mut pread: impl FnMut(&mut [u8], u64) -> io::Result<usize>,
    buf: &mut [u8],
    off: u64,
) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        let want = buf.len() - done;
        match pread(&mut buf[done..], off + done as u64) {
            Ok(0) => break,
            // A regular file reads short only at its end: no second call to learn that.
            Ok(n) if n < want => {
                done += n;
                break;
            }
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// Reads as many bytes of `b`'s part at `off` as there are (short only at its end).
fn read_upto(p: &impl Parts, b: usize, buf: &mut [u8], off: u64) -> io::Result<usize> {
    read_at_most(|buf, off| p.pread(b, buf, off), buf, off)
}

/// Reads the entries of blocks `[k0, k0 + e.len()/4)` of `b`'s part; missing ones are 0. An
/// error of the sum file's branch is that branch's (the caller's [`Parts`] reports it), not
/// the part's: the entries are then unknown.
fn read_entries(p: &impl Parts, b: usize, k0: u64, e: &mut [u8]) -> io::Result<()> {
    let done = read_at_most(|buf, off| p.sums_pread(b, buf, off), e, k0 * ENTRY).unwrap_or(0);
    e[done..].fill(0);
    Ok(())
}

/// Writes entries; an error is the sum file's branch's (reported by the caller's [`Parts`]),
/// never the part's, so it does not fail the data operation. An entry that could not be
/// written past the sum file's end reads as unknown; one that could not be overwritten is on
/// a branch that failed (its sum files are not used again) or out of room.
fn put_entries(p: &impl Parts, b: usize, k0: u64, e: &[u8]) {
    if let Err(err) = write_entries(p, b, k0, e) {
        log::debug!("checksums of branch {b}'s part not written: {err}");
    }
}

fn write_entries(p: &impl Parts, b: usize, k0: u64, e: &[u8]) -> io::Result<()> {
    write_all(|buf, off| p.sums_pwrite(b, buf, off), e, k0 * ENTRY)
}

/// How a part's attribute holds its entries (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Held {
    /// In the home part's record attribute ([`crate::layout::XATTR`]), after the record and
    /// a NUL.
    InRecord,
    /// In [`XATTR_NAME`] of the home part, after the file's record id (files that gained
    /// checksums in the release before).
    Apart,
}

/// The calls on where one part's entries are kept in an attribute (of its home part, and the
/// overflow file), made by each [`Parts`] with its own accounting.
pub trait XattrIo {
    /// The entries the part's attribute holds, into `buf` (at most [`WINDOW`] bytes): their
    /// length, 0 when it holds none or names another file ([`entries_in`]).
    fn get(&self, buf: &mut [u8]) -> io::Result<usize>;
    /// Makes `entries` what the part's attribute holds ([`with_entries`]).
    fn set(&self, entries: &[u8]) -> io::Result<()>;
    /// Runs `f` with the part's attribute to itself (its updates read, change and write the
    /// whole value).
    fn locked<R>(&self, f: impl FnOnce() -> R) -> R;
    /// `pread` of the overflow file; 0 when there is none.
    fn over_pread(&self, buf: &mut [u8], off: u64) -> io::Result<usize>;
    /// `pwrite` of the overflow file, made first where there is none.
    fn over_pwrite(&self, buf: &[u8], off: u64) -> io::Result<usize>;
    /// `ftruncate` of the overflow file, if there is one.
    fn over_truncate(&self, len: u64) -> io::Result<()>;
}

/// A part's checksum entries as the mount last read or wrote them (see
/// [`crate::inode::FileState::xcache`]).
#[derive(Debug)]
pub struct CachedAttr {
    /// The part's branch.
    pub b: usize,
    /// Its home branch, where the attribute is.
    pub h: usize,
    /// How the attribute holds them.
    pub how: Held,
    /// The home part.
    pub fd: std::sync::Arc<std::os::fd::OwnedFd>,
    /// The entries (empty: none).
    pub value: Vec<u8>,
    /// Changed since written.
    pub dirty: bool,
}

/// The longest value of [`XATTR_NAME`].
pub const APART_MAX: usize = HEAD + WINDOW;

/// The entries of file `id` in `v`, the value of its part's attribute held `how`: none when it
/// names another file (a part copied by hand), or holds none.
pub fn entries_in(v: &[u8], id: u64, how: Held) -> &[u8] {
    let e = match how {
        Held::Apart if v.len() >= HEAD && v[..HEAD] == id.to_le_bytes() => &v[HEAD..],
        Held::InRecord => {
            let rec = crate::layout::record_of(v);
            let ours = crate::layout::Meta::decode(rec).is_some_and(|m| m.id() == id);
            match v.get(rec.len() + 1..) {
                Some(e) if ours => e,
                _ => &[],
            }
        }
        Held::Apart => &[],
    };
    &e[..(e.len() / ENTRY as usize * ENTRY as usize).min(WINDOW)]
}

/// Puts in `out` a value of [`crate::layout::XATTR`] made of `record` and, with `entries`, a
/// NUL and them (none at all still marks the part as keeping its entries there); returns its
/// length.
fn compose(
    out: &mut [u8; crate::layout::ATTR_MAX],
    record: &[u8],
    entries: Option<&[u8]>,
) -> usize {
    let r = record.len().min(crate::layout::META_MAX);
    out[..r].copy_from_slice(&record[..r]);
    let Some(entries) = entries else {
        return r;
    };
    let e = entries.len().min(WINDOW);
    out[r] = 0;
    out[r + 1..r + 1 + e].copy_from_slice(&entries[..e]);
    r + 1 + e
}

/// What a record written with [`with_record`] has after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After<'a> {
    /// What the attribute it replaces had (read first).
    Kept,
    /// Nothing (a part known to keep no entries there).
    Nothing,
    /// These entries (the mount's cached ones).
    Entries(&'a [u8]),
}

/// The result of a `getxattr` into a buffer as long as any value RAIF writes: 0 bytes where
/// there is no value, or a longer one (not RAIF's).
#[inline]
pub fn absent_is_empty(r: io::Result<usize>) -> io::Result<usize> {
    match r {
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENODATA | libc::ERANGE)) => Ok(0),
        r => r,
    }
}

/// Reads a value of [`crate::layout::XATTR`] with `get`: its length in `v` (0 when there is
/// none, or it is longer than any RAIF writes).
fn get_record_attr(
    get: impl FnOnce(&mut [u8]) -> io::Result<usize>,
    v: &mut [u8; crate::layout::ATTR_MAX],
) -> io::Result<usize> {
    absent_is_empty(get(v))
}

/// Makes `entries` what a part's [`crate::layout::XATTR`] holds after its record: reads the
/// value with `get` and writes it with `set`, the record kept. A part with no record is not
/// one (`ENODATA`).
pub fn with_entries(
    get: impl FnOnce(&mut [u8]) -> io::Result<usize>,
    set: impl FnOnce(&[u8]) -> io::Result<()>,
    entries: &[u8],
) -> io::Result<()> {
    let mut v = [0u8; crate::layout::ATTR_MAX];
    let n = get_record_attr(get, &mut v)?;
    let rec = crate::layout::record_of(&v[..n]);
    if rec.is_empty() {
        return Err(io::Error::from_raw_os_error(libc::ENODATA));
    }
    let mut out = [0u8; crate::layout::ATTR_MAX];
    let m = compose(&mut out, rec, Some(entries));
    set(&out[..m])
}

/// Writes `record` as a part's record (its attribute read with `get`, written with `set`),
/// followed by what `after` says.
pub fn with_record(
    get: impl FnOnce(&mut [u8]) -> io::Result<usize>,
    set: impl FnOnce(&[u8]) -> io::Result<()>,
    record: &[u8],
    after: After,
) -> io::Result<()> {
    let mut v = [0u8; crate::layout::ATTR_MAX];
    let old = match after {
        After::Entries(e) => Some(e),
        After::Nothing => None,
        After::Kept => {
            let n = get_record_attr(get, &mut v)?;
            let r = crate::layout::record_of(&v[..n]).len();
            v.get(r + 1..n)
        }
    };
    let mut out = [0u8; crate::layout::ATTR_MAX];
    let m = compose(&mut out, record, old);
    set(&out[..m])
}

/// How the home part `fd` holds the checksum entries of the part before it, if in an
/// attribute: after its record (a NUL follows the record), or in [`XATTR_NAME`]. Each
/// `fgetxattr` is made through `call` (which counts it).
pub fn held_by(
    fd: std::os::fd::BorrowedFd,
    call: impl Fn(&mut dyn FnMut() -> io::Result<usize>) -> io::Result<usize>,
) -> io::Result<Option<Held>> {
    use fsprof_fuse::sys::fgetxattr;
    let mut v = [0u8; crate::layout::ATTR_MAX];
    let rec = std::ffi::OsStr::new(crate::layout::XATTR);
    let n = call(&mut || absent_is_empty(fgetxattr(fd, rec, &mut v)))?;
    if crate::layout::record_of(&v[..n]).len() < n {
        return Ok(Some(Held::InRecord));
    }
    let apart = std::ffi::OsStr::new(XATTR_NAME);
    match call(&mut || fgetxattr(fd, apart, &mut [])) {
        Ok(_) => Ok(Some(Held::Apart)),
        Err(e) if e.raw_os_error() == Some(libc::ENODATA) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The value of [`XATTR_NAME`] for file `id` holding `entries`, into `out`; its length.
pub fn apart_value(out: &mut [u8; APART_MAX], id: u64, entries: &[u8]) -> usize {
    let e = entries.len().min(WINDOW);
    out[..HEAD].copy_from_slice(&id.to_le_bytes());
    out[HEAD..HEAD + e].copy_from_slice(&entries[..e]);
    HEAD + e
}

/// The entries of one part kept in an attribute, seen as one array of bytes (see the module
/// docs): what a [`Parts`] answers for [`Parts::sums_pread`] and the others when the part
/// keeps them so.
pub struct Xattr<'a, X: XattrIo>(pub &'a X);

impl<X: XattrIo> Xattr<'_, X> {
    /// Fills `buf` with the entry bytes at `off` (unknown ones 0); returns its length.
    pub fn pread(&self, buf: &mut [u8], off: u64) -> io::Result<usize> {
        let (io, w) = (self.0, WINDOW as u64);
        let end = off + buf.len() as u64;
        if off < w {
            let n = (end.min(w) - off) as usize;
            let mut v = [0u8; WINDOW];
            let len = io.get(&mut v)?.min(WINDOW);
            let at = off as usize;
            let have = len.saturating_sub(at).min(n);
            if have > 0 {
                buf[..have].copy_from_slice(&v[at..at + have]);
            }
            buf[have..n].fill(0);
        }
        if end > w {
            let s = off.max(w);
            let rest = &mut buf[(s - off) as usize..];
            let done = read_at_most(|b, o| io.over_pread(b, o), rest, s)?;
            rest[done..].fill(0);
        }
        Ok(buf.len())
    }

    /// Writes the entry bytes `buf` at `off`; returns its length.
    pub fn pwrite(&self, buf: &[u8], off: u64) -> io::Result<usize> {
        let (io, w) = (self.0, WINDOW as u64);
        let end = off + buf.len() as u64;
        if off < w {
            let n = (end.min(w) - off) as usize;
            io.locked(|| {
                let mut v = [0u8; WINDOW];
                let len = io.get(&mut v)?.min(WINDOW);
                let at = off as usize;
                // Entries between the old end and this write's start stay unknown.
                if at > len {
                    v[len..at].fill(0);
                }
                v[at..at + n].copy_from_slice(&buf[..n]);
                io.set(&v[..len.max(at + n)])
            })?;
        }
        if end > w {
            let s = off.max(w);
            write_all(|b, o| io.over_pwrite(b, o), &buf[(s - off) as usize..], s)?;
        }
        Ok(buf.len())
    }

    /// Keeps the first `len` entry bytes.
    pub fn truncate(&self, len: u64) -> io::Result<()> {
        let io = self.0;
        if len < WINDOW as u64 {
            io.locked(|| {
                let mut v = [0u8; WINDOW];
                let have = io.get(&mut v)?.min(WINDOW);
                if have > len as usize {
                    io.set(&v[..len as usize])?;
                }
                Ok::<_, io::Error>(())
            })?;
        }
        // The overflow file's first bytes are never read: it may as well be empty.
        io.over_truncate(if len > WINDOW as u64 { len } else { 0 })
    }
}

/// Writes all of `buf` at `off` with `pwrite` (a write of nothing: out of room).
fn write_all(
    mut pwrite: impl FnMut(&[u8], u64) -> io::Result<usize>,
    buf: &[u8],
    off: u64,
) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        match pwrite(&buf[done..], off + done as u64) {
            Ok(0) => return Err(io::Error::from_raw_os_error(libc::ENOSPC)),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Checks block `k` (its bytes `block`, the rest zeros) against entry `want`.
#[inline]
fn check(b: usize, k: u64, block: &[u8], want: u32) -> io::Result<()> {
    if want != 0 && crc(block) != want {
        return Err(BadBlock {
            branch: b,
            offset: k * BLOCK,
        }
        .into_error());
    }
    Ok(())
}

/// Recomputes, without verifying anything, the entries of `b`'s part over bytes
/// `[off, off + len)` from what the part holds now (after a crash, from the rows the intent
/// log named; after a rebuild or `scrub --add-checksums`, from a part taken as right).
pub fn resum(p: &impl Parts, b: usize, off: u64, len: u64) -> io::Result<()> {
    if len == 0 || !p.has_sums(b) {
        return Ok(());
    }
    let k0 = off / BLOCK;
    let k1 = (off + len).div_ceil(BLOCK);
    // In steps of 256 blocks (1 MiB of data, 1 KiB of entries); the holes of a sparse part
    // are skipped (their entries are left as they are: unknown in a new sum file).
    let mut k = k0;
    while k < k1 {
        match p.next_data(b, k * BLOCK) {
            None => break,
            Some(d) => k = k.max(d / BLOCK),
        }
        if k >= k1 {
            break;
        }
        let n = (k1 - k).min(256) as usize;
        with_bufs(n * BS, n, |data, e| -> io::Result<()> {
            let got = read_upto(p, b, data, k * BLOCK)?;
            for i in 0..n {
                let s = (i * BS).min(got);
                let t = ((i + 1) * BS).min(got);
                set_entry(e, i, crc(&data[s..t]));
            }
            write_entries(p, b, k, e)
        })?;
        k += n as u64;
    }
    Ok(())
}

/// The blocks among the first `plen` bytes of `b`'s part that hold data but whose entries are
/// unknown (0, or past the end of where they are kept; a removed or cut attribute reads so):
/// how many, and the part offset of the first. Blocks in holes are unknown rightly and not
/// counted.
pub fn unknown(p: &impl Parts, b: usize, plen: u64) -> io::Result<(u64, Option<u64>)> {
    let (mut count, mut first) = (0, None);
    let end = plen.div_ceil(BLOCK);
    let mut e = [0u8; WINDOW];
    let mut k = 0;
    while k < end {
        match p.next_data(b, k * BLOCK) {
            None => break,
            Some(d) => k = k.max(d / BLOCK),
        }
        if k >= end {
            break;
        }
        let n = (end - k).min(IN_XATTR);
        read_entries(p, b, k, &mut e[..(n * ENTRY) as usize])?;
        let mut i = 0;
        while i < n {
            if entry(&e, i as usize) == 0 {
                match p.next_data(b, (k + i) * BLOCK) {
                    None => return Ok((count, first)),
                    // In a hole: go on where data starts.
                    Some(d) if d >= (k + i + 1) * BLOCK => {
                        i = d / BLOCK - k;
                        continue;
                    }
                    Some(_) => {
                        count += 1;
                        first.get_or_insert((k + i) * BLOCK);
                    }
                }
            }
            i += 1;
        }
        k += n;
    }
    Ok((count, first))
}

/// Marks the entries of `b`'s blocks over `[off, off + len)` unknown (after a hole was punched
/// there: what the blocks at its edges hold is recomputed by the caller).
pub fn forget(p: &impl Parts, b: usize, off: u64, len: u64) {
    if len == 0 || !p.has_sums(b) {
        return;
    }
    let (k0, k1) = (off / BLOCK, (off + len).div_ceil(BLOCK));
    let zeros = [0u8; 4096];
    let mut k = k0;
    while k < k1 {
        let n = (k1 - k).min(zeros.len() as u64 / ENTRY);
        put_entries(p, b, k, &zeros[..(n * ENTRY) as usize]);
        k += n;
    }
}

/// The [`Parts`] of an operation with checksums: see the module docs.
pub struct Summed<'a, P: Parts>(pub &'a P, pub Ends);

/// Where each part's bytes ended when an operation began, if known, and how far the operation
/// has written since: a block past both holds nothing yet, so a write there reads neither the
/// old block nor its entry (appends to a file, a new file's writes).
pub struct Ends {
    sized: Option<(Layout, u64)>,
    written: [std::cell::Cell<u64>; crate::layout::MAX_BRANCHES],
}

impl Ends {
    /// Nothing known: every block is read before it is changed in part.
    pub fn unknown() -> Ends {
        Ends {
            sized: None,
            written: std::array::from_fn(|_| std::cell::Cell::new(0)),
        }
    }

    /// The parts of a file of layout `l` and logical size `size` (each part exactly as long
    /// as `l.part_size` says, as the mount keeps them).
    pub fn of(l: &Layout, size: u64) -> Ends {
        Ends {
            sized: Some((*l, size)),
            ..Ends::unknown()
        }
    }

    /// Where `b`'s known bytes end (`None`: not known).
    #[inline]
    fn end(&self, b: usize) -> Option<u64> {
        let (l, size) = self.sized?;
        Some(l.part_size(b, size).max(self.written[b].get()))
    }

    /// Whether block `k` of `b`'s part lies wholly past its bytes.
    #[inline]
    fn past(&self, b: usize, k: u64) -> bool {
        self.end(b).is_some_and(|e| k * BLOCK >= e)
    }

    #[inline]
    fn wrote(&self, b: usize, end: u64) {
        if end > self.written[b].get() {
            self.written[b].set(end);
        }
    }
}

impl<P: Parts> Summed<'_, P> {
    /// Verified `pread`: reads whole blocks, checks those with a known entry, and copies out
    /// the bytes asked for.
    fn verified_read(&self, b: usize, buf: &mut [u8], off: u64) -> io::Result<usize> {
        let p = self.0;
        let end = off + buf.len() as u64;
        let k0 = off / BLOCK;
        let nb = (end.div_ceil(BLOCK) - k0) as usize;
        let a0 = k0 * BLOCK;
        let aligned = off == a0 && buf.len() % BS == 0;
        with_bufs(if aligned { 0 } else { nb * BS }, nb, |bounce, e| {
            read_entries(p, b, k0, e)?;
            if (0..nb).all(|i| entry(e, i) == 0) {
                return p.pread(b, buf, off);
            }
            let (data, skip) = if aligned {
                (&mut *buf, 0)
            } else {
                (&mut *bounce, (off - a0) as usize)
            };
            let got = read_upto(p, b, data, a0)?;
            for i in 0..nb {
                let s = (i * BS).min(got);
                let t = ((i + 1) * BS).min(got);
                check(b, k0 + i as u64, &data[s..t], entry(e, i))?;
            }
            let n = got.saturating_sub(skip).min(buf.len());
            if !aligned {
                buf[..n].copy_from_slice(&bounce[skip..skip + n]);
            }
            Ok(n)
        })
    }

    /// Write with checksums: verifies the blocks changed only in part, writes the data, then
    /// their entries (cleared first where the write fails).
    fn summed_write(&self, b: usize, buf: &[u8], off: u64) -> io::Result<usize> {
        let p = self.0;
        let end = off + buf.len() as u64;
        let k0 = off / BLOCK;
        let k1 = end.div_ceil(BLOCK);
        let nb = (k1 - k0) as usize;
        let head = off % BLOCK != 0;
        let tail = end % BLOCK != 0 && (k1 - 1 > k0 || !head);
        let ends = &self.1;
        with_bufs(2 * BS, nb, |edges, e| {
            // Blocks past the part's end hold nothing: no entry, no old bytes to read.
            if !ends.past(b, k0) {
                read_entries(p, b, k0, e)?;
            }
            let (hb, tb) = edges.split_at_mut(BS);
            if head {
                let got = if ends.past(b, k0) {
                    0
                } else {
                    let got = read_upto(p, b, hb, k0 * BLOCK)?;
                    check(b, k0, &hb[..got], entry(e, 0))?;
                    got
                };
                hb[got..].fill(0);
            }
            if tail {
                let got = if ends.past(b, k1 - 1) {
                    0
                } else {
                    let got = read_upto(p, b, tb, (k1 - 1) * BLOCK)?;
                    check(b, k1 - 1, &tb[..got], entry(e, nb - 1))?;
                    got
                };
                tb[got..].fill(0);
            }
            let written = write_full(p, b, buf, off);
            ends.wrote(b, end);
            if let Err(err) = written {
                // What reached the part is not known: leave those blocks unverified.
                e.fill(0);
                put_entries(p, b, k0, e);
                return Err(err);
            }
            for i in 0..nb {
                let k = k0 + i as u64;
                let bs = k * BLOCK;
                let v = if i == 0 && head {
                    let at = (off - bs) as usize;
                    let n = (BS - at).min(buf.len());
                    hb[at..at + n].copy_from_slice(&buf[..n]);
                    crc(hb)
                } else if i == nb - 1 && tail {
                    let n = (end - bs) as usize;
                    tb[..n].copy_from_slice(&buf[(bs - off) as usize..]);
                    crc(tb)
                } else {
                    let s = (bs - off) as usize;
                    crc(&buf[s..s + BS])
                };
                set_entry(e, i, v);
            }
            put_entries(p, b, k0, e);
            Ok(buf.len())
        })
    }

    fn summed_truncate(&self, b: usize, len: u64) -> io::Result<()> {
        let p = self.0;
        let k = len / BLOCK;
        let part = len % BLOCK;
        with_bufs(BS, 1, |blk, e| {
            if part != 0 {
                read_entries(p, b, k, e)?;
                let got = read_upto(p, b, blk, k * BLOCK)?;
                check(b, k, &blk[..got], entry(e, 0))?;
                // A part that grows inside its last block gains zeros there (the buffer
                // holds whatever it held before).
                blk[got..].fill(0);
            }
            p.truncate(b, len)?;
            if let Err(err) = p.sums_truncate(b, len.div_ceil(BLOCK) * ENTRY) {
                log::debug!("checksums of branch {b}'s part not cut: {err}");
            }
            if part != 0 && entry(e, 0) != 0 {
                set_entry(e, 0, crc(&blk[..part as usize]));
                put_entries(p, b, k, e);
            }
            Ok(())
        })
    }
}

impl<P: Parts> Parts for Summed<'_, P> {
    #[inline]
    fn usable(&self, b: usize) -> bool {
        self.0.usable(b)
    }
    fn pread(&self, b: usize, buf: &mut [u8], off: u64) -> io::Result<usize> {
        if buf.is_empty() || !self.0.has_sums(b) {
            return self.0.pread(b, buf, off);
        }
        self.verified_read(b, buf, off)
    }
    fn pwrite(&self, b: usize, buf: &[u8], off: u64) -> io::Result<usize> {
        if buf.is_empty() || !self.0.has_sums(b) {
            return self.0.pwrite(b, buf, off);
        }
        self.summed_write(b, buf, off)
    }
    fn truncate(&self, b: usize, len: u64) -> io::Result<()> {
        if !self.0.has_sums(b) {
            return self.0.truncate(b, len);
        }
        self.summed_truncate(b, len)
    }
    fn failed(&self, b: usize, e: &io::Error, missed: bool) -> bool {
        self.0.failed(b, e, missed)
    }
    fn out_of_date(&self, what: OutOfDate) {
        self.0.out_of_date(what)
    }
    fn parity_stale(&self) -> bool {
        self.0.parity_stale()
    }
    fn next_data(&self, b: usize, off: u64) -> Option<u64> {
        self.0.next_data(b, off)
    }
    fn intent(&self, start: u64, len: u64, written: u64, how: How) -> io::Result<()> {
        self.0.intent(start, len, written, how)
    }
    fn has_sums(&self, b: usize) -> bool {
        self.0.has_sums(b)
    }
    fn sums_pread(&self, b: usize, buf: &mut [u8], off: u64) -> io::Result<usize> {
        self.0.sums_pread(b, buf, off)
    }
    fn sums_pwrite(&self, b: usize, buf: &[u8], off: u64) -> io::Result<usize> {
        self.0.sums_pwrite(b, buf, off)
    }
    fn sums_truncate(&self, b: usize, len: u64) -> io::Result<()> {
        self.0.sums_truncate(b, len)
    }
    fn put_block(&self, b: usize, bytes: &[u8], off: u64) -> io::Result<()> {
        write_full(self.0, b, bytes, off)?;
        if self.0.has_sums(b) {
            with_bufs(0, 1, |_, e| {
                set_entry(e, 0, crc(bytes));
                put_entries(self.0, b, off / BLOCK, e)
            });
        }
        Ok(())
    }
    fn checksum_event(&self, bad: BadBlock, repaired: bool) {
        self.0.checksum_event(bad, repaired)
    }
}

/// Where in the part a bad block of `l`'s branch `b` at part offset `off` lies in the file:
/// the logical offset of its first data byte, if it holds data (a parity block holds none).
pub fn logical(l: &Layout, b: usize, off: u64) -> Option<u64> {
    if l.level == Level::Raif1 {
        return Some(off);
    }
    let su = l.stripe as u64;
    let row = off / su;
    match l.role(b, row) {
        crate::layout::Role::Data(c) => Some(l.unit_start(row, c) + off % su),
        crate::layout::Role::Parity => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_pads_with_zeros() {
        let mut full = [0u8; BS];
        full[..3].copy_from_slice(b"abc");
        assert_eq!(crc(b"abc"), crc(&full));
        assert_eq!(crc(&[]), crc(&[0u8; BS]));
        assert_ne!(crc(b"abc"), crc(b"abd"));
    }

    /// A part's record attribute and an overflow file in memory.
    struct Mem {
        id: u64,
        attr: RefCell<Vec<u8>>,
        over: RefCell<Option<Vec<u8>>>,
    }

    fn record(id: u64) -> Vec<u8> {
        crate::layout::Meta::Dir(id).encode().as_bytes().to_vec()
    }

    impl Mem {
        fn new(id: u64) -> Mem {
            Mem {
                id,
                attr: RefCell::new(record(id)),
                over: RefCell::new(None),
            }
        }
        fn raw_get(&self, buf: &mut [u8]) -> io::Result<usize> {
            let v = self.attr.borrow();
            if v.len() > buf.len() {
                return Err(io::Error::from_raw_os_error(libc::ERANGE));
            }
            buf[..v.len()].copy_from_slice(&v);
            Ok(v.len())
        }
    }

    impl XattrIo for Mem {
        fn get(&self, buf: &mut [u8]) -> io::Result<usize> {
            let mut v = [0u8; crate::layout::ATTR_MAX];
            let n = match self.raw_get(&mut v) {
                Ok(n) => n,
                Err(_) => return Ok(0),
            };
            let e = entries_in(&v[..n], self.id, Held::InRecord);
            buf[..e.len()].copy_from_slice(e);
            Ok(e.len())
        }
        fn set(&self, entries: &[u8]) -> io::Result<()> {
            with_entries(
                |b| self.raw_get(b),
                |v| {
                    *self.attr.borrow_mut() = v.to_vec();
                    Ok(())
                },
                entries,
            )
        }
        fn locked<R>(&self, f: impl FnOnce() -> R) -> R {
            f()
        }
        fn over_pread(&self, buf: &mut [u8], off: u64) -> io::Result<usize> {
            self.over
                .borrow()
                .as_ref()
                .map_or(Ok(0), |v| rd(v, buf, off))
        }
        fn over_pwrite(&self, buf: &[u8], off: u64) -> io::Result<usize> {
            rw(
                self.over.borrow_mut().get_or_insert_with(Vec::new),
                buf,
                off,
            )
        }
        fn over_truncate(&self, len: u64) -> io::Result<()> {
            if let Some(v) = self.over.borrow_mut().as_mut() {
                v.resize(len as usize, 0);
            }
            Ok(())
        }
    }

    #[test]
    fn entries_map_onto_the_record_attribute_then_the_overflow_file() {
        let m = Mem::new(0x1234);
        let rec = record(0x1234);
        let x = Xattr(&m);
        let w = WINDOW as u64;
        // Nothing kept: every entry unknown, and no overflow file made by a read.
        let mut e = [0xffu8; 16];
        assert_eq!(x.pread(&mut e, 8).unwrap(), 16);
        assert_eq!(e, [0; 16]);
        assert!(m.over.borrow().is_none());
        assert_eq!(*m.attr.borrow(), rec, "a read changes nothing");
        // A small part: entries in the attribute only, after the record and a NUL.
        x.pwrite(&[1, 2, 3, 4], 4).unwrap();
        let v = m.attr.borrow().clone();
        assert_eq!(&v[..rec.len()], &rec[..]);
        assert_eq!(&v[rec.len()..], &[0, 0, 0, 0, 0, 1, 2, 3, 4]);
        assert_eq!(
            crate::layout::Meta::decode(&v),
            Some(crate::layout::Meta::Dir(0x1234))
        );
        assert!(
            m.over.borrow().is_none(),
            "no overflow file for a small part"
        );
        // A new record keeps the entries; given entries replace them.
        let set = |v: &[u8]| {
            *m.attr.borrow_mut() = v.to_vec();
            Ok(())
        };
        let rec2 = record(0x1234_0000_0000);
        with_record(|b| m.raw_get(b), set, &rec2, After::Kept).unwrap();
        assert_eq!(&m.attr.borrow()[rec2.len()..], &[0, 0, 0, 0, 0, 1, 2, 3, 4]);
        with_record(|b| m.raw_get(b), set, &rec, After::Entries(&[5; 4])).unwrap();
        assert_eq!(&m.attr.borrow()[rec.len()..], &[0, 5, 5, 5, 5]);
        with_record(|b| m.raw_get(b), set, &rec, After::Entries(&[])).unwrap();
        assert_eq!(
            m.attr.borrow()[rec.len()..],
            [0],
            "no entries, but kept here"
        );
        with_record(|b| m.raw_get(b), set, &rec2, After::Kept).unwrap();
        assert_eq!(m.attr.borrow()[rec2.len()..], [0], "the mark kept");
        with_record(|b| m.raw_get(b), set, &rec, After::Nothing).unwrap();
        assert_eq!(*m.attr.borrow(), rec, "nothing: the record alone");
        x.pwrite(&[1, 2, 3, 4], 4).unwrap();
        // A write across the attribute's end: the rest goes to the overflow file, at the
        // entries' own offsets.
        let data: Vec<u8> = (0..16).collect();
        x.pwrite(&data, w - 8).unwrap();
        assert_eq!(m.attr.borrow().len(), rec.len() + 1 + WINDOW);
        let over = m.over.borrow().clone().unwrap();
        assert_eq!(over.len() as u64, w + 8);
        assert_eq!(&over[WINDOW..], &data[8..]);
        let mut back = [0u8; 16];
        x.pread(&mut back, w - 8).unwrap();
        assert_eq!(back.to_vec(), data);
        // Cut inside the attribute: it shrinks, the overflow file empties.
        x.truncate(8).unwrap();
        assert_eq!(m.attr.borrow().len(), rec.len() + 1 + 8);
        assert_eq!(m.over.borrow().as_ref().unwrap().len(), 0);
        x.pread(&mut back, 0).unwrap();
        assert_eq!(back, [0, 0, 0, 0, 1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0]);
        // Another file's record (a part copied by hand): its entries count as none, and
        // a write replaces them, that record kept.
        let other = Mem::new(0x9999);
        *other.attr.borrow_mut() = m.attr.borrow().clone();
        let ox = Xattr(&other);
        ox.pread(&mut back, 0).unwrap();
        assert_eq!(back, [0; 16]);
        ox.pwrite(&[9; 4], 8).unwrap();
        assert_eq!(
            &other.attr.borrow()[rec.len()..],
            &[0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 9, 9, 9]
        );
        // A value longer than any written (not ours): empty too.
        let mut long = rec.clone();
        long.resize(crate::layout::ATTR_MAX + 64, 7);
        *m.attr.borrow_mut() = long;
        x.pread(&mut back, 0).unwrap();
        assert_eq!(back, [0; 16]);
        // The attribute of the release before: entries after the file's record id.
        let mut apart = [0u8; APART_MAX];
        let n = apart_value(&mut apart, 0x1234, &[1, 2, 3, 4, 5]);
        assert_eq!(entries_in(&apart[..n], 0x1234, Held::Apart), &[1, 2, 3, 4]);
        assert!(entries_in(&apart[..n], 0x1235, Held::Apart).is_empty());
    }

    /// Parts and their sum files in memory.
    struct MemParts {
        data: RefCell<Vec<Vec<u8>>>,
        sums: RefCell<Vec<Vec<u8>>>,
    }

    fn rw(v: &mut Vec<u8>, buf: &[u8], off: u64) -> io::Result<usize> {
        let end = off as usize + buf.len();
        if v.len() < end {
            v.resize(end, 0);
        }
        v[off as usize..end].copy_from_slice(buf);
        Ok(buf.len())
    }

    fn rd(v: &[u8], buf: &mut [u8], off: u64) -> io::Result<usize> {
        let s = (off as usize).min(v.len());
        let n = (v.len() - s).min(buf.len());
        buf[..n].copy_from_slice(&v[s..s + n]);
        Ok(n)
    }

    impl Parts for MemParts {
        fn usable(&self, _b: usize) -> bool {
            true
        }
        fn pread(&self, b: usize, buf: &mut [u8], off: u64) -> io::Result<usize> {
            rd(&self.data.borrow()[b], buf, off)
        }
        fn pwrite(&self, b: usize, buf: &[u8], off: u64) -> io::Result<usize> {
            rw(&mut self.data.borrow_mut()[b], buf, off)
        }
        fn truncate(&self, b: usize, len: u64) -> io::Result<()> {
            self.data.borrow_mut()[b].resize(len as usize, 0);
            Ok(())
        }
        fn failed(&self, _b: usize, _e: &io::Error, _missed: bool) -> bool {
            true
        }
        fn out_of_date(&self, _what: OutOfDate) {}
        fn parity_stale(&self) -> bool {
            false
        }
        fn has_sums(&self, _b: usize) -> bool {
            true
        }
        fn sums_pread(&self, b: usize, buf: &mut [u8], off: u64) -> io::Result<usize> {
            rd(&self.sums.borrow()[b], buf, off)
        }
        fn sums_pwrite(&self, b: usize, buf: &[u8], off: u64) -> io::Result<usize> {
            rw(&mut self.sums.borrow_mut()[b], buf, off)
        }
        fn sums_truncate(&self, b: usize, len: u64) -> io::Result<()> {
            self.sums.borrow_mut()[b].resize(len as usize, 0);
            Ok(())
        }
    }

    #[test]
    fn a_part_grown_inside_its_last_block_gets_the_checksum_of_zeros_there() {
        let p = MemParts {
            data: RefCell::new(vec![Vec::new(), Vec::new()]),
            sums: RefCell::new(vec![Vec::new(), Vec::new()]),
        };
        let s = Summed(&p, Ends::unknown());
        // Part 1: a full block of 0xab; a read of part of it leaves the block in this thread's
        // buffer.
        s.pwrite(1, &[0xab; BS], 0).unwrap();
        let mut some = [0u8; 100];
        s.pread(1, &mut some, 7).unwrap();
        assert_eq!(some, [0xab; 100]);
        // Part 0: 827 bytes, then grown to 1052 inside its block: the block holds 225 zeros
        // more, and its checksum says so.
        s.pwrite(0, &[0x41; 827], 0).unwrap();
        s.truncate(0, 1052).unwrap();
        let part = p.data.borrow()[0].clone();
        assert_eq!(part.len(), 1052);
        let entry = u32::from_le_bytes(p.sums.borrow()[0][..4].try_into().unwrap());
        assert_eq!(entry, crc(&part));
        let mut back = vec![0u8; 1052];
        assert_eq!(s.pread(0, &mut back, 0).unwrap(), 1052);
        assert_eq!(back, part);
    }

    #[test]
    fn sum_files_live_on_the_next_branch() {
        assert_eq!(home(0, 3), Some(1));
        assert_eq!(home(2, 3), Some(0));
        assert_eq!(home(0, 1), None);
        assert_eq!(name(0xab, 2), "00000000000000ab.2");
    }
}
