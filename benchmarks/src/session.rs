//! The command interpreter: applies settings, and runs the workload (once or as several
//! concurrent clients) when it reads `run`.

use std::fs::OpenOptions;
use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::Barrier;

use profile_store::{Profiler, Recorder};

use crate::command::{Command, LocationChange, parse_line};
use crate::config::{Config, Location, ReportFormat, help_text};
use crate::fileio::FileError;
use crate::latency::{Latencies, Probe, client_recorder};
use crate::report::RunSummary;
use crate::workload::{Stamp, Timeline, Transactions, Workload};

/// How the generator runs, beyond Postmark's own settings.
#[derive(Debug, Clone)]
pub struct Options {
    /// Concurrent independent clients, each in its own subdirectory `clientN` of every
    /// location. Default 1 (no subdirectory: exactly Postmark).
    pub clients: u32,
    /// Client `i` uses seed `seed + i` instead of the same seed. Default false.
    pub distinct_seeds: bool,
    /// Print JSON instead of the text reports. Default false.
    pub json: bool,
    /// Print our extras (sub-second times, latency percentiles) after Postmark's report.
    /// Default true.
    pub extras: bool,
    /// Print Postmark's progress lines ("Creating files...Done"). Default true.
    pub progress: bool,
    /// Interactive: print the `pm>` prompt and report bad lines without stopping. Default false.
    pub interactive: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            clients: 1,
            distinct_seeds: false,
            json: false,
            extras: true,
            progress: true,
            interactive: false,
        }
    }
}

/// Why a session stopped.
#[derive(Debug)]
pub enum SessionError {
    /// A bad command or setting: where it was and what was wrong.
    Config {
        /// File name (or `<stdin>`).
        source: String,
        /// 1-based line.
        line: usize,
        /// What was wrong.
        message: String,
    },
    /// A file operation failed during a run.
    Run {
        /// File name of the `run` command.
        source: String,
        /// Its line.
        line: usize,
        /// The failed operation.
        error: FileError,
    },
    /// Reading the commands or writing the report failed.
    Io(String),
}

impl std::fmt::Display for SessionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SessionError::Config {
                source,
                line,
                message,
            } => write!(f, "{source}:{line}: {message}"),
            SessionError::Run {
                source,
                line,
                error,
            } => write!(f, "{source}:{line}: run failed: {error}"),
            SessionError::Io(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for SessionError {}

impl SessionError {
    /// The exit status a binary should use: 2 for configuration errors, 1 otherwise.
    pub fn exit_code(&self) -> i32 {
        match self {
            SessionError::Config { .. } => 2,
            _ => 1,
        }
    }
}

/// Whether to keep reading commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Continue,
    Quit,
}

/// Deepest nesting of `load` commands.
const MAX_LOAD_DEPTH: usize = 16;

/// Receives the errors an interactive session reports and carries on after.
pub type ErrorHandler = Box<dyn FnMut(&SessionError)>;

/// A command session: the configuration so far, the results of its runs, and the `client`
/// profile layer every run records into.
pub struct Session<W: Write> {
    config: Config,
    options: Options,
    out: W,
    on_error: ErrorHandler,
    runs: Vec<RunSummary>,
    recorder: Recorder,
    profiler: Profiler,
    depth: usize,
}

impl<W: Write> Session<W> {
    /// A session writing its output to `out`.
    pub fn new(options: Options, out: W) -> Session<W> {
        // Calibrate the cycle clock now (about 25 ms), not inside the first timed run.
        let _ = profile_store::ClockInfo::get();
        let recorder = client_recorder();
        let profiler = Profiler::new(vec![recorder.clone()]);
        Session {
            config: Config::default(),
            options,
            out,
            on_error: Box::new(|e| log::error!("{e}")),
            runs: Vec::new(),
            recorder,
            profiler,
            depth: 0,
        }
    }

    /// Where an interactive session reports a bad line before reading the next one (Postmark
    /// prints `Error: ...` on standard error; the binary does the same). Default: logged at
    /// error level.
    pub fn on_error(&mut self, handler: ErrorHandler) {
        self.on_error = handler;
    }

    /// The configuration as set so far.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The results of the runs so far.
    pub fn runs(&self) -> &[RunSummary] {
        &self.runs
    }

    /// The `client` layer's profile of every run so far.
    pub fn profile(&self) -> profile_store::Profile {
        self.profiler.snapshot()
    }

    /// The output writer.
    pub fn output(&mut self) -> &mut W {
        &mut self.out
    }

    fn io_err(e: io::Error) -> SessionError {
        SessionError::Io(format!("writing output: {e}"))
    }

    /// Reads and executes commands from `input` (named `source` in messages) until its end or
    /// `quit`. Returns true if `quit` was read.
    pub fn execute(&mut self, source: &str, input: impl BufRead) -> Result<bool, SessionError> {
        Ok(self.execute_inner(source, input)? == Flow::Quit)
    }

    fn execute_inner(&mut self, source: &str, input: impl BufRead) -> Result<Flow, SessionError> {
        let mut lines = input.lines();
        let mut n = 0;
        loop {
            if self.options.interactive {
                write!(self.out, "pm>").map_err(Self::io_err)?;
                self.out.flush().map_err(Self::io_err)?;
            }
            let Some(line) = lines.next() else {
                return Ok(Flow::Continue);
            };
            n += 1;
            let line = line.map_err(|e| SessionError::Io(format!("{source}: line {n}: {e}")))?;
            match self.execute_line(source, n, &line) {
                Ok(Flow::Quit) => return Ok(Flow::Quit),
                Ok(Flow::Continue) => {}
                Err(e @ SessionError::Config { .. }) if self.options.interactive => {
                    (self.on_error)(&e);
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn config_error(source: &str, line: usize, message: impl Into<String>) -> SessionError {
        SessionError::Config {
            source: source.to_string(),
            line,
            message: message.into(),
        }
    }

    fn execute_line(&mut self, source: &str, n: usize, line: &str) -> Result<Flow, SessionError> {
        let cmd = match parse_line(line) {
            Ok(Some(c)) => c,
            Ok(None) => return Ok(Flow::Continue),
            Err(m) => return Err(Self::config_error(source, n, m)),
        };
        let c = &mut self.config;
        match cmd {
            Command::Size(low, high) => {
                c.size_low = low;
                c.size_high = high;
            }
            Command::Number(v) => c.number = v,
            Command::Seed(v) => c.seed = v,
            Command::Transactions(v) => c.transactions = v,
            Command::Subdirectories(v) => c.subdirectories = v,
            Command::ReadBlock(v) => c.read_block = v,
            Command::WriteBlock(v) => c.write_block = v,
            Command::Buffering(v) => c.buffering = v,
            Command::BiasRead(v) => c.bias_read = v,
            Command::BiasCreate(v) => c.bias_create = v,
            Command::Report(v) => c.report = v,
            Command::Location(change) => self
                .change_location(change)
                .map_err(|m| Self::config_error(source, n, m))?,
            Command::Show(file) => {
                let cwd = std::env::current_dir()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default();
                let text = self.config.show(&cwd);
                self.emit(&text, file.as_deref())
                    .map_err(|m| Self::config_error(source, n, m))?;
            }
            Command::Help(prefix) => {
                let text = help_text(prefix.as_deref());
                if !self.options.json {
                    self.out.write_all(text.as_bytes()).map_err(Self::io_err)?;
                }
            }
            Command::Load(path) => {
                if self.depth >= MAX_LOAD_DEPTH {
                    return Err(Self::config_error(
                        source,
                        n,
                        format!("'load' nested more than {MAX_LOAD_DEPTH} deep"),
                    ));
                }
                let f = std::fs::File::open(&path).map_err(|e| {
                    Self::config_error(
                        source,
                        n,
                        format!("cannot read configuration file '{}': {e}", path.display()),
                    )
                })?;
                self.depth += 1;
                let r = self.execute_inner(&path.display().to_string(), io::BufReader::new(f));
                self.depth -= 1;
                return r;
            }
            Command::Run(file) => {
                if let Some(f) = &file {
                    check_appendable(f).map_err(|m| Self::config_error(source, n, m))?;
                }
                let summary = self.run().map_err(|error| SessionError::Run {
                    source: source.to_string(),
                    line: n,
                    error,
                })?;
                if !self.options.json {
                    let mut text = match summary.config.report {
                        ReportFormat::Verbose => summary.verbose(),
                        ReportFormat::Terse => summary.terse(),
                    };
                    if self.options.extras {
                        text.push_str(&summary.extras());
                    }
                    if summary.complete {
                        self.emit(&text, file.as_deref())
                            .map_err(|m| Self::config_error(source, n, m))?;
                    }
                }
                self.runs.push(summary);
            }
            Command::Quit => return Ok(Flow::Quit),
        }
        Ok(Flow::Continue)
    }

    fn change_location(&mut self, change: LocationChange) -> Result<(), String> {
        let exists = |p: &Path| -> Result<(), String> {
            match std::fs::metadata(p) {
                Ok(m) if m.is_dir() => Ok(()),
                Ok(_) => Err(format!("location '{}' is not a directory", p.display())),
                Err(e) => Err(format!("location '{}' does not exist: {e}", p.display())),
            }
        };
        let locs = &mut self.config.locations;
        match change {
            LocationChange::Replace(path, weight) => {
                exists(&path)?;
                *locs = vec![Location { path, weight }];
            }
            LocationChange::Add(path, weight) => {
                exists(&path)?;
                locs.push(Location { path, weight });
            }
            LocationChange::Remove(path) => {
                let i = locs
                    .iter()
                    .position(|l| l.path == path)
                    .ok_or_else(|| format!("cannot find location '{}'", path.display()))?;
                locs.remove(i);
            }
        }
        Ok(())
    }

    /// Writes `text` to the output, or appends it to `file`.
    fn emit(&mut self, text: &str, file: Option<&Path>) -> Result<(), String> {
        match file {
            Some(f) => OpenOptions::new()
                .append(true)
                .create(true)
                .open(f)
                .and_then(|mut h| h.write_all(text.as_bytes()))
                .map_err(|e| format!("cannot write to '{}': {e}", f.display())),
            None if self.options.json => Ok(()),
            None => self
                .out
                .write_all(text.as_bytes())
                .map_err(|e| format!("writing output: {e}")),
        }
    }

    fn progress(&mut self, s: &str) {
        if self.options.progress && !self.options.json {
            let _ = self.out.write_all(s.as_bytes());
            let _ = self.out.flush();
        }
    }

    /// One `run`: one client in the configured locations, or several, each in `clientN`.
    fn run(&mut self) -> Result<RunSummary, FileError> {
        let clients = self.options.clients.max(1);
        let base = self.config.clone();
        let configs: Vec<Config> = if clients == 1 {
            vec![base.clone()]
        } else {
            (0..clients)
                .map(|i| client_config(&base, i, self.options.distinct_seeds))
                .collect()
        };
        // Client directories are made (and removed) outside the measurement: not timed, not
        // in the profile.
        let client_dirs: Vec<PathBuf> = if clients == 1 {
            Vec::new()
        } else {
            configs.iter().flat_map(client_roots).collect()
        };
        let mut made = Vec::new();
        let mut result = Ok(());
        for d in &client_dirs {
            match std::fs::create_dir(d) {
                Ok(()) => made.push(d.clone()),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && d.is_dir() => {}
                Err(error) => {
                    result = Err(FileError {
                        call: "mkdir",
                        path: d.clone(),
                        error,
                    });
                    break;
                }
            }
        }
        let result = result.and_then(|()| {
            if clients == 1 {
                let probe = Probe::new(self.recorder.clone());
                self.run_one(&configs[0], probe)
            } else {
                self.run_many(&configs)
            }
        });
        for d in made.iter().rev() {
            if let Err(e) = std::fs::remove_dir(d) {
                log::warn!("cannot remove client directory '{}': {e}", d.display());
            }
        }
        let (outcomes, latencies, complete) = result?;
        Ok(RunSummary::new(
            &base,
            &outcomes,
            complete,
            latencies.summaries(),
        ))
    }

    fn run_one(&mut self, cfg: &Config, mut probe: Probe) -> Result<RunOutcome, FileError> {
        let mut w = Workload::new(cfg);
        let r = (|| -> Result<(Timeline, bool), FileError> {
            if cfg.subdirectories > 1 {
                self.progress("Creating subdirectories...");
                w.create_subdirectories(&mut probe)?;
                self.progress("Done\n");
            }
            let start = Stamp::now();
            self.progress("Creating files...");
            w.create_phase(&mut probe)?;
            self.progress("Done\n");
            self.progress("Performing transactions");
            let t_start = Stamp::now();
            let progress = self.options.progress && !self.options.json;
            let out = &mut self.out;
            let t = w.transaction_phase(&mut probe, || {
                if progress {
                    let _ = out.write_all(b".");
                    let _ = out.flush();
                }
            })?;
            let t_end = Stamp::now();
            let complete = t == Transactions::Complete;
            if let Transactions::OutOfFiles(done) = t {
                self.progress(
                    "out of files!\nFor this workload, either increase the number of files or\n\
                     decrease the number of transactions.\n",
                );
                log::warn!(
                    "out of files after {done} of {} transactions: no report",
                    cfg.transactions
                );
            } else {
                self.progress("Done\n");
            }
            self.progress("Deleting files...");
            w.delete_phase(&mut probe)?;
            self.progress("Done\n");
            let end = Stamp::now();
            if cfg.subdirectories > 1 {
                self.progress("Deleting subdirectories...");
                w.delete_subdirectories(&mut probe)?;
                self.progress("Done\n");
            }
            let tl = Timeline {
                start,
                t_start,
                t_end,
                end,
            };
            Ok((tl, complete))
        })();
        match r {
            Ok((tl, complete)) => Ok((
                vec![(w.counters, w.deleted_in_transactions, tl)],
                probe.into_latencies(),
                complete,
            )),
            Err(e) => {
                self.progress("\n");
                w.clean_up_after_failure();
                Err(e)
            }
        }
    }

    fn run_many(&mut self, configs: &[Config]) -> Result<RunOutcome, FileError> {
        let n = configs.len();
        let barrier = Barrier::new(n);
        self.progress(&format!("Running {n} clients..."));
        let results: Vec<Result<ClientOutcome, FileError>> = std::thread::scope(|s| {
            let handles: Vec<_> = configs
                .iter()
                .map(|cfg| {
                    let barrier = &barrier;
                    let recorder = self.recorder.clone();
                    s.spawn(move || run_client(cfg, recorder, barrier))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("client thread panicked"))
                .collect()
        });
        let mut outcomes = Vec::new();
        let mut latencies = Latencies::default();
        let mut complete = true;
        let mut first_error = None;
        for r in results {
            match r {
                Ok((counters, del, tl, lat, done)) => {
                    outcomes.push((counters, del, tl));
                    latencies.merge(&lat);
                    complete &= done;
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first_error {
            self.progress("\n");
            return Err(e);
        }
        self.progress("Done\n");
        Ok((outcomes, latencies, complete))
    }
}

/// Per-client results: counters, files deleted during transactions, timeline.
type ClientResult = (crate::workload::Counters, u64, Timeline);
type RunOutcome = (Vec<ClientResult>, Latencies, bool);
type ClientOutcome = (crate::workload::Counters, u64, Timeline, Latencies, bool);

/// One of several concurrent clients. All clients pass a barrier between phases, so the
/// creation, transaction and deletion phases line up and their times mean the same as for one
/// client. A client that fails keeps meeting the barriers (doing nothing) so the others finish.
fn run_client(
    cfg: &Config,
    recorder: Recorder,
    barrier: &Barrier,
) -> Result<ClientOutcome, FileError> {
    let mut probe = Probe::new(recorder);
    let mut w = Workload::new(cfg);
    let mut failed: Option<FileError> = None;
    let step = |failed: &mut Option<FileError>, f: &mut dyn FnMut() -> Result<(), FileError>| {
        if failed.is_none() {
            if let Err(e) = f() {
                *failed = Some(e);
            }
        }
    };
    step(&mut failed, &mut || w.create_subdirectories(&mut probe));
    barrier.wait();
    let start = Stamp::now();
    step(&mut failed, &mut || w.create_phase(&mut probe));
    barrier.wait();
    let t_start = Stamp::now();
    let mut complete = true;
    step(&mut failed, &mut || {
        complete = w.transaction_phase(&mut probe, || {})? == Transactions::Complete;
        Ok(())
    });
    let t_end = Stamp::now();
    barrier.wait();
    step(&mut failed, &mut || w.delete_phase(&mut probe));
    let end = Stamp::now();
    barrier.wait();
    step(&mut failed, &mut || w.delete_subdirectories(&mut probe));
    if let Some(e) = failed {
        w.clean_up_after_failure();
        return Err(e);
    }
    let tl = Timeline {
        start,
        t_start,
        t_end,
        end,
    };
    Ok((
        w.counters,
        w.deleted_in_transactions,
        tl,
        probe.into_latencies(),
        complete,
    ))
}

/// The directories client `i` works in: `clientI` under each location, or under the current
/// directory.
fn client_roots(cfg: &Config) -> Vec<PathBuf> {
    if cfg.locations.is_empty() {
        vec![PathBuf::new()]
    } else {
        cfg.locations.iter().map(|l| l.path.clone()).collect()
    }
}

fn client_config(base: &Config, i: u32, distinct_seeds: bool) -> Config {
    let mut c = base.clone();
    let dir = format!("client{i}");
    if c.locations.is_empty() {
        c.locations.push(Location {
            path: PathBuf::from(&dir),
            weight: 1,
        });
    } else {
        for l in &mut c.locations {
            l.path = l.path.join(&dir);
        }
    }
    if distinct_seeds {
        c.seed = ((base.seed as u64 + i as u64 - 1) % i32::MAX as u64 + 1) as u32;
    }
    c
}

fn check_appendable(f: &Path) -> Result<(), String> {
    OpenOptions::new()
        .append(true)
        .create(true)
        .open(f)
        .map(drop)
        .map_err(|e| format!("cannot direct output to file '{}': {e}", f.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session() -> Session<Vec<u8>> {
        Session::new(
            Options {
                extras: false,
                ..Options::default()
            },
            Vec::new(),
        )
    }

    #[test]
    fn settings_apply() {
        let mut s = session();
        let quit = s
            .execute(
                "t",
                "set size 100 200\nset number 7\nset bias read -1\nset report terse\nquit\nset number 9\n"
                    .as_bytes(),
            )
            .unwrap();
        assert!(quit);
        let c = s.config();
        assert_eq!((c.size_low, c.size_high, c.number), (100, 200, 7));
        assert_eq!(c.bias_read, -1);
        assert_eq!(c.report, ReportFormat::Terse);
    }

    /// Interactive sessions hand bad lines to the error handler (the library prints nothing
    /// itself) and go on with the next line.
    #[test]
    fn interactive_errors_go_to_the_handler() {
        use std::sync::{Arc, Mutex};
        let mut s = Session::new(
            Options {
                extras: false,
                interactive: true,
                ..Options::default()
            },
            Vec::new(),
        );
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&seen);
        s.on_error(Box::new(move |e| sink.lock().unwrap().push(e.to_string())));
        let quit = s
            .execute("tty", "set number x\nset number 9\nquit\n".as_bytes())
            .unwrap();
        assert!(quit);
        assert_eq!(s.config().number, 9);
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 1, "{seen:?}");
        assert!(seen[0].starts_with("tty:1: "), "{seen:?}");
        assert_eq!(String::from_utf8_lossy(s.output()), "pm>pm>pm>");
    }

    #[test]
    fn errors_carry_line_numbers() {
        let mut s = session();
        let e = s
            .execute("cfg", "set number 5\n\nfrobnicate\n".as_bytes())
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "cfg:3: unknown command 'frobnicate' (try 'help')"
        );
        assert_eq!(e.exit_code(), 2);
        let e = s
            .execute("cfg", "set location /nonexistent/fsprof\n".as_bytes())
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("cfg:1: location '/nonexistent/fsprof' does not exist"),
            "{e}"
        );
    }

    #[test]
    fn client_config_uses_subdirectories_and_seeds() {
        let base = Config {
            seed: 42,
            ..Config::default()
        };
        let c = client_config(&base, 2, true);
        assert_eq!(c.locations[0].path, PathBuf::from("client2"));
        assert_eq!(c.seed, 44);
        let c = client_config(&base, 2, false);
        assert_eq!(c.seed, 42);
    }
}
