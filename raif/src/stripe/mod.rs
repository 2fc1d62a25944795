//! The data path over a file's parts, shared by the mount and the admin commands: reads,
//! writes and truncations with mirrors and XOR parity, reconstruction when a branch is
//! unusable, and the content a branch's part should have (for rebuilds).
//!
//! The caller supplies the parts through [`Parts`] (the mount's open descriptors, recorded in
//! the branch layers; or the admin commands' own). An error from a branch goes to
//! [`Parts::failed`], which decides whether the branch is now failed; the operation then goes
//! on without it where redundancy allows.
//!
//! # Writes and parity (RAIF4/5)
//!
//! A write is split into unit segments. Per segment the new parity is, cheapest first: the new
//! data itself when every other unit of the row is zero there (beyond the file's end; small
//! files never read anything), `old parity ⊕ old data ⊕ new data` (two reads), or, when the
//! segment's own branch is unusable, the XOR of the new data and the row's other units. A write
//! covering whole rows computes their parity from the new data alone. A segment's data is
//! written before its parity; a whole row's parity before its data. A crash in between leaves
//! the row's parity stale (the RAID-5 *write hole*), which `raif scrub` finds.
//!
//! # A branch without room, a daemon without descriptors
//!
//! `ENOSPC`, `EDQUOT` and `EFBIG` ([`no_room`](crate::part_io::no_room)) answer the request; they
//! say nothing about the branch's health, and neither do the daemon's own limits (`EMFILE`,
//! `ENFILE`, `ENOMEM`, `EAGAIN`: [`own_limits`](crate::part_io::own_limits)), which a write meets
//! when a part's checksums must be reached through a descriptor it cannot have. A write that
//! gets one of these ([`refused`]) fails with it, and first puts the file back in a
//! state every branch agrees on, by overwriting only bytes this write itself has just written
//! (so the repair needs no room that the write did not already take):
//!
//! * RAIF4/5, a segment of one unit (data, then parity): the unit and the parity are put back
//!   to their old bytes, known from the read-modify-write (or, where the rest of the row is
//!   zero, the unit is made equal to the parity again).
//! * RAIF4/5, a whole row (parity, then the data units in order): the parity is recomputed
//!   from the data units as they now are.
//! * RAIF1: the copies written are made equal to a copy the write has not reached yet (all old
//!   bytes), or, if it reached every copy, to the copy that refused (new bytes up to where it
//!   stopped, old ones after).
//!
//! So within the file's old size a refused write leaves, byte by byte, a prefix of its new
//! bytes and the old bytes after it, with mirrors and parity agreeing; whatever it put past
//! the old size is cut ([`write`]). Should even that overwrite be refused (a copy-on-write
//! branch can refuse any write), the file is recorded as out of date ([`Parts::out_of_date`]):
//! a RAIF1 copy that disagrees is not used for the file (the others serve it); a RAIF4/5 file's
//! data units stay right and are read as they are, but its parity is not trusted, so nothing is
//! reconstructed from it (`EIO` instead of wrong bytes) until `raif scrub --repair` recomputes
//! it. The branch stays in service either way.

mod access;
#[cfg(test)]
mod tests;
mod whole_file;

use std::io;

use crate::layout::{Layout, Level};
use crate::part_io::{
    How, OutOfDate, Parts, bad_block, eio, read_full, refused, rewrite_differing, write_full,
    xor_into,
};
use crate::sums::{Ends, Summed};
use access::Access;

pub use access::recover_block;
pub use whole_file::{rebuild_part, recover_verified, resync_parity, resync_rows};

/// RAIF1: after copy `failed` refused a write of `len` bytes at `off` (the copies in
/// `attempted` were written, or partly): makes the copies agree again below `size`, the
/// file's old size (what lies past it is cut). The reference is a copy the write has not
/// reached (old bytes), else the copy that refused (new bytes up to where it stopped).
fn settle_mirror(
    l: &Layout,
    p: &impl Parts,
    attempted: u64,
    failed: usize,
    off: u64,
    len: u64,
    size: u64,
) {
    let end = size.min(off + len);
    if end <= off {
        return;
    }
    let holders = (0..l.width as usize).filter(|&b| l.holds(b) && p.usable(b));
    let reference = holders
        .clone()
        .find(|&b| attempted & (1 << b) == 0)
        .unwrap_or(failed);
    let mut want = vec![0u8; (end - off) as usize];
    if read_full(p, reference, &mut want, off).is_err() {
        // Nothing to compare with: the copy that refused is the odd one out.
        p.out_of_date(OutOfDate::Copy(failed));
        return;
    }
    for b in holders.filter(|&b| b != reference && attempted & (1 << b) != 0) {
        if rewrite_differing(p, b, &want, off).is_err() {
            p.out_of_date(OutOfDate::Copy(b));
        }
    }
}

/// Reads up to `buf.len()` bytes at logical offset `off` of a file of `size` bytes; returns
/// the bytes read and whether a branch had to be made up for.
///
/// Blocks are verified against their checksums ([`crate::sums`]); one that fails is repaired
/// from redundancy, or the read fails with `EIO`.
pub fn read(
    l: &Layout,
    size: u64,
    p: &impl Parts,
    off: u64,
    buf: &mut [u8],
) -> io::Result<(usize, bool)> {
    read_in(l, size, &Summed(p, Ends::unknown()), off, buf).map_err(plain_eio)
}

/// A block that failed its checksum and could not be repaired is an `EIO` to the caller.
pub(super) fn plain_eio(e: io::Error) -> io::Error {
    if bad_block(&e).is_some() { eio() } else { e }
}

pub(super) fn read_in(
    l: &Layout,
    size: u64,
    p: &impl Parts,
    off: u64,
    buf: &mut [u8],
) -> io::Result<(usize, bool)> {
    if off >= size {
        return Ok((0, false));
    }
    let n = (buf.len() as u64).min(size - off) as usize;
    let buf = &mut buf[..n];
    let op = Access::new(l, p, size);
    if l.level == Level::Raif1 {
        for turn in 0..l.copies as usize {
            let b = l.copy_for(off, turn);
            if !p.usable(b) {
                continue;
            }
            match op.read_fixing(b, buf, off) {
                Ok(()) => return Ok((n, turn > 0 || op.degraded.get())),
                Err(e) => op.read_err(b, e)?,
            }
        }
        return Err(eio());
    }
    let su = l.stripe as u64;
    let mut pos = 0;
    while pos < n {
        let (row, col, a) = l.locate(off + pos as u64);
        let len = ((su - a) as usize).min(n - pos);
        op.read_unit(row, col, a, size, &mut buf[pos..pos + len])?;
        pos += len;
    }
    Ok((n, op.degraded.get()))
}

/// Writes `data` at logical offset `off` of a file of `size` bytes (before the write);
/// returns whether some branch holding a part could not be written.
///
/// On an error the file keeps its size: what the write put past `size` is cut again. A write
/// refused for lack of room or the daemon's limits ([`refused`]) fails with the error after putting the rows
/// and copies it touched back in agreement (see the module docs); no branch is failed for it.
///
/// Checksums of the blocks written are updated ([`crate::sums`]).
pub fn write(l: &Layout, size: u64, p: &impl Parts, off: u64, data: &[u8]) -> io::Result<bool> {
    let p = &Summed(p, Ends::of(l, size));
    let op = Access::new(l, p, size);
    let r = write_levels(&op, size, off, data);
    let end = off + data.len() as u64;
    if r.is_err() && end > size {
        // Ignored: the write's own error is the answer; a part left long is cut before the
        // file grows (the mount) or reported by scrub.
        let _ = truncate_in(l, end, size, p);
    }
    r.map(|()| op.degraded.get()).map_err(plain_eio)
}

fn write_levels<P: Parts>(op: &Access<P>, size: u64, off: u64, data: &[u8]) -> io::Result<()> {
    let (l, p) = (op.l, op.p);
    match l.level {
        Level::Raif1 => {
            let holders = (0..l.width as usize)
                .filter(|&b| l.holds(b) && p.usable(b))
                .fold(0u64, |m, b| m | 1 << b);
            if holders.count_ones() > 1 {
                p.intent(off, data.len() as u64, holders, How::Fresh)?;
            }
            let mut attempted = 0u64;
            for b in (0..l.width as usize).filter(|&b| l.holds(b)) {
                if !p.usable(b) {
                    op.degraded.set(true);
                    continue;
                }
                attempted |= 1 << b;
                if let Err(e) = op.write(b, data, off) {
                    if refused(&e) {
                        settle_mirror(l, p, attempted, b, off, data.len() as u64, size);
                    }
                    return Err(e);
                }
            }
            if !op.wrote.get() {
                return Err(eio());
            }
        }
        Level::Raif0 => {
            let su = l.stripe as u64;
            let mut pos = 0;
            while pos < data.len() {
                let (row, col, a) = l.locate(off + pos as u64);
                let len = ((su - a) as usize).min(data.len() - pos);
                let b = l.data_branch(row, col);
                if !p.usable(b) {
                    return Err(eio());
                }
                if let Err(e) = write_full(p, b, &data[pos..pos + len], row * su + a) {
                    if refused(&e) {
                        return Err(e);
                    }
                    if let Some(bad) = bad_block(&e) {
                        // A block this write changes in part is corrupt: nothing to repair it
                        // from, and the branch is fine.
                        p.checksum_event(bad, false);
                        return Err(eio());
                    }
                    p.failed(b, &e, op.wrote.get());
                    return Err(eio());
                }
                op.wrote.set(true);
                pos += len;
            }
        }
        Level::Raif4 | Level::Raif5 => {
            let su = l.stripe as u64;
            let row_bytes = l.row_bytes() as usize;
            let mut cur = size;
            let mut pos = 0;
            while pos < data.len() {
                let (row, col, a) = l.locate(off + pos as u64);
                let whole = col == 0 && a == 0 && data.len() - pos >= row_bytes;
                let r = if whole && row_usable(l, p, row) {
                    op.write_row(row, &data[pos..pos + row_bytes], cur)
                        .map(|()| row_bytes)
                } else {
                    let len = ((su - a) as usize).min(data.len() - pos);
                    op.write_unit(row, col, a, &data[pos..pos + len], cur)
                        .map(|()| len)
                };
                pos += r?;
                cur = cur.max(off + pos as u64);
                op.size.set(cur);
            }
        }
    }
    Ok(())
}

fn row_usable(l: &Layout, p: &impl Parts, row: u64) -> bool {
    (0..l.data_cols()).all(|c| p.usable(l.data_branch(row, c)))
        && l.parity_branch(row).is_none_or(|b| p.usable(b))
}

/// Changes a file of `old` bytes to `new` bytes: every part gets its new length and, for
/// RAIF4/5, the parity of a row cut in the middle is recomputed. Growing needs nothing (the
/// new bytes are holes). Returns whether some branch could not be changed.
///
/// A branch without room ([`refused`]; a copy refusing to grow past its largest file, say)
/// fails the truncation with its error after the copies already grown are cut back. Where
/// the change cannot be taken back (a part that would not shrink), the file is recorded out of
/// date ([`Parts::out_of_date`]) and the truncation goes on.
pub fn truncate(l: &Layout, old: u64, new: u64, p: &impl Parts) -> io::Result<bool> {
    if l.level.striped() && new > old {
        check_growth(l, old, new, p)?;
    }
    truncate_in(l, old, new, &Summed(p, Ends::unknown())).map_err(plain_eio)
}

/// Whether the usable parts of a striped file of size `old` can be as long as a size of
/// `new` makes them: each part that would grow is truncated up to that length and back (to
/// the length `old` gives it; holes either way, nothing written). A branch that cannot hold
/// a file that long refuses now with `EFBIG` (or the daemon's file-size limit does), as a
/// RAIF1 copy or a plain file refuses the truncation, rather than a write near the new end
/// later (a RAIF1 copy's part is the size itself: the truncation of a RAIF1 file refuses
/// by itself, a preallocation past the end is checked here too).
pub fn check_growth(l: &Layout, old: u64, new: u64, p: &impl Parts) -> io::Result<()> {
    for b in (0..l.width as usize).filter(|&b| l.holds(b) && p.usable(b)) {
        let (have, want) = (l.part_size(b, old), l.part_size(b, new));
        if want > have {
            p.truncate(b, want)?;
            p.truncate(b, have)?;
        }
    }
    Ok(())
}

fn truncate_in(l: &Layout, old: u64, new: u64, p: &impl Parts) -> io::Result<bool> {
    let op = Access::new(l, p, old);
    if l.level == Level::Raif1 {
        let mut done = 0u64;
        for b in (0..l.width as usize).filter(|&b| l.holds(b)) {
            if !p.usable(b) {
                op.degraded.set(true);
                continue;
            }
            match op.truncate(b, new) {
                Ok(()) => done |= 1 << b,
                Err(e) if refused(&e) && new > old => {
                    for d in (0..l.width as usize).filter(|&d| done & (1 << d) != 0) {
                        if p.truncate(d, old).is_err() {
                            p.out_of_date(OutOfDate::Copy(d));
                        }
                    }
                    return Err(e);
                }
                Err(e) if refused(&e) => p.out_of_date(OutOfDate::Copy(b)),
                Err(e) => return Err(e),
            }
        }
        return Ok(op.degraded.get());
    }
    if new >= old {
        return Ok(false);
    }
    let su = l.stripe as u64;
    let cut_row = (new % l.row_bytes() != 0).then(|| l.locate(new - 1).0);
    let pb = cut_row.and_then(|r| l.parity_branch(r));
    if let (Some(row), Some(pb)) = (cut_row, pb) {
        // The row's units are cut, then its parity rewritten: torn in between.
        let start = l.unit_start(row, 0);
        p.intent(start, l.row_bytes(), 1 << pb, How::Overwrite)?;
    }
    // A unit of the cut row whose branch is unusable lives only in the parity: recover it
    // before the other units change.
    let mut saved: Option<(usize, Vec<u8>)> = None;
    if let (Some(row), Some(pb)) = (cut_row, pb) {
        for c in 0..l.data_cols() {
            let ulen = l.unit_len(row, c, new) as usize;
            if ulen > 0 && !p.usable(l.data_branch(row, c)) && p.usable(pb) {
                let mut buf = vec![0u8; ulen];
                op.reconstruct(row, Some(c), pb, 0, old, &mut buf)?;
                saved = Some((c, buf));
            }
        }
    }
    for b in 0..l.width as usize {
        if !p.usable(b) {
            op.degraded.set(true);
            continue;
        }
        match op.truncate(b, l.part_size(b, new)) {
            Ok(()) => {}
            // A part shorter than its length (holes at its end) that may not grow: as good,
            // the bytes it lacks read as zeros.
            Err(e) if e.raw_os_error() == Some(libc::EFBIG) => {}
            // A part that would not shrink holds bytes past the end.
            Err(e) if refused(&e) => p.out_of_date(OutOfDate::Parity),
            Err(e) => return Err(e),
        }
    }
    if let (Some(row), Some(pb)) = (cut_row, pb) {
        let plen = l.unit_len(row, 0, new) as usize;
        let mut par = vec![0u8; plen];
        let mut tmp = vec![0u8; plen];
        // With a unit living only in the parity: another column, on a usable branch, and its
        // bytes as the truncation leaves them (zeros past its end), for the entry below.
        let anchor = saved.as_ref().and_then(|(sc, _)| {
            (0..l.data_cols()).find(|&c| c != *sc && p.usable(l.data_branch(row, c)))
        });
        let mut anchor_bytes = vec![0u8; if anchor.is_some() { plen } else { 0 }];
        for c in 0..l.data_cols() {
            let ulen = l.unit_len(row, c, new) as usize;
            if ulen == 0 {
                continue;
            }
            match &saved {
                Some((sc, buf)) if *sc == c => xor_into(&mut par[..ulen], buf),
                _ => {
                    let x = l.data_branch(row, c);
                    if !p.usable(x) {
                        continue;
                    }
                    if let Err(e) = op.read_fixing(x, &mut tmp[..ulen], row * su) {
                        op.read_err(x, e)?;
                        continue;
                    }
                    xor_into(&mut par[..ulen], &tmp[..ulen]);
                    if anchor == Some(c) {
                        anchor_bytes[..ulen].copy_from_slice(&tmp[..ulen]);
                    }
                }
            }
        }
        // The row's partial parity as the truncation leaves it, logged relative to a unit
        // on a usable branch: after a crash it outranks the entries of earlier writes to the
        // row, whose partial parity holds the bytes just cut (rebuilt from one of those, the
        // parity would give the unit that lives in it alone those bytes back).
        if let (Some(c), true) = (anchor, p.usable(pb)) {
            let mut pp = par.clone();
            xor_into(&mut pp, &anchor_bytes);
            let how = How::Parity {
                row,
                col: c,
                a: 0,
                pp: &pp,
                fresh: false,
            };
            p.intent(l.unit_start(row, c), plen as u64, 1 << pb, how)?;
        }
        if p.usable(pb) {
            // Only what changed: the bytes cut from the row's units were written by whoever
            // put them there, so rewriting them needs no new room.
            match rewrite_differing(p, pb, &par, row * su) {
                Ok(()) => op.wrote.set(true),
                Err(e) if refused(&e) => p.out_of_date(OutOfDate::Parity),
                Err(e) => op.write_err(pb, e)?,
            }
        }
    }
    Ok(op.degraded.get())
}
