//! Latency units: the clock rate a profile was recorded with, and compact human formats for
//! cycles (`1.0K`, `262K`, `4.3G`) and seconds (`850ns`, `1.2us`, `31ms`).

use profile_store::{Layer, Resolution};

/// The clock rate used to show cycles as time: the profile's `cycles_per_sec`, or the
/// `--cycles-per-sec` given on the command line. `None` when unknown: latencies are then shown
/// in cycles only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Clock(pub Option<u64>);

impl Clock {
    /// Cycles as seconds, when the rate is known.
    pub fn secs(self, cycles: f64) -> Option<f64> {
        self.0.map(|hz| cycles / hz as f64)
    }

    /// Whether the rate is known.
    pub fn known(self) -> bool {
        self.0.is_some()
    }

    /// `"1.2us"` when the rate is known, else the cycles (`"3.5K cyc"`).
    pub fn latency(self, cycles: f64) -> String {
        match self.secs(cycles) {
            Some(s) => fmt_secs(s),
            None => format!("{} cyc", fmt_cycles(cycles)),
        }
    }
}

/// The geometry of a layer's buckets, shared by the views: resolution and bucket count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Buckets {
    /// Buckets per octave.
    pub resolution: Resolution,
    /// Number of buckets.
    pub len: usize,
}

impl Buckets {
    /// The geometry of `layer`.
    pub fn of(layer: &Layer) -> Buckets {
        Buckets {
            resolution: layer.resolution,
            len: layer.buckets,
        }
    }

    /// Lower bound of bucket `b` in cycles.
    pub fn lo(self, b: usize) -> f64 {
        self.resolution.range(b).0
    }

    /// Upper bound (exclusive) of bucket `b` in cycles.
    pub fn hi(self, b: usize) -> f64 {
        self.resolution.range(b).1
    }

    /// Mid-point of bucket `b` in cycles (the mean of its bounds, `3/2 · 2^b` for r = 1).
    pub fn mid(self, b: usize) -> f64 {
        self.resolution.midpoint(b)
    }
}

/// A count of cycles in at most 4 characters plus a unit: `512`, `1.0K`, `16K`, `262K`, `4.3G`
/// (decimal SI prefixes: K = 10^3, M = 10^6, G = 10^9, T, P, E).
pub fn fmt_cycles(c: f64) -> String {
    if !c.is_finite() || c < 0.0 {
        return "?".into();
    }
    if c < 1000.0 {
        return format!("{}", c.round() as u64);
    }
    const PREFIXES: [&str; 6] = ["K", "M", "G", "T", "P", "E"];
    let mut v = c;
    let mut i = 0;
    loop {
        v /= 1000.0;
        // Round first so 999.7K becomes 1.0M rather than 1000K.
        if round_sig(v) < 1000.0 || i == PREFIXES.len() - 1 {
            return format!("{}{}", fmt_sig(v), PREFIXES[i]);
        }
        i += 1;
    }
}

/// Seconds in the largest unit that keeps the number at or above 1: `0s`, `0.35ns`, `850ns`,
/// `1.2us`, `31ms`, `2.5s`, `12345s`. Two significant digits below 10, whole numbers above;
/// from 10^5 s (a day) in exponent form, `1.2e9s`, so absurd latencies stay short.
pub fn fmt_secs(s: f64) -> String {
    if !s.is_finite() || s < 0.0 {
        return "?".into();
    }
    if s == 0.0 {
        return "0s".into();
    }
    if s >= 99_999.5 {
        return format!("{s:.1e}s");
    }
    const UNITS: [(f64, &str); 4] = [(1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns")];
    for (scale, unit) in UNITS {
        let v = s / scale;
        if round_sig(v) >= 1.0 {
            return format!("{}{unit}", fmt_sig(v));
        }
    }
    format!("{:.2}ns", s * 1e9)
}

/// `v` rounded as [`fmt_sig`] prints it.
fn round_sig(v: f64) -> f64 {
    if v < 9.95 {
        (v * 10.0).round() / 10.0
    } else {
        v.round()
    }
}

/// One decimal below 10, none above: `1.2`, `9.9`, `10`, `262`.
fn fmt_sig(v: f64) -> String {
    if v < 9.95 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

/// A percentage with one decimal, `0%` for exactly zero and `<0.1%` for what would round to
/// zero: `48.0%`, `0.3%`, `100.0%`.
pub fn fmt_pct(share: f64) -> String {
    if share == 0.0 {
        "0%".into()
    } else if share < 0.0005 {
        "<0.1%".into()
    } else {
        format!("{:.1}%", share * 100.0)
    }
}

/// Percentiles ([`profile_store::views::QUANTILES`]) of `calls` calls as one line: `p50 ~171us,
/// p90 ~3.8ms, p99 ~10ms, p99.9 ~11ms, max 11ms`. The estimates are marked `~`; the maximum is
/// the slowest request recorded where `exact_max`, else at most the value shown
/// (`max <=13ms`). One call's are its latency: `one call, 438us`.
pub fn percentile_list(clock: Clock, v: &[f64; 5], exact_max: bool, calls: u128) -> String {
    if calls == 1 {
        return format!("one call, {}", clock.latency(v[4]));
    }
    let mut list: Vec<String> = profile_store::views::QUANTILES[..4]
        .iter()
        .zip(v)
        .map(|((n, _), &x)| format!("{n} ~{}", clock.latency(x)))
        .collect();
    list.push(if exact_max {
        format!("max {}", clock.latency(v[4]))
    } else {
        format!("max <={}", clock.latency(v[4]))
    });
    list.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cycles() {
        assert_eq!(fmt_cycles(0.0), "0");
        assert_eq!(fmt_cycles(512.0), "512");
        assert_eq!(fmt_cycles(999.0), "999");
        assert_eq!(fmt_cycles(1024.0), "1.0K");
        assert_eq!(fmt_cycles(16384.0), "16K");
        assert_eq!(fmt_cycles(262_144.0), "262K");
        assert_eq!(fmt_cycles(999_700.0), "1.0M");
        assert_eq!(fmt_cycles(4.3e9), "4.3G");
        assert_eq!(fmt_cycles(18_446_744_073_709_551_616.0), "18E");
    }

    #[test]
    fn seconds() {
        assert_eq!(fmt_secs(0.0), "0s");
        assert_eq!(fmt_secs(850e-9), "850ns");
        assert_eq!(fmt_secs(1.2e-6), "1.2us");
        assert_eq!(fmt_secs(0.031), "31ms");
        assert_eq!(fmt_secs(2.5), "2.5s");
        assert_eq!(fmt_secs(0.9999), "1.0s");
        assert_eq!(fmt_secs(3.5e-10), "0.35ns");
        assert_eq!(fmt_secs(12345.0), "12345s");
        assert_eq!(fmt_secs(99_999.0), "99999s");
        assert_eq!(fmt_secs(147_106.0), "1.5e5s");
        assert_eq!(fmt_secs(3.7e16), "3.7e16s");
    }

    #[test]
    fn clock() {
        let c = Clock(Some(1_000_000_000));
        assert_eq!(c.latency(1500.0), "1.5us");
        assert_eq!(Clock(None).latency(1500.0), "1.5K cyc");
        assert_eq!(fmt_pct(0.48), "48.0%");
        assert_eq!(fmt_pct(0.0), "0%");
        assert_eq!(fmt_pct(0.0001), "<0.1%");
    }
}
