//! Summing profiles, e.g. of many machines (`fsprof merge`).
//!
//! Layers of the same name are summed operation by operation and bucket by bucket; a layer or an
//! operation that only some profiles have is taken as it is. Layers of one name must have the
//! same resolution.
//!
//! * **Clocks.** Every profile's latencies are put in the first profile's cycles. Profiles with
//!   the same clock rate (within [`SAME_RATE`]: one rate calibrated twice; or none recorded
//!   anywhere) are summed exactly. Another rate is
//!   converted: totals are scaled by the ratio of the rates, and each bucket's calls move to the
//!   bucket that holds its range's geometric middle after scaling. When the ratio is a power of
//!   two `2^(k/r)` this is exact (a shift by `k` buckets); otherwise a call may land one bucket
//!   away from where the other clock would have put it, i.e. its latency is known within a
//!   factor of `2^(1/r)` more than before ([`Merged::converted`] says which profiles).
//! * **Epochs.** Time-lapse layers of the same epoch length are summed epoch by epoch (epoch `e`
//!   of each profile counted from its own start); otherwise their epochs are folded into one.
//! * **The rest.** The start time is the earliest; global and layer keys are kept where every
//!   profile has the same value; the `errors` sections are summed, and other sections
//!   (per-machine data such as hot files) left out; the
//!   global key `merged` counts the profiles summed (a merged input counts as its own `merged`).
//!
//! For profiles of one clock rate the sum is exact and associative, and so is every bucket, count
//! and total (`merge(merge(a, b), c) == merge(a, merge(b, c))`).

use crate::{Layer, OpProfile, Profile};

/// A merged profile and what merging it changed.
#[derive(Debug, Clone)]
pub struct Merged {
    /// The sum.
    pub profile: Profile,
    /// Indexes of the inputs whose latencies were converted to the first input's clock rate
    /// with a ratio that is not a power of two (each call's bucket then known within one).
    pub converted: Vec<usize>,
    /// Layers whose time-lapse epochs were folded into one (epoch lengths differed).
    pub folded: Vec<String>,
    /// Sections left out.
    pub dropped_sections: usize,
}

/// Clock rates closer than this (relatively) are taken as the same rate, calibrated twice: the
/// sum keeps the first one's, and latencies are off by at most this much.
pub const SAME_RATE: f64 = 1e-3;

/// The global key that counts the profiles a merge summed.
pub const MERGED_KEY: &str = "merged";

/// Sums `inputs` (at least one) as the module says; an error names the first conflict.
pub fn merge(inputs: &[Profile]) -> Result<Merged, String> {
    let first = inputs.first().ok_or("no profile to merge")?;
    let hz = first.cycles_per_sec;
    let mut out = Merged {
        profile: Profile {
            started_unix_ns: first.started_unix_ns,
            clock: first.clock,
            cycles_per_sec: hz,
            invariant_tsc: first.invariant_tsc,
            extra: first.extra.clone(),
            layers: Vec::new(),
            sections: Vec::new(),
        },
        converted: Vec::new(),
        folded: Vec::new(),
        dropped_sections: 0,
    };
    let mut count = 0u64;
    let mut dropped = 0;
    for (i, p) in inputs.iter().enumerate() {
        let ratio = match (hz, p.cycles_per_sec) {
            // Two calibrations of one clock rate differ by a few parts per million.
            (Some(a), Some(b)) if a.abs_diff(b) as f64 > a as f64 * SAME_RATE => {
                Some(a as f64 / b as f64)
            }
            (Some(_), None) | (None, Some(_)) => {
                return Err(format!(
                    "profile {} has {} clock rate and profile 1 {}: give --cycles-per-sec",
                    i + 1,
                    if p.cycles_per_sec.is_some() {
                        "a"
                    } else {
                        "no"
                    },
                    if hz.is_some() { "has one" } else { "none" },
                ));
            }
            _ => None,
        };
        let out_p = &mut out.profile;
        if i > 0 {
            out_p.started_unix_ns = match (out_p.started_unix_ns, p.started_unix_ns) {
                (Some(a), Some(b)) => Some(a.min(b)),
                _ => None,
            };
            if out_p.clock != p.clock {
                out_p.clock = None;
            }
            if out_p.invariant_tsc != p.invariant_tsc {
                out_p.invariant_tsc = None;
            }
            out_p.extra.retain(|(k, v)| p.extra(k) == Some(v));
        }
        count += p
            .extra(MERGED_KEY)
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|&n| n > 0)
            .unwrap_or(1);
        for sec in &p.sections {
            if sec.name == ERRORS {
                add_errors(&mut out_p.sections, sec);
            } else {
                dropped += 1;
            }
        }
        let mut inexact = false;
        for l in &p.layers {
            let l = match ratio {
                Some(r) => {
                    let (c, exact) = convert(l, r);
                    inexact |= !exact;
                    c
                }
                None => l.clone(),
            };
            match out_p.layers.iter_mut().find(|m| m.name == l.name) {
                None => out_p.layers.push(l),
                Some(m) => {
                    if m.resolution != l.resolution {
                        return Err(format!(
                            "layer {}: {} buckets per octave in profile 1, {} in profile {}: \
                             cannot sum",
                            l.name,
                            m.resolution.get(),
                            l.resolution.get(),
                            i + 1
                        ));
                    }
                    let folded = add_layer_checked(m, &l).map_err(|e| {
                        format!("layer {}: {e} when profile {} is added", l.name, i + 1)
                    })?;
                    if folded && !out.folded.contains(&l.name) {
                        out.folded.push(l.name.clone());
                    }
                }
            }
        }
        if inexact {
            out.converted.push(i);
        }
    }
    out.dropped_sections = dropped;
    let p = &mut out.profile;
    p.extra.retain(|(k, _)| k != MERGED_KEY);
    p.extra.push((MERGED_KEY.to_string(), count.to_string()));
    Ok(out)
}

/// The section of failed requests per operation and errno (`fsprof-fuse`'s `Errors`), which
/// sums: lines `op=OP errno=N count=C` under a `layer=` attribute.
const ERRORS: &str = "errors";

/// Adds the `errors` section `sec` into the one of its layer in `out`.
fn add_errors(out: &mut Vec<crate::Section>, sec: &crate::Section) {
    let i = match out
        .iter()
        .position(|s| s.name == ERRORS && s.attr("layer") == sec.attr("layer"))
    {
        Some(i) => i,
        None => {
            let mut s = crate::Section::new(ERRORS);
            s.attrs = sec.attrs.clone();
            out.push(s);
            out.len() - 1
        }
    };
    let target = &mut out[i];
    for line in &sec.lines {
        let Some((key, n)) = line
            .rsplit_once(" count=")
            .and_then(|(k, n)| Some((k, n.parse::<u64>().ok()?)))
        else {
            continue;
        };
        match target
            .lines
            .iter_mut()
            .find(|l| l.rsplit_once(" count=").is_some_and(|(k, _)| k == key))
        {
            Some(l) => {
                let old: u64 = l
                    .rsplit_once(" count=")
                    .and_then(|(_, v)| v.parse().ok())
                    .unwrap_or(0);
                *l = format!("{key} count={}", old.saturating_add(n));
            }
            None => target.lines.push(line.clone()),
        }
    }
}

/// Adds `l` into `m` (same resolution; `m` keeps its name and clock): operation by operation and
/// bucket by bucket, epoch by epoch where both have the same epoch length, else with every
/// epoch folded into one. Returns whether epochs had to be folded. Counts wrap at 2^64, as the
/// recorder's counters do (for live layers folded together).
pub fn add_layer(m: &mut Layer, l: &Layer) -> bool {
    add_with(m, l, |a, b| Some(a.wrapping_add(b))).unwrap_or(false)
}

/// [`add_layer`] for profiles read from files (`fsprof merge`): an error names the operation
/// whose count, total or a bucket would pass 2^64 (a sum that wrapped would be a small, wrong
/// number that every check accepts).
pub fn add_layer_checked(m: &mut Layer, l: &Layer) -> Result<bool, String> {
    add_with(m, l, u64::checked_add)
}

fn add_with(m: &mut Layer, l: &Layer, add: fn(u64, u64) -> Option<u64>) -> Result<bool, String> {
    let buckets = m.buckets.max(l.buckets);
    let same_epochs = m.epoch_cycles == l.epoch_cycles;
    let fold = !same_epochs && (m.epochs > 1 || l.epochs > 1);
    if fold {
        for o in &mut m.ops {
            o.epochs = vec![o.merged()];
        }
        m.epochs = 1;
        m.epoch_cycles = 0;
    }
    let epochs = if fold { 1 } else { m.epochs.max(l.epochs) };
    m.buckets = buckets;
    m.epochs = epochs;
    m.max_epochs_reached |= l.max_epochs_reached;
    m.extra
        .retain(|(k, v)| l.extra.iter().any(|(k2, v2)| k2 == k && v2 == v));
    for o in &mut m.ops {
        shape(o, buckets, epochs);
    }
    for lo in &l.ops {
        let src = if fold {
            OpProfile {
                epochs: vec![lo.merged()],
                ..lo.clone()
            }
        } else {
            lo.clone()
        };
        let i = match m.ops.iter().position(|o| o.name == lo.name) {
            Some(i) => i,
            None => {
                m.ops.push(OpProfile::new(&lo.name, buckets, epochs));
                m.ops.len() - 1
            }
        };
        let o = &mut m.ops[i];
        let over = |what: &str| format!("{}: the {what} passes 2^64", lo.name);
        o.count = add(o.count, src.count).ok_or_else(|| over("count"))?;
        o.total = add(o.total, src.total).ok_or_else(|| over("total latency"))?;
        for (e, row) in src.epochs.iter().enumerate() {
            for (b, &v) in row.iter().enumerate() {
                o.epochs[e][b] =
                    add(o.epochs[e][b], v).ok_or_else(|| over(&format!("count of bucket {b}")))?;
            }
        }
    }
    Ok(fold)
}

/// Pads `o` to `buckets` buckets and `epochs` epochs.
fn shape(o: &mut OpProfile, buckets: usize, epochs: usize) {
    o.epochs.resize_with(epochs, || vec![0; buckets]);
    for e in &mut o.epochs {
        e.resize(buckets, 0);
    }
}

/// `l` with its latencies multiplied by `ratio` (target cycles per source cycle); whether that
/// was exact (a power-of-two ratio at this resolution).
fn convert(l: &Layer, ratio: f64) -> (Layer, bool) {
    let r = l.resolution.get() as f64;
    let steps = ratio.log2() * r;
    let exact = (steps - steps.round()).abs() < 1e-9;
    let n = l.buckets;
    let target = |b: usize| -> usize {
        if exact {
            (b as i64 + steps.round() as i64).clamp(0, n as i64 - 1) as usize
        } else {
            let (lo, hi) = l.resolution.range(b);
            let mid = if b == 0 { hi / 2.0 } else { (lo * hi).sqrt() } * ratio;
            if mid < 1.0 {
                0
            } else {
                ((mid.log2() * r).floor() as i64).clamp(0, n as i64 - 1) as usize
            }
        }
    };
    let mut out = l.clone();
    out.epoch_cycles = (l.epoch_cycles as f64 * ratio).round() as u64;
    for o in &mut out.ops {
        o.total = (o.total as f64 * ratio).round() as u64;
        for e in &mut o.epochs {
            let mut moved = vec![0u64; e.len()];
            for (b, &v) in e.iter().enumerate() {
                let t = target(b);
                moved[t] = moved[t].saturating_add(v);
            }
            *e = moved;
        }
    }
    (out, exact)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Resolution;
    use proptest::prelude::*;

    fn profile(hz: Option<u64>, layers: Vec<Layer>) -> Profile {
        Profile {
            cycles_per_sec: hz,
            layers,
            ..Profile::default()
        }
    }

    /// An operation: name, total latency, and (bucket, calls) pairs.
    type Op<'a> = (&'a str, u64, &'a [(usize, u64)]);

    fn layer(name: &str, ops: &[Op]) -> Layer {
        let mut l = Layer::new(name, Resolution::ONE);
        for (op, total, buckets) in ops {
            let mut o = OpProfile::new(*op, l.buckets, 1);
            for &(b, n) in *buckets {
                o.epochs[0][b] += n;
                o.count += n;
            }
            o.total = *total;
            l.ops.push(o);
        }
        l
    }

    #[test]
    fn sums_same_layers_and_keeps_the_others() {
        let a = profile(
            Some(1000),
            vec![layer("fuse", &[("OP_READ", 50, &[(3, 2)])])],
        );
        let b = profile(
            Some(1000),
            vec![
                layer(
                    "fuse",
                    &[
                        ("OP_READ", 70, &[(3, 1), (5, 4)]),
                        ("OP_OPEN", 9, &[(1, 1)]),
                    ],
                ),
                layer("lower", &[("OP_READ", 10, &[(2, 5)])]),
            ],
        );
        let m = merge(&[a, b]).unwrap();
        let p = &m.profile;
        assert!(m.converted.is_empty());
        assert_eq!(p.extra(MERGED_KEY), Some("2"));
        let f = p.layer("fuse").unwrap();
        let read = f.op("OP_READ").unwrap();
        assert_eq!((read.count, read.total), (7, 120));
        assert_eq!((read.epochs[0][3], read.epochs[0][5]), (3, 4));
        assert_eq!(f.count("OP_OPEN"), 1);
        assert_eq!(p.layer("lower").unwrap().count("OP_READ"), 5);
    }

    /// Counts summed past 2^64 wrapped: two profiles of 2^63 calls merged into one of 0 calls
    /// that every check accepted.
    #[test]
    fn a_sum_past_two_to_the_64_is_refused() {
        let half = 1u64 << 63;
        let a = profile(
            Some(1000),
            vec![layer("fuse", &[("OP_READ", 10, &[(3, half)])])],
        );
        let e = merge(&[a.clone(), a.clone()]).unwrap_err();
        assert_eq!(
            e,
            "layer fuse: OP_READ: the count passes 2^64 when profile 2 is added"
        );
        let b = profile(
            Some(1000),
            vec![layer("fuse", &[("OP_READ", u64::MAX, &[(3, 1)])])],
        );
        let e = merge(&[b.clone(), b]).unwrap_err();
        assert!(e.contains("the total latency passes 2^64"), "{e}");
        // Up to the limit is fine.
        let c = profile(
            Some(1000),
            vec![layer("fuse", &[("OP_READ", 1, &[(3, half - 1)])])],
        );
        let m = merge(&[a, c]).unwrap();
        assert_eq!(m.profile.layers[0].ops[0].count, u64::MAX);
    }

    #[test]
    fn other_resolutions_and_missing_clocks_are_refused() {
        let a = profile(Some(1000), vec![layer("fuse", &[])]);
        let mut l = layer("fuse", &[]);
        l.resolution = Resolution::new(2).unwrap();
        let b = profile(Some(1000), vec![l]);
        let e = merge(&[a.clone(), b]).unwrap_err();
        assert!(e.contains("buckets per octave"), "{e}");
        let e = merge(&[a, profile(None, vec![])]).unwrap_err();
        assert!(e.contains("--cycles-per-sec"), "{e}");
        assert!(merge(&[]).is_err());
    }

    #[test]
    fn a_clock_twice_as_fast_is_a_shift_by_one_octave() {
        let a = profile(Some(2000), vec![layer("fuse", &[])]);
        let b = profile(
            Some(1000),
            vec![layer("fuse", &[("OP_READ", 40, &[(4, 3)])])],
        );
        let m = merge(&[a, b]).unwrap();
        assert!(m.converted.is_empty(), "a power of two is exact");
        let read = m.profile.layers[0].op("OP_READ").unwrap().clone();
        assert_eq!(read.epochs[0][5], 3);
        assert_eq!(read.total, 80);
    }

    #[test]
    fn another_ratio_moves_calls_at_most_one_bucket_from_the_true_one() {
        // 3 GHz into 2 GHz: a call of c source cycles is 2c/3 target cycles.
        let a = profile(Some(2_000_000_000), vec![layer("fuse", &[])]);
        for b in 1..60usize {
            let src = profile(
                Some(3_000_000_000),
                vec![layer("fuse", &[("OP_READ", 0, &[(b, 1)])])],
            );
            let m = merge(&[a.clone(), src]).unwrap();
            assert_eq!(m.converted, vec![1]);
            let got = m.profile.layers[0].op("OP_READ").unwrap().epochs[0]
                .iter()
                .position(|&n| n == 1)
                .unwrap();
            // Every latency of source bucket b lands in one of these target buckets.
            let lo = Resolution::ONE.bucket(((1u64 << b) as f64 * 2.0 / 3.0) as u64);
            let hi = Resolution::ONE.bucket(((1u64 << (b + 1)) as f64 * 2.0 / 3.0) as u64 - 1);
            assert!(
                (lo..=hi).contains(&got),
                "bucket {b} -> {got}, not in {lo}..={hi}"
            );
        }
    }

    #[test]
    fn different_epoch_lengths_are_folded() {
        let mut a = layer("fuse", &[("OP_READ", 5, &[(2, 1)])]);
        a.epochs = 2;
        a.epoch_cycles = 100;
        a.ops[0].epochs.push(vec![0; a.buckets]);
        a.ops[0].epochs[1][3] = 1;
        let mut b = a.clone();
        b.epoch_cycles = 200;
        let m = merge(&[profile(Some(1), vec![a]), profile(Some(1), vec![b])]).unwrap();
        assert_eq!(m.folded, vec!["fuse".to_string()]);
        let o = &m.profile.layers[0].ops[0];
        assert_eq!(o.epochs.len(), 1);
        assert_eq!((o.epochs[0][2], o.epochs[0][3]), (2, 2));
    }

    fn arb_profile() -> impl Strategy<Value = Profile> {
        let op = (
            prop::sample::select(vec!["OP_READ", "OP_WRITE", "OP_OPEN"]),
            0u64..1_000_000,
            prop::collection::vec((0usize..64, 0u64..1000), 0..5),
        );
        let lay = (
            prop::sample::select(vec!["fuse", "lower", "branch0"]),
            prop::collection::vec(op, 0..4),
        );
        (
            prop::collection::vec(lay, 0..3),
            prop::option::of(0u64..1 << 40),
            prop::option::of(prop::sample::select(vec!["a", "b"])),
        )
            .prop_map(|(lays, start, tag)| {
                let mut p = profile(Some(2_000_000_000), Vec::new());
                p.started_unix_ns = start;
                if let Some(t) = tag {
                    p.extra.push(("host".into(), t.into()));
                }
                for (name, ops) in lays {
                    if p.layer(name).is_some() {
                        continue;
                    }
                    let mut l = Layer::new(name, Resolution::ONE);
                    for (op, total, buckets) in ops {
                        if l.op(op).is_some() {
                            continue;
                        }
                        let mut o = OpProfile::new(op, l.buckets, 1);
                        for (b, n) in buckets {
                            o.epochs[0][b] += n;
                            o.count += n;
                        }
                        o.total = total;
                        l.ops.push(o);
                    }
                    p.layers.push(l);
                }
                p
            })
    }

    proptest! {
        #[test]
        fn merging_is_associative_and_exact(a in arb_profile(), b in arb_profile(), c in arb_profile()) {
            let left = merge(&[merge(&[a.clone(), b.clone()]).unwrap().profile, c.clone()]).unwrap();
            let right = merge(&[a.clone(), merge(&[b.clone(), c.clone()]).unwrap().profile]).unwrap();
            let all = merge(&[a.clone(), b.clone(), c.clone()]).unwrap();
            prop_assert_eq!(&left.profile, &all.profile);
            // The other grouping differs only in the order of layers and operations.
            for l in &all.profile.layers {
                let r = right.profile.layer(&l.name).unwrap();
                for o in &l.ops {
                    prop_assert_eq!(Some(o), r.op(&o.name));
                }
                prop_assert_eq!(l.ops.len(), r.ops.len());
            }
            prop_assert_eq!(all.profile.layers.len(), right.profile.layers.len());
            prop_assert_eq!(&all.profile.extra, &right.profile.extra);
            prop_assert_eq!(all.profile.started_unix_ns, right.profile.started_unix_ns);
            // Exact: every count, total and bucket is the sum of the inputs'.
            for l in &all.profile.layers {
                for o in &l.ops {
                    let inputs = [&a, &b, &c];
                    let of = |p: &Profile| p.layer(&l.name).and_then(|x| x.op(&o.name)).cloned();
                    let sum: u64 = inputs.iter().filter_map(|p| of(p)).map(|x| x.count).sum();
                    prop_assert_eq!(o.count, sum);
                    let total: u64 = inputs.iter().filter_map(|p| of(p)).map(|x| x.total).sum();
                    prop_assert_eq!(o.total, total);
                    for bkt in 0..64 {
                        let s: u64 = inputs.iter().filter_map(|p| of(p)).map(|x| x.epochs[0][bkt]).sum();
                        prop_assert_eq!(o.epochs[0][bkt], s);
                    }
                }
            }
            prop_assert_eq!(all.profile.extra(MERGED_KEY), Some("3"));
        }
    }
}
