//! Recording latencies: per-thread shards, no lock and no shared read-modify-write on the hot
//! path, exact counts, resets with generations, and optional time-lapse epochs.
//!
//! # Protocol
//!
//! [`Recorder::start`] increments the operation's count, then reads the clock;
//! [`Recorder::finish`] reads the clock again, then adds the latency to the total and to its
//! bucket (in the current epoch): the recorder's own work (a thread's first shard, the bucket,
//! a new epoch's array) lies outside the span it times. So at quiescence an operation's bucket sum equals its count, and while calls are in
//! flight it is lower by at most their number (`docs/format.md#buckets`). [`Recorder::time`]
//! wraps both in a guard.
//!
//! # Shards
//!
//! Every thread that records gets its own `Shard` per recorder, found through a thread-local
//! table indexed by the recorder's slot. Only the owning thread writes a shard, with a plain load
//! and a release store per counter (no `lock`-prefixed instruction); snapshots read with acquire
//! loads. Shards are registered with their recorder, so a snapshot can merge them; when a thread
//! exits, its shards are folded into the recorder's `retired` totals and unregistered, so counts
//! survive threads and memory does not grow with the number of threads ever started.
//!
//! # Reset
//!
//! A reset bumps the recorder's generation and restarts the epoch clock; it never writes into a
//! shard. A shard remembers the generation its numbers belong to; its owner zeroes it lazily the
//! first time it records in a new generation, and snapshots skip shards of older generations. A
//! [`Token`] carries the generation it was started in; a finish in a later generation records
//! nothing, so calls in flight across a reset never make bucket sums exceed counts.
//!
//! # Time-lapse
//!
//! With an epoch length, time since the last reset is cut into epochs, each with its own bucket
//! array, allocated per shard the first time the thread finishes a call in it. At most
//! `max_epochs` arrays exist per shard: later samples go into the last one and the layer says so
//! (`max_epochs_reached`). Memory per recorder is bounded by
//! `threads × max_epochs × operations × buckets × 8` bytes.

use std::cell::RefCell;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use parking_lot::Mutex;

use crate::bucket::{BucketMap, Resolution};
use crate::clock;
use crate::profile::{Layer, OpProfile};
use crate::text;

/// Index of an operation in a recorder's operation table.
pub type OpId = usize;

/// How a [`Recorder`] buckets and slices time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecorderConfig {
    /// Buckets per octave. Default 1.
    pub resolution: Resolution,
    /// Epoch length in cycles for time-lapse profiles; 0 (the default) turns time-lapse off.
    pub epoch_cycles: u64,
    /// Most epochs kept when time-lapse is on; later samples go to the last one. Default 256;
    /// at most [`text::MAX_EPOCHS`].
    pub max_epochs: usize,
}

impl Default for RecorderConfig {
    fn default() -> Self {
        RecorderConfig {
            resolution: Resolution::ONE,
            epoch_cycles: 0,
            max_epochs: 256,
        }
    }
}

/// A layer's recorder: cheap to clone (shared), usable from any number of threads.
#[derive(Clone)]
pub struct Recorder {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("name", &self.inner.name)
            .field("ops", &self.inner.ops.len())
            .finish()
    }
}

struct Inner {
    /// Unique for the life of the process (slots are reused, ids are not).
    id: u64,
    /// Index into every thread's shard table.
    slot: usize,
    name: String,
    ops: Vec<String>,
    map: BucketMap,
    resolution: Resolution,
    buckets: usize,
    /// `None` when time-lapse is off.
    epoch_cycles: Option<NonZeroU64>,
    /// 1 when time-lapse is off.
    max_epochs: usize,
    /// Current generation; bumped by every reset.
    generation: AtomicU64,
    /// Clock reading at the last reset: epoch 0 starts here.
    epoch_start: AtomicU64,
    /// Serializes snapshots and resets with each other (never taken on the hot path).
    control: Mutex<()>,
    registry: Mutex<Registry>,
}

struct Registry {
    shards: Vec<Arc<Shard>>,
    retired: Retired,
}

/// Totals of shards whose threads exited, for one generation.
struct Retired {
    generation: u64,
    counts: Vec<u64>,
    epochs: Vec<Option<Vec<u64>>>,
    overflow: bool,
}

/// One thread's counters for one recorder.
struct Shard {
    recorder_id: u64,
    recorder: Weak<Inner>,
    /// Generation the numbers below belong to.
    generation: AtomicU64,
    /// Per operation: `[2·op]` count, `[2·op + 1]` total cycles.
    counts: Box<[AtomicU64]>,
    /// Epoch 0 (the only one without time-lapse): `operations × buckets` counters.
    epoch0: Box<[AtomicU64]>,
    /// Epochs 1.. (time-lapse only), allocated on first use.
    later: Box<[OnceLock<Box<[AtomicU64]>>]>,
    /// A sample landed past the last epoch.
    overflow: AtomicBool,
}

/// Owner-only increment: a plain load and a release store; no read-modify-write instruction.
#[inline(always)]
fn bump(c: &AtomicU64, by: u64) {
    c.store(
        c.load(Ordering::Relaxed).wrapping_add(by),
        Ordering::Release,
    );
}

fn zeroed(n: usize) -> Box<[AtomicU64]> {
    (0..n).map(|_| AtomicU64::new(0)).collect()
}

impl Shard {
    fn new(inner: &Arc<Inner>, generation: u64) -> Shard {
        Shard {
            recorder_id: inner.id,
            recorder: Arc::downgrade(inner),
            generation: AtomicU64::new(generation),
            counts: zeroed(inner.ops.len() * 2),
            epoch0: zeroed(inner.ops.len() * inner.buckets),
            later: (1..inner.max_epochs).map(|_| OnceLock::new()).collect(),
            overflow: AtomicBool::new(false),
        }
    }

    /// The allocated epoch blocks with their epoch numbers.
    fn blocks(&self) -> impl Iterator<Item = (usize, &[AtomicU64])> {
        std::iter::once((0, &*self.epoch0)).chain(
            self.later
                .iter()
                .enumerate()
                .filter_map(|(i, b)| b.get().map(|b| (i + 1, &**b))),
        )
    }

    /// Owner only: clears every counter for a new generation, then publishes the generation.
    fn renew(&self, generation: u64) {
        for c in self.counts.iter() {
            c.store(0, Ordering::Relaxed);
        }
        for (_, block) in self.blocks() {
            for c in block {
                c.store(0, Ordering::Relaxed);
            }
        }
        self.overflow.store(false, Ordering::Relaxed);
        self.generation.store(generation, Ordering::Release);
    }
}

/// Thread-local shard table, indexed by recorder slot. On thread exit, folds the shards into
/// their recorders.
struct LocalShards(Vec<Option<Arc<Shard>>>);

impl Drop for LocalShards {
    fn drop(&mut self) {
        for shard in self.0.drain(..).flatten() {
            if let Some(inner) = shard.recorder.upgrade() {
                inner.retire(&shard);
            }
        }
    }
}

thread_local! {
    static LOCAL: RefCell<LocalShards> = const { RefCell::new(LocalShards(Vec::new())) };
}

/// Process-wide allocation of recorder slots and ids.
struct Slots {
    next_id: u64,
    free: Vec<usize>,
    len: usize,
}

static SLOTS: Mutex<Slots> = Mutex::new(Slots {
    next_id: 1,
    free: Vec::new(),
    len: 0,
});

impl Drop for Inner {
    fn drop(&mut self) {
        SLOTS.lock().free.push(self.slot);
    }
}

/// A started operation: pass it to [`Recorder::finish`].
#[derive(Debug, Clone, Copy)]
#[must_use = "a started operation must be finished"]
pub struct Token {
    op: OpId,
    generation: u64,
    start: u64,
}

impl Token {
    /// The clock reading at start.
    pub fn start_cycles(&self) -> u64 {
        self.start
    }

    /// The operation started.
    pub fn op(&self) -> OpId {
        self.op
    }

    /// This call with its clock started at reading `start` (a token from
    /// [`Recorder::count`]).
    #[inline]
    pub fn at(self, start: u64) -> Token {
        Token { start, ..self }
    }
}

/// Finishes an operation when dropped.
#[must_use = "the operation is timed until the guard drops"]
pub struct Timer<'a> {
    recorder: &'a Recorder,
    token: Token,
}

impl Drop for Timer<'_> {
    #[inline]
    fn drop(&mut self) {
        self.recorder.finish(self.token);
    }
}

impl Recorder {
    /// A recorder for a layer named `name` (e.g. `fuse`) over the operations `ops`; an
    /// operation's [`OpId`] is its index in `ops`.
    ///
    /// The names end up in every profile written, so they must be ones the formats can carry:
    /// a layer name of printable ASCII without space or `=` ([`text::is_valid_value`]), and
    /// operation names `OP_` plus upper-case letters, digits and `_`
    /// ([`ops::is_valid_name`](crate::ops::is_valid_name)), each once. They are the program's
    /// own constants, so a bad one is a bug and panics here rather than producing profiles no
    /// parser reads back.
    ///
    /// A `max_epochs` above [`text::MAX_EPOCHS`] is lowered to it (with a warning in the log),
    /// so snapshots stay readable.
    ///
    /// # Panics
    /// If `ops` is empty, a name is invalid or repeated, or the configuration asks for zero
    /// epochs.
    pub fn new<S: AsRef<str>>(name: &str, ops: &[S], config: &RecorderConfig) -> Recorder {
        assert!(!ops.is_empty(), "a recorder needs at least one operation");
        assert!(config.max_epochs >= 1, "max_epochs must be at least 1");
        assert!(
            text::is_valid_value(name),
            "layer name {name:?}: printable ASCII without space or '=' only"
        );
        for (i, op) in ops.iter().enumerate() {
            let op = op.as_ref();
            assert!(
                crate::ops::is_valid_name(op),
                "operation name {op:?}: OP_ and upper-case letters, digits and _ only"
            );
            assert!(
                ops[..i].iter().all(|o| o.as_ref() != op),
                "operation {op} given twice"
            );
        }
        let (id, slot) = {
            let mut s = SLOTS.lock();
            let id = s.next_id;
            s.next_id += 1;
            let slot = s.free.pop().unwrap_or_else(|| {
                s.len += 1;
                s.len - 1
            });
            (id, slot)
        };
        let max_epochs = if config.epoch_cycles == 0 {
            1
        } else if config.max_epochs > text::MAX_EPOCHS {
            log::warn!(
                "layer {name}: max_epochs {} lowered to {}, the most a profile holds",
                config.max_epochs,
                text::MAX_EPOCHS
            );
            text::MAX_EPOCHS
        } else {
            config.max_epochs
        };
        let nops = ops.len();
        Recorder {
            inner: Arc::new(Inner {
                id,
                slot,
                name: name.to_string(),
                ops: ops.iter().map(|s| s.as_ref().to_string()).collect(),
                map: BucketMap::new(config.resolution),
                resolution: config.resolution,
                buckets: config.resolution.buckets(),
                epoch_cycles: NonZeroU64::new(config.epoch_cycles),
                max_epochs,
                generation: AtomicU64::new(0),
                epoch_start: AtomicU64::new(clock::now()),
                control: Mutex::new(()),
                registry: Mutex::new(Registry {
                    shards: Vec::new(),
                    retired: Retired::new(0, nops, max_epochs),
                }),
            }),
        }
    }

    /// The layer name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The operation table.
    pub fn ops(&self) -> &[String] {
        &self.inner.ops
    }

    /// The [`OpId`] of an operation name.
    pub fn op_id(&self, name: &str) -> Option<OpId> {
        self.inner.ops.iter().position(|o| o == name)
    }

    /// Runs `f` with this thread's shard for generation `generation`, creating or renewing it.
    ///
    /// During thread teardown (another thread-local's destructor recording after this table
    /// is gone) nothing is recorded: start and finish are skipped alike.
    #[inline(always)]
    fn with_shard(&self, generation: u64, f: impl FnOnce(&Shard)) {
        let _ = LOCAL.try_with(|local| {
            let (slot, id) = (self.inner.slot, self.inner.id);
            let mut table = local.borrow();
            if !matches!(table.0.get(slot), Some(Some(s)) if s.recorder_id == id) {
                drop(table);
                self.new_local_shard(&mut local.borrow_mut(), generation);
                table = local.borrow();
            }
            // One call site for `f`, so that it is inlined into start and finish.
            if let Some(Some(shard)) = table.0.get(slot) {
                if shard.generation.load(Ordering::Relaxed) != generation {
                    shard.renew(generation);
                }
                f(shard);
            } else {
                debug_assert!(false, "no shard in slot {slot} right after creating it");
            }
        });
    }

    #[cold]
    fn new_local_shard(&self, local: &mut LocalShards, generation: u64) {
        let shard = Arc::new(Shard::new(&self.inner, generation));
        self.inner.registry.lock().shards.push(shard.clone());
        let slot = self.inner.slot;
        if local.0.len() <= slot {
            local.0.resize(slot + 1, None);
        }
        // A shard of a dropped recorder that used this slot before is released here.
        local.0[slot] = Some(shard);
    }

    /// Counts a call of `op` and starts its clock: the count first (a thread's first call
    /// makes its shard there), then the clock read, so that the call's latency holds none of
    /// the recorder's own work. [`Recorder::record`] computes the bucket after the end read.
    ///
    /// # Panics
    /// If `op` is not an index into the operation table (the counter index checks it).
    #[inline]
    pub fn start(&self, op: OpId) -> Token {
        self.count(op).at(clock::now())
    }

    /// [`Recorder::start`] for a call whose clock started at reading `start` (so that two
    /// layers timing one call can share a start).
    #[inline]
    pub fn start_at(&self, op: OpId, start: u64) -> Token {
        self.count(op).at(start)
    }

    /// Counts a call of `op` whose clock has not started yet: give the token its start with
    /// [`Token::at`] (so that several recorders can count one call first and then share one
    /// clock read as its start).
    #[inline]
    pub fn count(&self, op: OpId) -> Token {
        let generation = self.inner.generation.load(Ordering::Acquire);
        self.with_shard(generation, |s| bump(&s.counts[2 * op], 1));
        Token {
            op,
            generation,
            start: 0,
        }
    }

    /// Stops the clock of a started call and records its latency.
    #[inline]
    pub fn finish(&self, token: Token) {
        let end = clock::now();
        self.record(token, end);
    }

    /// Records a call started with `token` as ending at clock reading `end` (lets callers that
    /// already read the clock, or tests, supply the end time). Returns whether it was recorded:
    /// not when a reset came while it was in flight.
    #[inline]
    pub fn record(&self, token: Token, end: u64) -> bool {
        let inner = &*self.inner;
        if inner.generation.load(Ordering::Acquire) != token.generation {
            // Reset while in flight: the count went to a generation that is gone.
            return false;
        }
        // A counter running backwards (thread moved to an unsynchronized CPU) counts as 0.
        let latency = end.saturating_sub(token.start);
        let bucket = inner.map.bucket(latency);
        let op = token.op;
        self.with_shard(token.generation, |s| {
            bump(&s.counts[2 * op + 1], latency);
            let epoch = if let Some(len) = inner.epoch_cycles {
                let since = end.saturating_sub(inner.epoch_start.load(Ordering::Relaxed));
                let e = (since / len) as usize;
                if e >= inner.max_epochs {
                    if !s.overflow.load(Ordering::Relaxed) {
                        s.overflow.store(true, Ordering::Release);
                    }
                    inner.max_epochs - 1
                } else {
                    e
                }
            } else {
                0
            };
            let block = if epoch == 0 {
                &s.epoch0
            } else {
                s.later[epoch - 1].get_or_init(|| zeroed(inner.ops.len() * inner.buckets))
            };
            bump(&block[op * inner.buckets + bucket], 1);
        });
        true
    }

    /// Times `op` until the returned guard drops.
    #[inline]
    pub fn time(&self, op: OpId) -> Timer<'_> {
        Timer {
            recorder: self,
            token: self.start(op),
        }
    }

    /// Runs `f`, timing it as `op`.
    #[inline]
    pub fn measure<R>(&self, op: OpId, f: impl FnOnce() -> R) -> R {
        let _t = self.time(op);
        f()
    }

    /// Starts a new generation: every count, total and bucket reads as zero from now on, and
    /// the epoch clock restarts. Calls in flight are not recorded when they finish.
    pub fn reset(&self) {
        let _c = self.inner.control.lock();
        self.inner
            .epoch_start
            .store(clock::now(), Ordering::Relaxed);
        self.inner.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Merges every shard into a layer. Operations never called are left out.
    pub fn snapshot(&self) -> Layer {
        let _c = self.inner.control.lock();
        self.snapshot_held()
    }

    /// A snapshot, and a new generation after it (as [`Recorder::reset`], but the epoch clock
    /// runs on, so later epochs stay aligned with other recorders'): what was recorded is taken
    /// out. Calls that finish between the two are lost, and calls in flight are not recorded
    /// when they finish (their counts are in the layer taken).
    pub fn take(&self) -> Layer {
        let _c = self.inner.control.lock();
        let layer = self.snapshot_held();
        self.inner.generation.fetch_add(1, Ordering::AcqRel);
        layer
    }

    /// [`Recorder::snapshot`] with the control lock held.
    fn snapshot_held(&self) -> Layer {
        let inner = &*self.inner;
        let generation = inner.generation.load(Ordering::Acquire);
        let nops = inner.ops.len();
        let nb = inner.buckets;
        let reg = inner.registry.lock();
        let mut epochs: Vec<Option<Vec<u64>>> = vec![None; inner.max_epochs];
        let mut counts = vec![0u64; nops * 2];
        let mut overflow = false;
        if reg.retired.generation == generation {
            reg.retired.add_to(&mut counts, &mut epochs, &mut overflow);
        }
        let live: Vec<&Arc<Shard>> = reg
            .shards
            .iter()
            .filter(|s| s.generation.load(Ordering::Acquire) == generation)
            .collect();
        // Operation by operation, shard by shard: its buckets first, then its count and total.
        // Every bucket seen implies its count is seen (the owner stores the count before the
        // bucket, both with release), so an operation's bucket sum never exceeds the count read.
        // Counts can still run ahead of the buckets by the calls that start and finish between
        // the two reads; reading one operation at a time keeps that window short.
        for s in &live {
            overflow |= s.overflow.load(Ordering::Acquire);
        }
        for op in 0..nops {
            for s in &live {
                for (e, block) in s.blocks() {
                    let dst = epochs[e].get_or_insert_with(|| vec![0; nops * nb]);
                    let range = op * nb..(op + 1) * nb;
                    for (d, c) in dst[range.clone()].iter_mut().zip(&block[range]) {
                        *d = d.wrapping_add(c.load(Ordering::Acquire));
                    }
                }
                for k in [2 * op, 2 * op + 1] {
                    counts[k] = counts[k].wrapping_add(s.counts[k].load(Ordering::Acquire));
                }
            }
        }
        drop(reg);
        let elapsed_epochs = match inner.epoch_cycles {
            None => 1,
            Some(len) => {
                let since = clock::now().saturating_sub(inner.epoch_start.load(Ordering::Relaxed));
                let n = since / len + 1;
                overflow |= n > inner.max_epochs as u64;
                (n.min(inner.max_epochs as u64)) as usize
            }
        };
        // Blocks stay allocated (zeroed) across resets: only those holding samples count.
        let used = epochs
            .iter()
            .rposition(|e| e.as_ref().is_some_and(|b| b.iter().any(|&v| v != 0)))
            .map_or(1, |e| e + 1);
        let n_epochs = elapsed_epochs.max(used);
        let mut layer = Layer::new(inner.name.clone(), inner.resolution);
        layer.epoch_cycles = inner.epoch_cycles.map_or(0, NonZeroU64::get);
        layer.epochs = n_epochs;
        layer.max_epochs_reached = overflow;
        for op in 0..nops {
            let count = counts[2 * op];
            if count == 0 {
                continue;
            }
            let mut o = OpProfile::new(inner.ops[op].clone(), nb, n_epochs);
            o.count = count;
            o.total = counts[2 * op + 1];
            for (e, block) in epochs.iter().take(n_epochs).enumerate() {
                if let Some(block) = block {
                    o.epochs[e].copy_from_slice(&block[op * nb..(op + 1) * nb]);
                }
            }
            layer.ops.push(o);
        }
        layer
    }

    /// Number of shards registered (threads that recorded and are still alive).
    pub fn live_shards(&self) -> usize {
        self.inner.registry.lock().shards.len()
    }
}

impl Inner {
    /// Called on the owning thread as it exits: folds the shard into `retired`.
    fn retire(&self, shard: &Arc<Shard>) {
        let mut reg = self.registry.lock();
        reg.shards.retain(|s| !Arc::ptr_eq(s, shard));
        let generation = shard.generation.load(Ordering::Acquire);
        if generation != self.generation.load(Ordering::Acquire) {
            return;
        }
        if reg.retired.generation != generation {
            reg.retired = Retired::new(generation, self.ops.len(), self.max_epochs);
        }
        let r = &mut reg.retired;
        for (d, c) in r.counts.iter_mut().zip(shard.counts.iter()) {
            *d = d.wrapping_add(c.load(Ordering::Acquire));
        }
        for (e, block) in shard.blocks() {
            let dst = r.epochs[e].get_or_insert_with(|| vec![0; block.len()]);
            for (d, c) in dst.iter_mut().zip(block) {
                *d = d.wrapping_add(c.load(Ordering::Acquire));
            }
        }
        r.overflow |= shard.overflow.load(Ordering::Acquire);
    }
}

impl Retired {
    fn new(generation: u64, nops: usize, max_epochs: usize) -> Retired {
        Retired {
            generation,
            counts: vec![0; nops * 2],
            epochs: vec![None; max_epochs],
            overflow: false,
        }
    }

    fn add_to(&self, counts: &mut [u64], epochs: &mut [Option<Vec<u64>>], overflow: &mut bool) {
        for (d, c) in counts.iter_mut().zip(&self.counts) {
            *d = d.wrapping_add(*c);
        }
        for (dst, src) in epochs.iter_mut().zip(&self.epochs) {
            if let Some(src) = src {
                let dst = dst.get_or_insert_with(|| vec![0; src.len()]);
                for (d, c) in dst.iter_mut().zip(src) {
                    *d = d.wrapping_add(*c);
                }
            }
        }
        *overflow |= self.overflow;
    }
}
