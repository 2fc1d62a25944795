//! The error of everything that is checked before a mount serves: a path, an option, a
//! resource. Said in one line; the programs exit with code 2.

use std::fmt;

/// A setup problem, reported as one line (exit code 2).
#[derive(Debug)]
pub struct SetupError(pub String);

impl fmt::Display for SetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SetupError {}

/// Shorthand for a [`SetupError`].
pub fn setup_err(msg: impl Into<String>) -> SetupError {
    SetupError(msg.into())
}
