//! One operation of the data path over a file's parts ([`Access`]): its bookkeeping, and the
//! reads, writes and reconstructions of single units and whole rows it is made of, with the
//! write-hole entries they announce and the settling of a write refused for lack of room
//! (see [`crate::stripe`]).

use std::cell::{Cell, RefCell};
use std::io;

use crate::layout::{Layout, Level};
use crate::part_io::{
    BadBlock, How, OutOfDate, Parts, bad_block, degraded, eio, read_full, refused,
    rewrite_differing, write_full, xor_into,
};
use crate::sums;

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
pub(super) struct Access<'a, P: Parts> {
    pub(super) l: &'a Layout,
    pub(super) p: &'a P,
    /// The file's logical size as the operation goes (what a repaired block may span).
    pub(super) size: Cell<u64>,
    pub(super) wrote: Cell<bool>,
    pub(super) degraded: Cell<bool>,
}

/// Attempts at an operation on a block that failed its checksum and was repaired.
const REPAIR_TRIES: usize = 2;

impl<'a, P: Parts> Access<'a, P> {
    pub(super) fn new(l: &'a Layout, p: &'a P, size: u64) -> Self {
        Access {
            l,
            p,
            size: Cell::new(size),
            wrote: Cell::new(false),
            degraded: Cell::new(false),
        }
    }

    /// Rewrites block `bad` from redundancy ([`recover_block`]).
    pub(super) fn repair(&self, bad: BadBlock) -> io::Result<()> {
        let p = self.p;
        let r = recover_block(self.l, self.size.get(), p, bad)
            .and_then(|block| p.put_block(bad.branch, &block, bad.offset));
        p.checksum_event(bad, r.is_ok());
        r.map_err(|_| eio())
    }

    /// [`read_full`], repairing a block that fails its checksum and reading again; a block
    /// that cannot be repaired is answered with its [`BadBlock`] error.
    pub(super) fn read_fixing(&self, b: usize, buf: &mut [u8], off: u64) -> io::Result<()> {
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
    pub(super) fn read_err(&self, b: usize, e: io::Error) -> io::Result<()> {
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
    pub(super) fn fixing(&self, b: usize, f: impl Fn() -> io::Result<()>) -> io::Result<()> {
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
    pub(super) fn write(&self, b: usize, buf: &[u8], off: u64) -> io::Result<()> {
        self.fixing(b, || write_full(self.p, b, buf, off))
    }

    pub(super) fn truncate(&self, b: usize, len: u64) -> io::Result<()> {
        self.fixing(b, || self.p.truncate(b, len))
    }

    pub(super) fn write_err(&self, b: usize, e: io::Error) -> io::Result<()> {
        if refused(&e) {
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
    pub(super) fn zero(&self, row: u64, col: usize, a: u64, size: u64) -> bool {
        self.l.unit_start(row, col) + a >= size
    }

    /// Reads `out.len()` bytes of data unit `(row, col)` from `a`, reconstructing them from the
    /// rest of the row when its branch is unusable.
    pub(super) fn read_unit(
        &self,
        row: u64,
        col: usize,
        a: u64,
        size: u64,
        out: &mut [u8],
    ) -> io::Result<()> {
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
    pub(super) fn reconstruct(
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
    pub(super) fn write_unit(
        &self,
        row: u64,
        col: usize,
        a: u64,
        new: &[u8],
        size: u64,
    ) -> io::Result<()> {
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
                if r.as_ref().is_err_and(refused) {
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
    pub(super) fn announce(
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
                    fresh: others_zero,
                },
            )
        }
    }

    /// After a refused write of `new` at part offset `off` into data branch `db` (parity on
    /// `pb`): puts the row back as it was. `par` holds the new parity and `tmp` the old data
    /// (read-modify-write), or, with `others_zero`, the rest of the row is zero there and the
    /// unit only has to equal the parity again.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn settle_unit(
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
    /// recomputing the parity over bytes already written ([`Access::settle_row`]).
    pub(super) fn write_row(&self, row: u64, data: &[u8], size: u64) -> io::Result<()> {
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
        if r.as_ref().is_err_and(refused) {
            self.settle_row(row, data);
        }
        r
    }

    /// After a refused whole-row write of `data`: the parity of `row` recomputed from its data
    /// units as they now are (a unit whose branch failed during the write lives in the parity
    /// with its new bytes).
    pub(super) fn settle_row(&self, row: u64, data: &[u8]) {
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

/// What block `bad` of a file of `size` bytes should hold, from redundancy: the same block of
/// another mirror copy that checks out, or the XOR of the same block of every other part (in
/// RAIF4/5 every row's units and parity XOR to zero, whatever the stripe unit). Its length is
/// the block's, cut at the end of the part. `EIO` where there is nothing to rebuild it from
/// (RAIF0, a second part missing or failing its checksum, the parity out of date). `p` should
/// verify what it reads ([`crate::sums::Summed`]).
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
