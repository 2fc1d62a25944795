//! `fallocate`: preallocation (mode 0 and `KEEP_SIZE`), hole punching (`PUNCH_HOLE`) and
//! zeroing (`ZERO_RANGE`), at every level, with copies and parity kept right.
//!
//! Preallocation reserves, on every part, the part's bytes of the range (a RAIF1 copy the range
//! itself; a striped part its units and parity of the rows the range covers), then, without
//! `KEEP_SIZE`, extends the file as a truncation up would. A branch without room answers
//! `ENOSPC` and the size stays.
//!
//! Punching and zeroing (within the file's size): the partial rows at the edges of the range
//! are written as zeros through the data path (parity updated, intent logged, as any write);
//! the whole rows between are punched on every part, parity included (a row of zero units has
//! a zero parity, and a unit of a failed branch, computed from the others, reads as zeros),
//! after their intent is logged (while degraded, as rows being zeroed, where a replay after a
//! crash writes zeros again). A part that cannot be punched gets its zeros written. Zeroing
//! then reserves the range again and, without `KEEP_SIZE`, extends the file to its end.

use std::io;
use std::os::fd::BorrowedFd;
use std::sync::atomic::Ordering;

use fsprof_fuse::filesystem::{Key, Request};
use fsprof_fuse::protocol::errno::err;
use fsprof_fuse::protocol::ops::Sys;
use fsprof_fuse::sys;

use super::open::file_of;
use super::{MountParts, Raif};
use crate::layout::{Layout, Level};
use crate::part_io::{self, How, Parts};
use crate::stripe;

const KEEP: i32 = libc::FALLOC_FL_KEEP_SIZE;
const PUNCH: i32 = libc::FALLOC_FL_PUNCH_HOLE;
const ZERO: i32 = libc::FALLOC_FL_ZERO_RANGE;

/// Zeros written at a time.
static ZEROS: [u8; 64 << 10] = [0; 64 << 10];

impl Raif {
    pub(crate) fn do_fallocate(
        &self,
        req: &Request,
        fh: &Key,
        offset: u64,
        length: u64,
        mode: i32,
    ) -> io::Result<()> {
        // As Linux: punching keeps the size and is not combined with zeroing.
        if mode & !(KEEP | PUNCH | ZERO) != 0
            || (mode & PUNCH != 0 && (mode & KEEP == 0 || mode & ZERO != 0))
        {
            return Err(err(libc::EOPNOTSUPP));
        }
        if length == 0 {
            return Err(err(libc::EINVAL));
        }
        let end = offset
            .checked_add(length)
            .filter(|&e| e <= i64::MAX as u64)
            .ok_or_else(|| err(libc::EFBIG))?;
        let h = self.handle(fh)?;
        let file = file_of(&h.inode)?;
        let _excl = file.lock.write();
        let size = file.size.load(Ordering::Acquire);
        let all = self.fds(&h, req)?;
        let (fds, sums) = (all.parts(), all.sums());
        {
            let w = self.journal.as_ref().map(|j| (j, j.writing()));
            let parts = MountParts::new(&self.bs, fds, file, req)
                .summed(sums, self.sum_files(&h.inode))
                .logged(w.as_ref().map(|(j, w)| (&***j, w, &h.inode)));
            if parts.degraded() {
                self.bump_generation(file, fds, req);
            }
            let l = &file.layout;
            let mut r = Ok(false);
            if mode & (PUNCH | ZERO) != 0 && offset < size {
                r = self.zero_range(l, size, &parts, req, offset, end.min(size));
                if !file.touched.load(Ordering::Relaxed) {
                    file.touched.store(true, Ordering::Release);
                }
            }
            // A size the branches cannot hold is refused before anything is reserved.
            if mode & KEEP == 0 && end > size {
                r = r.and_then(|d| stripe::check_growth(l, size, end, &parts).map(|()| d));
            }
            if mode & PUNCH == 0 {
                r = r.and_then(|d| Ok(d | self.reserve(l, &parts, req, offset, end)?));
            }
            self.record_out_of_date(file, fds, &parts);
            if r? {
                self.bs.degraded_writes.fetch_add(1, Ordering::Relaxed);
                self.bump_generation(file, fds, req);
            }
        }
        if mode & KEEP == 0 && end > size {
            self.truncate_held(&h.inode, file, fds, sums, end, req)?;
        }
        Ok(())
    }

    /// Reserves the part bytes of logical `[start, end)` on every usable part; whether a part
    /// was left out (degraded).
    fn reserve(
        &self,
        l: &Layout,
        parts: &MountParts,
        req: &Request,
        start: u64,
        end: u64,
    ) -> io::Result<bool> {
        let mut degraded = false;
        for b in (0..l.width as usize).filter(|&b| l.holds(b)) {
            if !parts.usable(b) {
                degraded = true;
                continue;
            }
            let (lo, hi) = (l.part_size(b, start), l.part_size(b, end));
            if hi > lo {
                let fd = parts.fd(b)?;
                self.part_fallocate(req, b, fd, KEEP, lo, hi - lo)?;
            }
        }
        Ok(degraded)
    }

    /// Makes logical `[start, end)` (within the size `size`) read as zeros: the partial rows
    /// at its edges written, the whole rows between punched (see the module docs).
    fn zero_range(
        &self,
        l: &Layout,
        size: u64,
        parts: &MountParts,
        req: &Request,
        start: u64,
        end: u64,
    ) -> io::Result<bool> {
        let rb = l.row_bytes();
        let (r0, r1) = (start.div_ceil(rb), end / rb);
        if r0 >= r1 {
            return write_zeros(l, size, parts, start, end);
        }
        let (a, b) = (r0 * rb, r1 * rb);
        let mut degraded = write_zeros(l, size, parts, start, a)?;
        degraded |= write_zeros(l, size, parts, b, end)?;
        let holders: Vec<usize> = (0..l.width as usize).filter(|&x| l.holds(x)).collect();
        if l.level == Level::Raif0 && holders.iter().any(|&x| !parts.usable(x)) {
            return Err(err(libc::EIO)); // a RAIF0 unit there is lost
        }
        let all = holders.iter().fold(0u64, |m, &x| m | 1 << x);
        // With a unit of these rows living only in the parity, an earlier write's partial
        // parity would give it its old bytes back after a crash: the rows are logged as being
        // zeroed, and the replay writes zeros there again.
        let how = if matches!(l.level, Level::Raif4 | Level::Raif5) && parts.degraded() {
            How::Zeros { first: r0, end: r1 }
        } else {
            How::Overwrite
        };
        parts.intent(a, b - a, all, how)?;
        let su = l.stripe as u64;
        let (lo, hi) = (r0 * su, r1 * su);
        for &x in &holders {
            if !parts.usable(x) {
                degraded = true;
                continue;
            }
            let fd = parts.fd(x)?;
            if let Err(e) = self.part_fallocate(req, x, fd, PUNCH | KEEP, lo, hi - lo) {
                log::debug!("branch {x}: punching a hole: {e}; zeros written");
                let mut off = lo;
                while off < hi {
                    let n = ((hi - off) as usize).min(ZEROS.len());
                    part_io::write_full(parts, x, &ZEROS[..n], off)?;
                    off += n as u64;
                }
            }
            // The blocks are zeros now, whichever way: their checksums follow (the whole blocks
            // unknown, as in any hole; those at the edges recomputed).
            crate::sums::forget(parts, x, lo, hi - lo);
            let bs = crate::sums::BLOCK;
            for edge in [lo / bs * bs, (hi - 1) / bs * bs] {
                crate::sums::resum(parts, x, edge, bs)?;
            }
        }
        Ok(degraded)
    }

    /// `fallocate(2)` on branch `b`'s part `fd`, counted in the branch's profile.
    fn part_fallocate(
        &self,
        req: &Request,
        b: usize,
        fd: BorrowedFd,
        mode: i32,
        off: u64,
        len: u64,
    ) -> io::Result<()> {
        self.bs
            .get(b)
            .call(req, Sys::Fallocate, || sys::fallocate(fd, mode, off, len))
    }
}

/// Writes zeros over logical `[start, end)` through the data path; whether it was degraded.
fn write_zeros(
    l: &Layout,
    size: u64,
    parts: &MountParts,
    start: u64,
    end: u64,
) -> io::Result<bool> {
    let mut degraded = false;
    let mut pos = start;
    while pos < end {
        let n = ((end - pos) as usize).min(ZEROS.len());
        degraded |= stripe::write(l, size, parts, pos, &ZEROS[..n])?;
        pos += n as u64;
    }
    Ok(degraded)
}
