//! The maximum latency of an operation, exactly where the profile records it, and percentiles
//! that never exceed it.
//!
//! A histogram bounds a maximum by its slowest bucket's top (a factor of two above the truth
//! at most) and by the recorded total ([`profile_store::views::max_bound`]); a profile with the
//! slowest requests (`--slowest`, the `slowest` section) holds the exact one for each operation
//! of the `fuse` layer that has a request there: the section keeps the N slowest requests of
//! the run, so an operation with one among them has its slowest there. Views that show a
//! maximum show that one, and mark which it is.

use std::collections::HashMap;

use profile_store::{Layer, OpProfile, Profile, Resolution, views};

/// The layer whose requests the `slowest` section holds.
const SLOWEST_LAYER: &str = "fuse";

/// Each operation's slowest request, in cycles, where the profile records it.
#[derive(Debug, Clone, Default)]
pub struct Maxima(HashMap<String, f64>);

impl Maxima {
    /// The maxima `p` records (none where it has no `slowest` section, an unreadable one, or
    /// no clock rate to turn its nanoseconds into cycles).
    pub fn of(p: &Profile) -> Maxima {
        let (Some(hz), Ok(Some(records))) = (p.cycles_per_sec, crate::slow::slowest_of(p)) else {
            return Maxima::default();
        };
        let mut m: HashMap<String, f64> = HashMap::new();
        for r in records {
            let c = r.latency_ns as f64 * hz as f64 / 1e9;
            let e = m.entry(r.op).or_insert(0.0);
            *e = e.max(c);
        }
        Maxima(m)
    }

    /// The recorded maximum of `op` in the layer named `layer`, in cycles.
    pub fn recorded(&self, layer: &str, op: &str) -> Option<f64> {
        (layer == SLOWEST_LAYER)
            .then(|| self.0.get(op).copied())
            .flatten()
    }

    /// The estimated percentiles of `op` in `layer` ([`views::QUANTILES`]), the last its
    /// maximum: the recorded one where there is one ([`views::percentiles_with_max`]).
    pub fn percentiles(&self, layer: &Layer, op: &OpProfile) -> Option<[f64; 5]> {
        self.percentiles_in(&layer.name, layer.resolution, op)
    }

    /// [`Maxima::percentiles`] of `op`, of the layer named `layer` at `resolution`.
    pub fn percentiles_in(
        &self,
        layer: &str,
        resolution: Resolution,
        op: &OpProfile,
    ) -> Option<[f64; 5]> {
        views::percentiles_with_max(op, resolution, self.recorded(layer, &op.name))
    }

    /// Whether the maximum [`Maxima::percentiles`] gives for `op` is the recorded one.
    pub fn is_exact(&self, layer: &Layer, op: &OpProfile) -> bool {
        self.is_exact_in(&layer.name, layer.resolution, op)
    }

    /// [`Maxima::is_exact`] of `op`, of the layer named `layer` at `resolution`.
    pub fn is_exact_in(&self, layer: &str, resolution: Resolution, op: &OpProfile) -> bool {
        let Some(m) = self.recorded(layer, &op.name) else {
            return false;
        };
        self.percentiles_in(layer, resolution, op)
            .is_some_and(|p| p[4] == m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use profile_store::Section;

    #[test]
    fn the_slowest_request_is_the_maximum_of_its_operation_in_the_fuse_layer_only() {
        let mut p = Profile {
            cycles_per_sec: Some(1_000_000_000),
            ..Profile::default()
        };
        let mut fuse = Layer::new("fuse", Resolution::ONE);
        let mut o = OpProfile::new("OP_READ", 64, 1);
        // 100 reads around 2^15 cycles, one of 34 ms (bucket 25: 33.5-67.1 ms).
        o.epochs[0][15] = 100;
        o.epochs[0][25] = 1;
        o.count = 101;
        o.total = 100 * 40_000 + 34_000_000;
        fuse.ops.push(o.clone());
        let mut lower = fuse.clone();
        lower.name = "lower".into();
        p.layers = vec![fuse, lower];
        let mut s = Section::new(crate::slow::SLOWEST_SECTION);
        s.lines = vec![
            r#"{"seq":1,"time_unix_ns":0,"op":"OP_READ","latency_ns":34000000,"errno":0,"path":"/a","pid":1,"comm":"cat","uid":0,"offset":0,"size":4096,"inner":[]}"#.into(),
        ];
        p.sections.push(s);
        let m = Maxima::of(&p);
        let (fuse, lower) = (&p.layers[0], &p.layers[1]);
        let pc = m.percentiles(fuse, &fuse.ops[0]).unwrap();
        assert_eq!(pc[4], 34_000_000.0);
        assert!(pc.iter().all(|&v| v <= 34_000_000.0));
        assert!(m.is_exact(fuse, &fuse.ops[0]));
        // The lower layer's calls are not the slowest requests: its maximum is a bound.
        assert!(!m.is_exact(lower, &lower.ops[0]));
        assert!(m.percentiles(lower, &lower.ops[0]).unwrap()[4] > 34_000_000.0);
        assert!(Maxima::of(&Profile::default()).0.is_empty());
    }
}
