//! `fsprof run`: runs a program with the preload library and returns its user-level profile.

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};

use profile_store::{ClockInfo, Profile};

use crate::abi;
use crate::error::Error;
use crate::region::{DrainStats, Region, RegionStats};
use crate::sys;
use crate::trace::TraceHeader;

/// The preload library's file name.
pub const PRELOAD_NAME: &str = "libfsprof_preload.so";
/// The environment variable that names the preload library, overriding the search.
pub const ENV_PRELOAD: &str = "FSPROF_PRELOAD";

/// How to run a program.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The program and its arguments (`PATH` is searched as `exec` would).
    pub command: Vec<OsString>,
    /// The preload library. Default: [`find_preload`].
    pub preload: Option<PathBuf>,
    /// Also trace every call into this file (created or truncated). Default: no trace.
    pub trace: Option<PathBuf>,
    /// Slots in the shared region: threads (of every process image) that record on their own
    /// before the rest share the overflow slot (still exact, slower). Default 1024; each
    /// costs 320 KiB of address space (counters per call and descriptor kind, and a trace
    /// buffer) and only the pages it touches.
    pub slots: usize,
    /// Directory to run the program in. Default: the current directory.
    pub dir: Option<PathBuf>,
    /// Environment variables set for the program, over the inherited ones. An `LD_PRELOAD`
    /// here is loaded after the preload library (which comes first, as it must).
    pub env: Vec<(OsString, OsString)>,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            command: Vec::new(),
            preload: None,
            trace: None,
            slots: 1024,
            dir: None,
            env: Vec::new(),
        }
    }
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// The user-level profile: one layer `user`, operations `SYS_...`.
    pub profile: Profile,
    /// How the program ended.
    pub status: ExitStatus,
    /// Its exit code as a shell reports it: the code, or 128 + N when signal N ended it.
    pub exit_code: i32,
    /// What the shared region says about the run.
    pub region: RegionStats,
    /// What happened to the trace, when tracing.
    pub trace: Option<TraceOutcome>,
    /// Why the dynamic loader ignored the preload library for the program, if it did
    /// ([`Prepared::preload_ignored`]).
    pub preload_ignored: Option<String>,
}

/// The trace of a run.
#[derive(Debug, Clone)]
pub struct TraceOutcome {
    /// The trace file.
    pub path: PathBuf,
    /// Its size in bytes.
    pub bytes: u64,
    /// Chunks written, drained, lost.
    pub chunks: DrainStats,
}

/// The preload library: `$FSPROF_PRELOAD`, else `libfsprof_preload.so` next to the running
/// executable, in the `deps/` directory beside it (where `cargo build -p tools` leaves it), or,
/// for an executable in a `deps/` directory of a Cargo target directory (a test), one level
/// up, or, installed, in `../lib/fsprof/` ([`INSTALLED_DIR`]). Where several exist, the most recently built wins: a library left by an older build
/// of the whole workspace must not shadow the one built with this `fsprof`.
pub fn find_preload() -> Result<PathBuf, Error> {
    if let Some(p) = std::env::var_os(ENV_PRELOAD).filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let exe =
        std::env::current_exe().map_err(|e| Error::io("finding the running executable", e))?;
    let dir = exe.parent().unwrap_or(Path::new("/"));
    let installed = dir
        .parent()
        .map(|p| p.join(INSTALLED_DIR).join(PRELOAD_NAME));
    let mut candidates = vec![dir.join(PRELOAD_NAME), dir.join("deps").join(PRELOAD_NAME)];
    if let Some(up) = dir.parent().filter(|_| dir.ends_with("deps")) {
        candidates.push(up.join(PRELOAD_NAME));
    }
    candidates.extend(installed.clone());
    let found = candidates
        .into_iter()
        .filter_map(|p| {
            let m = std::fs::metadata(&p).ok().filter(|m| m.is_file())?;
            Some((m.modified().ok(), p, m))
        })
        .max_by_key(|(t, _, _)| *t);
    let Some((_, path, meta)) = found else {
        return Err(Error::Preload(format!(
            "{PRELOAD_NAME} is neither next to {} (cargo build --release builds it there) nor in \
             {} (install.sh puts it there); or set {ENV_PRELOAD} to the library",
            exe.display(),
            installed.map_or_else(String::new, |p| p.parent().unwrap().display().to_string()),
        )));
    };
    check_owner(&path, &meta)?;
    Ok(path)
}

/// Where `install.sh` puts the preload library, relative to the directory above the
/// programs' (`PREFIX/bin/fsprof` → `PREFIX/lib/fsprof/`).
pub const INSTALLED_DIR: &str = "lib/fsprof";

/// A library found by the search is loaded into every program `fsprof run` starts: it must
/// belong to root or to the user running fsprof, and no one else may write it, or whoever can
/// replace it runs code as this user. (A library named by [`ENV_PRELOAD`] is the user's
/// choice and is not checked.)
fn check_owner(path: &Path, meta: &std::fs::Metadata) -> Result<(), Error> {
    use std::os::unix::fs::MetadataExt as _;
    let me = sys::geteuid();
    if meta.uid() != 0 && meta.uid() != me {
        return Err(Error::Preload(format!(
            "{} belongs to uid {}, neither root nor you (uid {me}): not loading it",
            path.display(),
            meta.uid()
        )));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(Error::Preload(format!(
            "{} can be written by others (mode {:o}): not loading it",
            path.display(),
            meta.mode() & 0o7777
        )));
    }
    Ok(())
}

/// A program set up to run under the preload library, not started yet: the shared region
/// exists, the trace file (when tracing) holds its header, and [`Prepared::command`] has the
/// environment the library needs. A caller that starts the program itself (`fsprof profile
/// --user` does, inside a mount) spawns that command, waits for it, and calls
/// [`Prepared::finish`]; [`run`] does all three.
pub struct Prepared {
    /// The program, its arguments, its directory and its environment; the caller may add to
    /// it (a signal mask to start with) and spawns it.
    pub command: Command,
    /// The program as `exec` will find it.
    pub program: PathBuf,
    /// Why the dynamic loader will ignore the preload library for the program (a set-user-ID
    /// program, [`crate::elf::secure_exec`]): nothing it or what it starts calls is recorded.
    pub preload_ignored: Option<String>,
    region: Region,
    trace: Option<PathBuf>,
    started_unix_ns: u64,
}

/// Sets `config.command` up to run under the preload library: refuses a statically linked
/// program, finds the library, creates the shared region and the trace file's header.
pub fn prepare(config: &RunConfig) -> Result<Prepared, Error> {
    let program = config
        .command
        .first()
        .ok_or_else(|| Error::Config("no command to run".into()))?;
    let resolved = crate::elf::resolve(program)?;
    let preload_ignored = crate::elf::check_preloadable(&resolved)?;
    let preload = match &config.preload {
        Some(p) => p.clone(),
        None => find_preload()?,
    };
    let preload = std::path::absolute(&preload)
        .map_err(|e| Error::io(format!("finding {}", preload.display()), e))?;
    if !preload.is_file() {
        return Err(Error::Preload(format!(
            "{}: no such preload library",
            preload.display()
        )));
    }
    let text = preload.to_string_lossy();
    if text.contains([' ', ':']) || text != preload.as_os_str().to_str().unwrap_or("") {
        return Err(Error::Preload(format!(
            "{}: LD_PRELOAD cannot name a path with spaces, colons or non-UTF-8 bytes",
            preload.display()
        )));
    }
    let dir = match &config.dir {
        Some(d) => d
            .canonicalize()
            .map_err(|e| Error::io(format!("entering {}", d.display()), e))?,
        None => {
            std::env::current_dir().map_err(|e| Error::io("finding the current directory", e))?
        }
    };
    let region =
        Region::create(config.slots).map_err(|e| Error::io("creating the shared region", e))?;

    let trace = match &config.trace {
        Some(t) => {
            let t = std::path::absolute(t)
                .map_err(|e| Error::io(format!("finding {}", t.display()), e))?;
            let header = TraceHeader::now(&dir, &config.command);
            std::fs::File::create(&t)
                .and_then(|mut f| f.write_all(&header.encode()))
                .map_err(|e| Error::io(format!("writing {}", t.display()), e))?;
            Some(t)
        }
        None => {
            // Calibrate before the program starts, not after it (the profile needs the rate).
            ClockInfo::get();
            None
        }
    };

    let mut cmd = Command::new(program);
    cmd.args(&config.command[1..]).current_dir(&dir);
    let mut inherited_preload = std::env::var_os("LD_PRELOAD");
    for (k, v) in &config.env {
        if k == "LD_PRELOAD" {
            inherited_preload = Some(v.clone());
        } else {
            cmd.env(k, v);
        }
    }
    let ld_preload = match inherited_preload.filter(|v| !v.is_empty()) {
        Some(old) => {
            let mut v = OsString::from(&preload);
            v.push(" ");
            v.push(old);
            v
        }
        None => preload.clone().into_os_string(),
    };
    cmd.env("LD_PRELOAD", ld_preload)
        .env(abi::ENV_SHM, region.path());
    match &trace {
        Some(t) => cmd.env(abi::ENV_TRACE, t),
        None => cmd.env_remove(abi::ENV_TRACE),
    };
    let started_unix_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    Ok(Prepared {
        command: cmd,
        program: resolved,
        preload_ignored,
        region,
        trace,
        started_unix_ns,
    })
}

impl Prepared {
    /// After the program ended with `status` (and every process it started, or at least
    /// those that made calls, as far as the caller can tell): reads the counts into the user
    /// layer and writes what is left in the trace buffers.
    pub fn finish(self, status: ExitStatus) -> Result<RunOutcome, Error> {
        let (counts, region_stats) = self.region.counts().map_err(Error::Region)?;
        let info = ClockInfo::get();
        let profile = Profile {
            started_unix_ns: Some(self.started_unix_ns),
            clock: Some(info.kind),
            cycles_per_sec: Some(info.cycles_per_sec),
            invariant_tsc: info.invariant_tsc,
            extra: Vec::new(),
            sections: Vec::new(),
            layers: Region::user_layers(&counts),
        };
        let trace = match self.trace {
            Some(path) => {
                let chunks = self
                    .region
                    .drain(&path)
                    .map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
                let bytes = std::fs::metadata(&path).map_or(0, |m| m.len());
                Some(TraceOutcome {
                    path,
                    bytes,
                    chunks,
                })
            }
            None => None,
        };
        let exit_code = status
            .code()
            .or_else(|| status.signal().map(|s| 128 + s))
            .unwrap_or(1);
        Ok(RunOutcome {
            profile,
            status,
            exit_code,
            region: region_stats,
            trace,
            preload_ignored: self.preload_ignored,
        })
    }
}

/// Runs `config.command` under the preload library, waits for it, and returns its user-level
/// profile, its exit status and, when tracing, what was traced. A statically linked program is
/// refused before it starts. SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to this process are
/// passed on to the program while it runs; the program starts with the signal mask and
/// dispositions it would have had without fsprof.
pub fn run(config: &RunConfig) -> Result<RunOutcome, Error> {
    let mut prepared = prepare(config)?;
    // The program gets the signal state fsprof was given: the mask of the calling thread (the
    // standard library would empty it), and dispositions untouched (signals this process
    // ignores stay ignored; the forwarding handlers below become the default at exec).
    let mask = sys::current_mask().map_err(|e| Error::io("reading the signal mask", e))?;
    sys::give_mask(&mut prepared.command, mask);
    let mut forwarding =
        sys::Forwarding::start().map_err(|e| Error::io("installing signal handlers", e))?;
    let program = prepared.program.display().to_string();
    let mut child = prepared
        .command
        .spawn()
        .map_err(|e| Error::io(format!("starting {program}"), e))?;
    forwarding.register(child.id());
    let status = child
        .wait()
        .map_err(|e| Error::io(format!("waiting for {program}"), e))?;
    drop(forwarding);
    prepared.finish(status)
}
