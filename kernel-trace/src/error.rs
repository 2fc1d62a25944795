//! Why kernel tracing cannot be had: one line naming the tracepoint, file or permission and the
//! cause, for the programs to print before refusing to mount.

/// A reason `--kernel` is refused (or a device left out), as one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal(String);

impl Refusal {
    /// A refusal saying `why`.
    pub fn new(why: impl Into<String>) -> Refusal {
        Refusal(why.into())
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refusal {}
