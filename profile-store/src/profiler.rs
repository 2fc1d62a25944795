//! A profile of several layers: the recorders of one mount, snapshotted and reset together.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

use std::sync::Arc;

use crate::clock::ClockInfo;
use crate::profile::{Layer, Profile, Section};
use crate::recorder::Recorder;
use crate::text;

/// Something that adds to a [`Profiler`]'s snapshots and is reset with it: layers whose set
/// changes while recording (per-key layers), sections (`docs/format.md#sections`), metadata known
/// only at snapshot time.
pub trait Extension: Send + Sync {
    /// Layers to list after the recorders' own.
    fn layers(&self) -> Vec<Layer> {
        Vec::new()
    }
    /// Sections, after those of extensions added earlier.
    fn sections(&self) -> Vec<Section> {
        Vec::new()
    }
    /// Global metadata (valid keys and values; a key set with [`Profiler::set_extra`] too is
    /// replaced).
    fn extra(&self) -> Vec<(String, String)> {
        Vec::new()
    }
    /// Forgets what was recorded (the profile is reset).
    fn reset(&self) {}
}

/// Global keys a snapshot writes from its own fields, and `layer`, which starts a layer line.
const RESERVED: &[&str] = &[
    "layer",
    "section",
    "started_unix_ns",
    "clock",
    "cycles_per_sec",
    "invariant_tsc",
];

/// Why [`Profiler::set_extra`] refused a key or value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExtraError {
    /// The key is not lower-case letters, digits and `_`.
    BadKey(String),
    /// The key is one the profile writes itself, or `layer`.
    ReservedKey(String),
    /// The value is empty or holds a space, `=` or a character outside printable ASCII.
    BadValue {
        /// The key it was given for.
        key: String,
        /// The value refused.
        value: String,
    },
}

impl std::fmt::Display for ExtraError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExtraError::BadKey(k) => write!(
                f,
                "metadata key {k:?}: lower-case letters, digits and _ only"
            ),
            ExtraError::ReservedKey(k) => {
                write!(
                    f,
                    "metadata key {k:?} is reserved for the profile's own use"
                )
            }
            ExtraError::BadValue { key, value } => write!(
                f,
                "metadata {key}={value:?}: printable ASCII without space or '=' only"
            ),
        }
    }
}

impl std::error::Error for ExtraError {}

/// The layers of one profile (primary first) with the global metadata.
pub struct Profiler {
    layers: Vec<Recorder>,
    started_unix_ns: AtomicU64,
    extra: Mutex<Vec<(String, String)>>,
    /// Extensions, each with whether it is for the live views only.
    extensions: Mutex<Vec<(Arc<dyn Extension>, bool)>>,
}

impl std::fmt::Debug for Profiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Profiler")
            .field("layers", &self.layers)
            .field("started_unix_ns", &self.started_unix_ns)
            .field("extra", &self.extra)
            .field("extensions", &self.extensions.lock().len())
            .finish()
    }
}

fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

impl Profiler {
    /// A profile over these layers, started now.
    pub fn new(layers: Vec<Recorder>) -> Profiler {
        Profiler {
            layers,
            started_unix_ns: AtomicU64::new(unix_ns()),
            extra: Mutex::new(Vec::new()),
            extensions: Mutex::new(Vec::new()),
        }
    }

    /// The layers, primary first.
    pub fn layers(&self) -> &[Recorder] {
        &self.layers
    }

    /// The layer named `name`.
    pub fn layer(&self, name: &str) -> Option<&Recorder> {
        self.layers.iter().find(|l| l.name() == name)
    }

    /// Sets a global metadata key written with every snapshot (e.g. which operations a speed
    /// mode keeps from being profiled), replacing an earlier value of the same key.
    ///
    /// Keys and values follow the text-format rules ([`text::is_valid_key`],
    /// [`text::is_valid_value`]), and a key may not be one the profile writes itself
    /// (`started_unix_ns`, `clock`, `cycles_per_sec`, `invariant_tsc`) or `layer`; otherwise the
    /// snapshot would not parse back, and nothing is set.
    pub fn set_extra(&self, key: &str, value: &str) -> Result<(), ExtraError> {
        if !text::is_valid_key(key) {
            return Err(ExtraError::BadKey(key.to_string()));
        }
        if RESERVED.contains(&key) {
            return Err(ExtraError::ReservedKey(key.to_string()));
        }
        if !text::is_valid_value(value) {
            return Err(ExtraError::BadValue {
                key: key.to_string(),
                value: value.to_string(),
            });
        }
        let mut e = self.extra.lock();
        match e.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value.to_string(),
            None => e.push((key.to_string(), value.to_string())),
        }
        Ok(())
    }

    /// Adds `ext` to every snapshot from now on, and resets it with the profile.
    pub fn extend(&self, ext: Arc<dyn Extension>) {
        self.extensions.lock().push((ext, false));
    }

    /// Adds `ext` to the live views only ([`Profiler::live_snapshot`]: the `--metrics`
    /// endpoint), not to the profile files: a profile without the features that need sections
    /// stays version 1, byte for byte (`docs/format.md#version-2`). Reset with the profile.
    pub fn extend_live(&self, ext: Arc<dyn Extension>) {
        self.extensions.lock().push((ext, true));
    }

    /// [`Profiler::snapshot`] with what the live-only extensions add.
    pub fn live_snapshot(&self) -> Profile {
        self.snapshot_with(true)
    }

    /// Every layer's current numbers with the clock's metadata, and what the extensions add.
    pub fn snapshot(&self) -> Profile {
        self.snapshot_with(false)
    }

    fn snapshot_with(&self, live: bool) -> Profile {
        let clock = ClockInfo::get();
        let mut p = Profile {
            started_unix_ns: Some(self.started_unix_ns.load(Ordering::Relaxed)),
            clock: Some(clock.kind),
            cycles_per_sec: Some(clock.cycles_per_sec),
            invariant_tsc: clock.invariant_tsc,
            extra: self.extra.lock().clone(),
            layers: self.layers.iter().map(Recorder::snapshot).collect(),
            sections: Vec::new(),
        };
        let exts = self.extensions.lock().clone();
        for (e, live_only) in exts {
            if live_only && !live {
                continue;
            }
            p.layers.extend(e.layers());
            p.sections.extend(e.sections());
            for (k, v) in e.extra() {
                match p.extra.iter_mut().find(|(pk, _)| *pk == k) {
                    Some(slot) => slot.1 = v,
                    None => p.extra.push((k, v)),
                }
            }
        }
        p
    }

    /// Resets every layer and extension and restarts the epoch clocks.
    pub fn reset(&self) {
        self.started_unix_ns.store(unix_ns(), Ordering::Relaxed);
        for l in &self.layers {
            l.reset();
        }
        let exts = self.extensions.lock().clone();
        for (e, _) in exts {
            e.reset();
        }
    }
}
