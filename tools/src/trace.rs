//! `fsprof trace show` and `fsprof trace stats`: a trace written by `fsprof run --trace`,
//! listed like strace or summarized with Horikawa's measures.
//!
//! Both read the trace as a stream in bounded memory, whatever its size. A trace cut short
//! (the program or fsprof was killed while a chunk was being written) is read up to the cut,
//! and the torn tail is reported; a trace of another format version is refused in one line.

use std::fmt::Write as _;
use std::io::Write;
use std::path::PathBuf;

use crate::error::Error;
use crate::user_run::error;

/// `fsprof trace show`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceShowConfig {
    /// The trace.
    pub trace: PathBuf,
    /// Only these processes (empty: all).
    pub pids: Vec<u32>,
    /// Only these calls, by C name or profile name (`openat`, `SYS_PREAD`); empty: all.
    pub calls: Vec<String>,
}

/// `fsprof trace stats`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceStatsConfig {
    /// The trace.
    pub trace: PathBuf,
    /// Also write the response-time profile (layer `user`, and `user@pid:N` per process)
    /// here: JSON for `.json`, else text.
    pub output: Option<PathBuf>,
}

/// `fsprof trace show`: writes the listing to `listing` as it reads (a trace of gigabytes is
/// listed in bounded memory), and what reading found (a torn tail, damage) to `warnings`.
pub fn show(
    c: &TraceShowConfig,
    listing: &mut dyn Write,
    warnings: &mut dyn Write,
) -> Result<(), Error> {
    let mut buffered = std::io::BufWriter::with_capacity(1 << 16, listing);
    let result = user_trace::show(
        &user_trace::ShowConfig {
            trace: c.trace.clone(),
            pids: c.pids.clone(),
            calls: c.calls.clone(),
        },
        &mut buffered,
    );
    let flushed = buffered.flush();
    let summary = match result {
        Ok(s) => s,
        // A closed pipe (`fsprof trace show t | head`) ends the listing quietly.
        Err(user_trace::Error::Io { source, .. })
            if source.kind() == std::io::ErrorKind::BrokenPipe =>
        {
            return Ok(());
        }
        Err(user_trace::Error::Config(m)) => return Err(Error::usage("--call", m)),
        Err(e) => return Err(error(e)),
    };
    match flushed {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
        Err(e) => return Err(Error::output("-", e)),
        Ok(()) => {}
    }
    for p in summary.read.problems() {
        let _ = writeln!(warnings, "fsprof: {}: {p}", c.trace.display());
    }
    Ok(())
}

/// `fsprof trace stats`: appends the measures to `out`, and writes the response-time profile
/// when asked.
pub fn stats(c: &TraceStatsConfig, out: &mut String) -> Result<(), Error> {
    let s = user_trace::stats(&user_trace::StatsConfig {
        trace: c.trace.clone(),
    })
    .map_err(error)?;
    let _ = writeln!(out, "{s}");
    let _ = writeln!(
        out,
        "response time: mean latency of a call; calls/s and MB/s over the period from the first \
         call's start to the last call's end; in flight: mean calls in progress (Little's law); \
         think: time between a thread's calls"
    );
    if let Some(path) = &c.output {
        crate::export::save(path, &s.profile)?;
        let _ = writeln!(
            out,
            "response-time profile written to {} (layers: {})",
            path.display(),
            s.profile
                .layers
                .iter()
                .map(|l| l.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(())
}
