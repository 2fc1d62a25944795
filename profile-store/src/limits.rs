//! How large a profile may be: what the parsers hold in memory ([`MAX_CELLS`], charged through
//! [`Budget`]) and what a recorder may write so that the tools can read it back
//! ([`check_recordable`]).

/// Most buckets per line the parser accepts: 8 per octave × 64 octaves, the most any resolution
/// has. (It also keeps every bucket bound and mid-point finite as an `f64`, which past bucket
/// 1023 of resolution 1 they are not.)
pub const MAX_BUCKETS: usize = 512;

/// Most epochs per layer the parser accepts (a recorder keeps at most this many, too).
pub const MAX_EPOCHS: usize = 65_536;

/// Most bucket counts a parsed profile may hold: operations × epochs × (buckets +
/// [`ARRAY_OVERHEAD`]), summed over its layers. About 256 MiB of memory.
pub const MAX_CELLS: u64 = 1 << 25;

/// What one epoch array costs against [`MAX_CELLS`] beyond its buckets: its vector header and
/// allocation, in 8-byte words, so that arrays of one bucket are bounded too.
pub const ARRAY_OVERHEAD: u64 = 8;

/// The most bucket counts a recorder's profile may reach and still be read back: the parser's
/// [`MAX_CELLS`], less room for names and metadata.
pub const RECORDABLE_CELLS: u64 = MAX_CELLS / 8 * 7;

/// Checks that a profile of `layers` layers of `ops` operations and `epochs` epochs, plus
/// `flat` layers of one epoch, each epoch of `buckets` buckets (every operation called: the
/// worst case), stays within [`RECORDABLE_CELLS`], so that the tools can read it and taking it
/// costs its recorder at most a few hundred MiB; otherwise says so, with the most epochs (or
/// layers) that would fit.
pub fn check_recordable(
    layers: usize,
    flat: usize,
    ops: usize,
    buckets: usize,
    epochs: usize,
) -> Result<(), String> {
    let per_array = (ops as u64).saturating_mul(buckets as u64 + ARRAY_OVERHEAD);
    let arrays = (layers as u64)
        .saturating_mul(epochs as u64)
        .saturating_add(flat as u64);
    let cells = arrays.saturating_mul(per_array);
    if cells <= RECORDABLE_CELLS {
        return Ok(());
    }
    let room = (RECORDABLE_CELLS / per_array.max(1)).saturating_sub(flat as u64);
    let hint = if epochs > 1 && layers > 0 && room / layers as u64 > 0 {
        format!("--max-epochs: at most {} fit", room / layers as u64)
    } else {
        let n = RECORDABLE_CELLS / per_array.max(1) / epochs.max(1) as u64;
        if epochs > 1 {
            format!("layers: at most {n} of {epochs} epochs fit")
        } else {
            format!("layers: at most {n} fit")
        }
    };
    Err(format!(
        "layers={layers} epochs={epochs} (and {flat} of one epoch) operations={ops} \
         buckets={buckets}: up to {cells} bucket counts, more than the {RECORDABLE_CELLS} a \
         profile holds ({hint})"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::{parse, write};
    use crate::{Layer, OpProfile, Profile, Resolution};

    #[test]
    fn a_recordable_profile_reads_back_and_a_larger_one_is_named() {
        assert!(check_recordable(2, 0, 38, 64, 256).is_ok());
        // The default --by (64 keyed layers and `other`) with --epoch: keyed layers are flat.
        assert!(check_recordable(1, 65, 38, 64, 256).is_ok());
        assert_eq!(
            check_recordable(1, 0, 38, 64, 65_536).unwrap_err(),
            "layers=1 epochs=65536 (and 0 of one epoch) operations=38 buckets=64: up to \
             179306496 bucket counts, more than the 29360128 a profile holds (--max-epochs: at \
             most 10731 fit)"
        );
        assert!(
            check_recordable(1, 8193, 38, 128, 1)
                .unwrap_err()
                .ends_with("(layers: at most 5681 fit)")
        );
        // The most that fits: written and parsed back, names and metadata included.
        let fit = (RECORDABLE_CELLS / (38 * (64 + ARRAY_OVERHEAD))) as usize;
        assert!(check_recordable(1, 0, 38, 64, fit).is_ok());
        assert!(check_recordable(1, 0, 38, 64, fit + 1).is_err());
        let mut l = Layer::new("fuse", Resolution::ONE);
        l.epoch_cycles = 1000;
        l.epochs = fit;
        for i in 0..38 {
            let mut o = OpProfile::new(format!("OP_NUMBER_{i}"), 64, fit);
            o.count = 1;
            o.epochs[fit - 1][5] = 1;
            l.ops.push(o);
        }
        let p = Profile {
            cycles_per_sec: Some(1_000_000_000),
            layers: vec![l],
            ..Profile::default()
        };
        let back = parse(&write(&p)).expect("a recordable profile parses");
        assert_eq!(back.layers[0].epochs, fit);
    }
}

/// The memory a parser has spent, in bucket counts (see [`MAX_CELLS`]).
#[derive(Debug, Default)]
pub(crate) struct Budget {
    used: u64,
}

impl Budget {
    /// Takes `arrays` epoch arrays of `buckets` counts from the budget, or says why it cannot.
    pub(crate) fn charge(&mut self, arrays: u64, buckets: usize) -> Result<(), String> {
        let cost = arrays.saturating_mul(buckets as u64 + ARRAY_OVERHEAD);
        match self.used.checked_add(cost) {
            Some(total) if total <= MAX_CELLS => {
                self.used = total;
                Ok(())
            }
            _ => Err(format!(
                "profile too large: more than {MAX_CELLS} bucket counts (operations x epochs x \
                 buckets), the most this parser holds in memory"
            )),
        }
    }

    /// Takes what `bytes` of names, keys and values kept by the parser cost, in 8-byte words
    /// with one array's overhead, so that endless metadata is bounded as well as counts.
    pub(crate) fn charge_text(&mut self, bytes: usize) -> Result<(), String> {
        self.charge(1, bytes.div_ceil(8))
    }
}
