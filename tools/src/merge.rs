//! `fsprof merge A B ... -o ALL`: the sum of profiles, e.g. of many machines
//! ([`profile_store::merge`] says how layers, clocks and epochs are summed).

use std::fmt::Write as _;
use std::path::PathBuf;

use crate::error::Error;
use crate::input::Loaded;

/// `fsprof merge`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeConfig {
    /// The profiles (files, mounts, URLs, `-`), at least two.
    pub inputs: Vec<String>,
    /// Where the sum goes (JSON if the name ends in `.json`, else text); standard output if
    /// `None`.
    pub output: Option<PathBuf>,
}

/// Sums `loaded` into the output; the report (what was summed, what was converted) goes to
/// `out` when the sum is written to a file, to the log otherwise.
pub fn run(loaded: &[Loaded], c: &MergeConfig, out: &mut String) -> Result<(), Error> {
    let profiles: Vec<_> = loaded.iter().map(|l| l.profile.clone()).collect();
    let merged = profile_store::merge::merge(&profiles).map_err(|e| {
        // Name the inputs the merge error numbers.
        let mut e = e;
        for (i, l) in loaded.iter().enumerate().rev() {
            e = e.replace(&format!("profile {}", i + 1), &l.name);
        }
        Error::usage("merge", e)
    })?;
    let mut report = String::new();
    let p = &merged.profile;
    let calls: u64 = p.layers.iter().map(|l| l.total_count()).sum();
    let _ = writeln!(
        report,
        "merged {} profiles: {} layer(s) ({}), {calls} calls",
        loaded.len(),
        p.layers.len(),
        p.layers
            .iter()
            .map(|l| l.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    for &i in &merged.converted {
        let hz = |l: &Loaded| l.profile.cycles_per_sec.unwrap_or(0);
        let _ = writeln!(
            report,
            "{}: clock rate {} Hz converted to {} Hz: each call's bucket known within one \
             (a factor of 2^(1/r) in latency)",
            loaded[i].name,
            hz(&loaded[i]),
            hz(&loaded[0])
        );
    }
    for l in &merged.folded {
        let _ = writeln!(
            report,
            "layer {l}: epoch lengths differ: time-lapse epochs folded into one"
        );
    }
    if merged.dropped_sections > 0 {
        let _ = writeln!(
            report,
            "{} section(s) (hot files, slow records, breakdowns...) left out: they are per \
             machine",
            merged.dropped_sections
        );
    }
    match &c.output {
        Some(path) => {
            crate::export::save(path, p)?;
            out.push_str(&report);
            let _ = writeln!(out, "written to {}", path.display());
        }
        None => {
            for line in report.lines() {
                log::info!("{line}");
            }
            out.push_str(&profile_store::text::write(p));
        }
    }
    Ok(())
}
