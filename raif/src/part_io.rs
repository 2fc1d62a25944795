//! The vocabulary of I/O on a file's parts, shared by the data path ([`crate::stripe`]), the block
//! checksums ([`crate::sums`]), the write-intent log ([`crate::intent`]) and everything that
//! reads or writes parts (the mount, the admin commands, the replay): the [`Parts`] trait,
//! what a write announces ([`How`]), what a refused write leaves ([`OutOfDate`]), a block that
//! fails its checksum ([`BadBlock`]), and the errors that say a branch has no room
//! ([`no_room`]).

use std::io;
use std::os::fd::BorrowedFd;

use fsprof_fuse::sys;

use crate::layout::Layout;

/// Whether some branch holding a part of the file of layout `l` cannot be used.
#[inline]
pub fn degraded(l: &Layout, p: &(impl Parts + ?Sized)) -> bool {
    (0..l.width as usize).any(|b| l.holds(b) && !p.usable(b))
}

/// A file's parts on the branches, as the data path sees them.
pub trait Parts {
    /// Whether branch `b`'s part may be read and written.
    fn usable(&self, b: usize) -> bool;
    /// `pread(2)` on branch `b`'s part.
    fn pread(&self, b: usize, buf: &mut [u8], off: u64) -> io::Result<usize>;
    /// `pwrite(2)` on branch `b`'s part.
    fn pwrite(&self, b: usize, buf: &[u8], off: u64) -> io::Result<usize>;
    /// `ftruncate(2)` of branch `b`'s part.
    fn truncate(&self, b: usize, len: u64) -> io::Result<()>;
    /// Branch `b` answered `e` (never a [`refused`] one: those are returned to the caller).
    /// With `missed` the branch missed a change the others got (it must not be trusted again).
    /// Returns whether `b` is now unusable (the operation goes on without it) or the error
    /// should be returned.
    fn failed(&self, b: usize, e: &io::Error, missed: bool) -> bool;
    /// Part of this file could not be brought back in line with the rest after a write or
    /// truncation refused for lack of room (the branch itself is fine): see [`OutOfDate`].
    fn out_of_date(&self, what: OutOfDate);
    /// Whether this file's parity is out of date ([`OutOfDate::Parity`]): nothing may be
    /// reconstructed from it.
    fn parity_stale(&self) -> bool;
    /// Where branch `b`'s part may next hold data at or after `off` (the bytes before are
    /// holes, which read as zeros), `None` if nowhere: lets whole-file passes (rebuild, scrub)
    /// skip the holes of a sparse file instead of reading terabytes of zeros. By default
    /// data may be anywhere.
    fn next_data(&self, _b: usize, off: u64) -> Option<u64> {
        Some(off)
    }
    /// About to write logical bytes `[start, start + len)` on the branches `written`, as `how`
    /// says: the mount records its intent first (see [`crate::intent`]); an error fails the
    /// write before anything is written. By default nothing is recorded.
    fn intent(&self, _start: u64, _len: u64, _written: u64, _how: How) -> io::Result<()> {
        Ok(())
    }
    /// Whether branch `b`'s part keeps block checksums that can be read and written now (see
    /// [`crate::sums`]). By default none.
    fn has_sums(&self, _b: usize) -> bool {
        false
    }
    /// `pread(2)` on the checksum entries of branch `b`'s part, seen as one array of bytes
    /// ([`crate::sums`]).
    fn sums_pread(&self, _b: usize, _buf: &mut [u8], _off: u64) -> io::Result<usize> {
        Ok(0)
    }
    /// `pwrite(2)` on the checksum entries of branch `b`'s part.
    fn sums_pwrite(&self, _b: usize, buf: &[u8], _off: u64) -> io::Result<usize> {
        Ok(buf.len())
    }
    /// `ftruncate(2)` of the checksum entries of branch `b`'s part.
    fn sums_truncate(&self, _b: usize, _len: u64) -> io::Result<()> {
        Ok(())
    }
    /// Writes `bytes` (a whole block, or its part up to the part's end) at block offset `off`
    /// of `b`'s part, known to be right (repaired from redundancy): its checksum is set, not
    /// checked.
    fn put_block(&self, b: usize, bytes: &[u8], off: u64) -> io::Result<()> {
        write_full(self, b, bytes, off)
    }
    /// A block failed its checksum; `repaired`: it was rewritten from redundancy.
    fn checksum_event(&self, _bad: BadBlock, _repaired: bool) {}
}

/// What a refused write or truncation could not put back in line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutOfDate {
    /// RAIF1: the copy on this branch disagrees with the others: from then on `usable(b)` is
    /// false for the file, which its other copies serve.
    Copy(usize),
    /// RAIF4/5: some row's parity (or a part's length past the end) disagrees with the data
    /// units, which are right: reads take them as they are, reconstruction is refused.
    Parity,
}

/// An `EIO`: what a branch that cannot be used, or data that cannot be recovered, answers.
#[inline]
pub fn eio() -> io::Error {
    io::Error::from_raw_os_error(libc::EIO)
}

/// Whether `e` says a branch has no room for what was asked: no space (`ENOSPC`), over quota
/// (`EDQUOT`) or past its largest file (`EFBIG`). That is an answer to the request, passed to
/// the caller, not a failure of the branch.
#[inline]
pub fn no_room(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOSPC | libc::EDQUOT | libc::EFBIG)
    )
}

/// Whether `e` says the daemon itself ran out of something a request needed: descriptors
/// (`EMFILE`, `ENFILE`), memory (`ENOMEM`), or a resource to try again for (`EAGAIN`). That
/// is an answer to the request, passed to the caller; it says nothing about any branch.
#[inline]
pub fn own_limits(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOMEM | libc::EAGAIN)
    )
}

/// Whether `e` refuses a request for a reason other than the branch's health: no room on the
/// branch ([`no_room`]) or the daemon's own limits ([`own_limits`]). The data path puts the
/// file back in line as far as it can and answers with the error; no branch is failed for it.
#[inline]
pub fn refused(e: &io::Error) -> bool {
    no_room(e) || own_limits(e)
}

/// Reads `buf.len()` bytes of branch `b`'s part at `off`; what lies past its end reads as zeros.
pub fn read_full(p: &(impl Parts + ?Sized), b: usize, buf: &mut [u8], off: u64) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        match p.pread(b, &mut buf[done..], off + done as u64) {
            Ok(0) => {
                buf[done..].fill(0);
                return Ok(());
            }
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Writes all of `buf` to branch `b`'s part at `off`.
pub fn write_full(p: &(impl Parts + ?Sized), b: usize, buf: &[u8], off: u64) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        match p.pwrite(b, &buf[done..], off + done as u64) {
            Ok(0) => return Err(io::Error::from_raw_os_error(libc::ENOSPC)),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Where any part of the branches `bs` may next hold data at or after `off` (see
/// [`Parts::next_data`]).
pub fn next_data_any(p: &impl Parts, bs: impl Iterator<Item = usize>, off: u64) -> Option<u64> {
    bs.filter_map(|b| p.next_data(b, off)).min()
}

/// Makes `want.len()` bytes of branch `b`'s part at `off` equal to `want`, writing only the runs
/// of bytes that differ: after a refused write these are bytes some write put there, so
/// overwriting them needs no new room (the holes between them stay holes).
pub fn rewrite_differing(p: &impl Parts, b: usize, want: &[u8], off: u64) -> io::Result<()> {
    let mut cur = vec![0u8; want.len()];
    read_full(p, b, &mut cur, off)?;
    let mut i = 0;
    while let Some(first) = (i..want.len()).find(|&k| cur[k] != want[k]) {
        let end = (first..want.len())
            .find(|&k| cur[k] == want[k])
            .unwrap_or(want.len());
        write_full(p, b, &want[first..end], off + first as u64)?;
        i = end;
    }
    Ok(())
}

/// XORs `src` into `dst` (equal lengths).
#[inline]
pub fn xor_into(dst: &mut [u8], src: &[u8]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d ^= *s;
    }
}

/// One plain file as the only part, branch 0 (for [`read_full`], [`write_full`] and friends
/// on a file that is not a part of a striped file: a log, a part being rebuilt).
pub struct Plain<'a>(pub BorrowedFd<'a>);

impl Parts for Plain<'_> {
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
    fn out_of_date(&self, _what: OutOfDate) {}
    fn parity_stale(&self) -> bool {
        false
    }
}

/// What a write is about to do, as the data path announces it ([`Parts::intent`]).
#[derive(Debug, Clone, Copy)]
pub enum How<'a> {
    /// A write that puts nothing it does not write at risk (appends, mirror copies).
    Fresh,
    /// A write that could tear bytes it does not write: its entry must be on stable storage
    /// first.
    Overwrite,
    /// A write while a unit of the row lives only in the parity: `pp` is the XOR of the row's
    /// units other than column `col`, over `[a, a + pp.len())` of row `row`.
    Parity {
        /// Row.
        row: u64,
        /// The column written.
        col: usize,
        /// Offset in the unit.
        a: u64,
        /// The partial parity.
        pp: &'a [u8],
        /// The rest of the row holds nothing there (an append): the entry is not waited
        /// for, as a healthy append's (a killed daemon always leaves it; a power cut may lose
        /// it, and then only the row's consistency is at stake, not bytes written before).
        fresh: bool,
    },
    /// Whole rows `[first, end)` being made zeros, every unit and the parity (a hole punched
    /// while a unit of theirs lives only in the parity).
    Zeros {
        /// First row.
        first: u64,
        /// Past the last row.
        end: u64,
    },
}

/// A checksum mismatch: the block of branch `branch`'s part at byte `offset` (a multiple of
/// [`crate::sums::BLOCK`]) does not hold what its checksum says. Carried inside an [`io::Error`] of kind
/// `InvalidData`; see [`bad_block`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadBlock {
    /// The branch.
    pub branch: usize,
    /// The block's offset in the part.
    pub offset: u64,
}

impl std::fmt::Display for BadBlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "checksum mismatch on branch {} at part offset {}",
            self.branch, self.offset
        )
    }
}

impl std::error::Error for BadBlock {}

impl BadBlock {
    /// The error carrying it.
    pub fn into_error(self) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidData, self)
    }
}

/// The checksum mismatch that `e` reports, if it is one.
pub fn bad_block(e: &io::Error) -> Option<BadBlock> {
    e.get_ref()?.downcast_ref::<BadBlock>().copied()
}
