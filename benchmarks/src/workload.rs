//! One Postmark run: the file table, the random draws and the three phases.
//!
//! The order of draws is Postmark 1.5's, which is what makes the same configuration and seed
//! give the same files:
//!
//! 1. `sgenrand(seed)`, then `2 · size_high` draws `32 + RND(95)` for the random text that all
//!    writes copy from (from its start).
//! 2. Creating a file: `RND(total weight)` for the location (only with more than one
//!    location), `RND(subdirectories)` for `sN/` (only with more than one subdirectory), the
//!    next file number (numbers count every create, from 1), then
//!    `size_low + RND(size_high - size_low)` for the size. The slot is the next one after the
//!    last allocated if free, else the first free slot of the table of `2 · number` slots; with
//!    no free slot, nothing happens (and nothing is drawn).
//! 3. A transaction: when read/append is enabled (`bias read` ≠ -1), `RND(10) < bias read`
//!    chooses a read, else an append, of a used file picked by drawing `RND(2 · number)` until
//!    the slot is in use; an append (only of a file below `size_high`) then draws
//!    `RND(size_high - size) + 1` bytes. Then, when create/delete is enabled, `RND(10) < bias
//!    create` chooses a create (as above), else a delete of a used file picked the same way.
//!    Before each transaction, if every created file was deleted, the run stops ("out of
//!    files").
//! 4. Deleting: every slot of the table in order, without draws.

use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::config::Config;
use crate::fileio::{self, FileError, FileOps};
use crate::latency::{Op, Probe};
use crate::rng::Mt19937;

/// Counters of one run, as Postmark keeps them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counters {
    /// Files created (the initial ones included).
    pub created: u64,
    /// Files deleted (the final ones included).
    pub deleted: u64,
    /// Files read.
    pub read: u64,
    /// Files appended to.
    pub appended: u64,
    /// Bytes read, summed exactly.
    pub bytes_read: u64,
    /// Bytes written, summed exactly.
    pub bytes_written: u64,
    /// Bytes read as Postmark sums them: in a 32-bit float.
    pub bytes_read_f32: f32,
    /// Bytes written as Postmark sums them: in a 32-bit float.
    pub bytes_written_f32: f32,
}

/// A point in time taken two ways: the monotonic clock for our own sub-second timing, and the
/// whole seconds of the wall clock, which is what Postmark's `time()` sees.
#[derive(Debug, Clone, Copy)]
pub struct Stamp {
    /// Monotonic time.
    pub instant: Instant,
    /// Whole seconds since the Unix epoch.
    pub unix_secs: i64,
}

impl Stamp {
    /// Now.
    pub fn now() -> Stamp {
        let unix_secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        Stamp {
            instant: Instant::now(),
            unix_secs,
        }
    }
}

/// The phase boundaries of a run (Postmark's four timers).
#[derive(Debug, Clone, Copy)]
pub struct Timeline {
    /// Before the initial files are created.
    pub start: Stamp,
    /// Before the transactions.
    pub t_start: Stamp,
    /// After the transactions.
    pub t_end: Stamp,
    /// After the final deletion.
    pub end: Stamp,
}

#[derive(Debug, Clone, Default)]
struct Slot {
    /// Empty while unused (size 0).
    name: PathBuf,
    size: u32,
}

/// How the transaction phase ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transactions {
    /// All configured transactions ran.
    Complete,
    /// Every file was deleted after this many transactions (Postmark: "out of files!").
    OutOfFiles(u32),
}

/// One run of the workload against one set of directories.
#[derive(Debug)]
pub struct Workload {
    cfg: Config,
    rng: Mt19937,
    source: Vec<u8>,
    table: Vec<Slot>,
    allocated: usize,
    /// Postmark's `location_index`: each location repeated `weight` times.
    location_index: Vec<PathBuf>,
    ops: FileOps,
    /// Counters so far.
    pub counters: Counters,
    /// Files deleted in the transaction phase (the rest were deleted at the end).
    pub deleted_in_transactions: u64,
}

impl Workload {
    /// Seeds the generator and fills the random text (Postmark's draws 1).
    pub fn new(cfg: &Config) -> Workload {
        let mut rng = Mt19937::new(cfg.seed);
        let source = (0..2 * cfg.size_high as usize)
            .map(|_| 32 + rng.rnd(95) as u8)
            .collect();
        let location_index = cfg
            .locations
            .iter()
            .flat_map(|l| std::iter::repeat_n(l.path.clone(), l.weight as usize))
            .collect();
        Workload {
            cfg: cfg.clone(),
            rng,
            source,
            table: vec![Slot::default(); 2 * cfg.number as usize],
            allocated: 0,
            location_index,
            ops: FileOps::new(cfg.buffering, cfg.read_block, cfg.write_block),
            counters: Counters::default(),
            deleted_in_transactions: 0,
        }
    }

    /// The directories that get `s0`.. subdirectories: every location, or the current
    /// directory.
    fn bases(&self) -> Vec<PathBuf> {
        if self.cfg.locations.is_empty() {
            vec![PathBuf::new()]
        } else {
            self.cfg.locations.iter().map(|l| l.path.clone()).collect()
        }
    }

    fn subdirectory_paths(&self) -> Vec<PathBuf> {
        if self.cfg.subdirectories <= 1 {
            return Vec::new();
        }
        let mut v = Vec::new();
        for base in self.bases() {
            for i in 0..self.cfg.subdirectories {
                v.push(base.join(format!("s{i}")));
            }
        }
        v
    }

    /// Creates the subdirectories (when more than one is configured).
    pub fn create_subdirectories(&mut self, probe: &mut Probe) -> Result<(), FileError> {
        for d in self.subdirectory_paths() {
            fileio::mkdir(probe, &d)?;
        }
        Ok(())
    }

    /// Removes the subdirectories.
    pub fn delete_subdirectories(&mut self, probe: &mut Probe) -> Result<(), FileError> {
        for d in self.subdirectory_paths() {
            fileio::rmdir(probe, &d)?;
        }
        Ok(())
    }

    fn find_free_slot(&mut self) -> Option<usize> {
        let n = self.table.len();
        if self.allocated < n && self.table[self.allocated].size == 0 {
            self.allocated += 1;
            return Some(self.allocated - 1);
        }
        let i = self.table.iter().position(|s| s.size == 0)?;
        self.allocated = i + 1;
        Some(i)
    }

    fn find_used_slot(&mut self) -> usize {
        let n = self.table.len() as u32;
        loop {
            let i = self.rng.rnd(n) as usize;
            if self.table[i].size != 0 {
                return i;
            }
        }
    }

    fn file_name(&mut self) -> PathBuf {
        let mut p = PathBuf::new();
        if !self.location_index.is_empty() {
            let i = if self.cfg.locations.len() == 1 {
                0
            } else {
                self.rng.rnd(self.location_index.len() as u32) as usize
            };
            p.push(&self.location_index[i]);
        }
        if self.cfg.subdirectories > 1 {
            p.push(format!("s{}", self.rng.rnd(self.cfg.subdirectories)));
        }
        self.counters.created += 1;
        p.push(self.counters.created.to_string());
        p
    }

    fn create_file(&mut self, probe: &mut Probe) -> Result<(), FileError> {
        let Some(slot) = self.find_free_slot() else {
            return Ok(());
        };
        let name = self.file_name();
        let size = self.cfg.size_low + self.rng.rnd(self.cfg.size_high - self.cfg.size_low);
        self.table[slot] = Slot { name, size };
        let span = probe.start(Op::PmCreate);
        let r = self
            .ops
            .create(probe, &self.table[slot].name, &self.source[..size as usize]);
        probe.finish(span);
        r?;
        self.counters.bytes_written += size as u64;
        self.counters.bytes_written_f32 += size as f32;
        Ok(())
    }

    fn delete_file(&mut self, probe: &mut Probe, slot: usize) -> Result<(), FileError> {
        if self.table[slot].size == 0 {
            return Ok(());
        }
        let span = probe.start(Op::PmDelete);
        let r = self.ops.unlink(probe, &self.table[slot].name);
        probe.finish(span);
        r?;
        self.table[slot].size = 0;
        self.counters.deleted += 1;
        Ok(())
    }

    fn read_file(&mut self, probe: &mut Probe, slot: usize) -> Result<(), FileError> {
        let size = self.table[slot].size;
        let span = probe.start(Op::PmRead);
        let r = self.ops.read(probe, &self.table[slot].name, size);
        probe.finish(span);
        r?;
        self.counters.bytes_read += size as u64;
        self.counters.bytes_read_f32 += size as f32;
        self.counters.read += 1;
        Ok(())
    }

    fn append_file(&mut self, probe: &mut Probe, slot: usize) -> Result<(), FileError> {
        let size = self.table[slot].size;
        let high = self.cfg.size_high;
        if size >= high {
            return Ok(());
        }
        // Postmark opens first and draws the length after; nothing else draws in between,
        // so drawing first is the same sequence and keeps the open inside the timed span.
        let block = self.rng.rnd(high - size) + 1;
        let span = probe.start(Op::PmAppend);
        let r = self.ops.append(
            probe,
            &self.table[slot].name,
            &self.source[..block as usize],
        );
        probe.finish(span);
        r?;
        self.table[slot].size += block;
        self.counters.bytes_written += block as u64;
        self.counters.bytes_written_f32 += block as f32;
        self.counters.appended += 1;
        Ok(())
    }

    /// Creates the initial `number` files.
    pub fn create_phase(&mut self, probe: &mut Probe) -> Result<(), FileError> {
        for _ in 0..self.cfg.number {
            self.create_file(probe)?;
        }
        Ok(())
    }

    /// Runs the transactions; `tick` is called at every tenth of them (Postmark's dots).
    pub fn transaction_phase(
        &mut self,
        probe: &mut Probe,
        mut tick: impl FnMut(),
    ) -> Result<Transactions, FileError> {
        // Postmark divides by transactions / 10 and crashes below 10 transactions.
        let percent = (self.cfg.transactions / 10).max(1);
        let deleted_before = self.counters.deleted;
        for i in 0..self.cfg.transactions {
            if self.counters.created == self.counters.deleted {
                self.deleted_in_transactions = self.counters.deleted - deleted_before;
                return Ok(Transactions::OutOfFiles(i));
            }
            if self.cfg.bias_read != -1 {
                if (self.rng.rnd(10) as i32) < self.cfg.bias_read {
                    let s = self.find_used_slot();
                    self.read_file(probe, s)?;
                } else {
                    let s = self.find_used_slot();
                    self.append_file(probe, s)?;
                }
            }
            if self.cfg.bias_create != -1 {
                if (self.rng.rnd(10) as i32) < self.cfg.bias_create {
                    self.create_file(probe)?;
                } else {
                    let s = self.find_used_slot();
                    self.delete_file(probe, s)?;
                }
            }
            if i % percent == 0 {
                tick();
            }
        }
        self.deleted_in_transactions = self.counters.deleted - deleted_before;
        Ok(Transactions::Complete)
    }

    /// Deletes every remaining file, in table order.
    pub fn delete_phase(&mut self, probe: &mut Probe) -> Result<(), FileError> {
        for slot in 0..self.table.len() {
            self.delete_file(probe, slot)?;
        }
        Ok(())
    }

    /// After a failure: removes the files and subdirectories this run left, quietly and
    /// without counting, so a failed run does not leave thousands of files behind.
    pub fn clean_up_after_failure(&mut self) {
        for slot in self.table.iter_mut().filter(|s| s.size != 0) {
            let _ = std::fs::remove_file(&slot.name);
            slot.size = 0;
        }
        for d in self.subdirectory_paths() {
            let _ = std::fs::remove_dir(&d);
        }
    }

    /// Files in use now.
    pub fn files_in_use(&self) -> usize {
        self.table.iter().filter(|s| s.size != 0).count()
    }

    /// The path of every file in use with its size (for tests and checks).
    pub fn files(&self) -> impl Iterator<Item = (&Path, u32)> {
        self.table
            .iter()
            .filter(|s| s.size != 0)
            .map(|s| (s.name.as_path(), s.size))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::client_recorder;

    #[test]
    fn random_text_is_printable_and_seeded() {
        let cfg = Config {
            size_high: 100,
            size_low: 10,
            ..Config::default()
        };
        let w = Workload::new(&cfg);
        assert_eq!(w.source.len(), 200);
        assert!(w.source.iter().all(|b| (32..127).contains(b)));
        let mut rng = Mt19937::new(42);
        assert_eq!(w.source[0], 32 + (rng.genrand() % 95) as u8);
    }

    #[test]
    fn free_slot_search_wraps_to_first_hole() {
        let cfg = Config {
            number: 2,
            ..Config::default()
        };
        let mut w = Workload::new(&cfg);
        for i in 0..4 {
            assert_eq!(w.find_free_slot(), Some(i));
            w.table[i].size = 1;
        }
        assert_eq!(w.find_free_slot(), None);
        w.table[1].size = 0;
        assert_eq!(w.find_free_slot(), Some(1));
        w.table[1].size = 1;
        w.table[3].size = 0;
        // allocated is 2 and slot 2 is used: search from the start.
        assert_eq!(w.find_free_slot(), Some(3));
    }

    #[test]
    fn whole_run_in_a_scratch_dir() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path().to_path_buf();
        let cfg = Config {
            number: 20,
            transactions: 50,
            subdirectories: 3,
            locations: vec![crate::config::Location {
                path: dir.clone(),
                weight: 1,
            }],
            ..Config::default()
        };
        let mut probe = Probe::new(client_recorder());
        let mut w = Workload::new(&cfg);
        w.create_subdirectories(&mut probe).unwrap();
        w.create_phase(&mut probe).unwrap();
        assert_eq!(w.files_in_use(), 20);
        for (p, size) in w.files() {
            assert_eq!(std::fs::metadata(p).unwrap().len(), size as u64);
        }
        let mut ticks = 0;
        let t = w.transaction_phase(&mut probe, || ticks += 1).unwrap();
        assert_eq!(t, Transactions::Complete);
        assert_eq!(ticks, 10);
        for (p, size) in w.files() {
            assert_eq!(std::fs::metadata(p).unwrap().len(), size as u64);
        }
        w.delete_phase(&mut probe).unwrap();
        w.delete_subdirectories(&mut probe).unwrap();
        let c = w.counters;
        assert_eq!(c.created, c.deleted);
        assert_eq!(c.read + c.appended, 50);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    }
}
