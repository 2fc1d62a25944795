//! # user-trace
//!
//! The user level of fsprof (`docs/design.md#user-level`): runs a program with the `fsprof-preload`
//! library, which times its C-library file-system calls, and turns what the library recorded into a
//! profile (layer `user`, operations `SYS_...`) and, optionally, a trace of every call; reads
//! traces as streams, prints them like strace, derives Horikawa's measures from them, and replays
//! them against another directory (after ULTra).
//!
//! ```no_run
//! use user_trace::{RunConfig, run};
//!
//! let outcome = run(&RunConfig {
//!     command: vec!["ls".into(), "/tmp".into()],
//!     ..RunConfig::default()
//! })?;
//! println!("{} calls", outcome.profile.layers[0].total_count());
//! # Ok::<(), user_trace::Error>(())
//! ```
//!
//! Limitations: see the preload library's (statically linked programs are refused; direct
//! system calls and memory-mapped I/O are not seen).
//!
//! The modules depend on each other in one direction only, from the bottom up: [`abi`], [`error`],
//! [`sys`]; [`elf`], [`region`], [`trace`]; [`replay`], [`run`], [`show`], [`stats`].

#![deny(unsafe_code)]
#![warn(missing_docs)]

#[allow(missing_docs)]
#[path = "../../preload/src/abi.rs"]
pub mod abi;

pub mod elf;
mod error;
pub mod region;
pub mod replay;
pub mod run;
pub mod show;
pub mod stats;
mod sys;
pub mod trace;

pub use error::Error;
pub use region::{DrainStats, RegionStats};
pub use replay::{Refusal, Refused, ReplayConfig, ReplayReport, Timing, replay};
pub use run::{Prepared, RunConfig, RunOutcome, TraceOutcome, find_preload, prepare, run};
pub use show::{ShowConfig, ShowSummary, show};
pub use stats::{Measures, StatsConfig, TraceStats, stats};
