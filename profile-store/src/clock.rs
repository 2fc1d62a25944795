//! The latency clock: a cycle counter where the CPU has one, calibrated once per process.
//!
//! | target   | counter                                          | [`ClockKind`] |
//! |----------|--------------------------------------------------|---------------|
//! | x86_64   | `rdtsc`                                          | `tsc`         |
//! | aarch64  | the virtual counter `cntvct_el0`                 | `cntvct`      |
//! | other    | `clock_gettime(CLOCK_MONOTONIC_RAW)` nanoseconds | `ns`          |
//!
//! The counter's rate is measured against `CLOCK_MONOTONIC` (through `Instant`) the first time
//! [`ClockInfo::get`] is called, so every consumer can convert cycles to seconds. On x86_64 the
//! `constant_tsc` and `nonstop_tsc` CPU flags are read from `/proc/cpuinfo` and recorded: without
//! them cycle counts taken on different cores or across frequency changes are not comparable.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Which hardware or software counter [`now`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClockKind {
    /// The x86 time-stamp counter (`rdtsc`).
    Tsc,
    /// The ARM generic timer's virtual count register.
    Cntvct,
    /// Monotonic nanoseconds; one "cycle" is one nanosecond.
    Ns,
}

impl ClockKind {
    /// The kind of the counter compiled into this build.
    pub const NATIVE: ClockKind = if cfg!(target_arch = "x86_64") {
        ClockKind::Tsc
    } else if cfg!(target_arch = "aarch64") {
        ClockKind::Cntvct
    } else {
        ClockKind::Ns
    };

    /// The name used in profiles (`tsc`, `cntvct`, `ns`).
    pub fn as_str(self) -> &'static str {
        match self {
            ClockKind::Tsc => "tsc",
            ClockKind::Cntvct => "cntvct",
            ClockKind::Ns => "ns",
        }
    }

    /// Parses a profile's `clock=` value.
    pub fn parse(s: &str) -> Option<ClockKind> {
        match s {
            "tsc" => Some(ClockKind::Tsc),
            "cntvct" => Some(ClockKind::Cntvct),
            "ns" => Some(ClockKind::Ns),
            _ => None,
        }
    }
}

impl std::fmt::Display for ClockKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Reads the latency counter. This is the hot-path call: one instruction on x86_64 and aarch64.
#[inline(always)]
#[allow(unsafe_code)]
pub fn now() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `rdtsc` is available on every x86_64 CPU, reads a register and has no
        // memory effects. It is not serializing, which is what we want: the profiled code is
        // long compared with the few instructions it may overlap.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(target_arch = "aarch64")]
    {
        let v: u64;
        // SAFETY: `cntvct_el0` is readable from EL0 on Linux (the kernel enables user access
        // to the virtual counter); the instruction only writes the output register.
        unsafe { core::arch::asm!("mrs {}, cntvct_el0", out(reg) v, options(nomem, nostack)) };
        v
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let mut ts = std::mem::MaybeUninit::<libc::timespec>::uninit();
        // SAFETY: `clock_gettime` writes one `timespec` through the valid, exclusive pointer
        // it is given and touches no other memory. CLOCK_MONOTONIC_RAW (Linux 2.6.28 and
        // later) is never slewed by NTP, unlike the CLOCK_MONOTONIC behind `Instant`. The
        // value is read only when the call reports success, which it does for a valid clock
        // id and pointer.
        unsafe {
            if libc::clock_gettime(libc::CLOCK_MONOTONIC_RAW, ts.as_mut_ptr()) != 0 {
                return 0;
            }
            let ts = ts.assume_init();
            (ts.tv_sec as u64)
                .wrapping_mul(1_000_000_000)
                .wrapping_add(ts.tv_nsec as u64)
        }
    }
}

/// What is known about the process's clock: kind, measured rate and TSC invariance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockInfo {
    /// The counter [`now`] reads.
    pub kind: ClockKind,
    /// Counter ticks per second, measured against `CLOCK_MONOTONIC` at start-up.
    pub cycles_per_sec: u64,
    /// Whether the TSC is invariant (`constant_tsc` and `nonstop_tsc`); `None` off x86_64.
    pub invariant_tsc: Option<bool>,
}

/// How long [`ClockInfo::get`] watches the counter against the monotonic clock.
const CALIBRATION: Duration = Duration::from_millis(25);

impl ClockInfo {
    /// The process-wide clock description, calibrated on first use (about 25 ms, once).
    pub fn get() -> &'static ClockInfo {
        static INFO: OnceLock<ClockInfo> = OnceLock::new();
        INFO.get_or_init(ClockInfo::calibrate)
    }

    fn calibrate() -> ClockInfo {
        let kind = ClockKind::NATIVE;
        let cycles_per_sec = if kind == ClockKind::Ns {
            1_000_000_000
        } else {
            measure_rate(CALIBRATION)
        };
        let invariant_tsc = (kind == ClockKind::Tsc).then(|| {
            std::fs::read_to_string("/proc/cpuinfo")
                .map(|s| cpuinfo_has_invariant_tsc(&s))
                .unwrap_or(false)
        });
        log::debug!("clock {kind}: {cycles_per_sec} cycles/s, invariant TSC {invariant_tsc:?}");
        ClockInfo {
            kind,
            cycles_per_sec,
            invariant_tsc,
        }
    }

    /// Converts a cycle count to seconds.
    pub fn cycles_to_secs(&self, cycles: f64) -> f64 {
        cycles / self.cycles_per_sec as f64
    }

    /// Converts seconds to cycles (rounded down, saturating).
    pub fn secs_to_cycles(&self, secs: f64) -> u64 {
        (secs * self.cycles_per_sec as f64) as u64
    }
}

/// Measures counter ticks per second over `span`, taking the narrower of the two bracketings of
/// each end point so scheduling noise at the edges does not skew the result.
fn measure_rate(span: Duration) -> u64 {
    let (t0, c0) = paired_reading();
    std::thread::sleep(span);
    let (t1, c1) = paired_reading();
    let ns = t1.duration_since(t0).as_nanos().max(1);
    let ticks = c1.wrapping_sub(c0) as u128;
    (ticks * 1_000_000_000 / ns) as u64
}

/// An `Instant` and the counter reading taken at the same moment: the middle of the narrowest of
/// a few `now(); Instant::now(); now()` brackets, so a preemption inside one bracket does not
/// skew it.
fn paired_reading() -> (Instant, u64) {
    let mut best: Option<(u64, Instant, u64)> = None;
    for _ in 0..8 {
        let a = now();
        let t = Instant::now();
        let b = now();
        let width = b.wrapping_sub(a);
        if best.is_none_or(|(w, _, _)| width < w) {
            best = Some((width, t, a.wrapping_add(width / 2)));
        }
    }
    let (_, t, c) = best.expect("eight tries");
    (t, c)
}

/// Whether a `/proc/cpuinfo` text lists both `constant_tsc` and `nonstop_tsc` for the first CPU.
pub fn cpuinfo_has_invariant_tsc(cpuinfo: &str) -> bool {
    let Some(flags) = cpuinfo.lines().find(|l| l.starts_with("flags")) else {
        return false;
    };
    let mut constant = false;
    let mut nonstop = false;
    for f in flags.split_whitespace() {
        constant |= f == "constant_tsc";
        nonstop |= f == "nonstop_tsc";
    }
    constant && nonstop
}

/// Parses a time-lapse epoch length with [`crate::duration::parse`]: a time (`2s`, `500ms`,
/// `250us`) or cycles (`4096c`, or a power of two as the thesis used, `2^32c`). A bare number
/// is refused (it has no unit). Returns cycles of a clock at `cycles_per_sec`; lengths below one
/// cycle are rejected.
pub fn parse_epoch_length(s: &str, cycles_per_sec: u64) -> Result<u64, String> {
    let span = crate::duration::parse(s).map_err(|e| e.to_string())?;
    match span.to_cycles(cycles_per_sec) {
        0 => Err(format!(
            "epoch length '{}' is shorter than one clock cycle",
            s.trim()
        )),
        c => Ok(c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_moves_forward_and_is_calibrated() {
        let info = ClockInfo::get();
        assert_eq!(info.kind, ClockKind::NATIVE);
        assert!(
            info.cycles_per_sec > 1_000_000,
            "rate {}",
            info.cycles_per_sec
        );
        let a = now();
        std::thread::sleep(Duration::from_millis(2));
        let b = now();
        assert!(b > a);
        if info.kind == ClockKind::Tsc {
            assert!(info.invariant_tsc.is_some());
        }
    }

    #[test]
    fn calibrated_rate_converts_counter_deltas_to_monotonic_time() {
        // A correctness check of the calibration, not of speed: counter ticks over a ~50 ms
        // sleep, converted with the calibrated rate, match what `Instant` (CLOCK_MONOTONIC)
        // measured, within 10%. Each end is the narrowest of a few brackets, so a preemption
        // between the two clocks' reads cannot skew it.
        let info = ClockInfo::get();
        let (t0, c0) = paired_reading();
        std::thread::sleep(Duration::from_millis(50));
        let (t1, c1) = paired_reading();
        let by_instant = t1.duration_since(t0).as_secs_f64();
        let by_counter = info.cycles_to_secs(c1.wrapping_sub(c0) as f64);
        let ratio = by_counter / by_instant;
        assert!(
            (0.9..=1.1).contains(&ratio),
            "counter says {by_counter} s, Instant {by_instant} s at {} cycles/s",
            info.cycles_per_sec
        );
    }

    #[test]
    fn cycles_and_seconds_convert_both_ways() {
        let info = ClockInfo {
            kind: ClockKind::Tsc,
            cycles_per_sec: 2_893_421_000,
            invariant_tsc: Some(true),
        };
        assert_eq!(info.cycles_to_secs(2_893_421_000.0), 1.0);
        assert_eq!(info.secs_to_cycles(1.0), 2_893_421_000);
        assert_eq!(info.secs_to_cycles(0.5), 1_446_710_500);
        assert_eq!(info.cycles_to_secs(0.0), 0.0);
        // Rounded down, saturating at both ends.
        assert_eq!(info.secs_to_cycles(-1.0), 0);
        assert_eq!(info.secs_to_cycles(1e30), u64::MAX);
        // Round trip within one cycle (f64 has 53 bits; these are below 2^53).
        for c in [
            1u64,
            1000,
            123_456_789,
            2_893_421_000,
            1 << 40,
            (1 << 53) - 1,
        ] {
            let back = info.secs_to_cycles(info.cycles_to_secs(c as f64));
            assert!(back.abs_diff(c) <= 1, "{c} -> {back}");
        }
        // And through the process's own calibrated clock.
        let own = ClockInfo::get();
        let c = own.cycles_per_sec * 3;
        assert!(own.secs_to_cycles(own.cycles_to_secs(c as f64)).abs_diff(c) <= 1);
    }

    #[test]
    fn cpuinfo_flags() {
        let yes = "processor\t: 0\nflags\t\t: fpu tsc constant_tsc nonstop_tsc rdtscp\n";
        let no = "processor\t: 0\nflags\t\t: fpu tsc constant_tsc rdtscp\n";
        assert!(cpuinfo_has_invariant_tsc(yes));
        assert!(!cpuinfo_has_invariant_tsc(no));
        assert!(!cpuinfo_has_invariant_tsc(""));
    }

    #[test]
    fn epoch_lengths() {
        let hz = 2_000_000_000;
        assert_eq!(parse_epoch_length("2^32c", hz), Ok(1 << 32));
        assert_eq!(parse_epoch_length("2s", hz), Ok(4_000_000_000));
        assert_eq!(parse_epoch_length("500ms", hz), Ok(1_000_000_000));
        assert_eq!(parse_epoch_length("1.5s", hz), Ok(3_000_000_000));
        assert_eq!(parse_epoch_length("1000c", hz), Ok(1000));
        assert!(
            parse_epoch_length("1000", hz)
                .unwrap_err()
                .contains("no unit")
        );
        assert!(parse_epoch_length("2", hz).unwrap_err().contains("no unit"));
        assert!(parse_epoch_length("0c", hz).is_err());
        assert!(parse_epoch_length("0s", hz).is_err());
        assert!(parse_epoch_length("2^64c", hz).is_err());
        assert!(parse_epoch_length("-1s", hz).is_err());
        assert!(parse_epoch_length("soon", hz).is_err());
        assert!(parse_epoch_length("0.1ns", hz).is_err());
    }
}
