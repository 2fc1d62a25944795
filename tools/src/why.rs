//! `fsprof why MNT|PROFILE OP [--peak N]`: the root cause of each peak of an operation (DARC
//! for layers), from the inner-call breakdown the mount records with `--breakdown`
//! ([`profile_store::inner`]).
//!
//! For each peak of OP in the `fuse` layer (found by [`peaks::of`], as `fsprof peaks`, the
//! findings, `fsprof stack` and the report find them: the same peaks, the same calls), one line
//! per inner call its requests made: the call, the share of the peak's time it accounts for, and
//! the inner latency peak it came from (the inner bucket holding most of those calls' time, not
//! most of the calls); then a last line with the time no inner call explains (the daemon's own
//! work, an injected `op` delay, or waiting to be served).

use std::fmt::Write as _;

use serde::Serialize;

use profile_store::inner::{self, InnerCalls};
use profile_store::{Resolution, views};

use crate::error::Error;
use crate::hist::Histogram;
use crate::input::{self, Loaded};
use crate::peaks;
use crate::summary::TableFormat;
use crate::table::Table;
use crate::units::{Buckets, Clock, fmt_pct};

/// `fsprof why`.
#[derive(Debug, Clone, PartialEq)]
pub struct WhyConfig {
    /// The profile or mount.
    pub input: String,
    /// The operation (`OP_READ`; normalized).
    pub op: String,
    /// Only this peak (from 1, slowest last, as `fsprof peaks` numbers them).
    pub peak: Option<usize>,
    /// Minimum prominence of a peak, in log2 units. Default 1.
    pub prominence: f64,
    /// Output format (text or JSON).
    pub format: TableFormat,
}

#[derive(Serialize)]
struct CallOut {
    call: String,
    calls: u64,
    cycles: u64,
    share: f64,
    inner_peak_bucket: usize,
}

#[derive(Serialize)]
struct PeakOut {
    peak: usize,
    lo: usize,
    hi: usize,
    top: usize,
    /// The peak's calls in the histogram (as `fsprof peaks` counts them).
    requests: u128,
    /// Those the breakdown holds (all of them, but for a profile whose breakdown was recorded
    /// apart from its histogram, or calls in flight).
    broken_down: u64,
    cycles: u64,
    calls: Vec<CallOut>,
    unexplained_cycles: u64,
    unexplained_share: f64,
}

fn range(clock: Clock, r: Resolution, b: usize) -> String {
    let (lo, hi) = r.range(b);
    format!("{}-{}", clock.latency(lo), clock.latency(hi))
}

/// Runs `fsprof why` on a loaded profile.
pub fn run(p: &Loaded, c: &WhyConfig, out: &mut String) -> Result<(), Error> {
    let ic = match p.profile.section(inner::SECTION) {
        Some(s) => Some(InnerCalls::from_section(s).map_err(|e| Error::input(&p.name, e))?),
        None => None,
    };
    // Without a breakdown of the operation's layer (the syscall level, a profile made
    // without a mount): each peak against the block level.
    let ic = match ic {
        Some(ic)
            if p.profile
                .layer(&ic.layer)
                .is_some_and(|l| l.op(&c.op).is_some()) =>
        {
            ic
        }
        _ => {
            let ask = crate::why_block::Ask {
                op: &c.op,
                peak: c.peak,
                prominence: c.prominence,
                format: c.format,
            };
            return crate::why_block::run(p, &ask, out);
        }
    };
    let layer = p.layer(Some(&ic.layer))?;
    let op = layer.op(&c.op).ok_or_else(|| {
        Error::usage(
            &c.op,
            format!("{}: no such operation in layer {}", p.name, layer.name),
        )
    })?;
    let clock = p.clock();
    let geo = Buckets::of(layer);
    let h = Histogram::of(op, geo);
    let found = peaks::find(&h, c.prominence);
    let maxima = crate::maxima::Maxima::of(&p.profile);
    if let Some(n) = c.peak {
        if n == 0 || n > found.len() {
            return Err(Error::usage(
                "--peak",
                format!(
                    "{} has {} peak(s); give 1 to {}",
                    c.op,
                    found.len(),
                    found.len()
                ),
            ));
        }
    }
    let mut outs = Vec::new();
    for (i, pk) in found.iter().enumerate() {
        if c.peak.is_some_and(|n| n != i + 1) {
            continue;
        }
        let e = ic.explain(&c.op, pk.lo, pk.hi + 1);
        outs.push(PeakOut {
            peak: i + 1,
            lo: pk.lo,
            hi: pk.hi,
            top: pk.mode,
            requests: pk.calls,
            broken_down: e.count,
            cycles: e.cycles,
            calls: e
                .calls
                .iter()
                .map(|s| CallOut {
                    call: s.name.clone(),
                    calls: s.count,
                    cycles: s.cycles,
                    share: s.share,
                    inner_peak_bucket: s.peak_bucket,
                })
                .collect(),
            unexplained_cycles: e.unexplained,
            unexplained_share: if e.cycles == 0 {
                0.0
            } else {
                e.unexplained as f64 / e.cycles as f64
            },
        });
    }
    let pct = Pct {
        values: maxima.percentiles(layer, op),
        exact_max: maxima.is_exact(layer, op),
        calls: h.total(),
    };
    match c.format {
        TableFormat::Json => json(&layer.name, c, clock, &pct, &outs, out),
        _ => text(&layer.name, c, clock, geo, &pct, found.len(), &outs, out),
    }
    Ok(())
}

/// An operation's percentiles and whether their maximum is the recorded one.
struct Pct {
    values: Option<[f64; 5]>,
    exact_max: bool,
    calls: u128,
}

fn json(layer: &str, c: &WhyConfig, clock: Clock, pct: &Pct, outs: &[PeakOut], out: &mut String) {
    #[derive(Serialize)]
    struct Doc<'a> {
        layer: &'a str,
        op: &'a str,
        cycles_per_sec: Option<u64>,
        percentiles_estimated: Vec<(&'static str, f64)>,
        max_recorded: bool,
        peaks: &'a [PeakOut],
    }
    let doc = Doc {
        layer,
        op: &c.op,
        cycles_per_sec: clock.0,
        percentiles_estimated: pct
            .values
            .map(|v| views::QUANTILES.iter().map(|q| q.0).zip(v).collect())
            .unwrap_or_default(),
        max_recorded: pct.exact_max,
        peaks: outs,
    };
    out.push_str(&serde_json::to_string_pretty(&doc).expect("why serializes"));
    out.push('\n');
}

#[allow(clippy::too_many_arguments)]
fn text(
    layer: &str,
    c: &WhyConfig,
    clock: Clock,
    geo: Buckets,
    pct: &Pct,
    peaks: usize,
    outs: &[PeakOut],
    out: &mut String,
) {
    let _ = write!(out, "{} in layer {layer}: {peaks} peak(s)", c.op);
    if let Some(v) = pct.values {
        let list = crate::units::percentile_list(clock, &v, pct.exact_max, pct.calls);
        let _ = write!(out, "; {list}");
    }
    out.push('\n');
    for o in outs {
        let _ = writeln!(
            out,
            "\npeak {}: buckets {}-{} ({}-{}), {} request{}, {} in all",
            o.peak,
            o.lo,
            o.hi,
            clock.latency(geo.lo(o.lo)),
            clock.latency(geo.hi(o.hi)),
            o.requests,
            if o.requests == 1 { "" } else { "s" },
            clock.latency(o.cycles as f64)
        );
        if o.broken_down == 0 {
            let _ = writeln!(out, "  (no breakdown recorded for these requests)");
            continue;
        }
        if o.broken_down as u128 != o.requests {
            let _ = writeln!(
                out,
                "  ({} of them in the breakdown, recorded apart from the histogram)",
                o.broken_down
            );
        }
        let mut t = Table::new(&["inner call", "share", "calls", "time", "inner peak"]);
        for s in &o.calls {
            t.row(vec![
                s.call.clone(),
                fmt_pct(s.share),
                s.calls.to_string(),
                clock.latency(s.cycles as f64),
                if s.call == "other" {
                    "-".into()
                } else {
                    format!(
                        "bucket {} ({})",
                        s.inner_peak_bucket,
                        range(clock, Resolution::ONE, s.inner_peak_bucket)
                    )
                },
            ]);
        }
        t.row(vec![
            "(unexplained)".into(),
            fmt_pct(o.unexplained_share),
            "-".into(),
            clock.latency(o.unexplained_cycles as f64),
            "daemon's own time or waiting".into(),
        ]);
        t.render(2, out);
    }
    let _ = writeln!(
        out,
        "\n  ~: estimated, by geometric interpolation within a bucket{}",
        if pct.exact_max {
            "; max: the slowest request recorded"
        } else {
            "; max: at most, from the buckets and the recorded total"
        }
    );
}

/// The operation name as given on the command line, normalized (`read` → `OP_READ`).
pub fn op_arg(s: &str) -> String {
    input::op_name(s)
}
