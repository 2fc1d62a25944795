//! Scrub's reads and block checksums: every byte of a part is read once, by the copy or parity
//! pass or else by [`Scrubber::read_parts`], and every block that keeps a checksum is verified
//! as it is read; one that fails is rebuilt from redundancy and, with `--repair`, rewritten.

use std::io;
use std::os::fd::AsFd;

use fsprof_fuse::sys;

use super::{CHUNK, Scrubber, set_mtime};
use crate::layout::{FileMeta, Layout};
use crate::offline::{AdminParts, Entry};
use crate::part_io::{self, BadBlock, Parts};
use crate::stripe;
use crate::sums::{self, Summed};

impl Scrubber {
    /// Reads, once, every part of `b_mask` that the copy or parity pass did not read (a file
    /// with nothing to compare: RAIF0, one copy, a part missing, a parity out of date),
    /// verifying the blocks that have checksums: reading finds the blocks a branch can no
    /// longer read, and a block that fails its checksum is rebuilt from redundancy.
    pub(super) fn read_parts(
        &self,
        e: &Entry,
        parts: &AdminParts,
        meta: &FileMeta,
        size: u64,
        b_mask: u64,
    ) -> io::Result<()> {
        let l = &meta.layout;
        let mut buf = vec![0u8; CHUNK];
        for b in (0..l.width as usize).filter(|&b| b_mask & (1 << b) != 0) {
            let Some(fd) = parts.fds[b].as_ref() else {
                continue;
            };
            let plen = sys::fstat(fd.as_fd())?.size;
            let mut off = 0;
            while off < plen {
                // Holes read as zeros and hold no checksum worth checking.
                match parts.next_data(b, off) {
                    None => break,
                    Some(d) => off = off.max(d / sums::BLOCK * sums::BLOCK),
                }
                if off >= plen {
                    break;
                }
                let n = ((plen - off) as usize).min(CHUNK);
                self.read_checked(e, parts, l, size, b, &mut buf[..n], off)?;
                self.read(n as u64);
                off += n as u64;
            }
        }
        Ok(())
    }

    /// Reads `buf.len()` bytes of branch `b`'s part at `off` (once), verifying the blocks
    /// that have checksums: a block that fails is reported, rebuilt from redundancy (and
    /// rewritten with `--repair`), and read again as it now is; the copy and parity passes
    /// leave what it flagged alone.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn read_checked(
        &self,
        e: &Entry,
        parts: &AdminParts,
        l: &Layout,
        size: u64,
        b: usize,
        buf: &mut [u8],
        off: u64,
    ) -> io::Result<()> {
        if !parts.has_sums(b) {
            return part_io::read_full(parts, b, buf, off);
        }
        if off % sums::BLOCK != 0 || buf.len() as u64 % sums::BLOCK != 0 {
            return self.read_summed(e, parts, l, size, b, buf, off);
        }
        part_io::read_full(parts, b, buf, off)?;
        // Verified as read; a bad block is handled, read again as it now is, and the blocks
        // after it verified in turn.
        let bs = sums::BLOCK as usize;
        let mut from = 0;
        while let Err(err) = sums::verify(parts, b, off, buf, from) {
            let Some(bad) = part_io::bad_block(&err) else {
                return Err(err);
            };
            self.bad_block(e, parts, l, size, bad)?;
            let at = (bad.offset - off) as usize;
            let end = (at + bs).min(buf.len());
            part_io::read_full(parts, b, &mut buf[at..end], bad.offset)?;
            from = at / bs + 1;
        }
        Ok(())
    }

    /// [`Scrubber::read_checked`] of a range that is not whole blocks (units of a stripe
    /// under 4 KiB): through the checksum layer, which reads the blocks around it (so those
    /// bytes are read more than once).
    #[allow(clippy::too_many_arguments)]
    fn read_summed(
        &self,
        e: &Entry,
        parts: &AdminParts,
        l: &Layout,
        size: u64,
        b: usize,
        buf: &mut [u8],
        off: u64,
    ) -> io::Result<()> {
        let summed = Summed(parts, crate::sums::Ends::unknown());
        let mut at = 0;
        while at < buf.len() {
            let want = buf.len() - at;
            match summed.pread(b, &mut buf[at..], off + at as u64) {
                // A part reads short only at its end.
                Ok(n) if n < want => {
                    buf[at + n..].fill(0);
                    return Ok(());
                }
                Ok(n) => at += n,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => {
                    let Some(bad) = part_io::bad_block(&err) else {
                        return Err(err);
                    };
                    self.bad_block(e, parts, l, size, bad)?;
                    let to = ((bad.offset + sums::BLOCK - off) as usize).min(buf.len());
                    part_io::read_full(parts, b, &mut buf[at..to], off + at as u64)?;
                    at = to;
                }
            }
        }
        Ok(())
    }

    fn bad_block(
        &self,
        e: &Entry,
        parts: &AdminParts,
        l: &Layout,
        size: u64,
        bad: BadBlock,
    ) -> io::Result<()> {
        self.flagged.borrow_mut().push(bad);
        let (b, off) = (bad.branch, bad.offset);
        let at = sums::logical(l, b, off)
            .map_or_else(|| "parity".to_string(), |o| format!("logical offset {o}"));
        let mut cur = vec![0u8; sums::BLOCK as usize];
        part_io::read_full(parts, b, &mut cur, off)?;
        let Ok(good) = stripe::recover_verified(l, size, parts, bad) else {
            self.report(
                e.path,
                &format!(
                    "block on branch {b} at part offset {off} ({at}) fails its checksum, and \
                     nothing checks out to rebuild it from"
                ),
                false,
            );
            return Ok(());
        };
        let summed = Summed(parts, crate::sums::Ends::unknown());
        let mtime = |x: usize| {
            let fd = parts.fds[x].as_ref()?;
            sys::fstat(fd.as_fd()).ok().map(|s| (fd, s.mtime))
        };
        // Rewriting the block leaves the part's time as it was (the mtime evidence of the
        // copy and parity passes stays what it was).
        let before = mtime(b);
        // The same rewrite either way: the block as the other parts say (only its entry
        // changes where the block already holds that).
        let fixed = self.repair
            && summed.put_block(b, &good, off).is_ok()
            && before.is_none_or(|(fd, t)| set_mtime(fd, t).is_ok());
        let what = if cur[..good.len()] == good[..] && cur[good.len()..].iter().all(|&x| x == 0) {
            format!(
                "checksum of the block on branch {b} at part offset {off} ({at}) is wrong: \
                 the block agrees with the other parts (its entry was not written)"
            )
        } else {
            format!(
                "block on branch {b} at part offset {off} ({at}) fails its checksum: \
                 corrupt (the other parts, whose blocks check out, say what it holds)"
            )
        };
        self.report(e.path, &what, fixed);
        Ok(())
    }

    /// Whether a block of `b`'s part in `[off, off + len)` failed its checksum (reported).
    pub(super) fn flagged(&self, b: Option<usize>, off: u64, len: u64) -> bool {
        self.flagged.borrow().iter().any(|x| {
            b.is_none_or(|b| b == x.branch) && x.offset < off + len && off < x.offset + sums::BLOCK
        })
    }
}
