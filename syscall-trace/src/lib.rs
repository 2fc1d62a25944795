//! # syscall-trace
//!
//! The application's own view, from the kernel: layer `syscall`, every file-system system call
//! timed in the kernel by a BPF program on the raw syscall tracepoints (`sys_enter` →
//! `sys_exit`), counted there in the profile's log2 buckets (the clock's cycles, the bucket
//! math of `profile-store`), per operation (the user layer's `SYS_` names, [`table`]), per
//! caller and per file; one event reaches user space only for a call over the slow threshold
//! or among the slowest (`docs/format.md#syscall-level`).
//!
//! Two scopes ([`Scope`]):
//!
//! * a mount (`--syscalls` on fsprof-fuse, raif and `fsprof profile`): calls of any process
//!   whose file is on the mount (its descriptor's file on the mount's superblock), or whose
//!   path resolves into it (absolute paths under the mount point; relative ones from a
//!   working directory or directory descriptor on the mount), the control files left out;
//! * processes (`fsprof profile --no-mount`): every call of a command and its descendants,
//!   followed in the kernel at fork, whatever file system they reach.
//!
//! The program is C with CO-RE (`bpf/syscalls.bpf.c`), compiled once by `bpf/build.sh` and
//! committed (`bpf/syscalls.bpf.o`, embedded), and loaded with aya ([`program`]), so `cargo
//! build` needs no C compiler. [`Tracer::start`] loads and attaches it, or refuses in one line
//! (no CAP_BPF/CAP_PERFMON, no tracepoint, no BTF); the tracer is a profile extension, read
//! at every snapshot; [`Tracer::close`] detaches it, and since every link is owned by a file
//! descriptor and nothing is pinned, nothing stays loaded after the process ends, however it
//! ends.
//!
//! ```no_run
//! use std::sync::Arc;
//! use syscall_trace::{Config, Scope, Tracer};
//! use profile_store::Profiler;
//!
//! let tracer = Tracer::start(Config::new(Scope::Processes), None).expect("BPF");
//! let profiler = Profiler::new(Vec::new());
//! profiler.extend(tracer.clone());
//! tracer.follow_next_child();
//! // ... spawn the command; its calls are counted from its exec on ...
//! ```
//!
//! The modules depend on each other in one direction only, from the bottom up: [`abi`],
//! [`refusal`], [`table`], [`sys`], [`records`]; [`names`], [`program`]; [`layers`]; [`tracer`].

#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod abi;
mod layers;
pub mod names;
pub mod program;
pub mod records;
mod refusal;
#[allow(unsafe_code)]
mod sys;
pub mod table;
mod tracer;

use std::path::PathBuf;

use profile_store::Resolution;

pub use records::{SlowRecord, SlowSink};
pub use refusal::{Refusal, preflight};
pub use tracer::Tracer;

/// The layer's name.
pub const LAYER: &str = "syscall";

/// Which calls are counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Calls on the mount at `mnt` of any process but this one (the daemon), once
    /// [`Tracer::set_mount`] has named its device.
    Mount {
        /// The mount point (absolute, as mounted).
        mnt: PathBuf,
        /// The control files' names at the mount's root (not counted).
        control_names: Vec<String>,
        /// Inode numbers at or above this on the mount are control files (0: none).
        control_ino_min: u64,
    },
    /// Every call of the followed processes ([`Tracer::follow_next_child`]) and their
    /// descendants.
    Processes,
}

/// The per-caller key of `--by`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum By {
    /// The calling thread's id.
    Pid,
    /// The caller's user id.
    Uid,
    /// The caller's command name.
    Comm,
}

/// What the syscall level records.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Which calls.
    pub scope: Scope,
    /// Buckets per octave.
    pub resolution: Resolution,
    /// One layer per caller as well (`syscall@comm:tar`...), the `by_max` callers with the
    /// most latency, the others in `syscall@other`.
    pub by: Option<By>,
    /// Most per-caller layers.
    pub by_max: usize,
    /// Keep the N hottest files (by latency and by calls).
    pub hot_files: Option<usize>,
    /// Send calls at least this slow (cycles) to the slow sink.
    pub slow_cycles: Option<u64>,
    /// Keep the N slowest calls (the `slowest` section).
    pub slowest: Option<usize>,
}

impl Config {
    /// Histograms only, at resolution 1.
    pub fn new(scope: Scope) -> Config {
        Config {
            scope,
            resolution: Resolution::ONE,
            by: None,
            by_max: 64,
            hot_files: None,
            slow_cycles: None,
            slowest: None,
        }
    }
}

/// Files the kernel's hot-file table holds (every file timed, up to this many; calls on
/// files beyond it are counted in `syscall_hot_full`).
pub const HOT_TABLE: u32 = 32_768;
/// Per-caller entries the kernel's table holds (callers × operations).
pub const KEYED_TABLE: u32 = 16_384;
