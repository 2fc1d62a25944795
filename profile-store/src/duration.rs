//! Durations as every command line of the project writes them (`docs/format.md#durations`): a
//! number and a unit.
//!
//! Time units are `ns`, `us` (or `µs`), `ms`, `s` and `m` (minutes); the number may have a
//! fraction (`1.5s`, `0.25ms`). Cycles of the profile clock are spelled `c`: `4096c`, or a power
//! of two as the thesis wrote epoch lengths, `2^32c`. A bare number has no unit and is refused
//! with a one-line hint, so `--epoch 2` can never silently mean two cycles.
//!
//! ```
//! use profile_store::duration::{self, Span};
//! use std::time::Duration;
//!
//! assert_eq!(duration::parse("500ms"), Ok(Span::Time(Duration::from_millis(500))));
//! assert_eq!(duration::parse("2^32c"), Ok(Span::Cycles(1 << 32)));
//! assert_eq!(duration::parse_time("1.5s"), Ok(Duration::from_millis(1500)));
//! assert!(duration::parse("2").unwrap_err().to_string().contains("no unit"));
//! assert!(duration::parse_time("4096c").is_err()); // cycles where only time makes sense
//! ```

use std::fmt;
use std::time::Duration;

/// A parsed duration: a time, or a number of clock cycles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Span {
    /// A time (`ns`, `us`, `ms`, `s`, `m`).
    Time(Duration),
    /// Cycles of the profile clock (`c`).
    Cycles(u64),
}

impl Span {
    /// This span in cycles of a clock running at `cycles_per_sec` (rounded down; saturating at
    /// `u64::MAX`).
    pub fn to_cycles(self, cycles_per_sec: u64) -> u64 {
        match self {
            Span::Cycles(c) => c,
            Span::Time(d) => {
                let c = d.as_nanos() * u128::from(cycles_per_sec) / 1_000_000_000;
                u64::try_from(c).unwrap_or(u64::MAX)
            }
        }
    }
}

/// Why a duration was refused: one line, naming the text and what was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DurationError(String);

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DurationError {}

/// The time units, longest suffix first so that `ms` is not read as `m`, and their length in
/// nanoseconds.
const UNITS: [(&str, u128); 6] = [
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
];

/// The longest duration accepted (about 584 years: what fits in `u64` nanoseconds).
const MAX_NANOS: u128 = u64::MAX as u128;

/// Parses `s` as a time or a number of cycles (see the module docs).
pub fn parse(s: &str) -> Result<Span, DurationError> {
    let t = s.trim();
    let expected = || {
        DurationError(format!(
            "bad duration '{t}': expected a number and a unit (ns, us, ms, s, m; c for cycles), \
             e.g. 2s, 500ms or 4096c"
        ))
    };
    if t.is_empty() {
        return Err(DurationError(
            "empty duration: expected a number and a unit, e.g. 2s or 500ms".into(),
        ));
    }
    if t.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        || t.starts_with("2^") && !t.ends_with('c')
    {
        let hint = if t.starts_with("2^") { "c" } else { "s" };
        return Err(DurationError(format!(
            "duration '{t}' has no unit: write {t}{hint} (units: ns, us, ms, s, m; c for cycles)"
        )));
    }
    if let Some(num) = t.strip_suffix('c') {
        let cycles = if let Some(exp) = num.strip_prefix("2^") {
            let e: u32 = digits(exp).ok_or_else(expected)?;
            if e > 63 {
                return Err(DurationError(format!(
                    "duration '{t}' is too long: at most 2^63c"
                )));
            }
            1u64 << e
        } else {
            digits(num).ok_or_else(expected)?
        };
        return Ok(Span::Cycles(cycles));
    }
    let (num, unit_ns) = UNITS
        .iter()
        .find_map(|(suf, ns)| t.strip_suffix(suf).map(|n| (n, *ns)))
        .ok_or_else(expected)?;
    let nanos = decimal_times(num, unit_ns).ok_or_else(expected)?;
    if nanos > MAX_NANOS {
        return Err(DurationError(format!("duration '{t}' is too long")));
    }
    Ok(Span::Time(Duration::from_nanos(nanos as u64)))
}

/// Parses `s` as a time: like [`parse`], but cycles are refused (for timeouts, intervals and
/// pauses, which the cycle counter does not measure).
pub fn parse_time(s: &str) -> Result<Duration, DurationError> {
    match parse(s)? {
        Span::Time(d) => Ok(d),
        Span::Cycles(_) => Err(DurationError(format!(
            "duration '{}' is in cycles; this option takes a time (ns, us, ms, s, m)",
            s.trim()
        ))),
    }
}

/// A plain decimal integer (digits only: no sign, no spaces), or `None`.
fn digits<T: std::str::FromStr>(s: &str) -> Option<T> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// `num × unit_ns` for a decimal `num` (`12`, `1.5`, `.25`), exactly, truncated to whole
/// nanoseconds; `None` if `num` is not such a number.
fn decimal_times(num: &str, unit_ns: u128) -> Option<u128> {
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    if !int.bytes().all(|b| b.is_ascii_digit()) || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let int_v: u128 = if int.is_empty() {
        0
    } else {
        int.parse::<u64>().ok()?.into()
    };
    let mut total = int_v.checked_mul(unit_ns)?;
    // Each fractional digit adds digit × unit / 10^k; digits beyond nanosecond precision add 0.
    let mut scale = unit_ns;
    for d in frac.bytes() {
        scale /= 10;
        total += u128::from(d - b'0') * scale;
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn time(s: &str) -> Duration {
        match parse(s) {
            Ok(Span::Time(d)) => d,
            other => panic!("{s}: {other:?}"),
        }
    }

    #[test]
    fn time_units() {
        assert_eq!(time("100ns"), Duration::from_nanos(100));
        assert_eq!(time("250us"), Duration::from_micros(250));
        assert_eq!(time("250µs"), Duration::from_micros(250));
        assert_eq!(time("500ms"), Duration::from_millis(500));
        assert_eq!(time("2s"), Duration::from_secs(2));
        assert_eq!(time("3m"), Duration::from_secs(180));
        assert_eq!(time("1.5s"), Duration::from_millis(1500));
        assert_eq!(time(".25ms"), Duration::from_micros(250));
        assert_eq!(time("0s"), Duration::ZERO);
        assert_eq!(time(" 2s "), Duration::from_secs(2));
        assert_eq!(time("1.0000000009s"), Duration::from_nanos(1_000_000_000));
    }

    #[test]
    fn cycles() {
        assert_eq!(parse("4096c"), Ok(Span::Cycles(4096)));
        assert_eq!(parse("2^32c"), Ok(Span::Cycles(1 << 32)));
        assert_eq!(parse("2^63c"), Ok(Span::Cycles(1 << 63)));
        assert!(parse("2^64c").unwrap_err().to_string().contains("too long"));
        assert!(parse("1.5c").is_err());
        assert!(parse("-3c").is_err());
    }

    #[test]
    fn bare_numbers_get_a_hint() {
        for s in ["2", "1.5", "0", "2^32"] {
            let e = parse(s).unwrap_err().to_string();
            assert!(e.contains("has no unit"), "{s}: {e}");
            assert!(!e.contains('\n'));
        }
        assert!(parse("2^32").unwrap_err().to_string().contains("2^32c"));
        assert!(parse("2").unwrap_err().to_string().contains("2s"));
    }

    #[test]
    fn malformed() {
        for s in [
            "", " ", "s", "ms", "-1s", "+1s", "1e3s", "1..2s", "soon", "2 s", "1h", "inf s",
            "NaNs", "2^xc", "2^c", "c", ".s",
        ] {
            assert!(parse(s).is_err(), "{s:?} accepted");
        }
        assert!(parse("99999999999999999999s").is_err());
        assert!(
            parse("18446744074s")
                .unwrap_err()
                .to_string()
                .contains("too long")
        );
    }

    #[test]
    fn time_refuses_cycles() {
        assert!(
            parse_time("4096c")
                .unwrap_err()
                .to_string()
                .contains("in cycles")
        );
        assert_eq!(parse_time("2s"), Ok(Duration::from_secs(2)));
    }

    #[test]
    fn to_cycles() {
        let hz = 2_000_000_000;
        assert_eq!(
            Span::Time(Duration::from_secs(2)).to_cycles(hz),
            4_000_000_000
        );
        assert_eq!(Span::Time(Duration::from_nanos(1)).to_cycles(hz), 2);
        assert_eq!(Span::Cycles(7).to_cycles(hz), 7);
        assert_eq!(
            Span::Time(Duration::from_secs(u64::MAX / 2)).to_cycles(u64::MAX),
            u64::MAX
        );
    }
}
