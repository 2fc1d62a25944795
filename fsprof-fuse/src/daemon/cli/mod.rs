//! Command-line options shared by the programs that mount and profile: `fsprof-fuse`, `raif`
//! and `fsprof profile`. One definition, so that they cannot drift:
//!
//! * [`RecordingArgs`]: what every one of them takes: how the profile is recorded
//!   ([`ProfileArgs`]), the request records ([`RecordArgs`]), how requests are served
//!   ([`ServeArgs`]) and cached ([`CacheArgs`]);
//! * [`DaemonArgs`] and [`ControlArgs`]: what only the two daemons take (background mode,
//!   logs, mount(8)'s options, the control files' names); [`mount_opts`] turns the `-o` lists
//!   that mount(8) and fstab give into their long options.
//!
//! The option structs live in [`record`] and [`serve`], their value parsers in [`values`];
//! (One-line usage errors, man pages and completions are every program's: `cli-support`;
//! the daemons' logger is [`crate::daemon::daemon_log`].)

pub mod mount_opts;
pub mod record;
pub mod serve_args;
pub mod values;

use clap::Args;

pub use record::{ProfileArgs, RecordArgs, check_recordable};
pub use serve_args::{CacheArgs, ControlArgs, DaemonArgs, ServeArgs};
pub use values::{secs, span_arg, time_arg};

/// The options of every program that records a profile (`fsprof-fuse`, `raif`, `fsprof
/// profile`), flattened into each one's arguments. A program that can record nothing (the
/// daemons' `--no-profile`) refuses the recording options with it.
#[derive(Args, Debug, Clone)]
pub struct RecordingArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub profile: ProfileArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub records: RecordArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub serve: ServeArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub cache: CacheArgs,
}

impl RecordingArgs {
    /// [`ServeArgs::settings`], with the kernel caches of [`CacheArgs`] (the transports answer
    /// negative lookups with them; the profile names the preset).
    pub fn settings(
        &self,
        mnt: std::path::PathBuf,
        fsname: String,
        subtype: &str,
    ) -> Result<crate::transport::MountSettings, crate::daemon::mount::SetupError> {
        let mut s = self.serve.settings(mnt, fsname, subtype)?;
        s.cache = self.cache.policy();
        Ok(s)
    }

    /// The ids of the options that ask for something to be recorded, for a `--no-profile`
    /// flag to conflict with.
    pub const RECORDING: [&'static str; 12] = [
        "epoch",
        "kernel",
        "syscalls",
        "slow",
        "slowest",
        "breakdown",
        "inject",
        "inject_file",
        "by",
        "hot_files",
        "metrics",
        "list_control",
    ];
}
