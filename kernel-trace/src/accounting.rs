//! What the kernel counted against what the tracer read, per tracepoint: the records lost in
//! full rings and the hits the kernel counted but never wrote (`docs/format.md`, "Lost
//! records").
//!
//! At each drain the tracer reads every event's [`crate::sys::Counts`] (hits and lost
//! samples) and then the rings, and hands the totals over every CPU to [`Accounting::update`].
//! A hit that is neither read nor lost is *missing*: never written, or still being written when
//! its count was read (the kernel counts a hit before it writes the sample, within the same
//! tracepoint call). So the missing counts are recomputed from the totals at every drain, never
//! accumulated: a sample that was only late is read by a later drain and leaves them.

/// Events per CPU, in the order they are opened: FUSE send, FUSE end, block issue, block
/// completion.
pub const KINDS: usize = 4;

/// The block completion's index among the [`KINDS`].
const COMPLETE: usize = 3;

/// Totals over every CPU since tracing started, per kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Hits the kernel counted.
    pub counted: [u64; KINDS],
    /// Samples the kernel lost in full rings.
    pub lost: [u64; KINDS],
    /// Samples the tracer read (decoded).
    pub read: [u64; KINDS],
}

impl Totals {
    /// Hits of kind `k` neither read nor lost.
    fn missing(&self, k: usize) -> u64 {
        self.counted[k].saturating_sub(self.lost[k].saturating_add(self.read[k]))
    }

    /// Missing hits of the FUSE tracepoints and of the block tracepoints.
    fn unsampled(&self) -> [u64; 2] {
        [
            self.missing(0) + self.missing(1),
            self.missing(2) + self.missing(COMPLETE),
        ]
    }

    fn lost_sum(&self) -> u64 {
        self.lost.iter().sum()
    }
}

/// The tracer's record of what it could not read (see the module's documentation).
#[derive(Debug, Default)]
pub struct Accounting {
    /// The last drain's totals.
    last: Totals,
    /// Lost and unsampled (FUSE, block) at the last reset.
    base_lost: u64,
    base_unsampled: [u64; 2],
    /// Block completions known never to arrive, as handed out by [`Accounting::update`].
    completions_gone: u64,
}

impl Accounting {
    /// Takes one drain's totals. Returns how many more block completions are now known never
    /// to arrive (lost in a full ring, or missing at this drain and at the one before: a
    /// sample being written when its count was read is read by the next drain), for
    /// [`crate::block::BlockPairs::unsampled`].
    pub fn update(&mut self, now: Totals) -> u64 {
        let gone = now.lost[COMPLETE] + self.last.missing(COMPLETE).min(now.missing(COMPLETE));
        let new = gone.saturating_sub(self.completions_gone);
        self.completions_gone = self.completions_gone.max(gone);
        self.last = now;
        new
    }

    /// Samples lost in full rings since the last reset.
    pub fn lost(&self) -> u64 {
        self.last.lost_sum().saturating_sub(self.base_lost)
    }

    /// Hits counted and never written since the last reset, of the FUSE and of the block
    /// tracepoints (as of the last drain).
    pub fn unsampled(&self) -> [u64; 2] {
        let u = self.last.unsampled();
        [
            u[0].saturating_sub(self.base_unsampled[0]),
            u[1].saturating_sub(self.base_unsampled[1]),
        ]
    }

    /// The profile was reset (after a drain): what is lost or unsampled from now on counts
    /// from zero.
    pub fn reset(&mut self) {
        self.base_lost = self.last.lost_sum();
        self.base_unsampled = self.last.unsampled();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn totals(counted: [u64; 4], lost: [u64; 4], read: [u64; 4]) -> Totals {
        Totals {
            counted,
            lost,
            read,
        }
    }

    #[test]
    fn ring_losses_are_lost_and_not_also_unsampled() {
        let mut a = Accounting::default();
        // 10 completions counted: 6 read, 3 lost in a full ring, 1 never written.
        a.update(totals([5, 5, 10, 10], [0, 0, 0, 3], [5, 5, 10, 6]));
        assert_eq!(a.lost(), 3);
        assert_eq!(a.unsampled(), [0, 1]);
    }

    #[test]
    fn a_late_sample_is_unsampled_only_until_it_is_read() {
        let mut a = Accounting::default();
        // Counted, not yet written when the count was read.
        let gone = a.update(totals([0, 0, 4, 4], [0; 4], [0, 0, 4, 3]));
        assert_eq!(a.unsampled(), [0, 1]);
        assert_eq!(
            gone, 0,
            "a completion missing at one drain only is not yet gone"
        );
        // The next drain reads it.
        let gone = a.update(totals([0, 0, 4, 4], [0; 4], [0, 0, 4, 4]));
        assert_eq!(a.unsampled(), [0, 0]);
        assert_eq!(gone, 0);
    }

    #[test]
    fn completions_missing_at_two_drains_are_gone_once() {
        let mut a = Accounting::default();
        assert_eq!(a.update(totals([0, 0, 5, 5], [0; 4], [0, 0, 5, 3])), 0);
        assert_eq!(a.update(totals([0, 0, 6, 6], [0; 4], [0, 0, 6, 4])), 2);
        // Nothing new: nothing more handed out.
        assert_eq!(a.update(totals([0, 0, 6, 6], [0; 4], [0, 0, 6, 4])), 0);
        // One lost in a full ring is gone at once.
        assert_eq!(
            a.update(totals([0, 0, 7, 7], [0, 0, 0, 1], [0, 0, 7, 4])),
            1
        );
        assert_eq!(a.unsampled(), [0, 2]);
        assert_eq!(a.lost(), 1);
    }

    #[test]
    fn a_reset_counts_from_zero() {
        let mut a = Accounting::default();
        a.update(totals([3, 3, 9, 9], [1, 0, 0, 2], [2, 2, 9, 5]));
        assert_eq!((a.lost(), a.unsampled()), (3, [1, 2]));
        a.reset();
        assert_eq!((a.lost(), a.unsampled()), (0, [0, 0]));
        a.update(totals([4, 4, 10, 10], [1, 0, 0, 2], [2, 3, 10, 5]));
        assert_eq!((a.lost(), a.unsampled()), (0, [1, 1]));
    }
}
