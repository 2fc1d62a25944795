//! Pairing two profiles for the commands that compare them (compare, diff, plot overlays): which
//! layers go together, which operations, and each operation's pair of histograms.

use profile_store::Layer;

use crate::background::Shares;
use crate::error::Error;
use crate::hist::Histogram;
use crate::input::Loaded;
use crate::units::Buckets;

/// One operation in two profiles: its histograms and how much it weighs in each layer.
#[derive(Debug, Clone)]
pub struct Pair {
    /// Histogram in profile A.
    pub a: Histogram,
    /// Histogram in profile B.
    pub b: Histogram,
    /// The larger of the operation's shares of calls and of latency in A's layer, 0..=1.
    pub weight_a: f64,
    /// The same in B's layer.
    pub weight_b: f64,
}

impl Pair {
    /// A pair with no context: the operation counts as significant.
    pub fn new(a: Histogram, b: Histogram) -> Pair {
        let (mut a, mut b) = (a, b);
        Histogram::align(&mut a, &mut b);
        Pair {
            a,
            b,
            weight_a: 1.0,
            weight_b: 1.0,
        }
    }
}

/// The layers to compare between two profiles: the one named, or every layer both have, or
/// (when they share no name, e.g. a profile of the original tools and one of fsprof-fuse) the
/// primary layers. Layers of different resolution cannot be compared.
pub fn layer_pairs<'p>(
    a: &'p Loaded,
    b: &'p Loaded,
    name: Option<&str>,
) -> Result<Vec<(&'p Layer, &'p Layer)>, Error> {
    let pairs: Vec<(&Layer, &Layer)> = match name {
        Some(_) => vec![(a.layer(name)?, b.layer(name)?)],
        None => {
            let common: Vec<(&Layer, &Layer)> = a
                .profile
                .layers
                .iter()
                .filter_map(|la| b.profile.layer(&la.name).map(|lb| (la, lb)))
                .collect();
            if common.is_empty() {
                vec![(a.layer(None)?, b.layer(None)?)]
            } else {
                common
            }
        }
    };
    for (la, lb) in &pairs {
        if la.resolution != lb.resolution {
            return Err(Error::usage(
                format!("layer {}", la.name),
                format!(
                    "{} has resolution {} and {} resolution {}: their buckets do not line up",
                    a.name,
                    la.resolution.get(),
                    b.name,
                    lb.resolution.get()
                ),
            ));
        }
    }
    Ok(pairs)
}

/// The union of the operations of two layers, largest total latency (of either) first.
pub fn union_ops(la: &Layer, lb: &Layer, wanted: &[String]) -> Result<Vec<String>, Error> {
    for w in wanted {
        if la.op(w).is_none() && lb.op(w).is_none() {
            return Err(Error::usage(
                format!("--op {w}"),
                format!("no such operation in layer {} of either profile", la.name),
            ));
        }
    }
    let mut names: Vec<String> = la
        .ops
        .iter()
        .chain(&lb.ops)
        .map(|o| o.name.clone())
        .filter(|n| wanted.is_empty() || wanted.contains(n))
        .collect();
    names.sort_unstable();
    names.dedup();
    let key = |n: &str| {
        la.op(n)
            .map_or(0, |o| o.total)
            .max(lb.op(n).map_or(0, |o| o.total))
    };
    names.sort_by(|x, y| {
        key(y)
            .cmp(&key(x))
            .then_with(|| profile_store::ops::listing_order(x, y))
    });
    Ok(names)
}

/// The larger of an operation's shares of its layer's calls and latency; 0 for an operation no
/// caller waits for, unless `shares` counts them (`--with-background`): left out by default,
/// as everywhere ([`crate::background`]).
pub fn weight(l: &Layer, name: &str, shares: Shares) -> f64 {
    let Some(o) = l.op(name) else { return 0.0 };
    if !shares.counts(name) {
        return 0.0;
    }
    let calls = if l.total_count() == 0 {
        0.0
    } else {
        o.count as f64 / l.total_count() as f64
    };
    calls.max(shares.of(l, o).unwrap_or(0.0))
}

/// The histograms of operation `name` in two layers (empty where it is absent), with its weight
/// in each layer.
pub fn pair_of(la: &Layer, lb: &Layer, name: &str, shares: Shares) -> Pair {
    let geo = |l: &Layer| Buckets::of(l);
    let h = |l: &Layer| {
        l.op(name)
            .map_or_else(|| Histogram::empty(geo(l)), |o| Histogram::of(o, geo(l)))
    };
    let mut pair = Pair::new(h(la), h(lb));
    pair.weight_a = weight(la, name, shares);
    pair.weight_b = weight(lb, name, shares);
    pair
}
