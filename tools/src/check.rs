//! `fsprof check`: a profile's consistency and metadata sanity.
//!
//! Problems (the check fails): an operation's bucket sum above its count, or below it by more
//! than the calls allowed in flight (`--in-flight`; `docs/format.md#buckets`); shapes that differ
//! from the layer's declared buckets and epochs; a total latency outside what the filled buckets
//! allow (each call lies in `[lo_b, hi_b)` of its bucket; the upper bound is only checked when no
//! call may be in flight); time-lapse metadata that contradicts itself; a nanosecond clock whose
//! rate is not 10^9; a start time in the future. Warnings (the check passes): a TSC that is not
//! invariant, an implausible clock rate, samples folded into the last epoch, an unknown clock rate.

use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use profile_store::{ClockKind, Profile, views};
use serde::Serialize;

use crate::error::Error;
use crate::input;
use crate::select::Common;

/// `fsprof check`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckConfig {
    /// The profiles.
    pub inputs: Vec<String>,
    /// Calls that may have been in flight when the snapshot was taken. Default 0.
    pub in_flight: u64,
}

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The profile is inconsistent: the check fails.
    Problem,
    /// Worth knowing, not wrong.
    Warning,
}

/// One finding of [`check`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Problem or warning.
    pub severity: Severity,
    /// What was found, naming the layer and operation where it applies.
    pub message: String,
}

impl Finding {
    fn problem(message: impl Into<String>) -> Finding {
        Finding {
            severity: Severity::Problem,
            message: message.into(),
        }
    }
    fn warning(message: impl Into<String>) -> Finding {
        Finding {
            severity: Severity::Warning,
            message: message.into(),
        }
    }
}

/// Clock rates outside this range (1 MHz .. 100 GHz) are reported as implausible.
const PLAUSIBLE_HZ: std::ops::RangeInclusive<u64> = 1_000_000..=100_000_000_000;

/// Checks `p`, allowing an operation's bucket sum to be up to `in_flight` below its count.
pub fn check(p: &Profile, in_flight: u64) -> Vec<Finding> {
    let mut out: Vec<Finding> = views::check(p, in_flight)
        .into_iter()
        .map(|i| Finding::problem(i.to_string()))
        .collect();
    let original = p.extra("source") == Some("original");
    match (p.clock, p.cycles_per_sec) {
        (Some(ClockKind::Ns), Some(hz)) if hz != 1_000_000_000 => out.push(Finding::problem(
            format!("clock=ns counts nanoseconds, but cycles_per_sec={hz} (expected 1000000000)"),
        )),
        (_, Some(hz)) if !PLAUSIBLE_HZ.contains(&hz) => out.push(Finding::warning(format!(
            "cycles_per_sec={hz} is outside 1 MHz..100 GHz"
        ))),
        (_, None) if !original => out.push(Finding::warning(
            "no cycles_per_sec: latencies can be shown in cycles only",
        )),
        _ => {}
    }
    if p.invariant_tsc == Some(false) {
        out.push(Finding::warning(
            "invariant_tsc=false: cycle counts from different cores or clock speeds may not compare",
        ));
    }
    out.extend(kernel_findings(p));
    if let Some(ns) = p.started_unix_ns {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        const DAY_NS: u128 = 86_400 * 1_000_000_000;
        if ns as u128 > now + DAY_NS {
            out.push(Finding::problem(format!(
                "started_unix_ns={ns} lies in the future"
            )));
        }
    }
    for l in &p.layers {
        // The original tools did not record the epoch length.
        if l.epoch_cycles == 0 && l.epochs > 1 && !original {
            out.push(Finding::problem(format!(
                "layer {}: {} epochs but epoch_cycles=0 (no time-lapse)",
                l.name, l.epochs
            )));
        }
        if l.max_epochs_reached {
            out.push(Finding::warning(format!(
                "layer {}: max_epochs_reached: calls after the last epoch were counted in it",
                l.name
            )));
        }
        if original || in_flight > 0 {
            continue;
        }
        for o in &l.ops {
            if o.epochs.len() != l.epochs || o.epochs.iter().any(|e| e.len() != l.buckets) {
                continue; // reported by views::check
            }
            let ceiling: f64 = o
                .merged()
                .iter()
                .enumerate()
                .map(|(b, &n)| n as f64 * l.resolution.range(b).1)
                .sum();
            if o.total as f64 > ceiling * (1.0 + 1e-12) {
                out.push(Finding::problem(format!(
                    "layer {}: {}: total {} is above the sum of its buckets' upper bounds {:.0}",
                    l.name, o.name, o.total, ceiling
                )));
            }
        }
    }
    out
}

/// Global keys of `--kernel` counting trace records that never reached a bucket.
const KERNEL_GLOBAL: [(&str, &str); 3] = [
    ("kernel_lost", "records lost in full perf rings"),
    (
        "kernel_unsampled",
        "FUSE tracepoint hits the kernel counted without writing them",
    ),
    (
        "block_unsampled",
        "block tracepoint hits the kernel counted without writing them",
    ),
];

/// Layer keys of `--kernel` layers counting calls that are in no bucket (or, for `errors`,
/// failed).
const KERNEL_LAYER: [(&str, &str); 6] = [
    ("unpaired", "completions whose start was never seen"),
    (
        "unended",
        "starts dropped while too many waited for their end",
    ),
    ("partial", "partial completions (the request went on)"),
    (
        "ambiguous",
        "completions at a sector where two requests were outstanding",
    ),
    ("uncompleted", "issues dropped while too many waited"),
    ("errors", "requests that completed with an error"),
];

/// Warnings for the counters of `--kernel` (`docs/format.md#kernel-levels`): what the kernel layers could not put in
/// a bucket, so that a reader knows the counts there fall short by that much.
fn kernel_findings(p: &Profile) -> Vec<Finding> {
    let mut out = Vec::new();
    let n = |v: Option<&str>| v.and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    for (key, what) in KERNEL_GLOBAL {
        let v = n(p.extra(key));
        if v > 0 {
            out.push(Finding::warning(format!("{key}={v}: {what}")));
        }
    }
    for l in &p.layers {
        for (key, what) in KERNEL_LAYER {
            let v = n(l
                .extra
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.as_str()));
            if v > 0 {
                out.push(Finding::warning(format!(
                    "layer {}: {key}={v}: {what}",
                    l.name
                )));
            }
        }
    }
    out
}

/// `fsprof check`: checks every input, listing problems and warnings on `out`; fails when any
/// input has a problem.
pub fn run(c: &CheckConfig, common: &Common, out: &mut String) -> Result<(), Error> {
    let mut problems = 0;
    let mut failed = Vec::new();
    for spec in &c.inputs {
        let p = input::load(spec, common.cycles_per_sec)?;
        let findings = check(&p.profile, c.in_flight);
        let mut mine = 0;
        for f in &findings {
            match f.severity {
                Severity::Problem => {
                    mine += 1;
                    let _ = writeln!(out, "{spec}: {}", f.message);
                }
                Severity::Warning => {
                    let _ = writeln!(out, "{spec}: warning: {}", f.message);
                }
            }
        }
        if mine == 0 {
            let layers = &p.profile.layers;
            let ops: usize = layers.iter().map(|l| l.ops.len()).sum();
            let calls: u128 = layers.iter().map(|l| l.total_count() as u128).sum();
            let _ = writeln!(
                out,
                "{spec}: ok ({} layer{}, {ops} operations, {calls} calls)",
                layers.len(),
                if layers.len() == 1 { "" } else { "s" }
            );
        } else {
            failed.push(spec.clone());
            problems += mine;
        }
    }
    if problems > 0 {
        return Err(Error::CheckFailed {
            paths: failed,
            problems,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use profile_store::{Layer, OpProfile, Resolution};

    #[test]
    fn kernel_counters_are_warnings() {
        let mut p = profile(1, 1, &[(0, 1)]);
        p.extra.push(("kernel_lost".into(), "3".into()));
        p.extra.push(("block_unsampled".into(), "0".into()));
        p.layers[0].extra.push(("ambiguous".into(), "2".into()));
        let f = check(&p, 0);
        assert!(f.iter().all(|f| f.severity == Severity::Warning), "{f:?}");
        let msgs: Vec<&str> = f.iter().map(|f| f.message.as_str()).collect();
        assert!(
            msgs.iter().any(|m| m.starts_with("kernel_lost=3")),
            "{msgs:?}"
        );
        assert!(msgs.iter().any(|m| m.contains("ambiguous=2")), "{msgs:?}");
        assert!(
            !msgs.iter().any(|m| m.contains("block_unsampled")),
            "{msgs:?}"
        );
    }

    fn profile(count: u64, total: u64, buckets: &[(usize, u64)]) -> Profile {
        let mut l = Layer::new("fuse", Resolution::ONE);
        let mut o = OpProfile::new("OP_READ", 64, 1);
        o.count = count;
        o.total = total;
        for &(b, n) in buckets {
            o.epochs[0][b] = n;
        }
        l.ops.push(o);
        Profile {
            clock: Some(ClockKind::Tsc),
            cycles_per_sec: Some(2_000_000_000),
            invariant_tsc: Some(true),
            layers: vec![l],
            ..Profile::default()
        }
    }

    fn problems(f: &[Finding]) -> Vec<&str> {
        f.iter()
            .filter(|f| f.severity == Severity::Problem)
            .map(|f| f.message.as_str())
            .collect()
    }

    #[test]
    fn consistent_profile_passes() {
        // 3 calls in [16, 32) and 1 in [32, 64): total between 80 and 160.
        assert!(check(&profile(4, 100, &[(4, 3), (5, 1)]), 0).is_empty());
    }

    #[test]
    fn bucket_sums_and_bounds() {
        assert_eq!(
            problems(&check(&profile(3, 100, &[(4, 3), (5, 1)]), 0)).len(),
            1
        );
        assert_eq!(
            problems(&check(&profile(6, 100, &[(4, 3), (5, 1)]), 0)).len(),
            1
        );
        assert!(problems(&check(&profile(6, 100, &[(4, 3), (5, 1)]), 2)).is_empty());
        let high = check(&profile(4, 161, &[(4, 3), (5, 1)]), 0);
        assert_eq!(
            problems(&high),
            ["layer fuse: OP_READ: total 161 is above the sum of its buckets' upper bounds 160"]
        );
        // In flight: the upper bound is not checked.
        assert!(problems(&check(&profile(5, 161, &[(4, 3), (5, 1)]), 1)).is_empty());
    }

    #[test]
    fn metadata() {
        let mut p = profile(4, 100, &[(4, 3), (5, 1)]);
        p.clock = Some(ClockKind::Ns);
        assert_eq!(problems(&check(&p, 0)).len(), 1);
        p.clock = Some(ClockKind::Tsc);
        p.invariant_tsc = Some(false);
        p.layers[0].max_epochs_reached = true;
        p.layers[0].epoch_cycles = 1 << 32;
        let f = check(&p, 0);
        assert!(problems(&f).is_empty());
        assert_eq!(f.len(), 2);
        p.layers[0].epoch_cycles = 0;
        p.layers[0].epochs = 3;
        for o in &mut p.layers[0].ops {
            o.epochs.resize(3, vec![0; 64]);
        }
        // epochs without epoch_cycles, and max_epochs_reached without time-lapse.
        assert_eq!(problems(&check(&p, 0)).len(), 2);
        p.started_unix_ns = Some(u64::MAX);
        assert!(problems(&check(&p, 0)).iter().any(|m| m.contains("future")));
    }
}
