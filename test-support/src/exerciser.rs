//! A file exerciser in the manner of fsx (`-Z`, with mapped reads and writes): a seeded random
//! mix of direct reads and writes (`O_DIRECT`, aligned), reads and writes through a shared
//! mapping of the same descriptor (each write followed by `msync(MS_SYNC)`), truncations,
//! `fsync`s and re-opens, every result checked against an in-memory copy of what the file must
//! hold. The same seed gives the same operations, so a failure is reproduced by its seed.
//!
//! fsx itself cannot be had from a package registry with direct I/O: Debian does not package
//! xfstests' fsx, and the `fsx` crate (fsx-rs) opens no file with `O_DIRECT`. This one is small
//! enough to read in one sitting, and its operations are fsx's: offsets and lengths of direct
//! I/O are multiples of the alignment (as `fsx -Z -r 4096 -w 4096`), mapped ones are any, a
//! mapped write past the end first extends the file with `ftruncate` (as fsx's `domapwrite`).

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use crate::SharedMapping;

/// What to run.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// Operations to run.
    pub ops: usize,
    /// Seed of the operations.
    pub seed: u64,
    /// Largest size the file grows to (bytes).
    pub max_size: u64,
    /// Alignment of direct I/O offsets, lengths and buffers (bytes, a power of two).
    pub align: u64,
    /// Largest length of one read or write (bytes).
    pub max_len: u64,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            ops: 10_000,
            seed: 1,
            max_size: 256 << 10,
            align: 4096,
            max_len: 64 << 10,
        }
    }
}

/// How many operations of each kind ran.
#[allow(missing_docs)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub direct_reads: usize,
    pub direct_writes: usize,
    pub mapped_reads: usize,
    pub mapped_writes: usize,
    pub truncates: usize,
    pub fsyncs: usize,
    pub reopens: usize,
}

/// xorshift64*: small, fast, and the same everywhere (deterministic test randomness).
pub struct Rng(pub u64);

impl Rng {
    /// The next number.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// A heap buffer aligned for direct I/O.
struct Aligned {
    ptr: *mut u8,
    layout: Layout,
}

impl Aligned {
    fn new(len: usize, align: usize) -> Aligned {
        let layout = Layout::from_size_align(len.max(align), align).expect("layout");
        // SAFETY: a non-zero size (at least `align`).
        let ptr = unsafe { alloc_zeroed(layout) };
        assert!(!ptr.is_null(), "out of memory");
        Aligned { ptr, layout }
    }

    fn slice(&mut self, len: usize) -> &mut [u8] {
        assert!(len <= self.layout.size());
        // SAFETY: `ptr` holds `layout.size()` >= `len` initialized bytes owned by `self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, len) }
    }
}

impl Drop for Aligned {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ptr, self.layout) };
    }
}

/// The exerciser's state: the file, the copy it must equal, the log of recent operations.
struct Run<'a> {
    path: &'a Path,
    cfg: Config,
    file: File,
    model: Vec<u8>,
    rng: Rng,
    buf: Aligned,
    log: Vec<String>,
    counts: Counts,
}

/// Runs `cfg.ops` operations on the file `path` (created or emptied first); the counts of
/// each kind, or what went wrong, with the operations before it.
pub fn run(path: &Path, cfg: Config) -> Result<Counts, String> {
    assert!(cfg.align.is_power_of_two() && cfg.max_len >= cfg.align);
    let file = open(path, true).map_err(|e| format!("open {}: {e}", path.display()))?;
    let mut r = Run {
        path,
        cfg,
        file,
        model: Vec::new(),
        rng: Rng(cfg.seed.max(1).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1),
        buf: Aligned::new(cfg.max_len as usize, cfg.align as usize),
        log: Vec::new(),
        counts: Counts::default(),
    };
    for n in 1..=cfg.ops {
        r.step(n).map_err(|e| r.failure(n, &e))?;
    }
    r.check_all().map_err(|e| r.failure(cfg.ops, &e))?;
    Ok(r.counts)
}

/// The file opened for direct I/O (read-write, created, emptied when `trunc`).
fn open(path: &Path, trunc: bool) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(trunc)
        .custom_flags(libc::O_DIRECT)
        .open(path)
}

impl Run<'_> {
    fn step(&mut self, n: usize) -> Result<(), String> {
        match self.rng.below(100) {
            0..=21 => self.direct_read(),
            22..=43 => self.direct_write(),
            44..=64 => self.mapped_read(),
            65..=86 => self.mapped_write(),
            87..=93 => self.truncate(),
            94..=96 => {
                self.note("fsync".into());
                self.counts.fsyncs += 1;
                self.file.sync_all().map_err(|e| format!("fsync: {e}"))
            }
            _ => {
                self.note("close and open".into());
                self.counts.reopens += 1;
                self.file = open(self.path, false).map_err(|e| format!("open: {e}"))?;
                Ok(())
            }
        }?;
        // Every few operations, and after each one near the end: the size as fsx checks it.
        if n % 16 == 0 {
            self.check_size()?;
        }
        Ok(())
    }

    fn note(&mut self, what: String) {
        if self.log.len() == 32 {
            self.log.remove(0);
        }
        self.log.push(what);
    }

    fn failure(&self, n: usize, e: &str) -> String {
        format!(
            "{}: operation {n} of seed {} failed: {e}\nthe last operations:\n  {}",
            self.path.display(),
            self.cfg.seed,
            self.log.join("\n  ")
        )
    }

    /// An aligned offset below the size limit and an aligned length that fits under it.
    fn aligned_range(&mut self) -> (u64, u64) {
        let a = self.cfg.align;
        let off = self.rng.below(self.cfg.max_size / a) * a;
        let most = (self.cfg.max_len / a)
            .min((self.cfg.max_size - off) / a)
            .max(1);
        (off, (1 + self.rng.below(most)) * a)
    }

    /// Any offset and length with `off + len` at most `limit` (`limit` > 0).
    fn any_range(&mut self, limit: u64) -> (u64, u64) {
        let off = self.rng.below(limit);
        let len = 1 + self.rng.below((limit - off).min(self.cfg.max_len));
        (off, len)
    }

    fn fill(&mut self, len: usize) -> Vec<u8> {
        let seed = self.rng.next_u64();
        (0..len)
            .map(|i| ((seed >> (8 * (i % 8))) as u8) ^ (i as u8).wrapping_mul(31) ^ 0x5a)
            .collect()
    }

    fn put(&mut self, off: u64, data: &[u8]) {
        let end = off as usize + data.len();
        if self.model.len() < end {
            self.model.resize(end, 0);
        }
        self.model[off as usize..end].copy_from_slice(data);
    }

    fn direct_read(&mut self) -> Result<(), String> {
        let (off, len) = self.aligned_range();
        self.note(format!("direct read {off:#x} +{len:#x}"));
        self.counts.direct_reads += 1;
        let buf = self.buf.slice(len as usize);
        let got = self
            .file
            .read_at(buf, off)
            .map_err(|e| format!("direct read {off:#x} +{len:#x}: {e}"))?;
        let size = self.model.len() as u64;
        let want = size.saturating_sub(off).min(len) as usize;
        if got != want {
            return Err(format!(
                "direct read {off:#x}: {got:#x} bytes, {want:#x} expected"
            ));
        }
        compare(&self.buf.slice(want)[..], &self.model, off)
    }

    fn direct_write(&mut self) -> Result<(), String> {
        let (off, len) = self.aligned_range();
        self.note(format!("direct write {off:#x} +{len:#x}"));
        self.counts.direct_writes += 1;
        let data = self.fill(len as usize);
        self.buf.slice(len as usize).copy_from_slice(&data);
        let n = self
            .file
            .write_at(self.buf.slice(len as usize), off)
            .map_err(|e| format!("direct write {off:#x} +{len:#x}: {e}"))?;
        if n as u64 != len {
            return Err(format!("direct write {off:#x}: {n:#x} of {len:#x} bytes"));
        }
        self.put(off, &data);
        Ok(())
    }

    fn mapped_read(&mut self) -> Result<(), String> {
        let size = self.model.len() as u64;
        if size == 0 {
            return Ok(());
        }
        let (off, len) = self.any_range(size);
        self.note(format!("mapped read {off:#x} +{len:#x}"));
        self.counts.mapped_reads += 1;
        let end = (off + len) as usize;
        let map = SharedMapping::new(&self.file, end).map_err(|e| format!("mmap: {e}"))?;
        let got = map.read();
        compare(&got[off as usize..end], &self.model, off)
    }

    fn mapped_write(&mut self) -> Result<(), String> {
        let (off, len) = self.any_range(self.cfg.max_size);
        self.note(format!("mapped write {off:#x} +{len:#x}"));
        self.counts.mapped_writes += 1;
        let end = off + len;
        if end > self.model.len() as u64 {
            // A mapping reaches no further than the file: extend it first, as fsx does.
            self.file
                .set_len(end)
                .map_err(|e| format!("ftruncate to {end:#x}: {e}"))?;
            self.model.resize(end as usize, 0);
        }
        let data = self.fill(len as usize);
        let mut map =
            SharedMapping::new(&self.file, end as usize).map_err(|e| format!("mmap: {e}"))?;
        let mut whole = map.read();
        whole[off as usize..].copy_from_slice(&data);
        map.write(&whole);
        map.sync()
            .map_err(|e| format!("msync after mapped write {off:#x} +{len:#x}: {e}"))?;
        drop(map);
        self.put(off, &data);
        Ok(())
    }

    fn truncate(&mut self) -> Result<(), String> {
        let size = self.rng.below(self.cfg.max_size + 1);
        self.note(format!("truncate to {size:#x}"));
        self.counts.truncates += 1;
        self.file
            .set_len(size)
            .map_err(|e| format!("ftruncate to {size:#x}: {e}"))?;
        self.model.resize(size as usize, 0);
        Ok(())
    }

    fn check_size(&self) -> Result<(), String> {
        let size = self
            .file
            .metadata()
            .map_err(|e| format!("fstat: {e}"))?
            .len();
        match size == self.model.len() as u64 {
            true => Ok(()),
            false => Err(format!("size {size:#x}, {:#x} expected", self.model.len())),
        }
    }

    /// The whole file, read without `O_DIRECT` through another descriptor, and its size.
    fn check_all(&self) -> Result<(), String> {
        self.check_size()?;
        let all = std::fs::read(self.path).map_err(|e| format!("read back: {e}"))?;
        if all.len() != self.model.len() {
            return Err(format!("read back {:#x} bytes", all.len()));
        }
        compare(&all, &self.model, 0)
    }
}

/// Writes through a shared mapping of `dir/direct` (opened `O_DIRECT`, 10,000 bytes: its last
/// page is no multiple of ext4's block) and of `dir/append` (opened `O_APPEND`), each
/// `msync`ed, then appends to the second with `write(2)`: whether each `msync` worked, and what
/// the two files hold then (the same in a mount as in LOWER, which is what to compare).
pub fn mapped_writes(dir: &Path) -> Mapped {
    let mut outcomes = Vec::new();
    let direct = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(dir.join("direct"))
        .unwrap();
    direct.set_len(10_000).unwrap();
    let mut map = SharedMapping::new(&direct, 10_000).unwrap();
    let mut data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8 + 1).collect();
    data[..3].copy_from_slice(b"abc");
    map.write(&data);
    outcomes.push(format!(
        "direct msync: {:?}",
        map.sync().map_err(|e| e.kind())
    ));
    drop(map);
    drop(direct);
    fs::write(dir.join("append"), vec![b'a'; 8192]).unwrap();
    let append = OpenOptions::new()
        .read(true)
        .append(true)
        .open(dir.join("append"))
        .unwrap();
    let mut map = SharedMapping::new(&append, 8192).unwrap();
    let mut page = map.read();
    page[100..110].copy_from_slice(b"XXXXXXXXXX");
    map.write(&page);
    outcomes.push(format!(
        "append msync: {:?}",
        map.sync().map_err(|e| e.kind())
    ));
    // A write(2) still appends.
    append.write_at(b"end", 0).unwrap();
    drop(map);
    drop(append);
    let read = |n| fs::read(dir.join(n)).unwrap();
    Mapped {
        outcomes,
        direct: read("direct"),
        append: read("append"),
    }
}

/// What [`mapped_writes`] saw.
#[derive(Debug, PartialEq, Eq)]
pub struct Mapped {
    /// Whether each `msync` worked.
    pub outcomes: Vec<String>,
    /// What the `O_DIRECT` file holds.
    pub direct: Vec<u8>,
    /// What the `O_APPEND` file holds.
    pub append: Vec<u8>,
}

/// Whether `got`, read at `off`, is what `model` holds there; else where it first differs.
fn compare(got: &[u8], model: &[u8], off: u64) -> Result<(), String> {
    if got.is_empty() {
        return Ok(());
    }
    let want = &model[off as usize..off as usize + got.len()];
    match got.iter().zip(want).position(|(a, b)| a != b) {
        None => Ok(()),
        Some(i) => Err(format!(
            "byte {:#x} is {:#04x}, {:#04x} expected ({} of {} bytes read at {off:#x} differ)",
            off + i as u64,
            got[i],
            want[i],
            got.iter().zip(want).filter(|(a, b)| a != b).count(),
            got.len()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exerciser_passes_on_a_local_file_and_catches_a_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        let cfg = Config {
            ops: 2000,
            seed: 7,
            max_size: 64 << 10,
            ..Config::default()
        };
        let c = match run(&f, cfg) {
            Ok(c) => c,
            // A temporary directory on a file system without O_DIRECT (tmpfs before 6.6).
            Err(e) if e.contains("Invalid argument") && e.contains("open") => return,
            Err(e) => panic!("{e}"),
        };
        assert!(c.direct_reads > 300 && c.mapped_writes > 300, "{c:?}");
        assert!(c.truncates > 50 && c.reopens > 20, "{c:?}");
        // The same seed, the same operations.
        assert_eq!(run(&f, cfg).unwrap(), c);
        assert_eq!(compare(b"abc", b"xabcx", 1), Ok(()));
        let e = compare(b"abd", b"xabcx", 1).unwrap_err();
        assert!(e.starts_with("byte 0x3 is 0x64, 0x63 expected"), "{e}");
    }
}
