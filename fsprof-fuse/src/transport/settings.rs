//! What a mount is asked to be: the transport, the mount point and options, the serving
//! threads. A leaf: the transports and the mount lifecycle both read it.

use std::path::PathBuf;

use crate::toolkit::kernel_cache::CachePolicy;

/// Which transport serves a mount.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Transport {
    /// fuser over `/dev/fuse`.
    #[default]
    Classic,
    /// FUSE over io_uring, with `/dev/fuse` served beside it.
    Uring,
}

impl Transport {
    /// The name recorded in profiles (`transport=...`).
    pub fn name(self) -> &'static str {
        match self {
            Transport::Classic => "classic",
            Transport::Uring => "uring",
        }
    }
}

/// How the session mounts and serves.
#[derive(Debug, Clone)]
pub struct MountSettings {
    /// The mount point (absolute).
    pub mnt: PathBuf,
    /// Shown as the source in `/proc/mounts`.
    pub fsname: String,
    /// Subtype (`fuse.SUBTYPE` in `/proc/mounts`).
    pub subtype: String,
    /// Worker threads, each with its own `/dev/fuse` descriptor.
    pub threads: usize,
    /// Most threads serving requests at once (libfuse's `max_threads`): while every thread is
    /// busy (a slow lower call, an injected delay), one more starts, up to this many, and stays
    /// until unmount. On the classic transport in all (from `threads`), on the io_uring
    /// transport on each CPU's ring (from one).
    pub max_threads: usize,
    /// Let other users in (`allow_other`).
    pub allow_other: bool,
    /// Let `fusermount3` unmount if the daemon dies (needs fuse3; implies `allow_other`-style ACL
    /// of root).
    pub auto_unmount: bool,
    /// How requests are carried.
    pub transport: Transport,
    /// Serve the live profile to Prometheus at this address (`--metrics`).
    pub metrics: Option<std::net::SocketAddr>,
    /// Native histograms to scrapers that ask for protobuf (`--metrics-native`).
    pub metrics_native: bool,
    /// The bearer token that lets a scrape read everything and be served first
    /// (`--metrics-token-file`).
    pub metrics_token: Option<String>,
    /// Show the request records to other users, filtered for each (`--share-records`;
    /// `crate::layers::access`).
    pub share_records: bool,
    /// The kernel caches asked for: the transports answer a `LOOKUP` that fails with `ENOENT`
    /// with a negative entry for `negative_ttl`; the profile's header names the preset
    /// (`cache=...`). The file system replies with its own entry and attribute time-outs.
    pub cache: CachePolicy,
    /// The kernel's mount flags (mount(8)'s generic options, `-o ro,noexec...`).
    pub flags: KernelFlags,
}

/// The kernel flags of a mount: mount(8)'s generic options that a FUSE mount takes. The
/// default is what the daemons always mounted with: read-write, `nodev`, `nosuid`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KernelFlags {
    /// `ro`: the kernel refuses every change (`EROFS`) before the daemon sees it.
    pub read_only: bool,
    /// `dev`: device files are usable (root only).
    pub dev: bool,
    /// `suid`: set-user-ID and set-group-ID bits take effect (root only).
    pub suid: bool,
    /// `noexec`.
    pub noexec: bool,
    /// `noatime`.
    pub noatime: bool,
    /// `sync`: every write is synchronous.
    pub sync: bool,
    /// `dirsync`: directory changes are synchronous.
    pub dirsync: bool,
}

/// The default of [`MountSettings::max_threads`] (`--max-threads`), unless `threads` is more.
pub const DEFAULT_MAX_THREADS: usize = 32;

/// The most `--max-threads` (and `--threads`) can be.
pub const MAX_THREADS: usize = 1024;
