//! # tools: the `fsprof` analysis command
//!
//! FSprof profiles count every file-system operation's latency, in CPU cycles, in log2 buckets;
//! the different execution paths of an operation (cache hit, disk read, lock contention) show as
//! separate peaks. This crate turns such profiles into answers (thesis §3.1, §3.2, §5.7, §5.8;
//! `docs/design.md#analysis`):
//!
//! | command | module | what it answers |
//! | --- | --- | --- |
//! | `fsprof show` | [`show`] | what each operation's latency looks like (terminal histograms, time-lapse matrix) |
//! | `fsprof summary` | [`summary`] | which operations take the time (thesis table 3.1) |
//! | `fsprof check` | [`check`] | whether a profile is consistent |
//! | `fsprof peaks` | [`peaks`] | how many execution paths each operation has, and how heavy each is |
//! | `fsprof compare` | [`compare`] | how different one operation is between two profiles (six methods) |
//! | `fsprof diff` | [`diff`] | which few operations changed between two profiles, and how |
//! | `fsprof plot` | [`plot`] | thesis-style figures (SVG, PNG, PDF) |
//! | `fsprof export` | [`export`] | the profile as text, JSON, CSV or Prometheus exposition |
//! | `fsprof merge` | [`merge`] | the sum of many machines' profiles |
//! | `fsprof top` | [`top`] | a live view of a mount or a `/metrics` endpoint |
//! | `fsprof profile` | [`profile`] | a directory's profile in one step (mount, workload, unmount), findings first ([`findings`]); with `--user`, the program's user level too |
//! | `fsprof report` | [`report`] | one self-contained HTML page: findings, histograms with peaks, time-lapse, tables |
//! | `fsprof run` | [`user_run`] | a program's C-library file-system calls (layer `user`), on any directory, with an optional trace |
//! | `fsprof trace show`, `stats` | [`trace`] | a trace listed like strace; Horikawa's measures of it |
//! | `fsprof replay` | [`replay`] | a trace re-executed against another directory |
//!
//! Inputs ([`input`]) are text profiles (versioned, or from the original tools), JSON profiles,
//! mount points of `fsprof-fuse` or `raif` (their `.fsprof.json`), URLs of their `--metrics`
//! endpoints or of served profiles ([`remote`]), or `-` for standard input.
//! The binary (`src/main.rs`) only parses flags into an [`app::Command`] and calls [`app::run`],
//! which hands it to the command's module (`fsprof profile` is [`profile`]).
//!
//! ```
//! use profile_store::{Layer, OpProfile, Resolution};
//! use tools::{compare, hist::Histogram, peaks, units::Buckets};
//!
//! // An operation with a fast path around bucket 10 and a slow one around bucket 20.
//! let mut op = OpProfile::new("OP_READ", 64, 1);
//! for (b, n) in [(9, 200), (10, 900), (11, 150), (19, 30), (20, 80)] {
//!     op.epochs[0][b] = n;
//! }
//! let geo = Buckets { resolution: Resolution::ONE, len: 64 };
//! let h = Histogram::of(&op, geo);
//! let found = peaks::find(&h, peaks::DEFAULT_PROMINENCE);
//! assert_eq!(found.iter().map(|p| p.mode).collect::<Vec<_>>(), [10, 20]);
//!
//! // Every call twice as slow: the earth mover's distance is one octave, 20 points.
//! let mut slower = vec![0; 64];
//! slower[10..=21].copy_from_slice(&h.counts[9..=20]);
//! let d = compare::emd(&h, &Histogram::from_counts(slower, geo));
//! assert!((d - 20.0).abs() < 1e-9);
//! ```
//!
//! Limitations: two profiles are compared layer by layer only at the same resolution (no
//! resampling); times need the clock rate (profiles of the original tools have none: give
//! `--cycles-per-sec`); peaks are found on the histogram summed over epochs; the GROUP methods'
//! and `diff`'s thresholds are heuristics after the thesis, to be tuned on real profiles; text in
//! PNG and PDF figures needs a system font (DejaVu Sans, or any sans-serif).
//!
//! The modules depend on each other in one direction only, from the bottom up: [`error`],
//! [`units`], [`background`], [`exposition`], [`select`], [`levels`], [`stats`], [`table`],
//! [`sys`], [`svg`], [`testutil`]; [`hist`], [`remote`]; [`input`], [`window`]; [`slow`],
//! [`pairs`], [`files`], [`check`], [`top`]; [`maxima`]; [`summary`], [`show`]; [`peaks`],
//! [`export`]; [`compare`], [`user_run`], [`findings`], [`stack`], [`merge`]; [`diff`], [`plot`],
//! [`trace`], [`replay`], [`why_block`]; [`report`], [`why`]; [`profile`]; [`no_mount`]; [`app`].

// `unsafe` only in `sys`: the signal mask a workload starts with.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod app;
pub mod background;
pub mod check;
pub mod compare;
pub mod diff;
pub mod error;
pub mod export;
pub mod exposition;
pub mod files;
pub mod findings;
pub mod hist;
pub mod input;
pub mod levels;
pub mod maxima;
pub mod merge;
pub mod no_mount;
pub mod pairs;
pub mod peaks;
pub mod plot;
pub mod profile;
pub mod remote;
pub mod replay;
pub mod report;
pub mod select;
pub mod show;
pub mod slow;
pub mod stack;
pub mod stats;
pub mod summary;
pub mod svg;
#[allow(unsafe_code)]
pub mod sys;
pub mod table;
pub mod top;
pub mod trace;
pub mod units;
pub mod user_run;
pub mod why;
pub mod why_block;
pub mod window;

#[cfg(test)]
mod testutil;

pub use app::{Command, run};
pub use error::Error;
pub use select::Common;
