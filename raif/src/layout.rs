//! Where a file's bytes live: the RAID level, the stripe geometry over the branches, the size of
//! each branch's part, and the record of all that kept with the file (the `user.raif` extended
//! attribute on every branch).
//!
//! # Geometry
//!
//! A striped file (RAIF0, RAIF4, RAIF5) is cut into *units* of `stripe` bytes. `D` consecutive
//! units form a *row* (`D` = N for RAIF0, N − 1 for RAIF4/5); each branch holds exactly one unit
//! of every row (data or parity) at offset `row × stripe` of its part, so every part is an
//! ordinary file whose length follows from the logical size ([`Layout::part_size`]).
//!
//! * RAIF0: unit column `c` of every row on branch `(start + c) mod N`.
//! * RAIF4: parity on the dedicated branch `parity`; the data columns on the other branches in
//!   index order, rotated by `start`.
//! * RAIF5: the parity of row `r` on branch `(start − 1 − r) mod N`, data column `c` on the
//!   branch after it, `(parity + 1 + c) mod N` (left-symmetric): row 0's first unit is on
//!   `start`, so a file smaller than one unit has its data on `start` and its parity on the
//!   branch before.
//! * RAIF1: a full copy on `copies` branches `start, start + 1, ...` (mod N); the other branches
//!   hold an empty part.
//!
//! Bytes a part does not have (it is shorter) read as zeros, for data and parity alike: holes
//! left by a truncate up or a write past the end need no parity update.

use std::fmt::Write as _;

/// Most branches a volume may have (branch sets are 64-bit masks).
pub const MAX_BRANCHES: usize = 64;

/// Smallest and largest stripe unit.
pub const STRIPE_RANGE: (u32, u32) = (512, 64 << 20);

/// Name of the extended attribute holding a file's or directory's record.
pub const XATTR: &str = "user.raif";

/// Name of the extended attribute holding the identity of a symlink or special file
/// ([`Meta::Other`]): Linux allows `user.*` attributes on regular files and directories only,
/// so these carry a `trusted.*` one, which only root may read and write.
pub const XATTR_OTHER: &str = "trusted.raif";

/// Whether `name` is one of RAIF's own attributes.
pub fn ours(name: &[u8]) -> bool {
    name.starts_with(XATTR.as_bytes()) || name.starts_with(XATTR_OTHER.as_bytes())
}

/// A RAID level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Level {
    /// Striping, no redundancy.
    Raif0,
    /// Mirroring.
    Raif1,
    /// Striping with parity on a dedicated branch.
    Raif4,
    /// Striping with parity rotating per row.
    Raif5,
}

impl Level {
    /// The level numbered `n` (0, 1, 4 or 5).
    pub fn from_num(n: u32) -> Option<Level> {
        Some(match n {
            0 => Level::Raif0,
            1 => Level::Raif1,
            4 => Level::Raif4,
            5 => Level::Raif5,
            _ => return None,
        })
    }

    /// The level's number.
    pub fn num(self) -> u32 {
        match self {
            Level::Raif0 => 0,
            Level::Raif1 => 1,
            Level::Raif4 => 4,
            Level::Raif5 => 5,
        }
    }

    /// Fewest branches the level needs.
    pub fn min_branches(self) -> usize {
        match self {
            Level::Raif0 | Level::Raif1 => 2,
            Level::Raif4 | Level::Raif5 => 3,
        }
    }

    /// Whether the level stripes data (and so keeps the logical size in the record).
    pub fn striped(self) -> bool {
        self != Level::Raif1
    }

    /// Branches' worth of usable space out of `n` (for `statfs`).
    pub fn data_branches(self, n: usize) -> usize {
        match self {
            Level::Raif0 => n,
            Level::Raif1 => 1,
            Level::Raif4 | Level::Raif5 => n - 1,
        }
    }
}

/// What a branch holds in one row of a striped file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The data unit of this column.
    Data(usize),
    /// The row's parity.
    Parity,
}

/// The placement of one file (immutable once the file exists).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// RAID level.
    pub level: Level,
    /// Stripe unit in bytes.
    pub stripe: u32,
    /// Number of branches.
    pub width: u8,
    /// RAIF1: number of copies (others: `width`).
    pub copies: u8,
    /// RAIF0/1/5: the branch of the first unit (or copy); RAIF4: the first data column.
    pub start: u8,
    /// RAIF4: the parity branch (others: unused).
    pub parity: u8,
}

impl Layout {
    fn n(&self) -> usize {
        self.width as usize
    }

    fn su(&self) -> u64 {
        self.stripe as u64
    }

    /// Data units per row (`D`).
    #[inline]
    pub fn data_cols(&self) -> usize {
        match self.level {
            Level::Raif0 => self.n(),
            Level::Raif1 => 1,
            Level::Raif4 | Level::Raif5 => self.n() - 1,
        }
    }

    /// Logical bytes per row.
    #[inline]
    pub fn row_bytes(&self) -> u64 {
        self.data_cols() as u64 * self.su()
    }

    /// Row, column and offset within the unit of logical offset `off`.
    #[inline]
    pub fn locate(&self, off: u64) -> (u64, usize, u64) {
        let unit = off / self.su();
        let d = self.data_cols() as u64;
        (unit / d, (unit % d) as usize, off % self.su())
    }

    /// Logical offset where unit `(row, col)` starts.
    #[inline]
    pub fn unit_start(&self, row: u64, col: usize) -> u64 {
        row * self.row_bytes() + col as u64 * self.su()
    }

    /// Bytes of unit `(row, col)` below logical size `size`.
    #[inline]
    pub fn unit_len(&self, row: u64, col: usize, size: u64) -> u64 {
        size.saturating_sub(self.unit_start(row, col))
            .min(self.su())
    }

    /// RAIF4: the data branches in index order.
    fn raif4_data_branch(&self, i: usize) -> usize {
        if i < self.parity as usize { i } else { i + 1 }
    }

    /// The branch holding data unit `(row, col)`.
    #[inline]
    pub fn data_branch(&self, row: u64, col: usize) -> usize {
        let n = self.n();
        let start = self.start as usize;
        match self.level {
            Level::Raif0 => (start + col) % n,
            Level::Raif1 => start,
            Level::Raif4 => self.raif4_data_branch((start + col) % (n - 1)),
            Level::Raif5 => (self.raif5_parity(row) + 1 + col) % n,
        }
    }

    fn raif5_parity(&self, row: u64) -> usize {
        let n = self.n() as u64;
        ((self.start as u64 + n - 1 + n - row % n) % n) as usize
    }

    /// The branch holding the parity of `row` (RAIF4/5).
    #[inline]
    pub fn parity_branch(&self, row: u64) -> Option<usize> {
        match self.level {
            Level::Raif4 => Some(self.parity as usize),
            Level::Raif5 => Some(self.raif5_parity(row)),
            Level::Raif0 | Level::Raif1 => None,
        }
    }

    /// What branch `b` holds in `row` of a striped file.
    pub fn role(&self, b: usize, row: u64) -> Role {
        let n = self.n();
        let start = self.start as usize;
        match self.level {
            Level::Raif0 => Role::Data((b + n - start) % n),
            Level::Raif1 => Role::Data(0),
            Level::Raif4 => {
                let p = self.parity as usize;
                if b == p {
                    return Role::Parity;
                }
                let i = if b < p { b } else { b - 1 };
                Role::Data((i + (n - 1) - start % (n - 1)) % (n - 1))
            }
            Level::Raif5 => {
                let p = self.raif5_parity(row);
                if b == p {
                    Role::Parity
                } else {
                    Role::Data((b + n - p - 1) % n)
                }
            }
        }
    }

    /// Whether branch `b` holds a copy (RAIF1) or units (the others: every branch).
    #[inline]
    pub fn holds(&self, b: usize) -> bool {
        match self.level {
            Level::Raif1 => (b + self.n() - self.start as usize) % self.n() < self.copies as usize,
            _ => true,
        }
    }

    /// RAIF1: the copy to read logical offset `off` from first (copies take turns unit by unit,
    /// so large files are read from all of them).
    #[inline]
    pub fn copy_for(&self, off: u64, turn: usize) -> usize {
        let k = ((off / self.su()) as usize + turn) % self.copies as usize;
        (self.start as usize + k) % self.n()
    }

    /// The branch whose part answers `stat` first: the one holding the file's first byte.
    pub fn home(&self) -> usize {
        self.data_branch(0, 0)
    }

    /// Length of branch `b`'s part of a file of `size` bytes.
    pub fn part_size(&self, b: usize, size: u64) -> u64 {
        if self.level == Level::Raif1 {
            return if self.holds(b) { size } else { 0 };
        }
        if size == 0 {
            return 0;
        }
        let units = size.div_ceil(self.su());
        let last_row = (units - 1) / self.data_cols() as u64;
        let len = match self.role(b, last_row) {
            Role::Data(c) => self.unit_len(last_row, c, size),
            Role::Parity => self.unit_len(last_row, 0, size),
        };
        last_row * self.su() + len
    }

    /// The logical size the data parts imply, given each branch's part length (`None`: not
    /// known); for striped levels. A crash between a write past the end and the close that
    /// records the new size leaves the record smaller than this.
    pub fn implied_size(&self, lens: &[Option<u64>]) -> u64 {
        let su = self.su();
        lens.iter()
            .enumerate()
            .filter_map(|(b, len)| {
                let last = len.filter(|&l| l > 0)? - 1;
                let row = last / su;
                match self.role(b, row) {
                    Role::Data(c) => Some(self.unit_start(row, c) + last % su + 1),
                    Role::Parity => None,
                }
            })
            .max()
            .unwrap_or(0)
    }

    /// Checks the fields against each other (for records read from disk).
    pub fn valid(&self) -> bool {
        let n = self.n();
        n >= self.level.min_branches()
            && n <= MAX_BRANCHES
            && (STRIPE_RANGE.0..=STRIPE_RANGE.1).contains(&self.stripe)
            && (self.start as usize) < n
            && (self.parity as usize) < n
            && (self.level != Level::Raif1 || (1..=n).contains(&(self.copies as usize)))
    }
}

/// The record of a regular file, kept in [`XATTR`] on every branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileMeta {
    /// The file's identity (and its inode number through the mount).
    pub id: u64,
    /// Placement.
    pub layout: Layout,
    /// Logical size (striped levels; RAIF1 files take it from a copy).
    pub size: u64,
    /// Generation: raised when the file changes while some branch misses the change.
    pub generation: u64,
    /// Branches whose part was lost (a RAIF0 part that could not be rebuilt: ranges there fail
    /// with `EIO`), or is out of date (a RAIF1/4/5 part that a write refused for lack of room
    /// left disagreeing with the others: reconstructed from them until `raif scrub --repair`).
    pub lost: u64,
    /// RAIF4/5: the parity disagrees with the data units after a write refused for lack of
    /// room could not be taken back; nothing is reconstructed from it until `raif scrub
    /// --repair` recomputes it (see [`crate::part_io::OutOfDate`]).
    pub parity_stale: bool,
}

/// A record as stored in [`XATTR`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Meta {
    /// A regular file.
    File(FileMeta),
    /// A directory, with its identity.
    Dir(u64),
    /// A symlink or special file, with its identity (kept in [`XATTR_OTHER`]).
    Other(u64),
}

/// Longest encoded record.
pub const META_MAX: usize = 256;

/// Longest value of [`XATTR`]: a record, and on a part that keeps checksums for the part
/// before it, a NUL and their first entries ([`crate::sums`]).
pub const ATTR_MAX: usize = META_MAX + 1 + WINDOW;

/// Most bytes of checksum entries a record attribute holds after the record: those of the
/// first 256 blocks of a part (1 MiB of part, 4 bytes a block; see [`crate::sums`]).
pub const WINDOW: usize = 1024;

/// The mask of branches `0..n`.
pub fn all_mask(n: usize) -> u64 {
    if n >= 64 { u64::MAX } else { (1u64 << n) - 1 }
}

/// The record in a value of [`XATTR`] (what precedes its first NUL, if it has one).
#[inline]
pub fn record_of(value: &[u8]) -> &[u8] {
    value.split(|&c| c == 0).next().unwrap_or(value)
}

/// A record encoded on the stack (no allocation).
pub struct Encoded {
    buf: [u8; META_MAX],
    len: usize,
}

impl Encoded {
    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl std::fmt::Write for Encoded {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        if end > META_MAX {
            return Err(std::fmt::Error);
        }
        self.buf[self.len..end].copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

impl Meta {
    /// The identity.
    pub fn id(&self) -> u64 {
        match self {
            Meta::File(f) => f.id,
            Meta::Dir(id) | Meta::Other(id) => *id,
        }
    }

    /// Encodes as `1 F ID LEVEL STRIPE WIDTH COPIES START PARITY SIZE GENERATION LOST`, followed
    /// by ` P` when the parity is out of date (`1 D ID` for a directory, `1 O ID` for a symlink
    /// or special file): ASCII, readable with `getfattr`, and short enough (about 50 bytes) to
    /// live inside an ext4 inode with a small part's checksum entries after it (a NUL, then
    /// 4 bytes a block: [`crate::sums`]). A longer value would need an xattr block of its
    /// own, allocated and freed with the file, which ext4 shares between equal values: the
    /// parts of one file would then share one block, and changing or freeing it serializes
    /// their updates and unlinks.
    pub fn encode(&self) -> Encoded {
        let mut e = Encoded {
            buf: [0; META_MAX],
            len: 0,
        };
        let r = match self {
            Meta::Dir(id) => write!(e, "1 D {id:016x}"),
            Meta::Other(id) => write!(e, "1 O {id:016x}"),
            Meta::File(f) => {
                let l = &f.layout;
                write!(
                    e,
                    "1 F {:016x} {} {} {} {} {} {} {} {} {:x}",
                    f.id,
                    l.level.num(),
                    l.stripe,
                    l.width,
                    l.copies,
                    l.start,
                    l.parity,
                    f.size,
                    f.generation,
                    f.lost
                )
                .and_then(|()| {
                    if f.parity_stale {
                        e.write_str(" P")
                    } else {
                        Ok(())
                    }
                })
            }
        };
        r.expect("records fit in META_MAX");
        e
    }

    /// Decodes a record, or the record in a value of [`XATTR`] that also holds checksums
    /// ([`record_of`]); `None` if it is not one (or is inconsistent).
    pub fn decode(b: &[u8]) -> Option<Meta> {
        let s = std::str::from_utf8(record_of(b)).ok()?;
        let mut it = s.split(' ');
        if it.next()? != "1" {
            return None;
        }
        let kind = it.next()?;
        let id = u64::from_str_radix(it.next()?, 16).ok()?;
        match kind {
            "D" => return Some(Meta::Dir(id)),
            "O" => return Some(Meta::Other(id)),
            _ => {}
        }
        if kind != "F" {
            return None;
        }
        let mut num = || it.next()?.parse::<u64>().ok();
        let level = Level::from_num(u32::try_from(num()?).ok()?)?;
        let stripe = u32::try_from(num()?).ok()?;
        let mut small = || u8::try_from(num()?).ok();
        let (width, copies, start, parity) = (small()?, small()?, small()?, small()?);
        let (size, generation) = (num()?, num()?);
        let lost = u64::from_str_radix(it.next()?, 16).ok()?;
        let parity_stale = match it.next() {
            None => false,
            Some("P") => true,
            Some(_) => return None,
        };
        if it.next().is_some() {
            return None;
        }
        let layout = Layout {
            level,
            stripe,
            width,
            copies,
            start,
            parity,
        };
        layout.valid().then_some(Meta::File(FileMeta {
            id,
            layout,
            size,
            generation,
            lost,
            parity_stale,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lay(level: Level, n: u8, start: u8) -> Layout {
        Layout {
            level,
            stripe: 4,
            width: n,
            copies: n,
            start,
            parity: n - 1,
        }
    }

    #[test]
    fn raif5_rotates_parity_and_starts_data_on_start() {
        let l = lay(Level::Raif5, 3, 1);
        assert_eq!(l.data_branch(0, 0), 1);
        assert_eq!(l.parity_branch(0), Some(0));
        assert_eq!(l.data_branch(0, 1), 2);
        // Row 1: parity moves one branch left.
        assert_eq!(l.parity_branch(1), Some(2));
        assert_eq!(l.data_branch(1, 0), 0);
        assert_eq!(l.parity_branch(2), Some(1));
        assert_eq!(l.parity_branch(3), Some(0));
    }

    #[test]
    fn roles_invert_placement() {
        for level in [Level::Raif0, Level::Raif4, Level::Raif5] {
            for n in 3..=5u8 {
                for start in 0..n {
                    let mut l = lay(level, n, start);
                    if level == Level::Raif4 {
                        l.start = start % (n - 1);
                        l.parity = start;
                    }
                    for row in 0..7 {
                        let mut seen = vec![false; n as usize];
                        for c in 0..l.data_cols() {
                            let b = l.data_branch(row, c);
                            assert_eq!(l.role(b, row), Role::Data(c), "{l:?} row {row}");
                            seen[b] = true;
                        }
                        if let Some(p) = l.parity_branch(row) {
                            assert_eq!(l.role(p, row), Role::Parity);
                            assert!(!seen[p]);
                            seen[p] = true;
                        }
                        assert!(seen.iter().all(|s| *s), "every branch has one unit per row");
                    }
                }
            }
        }
    }

    /// Part sizes equal the bytes each branch would hold, counted unit by unit.
    #[test]
    fn part_sizes_match_a_unit_by_unit_count() {
        for level in [Level::Raif0, Level::Raif4, Level::Raif5] {
            let l = lay(level, 4, 2);
            for size in 0..60u64 {
                let mut want = [0u64; 4];
                let units = size.div_ceil(4);
                let rows = units.div_ceil(l.data_cols() as u64);
                for row in 0..rows {
                    for c in 0..l.data_cols() {
                        let len = l.unit_len(row, c, size);
                        if len > 0 {
                            let b = l.data_branch(row, c);
                            want[b] = want[b].max(row * 4 + len);
                        }
                    }
                    if let Some(p) = l.parity_branch(row) {
                        want[p] = want[p].max(row * 4 + l.unit_len(row, 0, size));
                    }
                }
                for (b, w) in want.iter().enumerate() {
                    assert_eq!(l.part_size(b, size), *w, "{level:?} size {size} branch {b}");
                }
            }
        }
    }

    #[test]
    fn part_lengths_imply_the_size() {
        for level in [Level::Raif0, Level::Raif4, Level::Raif5] {
            let l = lay(level, 4, 1);
            for size in 0..70u64 {
                let lens: Vec<Option<u64>> = (0..4).map(|b| Some(l.part_size(b, size))).collect();
                assert_eq!(l.implied_size(&lens), size, "{level:?} {size}");
            }
        }
    }

    #[test]
    fn raif1_copies() {
        let mut l = lay(Level::Raif1, 4, 3);
        l.copies = 2;
        assert!(l.holds(3) && l.holds(0) && !l.holds(1) && !l.holds(2));
        assert_eq!(l.part_size(0, 10), 10);
        assert_eq!(l.part_size(1, 10), 0);
        assert_eq!(l.copy_for(0, 0), 3);
        assert_eq!(l.copy_for(4, 0), 0);
        assert_eq!(l.copy_for(4, 1), 3);
    }

    #[test]
    fn records_round_trip() {
        let f = Meta::File(FileMeta {
            id: 0x1234_5678_9abc_def0,
            layout: Layout {
                level: Level::Raif5,
                stripe: 65536,
                width: 3,
                copies: 3,
                start: 2,
                parity: 2,
            },
            size: 1 << 40,
            generation: 7,
            lost: 0b100,
            parity_stale: false,
        });
        let e = f.encode();
        assert_eq!(
            e.as_bytes(),
            b"1 F 123456789abcdef0 5 65536 3 3 2 2 1099511627776 7 4"
        );
        assert_eq!(Meta::decode(e.as_bytes()), Some(f));
        // Checksum entries after a NUL are not part of the record.
        let mut with = e.as_bytes().to_vec();
        with.extend_from_slice(&[0, 0x20, 0xff, 0, 7]);
        assert_eq!(Meta::decode(&with), Some(f));
        let d = Meta::Dir(42);
        assert_eq!(Meta::decode(d.encode().as_bytes()), Some(d));
        let o = Meta::Other(43);
        assert_eq!(o.encode().as_bytes(), b"1 O 000000000000002b");
        assert_eq!(Meta::decode(o.encode().as_bytes()), Some(o));
        assert_eq!(Meta::decode(b"1 F 1 5"), None);
        assert_eq!(
            Meta::decode(b"1 F 1 5 65536 3 3 7 2 0 0 0"),
            None,
            "start out of range"
        );
        assert_eq!(Meta::decode(b"garbage"), None);
        assert_eq!(Meta::decode(&[0xff, 0xfe]), None);
    }
}
