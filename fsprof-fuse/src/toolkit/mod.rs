//! The toolkit of the file systems (the passthrough and RAIF): what serving a FUSE file system
//! over lower directories needs besides the trait ([`crate::filesystem`]).
//!
//! * Lower calls: [`lower`] (timing each lower or branch system call under the request's
//!   operation, where injection rules act), [`dircursor`] (a lower directory read from any
//!   offset), [`buffer`] (per-thread buffers aligned for direct I/O), [`fdcache`] (the bounded,
//!   pinnable descriptor cache).
//! * Tables: [`sharded`] (maps split into shards) and [`handle_table`] (open handles by
//!   number).
//! * What the kernel is told: [`init_flags`] (what is asked at `INIT`), [`kernel_cache`] (the
//!   kernel-cache presets, `--cache`), [`attr`] (attributes served from lower `statx`),
//!   [`xattr_names`] (which extended-attribute names a caller sees), [`ioctl`] (the answer to
//!   `ioctl`).
//! * Acting for a user: [`create_as`] (creating with the caller's rights), [`caller`] (a user
//!   reading a control file, and what it may search).
//! * Users' input: [`glob`] (globs built without panicking), [`config_file`] (small TOML files
//!   read with a bound).

pub mod attr;
pub mod buffer;
pub mod caller;
pub mod config_file;
pub mod create_as;
pub mod dircursor;
pub mod fdcache;
pub mod glob;
pub mod handle_table;
pub mod init_flags;
pub mod ioctl;
pub mod kernel_cache;
pub mod lower;
pub mod sharded;
pub mod xattr_names;
