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
    let _ = writeln!(
        out,
        "# HELP {FAMILY} Latency of file-system operations, from FSprof log2 latency buckets."
    );
    let _ = writeln!(out, "# TYPE {FAMILY} histogram");
    for l in &p.layers {
        for o in l.ops_in_listing_order() {
            let labels = format!("layer=\"{}\",op=\"{}\"", label(&l.name), label(&o.name));
            let merged = o.merged();
            let mut cumulative: u128 = 0;
            for (b, &n) in merged.iter().enumerate() {
                cumulative += n as u128;
                // Bounds past 2^1024 cycles overflow f64 (only in hand-made profiles with more
                // than 1023 buckets): those calls are counted in the one +Inf bucket below.
                let le = l.resolution.range(b).1 / hz as f64;
                if !le.is_finite() {
                    continue;
                }
                let le = prom_float(le);
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
    const CALLS: &str = "fsprof_operation_calls_total";
    let _ = writeln!(
        out,
        "# HELP {CALLS} File-system operations started (including those still in flight)."
    );
    let _ = writeln!(out, "# TYPE {CALLS} counter");
    for l in &p.layers {
        for o in l.ops_in_listing_order() {
            let _ = writeln!(
                out,
                "{CALLS}{{layer=\"{}\",op=\"{}\"}} {}",
                label(&l.name),
                label(&o.name),
                o.count
            );
        }
    }
    const EST: &str = "fsprof_operation_latency_estimated_seconds";
    let _ = writeln!(
        out,
        "# HELP {EST} Latency quantiles (1 = the maximum) estimated from the buckets by geometric interpolation within a bucket."
    );
    let _ = writeln!(out, "# TYPE {EST} gauge");
    for l in &p.layers {
        for o in l.ops_in_listing_order() {
            let Some(est) = crate::views::percentiles(o, l.resolution) else {
                continue;
            };
            for ((_, q), v) in crate::views::QUANTILES.iter().zip(est) {
                let _ = writeln!(
                    out,
                    "{EST}{{layer=\"{}\",op=\"{}\",q=\"{q}\"}} {}",
                    label(&l.name),
                    label(&o.name),
                    prom_float(v / hz as f64)
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_escaping() {
        assert_eq!(label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
