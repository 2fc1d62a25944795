//! Scrub's pass over block checksums: every block of every part that keeps them is verified,
//! and one that fails is rebuilt from redundancy and, with `--repair`, rewritten.

use std::io;
use std::os::fd::AsFd;

use fsprof_fuse::sys;

use super::{CHUNK, Scrubber, set_mtime};
use crate::layout::{FileMeta, Layout};
use crate::offline::{AdminParts, Entry};
use crate::parts::{self, BadBlock, Parts};
use crate::stripe;
use crate::sums::{self, Summed};

impl Scrubber {
    /// Verifies every block of every part that has checksums; a block that fails is rebuilt
    /// from redundancy (whose blocks must check out) and, with `--repair`, rewritten. A block
    /// that agrees with redundancy has a wrong checksum entry (a crash between a block and its
    /// entry on a volume without an intent log): the entry is rewritten.
    pub(super) fn checksums(
        &self,
        e: &Entry,
        parts: &AdminParts,
        meta: &FileMeta,
        size: u64,
    ) -> io::Result<()> {
        let l = &meta.layout;
        let summed = Summed(parts, crate::sums::Ends::unknown());
        let mut buf = vec![0u8; CHUNK];
        for b in 0..l.width as usize {
            let Some(fd) = parts.fds[b].as_ref().filter(|_| parts.has_sums(b)) else {
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
                match parts::read_full(&summed, b, &mut buf[..n], off) {
                    Ok(()) => {
                        self.read(n as u64);
                        off += n as u64;
                    }
                    Err(err) => {
                        let Some(bad) = parts::bad_block(&err) else {
                            return Err(err);
                        };
                        self.read(bad.offset + sums::BLOCK - off);
                        self.bad_block(e, parts, l, size, bad)?;
                        off = bad.offset + sums::BLOCK;
                    }
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
        parts::read_full(parts, b, &mut cur, off)?;
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
