//! The options that say what a mount records: the histograms ([`ProfileArgs`]) and the request
//! records ([`RecordArgs`]), with their checks.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use profile_store::duration::Span;
use profile_store::{ClockInfo, RecorderConfig, Resolution};

use super::values::{parse_resolution, span_arg, time_arg};
use crate::daemon::mount::{SetupError, setup_err};
use crate::toolkit::config_file::read_small_file;

/// How the profile is recorded: bucket resolution and time-lapse.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Profile")]
pub struct ProfileArgs {
    /// Buckets per power of two (1, 2, 4 or 8).
    #[arg(long, default_value_t = 1, value_parser = parse_resolution)]
    pub resolution: u32,
    /// Time-lapse: cut the profile into epochs of this length, with its unit: a time (2s,
    /// 500ms) or clock cycles (4096c, 2^32c). A bare number is refused.
    #[arg(long, value_name = "LENGTH", value_parser = span_arg)]
    pub epoch: Option<Span>,
    /// Most epochs kept with --epoch; later samples go into the last one.
    #[arg(long, default_value_t = 256, value_name = "N")]
    pub max_epochs: usize,
}

impl ProfileArgs {
    /// The recorder settings, checked.
    pub fn recorder(&self) -> Result<RecorderConfig, SetupError> {
        let epoch_cycles = match self.epoch {
            None => 0,
            Some(span) => match span.to_cycles(ClockInfo::get().cycles_per_sec) {
                0 => return Err(setup_err("--epoch: shorter than one clock cycle")),
                c => c,
            },
        };
        if self.max_epochs == 0 {
            return Err(setup_err("--max-epochs must be at least 1"));
        }
        Ok(RecorderConfig {
            resolution: Resolution::new(self.resolution).expect("checked by the parser"),
            epoch_cycles,
            max_epochs: self.max_epochs,
        })
    }
}

/// Request records: the slow-operation log, the inner-call breakdown, injection, the callers
/// and the hottest files.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Request records")]
pub struct RecordArgs {
    /// Log every request at least this slow, with its unit (10ms, 500us): operation, latency,
    /// errno, path, pid, comm, uid, offset, size and the lower calls it made. Read them at
    /// MNT/.fsprof.slow (JSON lines) or with `fsprof slow MNT`. A request over it is described
    /// after its latency is taken (about 4 us each on a 2.4 GHz VM); one under it costs a
    /// comparison.
    #[arg(long, value_name = "TIME", value_parser = time_arg)]
    pub slow: Option<Duration>,
    /// Most records the slow log keeps, 1 to 1000000 (the oldest are dropped and counted).
    #[arg(long, value_name = "N", default_value_t = crate::records::slow::DEFAULT_RING, requires = "slow")]
    pub slow_ring: usize,
    /// Also append slow records to this file (JSON lines; `fsprof slow FILE` reads it). After a
    /// failed write (a full disk) nothing more is appended, and the records stay in the ring.
    #[arg(long, value_name = "FILE", requires = "slow")]
    pub slow_log: Option<PathBuf>,
    /// Record which lower (or branch) calls each request made, by the latency bucket the
    /// request landed in, so that `fsprof why` can name the cause of a peak. On by default:
    /// about 0.3 us per request, after its latency is taken, within the run-to-run spread of a
    /// Postmark (benchmarks/RESULTS.md).
    #[arg(long, conflicts_with = "no_breakdown")]
    pub breakdown: bool,
    /// Do not record the inner-call breakdown (see --breakdown).
    #[arg(long)]
    pub no_breakdown: bool,
    /// Inject delays or errors, for chaos tests and to check the profiler's fidelity:
    /// `TARGET,HOW,WHAT[,path=GLOB]` with TARGET `op=read` | `lower=pread` | `branch=1[:pwrite]`,
    /// HOW every=N | prob=P, WHAT delay=1ms (at most 60m) | errno=EIO (a name, or a number 1
    /// to 511). Repeatable. A delay ends at once, failing its request with EINTR, when the
    /// caller is interrupted (a signal; a killed caller is gone at once) and when the mount
    /// ends. The profile counts every injection (injected=N) and lists the rules (with cut=N
    /// for delays cut short). Rules are tried in order and the first that fires wins, so a
    /// later rule counts (seen=N) only the calls earlier ones let through.
    /// A comma inside {...} or [...] belongs to the glob: path=/d/*.{a,b}.
    #[arg(long, value_name = "RULE")]
    pub inject: Vec<String>,
    /// Keep one profile per caller as well: per pid (the calling thread), uid or comm (the
    /// command name), as layers fuse@uid:1000... in .fsprof and .fsprof.json. With --epoch,
    /// these layers keep no epochs (the fuse layer does). The caller is found before a
    /// request's clock starts (its command name read from /proc once per process): about
    /// 0.4 us per request, in no latency.
    #[arg(long, value_name = "KEY", value_parser = ["pid", "uid", "comm"])]
    pub by: Option<String>,
    /// Most per-key layers with --by (1 to 8192): the N keys with the most total latency have
    /// one, and the others share fuse@other, so memory stays bounded whatever the number of
    /// callers. A key that overtakes the smallest layer's by a quarter takes its place; its
    /// earlier requests stay in fuse@other.
    #[arg(long, value_name = "N", default_value_t = crate::records::by::DEFAULT_MAX, requires = "by")]
    pub by_max: usize,
    /// Keep the N hottest files (by total latency and by requests; N defaults to 100 when the
    /// flag has no value, at most 10000), with their paths, for `fsprof files`. Memory is N
    /// entries whatever the number of files; about 1 us per request over many files, after
    /// its latency is taken.
    #[arg(long, value_name = "N", num_args = 0..=1, require_equals = true, default_missing_value = "100")]
    pub hot_files: Option<usize>,
    /// Keep the N slowest requests of the run, whatever their latency (N defaults to 50 when
    /// the flag has no value, at most 10000), each described as --slow describes a request, in
    /// the profile's `slowest` section (`fsprof report` and `fsprof profile` list them). Once N
    /// are kept, a faster request costs one atomic read.
    #[arg(long, value_name = "N", num_args = 0..=1, require_equals = true, default_missing_value = "50")]
    pub slowest: Option<usize>,
    /// Read more injection rules from a TOML file of `[[rule]]` tables with the keys of --inject.
    #[arg(long, value_name = "FILE")]
    pub inject_file: Option<PathBuf>,
    /// Also record the kernel's side of every request, from kernel tracepoints: layer
    /// `kernel` (this mount's FUSE round trip per request, fuse_request_send to
    /// fuse_request_end, under the fuse layer's OP_ names; its difference from `fuse` is what
    /// the transport costs) and a layer `block@dev:NAME` per block device under the served
    /// directories (issue to completion of every request of the device, from anyone: BLK_READ,
    /// BLK_WRITE_SYNC...). Counts per operation equal the fuse layer's, except OP_FORGET,
    /// which the kernel sends without the tracepoint. The block layers come from a private
    /// ftrace instance (tracefs/instances/fsprof-PID-N, removed when the mount ends), or from
    /// perf where one cannot be made (the header's block_trace says which). Needs root or
    /// CAP_PERFMON, and tracefs (mounted at /sys/kernel/tracing when missing); refused in one
    /// line otherwise.
    #[arg(long)]
    pub kernel: bool,
    /// Also record the syscall level, layer `syscall` above `kernel`: every file-system system
    /// call of any process on this mount (a descriptor whose file is on the mount, or a path
    /// that resolves into it: absolute under MNT, or relative from a working directory or
    /// directory descriptor on it), timed in the kernel from the raw syscall tracepoints by a
    /// BPF program, under the user level's names (SYS_PREAD, SYS_FSTATAT...). It sees what the
    /// kernel answers from its caches (a cached stat or read never reaches the daemon),
    /// statically linked programs, and --passthrough's reads and writes. With --by,
    /// --hot-files, --slowest and --slow, the syscall level has them too (syscall@comm:NAME,
    /// `layer=syscall` sections, SYS_ records in the slow log). Calls on the control files are
    /// not counted. Needs root, or CAP_BPF and CAP_PERFMON, and a kernel with BTF; refused in
    /// one line otherwise, with nothing mounted. Nothing stays loaded after the mount ends.
    #[arg(long)]
    pub syscalls: bool,
}

impl RecordArgs {
    /// The records to keep, checked, for a file system over `branches` branches (raif), or
    /// over one lower directory (`None`, fsprof-fuse): a rule for calls it never makes is
    /// refused rather than left never to fire.
    pub fn config(
        &self,
        branches: Option<usize>,
    ) -> Result<crate::records::RecordConfig, SetupError> {
        use crate::records::inject::{RawRule, Rule, Target};
        let fits = |r: &Rule| match (r.target, branches) {
            (Target::Branch(..), None) => Err(
                "branch= rules are for raif's branches: give lower=CALL for fsprof-fuse's lower \
                 directory"
                    .to_string(),
            ),
            (Target::Branch(b, _), Some(n)) if b as usize >= n => Err(format!(
                "branch={b}: there are {n} branches (0 to {})",
                n - 1
            )),
            (Target::Lower(_), Some(_)) => Err(
                "lower= rules are for fsprof-fuse: give branch=N[:CALL] for raif's branches"
                    .to_string(),
            ),
            _ => Ok(()),
        };
        let mut inject = Vec::new();
        for r in &self.inject {
            let raw = RawRule::parse(r)
                .and_then(|raw| fits(&Rule::from_raw(raw.clone())?).map(|()| raw))
                .map_err(|e| setup_err(format!("--inject '{r}': {e}")))?;
            inject.push(raw);
        }
        if let Some(f) = &self.inject_file {
            let text = read_small_file(f)
                .map_err(|e| setup_err(format!("--inject-file {}: {e}", f.display())))?;
            let raws = RawRule::parse_toml(&text)
                .map_err(|e| setup_err(format!("--inject-file {}: {e}", f.display())))?;
            for (i, raw) in raws.into_iter().enumerate() {
                Rule::from_raw(raw.clone())
                    .and_then(|rule| fits(&rule))
                    .map_err(|e| {
                        setup_err(format!(
                            "--inject-file {}: rule {}: {e}",
                            f.display(),
                            i + 1
                        ))
                    })?;
                inject.push(raw);
            }
        }
        use crate::records::by::{self, KeyKind};
        use crate::records::{hot, slow, slowest};
        let bounded = |name: &str, n: usize, max: usize| {
            if n == 0 || n > max {
                Err(setup_err(format!("--{name} must be 1 to {max}")))
            } else {
                Ok(())
            }
        };
        if let Some(n) = self.hot_files {
            bounded("hot-files", n, hot::MAX_N)?;
        }
        if let Some(n) = self.slowest {
            bounded("slowest", n, slowest::MAX_N)?;
        }
        bounded("by-max", self.by_max, by::LIMIT)?;
        bounded("slow-ring", self.slow_ring, slow::MAX_RING)?;
        let slow_log = self
            .slow_log
            .as_ref()
            .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone()));
        Ok(crate::records::RecordConfig {
            slow: self.slow,
            slow_ring: self.slow_ring,
            slow_log,
            breakdown: self.breakdown || !self.no_breakdown,
            inject,
            by: self.by.as_deref().map(|k| match k {
                "pid" => KeyKind::Pid,
                "uid" => KeyKind::Uid,
                _ => KeyKind::Comm,
            }),
            by_max: self.by_max,
            hot_files: self.hot_files,
            kernel: self.kernel,
            syscalls: self.syscalls,
            slowest: self.slowest,
        })
    }
}

/// Checks that the profile of a mount with `layers` layers recorded as `recorder` says, and
/// the per-key layers of `records`' `--by` (which keep no epochs), every operation called in
/// each, can be read back by the tools: a time-lapse profile of 65,536 epochs was accepted,
/// cost the daemon 1.9 GB to read, and was refused by every tool.
pub fn check_recordable(
    recorder: &RecorderConfig,
    layers: usize,
    records: &crate::records::RecordConfig,
) -> Result<(), SetupError> {
    // The keys kept, and `other`; the syscall level's layers (one epoch) with theirs, counted
    // three times: it names about three times as many operations.
    let keyed = records.by.map_or(0, |_| records.by_max + 1);
    let keyed = keyed + if records.syscalls { 3 * (1 + keyed) } else { 0 };
    let epochs = if recorder.epoch_cycles == 0 {
        1
    } else {
        recorder.max_epochs.min(profile_store::text::MAX_EPOCHS)
    };
    profile_store::text::check_recordable(
        layers,
        keyed,
        crate::protocol::ops::NAMES.len(),
        recorder.resolution.buckets(),
        epochs,
    )
    .map_err(|e| setup_err(format!("profile too large: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The records' sizes are bounded: a ring of a billion slow records, or a hot-file list of
    /// as many entries, was accepted and grew without limit.
    #[test]
    fn record_sizes_are_bounded() {
        let ok = RecordArgs {
            slow_ring: 1_000_000,
            by_max: 8192,
            hot_files: Some(10_000),
            ..RecordArgs::default()
        };
        assert!(ok.config(None).is_ok());
        for (args, want) in [
            (
                RecordArgs {
                    slow_ring: 1_000_001,
                    ..ok.clone()
                },
                "--slow-ring must be 1 to 1000000",
            ),
            (
                RecordArgs {
                    slow_ring: 0,
                    ..ok.clone()
                },
                "--slow-ring must be 1 to 1000000",
            ),
            (
                RecordArgs {
                    hot_files: Some(10_001),
                    ..ok.clone()
                },
                "--hot-files must be 1 to 10000",
            ),
            (
                RecordArgs {
                    by_max: 8193,
                    ..ok.clone()
                },
                "--by-max must be 1 to 8192",
            ),
        ] {
            assert_eq!(args.config(None).unwrap_err().to_string(), want);
        }
    }

    /// Durations take a unit: a bare number is refused, naming the unit to add.
    #[test]
    fn durations_need_a_unit() {
        assert_eq!(time_arg("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(time_arg("0s"), Ok(Duration::ZERO));
        assert!(time_arg("2").unwrap_err().contains("write 2s"));
        assert!(time_arg("4096c").unwrap_err().contains("cycles"));
        assert_eq!(span_arg("2^32c"), Ok(Span::Cycles(1 << 32)));
        assert!(span_arg("2").unwrap_err().contains("no unit"));
        let p = ProfileArgs {
            resolution: 1,
            epoch: Some(Span::Time(Duration::from_nanos(0))),
            max_epochs: 1,
        };
        assert!(
            p.recorder()
                .unwrap_err()
                .0
                .contains("shorter than one clock cycle")
        );
    }

    #[test]
    fn resolutions_and_epochs_are_checked() {
        assert!(parse_resolution("3").unwrap_err().contains("1, 2, 4 or 8"));
        assert_eq!(parse_resolution("8"), Ok(8));
        let mut p = ProfileArgs {
            resolution: 1,
            epoch: None,
            max_epochs: 1,
        };
        assert!(p.recorder().is_ok());
        p.max_epochs = 0;
        assert!(p.recorder().is_err());
    }
}
