//! The profile model: global clock metadata and one or more named layers of operations, each
//! with a count, a total latency and per-epoch bucket counts.

use crate::bucket::Resolution;
use crate::clock::ClockKind;
use crate::ops;

/// A complete profile: what one `.fsprof` file or one snapshot holds.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Profile {
    /// Wall-clock time of the last reset (or start), nanoseconds since the Unix epoch.
    pub started_unix_ns: Option<u64>,
    /// The counter latencies were measured with; `None` for profiles of the original tools.
    pub clock: Option<ClockKind>,
    /// Counter ticks per second; `None` when unknown (then latencies are shown in cycles only).
    pub cycles_per_sec: Option<u64>,
    /// Whether the TSC was invariant; `None` when unknown or not a TSC.
    pub invariant_tsc: Option<bool>,
    /// Global keys this version does not interpret, kept in order (written after the known ones).
    pub extra: Vec<(String, String)>,
    /// The layers, primary first.
    pub layers: Vec<Layer>,
    /// Optional sections (version 2): data that is not a histogram per operation, after the
    /// layers, in the order read or added.
    pub sections: Vec<Section>,
}

/// The name of the section of the hottest files (`--hot-files`).
pub const HOT_FILES_SECTION: &str = "hot_files";

/// The name of the section of the slowest requests (`--slowest`).
pub const SLOWEST_SECTION: &str = "slowest";

/// An optional block of a version-2 profile (`docs/format.md#sections`): `# section=NAME
/// key=value...` and its lines. This crate keeps sections as they are written, each line a
/// [`Section::lines`] entry; each kind's content is defined where it is produced (the inner-call
/// breakdown, hot files, injection rules) and round-trips byte for byte whether or not a reader
/// knows it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Section {
    /// Section name (a valid value: printable ASCII without space or `=`).
    pub name: String,
    /// Its `key=value` attributes, in order.
    pub attrs: Vec<(String, String)>,
    /// Its lines ([`Section::is_valid_line`]).
    pub lines: Vec<String>,
}

impl Section {
    /// An empty section named `name`.
    pub fn new(name: impl Into<String>) -> Section {
        Section {
            name: name.into(),
            attrs: Vec::new(),
            lines: Vec::new(),
        }
    }

    /// The value of attribute `key`.
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// `v` as a value in a section line: bytes outside printable ASCII, space and `%` as `%XX`
    /// (paths, which may hold anything).
    pub fn escape(v: &str) -> String {
        let mut s = String::with_capacity(v.len());
        for b in v.bytes() {
            if (0x21..=0x7e).contains(&b) && b != b'%' {
                s.push(b as char);
            } else {
                s.push_str(&format!("%{b:02X}"));
            }
        }
        s
    }

    /// The value [`Section::escape`] wrote (a `%` not followed by two hex digits is kept).
    pub fn unescape(v: &str) -> String {
        let b = v.as_bytes();
        let mut out = Vec::with_capacity(b.len());
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'%' {
                if let Some(v) = v
                    .get(i + 1..i + 3)
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                {
                    out.push(v);
                    i += 3;
                    continue;
                }
            }
            out.push(b[i]);
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Whether `l` may be a section line: printable ASCII and single spaces, not empty, not
    /// starting with `#` (which starts the next section) or ending with a space.
    pub fn is_valid_line(l: &str) -> bool {
        !l.is_empty()
            && !l.starts_with('#')
            && !l.ends_with(' ')
            && l.bytes().all(|b| (0x20..=0x7e).contains(&b))
    }
}

/// One layer of a profile: e.g. the FUSE requests (`fuse`), the lower system calls (`lower`),
/// or one RAIF branch (`branch0`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Layer {
    /// Layer name (printable ASCII, no `=` or space).
    pub name: String,
    /// Buckets per octave.
    pub resolution: Resolution,
    /// Numbers per bucket line: `64 · resolution` for profiles of this tool; whatever the data
    /// held for profiles of the original tools.
    pub buckets: usize,
    /// Epoch length in cycles; 0 when time-lapse is off.
    pub epoch_cycles: u64,
    /// Epochs per operation (1 when time-lapse is off).
    pub epochs: usize,
    /// Whether samples past the last epoch were folded into it.
    pub max_epochs_reached: bool,
    /// Layer keys this version does not interpret, kept in order.
    pub extra: Vec<(String, String)>,
    /// The operations, in the order read or recorded (the writer sorts them).
    pub ops: Vec<OpProfile>,
}

/// One operation's record within a layer.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OpProfile {
    /// Operation name, `OP_...` or `SYS_...` (`docs/format.md#operation-names`).
    pub name: String,
    /// Calls started (counted before the operation runs).
    pub count: u64,
    /// Sum of latencies in cycles of the calls that finished.
    pub total: u64,
    /// `epochs[e][b]`: calls finished in epoch `e` with a latency in bucket `b`.
    pub epochs: Vec<Vec<u64>>,
}

impl Profile {
    /// The layer with this name.
    pub fn layer(&self, name: &str) -> Option<&Layer> {
        self.layers.iter().find(|l| l.name == name)
    }

    /// The first (primary) layer.
    pub fn primary(&self) -> Option<&Layer> {
        self.layers.first()
    }

    /// The format version this profile needs: 2 when it has sections, user-level (`SYS_`)
    /// operations (that are written: a count above 0) or per-key layers (`fuse@uid:1000`), 1 otherwise (written byte for byte as
    /// before version 2 existed).
    pub fn version(&self) -> u32 {
        let v2 = !self.sections.is_empty()
            || self.layers.iter().any(|l| {
                crate::keyed::is_keyed(&l.name)
                    || l.ops
                        .iter()
                        .any(|o| o.count > 0 && ops::is_user_call(&o.name))
            });
        if v2 { 2 } else { 1 }
    }

    /// The first section named `name`.
    pub fn section(&self, name: &str) -> Option<&Section> {
        self.sections.iter().find(|s| s.name == name)
    }

    /// A global key not interpreted by this version, if present.
    pub fn extra(&self, key: &str) -> Option<&str> {
        self.extra
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

impl Layer {
    /// An empty layer of this shape.
    pub fn new(name: impl Into<String>, resolution: Resolution) -> Layer {
        Layer {
            name: name.into(),
            resolution,
            buckets: resolution.buckets(),
            epoch_cycles: 0,
            epochs: 1,
            max_epochs_reached: false,
            extra: Vec::new(),
            ops: Vec::new(),
        }
    }

    /// The operation with this name.
    pub fn op(&self, name: &str) -> Option<&OpProfile> {
        self.ops.iter().find(|o| o.name == name)
    }

    /// Count of an operation, 0 when absent.
    pub fn count(&self, name: &str) -> u64 {
        self.op(name).map_or(0, |o| o.count)
    }

    /// Operations in listing order ([`crate::ops::STANDARD`] order, others alphabetically).
    pub fn ops_in_listing_order(&self) -> Vec<&OpProfile> {
        let mut v: Vec<&OpProfile> = self.ops.iter().collect();
        v.sort_by(|a, b| ops::listing_order(&a.name, &b.name));
        v
    }

    /// Sum of the counts of every operation.
    pub fn total_count(&self) -> u64 {
        self.ops.iter().map(|o| o.count).sum()
    }

    /// Sum of the latencies of every operation, in cycles.
    pub fn total_latency(&self) -> u128 {
        self.ops.iter().map(|o| o.total as u128).sum()
    }
}

impl OpProfile {
    /// An operation with all-zero buckets.
    pub fn new(name: impl Into<String>, buckets: usize, epochs: usize) -> OpProfile {
        OpProfile {
            name: name.into(),
            count: 0,
            total: 0,
            epochs: vec![vec![0; buckets]; epochs],
        }
    }

    /// The first and last bucket holding any call, over all epochs; `None` when none finished.
    pub fn bucket_span(&self) -> Option<(usize, usize)> {
        let lo = self
            .epochs
            .iter()
            .filter_map(|e| e.iter().position(|&c| c != 0))
            .min();
        let hi = self
            .epochs
            .iter()
            .filter_map(|e| e.iter().rposition(|&c| c != 0))
            .max();
        lo.zip(hi)
    }

    /// Bucket counts summed over all epochs.
    pub fn merged(&self) -> Vec<u64> {
        let n = self.epochs.first().map_or(0, Vec::len);
        let mut out = vec![0u64; n];
        for e in &self.epochs {
            for (o, v) in out.iter_mut().zip(e) {
                *o = o.saturating_add(*v);
            }
        }
        out
    }

    /// Sum of every bucket of every epoch (calls that finished).
    pub fn bucket_sum(&self) -> u128 {
        self.epochs.iter().flatten().map(|&v| v as u128).sum()
    }

    /// Mean latency in cycles of the calls that finished (0 when none did).
    pub fn mean(&self) -> f64 {
        let n = self.bucket_sum();
        if n == 0 {
            0.0
        } else {
            self.total as f64 / n as f64
        }
    }
}
