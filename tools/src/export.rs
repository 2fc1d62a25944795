//! `fsprof export`: a profile in another format.
//!
//! * `text`, `json`: the profile formats of `docs/format.md` (written by profile-store).
//! * `csv`: one row per non-empty (layer, operation, epoch, bucket) cell, with the bucket's
//!   bounds in cycles (and seconds when the clock rate is known). The per-operation table is
//!   `fsprof summary --format csv`.
//! * `prometheus`: the text exposition format, as the daemons' `--metrics` endpoints serve it:
//!   one histogram per operation and layer in `fsprof_operation_latency_seconds` (labels `layer`
//!   and `op`), `fsprof_operation_calls_total`, the clock, the layers' resolutions, and the
//!   errors, slow-log drops and RAIF health where the profile holds them
//!   ([`profile_store::prometheus`] lists the families and the bucket mapping). Needs the clock
//!   rate.

use std::fmt::Write as _;
use std::path::Path;
use std::path::PathBuf;
use std::str::FromStr;

use profile_store::{Profile, json, text};

use crate::error::Error;
use crate::input::Loaded;
use crate::summary::csv_field;
use crate::units::Buckets;

/// `fsprof export`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportConfig {
    /// The profile.
    pub input: String,
    /// Output format.
    pub format: ExportFormat,
    /// Output file; standard output when `None` or `-`.
    pub output: Option<PathBuf>,
}

/// Export formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    /// The versioned text profile.
    Text,
    /// The JSON profile.
    Json,
    /// Long-format CSV of bucket counts.
    Csv,
    /// Prometheus text exposition.
    Prometheus,
}

impl FromStr for ExportFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "text" => Ok(ExportFormat::Text),
            "json" => Ok(ExportFormat::Json),
            "csv" => Ok(ExportFormat::Csv),
            "prometheus" | "prom" => Ok(ExportFormat::Prometheus),
            _ => Err(format!(
                "unknown format '{s}' (json, csv, text, prometheus)"
            )),
        }
    }
}

/// Writes `p` in `format`. `name` is the input's name, for errors.
pub fn export(p: &Profile, format: ExportFormat, name: &str) -> Result<String, Error> {
    Ok(match format {
        ExportFormat::Text => text::write(p),
        ExportFormat::Json => json::write(p),
        ExportFormat::Csv => csv(p),
        ExportFormat::Prometheus => {
            let hz = p.cycles_per_sec.ok_or_else(|| {
                Error::usage(
                    "export --format prometheus",
                    format!(
                        "{name} has no clock rate (cycles_per_sec), and Prometheus buckets are in \
                         seconds: give --cycles-per-sec"
                    ),
                )
            })?;
            profile_store::prometheus::exposition(p, hz)
        }
    })
}

/// Writes `p` to the file `path`: JSON when its name ends in `.json`, else the text format
/// (what `--save` and `--output` of the commands that make profiles write).
pub fn save(path: &Path, p: &Profile) -> Result<(), Error> {
    profile_store::save::save(path, p).map_err(|e| Error::output(path.display().to_string(), e))
}

fn csv(p: &Profile) -> String {
    let hz = p.cycles_per_sec;
    let mut out =
        String::from("layer,operation,epoch,bucket,lo_cycles,hi_cycles,lo_secs,hi_secs,calls\n");
    for l in &p.layers {
        let geo = Buckets::of(l);
        for o in l.ops_in_listing_order() {
            for (e, row) in o.epochs.iter().enumerate() {
                for (b, &n) in row.iter().enumerate() {
                    if n == 0 {
                        continue;
                    }
                    let (lo, hi) = (geo.lo(b), geo.hi(b));
                    let secs =
                        |c: f64| hz.map_or(String::new(), |hz| format!("{:e}", c / hz as f64));
                    let _ = writeln!(
                        out,
                        "{},{},{e},{b},{lo},{hi},{},{},{n}",
                        csv_field(&l.name),
                        o.name,
                        secs(lo),
                        secs(hi)
                    );
                }
            }
        }
    }
    out
}

/// `fsprof export`: writes the profile in another format to a file or to `out`.
pub fn run(p: &Loaded, c: &ExportConfig, out: &mut String) -> Result<(), Error> {
    let text = export(&p.profile, c.format, &p.name)?;
    match &c.output {
        Some(path) if path != Path::new("-") => {
            std::fs::write(path, text).map_err(|e| Error::output(path.display().to_string(), e))
        }
        _ => {
            out.push_str(&text);
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use profile_store::{Layer, OpProfile, Resolution};

    fn profile(hz: Option<u64>) -> Profile {
        let mut l = Layer::new("fuse", Resolution::ONE);
        let mut o = OpProfile::new("OP_READ", 64, 1);
        o.count = 4;
        o.total = 100;
        o.epochs[0][4] = 3;
        o.epochs[0][5] = 1;
        l.ops.push(o);
        Profile {
            cycles_per_sec: hz,
            layers: vec![l],
            ..Profile::default()
        }
    }

    #[test]
    fn prometheus_histogram() {
        let s = export(&profile(Some(1_000)), ExportFormat::Prometheus, "p").unwrap();
        let lines: Vec<&str> = s.lines().collect();
        assert!(lines.contains(&"# TYPE fsprof_operation_latency_seconds histogram"));
        assert!(lines.contains(&"fsprof_clock_cycles_per_second 1000"));
        assert!(lines.contains(&"fsprof_layer_buckets_per_octave{layer=\"fuse\"} 1"));
        // Bucket 3 ([8, 16) cycles) ends at 0.016 s: nothing yet; bucket 4 ends at 0.032 s: 3.
        assert!(lines.contains(
            &"fsprof_operation_latency_seconds_bucket{layer=\"fuse\",op=\"OP_READ\",le=\"1.6e-2\"} 0"
        ));
        assert!(lines.contains(
            &"fsprof_operation_latency_seconds_bucket{layer=\"fuse\",op=\"OP_READ\",le=\"3.2e-2\"} 3"
        ));
        assert!(lines.contains(
            &"fsprof_operation_latency_seconds_bucket{layer=\"fuse\",op=\"OP_READ\",le=\"+Inf\"} 4"
        ));
        assert!(
            lines.contains(
                &"fsprof_operation_latency_seconds_sum{layer=\"fuse\",op=\"OP_READ\"} 1e-1"
            )
        );
        assert!(
            lines.contains(
                &"fsprof_operation_latency_seconds_count{layer=\"fuse\",op=\"OP_READ\"} 4"
            )
        );
        assert!(lines.contains(&"fsprof_operation_calls_total{layer=\"fuse\",op=\"OP_READ\"} 4"));
        // Buckets 3 (the empty one below the first call's) to 63, then +Inf; bucket 2 and
        // below are left out.
        assert_eq!(
            lines.iter().filter(|l| l.contains("_bucket{")).count(),
            61 + 1
        );
        assert!(!lines.iter().any(|l| l.contains("le=\"8e-3\"")));
        // The maximum is at most the slowest bucket's upper bound, 64 cycles, and at most what
        // the total leaves the slowest call: 100 cycles less the other three's least, 3 · 16.
        assert!(lines.contains(
            &"fsprof_operation_latency_estimated_seconds{layer=\"fuse\",op=\"OP_READ\",q=\"1\"} 5.2e-2"
        ), "{s}");
        // Cumulative counts never decrease.
        let counts: Vec<u64> = lines
            .iter()
            .filter(|l| l.contains("_bucket{"))
            .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
            .collect();
        assert!(counts.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn prometheus_has_one_infinite_bucket_even_past_f64_bounds() {
        // A hand-made layer of 1100 buckets at resolution 1: bounds from bucket 1023 on are
        // past f64's range. One le="+Inf" per operation, cumulative counts, the right total.
        let l = crate::testutil::wide_read_layer(100, &[(4, 1), (1022, 2), (1050, 3)]);
        let p = Profile {
            cycles_per_sec: Some(1000),
            layers: vec![l],
            ..Profile::default()
        };
        let s = export(&p, ExportFormat::Prometheus, "p").unwrap();
        let buckets: Vec<&str> = s.lines().filter(|l| l.contains("_bucket{")).collect();
        assert_eq!(
            buckets.iter().filter(|l| l.contains("le=\"+Inf\"")).count(),
            1
        );
        assert!(
            buckets
                .iter()
                .all(|l| !l.contains("NaN") && !l.contains("inf"))
        );
        // Buckets 3 (below the first call's) to 1022 have finite bounds; then +Inf.
        assert_eq!(buckets.len(), 1020 + 1);
        assert!(buckets[1019].ends_with(" 3"), "{}", buckets[1019]);
        assert!(
            buckets[1020].ends_with("le=\"+Inf\"} 6"),
            "{}",
            buckets[1020]
        );
        let mut les: Vec<&str> = buckets
            .iter()
            .map(|l| l.split("le=").nth(1).unwrap())
            .collect();
        les.dedup();
        assert_eq!(les.len(), buckets.len(), "every le is distinct");
    }

    #[test]
    fn prometheus_needs_a_clock_rate() {
        let e = export(&profile(None), ExportFormat::Prometheus, "p.fsprof").unwrap_err();
        assert!(e.to_string().contains("--cycles-per-sec"));
        assert!(!e.to_string().contains('\n'));
    }

    #[test]
    fn csv_rows_for_non_empty_cells() {
        let s = export(&profile(None), ExportFormat::Csv, "p").unwrap();
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[1], "fuse,OP_READ,0,4,16,32,,,3");
        let s = export(&profile(Some(1000)), ExportFormat::Csv, "p").unwrap();
        assert_eq!(
            s.lines().nth(1).unwrap(),
            "fuse,OP_READ,0,4,16,32,1.6e-2,3.2e-2,3"
        );
    }
}
