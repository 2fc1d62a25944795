//! # benchmarks
//!
//! Workloads for measuring file systems under fsprof, and a harness that runs them side by side.
//!
//! * A **Postmark-compatible generator** ([`session`], binary `fsprof-postmark`): Postmark 1.5's
//!   command language, defaults, random-number generator ([`rng`]) and order of random draws
//!   ([`workload`]), so the same configuration and seed create, read, append and delete the same
//!   files with the same sizes as Debian's `postmark`, and its report ([`report`]) prints the
//!   same counts and byte totals (32-bit float sums included). On top: sub-second phase times,
//!   per-operation client-side latency percentiles ([`latency`]), JSON output, several
//!   concurrent clients, and the client-side latencies as an fsprof profile (layer `client`).
//! * A **benchmark harness** ([`harness`], binary `fsprof-bench`): named suites (Postmark shaped
//!   like the thesis's figures 6.1 and 9.2, metadata, grep, sequential and random reads,
//!   concurrent clients) against several targets (native directory, fsprof-fuse with and
//!   without profiling, RAIF, peer FUSE file systems), each on a fresh lower directory, with
//!   medians, ranges, ratios to the first target and the FUSE daemon's CPU time.
//!
//! ```
//! use benchmarks::session::{Options, Session};
//!
//! let dir = std::env::temp_dir().join(format!("pm-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let commands = format!(
//!     "set location {}\nset number 20\nset transactions 40\nset report terse\nrun\n",
//!     dir.display()
//! );
//! let options = Options { progress: false, extras: false, ..Options::default() };
//! let mut session = Session::new(options, Vec::new());
//! session.execute("doc", commands.as_bytes()).unwrap();
//! let run = &session.runs()[0];
//! assert_eq!(run.read + run.appended, 40);
//! assert_eq!(run.created, run.deleted);
//! std::fs::remove_dir(&dir).unwrap();
//! ```
//!
//! Limitations: Postmark's `!` shell escape and its `.pmrc` start-up file are not supported;
//! where Postmark prints an error and carries on (bad setting, failed file operation), this
//! generator stops with the error; directory names with spaces cannot be set as locations (as
//! in Postmark).

#![warn(missing_docs)]

pub mod command;
pub mod config;
pub mod fileio;
pub mod harness;
pub mod latency;
pub mod report;
pub mod rng;
pub mod session;
pub mod stdio;
pub mod sys;
pub mod workload;
