//! What the data path computes for whole files rather than requests: parity recomputed from
//! the data units, a lost part's content from the others, a bad block from redundancy.

use std::io;

use super::access::{Access, recover_block};
use super::{plain_eio, read_in};
use crate::layout::{Layout, Level, Role};
use crate::part_io::{BadBlock, Parts, next_data_any, read_full, write_full, xor_into};
use crate::sums::{Ends, Summed};

/// [`recover_block`] with the reads of `p` verified against their checksums.
pub fn recover_verified(
    l: &Layout,
    size: u64,
    p: &impl Parts,
    bad: BadBlock,
) -> io::Result<Vec<u8>> {
    recover_block(l, size, &Summed(p, Ends::unknown()), bad)
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
    let op = Access::new(l, p, size);
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
