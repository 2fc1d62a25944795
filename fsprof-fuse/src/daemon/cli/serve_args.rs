//! The options that say how a mount is served: its transport and workers ([`ServeArgs`]), the
//! kernel's caches ([`CacheArgs`]), and, for the daemons only, background mode and logs
//! ([`DaemonArgs`]) and the control files' names ([`ControlArgs`]).

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::values::time_arg;
use crate::daemon::daemon_log::LogSink;
use crate::daemon::mount::{SetupError, setup_err};
use crate::layers::control_files::DEFAULT_NAME;
use crate::toolkit::kernel_cache::{CachePolicy, CachePreset, Readdirplus};
use crate::transport::settings::KernelFlags;
use crate::transport::settings::{DEFAULT_MAX_THREADS, MAX_THREADS};
use crate::transport::{MountSettings, Transport};

/// How requests reach the daemon and who serves them.
#[derive(Args, Debug, Clone, Default, PartialEq, Eq)]
#[command(next_help_heading = "Serving")]
pub struct ServeArgs {
    /// Worker threads (each with its own /dev/fuse descriptor). Default: one per CPU, 2 to 16.
    /// With one synchronous caller, fewer workers mean fewer wake-ups (1 is the cheapest); with
    /// concurrent callers, one per CPU served Postmark best (benchmarks/RESULTS.md). Not used
    /// with --uring, where each CPU's ring starts with one thread.
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Most threads serving requests at once, 1 to 1024 (default 32, or --threads if more).
    /// While every thread is busy (a slow lower call, an injected delay), one more starts, up to
    /// N, so that slow requests do not hold up the others; with N requests waiting, the next
    /// ones wait for one of them to end (an interrupt does not: it is read and served at once,
    /// and a caller that dies or gets a signal ends its injected delay). On the classic
    /// transport N in all; with --uring N on each CPU's ring. Threads once started stay until
    /// unmount.
    #[arg(long, value_name = "N")]
    pub max_threads: Option<usize>,
    /// Carry requests over FUSE over io_uring (Linux 6.14+, with the fuse module's
    /// enable_uring parameter set: `echo 1 > /sys/module/fuse/parameters/enable_uring`).
    /// Without them the mount is refused; there is no silent fallback. The profile records
    /// the transport (transport=uring). /dev/fuse still carries forgets (one thread).
    #[arg(long)]
    pub uring: bool,
    /// Serve the live profile at http://ADDR/metrics in the Prometheus text format (one
    /// histogram per layer and operation, in seconds), e.g. 127.0.0.1:9817. Any local user can
    /// connect to an address: without --metrics-token-file a scrape gets what every user of the
    /// mount may read (no per-caller or block-device layers, unless --share-records). Scrapes
    /// read snapshots and never hold up a file-system request. Needs profiling (not
    /// --no-profile). Limits that keep any client from hurting the file system: one thread and
    /// at most 37 file descriptors; 16 connections at once without the token (when full, a new
    /// one replaces the one that has waited longest without a whole request; with none such,
    /// it is answered 503 and closed) and 16 more with it; a request head of at most 8 KiB,
    /// received within 10 s (idle connections are closed after 10 s); no request body (413);
    /// one response in flight per connection; a client that does not read its response is
    /// dropped once the write has stalled for 10 s. A failed accept (EMFILE) is logged and
    /// retried.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<std::net::SocketAddr>,
    /// With --metrics: answer a scraper that asks for the protobuf format (Prometheus started
    /// with --enable-feature=native-histograms) with native histograms: one per layer and
    /// operation, in cycles (fsprof_operation_latency_cycles; schema log2 of the buckets per
    /// octave, where the mapping is exact), and the same counters and gauges. Such a scrape
    /// carries no classic `_seconds` histogram, so queries on it stop working: hence opt-in.
    #[arg(long, requires = "metrics")]
    pub metrics_native: bool,
    /// With --metrics: a file holding a bearer token (keep it mode 0600). A scrape that sends
    /// it (`Authorization: Bearer TOKEN`; Prometheus: `authorization: {credentials_file:
    /// FILE}`) reads everything, as root and the mounting user do, and is served on
    /// connections of its own, never counted against or dropped for the others; every other
    /// request gets 401. The token is the file's first line, without surrounding white space.
    #[arg(long, requires = "metrics", value_name = "FILE")]
    pub metrics_token_file: Option<PathBuf>,
}

/// The token in `path` (its first line, trimmed): at least 16 and at most 4096 bytes of
/// printable ASCII.
fn read_token(path: &std::path::Path) -> Result<String, SetupError> {
    let what = |e: String| setup_err(format!("--metrics-token-file {}: {e}", path.display()));
    let f = profile_store::open::regular(path).map_err(|e| what(e.to_string()))?;
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::Read::take(f, 8192), &mut text)
        .map_err(|e| what(e.to_string()))?;
    let token = text.lines().next().unwrap_or("").trim();
    if token.len() < 16 || token.len() > 4096 || !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(what(
            "the token must be one line of 16 to 4096 printable characters, no spaces".into(),
        ));
    }
    Ok(token.to_string())
}

impl ServeArgs {
    /// The bearer token of `--metrics-token-file`, if given.
    pub fn metrics_token(&self) -> Result<Option<String>, SetupError> {
        self.metrics_token_file
            .as_deref()
            .map(read_token)
            .transpose()
    }

    /// Mount settings for `mnt`, shown as `fsname` of type `fuse.SUBTYPE`, for this process
    /// only (no other users, no unmount by fusermount3: [`DaemonArgs::apply`] says otherwise).
    pub fn settings(
        &self,
        mnt: PathBuf,
        fsname: String,
        subtype: &str,
    ) -> Result<MountSettings, SetupError> {
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
            allow_other: false,
            auto_unmount: false,
            transport: if self.uring {
                Transport::Uring
            } else {
                Transport::Classic
            },
            metrics: self.metrics,
            metrics_native: self.metrics_native,
            metrics_token: self.metrics_token()?,
            share_records: false,
            cache: CachePolicy::default(),
            flags: KernelFlags::default(),
        })
    }
}

/// What the kernel may cache: a preset (`--cache`) and the knobs that override it.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Kernel caches")]
pub struct CacheArgs {
    /// What the kernel caches, and so what never reaches the daemon (docs/cache.md).
    /// exact: nothing (time-outs 0s, no READDIRPLUS): every lookup and stat the application
    /// makes is a request in the profile. normal: names, attributes and absent names for 60s,
    /// listings with attributes (READDIRPLUS): a repeated stat is a cache hit, as on a native
    /// file system, and is not in the profile; every write(2) still is. fast: a day, and the
    /// kernel's writeback cache (fsprof-fuse and fsprof profile; not with --direct-io or
    /// --passthrough): writes are gathered, so the daemon sees fewer, larger, later writes and
    /// a write's latency in the profile is no longer the application's. The profile's header
    /// says which (cache=NAME). LOWER changed behind the mount shows after the time-outs.
    #[arg(long, value_enum, default_value = "normal", value_name = "PRESET")]
    pub cache: CachePreset,
    /// How long the kernel may cache names, with its unit (1s, 250ms; 0s: not at all).
    /// Default: the preset's (exact 0s, normal 60s, fast 1 day).
    #[arg(long, value_name = "TIME", value_parser = time_arg)]
    pub entry_timeout: Option<Duration>,
    /// How long the kernel may cache attributes, with its unit (1s, 250ms; 0s: not at all).
    /// Default: the preset's (exact 0s, normal 60s, fast 1 day).
    #[arg(long, value_name = "TIME", value_parser = time_arg)]
    pub attr_timeout: Option<Duration>,
    /// How long the kernel may remember that a name does not exist, with its unit (0s: not at
    /// all; the failed LOOKUP is in the profile either way). Default: the preset's (exact 0s,
    /// normal 60s, fast 1 day).
    #[arg(long, value_name = "TIME", value_parser = time_arg)]
    pub negative_timeout: Option<Duration>,
    /// When directories are listed with READDIRPLUS (each name with its attributes, so that
    /// a stat of it needs no LOOKUP): on, off, auto (when the kernel sees the listing's names
    /// looked up). Default: the preset's (exact off, else on: with auto, a find still looked
    /// up 90% of the names one by one). raif always lists names only.
    #[arg(long, value_enum, value_name = "WHEN")]
    pub readdirplus: Option<Readdirplus>,
}

impl CacheArgs {
    /// The preset with the knobs given over it.
    pub fn policy(&self) -> CachePolicy {
        let p = self.cache.policy();
        CachePolicy {
            entry_ttl: self.entry_timeout.unwrap_or(p.entry_ttl),
            attr_ttl: self.attr_timeout.unwrap_or(p.attr_ttl),
            negative_ttl: self.negative_timeout.unwrap_or(p.negative_ttl),
            readdirplus: self.readdirplus.unwrap_or(p.readdirplus),
            ..p
        }
    }
}

/// How a daemon mounts and logs (`fsprof-fuse`, `raif`; `fsprof profile` serves its mount from
/// its own process, for itself).
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Daemon")]
pub struct DaemonArgs {
    /// Let other users use the mount (needs user_allow_other in /etc/fuse.conf for non-root).
    /// Other users read the histograms of the mount as a whole from the control files; the
    /// records that name files or processes (hot files, the slow log, the slowest requests,
    /// per-caller layers) and the block-device layers are for root and the mounting user
    /// only, unless --share-records.
    #[arg(long)]
    pub allow_other: bool,
    /// Show the request records to other users too (and to scrapes without the metrics
    /// token), filtered for each: a path only if they may search every directory above it, and
    /// another user's pid, comm and uid only where /proc shows them to everyone (hidepid off).
    #[arg(long)]
    pub share_records: bool,
    /// Have fusermount3 unmount if the daemon dies.
    #[arg(long)]
    pub auto_unmount: bool,
    /// Allow mounting over a non-empty directory.
    #[arg(long)]
    pub nonempty: bool,
    /// Daemon log file. In the foreground the log goes to standard error; in the background
    /// to this file if given, else to syslog where the machine has it (/dev/log), else to
    /// /var/log/fsprof/PROGRAM.log (root) or ~/.local/state/fsprof/PROGRAM.log. Each line names
    /// the mount point; the mount says where the log goes.
    #[arg(long, value_name = "PATH")]
    pub log_file: Option<PathBuf>,
    /// The syslog socket (tests point it elsewhere).
    #[arg(long, value_name = "PATH", default_value = crate::daemon::daemon_log::SYSLOG_SOCKET, hide = true)]
    pub syslog_socket: PathBuf,
    /// Log level (error, warn, info, debug, trace); RUST_LOG overrides.
    #[arg(long, default_value = "warn", value_name = "LEVEL")]
    pub log_level: String,
    /// Options as mount(8), fstab and mount.fuse3 give them: a comma-separated list of
    /// key[=value]. Every long option has one (`_` or `-`): `-o allow_other,cache=exact` is
    /// `--allow-other --cache exact`; a value with commas is quoted or escaped
    /// (`inject="op=read,every=2,delay=1ms"`). mount(8)'s generic options are applied (ro, rw,
    /// dev, nodev, suid, nosuid, exec, noexec, atime, noatime, sync, async, dirsync; dev and
    /// suid only as root, nodev and nosuid by default) or ignored (defaults, auto, noauto,
    /// nofail, _netdev, user, x-*, relatime and the rest); FUSE's default_permissions is
    /// always on; fsname= and subtype= name the mount in /proc/mounts.
    #[arg(short = 'o', value_name = "KEY[=VALUE],...")]
    pub options: Vec<String>,
    /// The source column of /proc/mounts and df (default: the directory served).
    #[arg(long, value_name = "NAME")]
    pub fsname: Option<String>,
    /// The type shown in /proc/mounts, as fuse.TYPE (default: the program's name).
    #[arg(long, value_name = "TYPE")]
    pub subtype: Option<String>,
    /// A mount(8) flag (-o's generic options: ro, nodev, noexec...), later ones winning.
    #[arg(long, value_name = "FLAG", hide = true)]
    pub mount_flag: Vec<String>,
}

impl DaemonArgs {
    /// `settings` as this daemon asks: other users, unmount by fusermount3, mount(8)'s flags
    /// and the names in `/proc/mounts` (with `keep_names`, `--fsname` and `--subtype` are
    /// ignored: the program names its mounts itself).
    pub fn apply(&self, settings: &mut MountSettings, keep_names: bool) -> Result<(), SetupError> {
        settings.allow_other = self.allow_other;
        settings.share_records = self.share_records;
        settings.auto_unmount = self.auto_unmount;
        let mut flags = super::mount_opts::kernel_flags(&self.mount_flag).map_err(setup_err)?;
        if crate::sys::geteuid() != 0 {
            // Only root may mount with them (fusermount3 would refuse them, line by line); a
            // normal user's mount.fuse3 never adds them.
            flags.dev = false;
            flags.suid = false;
        }
        settings.flags = flags;
        for (name, v) in [("fsname", &self.fsname), ("subtype", &self.subtype)] {
            if let Some(v) = v.as_deref() {
                if v.is_empty()
                    || v.contains(|c: char| c.is_whitespace() || c == ',' || c.is_control())
                {
                    return Err(setup_err(format!(
                        "--{name} '{v}': empty, or holds a space, a comma or a control character"
                    )));
                }
            }
        }
        // A program that names its mounts itself keeps its names (raif finds its mounted
        // volumes by them); it logs that the options were ignored.
        if !keep_names {
            if let Some(n) = &self.fsname {
                settings.fsname = n.clone();
            }
            if let Some(t) = &self.subtype {
                settings.subtype = t.clone();
            }
        }
        Ok(())
    }

    /// Where the log of `program` goes, in the foreground or not (see `--log-file`).
    pub fn log(&self, program: &str, foreground: bool) -> Result<LogSink, SetupError> {
        let file = self
            .log_file
            .as_ref()
            .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone()));
        LogSink::choose(program, foreground, file, &self.syslog_socket)
    }
}

/// The control files of a daemon's mount.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Control files")]
pub struct ControlArgs {
    /// Base name of the control files (NAME and NAME.json at the mount root).
    #[arg(long, default_value = DEFAULT_NAME, value_name = "NAME")]
    pub control_name: String,
    /// List the control files in the mount root (by default `ls -a` and `grep -r` do not see
    /// them; they always answer lookup, stat and open).
    #[arg(long)]
    pub list_control: bool,
}

impl ControlArgs {
    /// The control-file base name, checked to be a plain file name.
    pub fn control_name(&self) -> Result<String, SetupError> {
        let n = &self.control_name;
        if n.is_empty() || n.contains('/') || n == "." || n == ".." {
            return Err(setup_err(format!("--control-name '{n}': not a file name")));
        }
        Ok(n.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_names_are_checked() {
        let mut c = ControlArgs {
            control_name: "a/b".into(),
            list_control: false,
        };
        assert!(c.control_name().is_err());
        c.control_name = ".x".into();
        assert_eq!(c.control_name().unwrap(), ".x");
    }
}
