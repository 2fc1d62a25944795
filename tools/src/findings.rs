//! Findings: what a person reads first about a profile, before any histogram (`fsprof profile`,
//! `fsprof report`). At most a screen:
//!
//! * the operations that hold most of the time (their share of the layer's time, calls, mean,
//!   estimated p99);
//! * for each, its peaks that hold a tenth of its time or more, with the inner call that holds
//!   most of the peak's time (as `fsprof why` finds it, from the inner-call breakdown);
//! * the slowest requests, with path, process and inner calls (the `slowest` section);
//! * the hottest files (the `hot_files` section) and the heaviest callers (the `--by` layers).
//!
//! Every number comes from the profile; estimates (percentiles, a peak's share of time, from
//! bucket mid-points) are marked `~`. Operations no caller waits for ([`crate::background`])
//! are never a finding.
//!
//! [`find`] is the library function: a profile and its slow records in, [`Findings`] out;
//! [`render`] writes them as text.

use std::fmt::Write as _;

use serde::Serialize;

use profile_store::inner::InnerCalls;
use profile_store::keyed::{self, Keyed};
use profile_store::{Layer, Profile, Resolution};

use crate::background::{Shares, is_background};
use crate::files;
use crate::hist::Histogram;
use crate::maxima::Maxima;
use crate::peaks;
use crate::slow::Record;
use crate::units::{Buckets, Clock, fmt_pct, fmt_secs};

/// How much [`find`] keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Operations listed at most. Default 4.
    pub ops: usize,
    /// Peaks listed per operation at most. Default 2.
    pub peaks: usize,
    /// Slowest requests listed. Default 5.
    pub slowest: usize,
    /// Hot files listed. Default 5.
    pub files: usize,
    /// Callers listed. Default 5.
    pub callers: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            ops: 4,
            peaks: 2,
            slowest: 5,
            files: 5,
            callers: 5,
        }
    }
}

/// An operation's share of the layer's time from which it is a finding (after the first).
const MIN_OP_SHARE: f64 = 0.05;
/// The operations listed stop once they hold this much of the time together.
const ENOUGH: f64 = 0.9;
/// A peak's share of its operation's (estimated) time from which it is listed.
const MIN_PEAK_TIME: f64 = 0.1;

/// Everything found, in the order it is shown.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Findings {
    /// The layer analysed (`fuse`, or the first one).
    pub layer: String,
    /// Its requests a caller waited for.
    pub requests: u64,
    /// Their total latency in cycles.
    pub time_cycles: u128,
    /// Clock rate, when known.
    pub cycles_per_sec: Option<u64>,
    /// The operations with most of the time, most first.
    pub ops: Vec<OpFinding>,
    /// The slowest requests, slowest first.
    pub slowest: Vec<Record>,
    /// The hottest files by total latency.
    pub files: Vec<FileFinding>,
    /// The heaviest callers (from `--by` layers), most time first.
    pub callers: Vec<CallerFinding>,
    /// What could not be found, and how to record it.
    pub missing: Vec<String>,
}

/// One operation with much of the time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OpFinding {
    /// Operation name.
    pub op: String,
    /// Share of the layer's time (background operations left out), 0..=1.
    pub share: f64,
    /// Calls.
    pub calls: u64,
    /// Mean latency in cycles (recorded total over calls).
    pub mean_cycles: f64,
    /// Estimated 99th percentile in cycles.
    pub p99_cycles: Option<f64>,
    /// Its peaks that hold much of its time, most time first.
    pub peaks: Vec<PeakFinding>,
}

/// One peak of an operation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PeakFinding {
    /// First and last bucket.
    pub lo: usize,
    /// Last bucket (inclusive).
    pub hi: usize,
    /// Lower bound of its first bucket, cycles.
    pub lo_cycles: f64,
    /// Upper bound of its last bucket, cycles.
    pub hi_cycles: f64,
    /// Calls in it.
    pub calls: u128,
    /// Its share of the operation's calls.
    pub call_share: f64,
    /// Its estimated share of the operation's time (bucket mid-points).
    pub time_share: f64,
    /// The inner call holding most of its time, when a breakdown was recorded.
    pub cause: Option<Cause>,
}

/// What holds a peak's time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cause {
    /// The inner call (`fdatasync`), or `None` when no inner call holds as much of it as the
    /// daemon's own time or waiting does.
    pub call: Option<String>,
    /// The share of the peak's (recorded) time it holds.
    pub share: f64,
    /// Lower and upper bound of the inner bucket holding most of its time, cycles.
    pub inner_cycles: Option<(f64, f64)>,
    /// The share of the peak's time all its inner calls hold together.
    pub inner_share: f64,
    /// The inner call holding the most of it, and its share, when `call` is `None`.
    pub top: Option<(String, f64)>,
}

/// A hot file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileFinding {
    /// Its path, as the daemon last knew it (`(unknown)` if never; `(deleted)` after it for a
    /// deleted file).
    pub path: String,
    /// Total latency of its requests, cycles (at most `overcount` above the truth).
    pub cycles: u64,
    /// The sketch's bound on the overcount.
    pub overcount: u64,
}

/// A caller.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallerFinding {
    /// `comm sqlite3`, `uid 1000`, `pid 42`, or `others` (beyond `--by-max`).
    pub caller: String,
    /// Its requests a caller waited for.
    pub calls: u64,
    /// Their total latency, cycles.
    pub cycles: u128,
    /// Share of all callers' time.
    pub share: f64,
}

/// The findings of profile `p`, whose slowest requests are `slow` (slowest first; those of
/// background operations are skipped).
pub fn find(p: &Profile, slow: &[Record], limits: Limits) -> Findings {
    let shares = Shares::default();
    let mut f = Findings {
        layer: String::new(),
        requests: 0,
        time_cycles: 0,
        cycles_per_sec: p.cycles_per_sec,
        ops: Vec::new(),
        slowest: slow
            .iter()
            .filter(|r| !is_background(&r.op))
            .take(limits.slowest)
            .cloned()
            .collect(),
        files: Vec::new(),
        callers: Vec::new(),
        missing: Vec::new(),
    };
    let Some(layer) = crate::levels::analysed(p) else {
        f.missing.push("the profile has no layer".into());
        return f;
    };
    f.layer = layer.name.clone();
    f.time_cycles = shares.basis(layer);
    f.requests = layer
        .ops
        .iter()
        .filter(|o| shares.counts(&o.name))
        .map(|o| o.count)
        .sum();
    let breakdown = p
        .section(profile_store::inner::SECTION)
        .and_then(|s| InnerCalls::from_section(s).ok())
        .filter(|ic| ic.layer == layer.name);
    f.ops = op_findings(layer, breakdown.as_ref(), &Maxima::of(p), limits);
    if breakdown.is_none() && !f.ops.is_empty() {
        f.missing.push(if layer.name == syscall_trace::LAYER {
            "peaks: `fsprof why PROFILE OP` sets each against the block level (record it with \
             --kernel)"
                .into()
        } else {
            "no inner-call breakdown: peaks unexplained (record with --breakdown)".into()
        });
    }
    if crate::input::section_for(p, crate::slow::SLOWEST_SECTION, &layer.name).is_none()
        && slow.is_empty()
    {
        f.missing
            .push("no slowest requests (record them with --slowest)".into());
    }
    match crate::input::section_for(p, files::SECTION, &layer.name).map(files::entries) {
        Some(Ok(entries)) => {
            f.files = entries
                .into_iter()
                .filter(|e| e.by == "latency")
                .take(limits.files)
                .map(|e| FileFinding {
                    path: e.shown(),
                    cycles: e.value,
                    overcount: e.error,
                })
                .collect();
        }
        Some(Err(e)) => f.missing.push(format!("hot files unreadable: {e}")),
        None => f
            .missing
            .push("no hot files (record them with --hot-files)".into()),
    }
    f.callers = callers(p, &layer.name, limits.callers);
    f
}

/// The operations with most of `layer`'s time, and their heavy peaks.
fn op_findings(
    layer: &Layer,
    breakdown: Option<&InnerCalls>,
    maxima: &Maxima,
    limits: Limits,
) -> Vec<OpFinding> {
    let shares = Shares::default();
    let mut ops: Vec<&profile_store::OpProfile> = layer
        .ops
        .iter()
        .filter(|o| shares.counts(&o.name) && o.count > 0)
        .collect();
    crate::input::sort_by_latency(&mut ops);
    let geo = Buckets::of(layer);
    let mut out = Vec::new();
    let mut held = 0.0;
    for o in ops {
        let share = shares.of(layer, o).unwrap_or(0.0);
        if out.len() >= limits.ops || (!out.is_empty() && (share < MIN_OP_SHARE || held >= ENOUGH))
        {
            break;
        }
        held += share;
        let h = Histogram::of(o, geo);
        let est = h.estimated_latency();
        let mut pk: Vec<PeakFinding> = peaks::of(&h)
            .into_iter()
            .map(|pk| {
                let time = h.latency_in(pk.lo, pk.hi);
                PeakFinding {
                    lo: pk.lo,
                    hi: pk.hi,
                    lo_cycles: geo.lo(pk.lo),
                    hi_cycles: geo.hi(pk.hi),
                    calls: pk.calls,
                    call_share: pk.share,
                    time_share: if est > 0.0 { time / est } else { 0.0 },
                    cause: breakdown.and_then(|ic| cause(ic, &o.name, pk.lo, pk.hi)),
                }
            })
            .filter(|pk| pk.time_share >= MIN_PEAK_TIME)
            .collect();
        pk.sort_by(|a, b| b.time_share.total_cmp(&a.time_share));
        pk.truncate(limits.peaks);
        out.push(OpFinding {
            op: o.name.clone(),
            share,
            calls: o.count,
            mean_cycles: o.mean(),
            p99_cycles: maxima.percentiles(layer, o).map(|p| p[2]),
            peaks: pk,
        });
    }
    out
}

/// What holds the time of `op`'s requests in buckets `lo..=hi`; `None` when the breakdown has
/// none of them.
fn cause(ic: &InnerCalls, op: &str, lo: usize, hi: usize) -> Option<Cause> {
    let e = ic.explain(op, lo, hi + 1);
    if e.count == 0 || e.cycles == 0 {
        return None;
    }
    let top = e.calls.iter().find(|c| c.name != "other");
    let unexplained = (e.unexplained as f64 / e.cycles as f64).clamp(0.0, 1.0);
    let inner_share = 1.0 - unexplained;
    Some(match top {
        Some(c) if c.share >= unexplained => {
            let (lo, hi) = Resolution::ONE.range(c.peak_bucket);
            Cause {
                call: Some(c.name.clone()),
                share: c.share,
                inner_cycles: Some((lo, hi)),
                inner_share,
                top: None,
            }
        }
        _ => Cause {
            call: None,
            share: unexplained,
            inner_cycles: None,
            inner_share,
            top: top.map(|c| (c.name.clone(), c.share)),
        },
    })
}

/// The callers of the `--by` layers of `base`, most time first.
fn callers(p: &Profile, base: &str, n: usize) -> Vec<CallerFinding> {
    let shares = Shares::default();
    let mut out: Vec<CallerFinding> = p
        .layers
        .iter()
        .filter_map(|l| {
            let caller = match keyed::parse(&l.name)? {
                Keyed::Key {
                    base: b,
                    key,
                    value,
                } if b == base => {
                    format!("{key} {}", profile_store::name::json(&value))
                }
                Keyed::Other { base: b } if b == base => "others".to_string(),
                _ => return None,
            };
            Some(CallerFinding {
                caller,
                calls: l
                    .ops
                    .iter()
                    .filter(|o| shares.counts(&o.name))
                    .map(|o| o.count)
                    .sum(),
                cycles: shares.basis(l),
                share: 0.0,
            })
        })
        .filter(|c| c.calls > 0)
        .collect();
    let all: u128 = out.iter().map(|c| c.cycles).sum();
    for c in &mut out {
        c.share = if all == 0 {
            0.0
        } else {
            c.cycles as f64 / all as f64
        };
    }
    out.sort_by(|a, b| b.cycles.cmp(&a.cycles).then(a.caller.cmp(&b.caller)));
    out.truncate(n);
    out
}

fn range(clock: Clock, lo: f64, hi: f64) -> String {
    format!("{}-{}", clock.latency(lo), clock.latency(hi))
}

/// One slow request as a line: latency, operation, path, process, the slowest inner calls.
pub fn slow_line(r: &Record) -> String {
    use crate::error::printable;
    use profile_store::name::shown;
    let mut inner: Vec<&crate::slow::Inner> = r.inner.iter().collect();
    inner.sort_by_key(|c| std::cmp::Reverse(c.latency_ns));
    let calls: Vec<String> = inner
        .iter()
        .take(2)
        .map(|c| {
            format!(
                "{} {}",
                printable(&c.call),
                fmt_secs(c.latency_ns as f64 / 1e9)
            )
        })
        .collect();
    format!(
        "{:>8} {} {} by {} (pid {}){}",
        fmt_secs(r.latency_ns as f64 / 1e9),
        printable(&r.op),
        r.path
            .as_deref()
            .map_or_else(|| "(unknown path)".into(), shown),
        r.comm.as_deref().map_or_else(|| "?".into(), shown),
        crate::slow::unknown(r.pid),
        if calls.is_empty() {
            String::new()
        } else {
            format!(": {}", calls.join(", "))
        }
    )
}

/// The findings as text, at most about a screen.
pub fn render(f: &Findings) -> String {
    let clock = Clock(f.cycles_per_sec);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Findings, layer {} ({} requests a caller waited for, {} in all; ~ marks an estimate):",
        f.layer,
        f.requests,
        clock.latency(f.time_cycles as f64)
    );
    for o in &f.ops {
        let _ = writeln!(
            out,
            "  {} holds {} of the time: {} call{}, mean {}{}",
            o.op,
            fmt_pct(o.share),
            o.calls,
            if o.calls == 1 { "" } else { "s" },
            clock.latency(o.mean_cycles),
            o.p99_cycles
                .map(|p| format!(", p99 ~{}", clock.latency(p)))
                .unwrap_or_default()
        );
        for pk in &o.peaks {
            let why = match &pk.cause {
                None => String::new(),
                Some(Cause {
                    call: Some(c),
                    share,
                    inner_cycles,
                    ..
                }) => format!(
                    "; {c} holds {} of it{}",
                    fmt_pct(*share),
                    inner_cycles
                        .map(|(lo, hi)| format!(" (its calls of {})", range(clock, lo, hi)))
                        .unwrap_or_default()
                ),
                Some(Cause {
                    share,
                    top: Some((c, top)),
                    inner_share,
                    ..
                }) => format!(
                    "; the daemon's own time or waiting holds {} of it, its inner calls {} \
                     (the most, {c}: {})",
                    fmt_pct(*share),
                    fmt_pct(*inner_share),
                    fmt_pct(*top)
                ),
                Some(Cause { share, .. }) => format!(
                    "; no inner call: {} of it is the daemon's own time or waiting",
                    fmt_pct(*share)
                ),
            };
            let _ = writeln!(
                out,
                "    peak {}: {} of its calls, ~{} of its time{why}",
                range(clock, pk.lo_cycles, pk.hi_cycles),
                fmt_pct(pk.call_share),
                fmt_pct(pk.time_share),
            );
        }
    }
    if !f.slowest.is_empty() {
        let _ = writeln!(out, "  slowest requests:");
        for r in &f.slowest {
            let _ = writeln!(out, "  {}", slow_line(r));
        }
    }
    if !f.files.is_empty() {
        let list: Vec<String> = f
            .files
            .iter()
            .map(|h| {
                format!(
                    "{} {}",
                    profile_store::name::shown(&h.path),
                    files::shown_value(h.cycles, h.overcount, |v| clock.latency(v as f64))
                )
            })
            .collect();
        let _ = writeln!(out, "  hottest files (time): {}", list.join(", "));
        if f.files
            .iter()
            .any(|h| files::is_bound(h.cycles, h.overcount))
        {
            let _ = writeln!(out, "    {}", files::BOUND_NOTE);
        }
    }
    if !f.callers.is_empty() {
        let list: Vec<String> = f
            .callers
            .iter()
            .map(|c| {
                format!(
                    "{} {}",
                    profile_store::name::shown(&c.caller),
                    fmt_pct(c.share)
                )
            })
            .collect();
        let _ = writeln!(out, "  heaviest callers (time): {}", list.join(", "));
    }
    for m in &f.missing {
        let _ = writeln!(out, "  ({m})");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use profile_store::{OpProfile, Section};

    /// A layer `fuse` of OP_FSYNC (two peaks: 100 calls near 2^12 cycles, 20 near 2^22),
    /// OP_WRITE (1000 calls near 2^11) and a heavy OP_FORGET, clock 1 GHz.
    fn profile() -> Profile {
        let mut p = Profile {
            cycles_per_sec: Some(1_000_000_000),
            ..Profile::default()
        };
        let mut l = Layer::new("fuse", Resolution::ONE);
        let mut op = |name: &str, buckets: &[(usize, u64)]| {
            let mut o = OpProfile::new(name, 64, 1);
            for &(b, n) in buckets {
                o.epochs[0][b] = n;
                o.count += n;
                o.total += n * (3 << b) / 2;
            }
            l.ops.push(o);
        };
        op("OP_FSYNC", &[(12, 100), (22, 20)]);
        op("OP_WRITE", &[(11, 1000)]);
        op("OP_FORGET", &[(30, 50)]);
        p.layers.push(l);
        for (who, total) in [("sqlite3", 900u64), ("sh", 100)] {
            let mut k = Layer::new(keyed::name("fuse", "comm", who.as_bytes()), Resolution::ONE);
            let mut o = OpProfile::new("OP_FSYNC", 64, 1);
            o.count = 1;
            o.total = total;
            o.epochs[0][10] = 1;
            k.ops.push(o);
            p.layers.push(k);
        }
        p
    }

    fn breakdown() -> Section {
        let mut s = Section::new(profile_store::inner::SECTION);
        s.attrs = vec![
            ("layer".into(), "fuse".into()),
            ("resolution".into(), "1".into()),
        ];
        s.lines = vec![
            "OP_FSYNC 22 count=20 cycles=125829120 other_cycles=0".into(),
            "OP_FSYNC 22 call=fdatasync count=20 cycles=120000000 buckets=21:2,22:18".into(),
            "OP_FSYNC 12 count=100 cycles=614400 other_cycles=0".into(),
        ];
        s
    }

    fn record(op: &str, ns: u64, path: &str) -> Record {
        serde_json::from_value(serde_json::json!({
            "seq": 1, "time_unix_ns": 0, "op": op, "latency_ns": ns, "errno": 0,
            "path": path, "pid": 7, "comm": "sqlite3", "uid": 0, "offset": null, "size": null,
            "inner": [{"call": "fdatasync", "latency_ns": ns - 1000}]
        }))
        .unwrap()
    }

    #[test]
    fn the_heavy_operation_its_peak_and_its_cause_are_found() {
        let mut p = profile();
        p.sections.push(breakdown());
        let slow = [
            record("OP_FORGET", 9_000_000, "/x"),
            record("OP_FSYNC", 8_000_000, "/db-journal"),
        ];
        let f = find(&p, &slow, Limits::default());
        assert_eq!(f.layer, "fuse");
        // FORGET is left out everywhere: of the time, of the operations, of the slowest.
        assert_eq!(f.requests, 1120);
        assert_eq!(f.ops[0].op, "OP_FSYNC");
        assert!(f.ops.iter().all(|o| o.op != "OP_FORGET"));
        assert_eq!(f.slowest.len(), 1);
        assert_eq!(f.slowest[0].path.as_deref(), Some("/db-journal"));
        // FSYNC: 100 · 6144 + 20 · 6291456 cycles against WRITE's 1000 · 3072.
        let fs = &f.ops[0];
        assert!((fs.share - 126_443_520.0 / 129_515_520.0).abs() < 1e-9);
        // Its slow peak holds ~99.5% of its time; the fast one under a tenth is not listed.
        assert_eq!(fs.peaks.len(), 1);
        assert_eq!((fs.peaks[0].lo, fs.peaks[0].hi), (22, 22));
        let c = fs.peaks[0].cause.as_ref().unwrap();
        assert_eq!(c.call.as_deref(), Some("fdatasync"));
        assert_eq!(c.inner_cycles, Some((4_194_304.0, 8_388_608.0)));
        // WRITE holds 2.4%, under the 5% a second operation needs.
        assert_eq!(f.ops.len(), 1);
        assert_eq!(f.callers[0].caller, "comm sqlite3");
        assert!((f.callers[0].share - 0.9).abs() < 1e-9);
        let text = render(&f);
        assert!(text.contains("OP_FSYNC holds 97.6% of the time"), "{text}");
        assert!(text.contains("fdatasync holds 95.4% of it"), "{text}");
        assert!(text.contains("p99 ~"), "{text}");
        assert!(text.contains("/db-journal by sqlite3"), "{text}");
        assert!(text.contains("no hot files"), "{text}");
        assert!(text.lines().count() <= 24, "{text}");
    }

    #[test]
    fn without_records_the_findings_say_what_is_missing() {
        let f = find(&profile(), &[], Limits::default());
        assert_eq!(f.ops[0].peaks[0].cause, None);
        let text = render(&f);
        assert!(text.contains("--breakdown"), "{text}");
        assert!(text.contains("--slowest"), "{text}");
        // An empty profile has nothing to find, and says so.
        let f = find(&Profile::default(), &[], Limits::default());
        assert!(f.ops.is_empty());
        assert!(render(&f).contains("no layer"));
    }

    #[test]
    fn a_peak_without_an_inner_call_is_the_daemons_own_time() {
        let mut p = profile();
        let mut s = breakdown();
        s.lines = vec!["OP_FSYNC 22 count=20 cycles=125829120 other_cycles=0".into()];
        p.sections.push(s);
        let f = find(&p, &[], Limits::default());
        let c = f.ops[0].peaks[0].cause.as_ref().unwrap();
        assert_eq!((c.call.clone(), c.share), (None, 1.0));
        assert!(render(&f).contains("daemon's own time"));
    }
}
