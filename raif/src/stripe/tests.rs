//! The data path against parts in memory.

use std::cell::{Cell, RefCell};
use std::io;

use super::*;
use crate::layout::Level;
use crate::part_io::{no_room, xor_into};

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
                        let data: Vec<u8> = (0..len).map(|_| rng(&mut seed) as u8 | 1).collect();
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
