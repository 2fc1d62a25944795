//! Log2 bucket math (`docs/format.md#buckets`), integer-only on the hot path.
//!
//! A latency of `c` cycles at resolution `r` falls in bucket `b = floor(r · log2 c)` (`b = 0` for
//! `c = 0`); a profile has `64 · r` buckets. Because `floor(r · log2 c) = floor(log2 (c^r))`, the
//! bucket is exactly the index of the highest set bit of `c^r`; bucket `b`'s smallest integer
//! member is therefore the smallest `c` with `c^r >= 2^b`, i.e. `ceil(2^(b/r))`. Those lower
//! bounds are computed once per resolution with a small big-integer power (never a floating-point
//! logarithm, which misplaces values near bounds above 2^53), and [`Resolution::bucket`] finds a
//! bucket with one leading-zero count plus at most `r − 1` comparisons within the octave.

use std::sync::OnceLock;

/// Buckets per octave: 1, 2, 4 or 8 (the default is 1, as in the thesis).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Resolution(u8);

impl Default for Resolution {
    fn default() -> Self {
        Resolution(1)
    }
}

impl Resolution {
    /// The thesis's resolution: one bucket per power of two.
    pub const ONE: Resolution = Resolution(1);

    /// `Some` for 1, 2, 4 or 8.
    pub fn new(r: u32) -> Option<Resolution> {
        matches!(r, 1 | 2 | 4 | 8).then_some(Resolution(r as u8))
    }

    /// Buckets per octave.
    pub fn get(self) -> u32 {
        self.0 as u32
    }

    /// Number of buckets in a profile of this resolution: `64 · r`.
    pub fn buckets(self) -> usize {
        64 * self.0 as usize
    }

    /// The lower bounds of every bucket (`bounds()[b]` is the smallest integer latency in
    /// bucket `b`; `bounds()[0] = 0`). Computed exactly on first use.
    pub fn bounds(self) -> &'static [u64] {
        static TABLES: [OnceLock<Box<[u64]>>; 4] = [const { OnceLock::new() }; 4];
        let slot = self.0.trailing_zeros() as usize;
        TABLES[slot].get_or_init(|| lower_bounds(self.get()))
    }

    /// The smallest integer latency in bucket `b` (`bounds()[b]`), exactly; `None` past the
    /// last bucket (`b >= 64 · r`).
    pub fn lowest(self, b: usize) -> Option<u64> {
        self.bounds().get(b).copied()
    }

    /// The largest integer latency in bucket `b`, exactly: one below the next bucket's lowest,
    /// `u64::MAX` for the last bucket; `None` past it. For `r > 1` some low buckets hold no
    /// integer at all, and then this is below [`Resolution::lowest`].
    pub fn highest(self, b: usize) -> Option<u64> {
        let bounds = self.bounds();
        match bounds.get(b + 1) {
            Some(&next) => Some(next - 1),
            None if b + 1 == bounds.len() => Some(u64::MAX),
            None => None,
        }
    }

    /// The bucket of a latency of `c` cycles.
    #[inline]
    pub fn bucket(self, c: u64) -> usize {
        BucketMap::new(self).bucket(c)
    }

    /// The half-open range of latencies `[lo, hi)` that bucket `b` covers, in cycles, as real
    /// numbers: `[0, 2^(1/r))` for bucket 0, `[2^(b/r), 2^((b+1)/r))` above.
    pub fn range(self, b: usize) -> (f64, f64) {
        let r = self.get() as f64;
        let lo = if b == 0 { 0.0 } else { (b as f64 / r).exp2() };
        (lo, ((b + 1) as f64 / r).exp2())
    }

    /// The mid-point of bucket `b` in cycles: the mean of its bounds (`3/2 · 2^b` for r = 1 and
    /// b > 0; 1 for r = 1 and b = 0, whose range starts at 0).
    pub fn midpoint(self, b: usize) -> f64 {
        let (lo, hi) = self.range(b);
        (lo + hi) / 2.0
    }
}

/// A resolution with its bound table resolved, for the hot path: no lazy-initialization check
/// and no lookup per record.
#[derive(Debug, Clone, Copy)]
pub struct BucketMap {
    shift: u32,
    bounds: &'static [u64],
}

impl BucketMap {
    /// Resolves the bound table of `r`.
    pub fn new(r: Resolution) -> BucketMap {
        BucketMap {
            shift: r.0.trailing_zeros(),
            bounds: r.bounds(),
        }
    }

    /// The bucket of a latency of `c` cycles: `floor(r · log2 c)`, 0 for `c = 0`.
    #[inline(always)]
    pub fn bucket(&self, c: u64) -> usize {
        let octave = 63 - (c | 1).leading_zeros() as usize;
        if self.shift == 0 {
            return octave;
        }
        let r = 1usize << self.shift;
        let base = octave << self.shift;
        // Within the octave the bounds increase; count those at or below c.
        let within = &self.bounds[base + 1..base + r];
        base + within.iter().map(|&lo| (c >= lo) as usize).sum::<usize>()
    }
}

/// `ceil(2^(b/r))` for every bucket `b` below `64 r`, with `bounds[0] = 0`.
fn lower_bounds(r: u32) -> Box<[u64]> {
    let n = 64 * r as usize;
    let mut out = vec![0u64; n];
    for (b, slot) in out.iter_mut().enumerate().skip(1) {
        // The smallest c with c^r >= 2^b lies in [2^(b/r rounded down), 2^(b/r rounded down + 1)].
        let k = (b as u32) / r;
        let (mut lo, mut hi) = (1u64 << k, if k == 63 { u64::MAX } else { 1u64 << (k + 1) });
        // Invariant: lo^r may be below 2^b, hi^r >= 2^b.
        if pow_log2_floor(lo, r) >= b as u32 {
            *slot = lo;
            continue;
        }
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if pow_log2_floor(mid, r) >= b as u32 {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        *slot = hi;
    }
    out.into_boxed_slice()
}

/// `floor(log2(c^r))` computed exactly with a small big integer; `c >= 1`, `r <= 8`.
///
/// This is the definition of the bucket of `c` at resolution `r`, and serves both to build the
/// bound tables and as the test reference for [`BucketMap::bucket`].
pub fn pow_log2_floor(c: u64, r: u32) -> u32 {
    assert!(c >= 1 && (1..=8).contains(&r));
    // c^8 < 2^512: eight 64-bit limbs, little-endian.
    let mut limbs = [0u64; 9];
    limbs[0] = 1;
    for _ in 0..r {
        let mut carry = 0u128;
        for limb in limbs.iter_mut() {
            let v = (*limb as u128) * (c as u128) + carry;
            *limb = v as u64;
            carry = v >> 64;
        }
    }
    let top = limbs.iter().rposition(|&l| l != 0).expect("c >= 1");
    top as u32 * 64 + 63 - limbs[top].leading_zeros()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn reference(c: u64, r: u32) -> usize {
        if c == 0 {
            0
        } else {
            pow_log2_floor(c, r) as usize
        }
    }

    const ALL: [u32; 4] = [1, 2, 4, 8];

    #[test]
    fn resolution_one_is_the_bit_index() {
        let r = Resolution::ONE;
        assert_eq!(r.bucket(0), 0);
        assert_eq!(r.bucket(1), 0);
        assert_eq!(r.bucket(2), 1);
        assert_eq!(r.bucket(3), 1);
        assert_eq!(r.bucket(4), 2);
        assert_eq!(r.bucket(u64::MAX), 63);
        assert_eq!(r.buckets(), 64);
        assert_eq!(r.midpoint(3), 12.0);
        assert_eq!(r.midpoint(0), 1.0);
    }

    #[test]
    fn bounds_are_exact_ceilings() {
        for r in ALL {
            let res = Resolution::new(r).unwrap();
            let bounds = res.bounds();
            assert_eq!(bounds.len(), 64 * r as usize);
            assert_eq!(bounds[0], 0);
            for b in 1..bounds.len() {
                let lo = bounds[b];
                // lo is in bucket >= b and lo - 1 is below it.
                assert!(pow_log2_floor(lo, r) as usize >= b, "r={r} b={b}");
                assert!(
                    lo == 1 || (pow_log2_floor(lo - 1, r) as usize) < b,
                    "r={r} b={b}"
                );
                assert!(bounds[b] >= bounds[b - 1]);
            }
        }
        // Known values: 2^(1/2) -> 2, 2^(3/2) = 2.83 -> 3, 2^(63.5) = 1.3043e19.
        let b2 = Resolution::new(2).unwrap().bounds();
        assert_eq!(b2[1], 2);
        assert_eq!(b2[3], 3);
        assert_eq!(b2[127], 13_043_817_825_332_782_213);
        // r = 4: 2^(1/4) = 1.19 -> 2, 2^(5/4) = 2.38 -> 3, 2^(6/4) = 2.83 -> 3,
        // 2^(7/4) = 3.36 -> 4, 2^(9/4) = 4.76 -> 5, 2^(10/4) = 5.66 -> 6, 2^(11/4) = 6.73 -> 7;
        // 2^(127/4) = 2^31.75 = 3611622602.8 -> 3611622603; 2^(255/4) = 2^63.75: the smallest
        // c with c^4 >= 2^255 is 15511800964685064949 (big-integer root, checked both ways).
        let b4 = Resolution::new(4).unwrap().bounds();
        for (b, lo) in [
            (1, 2),
            (4, 2),
            (5, 3),
            (6, 3),
            (7, 4),
            (8, 4),
            (9, 5),
            (10, 6),
            (11, 7),
            (127, 3_611_622_603),
            (254, 13_043_817_825_332_782_213),
            (255, 15_511_800_964_685_064_949),
        ] {
            assert_eq!(b4[b], lo, "r=4 b={b}");
        }
        // r = 8: buckets 1 to 8 all start at 2 (2^(b/8) <= 2), so buckets 1-7 hold no integer;
        // 2^(9/8) = 2.18 -> 3, 2^(12/8) = 2.83 -> 3, 2^(13/8) = 3.08 -> 4;
        // 2^(255/8) = 2^31.875 = 3938502375.3 -> 3938502376; 2^(510/8) = 2^63.75 as at r = 4;
        // 2^(511/8) = 2^63.875 -> 16915738899553466671.
        let b8 = Resolution::new(8).unwrap().bounds();
        for (b, lo) in [
            (1, 2),
            (7, 2),
            (8, 2),
            (9, 3),
            (12, 3),
            (13, 4),
            (16, 4),
            (255, 3_938_502_376),
            (510, 15_511_800_964_685_064_949),
            (511, 16_915_738_899_553_466_671),
        ] {
            assert_eq!(b8[b], lo, "r=8 b={b}");
        }
        let r8 = Resolution::new(8).unwrap();
        assert_eq!((r8.lowest(3), r8.highest(3)), (Some(2), Some(1)));
        assert_eq!((r8.lowest(8), r8.highest(8)), (Some(2), Some(2)));
        assert_eq!(r8.highest(511), Some(u64::MAX));
        assert_eq!((r8.lowest(512), r8.highest(512)), (None, None));
    }

    #[test]
    fn midpoints_are_the_mean_of_the_bounds_at_every_resolution() {
        let near = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b.abs().max(1.0);
        // r = 2: bucket 2 is [2, 2^1.5): mid 1 + 2^0.5; bucket 0 is [0, 2^0.5): mid 2^-0.5.
        let r2 = Resolution::new(2).unwrap();
        assert!(near(r2.midpoint(2), 1.0 + 2f64.sqrt()));
        assert!(near(r2.midpoint(0), 2f64.sqrt() / 2.0));
        // r = 4: bucket 4 is [2, 2^1.25): mid 1 + 2^0.25 = 2.189207...
        let r4 = Resolution::new(4).unwrap();
        assert!(near(r4.midpoint(4), 2.189_207_115_002_721));
        // r = 8: bucket 8 is [2, 2^1.125): mid 1 + 2^0.125 = 2.090507...
        let r8 = Resolution::new(8).unwrap();
        assert!(near(r8.midpoint(8), 2.090_507_732_665_258));
        // Generally, for b > 0: 2^(b/r) · (1 + 2^(1/r)) / 2.
        for r in [2u32, 4, 8] {
            let res = Resolution::new(r).unwrap();
            for b in 1..res.buckets() {
                let want = (b as f64 / r as f64).exp2() * (1.0 + (1.0 / r as f64).exp2()) / 2.0;
                assert!(near(res.midpoint(b), want), "r={r} b={b}");
                let (lo, hi) = res.range(b);
                assert!(lo < res.midpoint(b) && res.midpoint(b) < hi);
            }
        }
    }

    #[test]
    fn every_bound_and_its_neighbours() {
        for r in ALL {
            let res = Resolution::new(r).unwrap();
            let map = BucketMap::new(res);
            for &lo in res.bounds() {
                for c in [
                    lo.saturating_sub(2),
                    lo.saturating_sub(1),
                    lo,
                    lo + 1,
                    lo.saturating_add(2),
                ] {
                    assert_eq!(map.bucket(c), reference(c, r), "r={r} c={c}");
                }
            }
            for k in 0..64 {
                let p = 1u64 << k;
                for c in [p - 1, p, p + 1, p | (p - 1)] {
                    assert_eq!(map.bucket(c), reference(c, r), "r={r} c={c}");
                }
            }
            assert_eq!(map.bucket(u64::MAX), 64 * r as usize - 1);
        }
    }

    #[test]
    fn floating_point_log2_is_not_a_reference() {
        // Why the reference is integer: above 2^53 an f64 rounds c up across a bucket bound.
        let r = Resolution::new(2).unwrap();
        let lo = r.bounds()[127];
        let c = lo - 1;
        let float_bucket = (2.0 * (c as f64).log2()).floor() as usize;
        assert_eq!(r.bucket(c), 126);
        assert_eq!(float_bucket, 127);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]
        #[test]
        fn bucket_matches_exact_reference(c in any::<u64>(), ri in 0usize..4) {
            let r = ALL[ri];
            prop_assert_eq!(Resolution::new(r).unwrap().bucket(c), reference(c, r));
        }

        #[test]
        fn bucket_matches_reference_per_octave(k in 0u32..64, frac in any::<u64>(), ri in 0usize..4) {
            // Uniform over octaves, not over values, so small latencies are covered as well.
            let r = ALL[ri];
            let c = (1u64 << k) | (frac >> (64 - k.max(1))) & ((1u64 << k) - 1);
            prop_assert_eq!(Resolution::new(r).unwrap().bucket(c), reference(c, r));
        }
    }
}
