//! The one error type of the tools, and how each kind maps to an exit code.

use std::fmt;

/// Why a command failed. Every variant renders as one line, `WHAT: CAUSE`, which the binary
/// prints after `fsprof: `.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// An input could not be read or parsed: the path (or `-`) and the reader's or parser's
    /// reason (for text profiles, `line N: ...`).
    Input {
        /// The path as given on the command line, `-` for standard input.
        path: String,
        /// What went wrong, one line.
        cause: String,
    },
    /// The arguments do not fit the input (an unknown operation or layer, a missing clock rate,
    /// two profiles of different resolution...): what was asked and why it cannot be done.
    Usage {
        /// The argument or request concerned, e.g. `--op OP_FOO`.
        what: String,
        /// Why it cannot be done.
        cause: String,
    },
    /// An output could not be written.
    Output {
        /// The path written to, `-` for standard output.
        path: String,
        /// The OS error or other reason.
        cause: String,
    },
    /// `fsprof check` found problems (they were listed on standard output).
    CheckFailed {
        /// The inputs that failed, as given.
        paths: Vec<String>,
        /// How many problems were found in all.
        problems: usize,
    },
}

impl Error {
    /// An input error; newlines in `cause` are folded so the message stays on one line.
    pub fn input(path: impl Into<String>, cause: impl fmt::Display) -> Error {
        Error::Input {
            path: path.into(),
            cause: one_line(&cause.to_string()),
        }
    }

    /// A usage error.
    pub fn usage(what: impl Into<String>, cause: impl fmt::Display) -> Error {
        Error::Usage {
            what: what.into(),
            cause: one_line(&cause.to_string()),
        }
    }

    /// An output error.
    pub fn output(path: impl Into<String>, cause: impl fmt::Display) -> Error {
        Error::Output {
            path: path.into(),
            cause: one_line(&cause.to_string()),
        }
    }

    /// The process exit code for this error: 1 when a check failed (the command worked and the
    /// answer is "no"), 2 for every usage, input and output error.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::CheckFailed { .. } => 1,
            _ => 2,
        }
    }
}

impl fmt::Display for Error {
    /// One line whatever the fields hold: control characters in paths and arguments (a file
    /// name or an `--op` value may contain a newline) are written as escapes, `\n`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = printable;
        match self {
            Error::Input { path, cause } => write!(f, "{}: {}", p(path), p(cause)),
            // A cause that says what it is about by itself comes with no `what`.
            Error::Usage { what, cause } if what.is_empty() => f.write_str(&p(cause)),
            Error::Usage { what, cause } => write!(f, "{}: {}", p(what), p(cause)),
            Error::Output { path, cause } => write!(f, "{}: {}", p(path), p(cause)),
            Error::CheckFailed { paths, problems } => {
                let s = if *problems == 1 { "" } else { "s" };
                let paths: Vec<String> = paths.iter().map(p).collect();
                write!(f, "check: {problems} problem{s} in {}", paths.join(", "))
            }
        }
    }
}

/// `s` made safe for a terminal: the one escape every string from outside goes through
/// ([`profile_store::name::printable`]: control characters, bidirectional overrides, invalid
/// UTF-8).
pub use profile_store::name::printable;

impl std::error::Error for Error {}

/// Folds line breaks (and runs of spaces around them) into `"; "` so a message fits one line.
pub fn one_line(s: &str) -> String {
    let parts: Vec<&str> = s.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_one_line() {
        let e = Error::input("a.fsprof", "line 3: bad\n  more detail\n");
        assert_eq!(e.to_string(), "a.fsprof: line 3: bad; more detail");
        assert_eq!(e.exit_code(), 2);
        let c = Error::CheckFailed {
            paths: vec!["x".into()],
            problems: 2,
        };
        assert_eq!(c.to_string(), "check: 2 problems in x");
        assert_eq!(c.exit_code(), 1);
    }

    #[test]
    fn paths_and_arguments_with_newlines_stay_on_one_line() {
        let u = Error::usage("--op OP_A\nB", "no such operation");
        assert_eq!(u.to_string(), "--op OP_A\\nB: no such operation");
        let i = Error::input("bad\nname.fsprof", "No such file or directory (os error 2)");
        assert_eq!(
            i.to_string(),
            "bad\\nname.fsprof: No such file or directory (os error 2)"
        );
        let o = Error::output("out\r\n.svg", "tab\there");
        assert_eq!(o.to_string(), "out\\r\\n.svg: tab\\there");
        let c = Error::CheckFailed {
            paths: vec!["a\nb".into(), "c".into()],
            problems: 1,
        };
        assert_eq!(c.to_string(), "check: 1 problem in a\\nb, c");
        for e in [u, i, o, c] {
            assert!(!e.to_string().contains(['\n', '\r']), "{e}");
        }
        // Nothing to escape: unchanged.
        assert_eq!(printable("plain.fsprof"), "plain.fsprof");
    }
}
