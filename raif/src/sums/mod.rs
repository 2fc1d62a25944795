//! Block checksums: a CRC-32C of every [`BLOCK`]-byte block of every part (a RAIF1 copy, a
//! RAIF0/4/5 data or parity part), kept away from the part it covers.
//!
//! # Where
//!
//! The checksums of branch `b`'s part of a file are kept on the *next* branch,
//! `(b + 1) % width` ([`home`]), which holds a part of the same file: a lost or misdirected
//! write on one branch cannot damage a block and the checksum that covers it. Parts stay plain
//! files (a RAIF1 copy is byte for byte the file, a data part holds only data).
//!
//! The entries of the first [`IN_XATTR`] blocks follow the file's record in the home part's
//! record attribute ([`crate::layout::XATTR`]), after a NUL; those of the blocks after them are
//! in the *overflow file* `.raif-sums/<id>.<b>` at the root of the home branch (`id` the
//! file's record id, 16 hex digits), made only once a part grows that far. A small file costs
//! no file of its own, and no attribute of its own either: a record and a few entries fit
//! together in an ext4 inode's own attribute space (a 256-byte inode has 96 bytes), where a
//! second attribute needs a block of its own, which ext4 allocates at the first write and
//! frees at the unlink, each a journal update. Creating and removing sum files, and then those
//! blocks, was most of what checksums cost a small-file workload.
//!
//! The home part says whether the part keeps checksums: its record is followed by a NUL. Hard
//! links share the part and so the attribute (and the record id, so the overflow files); a
//! rename touches neither; the last unlink removes the overflow files, the attribute goes with
//! its part. Every writer of a record keeps the entries after it ([`with_record`]).
//!
//! Volumes made by the development tree before this format kept some parts' entries in an
//! attribute of their own ([`OLD_XATTR`]) or all of them in a sum file of the same name as
//! the overflow file. Those are not read: such parts count as keeping no checksums (reads are
//! not verified, scrub says so) until `raif scrub --add-checksums` gives them theirs in this
//! format, once their file is found consistent, and removes the old attribute.
//!
//! # Format
//!
//! Entry `k` (4 bytes, little-endian) is the CRC-32C of the part's bytes
//! `[k·BLOCK, (k+1)·BLOCK)`, with whatever lies past the part's end taken as zeros. In the
//! overflow file it lies at byte `4k` (its first `4·IN_XATTR` bytes are never read); in the
//! record attribute, at byte `r + 1 + 4k`, where `r` is the record's length (ASCII, with no
//! NUL). No two files' attributes are equal, so ext4 never shares one attribute block between
//! parts, which would serialize their updates. An entry of 0 (or one past the end of where it is kept) is *unknown*: that
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

mod entries;
mod summed;

use std::cell::RefCell;
use std::io;

use crate::layout::{Layout, Level, WINDOW};
use crate::part_io::{BadBlock, Parts, own_limits};
use crate::reserved::SUM_DIR;

pub use entries::{
    After, CachedAttr, Xattr, XattrIo, absent_is_empty, entries_in, held_by, with_entries,
    with_record,
};
pub use summed::{Ends, Summed};

/// Bytes covered by one checksum.
pub const BLOCK: u64 = 4096;
const BS: usize = BLOCK as usize;
/// Bytes per entry.
pub const ENTRY: u64 = 4;
/// The attribute in which volumes made by the development tree kept some parts' first entries
/// (hidden from the mount, as every `user.raif*` attribute). Not read: `raif scrub
/// --add-checksums` removes it when it gives the part checksums after its record.
pub const OLD_XATTR: &str = "user.raif.sums";
/// Blocks whose entries the attribute holds (1 MiB of part, 1 KiB of entries: within what
/// ext4 allows one attribute, a block less its headers); those after them are in the overflow
/// file.
pub const IN_XATTR: u64 = WINDOW as u64 / ENTRY;

/// Removes [`OLD_XATTR`] from the home part `fd`, if it has it.
pub fn drop_old_xattr(fd: std::os::fd::BorrowedFd) -> io::Result<()> {
    match fsprof_fuse::sys::removexattr_fd(fd, std::ffi::OsStr::new(OLD_XATTR)) {
        Err(e) if e.raw_os_error() != Some(libc::ENODATA) => Err(e),
        _ => Ok(()),
    }
}

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
/// the part's: the entries are then unknown. The daemon's own limits are the operation's
/// error ([`own_limits`]: a write must not go on without the entries it will have to change).
fn read_entries(p: &impl Parts, b: usize, k0: u64, e: &mut [u8]) -> io::Result<()> {
    let done = match read_at_most(|buf, off| p.sums_pread(b, buf, off), e, k0 * ENTRY) {
        Ok(n) => n,
        Err(err) if own_limits(&err) => return Err(err),
        Err(_) => 0,
    };
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

/// Verifies `bytes`, read from `b`'s part at `off` (a multiple of [`BLOCK`]; they end at a
/// block's end or at the part's), against the part's checksums, from block `from` of them
/// on: the first block that fails is the error ([`crate::part_io::bad_block`]). For a pass that
/// has read the bytes already (scrub, which reads each byte once).
pub fn verify(p: &impl Parts, b: usize, off: u64, bytes: &[u8], from: usize) -> io::Result<()> {
    debug_assert_eq!(off % BLOCK, 0);
    let bs = BLOCK as usize;
    let nb = bytes.len().div_ceil(bs);
    if from >= nb {
        return Ok(());
    }
    let k0 = off / BLOCK + from as u64;
    with_bufs(0, nb - from, |_, e| {
        read_entries(p, b, k0, e)?;
        for i in 0..nb - from {
            let s = (from + i) * bs;
            check(
                b,
                k0 + i as u64,
                &bytes[s..(s + bs).min(bytes.len())],
                entry(e, i),
            )?;
        }
        Ok(())
    })
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

    #[test]
    fn sum_files_live_on_the_next_branch() {
        assert_eq!(home(0, 3), Some(1));
        assert_eq!(home(2, 3), Some(0));
        assert_eq!(home(0, 1), None);
        assert_eq!(name(0xab, 2), "00000000000000ab.2");
    }

    /// Writes `buf` at `off` of the bytes `v` (grown as needed).
    pub(super) fn rw(v: &mut Vec<u8>, buf: &[u8], off: u64) -> io::Result<usize> {
        let end = off as usize + buf.len();
        if v.len() < end {
            v.resize(end, 0);
        }
        v[off as usize..end].copy_from_slice(buf);
        Ok(buf.len())
    }

    /// Reads the bytes `v` at `off` into `buf`.
    pub(super) fn rd(v: &[u8], buf: &mut [u8], off: u64) -> io::Result<usize> {
        let s = (off as usize).min(v.len());
        let n = (v.len() - s).min(buf.len());
        buf[..n].copy_from_slice(&v[s..s + n]);
        Ok(n)
    }
}
