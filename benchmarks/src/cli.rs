//! Command-line pieces the binaries share: durations with a unit.

use std::time::Duration;

/// A clap value parser for a time with its unit (`65s`, `500ms`, `1m`; see
/// [`profile_store::duration`]); a bare number is refused with a one-line hint.
pub fn time_arg(s: &str) -> Result<Duration, String> {
    profile_store::duration::parse_time(s).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_need_a_unit() {
        assert_eq!(time_arg("65s"), Ok(Duration::from_secs(65)));
        assert!(time_arg("65").unwrap_err().contains("write 65s"));
    }
}
