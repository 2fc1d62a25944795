//! `fsprof run [OPTIONS] -- COMMAND`: the user level of a program, on any directory.
//!
//! Runs COMMAND with the preload library of `user-trace` (`libfsprof_preload.so`, next to the
//! `fsprof` binary or named by `FSPROF_PRELOAD`), which times the program's C-library
//! file-system calls from the caller's side (layer `user`, operations `SYS_...`), and shows
//! the profile as `fsprof profile` does, or writes it to a file. No root and no mount are
//! needed. With a trace file, every call is also recorded (`fsprof trace`, `fsprof replay`
//! read it). A statically linked program is refused before it starts.
//!
//! Signals: SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to fsprof are passed on to the program;
//! the program starts with the signal mask fsprof was given. fsprof exits with the program's
//! status (128 + N for a signal N).

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use crate::error::Error;
use crate::input::{self, Loaded};
use crate::show::{self, ShowStyle};

/// `fsprof run`.
#[derive(Debug, Clone, PartialEq)]
pub struct RunConfig {
    /// The program and its arguments.
    pub command: Vec<OsString>,
    /// Write the profile here (JSON for `.json`, else text) instead of showing it.
    pub output: Option<PathBuf>,
    /// Also trace every call into this file.
    pub trace: Option<PathBuf>,
    /// Threads that record on their own before the rest share one overflow slot. Default 1024.
    pub slots: usize,
    /// Show at most this many operations.
    pub top: Option<usize>,
    /// How to draw the histograms.
    pub style: ShowStyle,
}

/// Why `user-trace` failed, as the tools' error: a program or library that cannot be used is
/// a usage error, an I/O failure names its file.
pub fn error(e: user_trace::Error) -> Error {
    use user_trace::Error as E;
    match &e {
        // "opening PATH": the path is what failed, said once.
        E::Io { what, source } => Error::input(
            what.strip_prefix("opening ").unwrap_or(what),
            fsprof_fuse::daemon::mount::plain(source),
        ),
        E::NotATrace(p) | E::TraceVersion { path: p, .. } | E::BadTraceHeader { path: p, .. } => {
            let text = e.to_string();
            let prefix = format!("{}: ", p.display());
            Error::input(
                p.display().to_string(),
                text.strip_prefix(&prefix).unwrap_or(&text),
            )
        }
        E::CannotPreload { program, .. } => {
            let text = e.to_string();
            let prefix = format!("{}: ", program.display());
            Error::usage(
                program.display().to_string(),
                text.strip_prefix(&prefix).unwrap_or(&text),
            )
        }
        E::NoProgram(p) => Error::usage(p.clone(), "command not found"),
        E::Preload(m) | E::Region(m) => Error::usage("preload library", m),
        // The message names what it is about (the binary prefixes `fsprof: `).
        E::Config(m) => Error::usage("", m),
    }
}

/// The report's line for a program whose dynamic loader ignored the preload library
/// ([`user_trace::RunOutcome::preload_ignored`]), so that 0 calls is not taken for the truth.
pub fn preload_ignored(prog: &str, why: &str) -> String {
    format!(
        "warning: {prog} {why}: the dynamic loader ignores LD_PRELOAD for it (secure-execution \
         mode), so neither its calls nor those of the programs it starts are recorded\n"
    )
}

/// The report's line for the calls on descriptors that are not files (layers `user@fd:KIND`:
/// pipes, sockets, terminals...), kept out of the `user` layer so that a shell wrapper's reads
/// of a pipe are not taken for file-system time; empty when there are none.
pub fn not_files(p: &profile_store::Profile) -> String {
    let clock = crate::units::Clock(p.cycles_per_sec);
    let kinds: Vec<String> = p
        .layers
        .iter()
        .filter_map(|l| {
            let kind = l.name.strip_prefix("user@fd:")?;
            let total: u64 = l.ops.iter().map(|o| o.total).sum();
            let n = l.total_count();
            let s = if n == 1 { "" } else { "s" };
            Some(format!(
                "{kind} {n} call{s} {}",
                clock.latency(total as f64)
            ))
        })
        .collect();
    if kinds.is_empty() {
        return String::new();
    }
    format!(
        "not files, kept out of layer user: {} (layers user@fd:KIND)\n",
        kinds.join(", ")
    )
}

/// `fsprof run`: runs the program, then appends its report to `out` (or writes the profile
/// to the output file and appends the report's first lines); returns the program's exit code.
pub fn run(cfg: &RunConfig, out: &mut String) -> Result<u8, Error> {
    let started = Instant::now();
    let outcome = user_trace::run(&user_trace::RunConfig {
        command: cfg.command.clone(),
        trace: cfg.trace.clone(),
        slots: cfg.slots,
        ..user_trace::RunConfig::default()
    })
    .map_err(error)?;
    let elapsed = started.elapsed();
    let layer = &outcome.profile.layers[0];
    let prog = cfg.command[0].to_string_lossy();
    let _ = writeln!(
        out,
        "ran {prog}: {} in {:.3} s, {} calls",
        outcome.status,
        elapsed.as_secs_f64(),
        layer.total_count()
    );
    out.push_str(&not_files(&outcome.profile));
    if let Some(why) = &outcome.preload_ignored {
        out.push_str(&preload_ignored(&prog, why));
    }
    if let Some(t) = &outcome.trace {
        let _ = writeln!(
            out,
            "trace {}: {} bytes, {} chunks",
            t.path.display(),
            t.bytes,
            t.chunks.chunks_written + t.chunks.chunks_drained
        );
        if t.chunks.live_slots > 0 {
            let _ = writeln!(
                out,
                "trace: {} threads of processes still running when the command ended: their \
                 last calls are not in the trace",
                t.chunks.live_slots
            );
        }
        if t.chunks.write_errors > 0 || t.chunks.untraced_calls > 0 {
            let _ = writeln!(
                out,
                "trace incomplete: {} chunks could not be written, {} calls counted but not traced",
                t.chunks.write_errors, t.chunks.untraced_calls
            );
        }
    }
    if outcome.region.overflow_calls > 0 {
        let _ = writeln!(
            out,
            "{} calls were counted in the shared overflow slot (more threads than --slots {}, \
             or signal handlers): counts stay exact",
            outcome.region.overflow_calls, cfg.slots
        );
    }
    match &cfg.output {
        Some(path) => {
            crate::export::save(path, &outcome.profile)?;
            let _ = writeln!(out, "profile written to {}", path.display());
        }
        None => {
            let loaded = Loaded {
                name: prog.into_owned(),
                profile: outcome.profile.clone(),
            };
            let ops = input::select_ops(layer, &[], cfg.top, cfg.style.shares)?;
            out.push_str(&show::render(
                layer,
                &ops,
                loaded.clock(),
                false,
                &cfg.style,
                &crate::maxima::Maxima::default(),
            ));
        }
    }
    Ok(outcome.exit_code.clamp(0, 255) as u8)
}
