//! What the subcommands' options share: the context every command is configured in, the
//! layer and operation selection, a time-lapse window, and the checks of numeric options.

use clap::Args;

use profile_store::duration::Span;
use tools::Error;
use tools::background::Shares;
use tools::input::op_name;
use tools::select::Selection;
use tools::window::Window;

/// What every command is configured with besides its own options.
#[derive(Debug, Clone, Copy)]
pub struct Context {
    /// Colour in terminal output.
    pub color: bool,
    /// `--with-background`.
    pub shares: Shares,
    /// `--cycles-per-sec`.
    pub cycles_per_sec: Option<u64>,
}

#[derive(Args, Debug)]
pub struct SelectArgs {
    /// Layer (default: the first; for two profiles, every layer both have).
    #[arg(long)]
    layer: Option<String>,
    /// Operations to show (repeat or separate with commas; 'read' means OP_READ, 'sys_pread'
    /// the user-level SYS_PREAD).
    #[arg(long = "op", value_name = "OP", value_delimiter = ',')]
    ops: Vec<String>,
    /// Only the N operations with the largest total latency.
    #[arg(long, value_name = "N")]
    top: Option<usize>,
}

impl SelectArgs {
    pub fn into_selection(self) -> Selection {
        Selection {
            layer: self.layer,
            ops: self.ops.iter().map(|s| op_name(s)).collect(),
            top: self.top,
        }
    }
}

/// A window of a time-lapse profile.
#[derive(Args, Debug)]
pub struct WindowArgs {
    /// Only the epochs starting at or after this time since the profile's start (a duration
    /// with its unit: 2s, 500ms, or cycles as 2^32c). Totals of cut operations are then
    /// estimated from bucket mid-points.
    #[arg(long, value_name = "DURATION", value_parser = span)]
    from: Option<Span>,
    /// Only the epochs starting before this time since the profile's start (as --from).
    #[arg(long, value_name = "DURATION", value_parser = span)]
    to: Option<Span>,
    /// Leave out the epochs at both ends in which no call finished (idle time before and
    /// after the work).
    #[arg(long)]
    trim: bool,
}

impl WindowArgs {
    pub fn into_window(self) -> Window {
        Window {
            from: self.from,
            to: self.to,
            trim: self.trim,
        }
    }
}

/// A duration with its unit (`docs/format.md#durations`): a bare number is refused with its hint.
pub fn span(s: &str) -> Result<Span, String> {
    profile_store::duration::parse(s).map_err(|e| e.to_string())
}

pub fn time_arg(s: &str) -> Result<std::time::Duration, String> {
    profile_store::duration::parse_time(s).map_err(|e| e.to_string())
}

pub fn percent(flag: &str, v: f64) -> Result<f64, Error> {
    if (0.0..=100.0).contains(&v) {
        Ok(v / 100.0)
    } else {
        Err(Error::usage(
            flag,
            format!("{v} is not a percentage (0..100)"),
        ))
    }
}

pub fn non_negative(flag: &str, v: f64) -> Result<f64, Error> {
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(Error::usage(flag, format!("{v} must be a number >= 0")))
    }
}
