//! Benchmark targets: a plain directory, fsprof-fuse with and without profiling, RAIF, and peer
//! FUSE file systems, each mounted over a fresh lower directory. fsprof-fuse, RAIF and libfuse's
//! `passthrough_hp` also come over FUSE over io_uring: the same name with `+uring`.
//! `fsprof-fuse+scrape` is fsprof-fuse with its `--metrics` endpoint scraped every 100 ms while
//! the workload runs (what a Prometheus at a tenth of a second would cost it);
//! `fsprof-fuse+records` keeps the slow log and per-uid profiles (`--slow 10ms --by uid`);
//! `fsprof-fuse+kernel` records the kernel's layers too (`--kernel`). `nomount` is the plain
//! directory with the syscall level timing every file-system call of the harness and its
//! children (what `fsprof profile --no-mount` costs). Any target with a daemon
//! takes extra daemon options in brackets after its name and suffixes, separated by spaces
//! (`fsprof-fuse+uring[--cache=exact --threads=1]`): one knob at a time.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::mounts::{self, MountGuard};
use super::procfs;

/// What a target is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// The lower directory itself, no FUSE.
    Native,
    /// The lower directory itself with the syscall level on (`fsprof profile --no-mount`):
    /// every file-system call of the harness and its children timed in the kernel.
    NoMount,
    /// `fsprof-fuse LOWER MNT`, with `--no-profile` when `profile` is false.
    FsprofFuse {
        /// Whether profiling is on.
        profile: bool,
        /// Over FUSE over io_uring (`--uring`).
        uring: bool,
        /// With `--metrics` on a loopback port, scraped every [`SCRAPE_EVERY`].
        scrape: bool,
        /// With the request records of [`RECORDS_ARGS`].
        records: bool,
        /// With the kernel's layers (`--kernel`).
        kernel: bool,
    },
    /// `raif --branches B0,B1,... --level LEVEL MNT`.
    Raif {
        /// RAIF level (0, 1, 4, 5).
        level: u32,
        /// Number of branches.
        branches: u32,
        /// Over FUSE over io_uring (`--uring`).
        uring: bool,
    },
    /// libfuse's `passthrough_hp --nopassthrough LOWER MNT` (the external anchor of the io_uring
    /// transport; with `-o io_uring` when `uring`). Note that it turns on the writeback cache and
    /// day-long cache timeouts, so its times compare with its own `+uring` run, not with ours.
    PassthroughHp {
        /// With `-o io_uring`.
        uring: bool,
    },
    /// `bindfs LOWER MNT`.
    Bindfs,
    /// `unionfs LOWER=RW MNT` (unionfs-fuse, one branch).
    UnionfsFuse,
    /// `mergerfs LOWER MNT` (one branch).
    Mergerfs,
    /// `loggedfs -l LOG MNT` (LoggedFS mounts over the directory it logs).
    Loggedfs,
}

/// A named target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// As written on the command line (`raif:5:4`).
    pub name: String,
    /// What it is.
    pub kind: Kind,
    /// Extra options given to its daemon, after the target's own (`NAME[ARG ARG]`).
    pub args: Vec<String>,
}

/// Target names accepted besides `raif:LEVEL:N`.
pub const NAMES: &[&str] = &[
    "native",
    "nomount",
    "fsprof-fuse-noprofile",
    "fsprof-fuse",
    "bindfs",
    "unionfs-fuse",
    "mergerfs",
    "loggedfs",
    "passthrough_hp",
];

/// The suffix that puts a target over FUSE over io_uring (`fsprof-fuse+uring`, `raif:1:2+uring`,
/// `passthrough_hp+uring`).
pub const URING: &str = "+uring";

/// The suffix that scrapes fsprof-fuse's `--metrics` endpoint during the workload.
pub const SCRAPE: &str = "+scrape";

/// The suffix that keeps request records (fsprof-fuse with [`RECORDS_ARGS`]).
pub const RECORDS: &str = "+records";

/// What `+records` adds: the slow log and per-uid profiles, as in the cost target.
pub const RECORDS_ARGS: &[&str] = &["--slow", "10ms", "--by", "uid"];

/// The suffix that records the kernel's layers (fsprof-fuse with `--kernel`).
pub const KERNEL: &str = "+kernel";

/// How often `+scrape` scrapes.
pub const SCRAPE_EVERY: Duration = Duration::from_millis(100);

/// Where the fsprof binaries are.
#[derive(Debug, Clone, Default)]
pub struct Binaries {
    /// `fsprof-fuse`.
    pub fsprof_fuse: Option<PathBuf>,
    /// `raif`.
    pub raif: Option<PathBuf>,
    /// libfuse's `passthrough_hp` (built with `-Denable-io-uring=true` for `+uring`).
    pub passthrough_hp: Option<PathBuf>,
}

/// Finds `name` in `PATH`.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// A binary next to this executable (the same cargo target directory).
pub fn sibling(name: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let p = exe.parent()?.join(name);
    p.is_file().then_some(p)
}

impl Target {
    /// Parses a target name.
    pub fn parse(s: &str) -> Result<Target, String> {
        let (plain, args) = match s.strip_suffix(']').and_then(|r| r.split_once('[')) {
            Some((plain, args)) => {
                let args: Vec<String> = args.split_whitespace().map(String::from).collect();
                if args.is_empty() || args.iter().any(|a| a.contains(['[', ']'])) {
                    return Err(format!(
                        "'{s}': daemon options go in one pair of brackets, separated by \
                         spaces: NAME[--OPTION=VALUE ...]"
                    ));
                }
                (plain, args)
            }
            None if s.contains(['[', ']']) => {
                return Err(format!("'{s}': daemon options go last, in brackets"));
            }
            None => (s, Vec::new()),
        };
        let mut t = Target::parse_plain(plain)?;
        if !args.is_empty() && matches!(t.kind, Kind::Native | Kind::NoMount) {
            return Err(format!("'{s}': {plain} has no daemon to take options"));
        }
        t.name = s.to_string();
        t.args = args;
        Ok(t)
    }

    /// Parses a target name without daemon options.
    fn parse_plain(s: &str) -> Result<Target, String> {
        let (rest, kernel) = match s.strip_suffix(KERNEL) {
            Some(b) => (b, true),
            None => (s, false),
        };
        let (rest, records) = match rest.strip_suffix(RECORDS) {
            Some(b) => (b, true),
            None => (rest, false),
        };
        let (rest, scrape) = match rest.strip_suffix(SCRAPE) {
            Some(b) => (b, true),
            None => (rest, false),
        };
        let (base, uring) = match rest.strip_suffix(URING) {
            Some(b) => (b, true),
            None => (rest, false),
        };
        let kind = match base {
            "fsprof-fuse-noprofile" | "fsprof-fuse:noprofile" => Kind::FsprofFuse {
                profile: false,
                uring: false,
                scrape: false,
                records: false,
                kernel: false,
            },
            "fsprof-fuse" => Kind::FsprofFuse {
                profile: true,
                uring: false,
                scrape,
                records,
                kernel,
            },
            "passthrough_hp" => Kind::PassthroughHp { uring: false },
            "native" => Kind::Native,
            "nomount" => Kind::NoMount,
            "bindfs" => Kind::Bindfs,
            "unionfs-fuse" | "unionfs" => Kind::UnionfsFuse,
            "mergerfs" => Kind::Mergerfs,
            "loggedfs" => Kind::Loggedfs,
            _ => {
                let parts: Vec<&str> = base.split(':').collect();
                match parts.as_slice() {
                    ["raif", level, n] => raif_kind(s, level, n)?,
                    _ => {
                        return Err(format!(
                            "unknown target '{s}': expected one of {} or raif:LEVEL:N \
                             (fsprof-fuse, raif and passthrough_hp with {URING} for FUSE over \
                             io_uring)",
                            NAMES.join(", ")
                        ));
                    }
                }
            }
        };
        let kind = match (kind, uring) {
            (k, false) => k,
            (
                Kind::FsprofFuse {
                    profile,
                    scrape,
                    records,
                    kernel,
                    ..
                },
                true,
            ) => Kind::FsprofFuse {
                profile,
                uring: true,
                scrape,
                records,
                kernel,
            },
            (
                Kind::Raif {
                    level, branches, ..
                },
                true,
            ) => Kind::Raif {
                level,
                branches,
                uring: true,
            },
            (Kind::PassthroughHp { .. }, true) => Kind::PassthroughHp { uring: true },
            (_, true) => {
                return Err(format!(
                    "'{s}': only fsprof-fuse, fsprof-fuse-noprofile, raif:LEVEL:N and \
                     passthrough_hp come over io_uring"
                ));
            }
        };
        if scrape && !matches!(kind, Kind::FsprofFuse { scrape: true, .. }) {
            return Err(format!(
                "'{s}': only fsprof-fuse[{URING}] comes with {SCRAPE}"
            ));
        }
        if kernel && !matches!(kind, Kind::FsprofFuse { kernel: true, .. }) {
            return Err(format!(
                "'{s}': only fsprof-fuse[{URING}][{SCRAPE}][{RECORDS}] comes with {KERNEL}"
            ));
        }
        if records && !matches!(kind, Kind::FsprofFuse { records: true, .. }) {
            return Err(format!(
                "'{s}': only fsprof-fuse[{URING}][{SCRAPE}] comes with {RECORDS}"
            ));
        }
        Ok(Target {
            name: s.to_string(),
            kind,
            args: Vec::new(),
        })
    }

    /// The program that mounts this target, or why it is unavailable. `Ok(None)` for native.
    pub fn program(&self, bins: &Binaries) -> Result<Option<PathBuf>, String> {
        let (name, found) = match self.kind {
            Kind::Native | Kind::NoMount => return Ok(None),
            Kind::FsprofFuse { .. } => ("fsprof-fuse", bins.fsprof_fuse.clone()),
            Kind::Raif { .. } => ("raif", bins.raif.clone()),
            Kind::PassthroughHp { .. } => (
                "passthrough_hp",
                bins.passthrough_hp
                    .clone()
                    .or_else(|| which("passthrough_hp")),
            ),
            Kind::Bindfs => ("bindfs", which("bindfs")),
            Kind::UnionfsFuse => ("unionfs", which("unionfs")),
            Kind::Mergerfs => ("mergerfs", which("mergerfs")),
            Kind::Loggedfs => ("loggedfs", which("loggedfs")),
        };
        match found {
            Some(p) if p.is_file() => Ok(Some(p)),
            Some(p) => Err(format!("{name} not found at '{}'", p.display())),
            None => Err(format!("{name} not found")),
        }
    }

    /// Mounts this target in the fresh directory `dir` (which must exist and be empty).
    /// Returns the directory the workload runs in and the guard of the mount.
    pub fn mount(&self, program: Option<&Path>, dir: &Path) -> Result<Mounted, String> {
        let mk = |name: &str| -> Result<PathBuf, String> {
            let p = dir.join(name);
            std::fs::create_dir_all(&p)
                .map_err(|e| format!("cannot create '{}': {e}", p.display()))?;
            Ok(p)
        };
        let Some(program) = program else {
            let syscalls = match self.kind {
                Kind::NoMount => Some(no_mount()?),
                _ => None,
            };
            return Ok(Mounted {
                path: mk("lower")?,
                guard: None,
                scraper: None,
                syscalls,
            });
        };
        let mnt = mk("mnt")?;
        let mut cmd = Command::new(program);
        let mut metrics = None;
        match &self.kind {
            Kind::Native | Kind::NoMount => unreachable!("no program"),
            Kind::FsprofFuse {
                profile,
                uring,
                scrape,
                records,
                kernel,
            } => {
                cmd.arg(mk("lower")?).arg(&mnt);
                if *kernel {
                    cmd.arg("--kernel");
                }
                if !profile {
                    cmd.arg("--no-profile");
                }
                if *records {
                    cmd.args(RECORDS_ARGS);
                }
                if *uring {
                    cmd.arg("--uring");
                }
                if *scrape {
                    let port = std::net::TcpListener::bind("127.0.0.1:0")
                        .and_then(|l| l.local_addr())
                        .map_err(|e| format!("no free loopback port: {e}"))?
                        .port();
                    let addr = format!("127.0.0.1:{port}");
                    cmd.args(["--metrics", &addr]);
                    metrics = Some(addr);
                }
            }
            Kind::PassthroughHp { uring } => {
                cmd.arg("--nopassthrough");
                if *uring {
                    cmd.args(["-o", "io_uring"]);
                }
                cmd.arg(mk("lower")?).arg(&mnt);
            }
            Kind::Raif {
                level,
                branches,
                uring,
            } => {
                if *uring {
                    cmd.arg("--uring");
                }
                let list: Vec<String> = (0..*branches)
                    .map(|i| mk(&format!("branch{i}")).map(|p| p.display().to_string()))
                    .collect::<Result<_, _>>()?;
                cmd.arg("--branches")
                    .arg(list.join(","))
                    .arg("--level")
                    .arg(level.to_string())
                    .arg(&mnt);
            }
            Kind::Bindfs => {
                cmd.arg(mk("lower")?).arg(&mnt);
            }
            Kind::UnionfsFuse => {
                let lower = mk("lower")?;
                cmd.arg(format!("{}=RW", lower.display())).arg(&mnt);
            }
            Kind::Mergerfs => {
                cmd.arg(mk("lower")?).arg(&mnt);
            }
            Kind::Loggedfs => {
                cmd.arg("-l").arg(dir.join("loggedfs.log")).arg(&mnt);
            }
        }
        if !self.args.is_empty() {
            // Before the operands of the programs whose options must come first
            // (passthrough_hp's getopt); clap takes them anywhere.
            let given: Vec<std::ffi::OsString> = cmd.get_args().map(|a| a.to_owned()).collect();
            let mut with = Command::new(program);
            with.args(&self.args).args(given);
            cmd = with;
        }
        log::info!("mounting {}: {:?}", self.name, cmd);
        let out = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .map_err(|e| format!("cannot run '{}': {e}", program.display()))?;
        // Whatever happened, from here on a mount may exist: guard it before judging.
        let program_name = program
            .file_name()
            .map(|n| n.to_string_lossy().into_owned());
        let deadline = Instant::now() + Duration::from_secs(10);
        while !mounts::is_mounted(&mnt) && Instant::now() < deadline && out.status.success() {
            std::thread::sleep(Duration::from_millis(20));
        }
        let daemon = procfs::find_daemon(&mnt, program_name.as_deref());
        let guard = MountGuard::new(mnt.clone(), daemon);
        if !out.status.success() || !mounts::is_mounted(&mnt) {
            let err = String::from_utf8_lossy(&out.stderr);
            let err = err.trim();
            return Err(format!(
                "mounting {} failed ({}){}{}",
                self.name,
                out.status,
                if err.is_empty() { "" } else { ": " },
                err.lines().last().unwrap_or("")
            ));
        }
        if daemon.is_none() {
            log::warn!("daemon of {} not found: no CPU time", self.name);
        }
        Ok(Mounted {
            path: mnt,
            guard: Some(guard),
            scraper: metrics.map(|a| Scraper::start(format!("http://{a}/metrics"))),
            syscalls: None,
        })
    }
}

/// The syscall level of `nomount`: every call of this process and of the children it starts
/// from now on, with what `fsprof profile --no-mount` keeps by default (per-caller entries by
/// command, the 100 hottest files, the 50 slowest calls), so that the cost measured is the
/// command's.
fn no_mount() -> Result<std::sync::Arc<syscall_trace::Tracer>, String> {
    let mut config = syscall_trace::Config::new(syscall_trace::Scope::Processes);
    config.by = Some(syscall_trace::By::Comm);
    config.hot_files = Some(100);
    config.slowest = Some(50);
    let t = syscall_trace::Tracer::start(config, None).map_err(|e| format!("nomount: {e}"))?;
    t.follow_process(std::process::id())
        .map_err(|e| format!("nomount: {e}"))?;
    Ok(t)
}

/// Scrapes a `/metrics` URL every [`SCRAPE_EVERY`] on a thread of its own until dropped.
#[derive(Debug)]
pub struct Scraper {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<(u64, u64)>>,
}

impl Scraper {
    fn start(url: String) -> Scraper {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            let agent = ureq::AgentBuilder::new()
                .timeout(Duration::from_secs(5))
                .build();
            let (mut ok, mut failed) = (0u64, 0u64);
            let mut next = Instant::now();
            while !s.load(Ordering::Relaxed) {
                match agent.get(&url).call().map(|r| r.into_string()) {
                    Ok(Ok(_)) => ok += 1,
                    _ => failed += 1,
                }
                next += SCRAPE_EVERY;
                std::thread::sleep(next.saturating_duration_since(Instant::now()));
            }
            (ok, failed)
        });
        Scraper {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops scraping; the scrapes that worked and failed.
    pub fn finish(&mut self) -> (u64, u64) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or((0, 0))
    }
}

impl Drop for Scraper {
    fn drop(&mut self) {
        self.finish();
    }
}

/// `raif:LEVEL:N` (named `s`) checked.
fn raif_kind(s: &str, level: &str, n: &str) -> Result<Kind, String> {
    let level: u32 = level
        .parse()
        .ok()
        .filter(|l| [0, 1, 4, 5].contains(l))
        .ok_or_else(|| format!("bad RAIF level in '{s}': 0, 1, 4 or 5"))?;
    let branches: u32 = n
        .parse()
        .ok()
        .filter(|n| (2..=64).contains(n))
        .ok_or_else(|| format!("bad branch count in '{s}': 2 to 64"))?;
    if level >= 4 && branches < 3 {
        return Err(format!("'{s}': RAIF{level} needs at least 3 branches"));
    }
    Ok(Kind::Raif {
        level,
        branches,
        uring: false,
    })
}

/// A mounted (or native) target.
#[derive(Debug)]
pub struct Mounted {
    /// Where the workload runs.
    pub path: PathBuf,
    /// The mount, unmounted when this drops.
    pub guard: Option<MountGuard>,
    /// The `+scrape` target's scraper (stopped before the mount goes).
    pub scraper: Option<Scraper>,
    /// `nomount`'s syscall level (closed at the unmount).
    pub syscalls: Option<std::sync::Arc<syscall_trace::Tracer>>,
}

impl Mounted {
    /// CPU seconds the daemon has used so far (None for native or an unknown daemon).
    pub fn daemon_cpu(&self) -> Option<f64> {
        procfs::cpu_seconds(self.guard.as_ref()?.daemon()?)
    }

    /// Unmounts now; false if it could not.
    pub fn unmount(&mut self) -> bool {
        if let Some(s) = &mut self.scraper {
            let (ok, failed) = s.finish();
            log::info!("scraped {ok} times ({failed} failed)");
        }
        if let Some(t) = self.syscalls.take() {
            use profile_store::Extension;
            let calls: u64 = t.layers().first().map_or(0, |l| l.total_count());
            log::info!("nomount: {calls} system calls timed");
            t.close();
        }
        self.guard.as_mut().is_none_or(MountGuard::unmount)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn daemon_options_come_last_in_brackets() {
        let t = Target::parse("fsprof-fuse+uring[--cache=exact --threads=1]").unwrap();
        assert!(matches!(t.kind, Kind::FsprofFuse { uring: true, .. }));
        assert_eq!(t.args, ["--cache=exact", "--threads=1"]);
        assert_eq!(t.name, "fsprof-fuse+uring[--cache=exact --threads=1]");
        assert!(Target::parse("raif:1:2[--cache=fast]").is_ok());
        for bad in [
            "native[--x]",
            "fsprof-fuse[]",
            "fsprof-fuse[--a][--b]",
            "fsprof-fuse[--a]+uring",
            "fsprof-fuse[--a",
        ] {
            assert!(Target::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn parses_names() {
        assert_eq!(Target::parse("native").unwrap().kind, Kind::Native);
        assert_eq!(
            Target::parse("fsprof-fuse-noprofile").unwrap().kind,
            Kind::FsprofFuse {
                profile: false,
                uring: false,
                scrape: false,
                records: false,
                kernel: false
            }
        );
        assert_eq!(
            Target::parse("raif:5:4").unwrap().kind,
            Kind::Raif {
                level: 5,
                branches: 4,
                uring: false
            }
        );
        assert_eq!(
            Target::parse("raif:1:2+uring").unwrap().kind,
            Kind::Raif {
                level: 1,
                branches: 2,
                uring: true
            }
        );
        assert_eq!(
            Target::parse("fsprof-fuse+uring").unwrap().kind,
            Kind::FsprofFuse {
                profile: true,
                uring: true,
                scrape: false,
                records: false,
                kernel: false
            }
        );
        assert_eq!(
            Target::parse("fsprof-fuse+uring+scrape").unwrap().kind,
            Kind::FsprofFuse {
                profile: true,
                uring: true,
                scrape: true,
                records: false,
                kernel: false
            }
        );
        assert_eq!(
            Target::parse("fsprof-fuse+scrape").unwrap().kind,
            Kind::FsprofFuse {
                profile: true,
                uring: false,
                scrape: true,
                records: false,
                kernel: false
            }
        );
        assert_eq!(
            Target::parse("fsprof-fuse+uring+records").unwrap().kind,
            Kind::FsprofFuse {
                profile: true,
                uring: true,
                scrape: false,
                records: true,
                kernel: false
            }
        );
        assert!(Target::parse("fsprof-fuse-noprofile+records").is_err());
        assert!(Target::parse("raif:5:3+records").is_err());
        assert!(Target::parse("fsprof-fuse-noprofile+scrape").is_err());
        assert!(Target::parse("raif:1:2+scrape").is_err());
        assert_eq!(
            Target::parse("passthrough_hp+uring").unwrap().kind,
            Kind::PassthroughHp { uring: true }
        );
        assert!(Target::parse("bindfs+uring").is_err());
        assert!(Target::parse("raif:3:4+uring").is_err());
        assert!(Target::parse("raif:3:4").is_err());
        assert!(Target::parse("raif:5:2").is_err());
        assert!(Target::parse("ext9").is_err());
    }
}
