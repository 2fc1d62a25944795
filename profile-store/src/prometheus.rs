//! The Prometheus text exposition format of a profile (read by `fsprof export --format
//! prometheus` and served by the daemons' `--metrics` endpoint).
//!
//! * `fsprof_operation_latency_seconds` (histogram, labels `layer` and `op`): cumulative
//!   `_bucket{le="..."}` series at every bucket's upper bound in seconds and `+Inf`, `_sum` (the
//!   recorded total latency in seconds) and `_count` (finished calls).
//! * `fsprof_operation_calls_total` (counter): calls started (counted before they run, so it may
//!   exceed `_count` by the calls in flight).
//! * `fsprof_operation_latency_estimated_seconds` (gauge, label `q`; not `quantile`, which Prometheus keeps for summaries): p50, p90, p99,
//!   p99.9 and the maximum, estimated from the buckets.
//!
//! The mapping of buckets to `le`: bucket `b` holds latencies in `[2^(b/r), 2^((b+1)/r))` cycles
//! (`r` buckets per octave), and its series is written at `le = 2^((b+1)/r) / hz` seconds.
//! Prometheus reads `le` as inclusive; a latency of exactly `2^((b+1)/r)` cycles (an integer
//! only when `(b+1)/r` is) is counted in bucket `b + 1`, whose series is the next one. So for
//! integer cycle counts every `le` is exact except at those powers of two, where the series
//! counts the calls strictly below its bound.
//!
//! Leading buckets that hold no call are left out except the last of them, the lower bound of
//! the first that does: a missing series and a zero add up the same in a sum over machines, and
//! the buckets can be read back exactly ([`crate::prometheus`]'s reader in `fsprof`). Buckets
//! above the last call are kept (their series are cumulative, not zero).
//!
//! Also, from the profile:
//! * `fsprof_clock_cycles_per_second` (gauge) and `fsprof_clock_info` (`clock`, `invariant_tsc`);
//! * `fsprof_layer_buckets_per_octave` (gauge, label `layer`): the resolution `r` above;
//! * `fsprof_build_info` (`version`, `transport`);
//! * `fsprof_operation_errors_total` (counter, labels `layer`, `op`, `errno`), from the `errors`
//!   section;
//! * with the kernel's layers (`--kernel`, `docs/format.md#kernel-levels`): `fsprof_layer_info` (gauge, labels
//!   `layer` and `level`: `user`, `kernel`, `fuse`, `lower`, `branch`, `block`), to join
//!   on `layer` (`... * on(layer) group_left(level) fsprof_layer_info`), rather than a `level`
//!   label on every histogram series, which would change the series of every existing
//!   dashboard; `fsprof_kernel_trace_uncounted_total` (counter, labels `layer`, `reason`) and
//!   `fsprof_kernel_trace_records_lost_total` (counter, label `kind`);
//! * `fsprof_slow_records_dropped_total` (counter), from the `slow_dropped` key;
//! * for RAIF, from the `raif_branches` section: `fsprof_raif_branch_state` (gauge, 1 for the
//!   branch's state and 0 for the others, labels `branch`, `path`, `state`) and
//!   `fsprof_raif_degraded_reads_total`, `fsprof_raif_degraded_writes_total`,
//!   `fsprof_raif_checksum_errors_total`, `fsprof_raif_checksum_repairs_total` (counters).

use std::fmt::Write as _;

use crate::Profile;

/// Escapes a Prometheus label value.
fn label(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A float as Prometheus writes it: shortest round-trip form, `+Inf` for infinity.
fn prom_float(v: f64) -> String {
    if v.is_infinite() {
        "+Inf".into()
    } else {
        format!("{v:e}")
    }
}

/// The profile `p` in the Prometheus text exposition format, its cycles converted to seconds
/// at `hz` cycles per second (see the module's documentation for the families).
pub fn exposition(p: &Profile, hz: u64) -> String {
    const FAMILY: &str = "fsprof_operation_latency_seconds";
    let mut out = String::new();
    for f in info_families(p, hz) {
        f.write(&mut out);
    }
    let _ = writeln!(
        out,
        "# HELP {FAMILY} Latency of file-system operations, from FSprof log2 latency buckets."
    );
    let _ = writeln!(out, "# TYPE {FAMILY} histogram");
    for l in &p.layers {
        // Each bound formatted once per layer, not once per operation (a scrape of a mount
        // with two layers formats a few thousand series).
        let les: Vec<Option<String>> = (0..l.buckets)
            .map(|b| {
                let le = l.resolution.range(b).1 / hz as f64;
                le.is_finite().then(|| prom_float(le))
            })
            .collect();
        for o in l.ops_in_listing_order() {
            let labels = format!("layer=\"{}\",op=\"{}\"", label(&l.name), label(&o.name));
            let merged = o.merged();
            // The last empty bucket before the first call's (or none, for an empty histogram).
            let first = merged
                .iter()
                .position(|&n| n != 0)
                .map_or(merged.len(), |b| b.saturating_sub(1));
            let mut cumulative: u128 = 0;
            for (b, &n) in merged.iter().enumerate() {
                cumulative += n as u128;
                if b < first {
                    continue;
                }
                // Bounds past 2^1024 cycles overflow f64 (only in hand-made profiles with more
                // than 1023 buckets): those calls are counted in the one +Inf bucket below.
                let Some(Some(le)) = les.get(b) else {
                    continue;
                };
                let _ = writeln!(out, "{FAMILY}_bucket{{{labels},le=\"{le}\"}} {cumulative}");
            }
            let _ = writeln!(out, "{FAMILY}_bucket{{{labels},le=\"+Inf\"}} {cumulative}");
            let _ = writeln!(
                out,
                "{FAMILY}_sum{{{labels}}} {}",
                prom_float(o.total as f64 / hz as f64)
            );
            let _ = writeln!(out, "{FAMILY}_count{{{labels}}} {cumulative}");
        }
    }
    for f in other_families(p, hz) {
        f.write(&mut out);
    }
    out
}

/// Writes a family's HELP and TYPE lines.
fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// A sample's value: a count (written as an integer) or a real number.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    /// A count.
    Count(u64),
    /// A real number (seconds, a rate).
    Real(f64),
}

impl Value {
    /// As a float (the protobuf form).
    pub fn as_f64(self) -> f64 {
        match self {
            Value::Count(n) => n as f64,
            Value::Real(v) => v,
        }
    }
}

/// One sample of a [`Family`]: its labels (names and raw values) and value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Label names and values, in order.
    pub labels: Vec<(&'static str, String)>,
    /// The value.
    pub value: Value,
}

/// A family of counters or gauges, written the same way in the text and the protobuf
/// expositions (`fsprof-fuse`'s `--metrics-native` encodes these with its native histograms).
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    /// Metric name (counters end in `_total`).
    pub name: String,
    /// HELP text.
    pub help: &'static str,
    /// Counter (else gauge).
    pub counter: bool,
    /// The samples.
    pub samples: Vec<Sample>,
}

impl Family {
    fn new(name: impl Into<String>, counter: bool, help: &'static str) -> Family {
        Family {
            name: name.into(),
            help,
            counter,
            samples: Vec::new(),
        }
    }

    fn push(&mut self, labels: Vec<(&'static str, String)>, value: Value) {
        self.samples.push(Sample { labels, value });
    }

    /// Writes the family in the text format.
    fn write(&self, out: &mut String) {
        let kind = if self.counter { "counter" } else { "gauge" };
        family(out, &self.name, kind, self.help);
        for s in &self.samples {
            out.push_str(&self.name);
            if !s.labels.is_empty() {
                out.push('{');
                for (i, (k, v)) in s.labels.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    let _ = write!(out, "{k}=\"{}\"", label(v));
                }
                out.push('}');
            }
            let _ = match s.value {
                Value::Count(n) => writeln!(out, " {n}"),
                Value::Real(v) => writeln!(out, " {}", prom_float(v)),
            };
        }
    }
}

/// The clock, build and layer families (written before the histograms).
pub fn info_families(p: &Profile, hz: u64) -> Vec<Family> {
    let mut build = Family::new(
        "fsprof_build_info",
        false,
        "The fsprof version that wrote these metrics, and the transport the mount uses.",
    );
    build.push(
        vec![
            ("version", env!("CARGO_PKG_VERSION").to_string()),
            ("transport", p.extra("transport").unwrap_or("").to_string()),
        ],
        Value::Count(1),
    );
    let mut cps = Family::new(
        "fsprof_clock_cycles_per_second",
        false,
        "Counter ticks per second: the unit latencies were measured in.",
    );
    cps.push(Vec::new(), Value::Count(hz));
    let mut clock = Family::new(
        "fsprof_clock_info",
        false,
        "The counter latencies were measured with.",
    );
    let inv = p
        .invariant_tsc
        .map_or("unknown", |v| if v { "true" } else { "false" });
    clock.push(
        vec![
            (
                "clock",
                p.clock.map_or("unknown", |c| c.as_str()).to_string(),
            ),
            ("invariant_tsc", inv.to_string()),
        ],
        Value::Count(1),
    );
    let mut layers = Family::new(
        "fsprof_layer_buckets_per_octave",
        false,
        "Latency buckets per power of two of each layer.",
    );
    for l in &p.layers {
        layers.push(
            vec![("layer", l.name.clone())],
            Value::Count(l.resolution.get() as u64),
        );
    }
    let mut out = vec![build, cps, clock, layers];
    out.extend(level_families(p));
    out
}

/// The level of a layer in the stack (`docs/format.md#kernel-levels`): a layer's own `level` key (the kernel's
/// layers write one), else from its name.
pub fn level_of(l: &crate::Layer) -> &'static str {
    match l
        .extra
        .iter()
        .find(|(k, _)| k == "level")
        .map(|(_, v)| v.as_str())
    {
        Some("kernel") => "kernel",
        Some("block") => "block",
        _ => match l.name.as_str() {
            "user" => "user",
            "kernel" => "kernel",
            "lower" => "lower",
            n if n.starts_with("branch") => "branch",
            n if n.starts_with("block@") => "block",
            _ => "fuse",
        },
    }
}

/// Layer keys of the kernel's layers counting calls that are in no bucket.
const UNCOUNTED: [&str; 5] = ["unpaired", "unended", "partial", "ambiguous", "uncompleted"];

/// For profiles with the kernel's layers (`--kernel`): `fsprof_layer_info` (each layer's
/// `level` in the stack, to join on `layer`: one family per level would split the latency
/// histogram's name, a label on it would change every existing series), the calls those
/// layers could not put in a bucket, and the trace records lost.
fn level_families(p: &Profile) -> Vec<Family> {
    if !p
        .layers
        .iter()
        .any(|l| l.extra.iter().any(|(k, _)| k == "level"))
    {
        return Vec::new();
    }
    let mut info = Family::new(
        "fsprof_layer_info",
        false,
        "Each layer's level in the stack: user, kernel, fuse, lower, branch or block (a block layer counts every request of its device).",
    );
    let mut uncounted = Family::new(
        "fsprof_kernel_trace_uncounted_total",
        true,
        "Calls of the kernel's layers in no bucket, by reason (unpaired, unended, partial, ambiguous, uncompleted).",
    );
    for l in &p.layers {
        info.push(
            vec![
                ("layer", l.name.clone()),
                ("level", level_of(l).to_string()),
            ],
            Value::Count(1),
        );
        for (k, v) in &l.extra {
            if let (true, Ok(n)) = (UNCOUNTED.contains(&k.as_str()), v.parse::<u64>()) {
                uncounted.push(
                    vec![("layer", l.name.clone()), ("reason", k.clone())],
                    Value::Count(n),
                );
            }
        }
    }
    let mut lost = Family::new(
        "fsprof_kernel_trace_records_lost_total",
        true,
        "Trace records lost: in full perf rings (ring), or counted by the kernel and never written (unsampled_fuse, unsampled_block).",
    );
    for (key, kind) in [
        ("kernel_lost", "ring"),
        ("kernel_unsampled", "unsampled_fuse"),
        ("block_unsampled", "unsampled_block"),
    ] {
        if let Some(n) = p.extra(key).and_then(|v| v.parse::<u64>().ok()) {
            lost.push(vec![("kind", kind.to_string())], Value::Count(n));
        }
    }
    vec![info, uncounted, lost]
}

/// The value of `key=` in a section line.
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split(' ')
        .find_map(|f| f.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
}

/// The families after the histograms: calls started, estimated quantiles, and those taken from
/// the profile's sections and keys (errors, slow-log drops, RAIF health).
pub fn other_families(p: &Profile, hz: u64) -> Vec<Family> {
    let mut out = Vec::new();
    let mut calls = Family::new(
        "fsprof_operation_calls_total",
        true,
        "File-system operations started (including those still in flight).",
    );
    let mut est = Family::new(
        "fsprof_operation_latency_estimated_seconds",
        false,
        "Latency quantiles (1 = the maximum) estimated from the buckets by geometric interpolation within a bucket.",
    );
    for l in &p.layers {
        for o in l.ops_in_listing_order() {
            let lo = || vec![("layer", l.name.clone()), ("op", o.name.clone())];
            calls.push(lo(), Value::Count(o.count));
            let Some(q) = crate::views::percentiles(o, l.resolution) else {
                continue;
            };
            for ((_, q), v) in crate::views::QUANTILES.iter().zip(q) {
                let mut labels = lo();
                labels.push(("q", q.to_string()));
                est.push(labels, Value::Real(v / hz as f64));
            }
        }
    }
    out.push(calls);
    out.push(est);
    let mut errors = Family::new(
        "fsprof_operation_errors_total",
        true,
        "Requests answered with an error, per operation and errno.",
    );
    for s in p.sections.iter().filter(|s| s.name == "errors") {
        let layer = s.attr("layer").unwrap_or("").to_string();
        for l in &s.lines {
            let (Some(op), Some(errno), Some(n)) = (
                field(l, "op"),
                field(l, "errno"),
                field(l, "count").and_then(|n| n.parse::<u64>().ok()),
            ) else {
                continue;
            };
            let errno = errno
                .parse::<i32>()
                .map_or_else(|_| errno.to_string(), crate::errno::label);
            errors.push(
                vec![
                    ("layer", layer.clone()),
                    ("op", op.to_string()),
                    ("errno", errno),
                ],
                Value::Count(n),
            );
        }
    }
    out.push(errors);
    if let Some(n) = p.extra("slow_dropped").and_then(|n| n.parse::<u64>().ok()) {
        let mut dropped = Family::new(
            "fsprof_slow_records_dropped_total",
            true,
            "Slow-operation records dropped from the full ring since the last reset.",
        );
        dropped.push(Vec::new(), Value::Count(n));
        out.push(dropped);
    }
    if let Some(s) = p.sections.iter().find(|s| s.name == "raif_branches") {
        let mut state = Family::new(
            "fsprof_raif_branch_state",
            false,
            "RAIF branch state: 1 for the state the branch is in, 0 for the others.",
        );
        for l in &s.lines {
            let (Some(b), Some(now)) = (field(l, "branch"), field(l, "state")) else {
                continue;
            };
            let path = crate::Section::unescape(field(l, "path").unwrap_or(""));
            for st in ["online", "stale", "rebuilding", "failed"] {
                state.push(
                    vec![
                        ("branch", b.to_string()),
                        ("path", path.clone()),
                        ("state", st.to_string()),
                    ],
                    Value::Count(u64::from(st == now)),
                );
            }
        }
        out.push(state);
        for (key, help) in [
            (
                "degraded_reads",
                "RAIF reads served without a failed branch's part.",
            ),
            (
                "degraded_writes",
                "RAIF writes that missed a failed branch.",
            ),
            ("checksum_errors", "RAIF blocks that failed their checksum."),
            (
                "checksum_repairs",
                "RAIF blocks that failed their checksum and were rewritten from redundancy.",
            ),
        ] {
            let mut f = Family::new(format!("fsprof_raif_{key}_total"), true, help);
            let n = s.attr(key).and_then(|n| n.parse().ok()).unwrap_or(0);
            f.push(Vec::new(), Value::Count(n));
            out.push(f);
        }
    }
    out
}

#[cfg(test)]
mod level_tests {
    use super::*;
    use crate::{Layer, Resolution};

    #[test]
    fn kernel_profiles_say_each_layers_level_and_what_was_uncounted() {
        let mut p = Profile {
            cycles_per_sec: Some(1_000_000_000),
            layers: vec![Layer::new("fuse", Resolution::ONE)],
            ..Profile::default()
        };
        assert!(!exposition(&p, 1_000_000_000).contains("fsprof_layer_info"));
        let mut k = Layer::new("kernel", Resolution::ONE);
        k.extra = vec![
            ("level".into(), "kernel".into()),
            ("unpaired".into(), "2".into()),
        ];
        let mut b = Layer::new("block@dev:loop0", Resolution::ONE);
        b.extra = vec![
            ("level".into(), "block".into()),
            ("ambiguous".into(), "1".into()),
        ];
        p.layers.extend([k, b]);
        p.extra.push(("kernel_lost".into(), "4".into()));
        let e = exposition(&p, 1_000_000_000);
        for want in [
            "fsprof_layer_info{layer=\"fuse\",level=\"fuse\"} 1",
            "fsprof_layer_info{layer=\"kernel\",level=\"kernel\"} 1",
            "fsprof_layer_info{layer=\"block@dev:loop0\",level=\"block\"} 1",
            "fsprof_kernel_trace_uncounted_total{layer=\"kernel\",reason=\"unpaired\"} 2",
            "fsprof_kernel_trace_uncounted_total{layer=\"block@dev:loop0\",reason=\"ambiguous\"} 1",
            "fsprof_kernel_trace_records_lost_total{kind=\"ring\"} 4",
        ] {
            assert!(e.contains(want), "{want}\n{e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A RAIF branch in each of its four states has a 1 in that state's series only: a
    /// rebuilding branch showed 0 in every series.
    #[test]
    fn each_raif_branch_state_has_its_series() {
        let mut sec = crate::Section::new("raif_branches");
        for (i, st) in ["online", "stale", "rebuilding", "failed"]
            .iter()
            .enumerate()
        {
            sec.lines.push(format!("branch={i} state={st} path=/b{i}"));
        }
        let mut l = crate::Layer::new("fuse", crate::Resolution::ONE);
        l.ops.push(crate::OpProfile::new("OP_LOOKUP", 64, 1));
        let p = crate::Profile {
            layers: vec![l],
            sections: vec![sec],
            ..crate::Profile::default()
        };
        let text = exposition(&p, 1_000_000_000);
        for (i, st) in ["online", "stale", "rebuilding", "failed"]
            .iter()
            .enumerate()
        {
            let ones: Vec<&str> = text
                .lines()
                .filter(|l| {
                    l.starts_with("fsprof_raif_branch_state{")
                        && l.contains(&format!("branch=\"{i}\""))
                        && l.ends_with(" 1")
                })
                .collect();
            assert_eq!(ones.len(), 1, "{text}");
            assert!(ones[0].contains(&format!("state=\"{st}\"")), "{text}");
        }
    }

    /// The `le` of every bucket's series, parsed back from the exposition.
    fn series(text: &str) -> Vec<(f64, u64)> {
        text.lines()
            .filter(|l| l.starts_with("fsprof_operation_latency_seconds_bucket"))
            .filter_map(|l| {
                let le = l.split("le=\"").nth(1)?.split('"').next()?;
                let n = l.rsplit(' ').next()?.parse().ok()?;
                Some((
                    if le == "+Inf" {
                        f64::INFINITY
                    } else {
                        le.parse().ok()?
                    },
                    n,
                ))
            })
            .collect()
    }

    /// For every bucket b at every resolution r, the series after it is at
    /// `le = 2^((b+1)/r) / hz`, and a latency of exactly a power of two, `2^k` cycles, is
    /// counted in bucket `r·k`: outside the series at `le = 2^k / hz`, inside the next one.
    #[test]
    fn every_bucket_maps_to_its_documented_le() {
        use crate::{Layer, OpProfile, Resolution};
        let hz = 1_000_000_000u64;
        for r in [1u32, 2, 4, 8] {
            let res = Resolution::new(r).unwrap();
            for b in 1..res.buckets() - 1 {
                let mut l = Layer::new("fuse", res);
                let mut o = OpProfile::new("OP_READ", l.buckets, 1);
                o.epochs[0][b] = 1;
                o.count = 1;
                l.ops.push(o);
                let p = Profile {
                    layers: vec![l],
                    ..Profile::default()
                };
                let s = series(&exposition(&p, hz));
                // The first series is the empty bucket below b, then b's own.
                let want = |k: usize| (k as f64 / r as f64).exp2() / hz as f64;
                assert_eq!(s[0], (want(b), 0), "r {r} b {b}");
                assert_eq!(s[1], (want(b + 1), 1), "r {r} b {b}");
                let rel = |x: f64, y: f64| ((x - y) / y).abs();
                assert!(s.windows(2).all(|w| w[0].0 < w[1].0), "r {r} b {b}");
                assert!(rel(s[1].0, want(b + 1)) < 1e-12);
            }
            // Exact powers of two.
            for k in 1..63u32 {
                let c = 1u64 << k;
                let b = res.bucket(c);
                assert_eq!(b, (r * k) as usize, "2^{k} cycles at r {r}");
                let mut l = Layer::new("fuse", res);
                let mut o = OpProfile::new("OP_READ", l.buckets, 1);
                o.epochs[0][b] = 1;
                o.count = 1;
                l.ops.push(o);
                let p = Profile {
                    layers: vec![l],
                    ..Profile::default()
                };
                let s = series(&exposition(&p, hz));
                let at = c as f64 / hz as f64;
                let below = s.iter().find(|(le, _)| *le == at).expect("a series at 2^k");
                assert_eq!(below.1, 0, "2^{k} cycles counted below le = 2^{k}/hz");
                let above = s.iter().find(|(le, _)| *le > at).unwrap();
                assert_eq!(above.1, 1);
            }
        }
    }

    #[test]
    fn label_escaping() {
        assert_eq!(label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
