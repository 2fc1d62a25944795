//! The command interpreter: applies settings, and runs the workload (once or as several
//! concurrent clients) when it reads `run`.
//!
//! By default a session behaves as Postmark 1.5's command loop does, byte for byte in what it
//! prints: [`Session::main`] prints the banner, reads the configuration file (announcing it) or
//! `./.pmrc`, then, unless that quit, standard input with a `pm>` prompt before every line. A
//! line that is not a command is answered `Eh?` (on the output), a bad setting with Postmark's
//! `Error: ...` line (on the error output), and the next line is read; `quit` in a file given
//! to `load` ends that file only. With [`Options::strict`] the first such line ends the session
//! with an error naming its file and line ([`SessionError::Config`]).

use std::fs::OpenOptions;
use std::io::{self, BufRead, Read as _, Write};
use std::path::{Path, PathBuf};
use std::sync::Barrier;

use profile_store::{Profiler, Recorder};

use crate::command::{Command, LocationChange, Step, parse_line, parse_postmark};
use crate::config::{Config, Location, ReportFormat, help_text};
use crate::fileio::FileError;
use crate::latency::{Latencies, Probe, client_recorder};
use crate::report::RunSummary;
use crate::workload::{Stamp, Timeline, Transactions, Workload};

/// The first line Postmark prints (Debian's `postmark` 1.53 calls itself v1.51).
pub const BANNER: &str = "PostMark v1.51 : 8/14/01\n";

/// The prompt before each line read from standard input.
pub const PROMPT: &str = "pm>";

/// The start-up file Postmark reads from the current directory when given no file.
pub const RC_FILE: &str = ".pmrc";

/// How the generator runs, beyond Postmark's own settings.
#[derive(Debug, Clone)]
pub struct Options {
    /// Concurrent independent clients, each in its own subdirectory `clientN` of every
    /// location. Default 1 (no subdirectory: exactly Postmark).
    pub clients: u32,
    /// Client `i` uses seed `seed + i` instead of the same seed. Default false.
    pub distinct_seeds: bool,
    /// Print nothing but errors on the output (the binary prints one JSON document of the
    /// runs instead); `Eh?` goes to the error output. Default false.
    pub json: bool,
    /// Print our sub-second phase times and client-side latency percentiles after each of
    /// Postmark's reports. Default false: Postmark's report only.
    pub latency: bool,
    /// Print Postmark's progress lines ("Creating files...Done"). Default true.
    pub progress: bool,
    /// End the session at the first line Postmark would answer with `Eh?` or `Error:`
    /// (stricter than Postmark: see [`crate::command::parse_line`]), at a location that does
    /// not exist and at a report file that cannot be written. Default false: as Postmark.
    pub strict: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            clients: 1,
            distinct_seeds: false,
            json: false,
            latency: false,
            progress: true,
            strict: false,
        }
    }
}

/// Why a session stopped.
#[derive(Debug)]
pub enum SessionError {
    /// A bad command or setting (strict sessions): where it was and what was wrong.
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

/// Longest command line read: a command is a few words.
const MAX_LINE: usize = 64 << 10;

/// A command session: the configuration so far, the results of its runs, and the `client`
/// profile layer every run records into.
pub struct Session<W: Write> {
    config: Config,
    options: Options,
    out: W,
    errors: Box<dyn Write>,
    runs: Vec<RunSummary>,
    recorder: Recorder,
    profiler: Profiler,
    depth: usize,
}

impl<W: Write> Session<W> {
    /// A session writing its output to `out` and Postmark's `Error:` lines to standard error.
    pub fn new(options: Options, out: W) -> Session<W> {
        // Calibrate the cycle clock now (about 25 ms), not inside the first timed run.
        let _ = profile_store::ClockInfo::get();
        let recorder = client_recorder();
        let profiler = Profiler::new(vec![recorder.clone()]);
        Session {
            config: Config::default(),
            options,
            out,
            errors: Box::new(io::stderr()),
            runs: Vec::new(),
            recorder,
            profiler,
            depth: 0,
        }
    }

    /// Writes Postmark's `Error:` lines (and, with [`Options::json`], `Eh?`) to `errors`
    /// instead of standard error.
    pub fn with_errors(mut self, errors: impl Write + 'static) -> Session<W> {
        self.errors = Box::new(errors);
        self
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

    /// Postmark's main program: the banner, then the commands of `file` (announced), or of
    /// `./.pmrc` if there is one when no file is given, then, unless those quit, the commands
    /// of `stdin`, each line after a `pm>` prompt. A `file` that cannot be opened is an error
    /// (Postmark would go on to the prompt).
    pub fn main(&mut self, file: Option<&Path>, stdin: impl BufRead) -> Result<(), SessionError> {
        self.say(BANNER)?;
        let flow = match file {
            Some(f) => {
                let input = std::fs::File::open(f)
                    .map_err(|e| SessionError::Io(format!("cannot read '{}': {e}", f.display())))?;
                self.read_file(f, io::BufReader::new(input))?
            }
            None => match std::fs::File::open(RC_FILE) {
                Ok(input) => self.read_file(Path::new(RC_FILE), io::BufReader::new(input))?,
                Err(_) => Flow::Continue,
            },
        };
        if flow == Flow::Continue {
            self.execute_inner("<stdin>", stdin, true)?;
        }
        Ok(())
    }

    /// Reads and executes commands from `input` (named `source` in messages) until its end or
    /// `quit`, with a `pm>` prompt before each line when `prompt` is set (and `?` and `exit`
    /// as aliases, as at Postmark's prompt). Returns true if `quit` was read.
    pub fn execute(
        &mut self,
        source: &str,
        input: impl BufRead,
        prompt: bool,
    ) -> Result<bool, SessionError> {
        Ok(self.execute_inner(source, input, prompt)? == Flow::Quit)
    }

    /// Announces and executes the file `path` (`load`, or the program's argument).
    fn read_file(&mut self, path: &Path, input: impl BufRead) -> Result<Flow, SessionError> {
        self.say(&format!(
            "Reading configuration from file '{}'\n",
            path.display()
        ))?;
        self.execute_inner(&path.display().to_string(), input, false)
    }

    fn execute_inner(
        &mut self,
        source: &str,
        mut input: impl BufRead,
        prompt: bool,
    ) -> Result<Flow, SessionError> {
        let mut n = 0;
        let mut buf = Vec::new();
        loop {
            if prompt {
                self.say(PROMPT)?;
            }
            n += 1;
            buf.clear();
            let io = |e: io::Error| SessionError::Io(format!("{source}: line {n}: {e}"));
            let got = (&mut input)
                .take(MAX_LINE as u64 + 1)
                .read_until(b'\n', &mut buf)
                .map_err(io)?;
            if got == 0 {
                return Ok(Flow::Continue);
            }
            if buf.len() > MAX_LINE {
                return Err(io(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("longer than {} KiB: not a command", MAX_LINE >> 10),
                )));
            }
            if buf.last() == Some(&b'\n') {
                buf.pop();
                if buf.last() == Some(&b'\r') {
                    buf.pop();
                }
            }
            let line = std::str::from_utf8(&buf)
                .map_err(|_| io(io::Error::new(io::ErrorKind::InvalidData, "not UTF-8 text")))?;
            if self.execute_line(source, n, line, prompt)? == Flow::Quit {
                return Ok(Flow::Quit);
            }
        }
    }

    /// Prints `text` on the output (not in JSON mode), flushed (it may be a prompt).
    fn say(&mut self, text: &str) -> Result<(), SessionError> {
        if !self.options.json {
            self.out.write_all(text.as_bytes()).map_err(Self::io_err)?;
            self.out.flush().map_err(Self::io_err)?;
        }
        Ok(())
    }

    /// Postmark's `Eh?`: on the output, or the error output in JSON mode.
    fn eh(&mut self) -> Result<(), SessionError> {
        if self.options.json {
            let _ = self.errors.write_all(b"Eh?\n");
            Ok(())
        } else {
            self.say("Eh?\n")
        }
    }

    /// Postmark's `Error: MESSAGE` line on the error output (after what the output holds).
    fn complain(&mut self, message: &str) {
        let _ = self.out.flush();
        let _ = writeln!(self.errors, "Error: {message}");
        let _ = self.errors.flush();
    }

    fn config_error(source: &str, line: usize, message: impl Into<String>) -> SessionError {
        SessionError::Config {
            source: source.to_string(),
            line,
            message: message.into(),
        }
    }

    /// A problem with a command: Postmark's `Error:` line, or in a strict session the end of
    /// it (`detail` says more than Postmark's `message`).
    fn problem(
        &mut self,
        source: &str,
        n: usize,
        message: &str,
        detail: String,
    ) -> Result<(), SessionError> {
        if self.options.strict {
            Err(Self::config_error(source, n, detail))
        } else {
            self.complain(message);
            Ok(())
        }
    }

    fn execute_line(
        &mut self,
        source: &str,
        n: usize,
        line: &str,
        prompt: bool,
    ) -> Result<Flow, SessionError> {
        if self.options.strict {
            return match parse_line(line) {
                Ok(Some(c)) => self.apply(source, n, c),
                Ok(None) => Ok(Flow::Continue),
                Err(m) => Err(Self::config_error(source, n, m)),
            };
        }
        for step in parse_postmark(line, prompt) {
            match step {
                Step::Eh => self.eh()?,
                Step::Error(m) => self.complain(&m),
                Step::Command(c) => return self.apply(source, n, c),
            }
        }
        Ok(Flow::Continue)
    }

    fn apply(&mut self, source: &str, n: usize, cmd: Command) -> Result<Flow, SessionError> {
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
            Command::Location(change) => {
                if let Err((message, detail)) = self.change_location(change) {
                    self.problem(source, n, &message, detail)?;
                }
            }
            Command::Show(file) => {
                let cwd = std::env::current_dir()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default();
                let text = self.config.show(&cwd);
                self.emit(source, n, &text, file.as_deref())?;
            }
            Command::Help(prefix) => {
                let text = help_text(prefix.as_deref());
                self.say(&text)?;
            }
            Command::Load(path) => {
                if self.depth >= MAX_LOAD_DEPTH {
                    let m = format!("'load' nested more than {MAX_LOAD_DEPTH} deep");
                    self.problem(source, n, &m, m.clone())?;
                    return Ok(Flow::Continue);
                }
                match std::fs::File::open(&path) {
                    Ok(f) => {
                        self.depth += 1;
                        let r = self.read_file(&path, io::BufReader::new(f));
                        self.depth -= 1;
                        // `quit` in a loaded file ends that file only, as in Postmark.
                        r?;
                    }
                    Err(e) => {
                        let p = path.display();
                        self.problem(
                            source,
                            n,
                            &format!("cannot read configuration file '{p}'"),
                            format!("cannot read configuration file '{p}': {e}"),
                        )?;
                    }
                }
            }
            Command::Run(file) => {
                if let (Some(f), true) = (&file, self.options.strict) {
                    check_appendable(f).map_err(|m| Self::config_error(source, n, m))?;
                }
                let summary = self.run().map_err(|error| SessionError::Run {
                    source: source.to_string(),
                    line: n,
                    error,
                })?;
                if summary.complete {
                    let mut text = match summary.config.report {
                        ReportFormat::Verbose => summary.verbose(),
                        ReportFormat::Terse => summary.terse(),
                    };
                    if self.options.latency {
                        text.push_str(&summary.extras());
                    }
                    self.emit(source, n, &text, file.as_deref())?;
                }
                self.runs.push(summary);
            }
            Command::Quit => return Ok(Flow::Quit),
        }
        Ok(Flow::Continue)
    }

    /// Applies a `set location`; a failure as (Postmark's message, ours).
    fn change_location(&mut self, change: LocationChange) -> Result<(), (String, String)> {
        let strict = self.options.strict;
        // Postmark takes any name and finds out at the run; strict sessions check now.
        let exists = |p: &Path| -> Result<(), (String, String)> {
            if !strict {
                return Ok(());
            }
            let m = format!("no directory '{}'", p.display());
            match std::fs::metadata(p) {
                Ok(md) if md.is_dir() => Ok(()),
                Ok(_) => Err((m, format!("location '{}' is not a directory", p.display()))),
                Err(e) => Err((m, format!("location '{}' does not exist: {e}", p.display()))),
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
                let m = format!("cannot find location '{}'", path.display());
                let i = locs
                    .iter()
                    .position(|l| l.path == path)
                    .ok_or_else(|| (m.clone(), m))?;
                locs.remove(i);
            }
        }
        Ok(())
    }

    /// Writes `text` to the output, or appends it to `file`. A file that cannot be written is
    /// Postmark's `Error:` (the text then goes to the output), or the end of a strict session.
    fn emit(
        &mut self,
        source: &str,
        n: usize,
        text: &str,
        file: Option<&Path>,
    ) -> Result<(), SessionError> {
        if let Some(f) = file {
            let written = OpenOptions::new()
                .append(true)
                .create(true)
                .open(f)
                .and_then(|mut h| h.write_all(text.as_bytes()));
            match written {
                Ok(()) => return Ok(()),
                Err(e) => {
                    let p = f.display();
                    self.problem(
                        source,
                        n,
                        &format!("Cannot direct output to file '{p}'"),
                        format!("cannot write to '{p}': {e}"),
                    )?;
                }
            }
        }
        if self.options.json {
            return Ok(());
        }
        self.out.write_all(text.as_bytes()).map_err(Self::io_err)
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
    use std::sync::{Arc, Mutex};

    /// A writer whose bytes the test can read afterwards.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Shared {
        fn text(&self) -> String {
            String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
        }
    }

    /// A session with `options` whose error output the test reads.
    fn session(options: Options) -> (Session<Vec<u8>>, Shared) {
        let errors = Shared::default();
        (
            Session::new(options, Vec::new()).with_errors(errors.clone()),
            errors,
        )
    }

    #[test]
    fn settings_apply() {
        let (mut s, _) = session(Options::default());
        let quit = s
            .execute(
                "t",
                "set size 100 200\nset number 7\nset bias read -1\nset report terse\nquit\nset number 9\n"
                    .as_bytes(),
                false,
            )
            .unwrap();
        assert!(quit);
        let c = s.config();
        assert_eq!((c.size_low, c.size_high, c.number), (100, 200, 7));
        assert_eq!(c.bias_read, -1);
        assert_eq!(c.report, ReportFormat::Terse);
    }

    /// As Postmark: a prompt before every line read, `Eh?` for what is not a command and
    /// `Error:` for a bad setting (on the error output), and the session goes on.
    #[test]
    fn bad_lines_are_answered_and_the_session_goes_on() {
        let (mut s, errors) = session(Options::default());
        let quit = s
            .execute(
                "<stdin>",
                "set number x\nfrobnicate\n\nset number 9\nquit\n".as_bytes(),
                true,
            )
            .unwrap();
        assert!(quit);
        assert_eq!(s.config().number, 9);
        assert_eq!(
            String::from_utf8_lossy(s.output()),
            "pm>pm>Eh?\npm>Eh?\npm>pm>"
        );
        assert_eq!(errors.text(), "Error: invalid number of files\n");
    }

    /// Postmark's main loop: banner, the file announced, then the prompt on standard input
    /// unless the file quit; `quit` in a loaded file ends that file only.
    #[test]
    fn an_endless_line_is_refused_and_not_read_to_its_end() {
        let (mut s, _) = session(Options::default());
        let mut zeros = io::BufReader::new(io::repeat(0).take(64 << 20));
        let e = s.execute("/dev/zero", &mut zeros, false).unwrap_err();
        assert!(
            format!("{e:?}").contains("/dev/zero: line 1: longer than 64 KiB"),
            "{e:?}"
        );
        assert!(zeros.into_inner().limit() > 60 << 20);
        // Lines end with \n or \r\n, and the last may have no end.
        let (mut s, _) = session(Options::default());
        s.execute("t", "set number 3\r\nset seed 4".as_bytes(), false)
            .unwrap();
        assert_eq!((s.config().number, s.config().seed), (3, 4));
    }

    #[test]
    fn main_reads_the_file_then_standard_input() {
        let dir = tempfile::tempdir().unwrap();
        let inner = dir.path().join("inner.pm");
        std::fs::write(&inner, "set number 11\nquit\nset number 99\n").unwrap();
        let outer = dir.path().join("outer.pm");
        std::fs::write(&outer, format!("load {}\nset seed 5\n", inner.display())).unwrap();
        let (mut s, errors) = session(Options::default());
        s.main(Some(&outer), "set transactions 20\n".as_bytes())
            .unwrap();
        let (o, i) = (outer.display(), inner.display());
        assert_eq!(
            String::from_utf8_lossy(s.output()),
            format!(
                "{BANNER}Reading configuration from file '{o}'\n\
                 Reading configuration from file '{i}'\npm>pm>"
            )
        );
        let c = s.config();
        assert_eq!((c.number, c.seed, c.transactions), (11, 5, 20));
        assert_eq!(errors.text(), "");

        // A file that quits: no prompt, standard input unread.
        std::fs::write(&outer, "quit\n").unwrap();
        let (mut s, _) = session(Options::default());
        s.main(Some(&outer), "set number 3\n".as_bytes()).unwrap();
        assert_eq!(s.config().number, 500);
        assert!(!String::from_utf8_lossy(s.output()).contains(PROMPT));
    }

    /// JSON sessions keep the output for the document: no banner, prompt or `Eh?` there.
    #[test]
    fn json_sessions_print_nothing_but_errors() {
        let (mut s, errors) = session(Options {
            json: true,
            ..Options::default()
        });
        s.main(None, "frobnicate\nhelp\nshow\nset seed 0\n".as_bytes())
            .unwrap();
        assert_eq!(String::from_utf8_lossy(s.output()), "");
        assert_eq!(
            errors.text(),
            "Eh?\nError: invalid seed for random numbers\n"
        );
    }

    #[test]
    fn strict_sessions_stop_with_the_line() {
        let strict = Options {
            strict: true,
            ..Options::default()
        };
        let (mut s, _) = session(strict.clone());
        let e = s
            .execute("cfg", "set number 5\n\nfrobnicate\n".as_bytes(), false)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "cfg:3: unknown command 'frobnicate' (try 'help')"
        );
        assert_eq!(e.exit_code(), 2);
        let e = s
            .execute(
                "cfg",
                "set location /nonexistent/fsprof\n".as_bytes(),
                false,
            )
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("cfg:1: location '/nonexistent/fsprof' does not exist"),
            "{e}"
        );
        let (mut s, _) = session(strict);
        let e = s
            .execute("cfg", "load /nonexistent/fsprof.pm\n".as_bytes(), false)
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("cfg:1: cannot read configuration file"),
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
