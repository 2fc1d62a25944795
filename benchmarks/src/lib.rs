//! # benchmarks
//!
//! Workloads for measuring file systems under fsprof, and a harness that runs them side by side.
//!
//! * A **Postmark-compatible generator** ([`session`], binary `fsprof-postmark`): Postmark 1.5's
//!   command loop (banner, prompts, `Eh?`, its `Error:` lines), command language, defaults,
//!   random-number generator ([`rng`]) and order of random draws ([`workload`]), so the same
//!   configuration and seed create, read, append and delete the same files with the same sizes
//!   as Debian's `postmark`, and its report ([`report`]) prints the same counts and byte totals
//!   (32-bit float sums included). On request: sub-second phase times, per-operation
//!   client-side latency percentiles ([`latency`]), JSON output, several concurrent clients,
//!   the client-side latencies as an fsprof profile (layer `client`), and a strict reading of
//!   the commands.
//! * A **benchmark harness** ([`harness`], binary `fsprof-bench`): named suites (Postmark shaped
//!   like the thesis's figures 6.1 and 9.2, metadata, grep, sequential and random reads,
//!   concurrent clients) against several targets (native directory, fsprof-fuse with and
//!   without profiling, RAIF, peer FUSE file systems), each on a fresh lower directory, with
//!   medians, ranges, ratios to the first target and the FUSE daemon's CPU time.
//!
//! ```
//! use benchmarks::session::{Options, Session};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let commands = format!(
//!     "set location {}\nset number 20\nset transactions 40\nset report terse\nrun\n",
//!     dir.path().display()
//! );
//! let options = Options { progress: false, strict: true, ..Options::default() };
//! let mut session = Session::new(options, Vec::new());
//! session.execute("doc", commands.as_bytes(), false).unwrap();
//! let run = &session.runs()[0];
//! assert_eq!(run.read + run.appended, 40);
//! assert_eq!(run.created, run.deleted);
//! ```
//!
//! Limitations: Postmark's `!` shell escape is not supported; a failed file operation ends the
//! run with an error naming the file (Postmark prints an error and goes on, reporting figures
//! that no longer mean much); directory names with spaces can be set as locations only with a
//! weight after them (as in Postmark, the last space separates the weight).
//!
//! The modules depend on each other in one direction only, from the bottom up: [`cli`], [`config`],
//! [`latency`], [`sys`], [`rng`]; [`command`], [`stdio`], [`harness`]; [`fileio`]; [`workload`];
//! [`report`]; [`session`].

#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod cli;
pub mod command;
pub mod config;
pub mod fileio;
pub mod harness;
pub mod latency;
pub mod report;
pub mod rng;
pub mod session;
pub mod stdio;
#[allow(unsafe_code)]
pub mod sys;
pub mod workload;
