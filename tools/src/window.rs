//! A time window of a time-lapse layer (`--from`, `--to`) and the trimming of its idle epochs
//! at both ends (`--trim`), for `show` and `plot`: a profile that kept two minutes of idle
//! time around two seconds of work shows the work, not the idle rows.
//!
//! Epoch `e` covers `[e·L, (e+1)·L)` of the layer's epoch length `L`; an epoch is kept when
//! its start lies in `[from, to)`. The windowed layer keeps the index of its first epoch in the
//! extra key [`FIRST_EPOCH`], so rows and labels still show times since the profile's start.
//! Cutting epochs that hold calls changes what the operations' totals cover: their counts
//! become the calls finished in the window, and their total latencies are estimated from bucket
//! mid-points (a total is recorded for all epochs together, not per epoch).

use profile_store::Layer;
use profile_store::duration::Span;

use crate::error::Error;
use crate::units::Clock;

/// The extra layer key that holds the index of a windowed layer's first epoch.
pub const FIRST_EPOCH: &str = "first_epoch";

/// `--from`, `--to` and `--trim`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Window {
    /// Keep epochs starting at or after this time since the start.
    pub from: Option<Span>,
    /// Keep epochs starting before this time since the start.
    pub to: Option<Span>,
    /// Drop epochs with no finished call at both ends.
    pub trim: bool,
}

impl Window {
    /// Whether the window changes nothing.
    pub fn is_whole(&self) -> bool {
        self.from.is_none() && self.to.is_none() && !self.trim
    }
}

/// The index of `layer`'s first epoch in the profile it was cut from (0 when it was not).
pub fn first_epoch(layer: &Layer) -> usize {
    layer
        .extra
        .iter()
        .find(|(k, _)| k == FIRST_EPOCH)
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}

fn cycles(span: Span, clock: Clock, flag: &str) -> Result<f64, Error> {
    match span {
        Span::Cycles(c) => Ok(c as f64),
        Span::Time(d) => match clock.0 {
            Some(hz) => Ok(d.as_secs_f64() * hz as f64),
            None => Err(Error::usage(
                flag,
                "a time needs the clock rate (--cycles-per-sec), or give cycles: 2^32c",
            )),
        },
    }
}

/// `layer` cut to `w`.
pub fn apply(layer: &Layer, clock: Clock, w: &Window) -> Result<Layer, Error> {
    if w.is_whole() {
        return Ok(layer.clone());
    }
    if (w.from.is_some() || w.to.is_some()) && layer.epoch_cycles == 0 {
        return Err(Error::usage(
            "--from/--to",
            format!(
                "layer {} is not a time-lapse profile (one epoch): record it with --epoch",
                layer.name
            ),
        ));
    }
    let len = layer.epoch_cycles as f64;
    let from = w.from.map(|s| cycles(s, clock, "--from")).transpose()?;
    let to = w.to.map(|s| cycles(s, clock, "--to")).transpose()?;
    let offset = first_epoch(layer);
    let start = |e: usize| (e + offset) as f64 * len;
    let mut keep: Vec<usize> = (0..layer.epochs)
        .filter(|&e| from.is_none_or(|f| start(e) >= f) && to.is_none_or(|t| start(e) < t))
        .collect();
    if w.trim {
        let busy = |e: &usize| {
            layer
                .ops
                .iter()
                .any(|o| o.epochs.get(*e).is_some_and(|v| v.iter().any(|&c| c != 0)))
        };
        let lo = keep.iter().position(busy);
        let hi = keep.iter().rposition(busy);
        keep = match (lo, hi) {
            (Some(lo), Some(hi)) => keep[lo..=hi].to_vec(),
            _ => Vec::new(),
        };
    }
    let Some(&first) = keep.first() else {
        return Err(Error::usage(
            "--from/--to/--trim",
            format!("no epoch of layer {} is left", layer.name),
        ));
    };
    let geo = crate::units::Buckets::of(layer);
    let mut out = layer.clone();
    out.epochs = keep.len();
    out.extra.retain(|(k, _)| k != FIRST_EPOCH);
    out.extra
        .push((FIRST_EPOCH.to_string(), (first + offset).to_string()));
    for op in &mut out.ops {
        let cut: u128 = (0..layer.epochs)
            .filter(|e| !keep.contains(e))
            .flat_map(|e| op.epochs[e].iter())
            .map(|&c| c as u128)
            .sum();
        op.epochs = keep.iter().map(|&e| op.epochs[e].clone()).collect();
        if cut > 0 {
            let h = crate::hist::Histogram::of(op, geo);
            op.count = u64::try_from(h.total()).unwrap_or(u64::MAX);
            op.total = h.estimated_latency().min(u64::MAX as f64) as u64;
        }
    }
    out.ops
        .retain(|o| o.epochs.iter().flatten().any(|&c| c != 0) || o.count > 0);
    Ok(out)
}
