//! `fsprof why` where no inner-call breakdown applies (the syscall level, a profile made
//! without a mount, a mount recorded without `--breakdown`): each peak of the operation is set
//! against the block level (`--kernel`), the device's requests of the operation's kind
//! (`fsprof stack`'s rule: reads against `BLK_READ*`, writes against `BLK_WRITE*`, syncs
//! against writes and flushes).
//!
//! A peak faster than every such request of every device was served without the devices: from
//! the kernel's caches (the page cache, the dentry and inode caches). A peak whose range holds
//! a peak of the device's requests can be the device's time; the device's peaks inside or
//! below it are listed, with their requests and mean. A block level counts every request of its
//! device, whoever made it: the comparison is of distributions, not of calls.

use std::fmt::Write as _;

use serde::Serialize;

use profile_store::{Layer, OpProfile, keyed, views};

use crate::error::Error;
use crate::hist::Histogram;
use crate::input::Loaded;
use crate::peaks;
use crate::summary::TableFormat;
use crate::units::{Buckets, Clock};

#[derive(Serialize)]
struct DevicePeak {
    layer: String,
    requests: u128,
    mean_cycles: f64,
    lo_cycles: f64,
    hi_cycles: f64,
}

#[derive(Serialize)]
struct PeakOut {
    peak: usize,
    lo: usize,
    hi: usize,
    calls: u128,
    cycles: f64,
    /// `cache`: faster than every request of the devices; `device`: device peaks lie within
    /// it; `unexplained`: neither.
    verdict: &'static str,
    device_peaks: Vec<DevicePeak>,
}

/// The layer holding `op` that the peaks are taken of: `fuse` for a FUSE operation, the
/// syscall level for a system call, else the first that has it.
fn layer_of<'p>(p: &'p profile_store::Profile, op: &str) -> Option<&'p Layer> {
    let first = if op.starts_with("OP_") {
        "fuse"
    } else {
        syscall_trace::LAYER
    };
    p.layer(first)
        .filter(|l| l.op(op).is_some())
        .or_else(|| p.layers.iter().find(|l| l.op(op).is_some()))
}

/// The block layers' requests of `op`'s kind, one record per device.
fn device_requests<'p>(p: &'p profile_store::Profile, op: &str) -> Vec<(&'p Layer, OpProfile)> {
    let kinds = crate::stack::block_kinds(op);
    p.layers
        .iter()
        .filter(|l| {
            matches!(
                keyed::parse(&l.name),
                Some(keyed::Keyed::Key { base: "block", .. })
            )
        })
        .map(|l| {
            let mut sum = OpProfile::new(op, l.buckets, 1);
            for o in l.ops.iter().filter(|o| {
                let base = o.name.strip_prefix("BLK_").unwrap_or(&o.name);
                let base = base.strip_suffix("_META").unwrap_or(base);
                let base = base.strip_suffix("_SYNC").unwrap_or(base);
                kinds.is_empty() || kinds.contains(&base)
            }) {
                sum.count += o.count;
                sum.total += o.total;
                for (d, s) in sum.epochs[0].iter_mut().zip(o.merged()) {
                    *d += s;
                }
            }
            (l, sum)
        })
        .filter(|(_, o)| o.count > 0)
        .collect()
}

/// What `fsprof why` asks (its options, as [`crate::why::WhyConfig`] holds them).
#[derive(Debug, Clone, Copy)]
pub struct Ask<'a> {
    /// The operation.
    pub op: &'a str,
    /// Only this peak.
    pub peak: Option<usize>,
    /// Minimum prominence of a peak.
    pub prominence: f64,
    /// Text or JSON.
    pub format: TableFormat,
}

/// Runs `fsprof why` against the block level.
pub fn run(p: &Loaded, c: &Ask<'_>, out: &mut String) -> Result<(), Error> {
    let layer = layer_of(&p.profile, c.op)
        .ok_or_else(|| Error::usage(c.op, format!("{}: no layer has this operation", p.name)))?;
    let devices = device_requests(&p.profile, c.op);
    if devices.is_empty() {
        return Err(Error::input(
            &p.name,
            format!(
                "{} in layer {}: no inner-call breakdown (mount with --breakdown) and no block \
                 level with requests of its kind (record one with --kernel) to explain it",
                c.op, layer.name
            ),
        ));
    }
    let op = layer.op(c.op).expect("the layer has it");
    let geo = Buckets::of(layer);
    let found = peaks::find(&Histogram::of(op, geo), c.prominence);
    let mut outs = Vec::new();
    for (i, pk) in found.iter().enumerate() {
        if c.peak.is_some_and(|n| n != i + 1) {
            continue;
        }
        let (lo, hi) = (geo.lo(pk.lo), geo.hi(pk.hi));
        let mut device_peaks = Vec::new();
        let mut fastest = f64::INFINITY;
        for (l, o) in &devices {
            let dg = Buckets::of(l);
            if let Some(b) = o.merged().iter().position(|&n| n > 0) {
                fastest = fastest.min(dg.lo(b));
            }
            let dp = peaks::find(&Histogram::of(o, dg), c.prominence);
            for d in dp
                .iter()
                .filter(|d| dg.lo(d.lo) < hi && dg.hi(d.hi) > lo * 0.5)
            {
                device_peaks.push(DevicePeak {
                    layer: l.name.clone(),
                    requests: d.calls,
                    mean_cycles: d.mean_cycles,
                    lo_cycles: dg.lo(d.lo),
                    hi_cycles: dg.hi(d.hi),
                });
            }
        }
        let verdict = if hi <= fastest {
            "cache"
        } else if device_peaks.is_empty() {
            "unexplained"
        } else {
            "device"
        };
        outs.push(PeakOut {
            peak: i + 1,
            lo: pk.lo,
            hi: pk.hi,
            calls: pk.calls,
            cycles: pk.mean_cycles * pk.calls as f64,
            verdict,
            device_peaks,
        });
    }
    let clock = p.clock();
    match c.format {
        TableFormat::Json => {
            let doc = serde_json::json!({
                "layer": layer.name,
                "op": c.op,
                "against": "block",
                "cycles_per_sec": clock.0,
                "peaks": outs,
            });
            out.push_str(&serde_json::to_string_pretty(&doc).expect("why serializes"));
            out.push('\n');
        }
        _ => text(layer, op, c, clock, found.len(), &outs, out),
    }
    Ok(())
}

fn text(
    layer: &Layer,
    op: &OpProfile,
    c: &Ask<'_>,
    clock: Clock,
    peaks: usize,
    outs: &[PeakOut],
    out: &mut String,
) {
    let _ = write!(out, "{} in layer {}: {peaks} peak(s)", c.op, layer.name);
    if let Some(v) = views::percentiles(op, layer.resolution) {
        let list: Vec<String> = views::QUANTILES
            .iter()
            .zip(v)
            .map(|((n, _), x)| format!("{n} {}", clock.latency(x)))
            .collect();
        let _ = write!(out, "; estimated {}", list.join(", "));
    }
    let _ = writeln!(
        out,
        "\n(no inner-call breakdown: each peak against the block level's requests of its kind)"
    );
    let geo = Buckets::of(layer);
    for o in outs {
        let _ = writeln!(
            out,
            "\npeak {}: buckets {}-{} ({}-{}), {} call(s), ~{} in all",
            o.peak,
            o.lo,
            o.hi,
            clock.latency(geo.lo(o.lo)),
            clock.latency(geo.hi(o.hi)),
            o.calls,
            clock.latency(o.cycles)
        );
        match o.verdict {
            "cache" => {
                let _ = writeln!(
                    out,
                    "  faster than every request of the devices: served from the kernel's caches"
                );
            }
            "unexplained" => {
                let _ = writeln!(
                    out,
                    "  no device peak within it: not the devices' time (locks, waits, CPU)"
                );
            }
            _ => {
                for d in &o.device_peaks {
                    let _ = writeln!(
                        out,
                        "  {}: {} request(s), mean {}, in {}-{}: the device's time lies within",
                        d.layer,
                        d.requests,
                        clock.latency(d.mean_cycles),
                        clock.latency(d.lo_cycles),
                        clock.latency(d.hi_cycles)
                    );
                }
            }
        }
    }
    let _ = writeln!(
        out,
        "\n  a block level counts every request of its device, not only these calls'"
    );
}
