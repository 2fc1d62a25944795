//! The daemon's set-up, the top of the crate: what turns options into a mounted, profiled file
//! system and keeps it serving (shared by `fsprof-fuse` and `raif`).
//!
//! * [`cli`]: the command-line options shared by the programs that mount and profile.
//! * [`app`]: `fsprof-fuse`'s configuration, the stack of one mount, and the [`app::Daemon`]
//!   lifecycle.
//! * [`mount`]: checking the mount point, going to the background, serving until unmounted or
//!   signalled.
//! * [`kernel`]: `--kernel` and `--syscalls`, the kernel's layers of a mount.
//! * [`metrics`]: the `--metrics` endpoint.
//! * [`daemon_log`]: where a background daemon's log goes.
//! * [`setup`]: the one-line error of anything checked before a mount serves.

pub mod app;
pub mod cli;
pub mod daemon_log;
pub mod kernel;
pub mod metrics;
pub mod mount;
pub mod setup;
