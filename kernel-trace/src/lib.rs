//! # kernel-trace
//!
//! The kernel's side of a FUSE mount's requests, recorded from kernel tracepoints (the FUSE
//! ones through `perf_event_open`, the block ones through a private ftrace instance,
//! [`ftrace`], read page by page, [`ringbuf`]; no eBPF, no compiler, no kernel headers: the
//! build stays `cargo` alone) into the same log2 latency profiles as the daemon's own layers
//! (`docs/format.md#kernel-levels`):
//!
//! * layer `kernel`: FUSE's round trip per request, `fuse:fuse_request_send` →
//!   `fuse:fuse_request_end`, for one mount's connection, under the daemon's `OP_` names
//!   ([`fuse`]);
//! * layers `block@dev:NAME`: every request of each block device under the served directory,
//!   `block:block_rq_issue` → `block:block_rq_complete`, as `BLK_READ`, `BLK_WRITE_SYNC`...
//!   ([`block`], devices found by [`devices`]).
//!
//! [`preflight`] checks everything before a mount (tracefs, mounted where missing; the
//! tracepoints and their formats; the right to open them; the devices) and refuses in one
//! line; [`Plan::start`] opens the per-CPU rings and the ftrace instance (the block
//! tracepoints fall back to perf where it cannot be made); the [`Tracer`] is a profile
//! extension, drained before every snapshot, and [`Tracer::close`] removes the instance when
//! the mount ends.
//!
//! ```no_run
//! use std::sync::Arc;
//! use kernel_trace::{Excluded, devices::Dev, preflight};
//! use profile_store::{Profiler, RecorderConfig};
//!
//! let plan = preflight(&["/srv/data".as_ref()]).expect("kernel tracing");
//! // Started before the mount exists, so that no request is missed...
//! let tracer = plan
//!     .start(None, &["OP_LOOKUP", "OP_READ"], &RecorderConfig::default(), Arc::new(Excluded::default()))
//!     .unwrap();
//! // ... then told which connection is the mount's (its device number).
//! tracer.set_connection(Dev { major: 0, minor: 52 }).unwrap();
//! let profiler = Profiler::new(Vec::new());
//! profiler.extend(tracer);
//! ```
//!
//! Limitations: CPUs brought online after the start are not traced; FORGET and INTERRUPT
//! requests do not pass the send tracepoint, so the `kernel` layer never has them; tracing
//! needs root or CAP_PERFMON, and tracefs readable.
//!
//! The modules depend on each other in one direction only, from the bottom up: [`accounting`],
//! [`block`], [`mountinfo`], [`error`], [`sys`], [`fuse`]; [`devices`], [`tracefs`]; [`events`],
//! [`ringbuf`]; [`ftrace`]; [`plan`]; [`tracer`].

#![deny(unsafe_code)]
#![warn(missing_docs)]

mod accounting;
pub mod block;
pub mod devices;
mod error;
pub mod events;
pub mod ftrace;
pub mod fuse;
pub mod mountinfo;
mod plan;
pub mod ringbuf;
#[allow(unsafe_code)]
pub mod sys;
pub mod tracefs;
mod tracer;

pub use error::Refusal;
pub use plan::{Plan, online_cpus, preflight, preflight_block};
pub use tracer::{DRAIN_INTERVAL, Excluded, RING_PAGES, Tracer};
