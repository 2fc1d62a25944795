//! One operation's bucket counts summed over epochs, with the bucket geometry needed to turn
//! them into latencies: the common input of peaks, scores and plots.

use profile_store::OpProfile;

use crate::units::Buckets;

/// Bucket counts of one operation (all epochs merged) and the geometry of its layer.
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram {
    /// `counts[b]`: calls that finished with a latency in bucket `b`.
    pub counts: Vec<u64>,
    /// The layer's resolution and bucket count.
    pub buckets: Buckets,
}

impl Histogram {
    /// The merged histogram of `op`, padded or cut to the layer's bucket count.
    pub fn of(op: &OpProfile, buckets: Buckets) -> Histogram {
        let mut counts = op.merged();
        counts.resize(buckets.len, 0);
        Histogram { counts, buckets }
    }

    /// An all-zero histogram (an operation absent from a profile).
    pub fn empty(buckets: Buckets) -> Histogram {
        Histogram {
            counts: vec![0; buckets.len],
            buckets,
        }
    }

    /// A histogram from explicit counts (tests, synthetic profiles).
    pub fn from_counts(counts: Vec<u64>, buckets: Buckets) -> Histogram {
        let mut h = Histogram { counts, buckets };
        h.counts.resize(buckets.len.max(h.counts.len()), 0);
        h
    }

    /// Number of buckets.
    pub fn len(&self) -> usize {
        self.counts.len()
    }

    /// Whether no call finished.
    pub fn is_empty(&self) -> bool {
        self.counts.iter().all(|&c| c == 0)
    }

    /// Calls that finished: the sum of every bucket.
    pub fn total(&self) -> u128 {
        self.counts.iter().map(|&c| c as u128).sum()
    }

    /// Calls in buckets `lo..=hi`.
    pub fn calls_in(&self, lo: usize, hi: usize) -> u128 {
        self.counts[lo..=hi].iter().map(|&c| c as u128).sum()
    }

    /// Estimated latency in cycles of buckets `lo..=hi`: Σ count × bucket mid-point.
    pub fn latency_in(&self, lo: usize, hi: usize) -> f64 {
        // Empty buckets are skipped: beyond bucket 1023 a mid-point overflows f64, and
        // 0 × inf would poison the sum.
        (lo..=hi)
            .filter(|&b| self.counts[b] != 0)
            .map(|b| self.counts[b] as f64 * self.buckets.mid(b))
            .fold(0.0, |a, b| a + b)
    }

    /// Estimated total latency in cycles: Σ count × bucket mid-point (TOTLAT's `L`,
    /// [`crate::compare`]).
    pub fn estimated_latency(&self) -> f64 {
        if self.counts.is_empty() {
            0.0
        } else {
            self.latency_in(0, self.len() - 1)
        }
    }

    /// The first and last bucket with a non-zero count.
    pub fn nonzero_range(&self) -> Option<(usize, usize)> {
        let lo = self.counts.iter().position(|&c| c != 0)?;
        let hi = self.counts.iter().rposition(|&c| c != 0)?;
        Some((lo, hi))
    }

    /// Pads both histograms to the same length (profiles of the original tools have as many
    /// buckets as their data held).
    pub fn align(a: &mut Histogram, b: &mut Histogram) {
        let n = a.len().max(b.len());
        a.counts.resize(n, 0);
        b.counts.resize(n, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use profile_store::Resolution;

    #[test]
    fn totals_and_estimates() {
        let b = Buckets {
            resolution: Resolution::ONE,
            len: 64,
        };
        let mut counts = vec![0; 64];
        counts[4] = 2;
        counts[5] = 1;
        let h = Histogram::from_counts(counts, b);
        assert_eq!(h.total(), 3);
        // Mid-points 24 and 48 cycles.
        assert_eq!(h.estimated_latency(), 96.0);
        assert_eq!(h.nonzero_range(), Some((4, 5)));
        assert!(Histogram::empty(b).is_empty());
        assert_eq!(Histogram::empty(b).nonzero_range(), None);
    }
}
