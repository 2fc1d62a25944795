//! What the commands share: the clock-rate override every command takes ([`Common`]) and the
//! choice of a layer and its operations ([`Selection`]).

/// Settings every command shares.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Common {
    /// `--cycles-per-sec`: the clock rate for profiles without one (replaces a recorded one).
    pub cycles_per_sec: Option<u64>,
}

/// Which operations of a layer to look at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// `--layer`: a layer name; `None` for the primary layer (or, for two profiles, every layer
    /// both have).
    pub layer: Option<String>,
    /// `--op`: operation names (normalized to `OP_...`); empty for all.
    pub ops: Vec<String>,
    /// `--top`: at most this many operations, largest total latency first.
    pub top: Option<usize>,
}
