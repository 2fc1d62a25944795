//! The crate's error type: one variant per thing that can go wrong, each displayed as one line
//! that names the file or program and the cause.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// An error of `run`, trace reading, `show`, `stats` or `replay`.
#[derive(Debug)]
pub enum Error {
    /// An I/O error on a named file or action.
    Io {
        /// What was being done, e.g. `reading /tmp/t.trace`.
        what: String,
        /// The OS error.
        source: io::Error,
    },
    /// The file does not start with the trace magic.
    NotATrace(PathBuf),
    /// A trace of another format version.
    TraceVersion {
        /// The trace.
        path: PathBuf,
        /// Its version.
        version: u32,
    },
    /// A trace whose file header is damaged.
    BadTraceHeader {
        /// The trace.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The program is statically linked (or otherwise cannot load the preload library).
    CannotPreload {
        /// The program.
        program: PathBuf,
        /// Why.
        reason: String,
    },
    /// The program was not found.
    NoProgram(String),
    /// The preload library was not found or cannot be used.
    Preload(String),
    /// The shared region was laid out by an incompatible preload library.
    Region(String),
    /// An invalid configuration (empty command, bad filter...).
    Config(String),
}

impl Error {
    /// An I/O error while doing `what`.
    pub fn io(what: impl Into<String>, source: io::Error) -> Error {
        Error::Io {
            what: what.into(),
            source,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { what, source } => write!(f, "{what}: {source}"),
            Error::NotATrace(p) => write!(f, "{}: not an fsprof trace", p.display()),
            Error::TraceVersion { path, version } => write!(
                f,
                "{}: trace format version {version}; this fsprof reads versions {} to {}",
                path.display(),
                crate::abi::OLDEST_TRACE_VERSION,
                crate::abi::TRACE_VERSION
            ),
            Error::BadTraceHeader { path, reason } => {
                write!(f, "{}: damaged trace header: {reason}", path.display())
            }
            Error::CannotPreload { program, reason } => write!(
                f,
                "{}: {reason}; fsprof run cannot see its calls (fsprof profile works on any program)",
                program.display()
            ),
            Error::NoProgram(p) => write!(f, "{p}: command not found"),
            Error::Preload(m) | Error::Region(m) | Error::Config(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
