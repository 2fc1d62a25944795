//! Operations no caller waits for, and the shares of latency that leave them out.
//!
//! The kernel sends `FORGET` and `BATCH_FORGET` when it evicts an inode, and `RELEASE` and
//! `RELEASEDIR` after the last close of a file on an ordinary FUSE mount, in the background:
//! `close(2)` has returned by then (only `fuseblk` mounts wait for the reply). Their latency
//! is real work for the daemon, but no application waited for it: a build that renames over
//! many files can spend a third of a layer's latency in deferred `FORGET`s. So the views mark
//! them, and by default leave them out of every "share of the layer's latency" (and of the
//! weights `compare` and `diff` use to call an operation insignificant); `--with-background`
//! counts them in.

use profile_store::{Layer, OpProfile};

/// The operations no caller waits for.
pub const BACKGROUND: &[&str] = &[
    "OP_FORGET",
    "OP_BATCH_FORGET",
    "OP_RELEASE",
    "OP_RELEASEDIR",
];

/// Whether no caller waits for operation `name`.
pub fn is_background(name: &str) -> bool {
    BACKGROUND.contains(&name)
}

/// What the shares of latency of a layer are taken of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Shares {
    /// Count background operations in (`--with-background`). Default: left out.
    pub with_background: bool,
}

impl Shares {
    /// Whether `op` counts in the shares.
    pub fn counts(self, name: &str) -> bool {
        self.with_background || !is_background(name)
    }

    /// The latency the shares of `layer` are taken of, in cycles.
    pub fn basis(self, layer: &Layer) -> u128 {
        layer
            .ops
            .iter()
            .filter(|o| self.counts(&o.name))
            .map(|o| o.total as u128)
            .sum()
    }

    /// `op`'s share of `layer`'s latency, 0..=1; `None` for an operation left out.
    pub fn of(self, layer: &Layer, op: &OpProfile) -> Option<f64> {
        if !self.counts(&op.name) {
            return None;
        }
        let all = self.basis(layer);
        Some(if all == 0 {
            0.0
        } else {
            op.total as f64 / all as f64
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use profile_store::Resolution;

    #[test]
    fn background_operations_are_left_out_of_shares_unless_asked() {
        let mut l = Layer::new("fuse", Resolution::ONE);
        for (n, t) in [("OP_FORGET", 600), ("OP_READ", 300), ("OP_WRITE", 100)] {
            let mut o = OpProfile::new(n, 64, 1);
            o.total = t;
            l.ops.push(o);
        }
        let d = Shares::default();
        assert_eq!(d.of(&l, &l.ops[0]), None);
        assert_eq!(d.of(&l, &l.ops[1]), Some(0.75));
        let all = Shares {
            with_background: true,
        };
        assert_eq!(all.of(&l, &l.ops[0]), Some(0.6));
        assert_eq!(all.of(&l, &l.ops[1]), Some(0.3));
    }
}
