//! Profiles the unit tests of several views share.

use profile_store::{Layer, OpProfile, Resolution};

/// A hand-made layer of 1100 buckets at resolution 1 (bounds and mid-points from bucket 1023 on
/// are past `f64`'s range) with one operation, `OP_READ`, whose calls fall in the buckets
/// `hits` names (bucket, calls); its count is their sum.
pub fn wide_read_layer(total: u64, hits: &[(usize, u64)]) -> Layer {
    let mut l = Layer::new("original", Resolution::ONE);
    l.buckets = 1100;
    let mut o = OpProfile::new("OP_READ", 1100, 1);
    o.total = total;
    for &(b, n) in hits {
        o.epochs[0][b] = n;
        o.count += n;
    }
    l.ops.push(o);
    l
}
