//! Reports: Postmark's verbose and terse reports, reproduced number for number, and our extras
//! (sub-second phase times, latency percentiles, JSON).
//!
//! Postmark keeps times in whole seconds from `time()` (a phase that took less than a second
//! counts as 1 s), divides counts by them in integer arithmetic for the verbose report and in
//! `float` for the terse one, and sums bytes in a 32-bit `float`, printing it with `%.2f` after
//! scaling to kilobytes or megabytes. All of that is emulated here: `f32` arithmetic, then the
//! exact decimal value of the `f32` rounded to two places with ties to even, which is what glibc's
//! `printf` does and what Rust's `{:.2}` does (a test pins the tie cases).

use std::fmt::Write as _;

use serde::Serialize;

use crate::config::Config;
use crate::latency::LatencySummary;
use crate::workload::{Counters, Timeline};

const KILOBYTE: f32 = 1024.0;
const MEGABYTE: f32 = 1024.0 * 1024.0;

/// Postmark's `scalef()`: a float byte count as megabytes (above 1 MiB), kilobytes (non-zero)
/// or bytes (zero, printed `%f`).
pub fn scalef(i: f32) -> String {
    if i / MEGABYTE > 1.0 {
        format!("{:.2} megabytes", (i / MEGABYTE) as f64)
    } else if i / KILOBYTE != 0.0 {
        format!("{:.2} kilobytes", (i / KILOBYTE) as f64)
    } else {
        format!("{:.6} bytes", i as f64)
    }
}

/// Postmark's `diff_time()`: whole seconds between two `time()` readings, at least 1 (a zero
/// difference becomes 1 to avoid dividing by zero).
pub fn diff_time(t1: i64, t0: i64) -> i64 {
    let d = t1 - t0;
    if d != 0 { d } else { 1 }
}

/// Everything a report prints about one run (one client, or several aggregated).
#[derive(Debug, Clone, Serialize)]
pub struct RunSummary {
    /// The configuration the run used (each client's, before its directory was added).
    pub config: Config,
    /// Concurrent clients.
    pub clients: u32,
    /// Whether every transaction ran (false: "out of files").
    pub complete: bool,
    /// Files created before the transactions, all clients.
    pub creation_alone: u64,
    /// Transactions configured, all clients.
    pub transactions: u64,
    /// Files created, all clients.
    pub created: u64,
    /// Files read.
    pub read: u64,
    /// Files appended to.
    pub appended: u64,
    /// Files deleted.
    pub deleted: u64,
    /// Files deleted after the transactions.
    pub deletion_alone: u64,
    /// Bytes read, exact.
    pub bytes_read: u64,
    /// Bytes written, exact.
    pub bytes_written: u64,
    /// Bytes read as Postmark's 32-bit float sum (clients' sums added in `f32`).
    pub bytes_read_f32: f32,
    /// Bytes written as Postmark's 32-bit float sum.
    pub bytes_written_f32: f32,
    /// Sub-second phase times.
    pub seconds: Seconds,
    /// Postmark's whole-second times (`time()` differences, zero counted as 1).
    pub postmark_seconds: PostmarkSeconds,
    /// Per-operation latency percentiles.
    pub latency: Vec<LatencySummary>,
}

/// Phase times in seconds from the monotonic clock.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Seconds {
    /// Creation, transactions and deletion.
    pub total: f64,
    /// Creating the initial files.
    pub creation: f64,
    /// The transactions.
    pub transactions: f64,
    /// Deleting the remaining files.
    pub deletion: f64,
}

/// Postmark's whole-second phase times.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct PostmarkSeconds {
    /// `elapsed`.
    pub total: i64,
    /// Creation interval.
    pub creation: i64,
    /// `t_elapsed`.
    pub transactions: i64,
    /// Deletion interval.
    pub deletion: i64,
}

impl RunSummary {
    /// Builds the summary from each client's counters and timeline.
    pub fn new(
        config: &Config,
        clients: &[(Counters, u64, Timeline)],
        complete: bool,
        latency: Vec<LatencySummary>,
    ) -> RunSummary {
        let n = clients.len() as u64;
        let mut s = RunSummary {
            config: config.clone(),
            clients: n as u32,
            complete,
            creation_alone: config.number as u64 * n,
            transactions: config.transactions as u64 * n,
            created: 0,
            read: 0,
            appended: 0,
            deleted: 0,
            deletion_alone: 0,
            bytes_read: 0,
            bytes_written: 0,
            bytes_read_f32: 0.0,
            bytes_written_f32: 0.0,
            seconds: Seconds {
                total: 0.0,
                creation: 0.0,
                transactions: 0.0,
                deletion: 0.0,
            },
            postmark_seconds: PostmarkSeconds {
                total: 1,
                creation: 1,
                transactions: 1,
                deletion: 1,
            },
            latency,
        };
        for (c, deleted_in_transactions, _) in clients {
            s.created += c.created;
            s.read += c.read;
            s.appended += c.appended;
            s.deleted += c.deleted;
            s.deletion_alone += c.deleted - deleted_in_transactions;
            s.bytes_read += c.bytes_read;
            s.bytes_written += c.bytes_written;
            s.bytes_read_f32 += c.bytes_read_f32;
            s.bytes_written_f32 += c.bytes_written_f32;
        }
        let tl: Vec<&Timeline> = clients.iter().map(|(_, _, t)| t).collect();
        if let (Some(start), Some(t_start), Some(t_end), Some(end)) = (
            tl.iter().map(|t| t.start).min_by_key(|s| s.instant),
            tl.iter().map(|t| t.t_start).max_by_key(|s| s.instant),
            tl.iter().map(|t| t.t_end).max_by_key(|s| s.instant),
            tl.iter().map(|t| t.end).max_by_key(|s| s.instant),
        ) {
            let secs = |a: crate::workload::Stamp, b: crate::workload::Stamp| {
                a.instant.saturating_duration_since(b.instant).as_secs_f64()
            };
            s.seconds = Seconds {
                total: secs(end, start),
                creation: secs(t_start, start),
                transactions: secs(t_end, t_start),
                deletion: secs(end, t_end),
            };
            s.postmark_seconds = PostmarkSeconds {
                total: diff_time(end.unix_secs, start.unix_secs),
                creation: diff_time(t_start.unix_secs, start.unix_secs),
                transactions: diff_time(t_end.unix_secs, t_start.unix_secs),
                deletion: diff_time(end.unix_secs, t_end.unix_secs),
            };
        }
        s
    }

    /// Postmark's verbose report.
    pub fn verbose(&self) -> String {
        let p = &self.postmark_seconds;
        let (elapsed, t_elapsed) = (p.total, p.transactions);
        let created = self.created as i64;
        let alone = self.creation_alone as i64;
        let deleted = self.deleted as i64;
        let del_alone = self.deletion_alone as i64;
        let mut s = String::new();
        s.push_str("Time:\n");
        let _ = writeln!(s, "\t{elapsed} seconds total");
        let _ = writeln!(
            s,
            "\t{t_elapsed} seconds of transactions ({} per second)",
            self.transactions as i64 / t_elapsed
        );
        s.push_str("\nFiles:\n");
        let _ = writeln!(s, "\t{created} created ({} per second)", created / elapsed);
        let _ = writeln!(
            s,
            "\t\tCreation alone: {alone} files ({} per second)",
            alone / p.creation
        );
        let _ = writeln!(
            s,
            "\t\tMixed with transactions: {} files ({} per second)",
            created - alone,
            (created - alone) / t_elapsed
        );
        let _ = writeln!(
            s,
            "\t{} read ({} per second)",
            self.read,
            self.read as i64 / t_elapsed
        );
        let _ = writeln!(
            s,
            "\t{} appended ({} per second)",
            self.appended,
            self.appended as i64 / t_elapsed
        );
        let _ = writeln!(s, "\t{deleted} deleted ({} per second)", deleted / elapsed);
        let _ = writeln!(
            s,
            "\t\tDeletion alone: {del_alone} files ({} per second)",
            del_alone / p.deletion
        );
        let _ = writeln!(
            s,
            "\t\tMixed with transactions: {} files ({} per second)",
            deleted - del_alone,
            (deleted - del_alone) / t_elapsed
        );
        s.push_str("\nData:\n");
        let e = elapsed as f32;
        let _ = writeln!(
            s,
            "\t{} read ({} per second)",
            scalef(self.bytes_read_f32),
            scalef(self.bytes_read_f32 / e)
        );
        let _ = writeln!(
            s,
            "\t{} written ({} per second)",
            scalef(self.bytes_written_f32),
            scalef(self.bytes_written_f32 / e)
        );
        s
    }

    /// Postmark's terse report: one line of thirteen numbers.
    pub fn terse(&self) -> String {
        let p = &self.postmark_seconds;
        let (e, t) = (p.total as f32, p.transactions as f32);
        let f = |x: f32| format!("{:.2}", x as f64);
        let created = self.created as f32;
        let alone = self.creation_alone as f32;
        let deleted = self.deleted as f32;
        let del_alone = self.deletion_alone as f32;
        let fields = [
            f(self.transactions as f32 / t),
            f(created / e),
            f(alone / p.creation as f32),
            f((self.created - self.creation_alone) as f32 / t),
            f(self.read as f32 / t),
            f(self.appended as f32 / t),
            f(deleted / e),
            f(del_alone / p.deletion as f32),
            f((self.deleted - self.deletion_alone) as f32 / t),
            f(self.bytes_read_f32 / e),
            f(self.bytes_written_f32 / e),
        ];
        format!("{} {} {}\n", p.total, p.transactions, fields.join(" "))
    }

    /// Our additions: sub-second times and latency percentiles.
    pub fn extras(&self) -> String {
        let sec = &self.seconds;
        let mut s = String::new();
        let per_sec = |n: u64, t: f64| if t > 0.0 { n as f64 / t } else { 0.0 };
        let _ = writeln!(
            s,
            "\nWall time ({} client{}):",
            self.clients,
            if self.clients == 1 { "" } else { "s" }
        );
        let _ = writeln!(s, "\t{:.6} seconds total", sec.total);
        let _ = writeln!(s, "\t{:.6} seconds creating files", sec.creation);
        let _ = writeln!(
            s,
            "\t{:.6} seconds of transactions ({:.2} per second)",
            sec.transactions,
            per_sec(self.transactions, sec.transactions)
        );
        let _ = writeln!(s, "\t{:.6} seconds deleting files", sec.deletion);
        if !self.latency.is_empty() {
            let _ = writeln!(s, "\nLatency in microseconds (client side):");
            let _ = writeln!(
                s,
                "\t{:<14} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
                "operation", "count", "mean", "p50", "p90", "p99", "p99.9", "max"
            );
            let us = |ns: u64| ns as f64 / 1000.0;
            for l in &self.latency {
                let _ = writeln!(
                    s,
                    "\t{:<14} {:>9} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>10.1}",
                    l.op,
                    l.count,
                    l.mean_ns / 1000.0,
                    us(l.p50_ns),
                    us(l.p90_ns),
                    us(l.p99_ns),
                    us(l.p999_ns),
                    us(l.max_ns)
                );
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Stamp;
    use std::time::{Duration, Instant};

    /// glibc's printf and Rust's `{:.2}` both round exact ties to even.
    #[test]
    fn two_decimals_round_ties_to_even_like_printf() {
        assert_eq!(format!("{:.2}", 0.125f64), "0.12");
        assert_eq!(format!("{:.2}", 0.375f64), "0.38");
        assert_eq!(format!("{:.2}", 0.625f64), "0.62");
        assert_eq!(format!("{:.0}", 2.5f64), "2");
        // Not a tie: 1.005 is below 1.005 in binary.
        assert_eq!(format!("{:.2}", 1.005f64), "1.00");
    }

    #[test]
    fn scalef_like_postmark() {
        assert_eq!(scalef(0.0), "0.000000 bytes");
        assert_eq!(scalef(128.0), "0.12 kilobytes");
        assert_eq!(scalef(251_649.0), "245.75 kilobytes");
        // Exactly 1 MiB is not "> 1": kilobytes.
        assert_eq!(scalef(1_048_576.0), "1024.00 kilobytes");
        assert_eq!(scalef(1_572_864.0), "1.50 megabytes");
    }

    /// 32-bit float sums lose units above 2^24: the report must show the float's value.
    #[test]
    fn float_sum_is_emulated() {
        let mut f = 0f32;
        for _ in 0..5000 {
            f += 9999.0;
        }
        let exact = 5000.0 * 9999.0;
        assert_ne!(f as f64, exact);
        assert_eq!(scalef(f), format!("{:.2} megabytes", (f / MEGABYTE) as f64));
    }

    fn timeline(secs: [i64; 4]) -> Timeline {
        let i = Instant::now();
        let st = |k: usize| Stamp {
            instant: i + Duration::from_millis(100 * k as u64),
            unix_secs: secs[k],
        };
        Timeline {
            start: st(0),
            t_start: st(1),
            t_end: st(2),
            end: st(3),
        }
    }

    /// The first Debian postmark run of this crate's development: 50 files, 100 transactions,
    /// seed 7, all in the same second.
    #[test]
    fn verbose_report_layout() {
        let cfg = Config {
            number: 50,
            transactions: 100,
            ..Config::default()
        };
        let c = Counters {
            created: 102,
            deleted: 102,
            read: 45,
            appended: 55,
            bytes_read: 251_648,
            bytes_written: 631_562,
            bytes_read_f32: 251_648.0,
            bytes_written_f32: 631_562.0,
        };
        let s = RunSummary::new(&cfg, &[(c, 48, timeline([5, 5, 5, 5]))], true, vec![]);
        let expected = "Time:\n\
\t1 seconds total\n\
\t1 seconds of transactions (100 per second)\n\
\n\
Files:\n\
\t102 created (102 per second)\n\
\t\tCreation alone: 50 files (50 per second)\n\
\t\tMixed with transactions: 52 files (52 per second)\n\
\t45 read (45 per second)\n\
\t55 appended (55 per second)\n\
\t102 deleted (102 per second)\n\
\t\tDeletion alone: 54 files (54 per second)\n\
\t\tMixed with transactions: 48 files (48 per second)\n\
\n\
Data:\n\
\t245.75 kilobytes read (245.75 kilobytes per second)\n\
\t616.76 kilobytes written (616.76 kilobytes per second)\n";
        assert_eq!(s.verbose(), expected);
        assert_eq!(
            s.terse(),
            "1 1 100.00 102.00 50.00 52.00 45.00 55.00 102.00 54.00 48.00 251648.00 631562.00\n"
        );
    }

    #[test]
    fn integer_rates_truncate() {
        let cfg = Config {
            number: 10,
            transactions: 20,
            ..Config::default()
        };
        let c = Counters {
            created: 19,
            deleted: 19,
            read: 10,
            appended: 10,
            ..Counters::default()
        };
        let s = RunSummary::new(&cfg, &[(c, 11, timeline([0, 2, 5, 5]))], true, vec![]);
        let v = s.verbose();
        assert!(v.contains("\t5 seconds total\n"), "{v}");
        assert!(
            v.contains("\t3 seconds of transactions (6 per second)\n"),
            "{v}"
        );
        assert!(v.contains("Creation alone: 10 files (5 per second)"), "{v}");
        assert!(v.contains("Deletion alone: 8 files (8 per second)"), "{v}");
    }
}
