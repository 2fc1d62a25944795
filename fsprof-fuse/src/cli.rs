//! Command-line pieces shared by `fsprof-fuse` and `raif`: the profile, cache and daemon
//! options (flattened into each program's arguments, which must have a `--no-profile` flag),
//! their checks, one-line usage errors and the logger.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use profile_store::duration::{self, Span};
use profile_store::{ClockInfo, RecorderConfig, Resolution};

use crate::control::DEFAULT_NAME;
use crate::mount::{SetupError, setup_err};
use crate::transport::{MountSettings, Transport};

/// How the profile is recorded and served.
#[derive(Args, Debug, Clone)]
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
    /// Base name of the control files (NAME and NAME.json at the mount root).
    #[arg(long, default_value = DEFAULT_NAME, value_name = "NAME")]
    pub control_name: String,
    /// List the control files in the mount root (by default `ls -a` and `grep -r` do not see
    /// them; they always answer lookup, stat and open).
    #[arg(long, conflicts_with = "no_profile")]
    pub list_control: bool,
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

    /// The control-file base name, checked to be a plain file name.
    pub fn control_name(&self) -> Result<String, SetupError> {
        let n = &self.control_name;
        if n.is_empty() || n.contains('/') || n == "." || n == ".." {
            return Err(setup_err(format!("--control-name '{n}': not a file name")));
        }
        Ok(n.clone())
    }
}

/// Request records: the slow-operation log, the inner-call breakdown, injection.
#[derive(Args, Debug, Clone, Default)]
pub struct RecordArgs {
    /// Log every request at least this slow, with its unit (10ms, 500us): operation, latency,
    /// errno, path, pid, comm, uid, offset, size and the lower calls it made. Read them at
    /// MNT/.fsprof.slow (JSON lines) or with `fsprof slow MNT`.
    #[arg(long, value_name = "TIME", value_parser = time_arg, conflicts_with = "no_profile")]
    pub slow: Option<Duration>,
    /// Most records the slow log keeps, 1 to 1000000 (the oldest are dropped and counted).
    #[arg(long, value_name = "N", default_value_t = crate::records::slow::DEFAULT_RING, requires = "slow")]
    pub slow_ring: usize,
    /// Also append slow records to this file (JSON lines; `fsprof slow FILE` reads it). After a
    /// failed write (a full disk) nothing more is appended, and the records stay in the ring.
    #[arg(long, value_name = "FILE", requires = "slow")]
    pub slow_log: Option<PathBuf>,
    /// Record which lower (or branch) calls each request made, by the latency bucket the
    /// request landed in, so that `fsprof why` can name the cause of a peak.
    #[arg(long, conflicts_with = "no_profile")]
    pub breakdown: bool,
    /// Inject delays or errors, for chaos tests and to check the profiler's fidelity:
    /// TARGET,HOW,WHAT[,path=GLOB] with TARGET op=read | lower=pread | branch=1[:pwrite],
    /// HOW every=N | prob=P, WHAT delay=1ms (at most 60m) | errno=EIO (a name, or a number 1
    /// to 511). Repeatable. A delay ends at once, failing its request with EINTR, when the
    /// caller is interrupted (a signal; a killed caller is gone at once) and when the mount
    /// ends. The profile counts every injection (injected=N) and lists the rules (with cut=N
    /// for delays cut short). Rules are tried in order and the first that fires wins, so a
    /// later rule counts (seen=N) only the calls earlier ones let through.
    #[arg(long, value_name = "RULE", conflicts_with = "no_profile")]
    pub inject: Vec<String>,
    /// Keep one profile per caller as well: per pid (the calling thread), uid or comm (the
    /// command name), as layers fuse@uid:1000... in .fsprof and .fsprof.json. With --epoch,
    /// these layers keep no epochs (the fuse layer does).
    #[arg(long, value_name = "KEY", value_parser = ["pid", "uid", "comm"], conflicts_with = "no_profile")]
    pub by: Option<String>,
    /// Most per-key layers with --by (1 to 8192): the N keys with the most total latency have
    /// one, and the others share fuse@other, so memory stays bounded whatever the number of
    /// callers. A key that overtakes the smallest layer's by a quarter takes its place; its
    /// earlier requests stay in fuse@other.
    #[arg(long, value_name = "N", default_value_t = crate::records::by::DEFAULT_MAX, requires = "by")]
    pub by_max: usize,
    /// Keep the N hottest files (by total latency and by requests; N defaults to 100 when the
    /// flag has no value, at most 10000), with their paths, for `fsprof files`. Memory is N
    /// entries whatever the number of files.
    #[arg(long, value_name = "N", num_args = 0..=1, require_equals = true, default_missing_value = "100", conflicts_with = "no_profile")]
    pub hot_files: Option<usize>,
    /// Read more injection rules from a TOML file of [[rule]] tables with the keys of --inject.
    #[arg(long, value_name = "FILE", conflicts_with = "no_profile")]
    pub inject_file: Option<PathBuf>,
}

impl RecordArgs {
    /// The records to keep, checked, for a file system over `branches` branches (raif), or
    /// over one lower directory (`None`, fsprof-fuse): a rule for calls it never makes is
    /// refused rather than left never to fire.
    pub fn config(
        &self,
        branches: Option<usize>,
    ) -> Result<crate::records::RecordConfig, SetupError> {
        use crate::records::inject::{Rule, Target};
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
            Rule::parse(r)
                .and_then(|rule| fits(&rule))
                .map_err(|e| setup_err(format!("--inject '{r}': {e}")))?;
            inject.push(r.clone());
        }
        if let Some(f) = &self.inject_file {
            let text = read_small_file(f)
                .map_err(|e| setup_err(format!("--inject-file {}: {e}", f.display())))?;
            let rules = Rule::parse_toml(&text)
                .map_err(|e| setup_err(format!("--inject-file {}: {e}", f.display())))?;
            for (i, rule) in rules.iter().enumerate() {
                fits(rule).map_err(|e| {
                    setup_err(format!(
                        "--inject-file {}: rule {}: {e}",
                        f.display(),
                        i + 1
                    ))
                })?;
            }
            inject.extend(rules.iter().map(Rule::text));
        }
        use crate::records::by::{self, KeyKind};
        use crate::records::{hot, slow};
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
            breakdown: self.breakdown,
            inject,
            by: self.by.as_deref().map(|k| match k {
                "pid" => KeyKind::Pid,
                "uid" => KeyKind::Uid,
                _ => KeyKind::Comm,
            }),
            by_max: self.by_max,
            hot_files: self.hot_files,
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
    // The keys kept, and `other`.
    let keyed = records.by.map_or(0, |_| records.by_max + 1);
    let epochs = if recorder.epoch_cycles == 0 {
        1
    } else {
        recorder.max_epochs.min(profile_store::text::MAX_EPOCHS)
    };
    profile_store::text::check_recordable(
        layers,
        keyed,
        crate::ops::NAMES.len(),
        recorder.resolution.buckets(),
        epochs,
    )
    .map_err(|e| setup_err(format!("profile too large: {e}")))
}

/// How long the kernel may cache names and attributes.
#[derive(Args, Debug, Clone)]
pub struct CacheArgs {
    /// How long the kernel may cache names, with its unit (1s, 250ms; 0s: not at all).
    #[arg(long, default_value = "1s", value_name = "TIME", value_parser = time_arg)]
    pub entry_timeout: Duration,
    /// How long the kernel may cache attributes, with its unit (1s, 250ms; 0s: not at all).
    #[arg(long, default_value = "1s", value_name = "TIME", value_parser = time_arg)]
    pub attr_timeout: Duration,
}

impl CacheArgs {
    /// (entry, attribute) time-outs.
    pub fn ttls(&self) -> Result<(Duration, Duration), SetupError> {
        Ok((self.entry_timeout, self.attr_timeout))
    }
}

/// How the daemon mounts, serves and logs.
#[derive(Args, Debug, Clone)]
pub struct DaemonArgs {
    /// Worker threads (each with its own /dev/fuse descriptor). Default: one per CPU, 2 to 16.
    /// With one synchronous caller, fewer workers mean fewer wake-ups (1 is the cheapest); with
    /// concurrent callers, one per CPU served Postmark best (benchmarks/RESULTS.md). Not used
    /// with --uring, where each CPU's ring starts with one thread.
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Most threads serving requests at once, 1 to 1024 (default 32, or --threads if more).
    /// While every thread is busy (a slow lower call, an injected delay), one more starts, up to
    /// N, so that slow requests do not hold up the others; with N requests waiting, the next
    /// ones wait for one of them to end. On the classic transport N in all (interrupts wait
    /// too, so a caller killed then waits as well); with --uring N on each CPU's ring. Threads
    /// once started stay until unmount.
    #[arg(long, value_name = "N")]
    pub max_threads: Option<usize>,
    /// Let other users use the mount (needs user_allow_other in /etc/fuse.conf for non-root).
    #[arg(long)]
    pub allow_other: bool,
    /// Have fusermount3 unmount if the daemon dies.
    #[arg(long)]
    pub auto_unmount: bool,
    /// Carry requests over FUSE over io_uring (Linux 6.14+, with the fuse module's
    /// enable_uring parameter set: `echo 1 > /sys/module/fuse/parameters/enable_uring`).
    /// Without them the mount is refused; there is no silent fallback. The profile records
    /// the transport (transport=uring). /dev/fuse still carries forgets (one thread).
    #[arg(long)]
    pub uring: bool,
    /// Serve the live profile at http://ADDR/metrics in the Prometheus text format (one
    /// histogram per layer and operation, in seconds), e.g. 127.0.0.1:9817. Give a loopback
    /// address unless others must scrape it: the endpoint has no authentication. Scrapes read
    /// snapshots and never hold up a file-system request. Needs profiling (not --no-profile).
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<std::net::SocketAddr>,
    /// With --metrics: answer a scraper that asks for the protobuf format (Prometheus started
    /// with --enable-feature=native-histograms) with native histograms: one per layer and
    /// operation, in cycles (fsprof_operation_latency_cycles; schema log2 of the buckets per
    /// octave, where the mapping is exact), and the same counters and gauges. Such a scrape
    /// carries no classic `_seconds` histogram, so queries on it stop working: hence opt-in.
    #[arg(long, requires = "metrics")]
    pub metrics_native: bool,
    /// Allow mounting over a non-empty directory.
    #[arg(long)]
    pub nonempty: bool,
    /// Daemon log file (background mode; otherwise logs go to stderr).
    #[arg(long, value_name = "PATH")]
    pub log_file: Option<PathBuf>,
    /// Log level (error, warn, info, debug, trace); RUST_LOG overrides.
    #[arg(long, default_value = "warn", value_name = "LEVEL")]
    pub log_level: String,
}

impl DaemonArgs {
    /// Mount settings for `mnt`, shown as `fsname` of type `fuse.SUBTYPE`.
    pub fn settings(
        &self,
        mnt: PathBuf,
        fsname: String,
        subtype: &str,
    ) -> Result<MountSettings, SetupError> {
        use crate::transport::settings::{DEFAULT_MAX_THREADS, MAX_THREADS};
        let threads = self.threads.unwrap_or_else(|| {
            let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
            cpus.clamp(2, 16)
        });
        if threads == 0 || threads > 256 {
            return Err(setup_err("--threads must be 1..=256"));
        }
        let max_threads = match self.max_threads {
            Some(n) if n == 0 || n > MAX_THREADS => {
                return Err(setup_err(format!(
                    "--max-threads must be 1 to {MAX_THREADS}"
                )));
            }
            Some(n) if self.threads.is_some_and(|t| t > n) => {
                return Err(setup_err(format!(
                    "--max-threads {n} is below --threads {threads}"
                )));
            }
            Some(n) => n,
            None => DEFAULT_MAX_THREADS.max(threads),
        };
        // Without --threads, the default number of workers is cut to fit --max-threads.
        let threads = threads.min(max_threads);
        Ok(MountSettings {
            mnt,
            fsname,
            subtype: subtype.into(),
            threads,
            max_threads,
            allow_other: self.allow_other,
            auto_unmount: self.auto_unmount,
            transport: if self.uring {
                Transport::Uring
            } else {
                Transport::Classic
            },
            metrics: self.metrics,
            metrics_native: self.metrics_native,
        })
    }

    /// The log file, absolute.
    pub fn log_file(&self) -> Option<PathBuf> {
        self.log_file
            .as_ref()
            .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone()))
    }
}

fn parse_resolution(s: &str) -> Result<u32, String> {
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

/// A clap error as one line on stderr, exit code 2 (`--help` and `--version` print normally).
pub fn usage_error(program: &str, e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        e.exit();
    }
    eprintln!(
        "{program}: {} (see --help)",
        one_line(&e.render().to_string())
    );
    ExitCode::from(2)
}

/// The message part of a rendered clap error, joined into one line.
fn one_line(rendered: &str) -> String {
    rendered
        .lines()
        .take_while(|l| !l.is_empty() && !l.starts_with("Usage:"))
        .map(|l| l.trim().trim_start_matches("error: "))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Installs `env_logger` at `level` (`RUST_LOG` overrides), with millisecond timestamps.
pub fn init_logging(level: &str) {
    let mut logger =
        env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(level));
    if std::env::var_os("RUST_LOG").is_none() {
        // fuser warns when its own unmount-on-drop finds the mount already gone, which is how
        // every clean unmount ends here; its own comment calls this not necessarily an error.
        logger.filter_module("fuser::mnt", log::LevelFilter::Error);
        logger.filter_module("fuser::session", log::LevelFilter::Error);
    }
    logger.format_timestamp_millis().init();
}

/// Largest rules or policy file read (`--inject-file`, raif's `--policy`): such a file is a few
/// lines, and a larger one (or `/dev/zero`) is a mistake, not something to read to the end.
pub const SMALL_FILE_MAX: u64 = 1 << 20;

/// A TOML parse error of `text` as one line, with the line it is on.
pub fn toml_error(text: &str, e: &toml::de::Error) -> String {
    match e.span() {
        Some(s) => format!("line {}: {}", line_of(text, s.start), e.message()),
        None => e.message().to_string(),
    }
}

/// The line (from 1) of byte offset `at` of `text`.
pub fn line_of(text: &str, at: usize) -> usize {
    let at = at.min(text.len());
    text.as_bytes()[..at]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// The text of a small configuration file, read to at most [`SMALL_FILE_MAX`] bytes.
pub fn read_small_file(path: &std::path::Path) -> std::io::Result<String> {
    use std::io::Read as _;
    let mut text = String::new();
    std::fs::File::open(path)?
        .take(SMALL_FILE_MAX + 1)
        .read_to_string(&mut text)?;
    if text.len() as u64 > SMALL_FILE_MAX {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "larger than {} KiB (such a file holds a few rules)",
                SMALL_FILE_MAX >> 10
            ),
        ));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clap_errors_become_one_line() {
        let r = "error: unexpected argument '--bogus' found\n\n  tip: x\n\nUsage: p\n";
        assert_eq!(one_line(r), "unexpected argument '--bogus' found");
    }

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
            control_name: ".fsprof".into(),
            list_control: false,
        };
        assert!(
            p.recorder()
                .unwrap_err()
                .0
                .contains("shorter than one clock cycle")
        );
    }

    #[test]
    fn resolutions_and_names_are_checked() {
        assert!(parse_resolution("3").unwrap_err().contains("1, 2, 4 or 8"));
        assert_eq!(parse_resolution("8"), Ok(8));
        let mut p = ProfileArgs {
            resolution: 1,
            epoch: None,
            max_epochs: 1,
            control_name: "a/b".into(),
            list_control: false,
        };
        assert!(p.control_name().is_err());
        p.control_name = ".x".into();
        assert_eq!(p.control_name().unwrap(), ".x");
        p.max_epochs = 0;
        assert!(p.recorder().is_err());
    }
}
