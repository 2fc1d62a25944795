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
//! # A branch without room
//!
//! `ENOSPC`, `EDQUOT` and `EFBIG` ([`no_room`]) answer the request; they say nothing about the
//! branch's health. A write that gets one fails with it, and first puts the file back in a
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

use std::cell::{Cell, RefCell};
use std::io;

use crate::layout::{Layout, Level, Role};
use crate::parts::{BadBlock, How, bad_block, eio};
pub use crate::parts::{OutOfDate, Parts, degraded, no_room, read_full, write_full};
use crate::sums::{self, Ends, Summed};

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

thread_local! {
    static SCRATCH: RefCell<(Vec<u8>, Vec<u8>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// Runs `f` with this thread's two scratch buffers of `len` bytes (contents undefined).
fn with_scratch<R>(len: usize, f: impl FnOnce(&mut [u8], &mut [u8]) -> R) -> R {
    SCRATCH.with(|s| {
        let mut s = s.borrow_mut();
        let (a, b) = &mut *s;
        if a.len() < len {
            a.resize(len, 0);
            b.resize(len, 0);
        }
        f(&mut a[..len], &mut b[..len])
    })
}

/// One operation's bookkeeping: whether something was written yet (later failures then mean
/// a branch missed a change) and whether redundancy had to make up for a branch.
struct Op<'a, P: Parts> {
    l: &'a Layout,
    p: &'a P,
    /// The file's logical size as the operation goes (what a repaired block may span).
    size: Cell<u64>,
    wrote: Cell<bool>,
    degraded: Cell<bool>,
}

/// Attempts at an operation on a block that failed its checksum and was repaired.
const REPAIR_TRIES: usize = 2;

impl<'a, P: Parts> Op<'a, P> {
    fn new(l: &'a Layout, p: &'a P, size: u64) -> Self {
        Op {
            l,
            p,
            size: Cell::new(size),
            wrote: Cell::new(false),
            degraded: Cell::new(false),
        }
    }

    /// Rewrites block `bad` from redundancy ([`recover_block`]).
    fn repair(&self, bad: BadBlock) -> io::Result<()> {
        let p = self.p;
        let r = recover_block(self.l, self.size.get(), p, bad)
            .and_then(|block| p.put_block(bad.branch, &block, bad.offset));
        p.checksum_event(bad, r.is_ok());
        r.map_err(|_| eio())
    }

    /// [`read_full`], repairing a block that fails its checksum and reading again; a block
    /// that cannot be repaired is answered with its [`BadBlock`] error.
    fn read_fixing(&self, b: usize, buf: &mut [u8], off: u64) -> io::Result<()> {
        let mut tries = 0;
        loop {
            match read_full(self.p, b, buf, off) {
                Err(e) => match bad_block(&e) {
                    Some(bad) if tries < REPAIR_TRIES && self.repair(bad).is_ok() => tries += 1,
                    _ => return Err(e),
                },
                r => return r,
            }
        }
    }

    /// A read error on `b`: Ok(()) to retry without `b`, or the error.
    fn read_err(&self, b: usize, e: io::Error) -> io::Result<()> {
        if bad_block(&e).is_some() {
            return Err(eio()); // not the branch's failure; could not be repaired
        }
        if self.p.failed(b, &e, false) {
            self.degraded.set(true);
            Ok(())
        } else {
            Err(e)
        }
    }

    /// Runs `f` (a write or truncation of `b`), repairing a block it found failing its
    /// checksum (one it would change only in part) and trying again.
    fn fixing(&self, b: usize, f: impl Fn() -> io::Result<()>) -> io::Result<()> {
        let mut tries = 0;
        loop {
            match f() {
                Ok(()) => {
                    self.wrote.set(true);
                    return Ok(());
                }
                Err(e) => match bad_block(&e) {
                    Some(bad) if tries < REPAIR_TRIES && self.repair(bad).is_ok() => tries += 1,
                    _ => return self.write_err(b, e),
                },
            }
        }
    }

    /// Writes to `b`; a failure after another write of this operation fails the branch.
    fn write(&self, b: usize, buf: &[u8], off: u64) -> io::Result<()> {
        self.fixing(b, || write_full(self.p, b, buf, off))
    }

    fn truncate(&self, b: usize, len: u64) -> io::Result<()> {
        self.fixing(b, || self.p.truncate(b, len))
    }

    fn write_err(&self, b: usize, e: io::Error) -> io::Result<()> {
        if no_room(&e) {
            return Err(e);
        }
        if bad_block(&e).is_some() {
            return Err(eio()); // a block that could not be repaired: the branch is fine
        }
        if self.p.failed(b, &e, self.wrote.get()) {
            self.degraded.set(true);
            Ok(())
        } else {
            Err(e)
        }
    }

    /// Whether data unit `(row, col)` is zero from `a` on (beyond the end, `size`).
    fn zero(&self, row: u64, col: usize, a: u64, size: u64) -> bool {
        self.l.unit_start(row, col) + a >= size
    }

    /// Reads `out.len()` bytes of data unit `(row, col)` from `a`, reconstructing them from the
    /// rest of the row when its branch is unusable.
    fn read_unit(&self, row: u64, col: usize, a: u64, size: u64, out: &mut [u8]) -> io::Result<()> {
        let su = self.l.stripe as u64;
        let off = row * su + a;
        loop {
            let b = self.l.data_branch(row, col);
            if self.p.usable(b) {
                match self.read_fixing(b, out, off) {
                    Ok(()) => return Ok(()),
                    Err(e) => self.read_err(b, e)?,
                }
                continue;
            }
            let Some(pb) = self.l.parity_branch(row) else {
                return Err(eio()); // RAIF0: nothing to rebuild it from
            };
            self.degraded.set(true);
            return self.reconstruct(row, Some(col), pb, a, size, out);
        }
    }

    /// The XOR of the row's units other than `skip` (`None`: all data units; the parity) over
    /// `[a, a + out.len())`: the missing unit's bytes.
    fn reconstruct(
        &self,
        row: u64,
        skip: Option<usize>,
        pb: usize,
        a: u64,
        size: u64,
        out: &mut [u8],
    ) -> io::Result<()> {
        if skip.is_some() && self.p.parity_stale() {
            return Err(eio()); // the parity does not hold what the unit lacks
        }
        let su = self.l.stripe as u64;
        let off = row * su + a;
        let mut tmp = vec![0u8; out.len()];
        let mut sources: Vec<usize> = (0..self.l.data_cols())
            .filter(|&c| Some(c) != skip && !self.zero(row, c, a, size))
            .map(|c| self.l.data_branch(row, c))
            .collect();
        if skip.is_some() {
            sources.push(pb);
        }
        out.fill(0);
        for x in sources {
            if !self.p.usable(x) {
                return Err(eio());
            }
            if let Err(e) = self.read_fixing(x, &mut tmp, off) {
                self.read_err(x, e)?;
                return Err(eio());
            }
            xor_into(out, &tmp);
        }
        Ok(())
    }

    /// Writes `new` into data unit `(row, col)` at `a` and updates the row's parity; `size` is
    /// the logical size so far (bytes at or past it are zero).
    fn write_unit(&self, row: u64, col: usize, a: u64, new: &[u8], size: u64) -> io::Result<()> {
        let su = self.l.stripe as u64;
        let off = row * su + a;
        let db = self.l.data_branch(row, col);
        let pb = self.l.parity_branch(row).expect("striped with parity");
        with_scratch(new.len(), |par, tmp| {
            loop {
                let (du, pu) = (self.p.usable(db), self.p.usable(pb));
                if !du && !pu {
                    return Err(eio());
                }
                if !pu {
                    // No parity to tear, but a crash between the data and its checksums
                    // would leave stale entries: logged as a partial-parity entry, whose
                    // parity (gone) the replay leaves alone and whose blocks' checksums it
                    // recomputes (a region would be resynchronised, or kept, as a row torn
                    // while every branch was there).
                    self.degraded.set(true);
                    // (`par ⊕ new`, the logged partial parity, is then zeros.)
                    par.copy_from_slice(new);
                    self.announce(row, col, a, new, par, false, db, pb)?;
                    return self.write(db, new, off);
                }
                if !du {
                    // The unit lives only in the parity: parity = new ⊕ the other units.
                    self.degraded.set(true);
                    par.copy_from_slice(new);
                    for c in (0..self.l.data_cols()).filter(|&c| c != col) {
                        if self.zero(row, c, a, size) {
                            continue;
                        }
                        let x = self.l.data_branch(row, c);
                        if !self.p.usable(x) {
                            return Err(eio());
                        }
                        if let Err(e) = self.read_fixing(x, tmp, off) {
                            self.read_err(x, e)?;
                            return Err(eio());
                        }
                        xor_into(par, tmp);
                    }
                    // Logged too: a crash must not rebuild this parity from the partial
                    // parity of an earlier write to the row (which holds this unit's old
                    // bytes); the replay takes each row's latest entry.
                    self.announce(row, col, a, new, par, false, db, pb)?;
                    return self.write(pb, par, off);
                }
                let others_zero = (0..self.l.data_cols())
                    .filter(|&c| c != col)
                    .all(|c| self.zero(row, c, a, size));
                if others_zero {
                    par.copy_from_slice(new);
                } else {
                    if self.zero(row, col, a, size) {
                        tmp.fill(0);
                    } else if let Err(e) = self.read_fixing(db, tmp, off) {
                        self.read_err(db, e)?;
                        continue;
                    }
                    if let Err(e) = self.read_fixing(pb, par, off) {
                        self.read_err(pb, e)?;
                        continue;
                    }
                    xor_into(par, tmp);
                    xor_into(par, new);
                }
                self.announce(row, col, a, new, par, others_zero, db, pb)?;
                let r = self
                    .write(db, new, off)
                    .and_then(|()| self.write(pb, par, off));
                if r.as_ref().is_err_and(no_room) {
                    self.settle_unit(db, pb, off, new, par, tmp, others_zero);
                }
                return r;
            }
        })
    }

    /// Before a segment's data and parity are written: its intent, for the mount's log. With
    /// every part usable, a segment whose row holds no other data there puts nothing else at
    /// risk, and any other is an overwrite. While a part is out, every segment logs its partial
    /// parity (`par ⊕ new`: the XOR of the row's other units), with which the replay without
    /// that part rebuilds the row's parity from the latest entry covering each byte:
    /// - a unit that lives only in the parity is rebuilt right;
    /// - a write of that unit itself (into the parity alone) outranks an earlier entry, whose
    ///   partial parity holds the unit's old bytes;
    /// - a write whose row's parity is gone gets its blocks' checksums recomputed;
    /// - a write into rows a degraded punch zeroed keeps its bytes when the replay zeroes
    ///   those rows again (an append would otherwise have logged nothing of its own).
    #[allow(clippy::too_many_arguments)]
    fn announce(
        &self,
        row: u64,
        col: usize,
        a: u64,
        new: &[u8],
        par: &[u8],
        others_zero: bool,
        db: usize,
        pb: usize,
    ) -> io::Result<()> {
        let start = self.l.unit_start(row, col) + a;
        let written = 1u64 << db | 1u64 << pb;
        if !degraded(self.l, self.p) {
            let how = if others_zero {
                How::Fresh
            } else {
                How::Overwrite
            };
            self.p.intent(start, new.len() as u64, written, how)
        } else {
            let mut pp = par.to_vec();
            xor_into(&mut pp, new);
            self.p.intent(
                start,
                new.len() as u64,
                written,
                How::Parity {
                    row,
                    col,
                    a,
                    pp: &pp,
                },
            )
        }
    }

    /// After a refused write of `new` at part offset `off` into data branch `db` (parity on
    /// `pb`): puts the row back as it was. `par` holds the new parity and `tmp` the old data
    /// (read-modify-write), or, with `others_zero`, the rest of the row is zero there and the
    /// unit only has to equal the parity again.
    #[allow(clippy::too_many_arguments)]
    fn settle_unit(
        &self,
        db: usize,
        pb: usize,
        off: u64,
        new: &[u8],
        par: &[u8],
        tmp: &[u8],
        others_zero: bool,
    ) {
        if !self.p.usable(db) || !self.p.usable(pb) {
            return; // no parity to agree with, or the unit lives only in the parity
        }
        let r = if others_zero {
            let mut cur = vec![0u8; new.len()];
            read_full(self.p, pb, &mut cur, off)
                .and_then(|()| rewrite_differing(self.p, db, &cur, off))
        } else {
            // old parity = new parity ⊕ new data ⊕ old data
            let mut old_par = par.to_vec();
            xor_into(&mut old_par, new);
            xor_into(&mut old_par, tmp);
            rewrite_differing(self.p, db, tmp, off)
                .and_then(|()| rewrite_differing(self.p, pb, &old_par, off))
        };
        if r.is_err() {
            // Reads take the data units as they are: the parity is what cannot be trusted.
            self.p.out_of_date(OutOfDate::Parity);
        }
    }

    /// Writes whole row `row` from `data` (`row_bytes` long), parity computed from it: the
    /// parity first, then the data units, so that a write refused part-way is settled by
    /// recomputing the parity over bytes already written ([`Op::settle_row`]).
    fn write_row(&self, row: u64, data: &[u8], size: u64) -> io::Result<()> {
        let su = self.l.stripe as usize;
        let off = row * su as u64;
        let pb = self.l.parity_branch(row).expect("striped with parity");
        let start = self.l.unit_start(row, 0);
        let how = if start < size {
            How::Overwrite
        } else {
            How::Fresh
        };
        self.p.intent(
            start,
            data.len() as u64,
            crate::layout::all_mask(self.l.width as usize),
            how,
        )?;
        let r = with_scratch(su, |par, _| {
            par.copy_from_slice(&data[..su]);
            for unit in data.chunks_exact(su).skip(1) {
                xor_into(par, unit);
            }
            self.write(pb, par, off)?;
            for (c, unit) in data.chunks_exact(su).enumerate() {
                self.write(self.l.data_branch(row, c), unit, off)?;
            }
            Ok(())
        });
        if r.as_ref().is_err_and(no_room) {
            self.settle_row(row, data);
        }
        r
    }

    /// After a refused whole-row write of `data`: the parity of `row` recomputed from its data
    /// units as they now are (a unit whose branch failed during the write lives in the parity
    /// with its new bytes).
    fn settle_row(&self, row: u64, data: &[u8]) {
        let su = self.l.stripe as usize;
        let off = row * su as u64;
        let pb = self.l.parity_branch(row).expect("striped with parity");
        if !self.p.usable(pb) {
            return;
        }
        let mut par = vec![0u8; su];
        let mut unit = vec![0u8; su];
        let mut r = Ok(());
        for (c, new) in data.chunks_exact(su).enumerate() {
            let b = self.l.data_branch(row, c);
            if self.p.usable(b) {
                r = r.and_then(|()| read_full(self.p, b, &mut unit, off));
                xor_into(&mut par, &unit);
            } else {
                xor_into(&mut par, new);
            }
        }
        if r.and_then(|()| rewrite_differing(self.p, pb, &par, off))
            .is_err()
        {
            self.p.out_of_date(OutOfDate::Parity);
        }
    }
}

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

/// What block `bad` of a file of `size` bytes should hold, from redundancy: the same block of
/// another mirror copy that checks out, or the XOR of the same block of every other part (in
/// RAIF4/5 every row's units and parity XOR to zero, whatever the stripe unit). Its length is
/// the block's, cut at the end of the part. `EIO` where there is nothing to rebuild it from
/// (RAIF0, a second part missing or failing its checksum, the parity out of date). `p` should
/// verify what it reads ([`Summed`]).
pub fn recover_block(l: &Layout, size: u64, p: &impl Parts, bad: BadBlock) -> io::Result<Vec<u8>> {
    let (b, off) = (bad.branch, bad.offset);
    let plen = l.part_size(b, size);
    let len = if off < plen {
        (plen - off).min(sums::BLOCK) as usize
    } else {
        sums::BLOCK as usize
    };
    let mut block = vec![0u8; len];
    let found = match l.level {
        Level::Raif0 => false,
        Level::Raif1 => (0..l.width as usize)
            .filter(|&c| c != b && l.holds(c) && p.usable(c))
            .any(|c| read_full(p, c, &mut block, off).is_ok()),
        Level::Raif4 | Level::Raif5 => {
            let mut tmp = vec![0u8; len];
            !p.parity_stale()
                && (0..l.width as usize).filter(|&c| c != b).all(|c| {
                    p.usable(c) && read_full(p, c, &mut tmp, off).is_ok() && {
                        xor_into(&mut block, &tmp);
                        true
                    }
                })
        }
    };
    if found { Ok(block) } else { Err(eio()) }
}

/// [`recover_block`] with the reads of `p` verified against their checksums.
pub fn recover_verified(
    l: &Layout,
    size: u64,
    p: &impl Parts,
    bad: BadBlock,
) -> io::Result<Vec<u8>> {
    recover_block(l, size, &Summed(p, Ends::unknown()), bad)
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
fn plain_eio(e: io::Error) -> io::Error {
    if bad_block(&e).is_some() { eio() } else { e }
}

fn read_in(
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
    let op = Op::new(l, p, size);
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
/// refused for lack of room ([`no_room`]) fails with the branch's error after putting the rows
/// and copies it touched back in agreement (see the module docs); no branch is failed for it.
///
/// Checksums of the blocks written are updated ([`crate::sums`]).
pub fn write(l: &Layout, size: u64, p: &impl Parts, off: u64, data: &[u8]) -> io::Result<bool> {
    let p = &Summed(p, Ends::of(l, size));
    let op = Op::new(l, p, size);
    let r = write_levels(&op, size, off, data);
    let end = off + data.len() as u64;
    if r.is_err() && end > size {
        // Ignored: the write's own error is the answer; a part left long is cut before the
        // file grows (the mount) or reported by scrub.
        let _ = truncate_in(l, end, size, p);
    }
    r.map(|()| op.degraded.get()).map_err(plain_eio)
}

fn write_levels<P: Parts>(op: &Op<P>, size: u64, off: u64, data: &[u8]) -> io::Result<()> {
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
                    if no_room(&e) {
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
                    if no_room(&e) {
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
/// A branch without room ([`no_room`]; a copy refusing to grow past its largest file, say)
/// fails the truncation with its error after the copies already grown are cut back. Where
/// the change cannot be taken back (a part that would not shrink), the file is recorded out of
/// date ([`Parts::out_of_date`]) and the truncation goes on.
pub fn truncate(l: &Layout, old: u64, new: u64, p: &impl Parts) -> io::Result<bool> {
    truncate_in(l, old, new, &Summed(p, Ends::unknown())).map_err(plain_eio)
}

fn truncate_in(l: &Layout, old: u64, new: u64, p: &impl Parts) -> io::Result<bool> {
    let op = Op::new(l, p, old);
    if l.level == Level::Raif1 {
        let mut done = 0u64;
        for b in (0..l.width as usize).filter(|&b| l.holds(b)) {
            if !p.usable(b) {
                op.degraded.set(true);
                continue;
            }
            match op.truncate(b, new) {
                Ok(()) => done |= 1 << b,
                Err(e) if no_room(&e) && new > old => {
                    for d in (0..l.width as usize).filter(|&d| done & (1 << d) != 0) {
                        if p.truncate(d, old).is_err() {
                            p.out_of_date(OutOfDate::Copy(d));
                        }
                    }
                    return Err(e);
                }
                Err(e) if no_room(&e) => p.out_of_date(OutOfDate::Copy(b)),
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
            Err(e) if no_room(&e) => p.out_of_date(OutOfDate::Parity),
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
            };
            p.intent(l.unit_start(row, c), plen as u64, 1 << pb, how)?;
        }
        if p.usable(pb) {
            // Only what changed: the bytes cut from the row's units were written by whoever
            // put them there, so rewriting them needs no new room.
            match rewrite_differing(p, pb, &par, row * su) {
                Ok(()) => op.wrote.set(true),
                Err(e) if no_room(&e) => p.out_of_date(OutOfDate::Parity),
                Err(e) => op.write_err(pb, e)?,
            }
        }
    }
    Ok(op.degraded.get())
}

/// Recomputes the parity of rows `first..` of a file of `size` bytes from its data units
/// (every part must be usable). After a crash, a write that reached the data past the recorded
/// end may have missed the parity: the data is what the application wrote.
pub fn resync_parity(l: &Layout, size: u64, p: &impl Parts, first: u64) -> io::Result<()> {
    resync_rows(l, size, p, first, u64::MAX)
}

/// Recomputes the parity of rows `first..last` (those within a file of `size` bytes) from its
/// data units (every part must be usable).
pub fn resync_rows(l: &Layout, size: u64, p: &impl Parts, first: u64, last: u64) -> io::Result<()> {
    if l.parity_branch(0).is_none() || size == 0 {
        return Ok(());
    }
    let su = l.stripe as u64;
    let mut par = vec![0u8; su as usize];
    let mut tmp = vec![0u8; su as usize];
    for row in first..size.div_ceil(l.row_bytes()).min(last) {
        let plen = l.unit_len(row, 0, size) as usize;
        par[..plen].fill(0);
        for c in 0..l.data_cols() {
            let ulen = l.unit_len(row, c, size) as usize;
            if ulen > 0 {
                read_full(p, l.data_branch(row, c), &mut tmp[..ulen], row * su)?;
                xor_into(&mut par[..ulen], &tmp[..ulen]);
            }
        }
        let pb = l.parity_branch(row).expect("parity");
        write_full(p, pb, &par[..plen], row * su)?;
    }
    Ok(())
}

/// Computes the content branch `target` should hold for a file of `size` bytes from the other
/// parts (`p` must report `target` unusable), calling `out(offset, bytes)` piece by piece.
/// Fails with `EIO` where the content cannot be recovered (RAIF0, or a second part missing).
pub fn rebuild_part(
    l: &Layout,
    size: u64,
    p: &impl Parts,
    target: usize,
    out: impl FnMut(u64, &[u8]) -> io::Result<()>,
) -> io::Result<()> {
    rebuild_in(l, size, &Summed(p, Ends::unknown()), target, out).map_err(plain_eio)
}

fn rebuild_in(
    l: &Layout,
    size: u64,
    p: &impl Parts,
    target: usize,
    mut out: impl FnMut(u64, &[u8]) -> io::Result<()>,
) -> io::Result<()> {
    let op = Op::new(l, p, size);
    let part = l.part_size(target, size);
    // The other parts: where none holds data, the target's part holds zeros (a hole), which
    // `out` is not given.
    let sources = || (0..l.width as usize).filter(|&b| b != target && p.usable(b));
    if l.level == Level::Raif1 {
        let mut buf = vec![0u8; (1 << 20).min(part as usize)];
        let mut off = 0;
        while off < part {
            match next_data_any(p, sources().filter(|&b| l.holds(b)), off) {
                None => break,
                Some(d) => off = off.max(d),
            }
            if off >= part {
                break;
            }
            let n = ((part - off) as usize).min(buf.len());
            read_in(l, size, p, off, &mut buf[..n])?;
            out(off, &buf[..n])?;
            off += n as u64;
        }
        return Ok(());
    }
    let su = l.stripe as u64;
    let mut buf = vec![0u8; su as usize];
    // With parity, a row whose other units and parity are holes is zero on the target too;
    // RAIF0 has nothing to tell the target's part from.
    let redundant = l.parity_branch(0).is_some();
    let mut row = 0;
    while row * su < part {
        if redundant {
            match next_data_any(p, sources(), row * su) {
                None => break,
                Some(d) => row = row.max(d / su),
            }
            if row * su >= part {
                break;
            }
        }
        let len = (part - row * su).min(su) as usize;
        let unit = &mut buf[..len];
        match l.role(target, row) {
            Role::Data(c) => op.read_unit(row, c, 0, size, unit)?,
            Role::Parity => {
                let pb = l.parity_branch(row).expect("parity");
                op.reconstruct(row, None, pb, 0, size, unit)?;
            }
        }
        out(row * su, unit)?;
        row += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::Level;

    /// Parts in memory, with branches that can be switched off, and that can be made to run
    /// out of room: `room[b]` bytes left to allocate (a byte is allocated once written, freed
    /// when truncated away; with `cow` every write allocates), `max[b]` the largest part.
    struct Mem {
        parts: RefCell<Vec<Vec<u8>>>,
        down: Cell<u64>,
        alloc: RefCell<Vec<Vec<bool>>>,
        room: RefCell<Vec<Option<usize>>>,
        max: RefCell<Vec<Option<usize>>>,
        cow: Cell<bool>,
        errno: Cell<i32>,
        failures: Cell<u32>,
        given_up: Cell<u64>,
        stale_parity: Cell<bool>,
    }

    impl Mem {
        fn new(n: usize) -> Mem {
            Mem {
                parts: RefCell::new(vec![Vec::new(); n]),
                down: Cell::new(0),
                alloc: RefCell::new(vec![Vec::new(); n]),
                room: RefCell::new(vec![None; n]),
                max: RefCell::new(vec![None; n]),
                cow: Cell::new(false),
                errno: Cell::new(libc::ENOSPC),
                failures: Cell::new(0),
                given_up: Cell::new(0),
                stale_parity: Cell::new(false),
            }
        }
    }

    impl Parts for Mem {
        fn usable(&self, b: usize) -> bool {
            self.down.get() & (1 << b) == 0
        }
        fn pread(&self, b: usize, buf: &mut [u8], off: u64) -> io::Result<usize> {
            let parts = self.parts.borrow();
            let p = &parts[b];
            let off = off as usize;
            if off >= p.len() {
                return Ok(0);
            }
            let n = buf.len().min(p.len() - off);
            buf[..n].copy_from_slice(&p[off..off + n]);
            Ok(n)
        }
        fn pwrite(&self, b: usize, buf: &[u8], off: u64) -> io::Result<usize> {
            let mut parts = self.parts.borrow_mut();
            let mut alloc = self.alloc.borrow_mut();
            let mut room = self.room.borrow_mut();
            let (p, a) = (&mut parts[b], &mut alloc[b]);
            let mut done = 0;
            for (i, &byte) in buf.iter().enumerate() {
                let pos = off as usize + i;
                let refuse = |e| {
                    if done == 0 {
                        Err(io::Error::from_raw_os_error(e))
                    } else {
                        Ok(done)
                    }
                };
                if self.max.borrow()[b].is_some_and(|m| pos >= m) {
                    return refuse(libc::EFBIG);
                }
                if p.len() <= pos {
                    p.resize(pos + 1, 0);
                    a.resize(pos + 1, false);
                }
                if !a[pos] || self.cow.get() {
                    match &mut room[b] {
                        Some(0) => return refuse(self.errno.get()),
                        Some(r) => *r -= 1,
                        None => {}
                    }
                }
                p[pos] = byte;
                a[pos] = true;
                done += 1;
            }
            Ok(done)
        }
        fn truncate(&self, b: usize, len: u64) -> io::Result<()> {
            let cur = self.parts.borrow()[b].len();
            if len as usize > cur && self.max.borrow()[b].is_some_and(|m| len as usize > m) {
                return Err(io::Error::from_raw_os_error(libc::EFBIG));
            }
            let mut alloc = self.alloc.borrow_mut();
            let a = &mut alloc[b];
            if (len as usize) < a.len() {
                let freed = a[len as usize..].iter().filter(|&&x| x).count();
                if let Some(r) = &mut self.room.borrow_mut()[b] {
                    *r += freed;
                }
            }
            a.resize(len as usize, false);
            self.parts.borrow_mut()[b].resize(len as usize, 0);
            Ok(())
        }
        fn failed(&self, b: usize, _e: &io::Error, _missed: bool) -> bool {
            self.failures.set(self.failures.get() + 1);
            self.down.set(self.down.get() | 1 << b);
            true
        }
        fn out_of_date(&self, what: OutOfDate) {
            match what {
                OutOfDate::Copy(b) => {
                    self.given_up.set(self.given_up.get() | 1 << b);
                    self.down.set(self.down.get() | 1 << b);
                }
                OutOfDate::Parity => self.stale_parity.set(true),
            }
        }
        fn parity_stale(&self) -> bool {
            self.stale_parity.get()
        }
        fn next_data(&self, b: usize, off: u64) -> Option<u64> {
            // Bytes never written (or cut) are holes.
            let alloc = self.alloc.borrow();
            (off as usize..alloc[b].len())
                .find(|&i| alloc[b][i])
                .map(|i| i as u64)
        }
    }

    fn layout(level: Level, n: u8) -> Layout {
        Layout {
            level,
            stripe: 16,
            width: n,
            copies: n,
            start: 1,
            parity: 0,
        }
    }

    /// xorshift for reproducible "random" offsets and bytes.
    fn rng(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    fn parity_ok(l: &Layout, m: &Mem, size: u64) -> bool {
        if l.parity_branch(0).is_none() {
            return true;
        }
        let su = l.stripe as u64;
        let rows = size.div_ceil(l.row_bytes());
        (0..rows).all(|row| {
            let mut acc = vec![0u8; su as usize];
            let mut tmp = vec![0u8; su as usize];
            for b in 0..l.width as usize {
                read_full(m, b, &mut tmp, row * su).unwrap();
                xor_into(&mut acc, &tmp);
            }
            acc.iter().all(|&x| x == 0)
        })
    }

    /// Random writes and truncations against a plain byte vector, for every level, with and
    /// without a failed branch; parity stays consistent and part sizes canonical.
    #[test]
    fn random_operations_match_a_reference() {
        for level in [Level::Raif0, Level::Raif1, Level::Raif4, Level::Raif5] {
            for n in 2..=4u8 {
                if n < level.min_branches() as u8 {
                    continue;
                }
                for down in [None, Some(2usize.min(n as usize - 1))] {
                    if level == Level::Raif0 && down.is_some() {
                        continue;
                    }
                    let l = layout(level, n);
                    let m = Mem::new(n as usize);
                    let mut reference: Vec<u8> = Vec::new();
                    let mut seed = 0x1234_5678 + n as u64;
                    for step in 0..300 {
                        if step == 150 {
                            if let Some(d) = down {
                                m.down.set(1 << d);
                            }
                        }
                        let size = reference.len() as u64;
                        match rng(&mut seed) % 5 {
                            0 => {
                                let new = rng(&mut seed) % 200;
                                truncate(&l, size, new, &m).unwrap();
                                reference.resize(new as usize, 0);
                            }
                            _ => {
                                let off = rng(&mut seed) % 220;
                                let len = 1 + rng(&mut seed) % 70;
                                let data: Vec<u8> =
                                    (0..len).map(|_| rng(&mut seed) as u8 | 1).collect();
                                write(&l, size, &m, off, &data).unwrap();
                                let end = (off + len) as usize;
                                if reference.len() < end {
                                    reference.resize(end, 0);
                                }
                                reference[off as usize..end].copy_from_slice(&data);
                            }
                        }
                        let size = reference.len() as u64;
                        let mut got = vec![0u8; reference.len() + 5];
                        let (k, _) = read(&l, size, &m, 0, &mut got).unwrap();
                        assert_eq!(k, reference.len());
                        assert_eq!(&got[..k], &reference[..], "{level:?} n={n} step {step}");
                        if m.down.get() == 0 {
                            assert!(parity_ok(&l, &m, size), "{level:?} n={n} step {step}");
                            for b in 0..n as usize {
                                assert!(
                                    m.parts.borrow()[b].len() as u64 <= l.part_size(b, size)
                                        || level == Level::Raif1,
                                    "{level:?} part {b} too long"
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn rebuild_recovers_a_lost_part() {
        for level in [Level::Raif1, Level::Raif4, Level::Raif5] {
            let l = layout(level, 3);
            let m = Mem::new(3);
            let data: Vec<u8> = (0..150u32).map(|i| (i * 7 + 3) as u8).collect();
            write(&l, 0, &m, 0, &data).unwrap();
            let size = data.len() as u64;
            for target in 0..3 {
                let want = m.parts.borrow()[target].clone();
                m.down.set(1 << target);
                let mut got = vec![0u8; l.part_size(target, size) as usize];
                rebuild_part(&l, size, &m, target, |off, b| {
                    got[off as usize..off as usize + b.len()].copy_from_slice(b);
                    Ok(())
                })
                .unwrap();
                assert_eq!(got, want, "{level:?} branch {target}");
                m.down.set(0);
            }
        }
        let l = layout(Level::Raif0, 3);
        let m = Mem::new(3);
        write(&l, 0, &m, 0, &[1u8; 100]).unwrap();
        m.down.set(1);
        let e = rebuild_part(&l, 100, &m, 0, |_, _| Ok(())).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EIO));
        // A RAIF0 file all on the lost part: the other parts hold nothing (holes), which says
        // nothing about it.
        let m = Mem::new(3);
        write(&l, 0, &m, 0, &[1u8; 10]).unwrap();
        m.down.set(1 << l.start);
        let e = rebuild_part(&l, 10, &m, l.start as usize, |_, _| Ok(())).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EIO));
    }

    /// Where every other part has a hole, a rebuilt part of a redundant level is zero there,
    /// and is not even computed: a sparse file rebuilds from its few data rows.
    #[test]
    fn rebuild_skips_rows_that_are_holes_in_every_other_part() {
        for level in [Level::Raif1, Level::Raif4, Level::Raif5] {
            let l = layout(level, 3);
            let m = Mem::new(3);
            let size = 8u64 << 20;
            write(&l, 0, &m, 0, &[7u8; 40]).unwrap();
            write(&l, 40, &m, size - 30, &[9u8; 30]).unwrap();
            for target in 0..3 {
                if !l.holds(target) {
                    continue;
                }
                m.down.set(1 << target);
                let mut pieces = Vec::new();
                rebuild_part(&l, size, &m, target, |off, b| {
                    pieces.push((off, b.to_vec()));
                    Ok(())
                })
                .unwrap();
                let given: usize = pieces.iter().map(|(_, b)| b.len()).sum();
                // RAIF1 copies in chunks of 1 MiB; the striped levels row by row.
                assert!(
                    given < 3 << 20,
                    "{level:?} {target}: {given} bytes computed"
                );
                if level != Level::Raif1 {
                    assert!(given < 200, "{level:?} {target}: {given} bytes computed");
                }
                let part = m.parts.borrow()[target].clone();
                for (off, b) in pieces {
                    let want: Vec<u8> = (0..b.len())
                        .map(|i| part.get(off as usize + i).copied().unwrap_or(0))
                        .collect();
                    assert_eq!(b, want, "{level:?} branch {target} at {off}");
                }
            }
        }
    }

    /// Data written past the recorded end with no parity update (a crash in between): the
    /// parity of those rows is recomputed from the data.
    #[test]
    fn resync_makes_the_tail_rows_parity_agree_with_the_data() {
        for level in [Level::Raif4, Level::Raif5] {
            let l = layout(level, 3);
            let m = Mem::new(3);
            let head: Vec<u8> = (0..40u32).map(|i| i as u8 | 1).collect();
            write(&l, 0, &m, 0, &head).unwrap();
            // 60 more bytes straight into the data parts, parity left alone.
            let tail: Vec<u8> = (0..60u32).map(|i| (i * 3) as u8 | 1).collect();
            for (k, byte) in tail.iter().enumerate() {
                let (row, col, a) = l.locate(40 + k as u64);
                m.pwrite(l.data_branch(row, col), &[*byte], row * 16 + a)
                    .unwrap();
            }
            assert!(
                !parity_ok(&l, &m, 100),
                "{level:?}: the tail broke the parity"
            );
            let (first, _, _) = l.locate(40);
            resync_parity(&l, 100, &m, first).unwrap();
            assert!(parity_ok(&l, &m, 100), "{level:?}");
            let mut got = vec![0u8; 100];
            read(&l, 100, &m, 0, &mut got).unwrap();
            assert_eq!(&got[..40], &head[..]);
            assert_eq!(&got[40..], &tail[..]);
        }
    }

    #[test]
    fn raif0_ranges_on_a_failed_branch_give_eio() {
        let l = layout(Level::Raif0, 2);
        let m = Mem::new(2);
        write(&l, 0, &m, 0, &[5u8; 64]).unwrap();
        m.down.set(1 << 1); // start is 1: units 0 and 2 are there
        let mut buf = [0u8; 16];
        assert!(read(&l, 64, &m, 0, &mut buf).is_err());
        assert_eq!(read(&l, 64, &m, 16, &mut buf).unwrap(), (16, false));
    }

    /// Reads the whole file (`size` bytes).
    fn read_all(l: &Layout, m: &Mem, size: u64) -> Vec<u8> {
        let mut got = vec![0u8; size as usize];
        let (k, _) = read(l, size, m, 0, &mut got)
            .unwrap_or_else(|e| panic!("{l:?} down {:#b}: {e}", m.down.get()));
        assert_eq!(k as u64, size);
        got
    }

    /// With each branch in turn switched off, the file still reads as `want`: copies and
    /// parity agree with the data, whichever branch fails next.
    fn survives_any_one_failure(l: &Layout, m: &Mem, want: &[u8], what: &str) {
        if l.level == Level::Raif0 {
            return;
        }
        let before = m.down.get();
        for x in 0..l.width as usize {
            m.down.set(before | 1 << x);
            assert_eq!(
                read_all(l, m, want.len() as u64),
                want,
                "{what}, branch {x} off"
            );
        }
        m.down.set(before);
    }

    /// Writes and truncations on branches that run out of room (ENOSPC, EDQUOT, EFBIG), for
    /// every level: no branch is ever failed for it, a refused write leaves the old size and,
    /// within it, a prefix of its new bytes with the old ones after it, and copies and parity
    /// stay consistent enough for any one branch to fail afterwards. With `cow`, overwrites
    /// need room too, so putting things back can itself be refused: the part is then given
    /// up for the file and everything still reads right from the others.
    #[test]
    fn refused_writes_leave_every_level_consistent() {
        let mut refused = [0u32; 2];
        let (mut given_up, mut stale) = (0, 0);
        for cow in [false, true] {
            for level in [Level::Raif0, Level::Raif1, Level::Raif4, Level::Raif5] {
                for n in 2..=4u8 {
                    if n < level.min_branches() as u8 {
                        continue;
                    }
                    let l = layout(level, n);
                    let m = Mem::new(n as usize);
                    m.cow.set(cow);
                    let mut reference: Vec<u8> = Vec::new();
                    let mut seed = 0x9e37_79b9 + n as u64 * 31 + cow as u64;
                    for step in 0..600 {
                        let what = format!("{level:?} n={n} cow={cow} step {step}");
                        if step % 15 == 0 {
                            let b = (rng(&mut seed) % n as u64) as usize;
                            let mut room = m.room.borrow_mut();
                            room.iter_mut().for_each(|r| *r = None);
                            if rng(&mut seed) % 4 != 0 {
                                room[b] = Some((rng(&mut seed) % 40) as usize);
                            }
                            let mut max = m.max.borrow_mut();
                            max.iter_mut().for_each(|x| *x = None);
                            if rng(&mut seed) % 5 == 0 {
                                // A file system's largest file (no part is longer already).
                                let len = m.parts.borrow()[b].len();
                                max[b] = Some(len.max(20 + (rng(&mut seed) % 80) as usize));
                            }
                            m.errno.set(if step % 2 == 0 {
                                libc::ENOSPC
                            } else {
                                libc::EDQUOT
                            });
                        }
                        let size = reference.len() as u64;
                        let old = reference.clone();
                        if rng(&mut seed) % 5 == 0 {
                            let new = rng(&mut seed) % 200;
                            match truncate(&l, size, new, &m) {
                                Ok(_) => reference.resize(new as usize, 0),
                                Err(e) => {
                                    assert!(no_room(&e), "{what}: {e}");
                                    refused[cow as usize] += 1;
                                }
                            }
                        } else {
                            let off = rng(&mut seed) % 220;
                            let len = 1 + rng(&mut seed) % 100;
                            let data: Vec<u8> =
                                (0..len).map(|_| rng(&mut seed) as u8 | 1).collect();
                            match write(&l, size, &m, off, &data) {
                                Ok(_) => {
                                    let end = (off + len) as usize;
                                    if reference.len() < end {
                                        reference.resize(end, 0);
                                    }
                                    reference[off as usize..end].copy_from_slice(&data);
                                }
                                Err(e) => {
                                    assert!(no_room(&e), "{what}: {e}");
                                    refused[cow as usize] += 1;
                                    let got = read_all(&l, &m, size);
                                    let (lo, hi) = (off as usize, (off + len).min(size) as usize);
                                    for i in (0..size as usize).filter(|i| !(lo..hi).contains(i)) {
                                        assert_eq!(got[i], old[i], "{what}: byte {i} outside");
                                    }
                                    if lo < hi {
                                        let new = &data[..hi - lo];
                                        let j = (lo..hi).find(|&i| got[i] != new[i - lo]);
                                        let j = j.unwrap_or(hi);
                                        if m.given_up.get() == 0 && !m.stale_parity.get() {
                                            assert_eq!(&got[j..hi], &old[j..hi], "{what}: prefix");
                                        } else {
                                            for i in lo..hi {
                                                assert!(
                                                    got[i] == old[i] || got[i] == new[i - lo],
                                                    "{what}: byte {i} neither old nor new"
                                                );
                                            }
                                        }
                                    }
                                    reference = got;
                                }
                            }
                        }
                        assert_eq!(m.failures.get(), 0, "{what}: a branch was failed");
                        let size = reference.len() as u64;
                        assert_eq!(read_all(&l, &m, size), reference, "{what}");
                        if m.given_up.get() != 0 || m.stale_parity.get() {
                            // What `raif scrub --repair` does, once there is room again: copy
                            // the copies given up from another, recompute a stale parity.
                            given_up += 1;
                            m.room.borrow_mut().iter_mut().for_each(|r| *r = None);
                            m.max.borrow_mut().iter_mut().for_each(|x| *x = None);
                            let g = m.given_up.get();
                            assert!(level == Level::Raif1 || g == 0, "{what}: {g:#b}");
                            assert!(g.count_ones() < n as u32, "{what}: no copy left");
                            for b in (0..n as usize).filter(|b| g & (1 << b) != 0) {
                                let mut part = vec![0u8; l.part_size(b, size) as usize];
                                rebuild_part(&l, size, &m, b, |o, x| {
                                    part[o as usize..o as usize + x.len()].copy_from_slice(x);
                                    Ok(())
                                })
                                .unwrap();
                                m.alloc.borrow_mut()[b] = vec![true; part.len()];
                                m.parts.borrow_mut()[b] = part;
                            }
                            if m.stale_parity.get() {
                                stale += 1;
                                resync_parity(&l, size, &m, 0).unwrap();
                            }
                            m.given_up.set(0);
                            m.stale_parity.set(false);
                            m.down.set(0);
                        }
                        assert!(parity_ok(&l, &m, size), "{what}: parity");
                        for b in 0..n as usize {
                            let len = m.parts.borrow()[b].len() as u64;
                            let want = l.part_size(b, size);
                            assert!(
                                len <= want && (level.striped() || len == want),
                                "{what}: part {b} is {len} bytes, {want} wanted"
                            );
                        }
                        survives_any_one_failure(&l, &m, &reference, &what);
                    }
                }
            }
        }
        assert!(refused[0] > 200 && refused[1] > 200, "refusals {refused:?}");
        assert!(
            given_up > stale && stale > 0,
            "given up {given_up}, stale parity {stale}"
        );
    }
}
