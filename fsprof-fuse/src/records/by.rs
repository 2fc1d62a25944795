//! Attribution (`--by pid|uid|comm`): one `fuse` profile per key, as layers `fuse@uid:1000`,
//! `fuse@pid:4242`, `fuse@comm:tar` (`docs/format.md#per-key-layers`), for the top `--by-max` K
//! keys by total latency; every other key's requests go to `fuse@other`, so memory stays bounded
//! under a fork storm.
//!
//! # Which keys have a layer
//!
//! A key's *latency* is the sum of its requests' latencies since the mount (or the last reset),
//! wherever they were counted. The first K keys seen get a layer at their first request. After
//! that, a key without one is counted in `fuse@other`, and its latency in a space-saving sketch
//! of candidates ([`super::sketch`], 4K counters). When the latency a candidate certainly has
//! (its counter less the sketch's possible overcount) exceeds the smallest layer's by a quarter,
//! the two trade places: the smaller key's layer is folded into `fuse@other` and it becomes a
//! candidate (with its latency), and the larger one has a layer from then on (its earlier
//! requests stay in `fuse@other`). The quarter keeps two keys of about equal latency from
//! trading on every request, and makes swaps rare: the smallest layer's latency grows by a
//! quarter at least every K swaps.
//!
//! # Exactness
//!
//! Each request is counted once, in one layer: the keyed layers' counts and `fuse@other`'s sum
//! to the `fuse` layer's, up to the requests in flight at a reset (as for every layer). Their
//! latencies are the `fuse` layer's, the same two clock readings: the key is looked up and the
//! request counted before the profiling layer's start, and the key's latency is added after
//! its end ([`ByKey::begin`], [`ByCall::finish`]), so a keyed layer's buckets and total sum
//! exactly to the `fuse` layer's for its requests. Which layer is
//! exact too, except for a request racing a swap of its own key: counted in `fuse@other`
//! instead. A layer folded away keeps its recorder for [`GRACE`] (snapshots add it to
//! `fuse@other`), so that requests still running on it finish into it; then its counts are
//! taken into `fuse@other` and the recorder serves the next key promoted (a request still
//! running on it after that long is counted, without its latency, as at a reset).
//!
//! # Cost
//!
//! Keys with a layer are found in a fixed open-addressing table of atomics with a few loads,
//! and add their latency to their own counter; nothing is allocated or locked. A request of a
//! key without a layer takes a lock when it ends (to count its latency in the sketch). At most
//! 2K recorders exist (K serving, K folded away in their grace time), each made once. `comm` is
//! read from `/proc/PID/comm` and cached per pid in a fixed table, for a second or until the pid
//! execs ([`super::execs`]: one atomic load per request checks).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use profile_store::merge::add_layer;
use profile_store::{Extension, Layer, Recorder, RecorderConfig, Token, keyed};

use super::sketch::Sketch;
use crate::filesystem::Request;
use crate::protocol::ops::NAMES;

/// Default bound on keyed layers.
pub const DEFAULT_MAX: usize = 64;

/// Largest bound accepted (the table and the recorders grow with it).
pub const LIMIT: usize = 8192;

/// A candidate takes the smallest layer's place when its latency exceeds that layer's by more
/// than the layer's shifted right by this (a quarter).
const MARGIN_SHIFT: u32 = 2;

/// How long a folded layer's recorder is kept before it serves another key.
pub const GRACE: Duration = Duration::from_secs(1);

/// What requests are split by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// The calling thread's id as the kernel sends it.
    Pid,
    /// The caller's user id.
    Uid,
    /// The caller's command name (`/proc/PID/comm`).
    Comm,
}

impl KeyKind {
    /// The key's name in layer names.
    pub fn name(self) -> &'static str {
        match self {
            KeyKind::Pid => "pid",
            KeyKind::Uid => "uid",
            KeyKind::Comm => "comm",
        }
    }
}

/// Slots of the pid → comm cache.
const COMM_CACHE: usize = 256;

/// A command name as read from `/proc` (at most 16 bytes) and its length.
type Comm = ([u8; 16], u8);

/// pid, when read, the pid's exec generation then, the name.
type CommEntry = (u32, Instant, u32, Comm);

/// Table positions: free, or freed (a tombstone: probes go on past it).
const EMPTY: u64 = 0;
const TOMB: u64 = u64::MAX;

/// A key as stored in the table: never [`EMPTY`] or [`TOMB`].
fn tag(key: u64) -> u64 {
    key.wrapping_add(1).clamp(1, TOMB - 1)
}

fn home(tag: u64) -> usize {
    (tag.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// One pooled recorder and its key's latency.
struct Slot {
    rec: OnceLock<Recorder>,
    /// The latency of the key it serves (cycles).
    score: AtomicU64,
}

/// What a pooled recorder is doing.
enum Use {
    Free,
    /// Serving the key `tag`, found at table position `pos`, as layer `label`.
    Serving {
        tag: u64,
        pos: usize,
        label: String,
    },
    /// Folded away at `since`.
    Resting {
        since: Instant,
    },
}

/// The state changed under the lock: claims, swaps, snapshots, resets.
struct Ctl {
    uses: Vec<Use>,
    serving: usize,
    tombs: usize,
    candidates: Sketch,
    /// Counts taken from recorders folded away.
    folded: Option<Layer>,
    /// At most the smallest serving latency (latencies only grow, so it stays a lower bound
    /// until recomputed).
    min_hint: u64,
    swaps: u64,
}

/// Per-key profiles of one mount (see the module documentation).
pub struct ByKey {
    kind: KeyKind,
    max: usize,
    config: RecorderConfig,
    grace: Duration,
    /// The tag at each table position.
    keys: Box<[AtomicU64]>,
    /// The pool index of the recorder at each table position (written before the tag).
    idx: Box<[AtomicU32]>,
    pool: Box<[Slot]>,
    /// Keys with a layer (as `Ctl::serving`, read without the lock).
    serving: AtomicUsize,
    other: Recorder,
    ctl: Mutex<Ctl>,
    comms: Box<[Mutex<Option<CommEntry>>]>,
}

impl std::fmt::Debug for ByKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ByKey")
            .field("kind", &self.kind)
            .field("max", &self.max)
            .finish()
    }
}

/// A request counted in its key's layer (or `fuse@other`) by [`ByKey::begin`], before its
/// clock starts; [`ByCall::finish`] records it with the span the profiling layer read, once
/// the request is over.
#[must_use = "the request is counted: finish it"]
pub struct ByCall<'a> {
    by: &'a ByKey,
    rec: &'a Recorder,
    token: Token,
    /// The key's latency counter, when it has a layer.
    score: Option<&'a AtomicU64>,
    key: u64,
    comm: Option<Comm>,
}

impl ByCall<'_> {
    /// The request ran from clock reading `start` to `end` (the `fuse` layer's own span):
    /// records it in its layer, and adds its latency to its key's.
    pub fn finish(self, start: u64, end: u64) {
        if !self.rec.record(self.token.at(start), end) {
            // Reset while in flight: no latency to count.
            return;
        }
        let cycles = end.saturating_sub(start);
        match self.score {
            Some(s) => {
                s.fetch_add(cycles, Ordering::Relaxed);
            }
            None => self.by.outside(self.key, self.comm, cycles),
        }
    }

    /// Ends the request as if it took `cycles` (tests).
    #[cfg(test)]
    fn finish_after(self, cycles: u64) {
        self.finish(0, cycles);
    }
}

impl ByKey {
    /// Splits by `kind` into at most `max` keyed layers (1 to [`LIMIT`]; clamped) and
    /// `fuse@other`, each recorded with `config`'s resolution but no epochs: a time-lapse of
    /// thousands of keyed layers would make a profile no tool can read (the `fuse` layer
    /// keeps the time-lapse).
    pub fn new(kind: KeyKind, max: usize, config: &RecorderConfig) -> ByKey {
        let max = max.clamp(1, LIMIT);
        let config = &RecorderConfig {
            epoch_cycles: 0,
            ..config.clone()
        };
        let size = (4 * max).next_power_of_two();
        ByKey {
            kind,
            max,
            config: config.clone(),
            grace: GRACE,
            keys: (0..size).map(|_| AtomicU64::new(EMPTY)).collect(),
            idx: (0..size).map(|_| AtomicU32::new(0)).collect(),
            pool: (0..2 * max)
                .map(|_| Slot {
                    rec: OnceLock::new(),
                    score: AtomicU64::new(0),
                })
                .collect(),
            serving: AtomicUsize::new(0),
            other: Recorder::new(&keyed::other("fuse"), &NAMES, config),
            ctl: Mutex::new(Ctl {
                uses: (0..2 * max).map(|_| Use::Free).collect(),
                serving: 0,
                tombs: 0,
                candidates: Sketch::new((4 * max).clamp(64, 4096)),
                folded: None,
                min_hint: 0,
                swaps: 0,
            }),
            comms: (0..COMM_CACHE).map(|_| Mutex::new(None)).collect(),
        }
    }

    fn comm(&self, pid: u32) -> Comm {
        let slot = &self.comms[pid as usize % COMM_CACHE];
        let now = Instant::now();
        let execs = super::execs::Execs::get();
        let generation = execs.generation(pid);
        if let Some((p, at, g, comm)) = *slot.lock() {
            if p == pid && g == generation && now.duration_since(at) < execs.ttl() {
                return comm;
            }
        }
        let mut name = [0u8; 16];
        let read = if pid == 0 {
            None
        } else {
            std::fs::read(format!("/proc/{pid}/comm")).ok()
        };
        let bytes = read
            .as_deref()
            .map_or(&b"?"[..], |b| b.strip_suffix(b"\n").unwrap_or(b));
        let len = bytes.len().min(16);
        name[..len].copy_from_slice(&bytes[..len]);
        *slot.lock() = Some((pid, now, generation, (name, len as u8)));
        (name, len as u8)
    }

    /// The pool index serving `tag`, if any (no lock).
    #[inline]
    fn find(&self, tag: u64) -> Option<usize> {
        let mask = self.keys.len() - 1;
        let mut i = home(tag) & mask;
        for _ in 0..self.keys.len() {
            match self.keys[i].load(Ordering::Acquire) {
                EMPTY => return None,
                k if k == tag => return Some(self.idx[i].load(Ordering::Relaxed) as usize),
                _ => {}
            }
            i = (i + 1) & mask;
        }
        None
    }

    /// Counts `req` in its key's layer, or `fuse@other`: looks the key up (for `--by comm`, a
    /// read of `/proc/PID/comm` the first time a process is seen), finds or claims its layer
    /// and counts the request there, all before the request's clock starts, so none of it is
    /// in a latency. [`ByCall::finish`] records its latency.
    #[inline]
    pub fn begin(&self, req: &Request) -> ByCall<'_> {
        let (key, comm) = match self.kind {
            KeyKind::Pid => (req.pid as u64, None),
            KeyKind::Uid => (req.uid as u64, None),
            KeyKind::Comm => {
                let c = self.comm(req.pid);
                (fnv(&c.0[..c.1 as usize]), Some(c))
            }
        };
        let t = tag(key);
        let served = self.find(t).or_else(|| {
            (self.serving.load(Ordering::Relaxed) < self.max)
                .then(|| self.claim(key, comm))
                .flatten()
        });
        let (rec, score) = served
            .and_then(|i| {
                let s = &self.pool[i];
                s.rec.get().map(|r| (r, Some(&s.score)))
            })
            .unwrap_or((&self.other, None));
        ByCall {
            by: self,
            rec,
            token: rec.count(req.op.id()),
            score,
            key,
            comm,
        }
    }

    /// A layer for `key` while fewer than K keys have one.
    #[cold]
    fn claim(&self, key: u64, comm: Option<Comm>) -> Option<usize> {
        let mut c = self.ctl.lock();
        if let Some(i) = self.find(tag(key)) {
            return Some(i);
        }
        if c.serving >= self.max {
            return None;
        }
        let f = self.free_slot(&mut c)?;
        let sure = c.candidates.remove(tag(key)).map_or(0, |e| e.sure());
        self.place(&mut c, f, key, comm, sure);
        Some(f)
    }

    /// A request of `key`, counted in `fuse@other`, took `cycles`: counts it among the
    /// candidates, and swaps it in if it is now far enough ahead of the smallest layer.
    #[cold]
    fn outside(&self, key: u64, comm: Option<Comm>, cycles: u64) {
        let t = tag(key);
        let mut c = self.ctl.lock();
        if let Some(i) = self.find(t) {
            // It got a layer meanwhile.
            self.pool[i].score.fetch_add(cycles, Ordering::Relaxed);
            return;
        }
        let sure = c.candidates.add(t, cycles).sure();
        if sure <= c.min_hint.saturating_add(c.min_hint >> MARGIN_SHIFT) {
            return;
        }
        if c.serving < self.max {
            // A claim found no free recorder: one may be free now.
            if let Some(f) = self.free_slot(&mut c) {
                c.candidates.remove(t);
                self.place(&mut c, f, key, comm, sure);
            }
            return;
        }
        let smallest = c
            .uses
            .iter()
            .enumerate()
            .filter(|(_, u)| matches!(u, Use::Serving { .. }))
            .map(|(i, _)| (i, self.pool[i].score.load(Ordering::Relaxed)))
            .min_by_key(|&(_, s)| s);
        let Some((m, least)) = smallest else { return };
        c.min_hint = least;
        if sure <= least.saturating_add(least >> MARGIN_SHIFT) {
            return;
        }
        let Some(f) = self.free_slot(&mut c) else {
            return;
        };
        let out = std::mem::replace(
            &mut c.uses[m],
            Use::Resting {
                since: Instant::now(),
            },
        );
        if let Use::Serving { tag: out, pos, .. } = out {
            self.keys[pos].store(TOMB, Ordering::Release);
            c.tombs += 1;
            c.serving -= 1;
            c.candidates.add(out, least);
        }
        c.candidates.remove(t);
        self.place(&mut c, f, key, comm, sure);
        c.swaps += 1;
    }

    /// A free pooled recorder, folding those whose grace time is over.
    fn free_slot(&self, c: &mut Ctl) -> Option<usize> {
        self.fold(c);
        c.uses.iter().position(|u| matches!(u, Use::Free))
    }

    /// Takes the counts of recorders folded away more than the grace time ago into
    /// `c.folded`, and frees them.
    fn fold(&self, c: &mut Ctl) {
        for (i, u) in c.uses.iter_mut().enumerate() {
            let Use::Resting { since } = *u else {
                continue;
            };
            if since.elapsed() < self.grace {
                continue;
            }
            if let Some(r) = self.pool[i].rec.get() {
                let l = r.take();
                match &mut c.folded {
                    Some(f) => {
                        add_layer(f, &l);
                    }
                    None => c.folded = Some(l),
                }
            }
            *u = Use::Free;
        }
    }

    /// Makes the free recorder `f` serve `key` (whose latency so far is `score`).
    fn place(&self, c: &mut Ctl, f: usize, key: u64, comm: Option<Comm>, score: u64) {
        let label = match comm {
            Some((n, len)) => keyed::name("fuse", self.kind.name(), &n[..len as usize]),
            None => keyed::name("fuse", self.kind.name(), key.to_string().as_bytes()),
        };
        let slot = &self.pool[f];
        slot.rec
            .get_or_init(|| Recorder::new(&label, &NAMES, &self.config));
        slot.score.store(score, Ordering::Relaxed);
        if 2 * (c.serving + c.tombs + 1) > self.keys.len() {
            self.rehash(c);
        }
        let t = tag(key);
        let pos = self.vacant(t);
        if self.keys[pos].load(Ordering::Relaxed) == TOMB {
            c.tombs -= 1;
        }
        self.idx[pos].store(f as u32, Ordering::Relaxed);
        self.keys[pos].store(t, Ordering::Release);
        c.uses[f] = Use::Serving { tag: t, pos, label };
        c.serving += 1;
        self.serving.store(c.serving, Ordering::Relaxed);
    }

    /// The first free or freed table position on `tag`'s probe sequence (the table is at most
    /// half full, so there is one).
    fn vacant(&self, tag: u64) -> usize {
        let mask = self.keys.len() - 1;
        let mut i = home(tag) & mask;
        while !matches!(self.keys[i].load(Ordering::Relaxed), EMPTY | TOMB) {
            i = (i + 1) & mask;
        }
        i
    }

    /// Clears the tombstones: empties the table and puts the serving keys back. A lookup
    /// meanwhile may miss its key and count the request in `fuse@other`.
    fn rehash(&self, c: &mut Ctl) {
        for k in self.keys.iter() {
            k.store(EMPTY, Ordering::Release);
        }
        c.tombs = 0;
        for (f, u) in c.uses.iter_mut().enumerate() {
            if let Use::Serving { tag, pos, .. } = u {
                let p = self.vacant(*tag);
                self.idx[p].store(f as u32, Ordering::Relaxed);
                self.keys[p].store(*tag, Ordering::Release);
                *pos = p;
            }
        }
    }

    /// Keys with a layer now (not counting `other`).
    pub fn keys(&self) -> usize {
        self.ctl.lock().serving
    }

    /// Swaps made since the mount.
    pub fn swaps(&self) -> u64 {
        self.ctl.lock().swaps
    }
}

impl Extension for ByKey {
    fn layers(&self) -> Vec<Layer> {
        let mut c = self.ctl.lock();
        self.fold(&mut c);
        let mut other = self.other.snapshot();
        if let Some(f) = &c.folded {
            add_layer(&mut other, f);
        }
        let mut out = Vec::new();
        for (u, slot) in c.uses.iter().zip(self.pool.iter()) {
            let Some(r) = slot.rec.get() else { continue };
            match u {
                Use::Serving { label, .. } => {
                    let mut l = r.snapshot();
                    if l.total_count() > 0 {
                        l.name.clone_from(label);
                        out.push(l);
                    }
                }
                Use::Resting { .. } => {
                    add_layer(&mut other, &r.snapshot());
                }
                Use::Free => {}
            }
        }
        drop(c);
        out.sort_by(|a, b| a.name.cmp(&b.name));
        if other.total_count() > 0 {
            out.push(other);
        }
        out
    }

    fn reset(&self) {
        let mut c = self.ctl.lock();
        for slot in self.pool.iter() {
            if let Some(r) = slot.rec.get() {
                r.reset();
            }
            slot.score.store(0, Ordering::Relaxed);
        }
        self.other.reset();
        c.candidates.clear();
        c.folded = None;
        c.min_hint = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filesystem::Ino;
    use crate::protocol::ops::Op;

    fn read(pid: u32) -> Request<'static> {
        Request::new(Op::Read, 1, Ino(1), pid, 0, 0)
    }

    fn counts(by: &ByKey) -> Vec<(String, u64)> {
        by.layers()
            .iter()
            .map(|l| (l.name.clone(), l.count("OP_READ")))
            .collect()
    }

    #[test]
    fn keys_beyond_the_bound_go_to_other() {
        let by = ByKey::new(KeyKind::Pid, 4, &RecorderConfig::default());
        for pid in 1..=100u32 {
            by.begin(&read(pid)).finish_after(100);
        }
        assert_eq!(by.keys(), 4);
        let layers = by.layers();
        assert_eq!(layers.len(), 5);
        assert_eq!(layers.last().unwrap().name, "fuse@other");
        assert_eq!(layers.last().unwrap().count("OP_READ"), 96);
        assert_eq!(layers.iter().map(|l| l.count("OP_READ")).sum::<u64>(), 100);
        assert!(layers[..4].iter().all(|l| l.name.starts_with("fuse@pid:")));
        assert_eq!(by.swaps(), 0, "equal latencies trade no places");
        by.reset();
        assert!(by.layers().is_empty());
    }

    #[test]
    fn a_heavy_key_that_comes_late_takes_the_smallest_layer() {
        let by = ByKey::new(KeyKind::Pid, 4, &RecorderConfig::default());
        for pid in 1..=4u32 {
            by.begin(&read(pid)).finish_after(100 * pid as u64);
        }
        for _ in 0..10 {
            by.begin(&read(99)).finish_after(100);
        }
        // Its second request put it at 200 > 100 + 25: pid 1's place from the third on.
        assert_eq!(by.swaps(), 1);
        let got = counts(&by);
        assert_eq!(
            got,
            [
                ("fuse@pid:2".to_string(), 1),
                ("fuse@pid:3".to_string(), 1),
                ("fuse@pid:4".to_string(), 1),
                ("fuse@pid:99".to_string(), 8),
                // pid 99's first two and pid 1's layer, folded.
                ("fuse@other".to_string(), 3),
            ]
        );
    }

    #[test]
    fn two_keys_of_equal_latency_do_not_trade_places() {
        let by = ByKey::new(KeyKind::Pid, 1, &RecorderConfig::default());
        for _ in 0..1000 {
            by.begin(&read(1)).finish_after(100);
            by.begin(&read(2)).finish_after(100);
        }
        assert_eq!(by.swaps(), 0);
        assert_eq!(
            counts(&by),
            [
                ("fuse@pid:1".to_string(), 1000),
                ("fuse@other".to_string(), 1000)
            ]
        );
        // Ten times slower: in after a few requests, for good.
        for _ in 0..1000 {
            by.begin(&read(3)).finish_after(1000);
            by.begin(&read(1)).finish_after(100);
        }
        // In when 1000 n > 1.25 (100000 + 100 n): at its 143rd request.
        assert_eq!(by.swaps(), 1);
        let got = counts(&by);
        assert_eq!(got[0], ("fuse@pid:3".to_string(), 1000 - 143));
        assert_eq!(got.iter().map(|(_, n)| n).sum::<u64>(), 4000);
    }

    #[test]
    fn many_swaps_keep_the_heaviest_keys_and_every_count() {
        let mut by = ByKey::new(KeyKind::Pid, 2, &RecorderConfig::default());
        by.grace = Duration::ZERO;
        // Each key half as slow again as the last: each takes a place at its second request,
        // and the table (8 positions) fills with tombstones and is rehashed many times over.
        let mut total = 0;
        for pid in 1..=60u32 {
            for _ in 0..3 {
                let cycles = (1000.0 * 1.5f64.powi(pid as i32)) as u64;
                by.begin(&read(pid)).finish_after(cycles);
                total += 1;
            }
        }
        assert_eq!(by.swaps(), 58);
        assert!(by.keys() <= 2);
        let got = counts(&by);
        let names: Vec<_> = got.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["fuse@pid:59", "fuse@pid:60", "fuse@other"]);
        assert_eq!(got.iter().map(|(_, n)| n).sum::<u64>(), total);
        for pid in [59, 60] {
            assert!(by.find(tag(pid)).is_some());
        }
        assert!(by.find(tag(1)).is_none());
    }

    #[test]
    fn the_same_key_finds_the_same_layer() {
        let by = ByKey::new(KeyKind::Uid, 64, &RecorderConfig::default());
        for uid in [1000u32, 1001, 1000, 1000] {
            let req = Request::new(Op::Getattr, 1, Ino(1), 7, uid, uid);
            by.begin(&req).finish_after(10);
        }
        let layers = by.layers();
        let names: Vec<_> = layers
            .iter()
            .map(|l| (l.name.as_str(), l.count("OP_GETATTR")))
            .collect();
        assert_eq!(names, [("fuse@uid:1000", 3), ("fuse@uid:1001", 1)]);
    }
}
