//! Value parsers of the shared options: durations with their unit, resolutions.

use std::time::Duration;

use profile_store::Resolution;
use profile_store::duration::{self, Span};

use crate::daemon::mount::{SetupError, setup_err};

/// A clap value parser for `--resolution`: 1, 2, 4 or 8 buckets per power of two.
pub fn parse_resolution(s: &str) -> Result<u32, String> {
    s.parse::<u32>()
        .ok()
        .filter(|r| Resolution::new(*r).is_some())
        .ok_or_else(|| format!("'{s}' is not 1, 2, 4 or 8"))
}

/// A clap value parser for a time option: a number and its unit (`2s`, `500ms`; see
/// [`profile_store::duration`]). A bare number, or cycles, are refused with a one-line hint.
pub fn time_arg(s: &str) -> Result<Duration, String> {
    duration::parse_time(s).map_err(|e| e.to_string())
}

/// A clap value parser for a length that may be a time or clock cycles (`2s`, `4096c`,
/// `2^32c`). A bare number is refused with a one-line hint.
pub fn span_arg(s: &str) -> Result<Span, String> {
    duration::parse(s).map_err(|e| e.to_string())
}

/// `v` seconds as a duration; `what` names the option in the error. (For options that still
/// take bare seconds; new ones take a unit through [`time_arg`].)
pub fn secs(v: f64, what: &str) -> Result<Duration, SetupError> {
    Duration::try_from_secs_f64(v)
        .map_err(|_| setup_err(format!("--{what} {v}: not a number of seconds")))
}
