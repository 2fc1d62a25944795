//! The [`Parts`] of an operation with checksums ([`Summed`]): reads verified, writes and
//! truncations keeping the entries (see [`crate::sums`]).

use std::io;

use super::{
    BLOCK, BS, ENTRY, check, crc, entry, put_entries, read_entries, read_upto, set_entry, with_bufs,
};
use crate::layout::Layout;
use crate::part_io::{BadBlock, How, OutOfDate, Parts, write_full};

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

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::super::tests::{rd, rw};
    use super::*;

    /// Parts and their sum files in memory.
    struct MemParts {
        data: RefCell<Vec<Vec<u8>>>,
        sums: RefCell<Vec<Vec<u8>>>,
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
}
