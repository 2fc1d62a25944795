//! Attribution (`--by pid|uid|comm`): one `fuse` profile per key, as layers `fuse@uid:1000`,
//! `fuse@pid:4242`, `fuse@comm:tar` (SPEC §10), with a bound: the first `--by-max` keys seen
//! since the mount get a layer each, and the requests of every later key go to `fuse@other`,
//! so memory stays bounded under a fork storm. (The bound is by arrival, not by latency: a
//! key's layer is made when its first request comes, and is not taken back.)
//!
//! The keys live in a fixed open-addressing table of atomics; a request finds its key's
//! recorder with a few loads, and only a key's first request allocates (its recorder). `comm`
//! is read from `/proc/PID/comm` and cached per pid for a second in a fixed table.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use parking_lot::Mutex;
use profile_store::{Extension, Layer, Recorder, RecorderConfig, keyed};

use crate::filesystem::Request;
use crate::ops::NAMES;

/// Default bound on keyed layers.
pub const DEFAULT_MAX: usize = 64;

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

type CommEntry = (u32, Instant, [u8; 16], u8);

/// Per-key profiles of one mount (see the module documentation).
pub struct ByKey {
    kind: KeyKind,
    max: usize,
    config: RecorderConfig,
    /// `key + 1` per slot, 0 while free.
    keys: Box<[AtomicU64]>,
    recs: Box<[OnceLock<Recorder>]>,
    claimed: AtomicUsize,
    other: Recorder,
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

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

impl ByKey {
    /// Splits by `kind` into at most `max` keyed layers (and `fuse@other`), each recorded with
    /// `config`.
    pub fn new(kind: KeyKind, max: usize, config: &RecorderConfig) -> ByKey {
        let size = (2 * max.max(1)).next_power_of_two();
        ByKey {
            kind,
            max,
            config: config.clone(),
            keys: (0..size).map(|_| AtomicU64::new(0)).collect(),
            recs: (0..size).map(|_| OnceLock::new()).collect(),
            claimed: AtomicUsize::new(0),
            other: Recorder::new(&keyed::other("fuse"), &NAMES, config),
            comms: (0..COMM_CACHE).map(|_| Mutex::new(None)).collect(),
        }
    }

    fn comm(&self, pid: u32) -> ([u8; 16], u8) {
        let slot = &self.comms[pid as usize % COMM_CACHE];
        let now = Instant::now();
        if let Some((p, at, name, len)) = *slot.lock() {
            if p == pid && now.duration_since(at).as_secs() < 1 {
                return (name, len);
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
        *slot.lock() = Some((pid, now, name, len as u8));
        (name, len as u8)
    }

    /// The recorder of `req`'s key (or `other`).
    #[inline]
    pub fn recorder(&self, req: &Request) -> &Recorder {
        let (key, comm) = match self.kind {
            KeyKind::Pid => (req.pid as u64, None),
            KeyKind::Uid => (req.uid as u64, None),
            KeyKind::Comm => {
                let (name, len) = self.comm(req.pid);
                (fnv(&name[..len as usize]), Some((name, len)))
            }
        };
        let want = key.wrapping_add(1).max(1);
        let mask = self.keys.len() - 1;
        let mut i = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize & mask;
        for _ in 0..self.keys.len() {
            let k = self.keys[i].load(Ordering::Acquire);
            if k == want {
                return self.recs[i].get_or_init(|| self.make(key, comm));
            }
            if k == 0 {
                if self.claimed.fetch_add(1, Ordering::AcqRel) >= self.max {
                    self.claimed.fetch_sub(1, Ordering::AcqRel);
                    return &self.other;
                }
                match self.keys[i].compare_exchange(0, want, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => return self.recs[i].get_or_init(|| self.make(key, comm)),
                    Err(v) => {
                        self.claimed.fetch_sub(1, Ordering::AcqRel);
                        if v == want {
                            return self.recs[i].get_or_init(|| self.make(key, comm));
                        }
                    }
                }
            }
            i = (i + 1) & mask;
        }
        &self.other
    }

    #[cold]
    fn make(&self, key: u64, comm: Option<([u8; 16], u8)>) -> Recorder {
        let name = match comm {
            Some((n, len)) => keyed::name("fuse", self.kind.name(), &n[..len as usize]),
            None => keyed::name("fuse", self.kind.name(), key.to_string().as_bytes()),
        };
        Recorder::new(&name, &NAMES, &self.config)
    }

    /// Keyed layers made so far (not counting `other`).
    pub fn keys(&self) -> usize {
        self.recs.iter().filter(|r| r.get().is_some()).count()
    }
}

impl Extension for ByKey {
    fn layers(&self) -> Vec<Layer> {
        let mut out: Vec<Layer> = self
            .recs
            .iter()
            .filter_map(OnceLock::get)
            .map(Recorder::snapshot)
            .filter(|l| l.total_count() > 0)
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        let other = self.other.snapshot();
        if other.total_count() > 0 {
            out.push(other);
        }
        out
    }

    fn reset(&self) {
        for r in self.recs.iter().filter_map(OnceLock::get) {
            r.reset();
        }
        self.other.reset();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filesystem::Ino;
    use crate::ops::Op;

    #[test]
    fn keys_beyond_the_bound_go_to_other() {
        let by = ByKey::new(KeyKind::Pid, 4, &RecorderConfig::default());
        for pid in 1..=100u32 {
            let req = Request::new(Op::Read, 1, Ino(1), pid, 0, 0);
            let _t = by.recorder(&req).time(Op::Read.id());
        }
        assert_eq!(by.keys(), 4);
        let layers = by.layers();
        assert_eq!(layers.len(), 5);
        assert_eq!(layers.last().unwrap().name, "fuse@other");
        assert_eq!(layers.last().unwrap().count("OP_READ"), 96);
        assert_eq!(layers.iter().map(|l| l.count("OP_READ")).sum::<u64>(), 100);
        assert!(layers[..4].iter().all(|l| l.name.starts_with("fuse@pid:")));
        by.reset();
        assert!(by.layers().is_empty());
    }

    #[test]
    fn the_same_key_finds_the_same_layer() {
        let by = ByKey::new(KeyKind::Uid, 64, &RecorderConfig::default());
        for uid in [1000u32, 1001, 1000, 1000] {
            let req = Request::new(Op::Getattr, 1, Ino(1), 7, uid, uid);
            let _t = by.recorder(&req).time(Op::Getattr.id());
        }
        let layers = by.layers();
        let names: Vec<_> = layers
            .iter()
            .map(|l| (l.name.as_str(), l.count("OP_GETATTR")))
            .collect();
        assert_eq!(names, [("fuse@uid:1000", 3), ("fuse@uid:1001", 1)]);
    }
}
